// SPDX-License-Identifier: MIT
/*
 * ibvfctl doctor: the runner, the file helpers relative to the root, and the
 * inventory every check shares (RDMA devices of /sys/class/infiniband with
 * their PCI parents, NVIDIA GPUs on the PCI bus).
 */
#include "doctor.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "doctor_int.h"
#include "err.h"

const char *ibvf_doctor_verdict_name(enum ibvf_doctor_verdict v)
{
	switch (v) {
	case IBVF_DOCTOR_OK:
		return "ok";
	case IBVF_DOCTOR_WARN:
		return "warn";
	case IBVF_DOCTOR_FAIL:
		return "fail";
	case IBVF_DOCTOR_NA:
		break;
	}
	return "not-applicable";
}

void dr_add(struct dr *d, const char *id, enum ibvf_doctor_verdict v, const char *fix,
	    const char *source, const char *fmt, ...)
{
	char ev[2048];
	va_list ap;
	json_t *o;

	va_start(ap, fmt);
	vsnprintf(ev, sizeof(ev), fmt, ap);
	va_end(ap);
	o = json_pack("{s:s, s:s, s:s, s:s?, s:s}", "id", id, "verdict",
		      ibvf_doctor_verdict_name(v), "evidence", ev, "fix",
		      v == IBVF_DOCTOR_OK || v == IBVF_DOCTOR_NA ? NULL : fix, "source", source);
	if (!o || json_array_append_new(d->checks, o))
		d->oom = 1;
}

static void __attribute__((format(printf, 3, 0)))
vpath(const struct dr *d, char *out, const char *fmt, va_list ap)
{
	const char *root = d->o->root;
	size_t n = strlen(root);
	char rel[DR_PATH];

	vsnprintf(rel, sizeof(rel), fmt, ap);
	while (n > 1 && root[n - 1] == '/')
		n--;
	if (n == 1 && root[0] == '/')
		n = 0;
	if (snprintf(out, DR_PATH, "%.*s%s", (int)n, root, rel) >= DR_PATH)
		out[0] = '\0'; /* too long: names nothing */
}

void dr_path(const struct dr *d, char *out, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vpath(d, out, fmt, ap);
	va_end(ap);
}

int dr_read(const struct dr *d, char *buf, size_t len, const char *fmt, ...)
{
	char path[DR_PATH];
	va_list ap;
	ssize_t n;
	int fd;

	va_start(ap, fmt);
	vpath(d, path, fmt, ap);
	va_end(ap);
	buf[0] = '\0';
	/* sysfs and procfs files are small; O_NONBLOCK: never wait on a FIFO */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return (int)n;
}

char *dr_read_alloc(const struct dr *d, const char *rel)
{
	size_t got = 0, cap = 4096;
	char path[DR_PATH], *buf;
	struct stat st;
	int fd;

	dr_path(d, path, "%s", rel);
	/* procfs files say st_size 0: read to EOF; never wait on a FIFO */
	fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return NULL;
	buf = fstat(fd, &st) || !S_ISREG(st.st_mode) ? NULL : malloc(cap);
	while (buf) {
		ssize_t n = read(fd, buf + got, cap - got - 1);

		if (n <= 0)
			break;
		got += (size_t)n;
		if (got + 1 == cap) {
			char *more = cap < (1u << 20) ? realloc(buf, cap * 2) : NULL;

			if (!more) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = more;
			cap *= 2;
		}
	}
	close(fd);
	if (buf)
		buf[got] = '\0';
	return buf;
}

bool dr_exists(const struct dr *d, const char *fmt, ...)
{
	char path[DR_PATH];
	struct stat st;
	va_list ap;

	va_start(ap, fmt);
	vpath(d, path, fmt, ap);
	va_end(ap);
	return lstat(path, &st) == 0;
}

int dr_link_base(const struct dr *d, char *out, size_t len, const char *fmt, ...)
{
	char path[DR_PATH], target[DR_PATH];
	const char *base;
	va_list ap;
	ssize_t n;

	va_start(ap, fmt);
	vpath(d, path, fmt, ap);
	va_end(ap);
	out[0] = '\0';
	n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = '\0';
	base = strrchr(target, '/');
	snprintf(out, len, "%s", base ? base + 1 : target);
	return 0;
}

bool dr_module_loaded(const struct dr *d, const char *name)
{
	char *mods = dr_read_alloc(d, "/proc/modules");
	size_t n = strlen(name);
	bool found = false;

	for (char *l = mods; l && *l && !found;) {
		char *nl = strchr(l, '\n');

		found = !strncmp(l, name, n) && l[n] == ' ';
		l = nl ? nl + 1 : NULL;
	}
	free(mods);
	/* a built-in module has /sys/module/<name> but no line in /proc/modules */
	return found || dr_exists(d, "/sys/module/%s", name);
}

/* "fe80:0000:0000:0000:0002:c903:0000:1234" -> the low 64 bits (the port GUID) */
static uint64_t gid_port_guid(const char *gid)
{
	uint64_t v = 0;
	int groups = 0;

	for (const char *p = gid; *p; p++) {
		if (*p == ':') {
			groups++;
			continue;
		}
		if (groups < 4)
			continue;
		v = v << 4 | (uint64_t)(*p <= '9' ? *p - '0' : (*p | 0x20) - 'a' + 10);
	}
	return v;
}

static void scan_dev(struct dr *d, const char *name)
{
	struct dr_dev *v = &d->devs[d->n_devs];
	char buf[256];

	memset(v, 0, sizeof(*v));
	if (snprintf(v->name, sizeof(v->name), "%s", name) >= (int)sizeof(v->name))
		return; /* longer than IB_DEVICE_NAME_MAX: not a device name */
	if (!dr_link_base(d, v->pci, sizeof(v->pci), "/sys/class/infiniband/%s/device", name)) {
		dr_link_base(d, v->driver, sizeof(v->driver), "/sys/bus/pci/devices/%s/driver",
			     v->pci);
		v->is_vf = !dr_link_base(d, v->pf_pci, sizeof(v->pf_pci),
					 "/sys/bus/pci/devices/%s/physfn", v->pci);
	}
	if (dr_read(d, buf, sizeof(buf), "/sys/class/infiniband/%s/ports/1/link_layer", name) > 0)
		v->ethernet = !strcmp(buf, "Ethernet");
	if (dr_read(d, buf, sizeof(buf), "/sys/class/infiniband/%s/ports/1/state", name) > 0)
		v->state = atoi(buf);
	if (dr_read(d, buf, sizeof(buf), "/sys/class/infiniband/%s/ports/1/gids/0", name) > 0)
		v->port_guid = gid_port_guid(buf);
	d->n_devs++;
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(((const struct dr_dev *)a)->name, ((const struct dr_dev *)b)->name);
}

static void inventory(struct dr *d)
{
	char path[DR_PATH], buf[64];
	struct dirent *e;
	DIR *dir;

	dr_path(d, path, "/sys/class/infiniband");
	dir = opendir(path);
	while (dir && (e = readdir(dir)) && d->n_devs < DR_MAX_DEVS)
		if (e->d_name[0] != '.')
			scan_dev(d, e->d_name);
	if (dir)
		closedir(dir);
	qsort(d->devs, d->n_devs, sizeof(d->devs[0]), name_cmp);

	dr_path(d, path, "/sys/bus/pci/devices");
	dir = opendir(path);
	while (dir && (e = readdir(dir))) {
		if (e->d_name[0] == '.' ||
		    dr_read(d, buf, sizeof(buf), "/sys/bus/pci/devices/%s/vendor", e->d_name) <=
			    0 ||
		    strcmp(buf, "0x10de"))
			continue;
		/* class 0x0300xx VGA, 0x0302xx 3D controller (data-centre GPUs) */
		if (dr_read(d, buf, sizeof(buf), "/sys/bus/pci/devices/%s/class", e->d_name) <= 0 ||
		    strncmp(buf, "0x03", 4))
			continue;
		if (strlen(e->d_name) >= sizeof(d->gpu_pci[0]))
			continue;
		if (d->n_gpus < 8)
			memcpy(d->gpu_pci[d->n_gpus], e->d_name, strlen(e->d_name) + 1);
		d->n_gpus++;
	}
	if (dir)
		closedir(dir);
}

int ibvf_doctor_run(const struct ibvf_doctor_opts *o, json_t **checks, char *err, size_t errlen)
{
	struct dr *d;
	struct stat st;

	if (stat(o->root, &st) || !S_ISDIR(st.st_mode))
		return ibvf_errf(err, errlen, -ENOENT, "--root %s: not a directory", o->root);
	d = calloc(1, sizeof(*d));
	if (!d || !(d->checks = json_array())) {
		free(d);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	d->o = o;
	inventory(d);
	dr_check_modules(d);
	dr_check_rdma_netns(d);
	dr_check_uverbs(d);
	dr_check_memlock(d);
	dr_check_sriov(d);
	dr_check_pci(d);
	dr_check_roce(d);
	dr_check_cdi(d);
	if (d->oom) {
		json_decref(d->checks);
		free(d);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	*checks = d->checks;
	free(d);
	return 0;
}
