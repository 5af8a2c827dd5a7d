// SPDX-License-Identifier: MIT
/*
 * vf-lab-tool - drive the VF manager with the driver of an ibvfd config,
 * optionally with one injected fault, for the fabric lab test:
 *
 *   vf-lab-tool CONFIG program PCI GUID [--fail-rdma-once]
 *   vf-lab-tool CONFIG reset PCI
 *
 * --fail-rdma-once wraps the configured driver: after its FIRST rebind the
 * VF's RDMA device is removed from the fake sysfs tree, so the wait times out
 * and the manager must roll back (its own rebind then works normally).
 * Prints "ok NETDEV RDMA" or "error: ..."; exit 0 ok, 3 failed, 2 usage.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ibvf/types.h>

#include "config.h"
#include "err.h"
#include "fakesysfs.h"
#include "log.h"
#include "vf_driver.h"
#include "vf_inventory.h"
#include "vf_manager.h"

extern char **environ;

static const struct ibvf_vf_driver_ops *real_ops;
static struct ibvf_vf_driver_ops faulty_ops;
static int rebinds;

static int faulty_rebind(struct ibvf_vf_driver *d, const struct ibvf_vf_info *vf,
			 const char *driver, uint32_t timeout_ms, char *err, size_t errlen)
{
	int ret = real_ops->rebind(d, vf, driver, timeout_ms, err, errlen);
	char p[PATH_MAX];

	if (!ret && rebinds++ == 0 &&
	    !ibvf_pci_dev_path(d->sysfs_root, vf->pci, "infiniband", p, sizeof(p))) {
		fprintf(stderr, "vf-lab-tool: fault: removing %s after the first rebind\n", p);
		ibvf_fake_rm_rf(p);
	}
	return ret;
}

int main(int argc, char **argv)
{
	struct ibvf_vf_manager_opts o = {0};
	struct ibvf_vf_request req = {.link_state = -1, .rebind = true};
	char err[IBVF_ERR_LEN], locks[PATH_MAX];
	struct ibvf_vf_manager *m;
	struct ibvf_vf_driver *d;
	struct ibvf_vf_info out;
	struct ibvf_config cfg;
	bool reset;
	int ret;

	if (argc < 4 || (strcmp(argv[2], "program") && strcmp(argv[2], "reset")))
		goto usage;
	reset = !strcmp(argv[2], "reset");
	if ((reset && argc != 4) || (!reset && argc != 5 && argc != 6))
		goto usage;
	ibvf_log_init("vf-lab-tool", IBVF_LOG_STDERR, LOG_INFO);
	if (ibvf_config_load(&cfg, argv[1], true, environ, err, sizeof(err))) {
		fprintf(stderr, "vf-lab-tool: %s\n", err);
		return 2;
	}
	if (!reset && ibvf_guid_parse(argv[4], &req.port_guid, err, sizeof(err))) {
		fprintf(stderr, "vf-lab-tool: %s\n", err);
		return 2;
	}
	req.node_guid = req.port_guid;
	if (ibvf_config_vf_driver_create(&cfg, &d, err, sizeof(err))) {
		fprintf(stderr, "vf-lab-tool: %s\n", err);
		return 3;
	}
	if (argc == 6) {
		if (strcmp(argv[5], "--fail-rdma-once"))
			goto usage;
		real_ops = d->ops;
		faulty_ops = *d->ops;
		faulty_ops.rebind = faulty_rebind;
		d->ops = &faulty_ops;
	}
	snprintf(locks, sizeof(locks), "%s/vf-locks", cfg.run_dir);
	o.sysfs_root = cfg.sysfs_root;
	o.lock_dir = locks;
	o.rebind_timeout_ms = cfg.vf.rebind_timeout_ms;
	if (ibvf_vf_manager_create(&o, d, &m, err, sizeof(err))) {
		fprintf(stderr, "vf-lab-tool: %s\n", err);
		return 3;
	}
	ret = reset ? ibvf_vf_reset(m, argv[3], &out, err, sizeof(err))
		    : ibvf_vf_program(m, argv[3], &req, &out, err, sizeof(err));
	if (ret)
		printf("error: %s\n", err);
	else
		printf("ok %s %s\n", out.netdev, out.rdma_dev);
	ibvf_vf_manager_destroy(m);
	ibvf_config_free(&cfg);
	return ret ? 3 : 0;
usage:
	fprintf(stderr, "usage: vf-lab-tool CONFIG program PCI GUID [--fail-rdma-once]\n"
			"       vf-lab-tool CONFIG reset PCI\n");
	return 2;
}
