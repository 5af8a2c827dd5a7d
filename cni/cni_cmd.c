// SPDX-License-Identifier: MIT
/* ib-sriov CNI plugin: failure reporting, locks and the teardown DEL and GC share. */
#include "cni_cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <ibvf/api.h>

#include "clock.h"
#include "cni_daemon.h"
#include "cni_ipam.h"
#include "cni_netns.h"
#include "cni_ops.h"
#include "cni_rdma.h"
#include "cni_result.h"
#include "cni_vf.h"
#include "log.h"
#include "release_spool.h"
#include "statedir.h"

int cni_failf(struct cni_ctx *ctx, int code, const char *msg, const char *fmt, ...)
{
	struct cni_fail *f = &ctx->fail;
	char body[sizeof(f->details)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(body, sizeof(body), fmt, ap);
	va_end(ap);
	f->code = code;
	snprintf(f->msg, sizeof(f->msg), "%s", msg);
	if (ctx->env.container_id && ctx->env.ifname)
		snprintf(f->details, sizeof(f->details),
			 "container %.64s ifname %.15s%s%.31s: %.1900s", ctx->env.container_id,
			 ctx->env.ifname, ctx->nc.device_id ? " VF " : "",
			 ctx->nc.device_id ? ctx->nc.device_id : "", body);
	else
		snprintf(f->details, sizeof(f->details), "%.2000s", body);
	log_err("%s: %s", f->msg, f->details);
	return -1;
}

void cni_steps_start(struct cni_steps *s)
{
	memset(s, 0, sizeof(*s));
	s->t0 = s->last = ibvf_mono_ns();
}

void cni_steps_mark(struct cni_steps *s, const char *name)
{
	uint64_t now = ibvf_mono_ns();
	unsigned i;

	if (!s->t0)
		return;
	for (i = 0; i < s->n && strcmp(s->name[i], name); i++)
		;
	if (i == s->n) {
		if (s->n < CNI_STEPS_MAX)
			s->name[s->n++] = name;
		else
			i = s->n - 1;
	}
	s->ns[i] += now - s->last;
	s->last = now;
}

void cni_steps_log(const struct cni_steps *s, const char *what)
{
	char buf[64 * CNI_STEPS_MAX + 64];
	size_t off = 0;

	if (!s->t0 || ibvf_log_level() < LOG_DEBUG)
		return;
	for (unsigned i = 0; i < s->n && off < sizeof(buf); i++)
		off += (size_t)snprintf(buf + off, sizeof(buf) - off, "\"%s\":%.3f,", s->name[i],
					(double)s->ns[i] / 1e6);
	if (off < sizeof(buf))
		snprintf(buf + off, sizeof(buf) - off, "\"total\":%.3f",
			 (double)(ibvf_mono_ns() - s->t0) / 1e6);
	log_debug("%s steps (ms): {%s}", what, buf);
}

const char *cni_lock_dir(void)
{
	const char *d = getenv("IBVF_CNI_LOCK_DIR");

	return d && *d ? d : "/var/run/cni/ib-sriov";
}

static int lock_file(const char *path, int op, char *err, size_t errlen)
{
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);

	if (fd < 0)
		return ibvf_errf(err, errlen, -errno, "lock %s: %s", path, strerror(errno));
	while (flock(fd, op)) {
		if (errno == EINTR)
			continue;
		ibvf_errf(err, errlen, -errno, "lock %s: %s", path, strerror(errno));
		close(fd);
		return -EIO;
	}
	return fd;
}

int cni_lock(const char *pci, bool exclusive_global, int fds[2], char *err, size_t errlen)
{
	const char *dir = cni_lock_dir();
	char path[PATH_MAX];
	int ret;

	fds[0] = fds[1] = -1;
	ret = ibvf_dir_prepare(dir, 0700, true, err, errlen);
	if (ret)
		return ret;
	snprintf(path, sizeof(path), "%s/cni.lock", dir);
	fds[0] = lock_file(path, exclusive_global ? LOCK_EX : LOCK_SH, err, errlen);
	if (fds[0] < 0)
		return fds[0];
	if (pci) {
		snprintf(path, sizeof(path), "%s/vf-%s.lock", dir, pci);
		fds[1] = lock_file(path, LOCK_EX, err, errlen);
		if (fds[1] < 0) {
			ret = fds[1];
			cni_unlock(fds);
			return ret;
		}
	}
	return 0;
}

void cni_unlock(int fds[2])
{
	for (int i = 1; i >= 0; i--) {
		if (fds[i] >= 0)
			close(fds[i]); /* closing the last fd drops the flock */
		fds[i] = -1;
	}
}

/* ------------------------------------------------------------ teardown -- */

struct td {
	struct cni_ctx *ctx;
	const struct cni_cache *c;
	int code;
	char first[IBVF_ERR_LEN * 2];
	bool staged; /* release.sm is out, its answer not read yet (td_stage()) */
};

__attribute__((format(printf, 3, 4))) static void td_fail(struct td *t, int code, const char *fmt,
							  ...)
{
	char msg[IBVF_ERR_LEN * 2];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_err("container %s ifname %s VF %s: %s", t->c->container_id, t->c->ifname,
		t->c->device_id, msg);
	if (!t->code) {
		t->code = code;
		snprintf(t->first, sizeof(t->first), "%s", msg);
	}
}

static void td_ipam(struct td *t, const char *conf_text, size_t conf_len, bool is_gc)
{
	struct cni_ctx *ctx = t->ctx;
	const struct cni_cache *c = t->c;
	char *own = NULL, err[IBVF_ERR_LEN];
	const char *type;
	json_t *conf = NULL;
	int ret;

	if (conf_text && conf_text == ctx->conf_text && ctx->nc.root)
		/* DEL: main() parsed this text already; only ipam.type is read */
		conf = json_incref(ctx->nc.root);
	else if (conf_text)
		conf = json_loadb(conf_text, conf_len, 0, NULL);
	else
		conf = json_incref(c->conf);
	type = json_string_value(json_object_get(json_object_get(conf, "ipam"), "type"));
	if (!type || !*type)
		goto out;
	if (!conf_text) {
		own = json_dumps(conf, JSON_COMPACT);
		if (!own) {
			td_fail(t, CNI_ERR_IPAM, "IPAM %s DEL: out of memory", type);
			goto out;
		}
	}
	{
		struct cni_ipam_call call = {
			.type = type,
			.cni_path = ctx->env.path,
			.command = "DEL",
			.container_id = is_gc ? c->container_id : NULL,
			.ifname = is_gc ? c->ifname : NULL,
			.netns = is_gc ? "" : NULL,
			.conf = own ? own : conf_text,
			.conf_len = own ? strlen(own) : conf_len,
		};

		ret = cni_host->ipam_exec(&call, NULL, err, sizeof(err));
		if (ret)
			td_fail(t, CNI_ERR_IPAM, "releasing the IP address: %s", err);
	}
out:
	free(own);
	json_decref(conf);
}

/* Is the netdev @l in the Pod the one @c describes? Fills @host_name from its alias if needed. */
static bool netdev_is_ours(const struct cni_cache *c, const struct cni_link *l, char *host_name)
{
	char pci[64] = "", host[CNI_IFNAME_LEN] = "";

	if (!strncmp(l->alias, CNI_ALIAS_PREFIX, strlen(CNI_ALIAS_PREFIX)))
		sscanf(l->alias + strlen(CNI_ALIAS_PREFIX), "%63s %15s", pci, host);
	if (!host_name[0])
		snprintf(host_name, CNI_IFNAME_LEN, "%s", host);
	if (pci[0])
		return !strcmp(pci, c->device_id);
	/* no mark: trust a cache entry (ib-sriov-cni's own trust rule), never a guess */
	return c->format >= 0;
}

static void td_netdev(struct td *t, struct cni_ns *host, struct cni_ns *pod)
{
	const struct cni_cache *c = t->c;
	char err[IBVF_ERR_LEN], host_name[CNI_IFNAME_LEN], final[CNI_IFNAME_LEN];
	struct cni_link l;
	int ret;

	ret = cni_host->link_get(pod, c->ifname, 0, &l, err, sizeof(err));
	if (ret == -ENODEV) {
		log_info("VF %s: no netdev %s in netns %s: nothing to move back", c->device_id,
			 c->ifname, pod->path);
		return;
	}
	if (ret) {
		td_fail(t, CNI_ERR_VF, "%s", err);
		return;
	}
	snprintf(host_name, sizeof(host_name), "%s", c->host_ifname);
	if (!netdev_is_ours(c, &l, host_name)) {
		log_warn("netdev %s in netns %s is not marked as VF %s (ifalias \"%s\"); left "
			 "alone",
			 c->ifname, pod->path, c->device_id, l.alias);
		return;
	}
	ret = cni_host->netdev_to_host(pod, host, c->ifname, host_name, final, err, sizeof(err));
	if (ret)
		td_fail(t, CNI_ERR_VF, "moving netdev %s back to the host netns: %s", c->ifname,
			err);
	else
		log_info("VF %s: netdev %s back in the host netns as %s", c->device_id, c->ifname,
			 final);
}

static void td_rdma(struct td *t, struct cni_ns *host, struct cni_ns *pod)
{
	const struct cni_cache *c = t->c;
	char err[IBVF_ERR_LEN];
	int ret = cni_host->rdma_dev_visible(pod, c->rdma_dev, err, sizeof(err));

	if (ret == 0) {
		log_info("VF %s: RDMA device %s is not in netns %s: nothing to move back",
			 c->device_id, c->rdma_dev, pod->path);
		return;
	}
	if (ret > 0)
		ret = cni_host->rdma_dev_move(pod, c->rdma_dev, host, err, sizeof(err));
	if (ret)
		td_fail(t, CNI_ERR_VF, "moving RDMA device %s back: %s", c->rdma_dev, err);
}

/*
 * ibvfd did not answer (down, restarting, not ready): leave a durable release
 * request in its spool (release_spool.h) that it applies when it starts or on
 * its next pass, and let DEL succeed, because a runtime such as Podman never
 * retries a failed DEL (issue 15 item 7). @why is the failed call's message.
 * Return: true when the request is on disk.
 */
static bool spool_release(const struct cni_cache *c, const char *socket, const char *why)
{
	struct ibvf_release_req r = {.guid = c->guid};
	char dir[PATH_MAX], err[IBVF_ERR_LEN], g[IBVF_GUID_STR_LEN];
	struct timespec ts;
	int ret;

	snprintf(r.container_id, sizeof(r.container_id), "%s", c->container_id);
	snprintf(r.ifname, sizeof(r.ifname), "%s", c->ifname);
	snprintf(r.network, sizeof(r.network), "%s", c->network);
	snprintf(r.device_id, sizeof(r.device_id), "%s", c->device_id);
	clock_gettime(CLOCK_REALTIME, &ts);
	r.created_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	ret = ibvf_spool_dir(socket, dir, sizeof(dir));
	if (!ret)
		ret = ibvf_spool_write(dir, &r, err, sizeof(err));
	else
		snprintf(err, sizeof(err), "spool path for %s too long", socket);
	if (ret) {
		log_err("VF %s: ibvfd did not answer (%s) and the release request could not be "
			"written: %s",
			c->device_id, why, err);
		return false;
	}
	log_warn("VF %s: ibvfd did not answer (%s): release of owner %s/%s (GUID %s) left in %s; "
		 "ibvfd applies it when it runs again",
		 c->device_id, why, c->container_id, c->ifname,
		 c->guid ? ibvf_guid_format(c->guid, g) : "unknown", dir);
	return true;
}

/* The owner ibvfd knows the attachment by (release, release.sm). */
static json_t *td_owner_json(const struct cni_cache *c)
{
	return cni_owner_new(c->container_id, c->ifname, NULL, NULL, NULL, c->network);
}

/*
 * Daemon mode, with a netdev to move back from the Pod: send "release.sm"
 * now and read its answer after the move (td_owner()), so ibvfd removes the
 * SM membership during the move (docs/api.md, "release.sm"; issue 17).
 * ibvfd touches no VF for it: the move does not race a rebind. A failure
 * here only means the plain release does everything, as it always did.
 */
static void td_stage(struct td *t)
{
	const struct cni_cache *c = t->c;
	const char *socket;
	char err[IBVF_ERR_LEN];
	struct cni_daemon_error de;
	json_t *owner;

	if (c->mode == CNI_MODE_COMPAT || c->vfio || !c->ifname[0] ||
	    ibvf_owner_reserved(c->container_id) || !cni_ibvfd->release_sm_send ||
	    !cni_ibvfd->release_sm_recv)
		return;
	cni_mode_select(&t->ctx->nc, &socket);
	owner = td_owner_json(c);
	if (owner && !cni_ibvfd->release_sm_send(socket, t->ctx->nc.ibvfd_timeout_ms, owner,
						 c->device_id, c->guid, &de, err, sizeof(err)))
		t->staged = true;
	else
		log_debug("VF %s: release.sm not sent (%s): the release does it all", c->device_id,
			  owner ? err : "out of memory");
	json_decref(owner);
}

/* The answer of td_stage()'s release.sm; the plain release follows whatever it says. */
static void td_stage_answer(struct td *t)
{
	const struct cni_cache *c = t->c;
	char err[IBVF_ERR_LEN];
	struct cni_daemon_error de;
	bool removed = false;
	int ret;

	if (!t->staged)
		return;
	t->staged = false;
	ret = cni_ibvfd->release_sm_recv(&removed, &de, err, sizeof(err));
	if (ret == -EREMOTEIO && de.rpc.code == IBVF_RPC_METHOD_NOT_FOUND)
		log_debug("VF %s: ibvfd does not know release.sm (an older ibvfd): the release "
			  "does it all",
			  c->device_id);
	else if (ret)
		log_debug("VF %s: release.sm failed (%s): the release does it all", c->device_id,
			  err);
	else
		log_debug("VF %s: release.sm answered, SM %s", c->device_id,
			  removed ? "seen without the GUID" : "removal not verified");
}

static void td_owner(struct td *t)
{
	struct cni_ctx *ctx = t->ctx;
	const struct cni_cache *c = t->c;
	const char *socket;
	char err[IBVF_ERR_LEN], g[IBVF_GUID_STR_LEN];
	struct cni_daemon_error de;
	bool released = false;
	json_t *owner;
	int ret;

	if (c->mode == CNI_MODE_COMPAT) {
		ret = cni_host->vf_restore(c, err, sizeof(err));
		if (ret)
			td_fail(t, CNI_ERR_VF, "restoring the VF: %s", err);
		return;
	}
	if (ibvf_owner_reserved(c->container_id)) {
		/*
		 * ibvfd refuses this owner at ADD (and at release: an error DEL
		 * would repeat forever), so it holds nothing for it (api.h)
		 */
		log_warn("VF %s: container ID %.64s starts with a prefix ibvfd reserves for its "
			 "own records: ibvfd holds nothing for it, nothing to release",
			 c->device_id, c->container_id);
		return;
	}
	cni_mode_select(&ctx->nc, &socket);
	owner = td_owner_json(c);
	/* with where it was: reaches a record adopted after a store loss (issue 14) */
	if (!owner)
		ret = -ENOMEM;
	else if (cni_ibvfd->release_at)
		ret = cni_ibvfd->release_at(socket, ctx->nc.ibvfd_timeout_ms, owner, c->device_id,
					    c->guid, &released, &de, err, sizeof(err));
	else
		ret = cni_ibvfd->release(socket, ctx->nc.ibvfd_timeout_ms, owner, &released, &de,
					 err, sizeof(err));
	json_decref(owner);
	if (ret && ret != -ENOMEM && de.cni_code == CNI_ERR_TRY_AGAIN &&
	    spool_release(c, socket, err))
		return;
	if (ret)
		td_fail(t, ret == -ENOMEM ? CNI_ERR_DAEMON : de.cni_code,
			"releasing GUID %s in ibvfd: %s",
			c->guid ? ibvf_guid_format(c->guid, g) : "(unknown)", err);
	else
		log_info("VF %s: ibvfd released owner %s/%s%s", c->device_id, c->container_id,
			 c->ifname, released ? "" : " (it held nothing)");
}

int cni_teardown(struct cni_ctx *ctx, struct cni_cache *c, const char *netns_path,
		 const char *conf_text, size_t conf_len, bool is_gc)
{
	struct td t = {.ctx = ctx, .c = c};
	struct cni_ns host = {.fd = -1}, pod = {.fd = -1};
	char err[IBVF_ERR_LEN];
	bool have_pod = false;
	int ret;

	td_ipam(&t, conf_text, conf_len, is_gc);
	cni_steps_mark(&ctx->steps, "ipam");
	if (netns_path && *netns_path) {
		ret = cni_host->ns_open(&pod, netns_path, err, sizeof(err));
		if (ret == -ENOENT || ret == -EINVAL)
			log_info("VF %s: netns %s is gone (%s): the kernel has returned its "
				 "devices to the host netns",
				 c->device_id, netns_path, err);
		else if (ret)
			td_fail(&t, CNI_ERR_VF, "%s", err);
		else
			have_pod = true;
	}
	if (have_pod) {
		ret = cni_host->ns_open(&host, NULL, err, sizeof(err));
		cni_steps_mark(&ctx->steps, "netns_open");
		if (ret) {
			td_fail(&t, CNI_ERR_VF, "%s", err);
		} else {
			td_stage(&t); /* the SM half of the release, during the move */
			if (t.staged)
				cni_steps_mark(&ctx->steps, "release_sm");
			if (!c->vfio && c->ifname[0])
				td_netdev(&t, &host, &pod);
			cni_steps_mark(&ctx->steps, "netdev_move");
			if (c->rdma_isolation && c->rdma_dev[0]) {
				td_rdma(&t, &host, &pod);
				cni_steps_mark(&ctx->steps, "rdma_move");
			}
		}
	}
	cni_host->ns_close(&pod);
	cni_host->ns_close(&host);
	cni_steps_mark(&ctx->steps, "netns_close");
	if (t.staged) {
		td_stage_answer(&t);
		cni_steps_mark(&ctx->steps, "release_sm_wait");
	}
	td_owner(&t);
	cni_steps_mark(&ctx->steps, c->mode == CNI_MODE_COMPAT ? "restore" : "release");
	if (t.code)
		return cni_failf(ctx, t.code, "failed to release the attachment", "%s", t.first);
	return 0;
}
