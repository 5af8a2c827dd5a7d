// SPDX-License-Identifier: MIT
/*
 * ib-sriov CNI plugin: the VF behind "deviceID" (through the sysfs
 * inventory, daemon/vf/vf_inventory.h), compatibility-mode GUID and link
 * state programming (through its VF manager, vf_manager.h), and the port
 * check CHECK runs.
 */
#include "cni_vf.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cni_cache.h"
#include "cni_netns.h"
#include "config.h"
#include "err.h"
#include "log.h"
#include "vf_driver.h"
#include "vf_inventory.h"
#include "vf_manager.h"

/* snprintf for paths: -ENAMETOOLONG instead of a silently cut path. */
__attribute__((format(printf, 3, 4))) static int pathf(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

const char *cni_sysfs_root(void)
{
	const char *r = getenv("IBVF_SYSFS_ROOT");

	return r && *r ? r : "/sys";
}

/* Fill @vf from the inventory (ibvf_vf_lookup); a PF only gets its driver. */
static int lookup(const char *pci, struct cni_vf *vf, char *err, size_t errlen)
{
	const char *root = cni_sysfs_root();
	struct ibvf_vf_info info;
	char path[PATH_MAX];
	int ret;

	memset(vf, 0, sizeof(*vf));
	vf->vf_index = -1;
	snprintf(vf->pci, sizeof(vf->pci), "%s", pci);
	ret = ibvf_vf_lookup(root, pci, &info, err, errlen);
	if (!ret) {
		vf->is_vf = true;
		vf->vf_index = info.index;
		snprintf(vf->pf_pci, sizeof(vf->pf_pci), "%s", info.pf_pci);
		snprintf(vf->pf_netdev, sizeof(vf->pf_netdev), "%s", info.pf_netdev);
		snprintf(vf->netdev, sizeof(vf->netdev), "%s", info.netdev);
		snprintf(vf->rdma_dev, sizeof(vf->rdma_dev), "%s", info.rdma_dev);
		snprintf(vf->driver, sizeof(vf->driver), "%s", info.driver);
		return 0;
	}
	if (ret != -EINVAL || !ibvf_pci_dev_exists(root, pci))
		return ret;
	/* not a VF: a PF, usable only when passed through with vfio-pci */
	if (!ibvf_pci_dev_path(root, pci, "driver", path, sizeof(path)))
		ibvf_sysfs_link_base(path, vf->driver, sizeof(vf->driver));
	return 0;
}

int cni_vf_lookup(const char *pci, struct cni_vf *vf, char *err, size_t errlen)
{
	return lookup(pci, vf, err, errlen);
}

/*
 * The VF's netdev and RDMA device now, from its own sysfs directory
 * (ibvf_vf_reread()): the names a rebind or an RDMA device move re-creates,
 * without the PF part of a lookup that cni_vf_lookup() did once (issue 17).
 * A device that is no VF has neither (as lookup() gives a PF).
 */
static int reread(const char *pci, unsigned what, struct ibvf_vf_info *info, char *err,
		  size_t errlen)
{
	int ret;

	memset(info, 0, sizeof(*info));
	if (snprintf(info->pci, sizeof(info->pci), "%s", pci) >= (int)sizeof(info->pci))
		return ibvf_errf(err, errlen, -EINVAL, "\"%s\" is not a PCI address", pci);
	ret = ibvf_vf_reread(cni_sysfs_root(), info, what, err, errlen);
	if (ret == -EINVAL && ibvf_pci_dev_exists(cni_sysfs_root(), info->pci))
		ret = 0; /* not a VF: no names */
	return ret;
}

int cni_vf_netdev(const char *pci, char *name, char *err, size_t errlen)
{
	struct ibvf_vf_info info;
	int ret = reread(pci, IBVF_REREAD_NETDEV, &info, err, errlen);

	if (ret)
		return ret;
	if (!info.netdev[0])
		return ibvf_errf(err, errlen, -ENODEV, "VF %s has no netdev in this netns", pci);
	snprintf(name, CNI_IFNAME_LEN, "%s", info.netdev);
	return 0;
}

int cni_vf_rdma_dev(const char *pci, char *name, size_t len, char *err, size_t errlen)
{
	struct ibvf_vf_info info;
	int ret = reread(pci, IBVF_REREAD_RDMA, &info, err, errlen);

	if (ret)
		return ret;
	if (!info.rdma_dev[0])
		return ibvf_errf(err, errlen, -ENODEV, "VF %s has no RDMA device", pci);
	snprintf(name, len, "%s", info.rdma_dev);
	return 0;
}

/* ------------------------------------------------- compatibility mode -- */

/*
 * The VF manager does the GUID programming, rebind and rollback. Its VF
 * driver and rebind timeout come from the node's ibvfd configuration when
 * there is one ($IBVF_CONFIG, else /etc/ibvf/ibvfd.json if present: e.g.
 * the ibsim lab driver), else the netlink driver; its per-VF locks are
 * ibvfctl's (<run_dir>/vf-locks), so an admin's `ibvfctl vf set-guid` never
 * interleaves with the plugin.
 */
static int manager_open(struct ibvf_vf_manager **m, char *err, size_t errlen)
{
	const char *path = getenv("IBVF_CONFIG"), *lock_env = getenv("IBVF_CNI_LOCK_DIR");
	struct ibvf_vf_manager_opts o = {.sysfs_root = cni_sysfs_root()};
	struct ibvf_vf_driver *drv = NULL;
	struct ibvf_config cfg;
	char locks[PATH_MAX];
	int ret;

	ret = ibvf_config_load(&cfg, path && *path ? path : NULL, path && *path, NULL, err, errlen);
	if (ret)
		return ret;
	ret = pathf(locks, sizeof(locks), "%s/vf-locks",
		    lock_env && *lock_env ? lock_env : cfg.run_dir);
	if (!ret) {
		free(cfg.sysfs_root);
		cfg.sysfs_root = strdup(o.sysfs_root);
		ret = cfg.sysfs_root ? ibvf_config_vf_driver_create(&cfg, &drv, err, errlen)
				     : -ENOMEM;
	}
	o.lock_dir = locks;
	o.rebind_timeout_ms = cfg.vf.rebind_timeout_ms;
	if (!ret)
		ret = ibvf_vf_manager_create(&o, drv, m, err, errlen);
	ibvf_config_free(&cfg);
	return ret;
}

static int set_link_state(struct ibvf_vf_manager *m, const char *pci, int ls, char *err,
			  size_t errlen)
{
	struct ibvf_vf_driver *d = ibvf_vf_manager_driver(m);
	struct ibvf_vf_info info;
	int ret = ibvf_vf_lookup(cni_sysfs_root(), pci, &info, err, errlen);

	if (!ret)
		ret = d->ops->set_link_state(d, &info, (enum ibvf_vf_link_state)ls, err, errlen);
	return ret;
}

int cni_vf_guid(const struct cni_vf *vf, uint64_t *guid, bool *known, char *err, size_t errlen)
{
	struct ibvf_vf_manager *m = NULL;
	struct ibvf_vf_info now;
	struct ibvf_vf_state st;
	int ret;

	*guid = 0;
	*known = false;
	ret = manager_open(&m, err, errlen);
	if (ret)
		return ret;
	ret = ibvf_vf_query(m, vf->pci, &now, &st, err, errlen);
	if (!ret && st.port_guid_known) {
		*guid = st.port_guid;
		*known = true;
	}
	ibvf_vf_manager_destroy(m);
	return ret;
}

int cni_vf_compat_apply(const struct cni_vf *vf, enum cni_link_state ls, bool set_guid,
			uint64_t guid, uint64_t present_guid, char prev_guid[24], char *err,
			size_t errlen)
{
	struct ibvf_vf_request req = {.node_guid = guid, .port_guid = guid, .rebind = true};
	struct ibvf_vf_manager *m = NULL;
	struct ibvf_vf_info now, out;
	struct ibvf_vf_state st;
	char g[IBVF_GUID_STR_LEN];
	int ret;

	prev_guid[0] = 0;
	if (ls == CNI_LINK_STATE_UNSET && !set_guid)
		return 0;
	ret = manager_open(&m, err, errlen);
	if (ret)
		return ret;
	if (!set_guid) {
		ret = set_link_state(m, vf->pci, ls, err, errlen);
		goto out;
	}
	/* what to put back on DEL: the driver's read-back, else the netdev's address */
	ret = ibvf_vf_query(m, vf->pci, &now, &st, err, errlen);
	if (ret)
		goto out;
	if (st.port_guid_known)
		present_guid = st.port_guid;
	snprintf(prev_guid, 24, "%s", ibvf_guid_format(present_guid, g));
	req.link_state = ls == CNI_LINK_STATE_UNSET ? -1 : (int)ls;
	req.prev = &st;
	ret = ibvf_vf_program(m, vf->pci, &req, &out, err, errlen);
	if (ret)
		prev_guid[0] = 0;
	else
		log_info("VF %s (PF %s VF %d): GUID %s set and rebound; netdev now %s", vf->pci,
			 vf->pf_netdev, vf->vf_index, ibvf_guid_format(guid, g), out.netdev);
out:
	ibvf_vf_manager_destroy(m);
	return ret;
}

/* After a rebind the kernel names the netdev afresh: give it its host name back. */
static void restore_name(const struct cni_cache *c, const char *now)
{
	char err[IBVF_ERR_LEN] = "";
	struct cni_ns host;
	struct cni_link l;

	if (!c->host_ifname[0] || !now[0] || !strcmp(now, c->host_ifname))
		return;
	if (cni_ns_open(&host, NULL, err, sizeof(err)) ||
	    cni_link_get(&host, now, 0, &l, err, sizeof(err)) ||
	    cni_link_set(&host, l.ifindex, c->host_ifname, -1, NULL, err, sizeof(err)))
		log_warn("VF %s: keeping netdev name %s after the rebind: %s", c->device_id, now,
			 err);
	cni_ns_close(&host);
}

int cni_vf_restore(const struct cni_cache *c, char *err, size_t errlen)
{
	struct ibvf_vf_manager *m = NULL;
	struct ibvf_vf_info out = {0};
	uint64_t prev = 0;
	int ret;

	if (c->link_state == CNI_LINK_STATE_UNSET && !c->prev_guid[0])
		return 0;
	if (c->prev_guid[0] && ibvf_guid_parse(c->prev_guid, &prev, err, errlen))
		return -EINVAL;
	ret = manager_open(&m, err, errlen);
	if (ret)
		return ret;
	/* link state back to auto only when ADD set one (ib-sriov-cni ResetVFConfig) */
	if (c->link_state != CNI_LINK_STATE_UNSET)
		ret = set_link_state(m, c->device_id, IBVF_VF_LINK_AUTO, err, errlen);
	if (!ret && c->prev_guid[0]) {
		if (ibvf_guid_is_assignable(prev)) {
			struct ibvf_vf_request req = {.node_guid = prev,
						      .port_guid = prev,
						      .link_state = -1,
						      .rebind = true};

			ret = ibvf_vf_program(m, c->device_id, &req, &out, err, errlen);
		} else {
			/* ib-sriov-cni writes all-ones here; the VF manager resets to GUID 0 */
			ret = ibvf_vf_reset(m, c->device_id, &out, err, errlen);
		}
		if (!ret)
			restore_name(c, out.netdev);
	}
	ibvf_vf_manager_destroy(m);
	return ret;
}

/* ---------------------------------------------------------- port check -- */

/* The check itself, in whatever netns/mount namespace we are in. */
static int port_check_here(const char *root, const char *dev, const struct cni_pkey *pkeys,
			   size_t n_pkeys, char *err, size_t errlen)
{
	char path[PATH_MAX], buf[64];
	bool found[CNI_MAX_PKEYS] = {false};
	struct dirent *de;
	DIR *d;
	int ret;

	ret = pathf(path, sizeof(path), "%s/class/infiniband/%s/ports/1/state", root, dev);
	if (!ret)
		ret = ibvf_sysfs_read_str(path, buf, sizeof(buf));
	if (ret)
		return ibvf_errf(err, errlen, ret, "RDMA device %s: reading %s: %s", dev, path,
				 strerror(-ret));
	if (!strstr(buf, "ACTIVE"))
		return ibvf_errf(err, errlen, -ENETDOWN, "RDMA device %s port 1 is %s, not ACTIVE",
				 dev, buf);
	d = pathf(path, sizeof(path), "%s/class/infiniband/%s/ports/1/pkeys", root, dev)
		    ? NULL
		    : opendir(path);
	if (!d)
		return n_pkeys ? ibvf_errf(err, errlen, -errno, "RDMA device %s: %s: %s", dev, path,
					   strerror(errno))
			       : 0;
	while ((de = readdir(d))) {
		char f[PATH_MAX];
		unsigned long v;
		char *end;

		if (de->d_name[0] == '.' || pathf(f, sizeof(f), "%s/%s", path, de->d_name) ||
		    ibvf_sysfs_read_str(f, buf, sizeof(buf)))
			continue;
		v = strtoul(buf, &end, 0);
		if (end == buf || v > 0xffff)
			continue;
		for (size_t i = 0; i < n_pkeys; i++)
			if ((v & IBVF_PKEY_KEY_MASK) == pkeys[i].key &&
			    (pkeys[i].membership == IBVF_MEMBER_LIMITED ||
			     (v & IBVF_PKEY_FULL_BIT)))
				found[i] = true;
	}
	closedir(d);
	for (size_t i = 0; i < n_pkeys; i++)
		if (!found[i])
			return ibvf_errf(err, errlen, -ENOENT,
					 "RDMA device %s port 1: P_Key table "
					 "has no %s member entry for PKey 0x%04x",
					 dev, ibvf_membership_name(pkeys[i].membership),
					 pkeys[i].key);
	return 0;
}

/* In a child: enter @netns_fd, mount a private sysfs, check, report over a pipe. */
static int port_check_in_netns(const char *dev, int netns_fd, const struct cni_pkey *pkeys,
			       size_t n_pkeys, char *err, size_t errlen)
{
	const char *root = cni_sysfs_root();
	int p[2], status = 0, ret;
	char msg[IBVF_ERR_LEN + 8];
	ssize_t n;
	pid_t pid;

	if (pipe2(p, O_CLOEXEC))
		return ibvf_errf(err, errlen, -errno, "pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return ibvf_errf(err, errlen, -errno, "fork: %s", strerror(errno));
	}
	if (!pid) {
		char e[IBVF_ERR_LEN] = "";
		int r;

		close(p[0]);
		if (setns(netns_fd, CLONE_NEWNET) || unshare(CLONE_NEWNS) ||
		    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
			r = ibvf_errf(e, sizeof(e), -errno, "entering the Pod netns: %s",
				      strerror(errno));
		else if (!strcmp(root, "/sys") &&
			 (umount2("/sys", MNT_DETACH), mount("sysfs", "/sys", "sysfs", 0, NULL)))
			r = ibvf_errf(e, sizeof(e), -errno, "mounting sysfs in the Pod netns: %s",
				      strerror(errno));
		else
			r = port_check_here(root, dev, pkeys, n_pkeys, e, sizeof(e));
		if (write(p[1], &r, sizeof(r)) != sizeof(r) || write(p[1], e, strlen(e) + 1) < 0)
			_exit(2);
		_exit(0);
	}
	close(p[1]);
	n = read(p[0], msg, sizeof(msg) - 1);
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (n < (ssize_t)sizeof(int))
		return ibvf_errf(err, errlen, -EIO, "port check in the Pod netns: no answer");
	msg[n] = 0;
	memcpy(&ret, msg, sizeof(ret));
	if (ret)
		ibvf_errf(err, errlen, ret, "%s", msg + sizeof(int));
	return ret;
}

int cni_vf_port_check(const char *rdma_dev, int netns_fd, const struct cni_pkey *pkeys,
		      size_t n_pkeys, char *err, size_t errlen)
{
	if (netns_fd < 0)
		return port_check_here(cni_sysfs_root(), rdma_dev, pkeys, n_pkeys, err, errlen);
	return port_check_in_netns(rdma_dev, netns_fd, pkeys, n_pkeys, err, errlen);
}
