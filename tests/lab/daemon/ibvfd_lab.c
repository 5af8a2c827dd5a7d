// SPDX-License-Identifier: MIT
/* Harness for whole-daemon tests and benchmarks (see ibvfd_lab.h). */
#include "ibvfd_lab.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ibvf/types.h>

#include "evloop.h"
#include "vf_fake.h"

const char *lab_pci(int vf, char buf[16])
{
	/* 256 VFs per bus from 0000:05: (device <= 0x1f, or validation refuses it) */
	snprintf(buf, 16, "0000:%02x:%02x.%d", (0x05 + vf / 256) & 0xff, (vf / 8) % 32, vf % 8);
	return buf;
}

void lab_write_config(struct lab *l)
{
	FILE *f = fopen(l->cfg, "w");
	char sm[PATH_MAX + 2048];

	snprintf(sm, sizeof(sm),
		 "{\"backend\": \"%s\", \"module_dir\": \"%s\", \"periodic_update_s\": %u,"
		 " \"batch_window_ms\": %u, \"config\": %s}",
		 l->backend, l->moddir, l->periodic_s ? l->periodic_s : 1, l->window_ms,
		 l->backend_json);

	fprintf(f,
		"{\"state_dir\": \"%s\", \"run_dir\": \"%s/run\", \"log_level\": \"info\",\n"
		" \"pool\": {\"ranges\": [{\"start\": \"0x%016llx\", \"end\": \"0x%016llx\"}],"
		" \"quarantine_s\": 1, \"sync\": \"%s\"},\n"
		" \"sm\": %s,\n"
		" \"vf\": {\"driver\": \"fake\", \"fake_dir\": \"%s\", \"module_dir\": \"%s\","
		" \"warm\": %s},\n"
		" \"api\": {\"socket\": \"%s\"},\n"
		" \"daemon\": {\"stop_timeout_s\": 5, \"reconcile\": \"%s\"%s}}\n",
		l->state, l->dir, LAB_RANGE_START, LAB_RANGE_END,
		l->pool_sync[0] ? l->pool_sync : "normal", sm, l->vfdir,
		/* an A/B against another build's fake VF driver (bench_ibvfd) */
		getenv("IBVF_LAB_VF_MODULE_DIR") ? getenv("IBVF_LAB_VF_MODULE_DIR")
						 : IBVF_LAB_VF_MODULE_DIR,
		l->warm ? "true" : "false", l->sock, l->reconcile ? l->reconcile : "fix",
		l->daemon_extra);
	fclose(f);
}

int lab_init(struct lab *l, const char *ibvfd, int n_vfs, const char *backend, const char *moddir,
	     const char *backend_json)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char err[256], fj[512];

	memset(l, 0, sizeof(*l));
	l->ibvfd = ibvfd;
	l->n_vfs = n_vfs;
	snprintf(l->dir, sizeof(l->dir), "/tmp/ibvfd-lab-XXXXXX");
	if (!mkdtemp(l->dir))
		return -errno;
	snprintf(l->cfg, sizeof(l->cfg), "%s/ibvfd.json", l->dir);
	snprintf(l->sock, sizeof(l->sock), "%s/run/ibvfd.sock", l->dir);
	snprintf(l->smfile, sizeof(l->smfile), "%s/sm.members", l->dir);
	snprintf(l->failfile, sizeof(l->failfile), "%s/sm.down", l->dir);
	snprintf(l->vfdir, sizeof(l->vfdir), "%s/vfs", l->dir);
	snprintf(l->state, sizeof(l->state), "%s/state", l->dir);
	snprintf(l->notify, sizeof(l->notify), "%s/notify", l->dir);
	snprintf(l->log, sizeof(l->log), "%s/ibvfd.log", l->dir);
	mkdir(l->vfdir, 0700);
	for (int i = 0; i < n_vfs; i++) {
		char pci[16];

		if (ibvf_vf_fake_create(l->vfdir, lab_pci(i, pci), "ib0", i, 0, err, sizeof(err)))
			return -EIO;
	}
	if (!backend_json) {
		snprintf(fj, sizeof(fj), "{\"file\": \"%s\", \"fail_validate_file\": \"%s\"}",
			 l->smfile, l->failfile);
		backend_json = fj;
	}
	snprintf(l->backend, sizeof(l->backend), "%s", backend);
	snprintf(l->moddir, sizeof(l->moddir), "%s", moddir);
	snprintf(l->backend_json, sizeof(l->backend_json), "%s", backend_json);
	l->window_ms = 5;
	l->nfd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%.100s", l->notify);
	if (bind(l->nfd, (struct sockaddr *)&sa, sizeof(sa)))
		return -errno;
	lab_write_config(l);
	return 0;
}

bool lab_wait_notify(struct lab *l, const char *what, int ms)
{
	int64_t end = ibvf_mono_ms() + ms;

	for (;;) {
		struct pollfd p = {.fd = l->nfd, .events = POLLIN};
		char buf[512];
		int64_t left = end - ibvf_mono_ms();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			return false;
		n = recv(l->nfd, buf, sizeof(buf) - 1, 0);
		if (n <= 0)
			continue;
		buf[n] = 0;
		if (strstr(buf, what))
			return true;
	}
}

void lab_drain_notify(struct lab *l)
{
	char buf[512];

	while (recv(l->nfd, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
}

pid_t lab_start(struct lab *l, int timeout_ms)
{
	pid_t pid;

	lab_drain_notify(l);
	pid = fork();
	if (pid == 0) {
		int fd = open(l->log, O_WRONLY | O_CREAT | O_APPEND, 0600);

		dup2(fd, 2);
		dup2(fd, 1);
		setenv("NOTIFY_SOCKET", l->notify, 1);
		if (l->delay_ms)
			setenv("IBVF_FAKE_VF_DELAY_MS", l->delay_ms, 1);
		/* nothing of the test's above stderr: e.g. flock(1)'s lab lock, which
		 * an ibvfd outliving a crashed test would otherwise keep held */
		close_range(3, ~0U, 0);
		execl(l->ibvfd, "ibvfd", "-f", "-c", l->cfg, (char *)NULL);
		_exit(127);
	}
	l->pid = pid;
	if (!lab_wait_notify(l, "READY=1", timeout_ms)) {
		fprintf(stderr, "ibvfd did not report READY=1 (see %s)\n", l->log);
		return -1;
	}
	return pid;
}

int lab_stop(struct lab *l, int sig)
{
	int st = -1;

	if (l->pid <= 0)
		return -1;
	kill(l->pid, sig);
	for (int i = 0; i < 400; i++) {
		if (waitpid(l->pid, &st, WNOHANG) == l->pid) {
			l->pid = 0;
			return st;
		}
		usleep(25000);
	}
	kill(l->pid, SIGKILL);
	waitpid(l->pid, &st, 0);
	l->pid = 0;
	return -1;
}

void lab_fini(struct lab *l)
{
	char cmd[128];

	if (l->pid > 0)
		lab_stop(l, SIGKILL);
	close(l->nfd);
	if (getenv("IBVF_KEEP_LAB")) {
		fprintf(stderr, "lab kept in %s\n", l->dir);
		return;
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", l->dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", l->dir);
}

json_t *lab_owner(const char *cid)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:s}", "container_id", cid, "ifname", "net1",
			 "pod_namespace", "lab", "pod_name", cid, "network", "lab-net");
}

int lab_api(struct lab *l, const char *method, json_t *params, json_t **res,
	    struct ibvf_rpc_error *re, int timeout_ms)
{
	char err[512];
	json_t *r = NULL;
	int ret = ibvf_api_call(l->sock, method, params, timeout_ms, &r, re, err, sizeof(err));

	json_decref(params);
	if (res)
		*res = r;
	else
		json_decref(r);
	return ret;
}

int lab_prepare(struct lab *l, const char *cid, int vf, const char *pkey, json_t **res,
		struct ibvf_rpc_error *re)
{
	char pci[16];

	return lab_api(l, "prepare",
		       json_pack("{s:o,s:s,s:[{s:s,s:s}]}", "owner", lab_owner(cid), "pci",
				 lab_pci(vf, pci), "pkeys", "pkey", pkey ? pkey : "0x0012",
				 "membership", "full"),
		       res, re, 70000);
}

int lab_release(struct lab *l, const char *cid)
{
	return lab_api(l, "release", json_pack("{s:o}", "owner", lab_owner(cid)), NULL, NULL,
		       70000);
}

int lab_release_at(struct lab *l, const char *cid, int vf, uint64_t guid, json_t **res)
{
	char pci[16], g[IBVF_GUID_STR_LEN];
	json_t *p = json_pack("{s:o}", "owner", lab_owner(cid));

	if (vf >= 0)
		json_object_set_new(p, "pci", json_string(lab_pci(vf, pci)));
	if (guid)
		json_object_set_new(p, "guid", json_string(ibvf_guid_format(guid, g)));
	return lab_api(l, "release", p, res, NULL, 70000);
}

long lab_rss_kb(pid_t pid)
{
	char path[64], line[256];
	long kb = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld", &kb) == 1)
			break;
	fclose(f);
	return kb;
}

int lab_n_ok, lab_n_fail;

void lab_result(bool ok, const char *fmt, ...)
{
	va_list ap;

	printf("%s %d - ", ok ? "ok" : "not ok", lab_n_ok + lab_n_fail + 1);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	if (ok)
		lab_n_ok++;
	else
		lab_n_fail++;
}
