// SPDX-License-Identifier: MIT
/*
 * The production VF driver: GUIDs and link state over rtnetlink on the PF's
 * IPoIB netdev, rebind through sysfs driver/unbind + bind. Also the driver
 * factory and the helpers every driver shares.
 */
#include "vf_driver.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ibvf/types.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "vf_netlink.h"

_Static_assert(IBVF_GUID_NODE == 10 && IBVF_GUID_PORT == 11, "IFLA_VF_IB_*_GUID");

const char *ibvf_guid_kind_name(enum ibvf_guid_kind k)
{
	return k == IBVF_GUID_NODE ? "node" : "port";
}

/* ------------------------------------------------------ sysfs rebind -- */

/*
 * O_NONBLOCK: a bind/unbind file that is a FIFO (a fake tree whose "kernel"
 * is a test thread) without a reader fails with ENXIO instead of blocking.
 */
static int sysfs_write(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NONBLOCK);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	if (n < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	close(fd);
	return (size_t)n == strlen(text) ? 0 : -EIO;
}

int ibvf_vf_sysfs_rebind(const char *sysfs_root, const struct ibvf_vf_info *vf, const char *driver,
			 uint32_t timeout_ms, char *err, size_t errlen)
{
	const char *drv = driver && *driver ? driver : vf->driver;
	char p[PATH_MAX];
	int64_t end;
	int ret;

	if (!drv[0] || strchr(drv, '/'))
		return ibvf_errf(err, errlen, -EINVAL, "VF %s has no driver to bind", vf->pci);
	if (!ibvf_pci_dev_exists(sysfs_root, vf->pci))
		return ibvf_errf(err, errlen, -ENODEV, "VF %s vanished (no PCI device)", vf->pci);
	if (ibvf_pci_dev_path(sysfs_root, vf->pci, "driver", p, sizeof(p)))
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "sysfs path too long");
	if (access(p, F_OK) == 0) {
		if (ibvf_pci_dev_path(sysfs_root, vf->pci, "driver/unbind", p, sizeof(p)))
			return ibvf_errf(err, errlen, -ENAMETOOLONG, "sysfs path too long");
		ret = sysfs_write(p, vf->pci);
		if (ret && ret != -ENODEV)
			return ibvf_errf(err, errlen, ret, "unbinding VF %s (%s): %s", vf->pci, p,
					 strerror(-ret));
		/* A kernel unbind is synchronous; a lab's may not be: wait for it. */
		end = ibvf_mono_ms() + timeout_ms;
		ibvf_pci_dev_path(sysfs_root, vf->pci, "driver", p, sizeof(p));
		while (access(p, F_OK) == 0) {
			if (!ibvf_pci_dev_exists(sysfs_root, vf->pci))
				return ibvf_errf(err, errlen, -ENODEV,
						 "VF %s vanished during unbind", vf->pci);
			if (ibvf_mono_ms() >= end)
				return ibvf_errf(err, errlen, -ETIMEDOUT,
						 "VF %s still bound to %s %u ms after unbind",
						 vf->pci, drv, timeout_ms);
			usleep(10000);
		}
	}
	if (!ibvf_pci_dev_exists(sysfs_root, vf->pci))
		return ibvf_errf(err, errlen, -ENODEV, "VF %s vanished during rebind", vf->pci);
	if (snprintf(p, sizeof(p), "%s/bus/pci/drivers/%s/bind", sysfs_root, drv) >= (int)sizeof(p))
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "sysfs path too long");
	ret = sysfs_write(p, vf->pci);
	if (ret)
		return ibvf_errf(err, errlen, ret, "binding VF %s to %s (%s): %s", vf->pci, drv, p,
				 strerror(-ret));
	return 0;
}

/* ---------------------------------------------------- netlink driver -- */

struct nl_priv {
	struct ibvf_nl *nl;
};

static int need_pf_netdev(const struct ibvf_vf_info *vf, char *err, size_t errlen)
{
	if (vf->pf_netdev[0] && vf->pf_ifindex > 0)
		return 0;
	return ibvf_errf(err, errlen, -ENODEV,
			 "PF %s of VF %d (%s) has no IPoIB netdev (is ib_ipoib loaded?): VF "
			 "GUIDs and link state are set through it",
			 vf->pf_pci, vf->index, vf->pci);
}

static int nl_set_guid(struct ibvf_vf_driver *d, const struct ibvf_vf_info *vf,
		       enum ibvf_guid_kind kind, uint64_t guid, char *err, size_t errlen)
{
	struct nl_priv *p = d->priv;
	char e[IBVF_ERR_LEN], g[IBVF_GUID_STR_LEN];
	int ret = need_pf_netdev(vf, err, errlen);

	if (ret)
		return ret;
	ibvf_guid_format(guid, g);
	ret = ibvf_nl_set_vf_guid(p->nl, vf->pf_ifindex, (uint32_t)vf->index, (int)kind, guid, e,
				  sizeof(e));
	if (ret == -EOPNOTSUPP)
		return ibvf_errf(err, errlen, ret,
				 "PF %s VF %d: setting %s GUID %s: driver %s does not support VF "
				 "GUIDs (%s)",
				 vf->pf_netdev, vf->index, ibvf_guid_kind_name(kind), g,
				 vf->pf_driver[0] ? vf->pf_driver : "(unknown)", e);
	if (ret)
		return ibvf_errf(err, errlen, ret, "PF %s VF %d: setting %s GUID %s: %s",
				 vf->pf_netdev, vf->index, ibvf_guid_kind_name(kind), g, e);
	log_debug("PF %s VF %d (%s): %s GUID set to %s over netlink", vf->pf_netdev, vf->index,
		  vf->pci, ibvf_guid_kind_name(kind), g);
	return 0;
}

static int nl_set_link_state(struct ibvf_vf_driver *d, const struct ibvf_vf_info *vf,
			     enum ibvf_vf_link_state st, char *err, size_t errlen)
{
	struct nl_priv *p = d->priv;
	char e[IBVF_ERR_LEN];
	int ret = need_pf_netdev(vf, err, errlen);

	if (ret)
		return ret;
	ret = ibvf_nl_set_vf_link_state(p->nl, vf->pf_ifindex, (uint32_t)vf->index, (uint32_t)st, e,
					sizeof(e));
	if (ret == -EOPNOTSUPP)
		return ibvf_errf(err, errlen, ret,
				 "PF %s VF %d: setting link state %s: driver %s does not support "
				 "VF link state (%s)",
				 vf->pf_netdev, vf->index, ibvf_vf_link_state_name(st),
				 vf->pf_driver[0] ? vf->pf_driver : "(unknown)", e);
	if (ret)
		return ibvf_errf(err, errlen, ret, "PF %s VF %d: setting link state %s: %s",
				 vf->pf_netdev, vf->index, ibvf_vf_link_state_name(st), e);
	return 0;
}

static int nl_rebind(struct ibvf_vf_driver *d, const struct ibvf_vf_info *vf, const char *driver,
		     uint32_t timeout_ms, char *err, size_t errlen)
{
	return ibvf_vf_sysfs_rebind(d->sysfs_root, vf, driver, timeout_ms, err, errlen);
}

static int nl_read_back(struct ibvf_vf_driver *d, const struct ibvf_vf_info *const *vfs, size_t n,
			struct ibvf_vf_state *out, char *err, size_t errlen)
{
	struct nl_priv *p = d->priv;
	struct ibvf_nl_link link;
	char e[IBVF_ERR_LEN];
	int ret;

	memset(out, 0, n * sizeof(*out));
	if (!n)
		return 0;
	ret = need_pf_netdev(vfs[0], err, errlen);
	if (ret)
		return ret;
	ret = ibvf_nl_read_link(p->nl, vfs[0]->pf_ifindex, &link, e, sizeof(e));
	if (ret)
		return ibvf_errf(err, errlen, ret, "PF %s: reading back VF state: %s",
				 vfs[0]->pf_netdev, e);
	for (size_t i = 0; i < n; i++)
		for (size_t k = 0; k < link.n_vfs; k++) {
			const struct ibvf_nl_vf *v = &link.vfs[k];

			if (v->vf != (uint32_t)vfs[i]->index)
				continue;
			out[i].link_state_known = v->link_state <= IBVF_VF_LINK_DISABLE;
			out[i].link_state = (enum ibvf_vf_link_state)v->link_state;
			out[i].node_guid_known = v->has_node_guid;
			out[i].node_guid = v->node_guid;
			out[i].port_guid_known = v->has_port_guid;
			out[i].port_guid = v->port_guid;
		}
	ibvf_nl_link_free(&link);
	return 0;
}

static void nl_destroy(struct ibvf_vf_driver *d)
{
	struct nl_priv *p = d->priv;

	ibvf_nl_close(p->nl);
	free(p);
}

static const struct ibvf_vf_driver_ops netlink_ops = {
	.name = "netlink",
	.set_guid = nl_set_guid,
	.set_link_state = nl_set_link_state,
	.rebind = nl_rebind,
	.read_back = nl_read_back,
	.destroy = nl_destroy,
};

int ibvf_vf_driver_netlink_create(const char *sysfs_root, struct ibvf_vf_driver **out, char *err,
				  size_t errlen)
{
	struct ibvf_vf_driver *d = calloc(1, sizeof(*d));
	struct nl_priv *p = calloc(1, sizeof(*p));
	int ret;

	if (!d || !p || !(d->sysfs_root = strdup(sysfs_root))) {
		ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		goto fail;
	}
	ret = ibvf_nl_open(&p->nl, err, errlen);
	if (ret)
		goto fail;
	d->ops = &netlink_ops;
	d->priv = p;
	*out = d;
	return 0;
fail:
	if (d)
		free(d->sysfs_root);
	free(d);
	free(p);
	return ret;
}
