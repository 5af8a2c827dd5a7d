// SPDX-License-Identifier: MIT
/* Program one VF: GUIDs, link state, rebind, wait; rollback; per-VF lock. */
#include "vf_manager.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <ibvf/types.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "statedir.h"

struct ibvf_vf_manager {
	char *sysfs_root;
	char *lock_dir;
	uint32_t rebind_timeout_ms;
	uint32_t lock_timeout_ms;
	uint32_t poll_ms;
	struct ibvf_vf_driver *drv;
};

static void sleep_ms(uint32_t ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

int ibvf_vf_manager_create(const struct ibvf_vf_manager_opts *o, struct ibvf_vf_driver *drv,
			   struct ibvf_vf_manager **out, char *err, size_t errlen)
{
	struct ibvf_vf_manager *m = calloc(1, sizeof(*m));
	int ret;

	if (!m || !(m->sysfs_root = strdup(o->sysfs_root)) ||
	    !(m->lock_dir = strdup(o->lock_dir))) {
		ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		goto fail;
	}
	ret = ibvf_dir_prepare(m->lock_dir, 0700, true, err, errlen);
	if (ret) {
		ibvf_err_prefix(err, errlen, ret, "VF lock directory");
		goto fail;
	}
	m->rebind_timeout_ms = o->rebind_timeout_ms ? o->rebind_timeout_ms : 5000;
	m->lock_timeout_ms = o->lock_timeout_ms ? o->lock_timeout_ms : 30000;
	m->poll_ms = o->poll_ms ? o->poll_ms : 20;
	m->drv = drv;
	*out = m;
	return 0;
fail:
	ibvf_vf_driver_destroy(drv);
	if (m) {
		free(m->sysfs_root);
		free(m->lock_dir);
	}
	free(m);
	return ret;
}

void ibvf_vf_manager_destroy(struct ibvf_vf_manager *m)
{
	if (!m)
		return;
	ibvf_vf_driver_destroy(m->drv);
	free(m->sysfs_root);
	free(m->lock_dir);
	free(m);
}

struct ibvf_vf_driver *ibvf_vf_manager_driver(struct ibvf_vf_manager *m)
{
	return m->drv;
}

/* ------------------------------------------------------------ locking -- */

static int lock_vf(struct ibvf_vf_manager *m, const char *pci, int *fd_out, char *err,
		   size_t errlen)
{
	char p[PATH_MAX];
	int64_t end = ibvf_mono_ms() + m->lock_timeout_ms;
	int fd;

	if (snprintf(p, sizeof(p), "%s/vf-%s.lock", m->lock_dir, pci) >= (int)sizeof(p))
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "lock path too long");
	fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return ibvf_errf(err, errlen, -errno, "VF lock %s: %s", p, strerror(errno));
	/* A new open file description per operation: flock conflicts between
	 * threads of one process as between processes. */
	while (flock(fd, LOCK_EX | LOCK_NB)) {
		if (errno != EWOULDBLOCK && errno != EINTR) {
			int e = errno;

			close(fd);
			return ibvf_errf(err, errlen, -e, "VF lock %s: %s", p, strerror(e));
		}
		if (ibvf_mono_ms() >= end) {
			close(fd);
			return ibvf_errf(err, errlen, -EBUSY,
					 "VF %s is being programmed by another operation (still "
					 "locked after %u ms: %s)",
					 pci, m->lock_timeout_ms, p);
		}
		sleep_ms(5);
	}
	*fd_out = fd;
	return 0;
}

static void unlock_vf(int fd)
{
	flock(fd, LOCK_UN);
	close(fd);
}

/* --------------------------------------------------------------- steps -- */

static int check_driver(const struct ibvf_vf_info *vf, char *err, size_t errlen)
{
	static const char *const passthrough[] = {"vfio-pci", "uio_pci_generic", "pci-stub",
						  "igb_uio", NULL};

	if (!vf->driver[0])
		return ibvf_errf(err, errlen, -EINVAL,
				 "VF %d (%s) of PF %s is not bound to a driver: bind it to its "
				 "kernel driver (%s) first",
				 vf->index, vf->pci, vf->pf_netdev[0] ? vf->pf_netdev : vf->pf_pci,
				 vf->pf_driver[0] ? vf->pf_driver : "the PF's");
	for (const char *const *p = passthrough; *p; p++)
		if (!strcmp(vf->driver, *p))
			return ibvf_errf(err, errlen, -EINVAL,
					 "VF %d (%s) of PF %s is bound to %s (device "
					 "pass-through): it has no netdev or RDMA device to hand "
					 "to a Pod; bind it to %s",
					 vf->index, vf->pci,
					 vf->pf_netdev[0] ? vf->pf_netdev : vf->pf_pci, vf->driver,
					 vf->pf_driver[0] ? vf->pf_driver : "its kernel driver");
	return 0;
}

/* Wait until @old's PCI device has a driver, a netdev and an RDMA device again. */
static int wait_back(struct ibvf_vf_manager *m, const struct ibvf_vf_info *old,
		     struct ibvf_vf_info *out, char *err, size_t errlen)
{
	int64_t start = ibvf_mono_ms(), end = start + m->rebind_timeout_ms;
	struct ibvf_vf_info cur;
	char e[IBVF_ERR_LEN] = "";

	for (;;) {
		if (!ibvf_pci_dev_exists(m->sysfs_root, old->pci))
			return ibvf_errf(err, errlen, -ENODEV,
					 "PF %s VF %d (%s) vanished during rebind", old->pf_netdev,
					 old->index, old->pci);
		memset(&cur, 0, sizeof(cur));
		if (!ibvf_vf_lookup(m->sysfs_root, old->pci, &cur, e, sizeof(e)) && cur.driver[0] &&
		    cur.netdev[0] && cur.rdma_dev[0]) {
			*out = cur;
			log_debug("PF %s VF %d (%s): back after %lld ms as netdev %s, RDMA device "
				  "%s",
				  cur.pf_netdev, cur.index, cur.pci,
				  (long long)(ibvf_mono_ms() - start), cur.netdev, cur.rdma_dev);
			return 0;
		}
		if (ibvf_mono_ms() >= end)
			break;
		sleep_ms(m->poll_ms);
	}
	return ibvf_errf(err, errlen, -ETIMEDOUT,
			 "PF %s VF %d (%s): timed out after %u ms waiting for it to come back "
			 "after rebind (driver %s, netdev %s, RDMA device %s%s%s)",
			 old->pf_netdev, old->index, old->pci, m->rebind_timeout_ms,
			 cur.driver[0] ? cur.driver : "none", cur.netdev[0] ? cur.netdev : "none",
			 cur.rdma_dev[0] ? cur.rdma_dev : "none", e[0] ? "; " : "", e);
}

static int rebind_and_wait(struct ibvf_vf_manager *m, const struct ibvf_vf_info *vf,
			   struct ibvf_vf_info *out, char *err, size_t errlen)
{
	int ret = m->drv->ops->rebind(m->drv, vf, vf->driver, m->rebind_timeout_ms, err, errlen);

	if (ret)
		return ret;
	return wait_back(m, vf, out, err, errlen);
}

/* What was done, for rollback. */
struct progress {
	bool node, port, link, rebind;
};

/* Append to a bounded text buffer. */
static void addf(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void addf(char *buf, size_t len, const char *fmt, ...)
{
	size_t n = strlen(buf);
	va_list ap;

	if (n + 1 >= len)
		return;
	va_start(ap, fmt);
	vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
}

static bool rb_guid(struct ibvf_vf_manager *m, const struct ibvf_vf_info *vf, enum ibvf_guid_kind k,
		    bool known, uint64_t g, char *done, char *fail, size_t len)
{
	char e[IBVF_ERR_LEN], s[IBVF_GUID_STR_LEN];

	if (!known) {
		addf(fail, len, "%s%s GUID before is unknown, not restored", *fail ? "; " : "",
		     ibvf_guid_kind_name(k));
		return false;
	}
	if (m->drv->ops->set_guid(m->drv, vf, k, g, e, sizeof(e))) {
		addf(fail, len, "%s%s", *fail ? "; " : "", e);
		return false;
	}
	addf(done, len, "%s%s GUID %s", *done ? ", " : "", ibvf_guid_kind_name(k),
	     ibvf_guid_format(g, s));
	return true;
}

/*
 * Undo the steps in @pg (reverse order), then rebind so the old GUIDs take
 * effect if a rebind had started. Appends the outcome to @err.
 */
static void rollback(struct ibvf_vf_manager *m, const struct ibvf_vf_info *vf,
		     const struct ibvf_vf_state *prev, const struct progress *pg, char *err,
		     size_t errlen)
{
	char done[IBVF_ERR_LEN] = "", fail[IBVF_ERR_LEN] = "", e[IBVF_ERR_LEN];
	struct ibvf_vf_info back;

	if (!pg->node && !pg->port && !pg->link && !pg->rebind) {
		addf(err, errlen, "; nothing was changed");
		return;
	}
	if (pg->link) {
		if (!prev->link_state_known)
			addf(fail, sizeof(fail), "link state before is unknown, not restored");
		else if (m->drv->ops->set_link_state(m->drv, vf, prev->link_state, e, sizeof(e)))
			addf(fail, sizeof(fail), "%s%s", *fail ? "; " : "", e);
		else
			addf(done, sizeof(done), "link state %s",
			     ibvf_vf_link_state_name(prev->link_state));
	}
	if (pg->port)
		rb_guid(m, vf, IBVF_GUID_PORT, prev->port_guid_known, prev->port_guid, done, fail,
			sizeof(done));
	if (pg->node)
		rb_guid(m, vf, IBVF_GUID_NODE, prev->node_guid_known, prev->node_guid, done, fail,
			sizeof(done));
	if (pg->rebind) {
		if (rebind_and_wait(m, vf, &back, e, sizeof(e)))
			addf(fail, sizeof(fail), "%srebind: %s", *fail ? "; " : "", e);
		else
			addf(done, sizeof(done), "%srebound (netdev %s)", *done ? ", " : "",
			     back.netdev);
	}
	if (*fail) {
		log_err("PF %s VF %d (%s): ROLLBACK FAILED: %s", vf->pf_netdev, vf->index, vf->pci,
			fail);
		addf(err, errlen, "; ROLLBACK FAILED: %s%s%s", fail, *done ? "; restored: " : "",
		     done);
	} else {
		log_warn("PF %s VF %d (%s): rolled back: %s", vf->pf_netdev, vf->index, vf->pci,
			 done);
		addf(err, errlen, "; rolled back: %s", done);
	}
}

/* The state before: what the driver reads back, completed by the caller's record. */
static void state_before(struct ibvf_vf_manager *m, const struct ibvf_vf_info *vf,
			 const struct ibvf_vf_state *rec, struct ibvf_vf_state *st)
{
	const struct ibvf_vf_info *one = vf;
	char e[IBVF_ERR_LEN];

	memset(st, 0, sizeof(*st));
	if (m->drv->ops->read_back(m->drv, &one, 1, st, e, sizeof(e))) {
		memset(st, 0, sizeof(*st));
		log_warn("PF %s VF %d (%s): cannot read back the state before programming, "
			 "rollback relies on the caller's record: %s",
			 vf->pf_netdev, vf->index, vf->pci, e);
	}
	if (!rec)
		return;
	if (!st->node_guid_known && rec->node_guid_known) {
		st->node_guid_known = true;
		st->node_guid = rec->node_guid;
	}
	if (!st->port_guid_known && rec->port_guid_known) {
		st->port_guid_known = true;
		st->port_guid = rec->port_guid;
	}
	if (!st->link_state_known && rec->link_state_known) {
		st->link_state_known = true;
		st->link_state = rec->link_state;
	}
}

static int run_steps(struct ibvf_vf_manager *m, const struct ibvf_vf_info *vf,
		     const struct ibvf_vf_request *req, struct progress *pg,
		     struct ibvf_vf_info *out, char *err, size_t errlen)
{
	const struct ibvf_vf_driver_ops *ops = m->drv->ops;
	int ret;

	ret = ops->set_guid(m->drv, vf, IBVF_GUID_NODE, req->node_guid, err, errlen);
	if (ret)
		return ret;
	pg->node = true;
	ret = ops->set_guid(m->drv, vf, IBVF_GUID_PORT, req->port_guid, err, errlen);
	if (ret)
		return ret;
	pg->port = true;
	if (req->link_state >= 0) {
		ret = ops->set_link_state(m->drv, vf, (enum ibvf_vf_link_state)req->link_state, err,
					  errlen);
		if (ret)
			return ret;
		pg->link = true;
	}
	*out = *vf;
	if (!req->rebind)
		return 0;
	pg->rebind = true;
	return rebind_and_wait(m, vf, out, err, errlen);
}

static int do_program(struct ibvf_vf_manager *m, const char *pci, const struct ibvf_vf_request *req,
		      bool allow_zero, struct ibvf_vf_info *out, char *err_in, size_t errlen_in)
{
	char n[IBVF_GUID_STR_LEN], p[IBVF_GUID_STR_LEN], ebuf[IBVF_ERR_LEN];
	char lpci[IBVF_PCI_ADDR_LEN];
	char *err = err_in ? err_in : ebuf; /* rollback appends to it */
	size_t errlen = err_in ? errlen_in : sizeof(ebuf);
	struct ibvf_vf_state before;
	struct progress pg = {0};
	struct ibvf_vf_info vf;
	int fd = -1, ret;

	ibvf_guid_format(req->node_guid, n);
	ibvf_guid_format(req->port_guid, p);
	if (!allow_zero &&
	    (!ibvf_guid_is_assignable(req->node_guid) || !ibvf_guid_is_assignable(req->port_guid)))
		return ibvf_errf(err, errlen, -EINVAL,
				 "VF %s: %s GUID %s is not assignable (0 and all-ones are "
				 "invalid: an SM gives no LID to a zero port GUID)",
				 pci, ibvf_guid_is_assignable(req->node_guid) ? "port" : "node",
				 ibvf_guid_is_assignable(req->node_guid) ? p : n);
	if (req->link_state < -1 || req->link_state > IBVF_VF_LINK_DISABLE)
		return ibvf_errf(err, errlen, -EINVAL, "VF %s: bad link state %d", pci,
				 req->link_state);
	ret = ibvf_pci_addr_parse(pci, lpci, err, errlen); /* one lock per VF, any case */
	if (ret)
		return ret;
	pci = lpci;
	ret = lock_vf(m, pci, &fd, err, errlen);
	if (ret)
		return ret;
	ret = ibvf_vf_lookup(m->sysfs_root, pci, &vf, err, errlen);
	if (!ret)
		ret = check_driver(&vf, err, errlen);
	if (ret)
		goto out;
	state_before(m, &vf, req->prev, &before);
	log_info("PF %s VF %d (%s): programming node GUID %s, port GUID %s%s%s (driver %s)",
		 vf.pf_netdev, vf.index, vf.pci, n, p, req->link_state >= 0 ? ", link state " : "",
		 req->link_state >= 0 ? ibvf_vf_link_state_name(req->link_state) : "",
		 m->drv->ops->name);
	ret = run_steps(m, &vf, req, &pg, out, err, errlen);
	if (ret) {
		log_err("PF %s VF %d (%s) port GUID %s: %s", vf.pf_netdev, vf.index, vf.pci, p,
			err);
		rollback(m, &vf, &before, &pg, err, errlen);
	} else {
		log_info("PF %s VF %d (%s): node GUID %s, port GUID %s programmed%s%s",
			 vf.pf_netdev, vf.index, vf.pci, n, p, req->rebind ? "; netdev " : "",
			 req->rebind ? out->netdev : "");
	}
out:
	unlock_vf(fd);
	return ret;
}

int ibvf_vf_program(struct ibvf_vf_manager *m, const char *pci, const struct ibvf_vf_request *req,
		    struct ibvf_vf_info *out, char *err, size_t errlen)
{
	return do_program(m, pci, req, false, out, err, errlen);
}

int ibvf_vf_reset(struct ibvf_vf_manager *m, const char *pci, struct ibvf_vf_info *out, char *err,
		  size_t errlen)
{
	return ibvf_vf_reset_link(m, pci, -1, out, err, errlen);
}

int ibvf_vf_reset_link(struct ibvf_vf_manager *m, const char *pci, int link_state,
		       struct ibvf_vf_info *out, char *err, size_t errlen)
{
	struct ibvf_vf_request req = {
		.node_guid = 0, .port_guid = 0, .link_state = link_state, .rebind = true};

	return do_program(m, pci, &req, true, out, err, errlen);
}

int ibvf_vf_request_make(uint64_t node, uint64_t port, const char *link,
			 struct ibvf_vf_request *req, bool *reset, char *err, size_t errlen)
{
	*req = (struct ibvf_vf_request){
		.node_guid = node, .port_guid = port, .link_state = -1, .rebind = true};
	*reset = !node && !port;
	if (link && *link) {
		enum ibvf_vf_link_state ls;
		int ret = ibvf_vf_link_state_parse(link, &ls, err, errlen);

		if (ret)
			return ret;
		req->link_state = (int)ls;
	}
	return 0;
}

int ibvf_vf_query(struct ibvf_vf_manager *m, const char *pci, struct ibvf_vf_info *vf,
		  struct ibvf_vf_state *st, char *err, size_t errlen)
{
	const struct ibvf_vf_info *one = vf;
	char e[IBVF_ERR_LEN];
	int ret = ibvf_vf_lookup(m->sysfs_root, pci, vf, err, errlen);

	memset(st, 0, sizeof(*st));
	if (ret)
		return ret;
	if (m->drv->ops->read_back(m->drv, &one, 1, st, e, sizeof(e))) {
		memset(st, 0, sizeof(*st));
		log_warn("PF %s VF %d (%s): %s", vf->pf_netdev, vf->index, vf->pci, e);
	}
	return 0;
}
