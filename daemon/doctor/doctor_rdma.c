// SPDX-License-Identifier: MIT
/*
 * ibvfctl doctor: the RDMA subsystem's netns mode against the rdmaIsolation
 * the node's CNI networks ask for, and the uverbs character devices.
 *
 * The mode is ib_core's netns_mode parameter: `rdma system set netns
 * exclusive|shared` (RDMA_NLDEV_CMD_SYS_SET) writes the very variable that
 * /sys/module/ib_core/parameters/netns_mode shows (drivers/infiniband/core/
 * device.c, ib_devices_shared_netns), so the file is what RDMA netlink's
 * SYS_GET answers, and it can be read from another root. The kernel refuses
 * the change while any network namespace besides init_net exists
 * (rdma_compatdev_set(): -EBUSY).
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#include "doctor_int.h"

#define SRC_NETNS                                                                                  \
	"iproute2 rdma-system(8); kernel drivers/infiniband/core/device.c rdma_compatdev_set(); "  \
	"ib-sriov-cni README (rdmaIsolation)"
#define SRC_UVERBS "Linux Documentation/infiniband/user_verbs.rst"

/* Does the network configuration @j (a .conf or a .conflist) set rdmaIsolation? */
static bool asks_isolation(json_t *j)
{
	json_t *plugins = json_object_get(j, "plugins"), *p;
	size_t i;

	if (!json_is_array(plugins))
		return json_is_true(json_object_get(j, "rdmaIsolation"));
	json_array_foreach(plugins, i,
			   p) if (json_is_true(json_object_get(p, "rdmaIsolation"))) return true;
	return false;
}

static int scan_cni_dir(struct dr *d, char *names, size_t len, int *unreadable)
{
	char dirpath[DR_PATH], rel[DR_PATH];
	const char *conf = d->o->cni_conf_dir;
	struct dirent *e;
	size_t n = 0;
	int asked = 0;
	DIR *dir;

	if (conf)
		snprintf(dirpath, sizeof(dirpath), "%s", conf);
	else
		dr_path(d, dirpath, "/etc/cni/net.d");
	names[0] = '\0';
	dir = opendir(dirpath);
	while (dir && (e = readdir(dir))) {
		const char *dot = strrchr(e->d_name, '.');
		json_error_t jerr;
		json_t *j;

		if (!dot ||
		    (strcmp(dot, ".conf") && strcmp(dot, ".conflist") && strcmp(dot, ".json")))
			continue;
		if (snprintf(rel, sizeof(rel), "%s/%s", dirpath, e->d_name) >= (int)sizeof(rel))
			continue;
		j = json_load_file(rel, JSON_REJECT_DUPLICATES, &jerr);
		if (!j) {
			(*unreadable)++;
			continue;
		}
		if (asks_isolation(j)) {
			asked++;
			n += (size_t)snprintf(names + n, n < len ? len - n : 0, "%s%s",
					      n ? ", " : "", e->d_name);
		}
		json_decref(j);
	}
	if (dir)
		closedir(dir);
	return asked;
}

static int count_netns(struct dr *d)
{
	char path[DR_PATH];
	struct dirent *e;
	int n = 0;
	DIR *dir;

	dr_path(d, path, "/run/netns");
	dir = opendir(path);
	while (dir && (e = readdir(dir)))
		n += e->d_name[0] != '.';
	if (dir)
		closedir(dir);
	return n;
}

void dr_check_rdma_netns(struct dr *d)
{
	char mode[16], names[512], fix[512];
	int unreadable = 0, asked, netns;
	bool shared;

	if (!dr_module_loaded(d, "ib_core")) {
		dr_add(d, "rdma.netns_mode", IBVF_DOCTOR_NA, NULL, SRC_NETNS,
		       "ib_core is not loaded");
		return;
	}
	if (dr_read(d, mode, sizeof(mode), "/sys/module/ib_core/parameters/netns_mode") <= 0) {
		dr_add(d, "rdma.netns_mode", IBVF_DOCTOR_WARN, "run `rdma system` to see the mode",
		       SRC_NETNS, "/sys/module/ib_core/parameters/netns_mode cannot be read");
		return;
	}
	shared = mode[0] == 'Y' || mode[0] == '1';
	asked = scan_cni_dir(d, names, sizeof(names), &unreadable);
	netns = count_netns(d);
	snprintf(fix, sizeof(fix),
		 "`rdma system set netns exclusive` while no network namespace but the host's "
		 "exists (%d in /run/netns now), or at boot: options ib_core netns_mode=0 in "
		 "/etc/modprobe.d/",
		 netns);
	if (!shared)
		dr_add(d, "rdma.netns_mode", IBVF_DOCTOR_OK, NULL, SRC_NETNS,
		       "exclusive (netns_mode=%s); %d CNI network(s) ask rdmaIsolation%s%s", mode,
		       asked, asked ? ": " : "", names);
	else if (asked)
		dr_add(d, "rdma.netns_mode", IBVF_DOCTOR_FAIL, fix, SRC_NETNS,
		       "shared (netns_mode=%s) but %d CNI network(s) ask rdmaIsolation (%s): their "
		       "ADD fails, the RDMA device cannot move into a Pod",
		       mode, asked, names);
	else
		dr_add(d, "rdma.netns_mode", IBVF_DOCTOR_WARN, fix, SRC_NETNS,
		       "shared (netns_mode=%s): every Pod sees every RDMA device of the node; no "
		       "CNI network asks rdmaIsolation%s",
		       mode, unreadable ? " (some network files could not be parsed)" : "");
}

/* The uverbs device of RDMA device @dev ("uverbs0"), "" when it has none. */
static void uverbs_of(struct dr *d, const char *dev, char *out, size_t len)
{
	char path[DR_PATH], ibdev[64];
	struct dirent *e;
	DIR *dir;

	out[0] = '\0';
	dr_path(d, path, "/sys/class/infiniband_verbs");
	dir = opendir(path);
	while (dir && (e = readdir(dir)))
		if (!strncmp(e->d_name, "uverbs", 6) &&
		    dr_read(d, ibdev, sizeof(ibdev), "/sys/class/infiniband_verbs/%s/ibdev",
			    e->d_name) > 0 &&
		    !strcmp(ibdev, dev)) {
			if (snprintf(out, len, "%s", e->d_name) >= (int)len)
				out[0] = '\0';
			break;
		}
	if (dir)
		closedir(dir);
}

void dr_check_uverbs(struct dr *d)
{
	char ev[1024], uv[32];
	size_t n = 0;
	int bad = 0;

	if (!d->n_devs) {
		dr_add(d, "rdma.uverbs", IBVF_DOCTOR_NA, NULL, SRC_UVERBS, "no RDMA device");
		return;
	}
	for (size_t i = 0; i < d->n_devs; i++) {
		const char *what = "";

		uverbs_of(d, d->devs[i].name, uv, sizeof(uv));
		if (!uv[0]) {
			what = "no uverbs device";
			bad++;
		} else if (!dr_exists(d, "/dev/infiniband/%s", uv)) {
			what = "no /dev/infiniband node";
			bad++;
		}
		n += (size_t)snprintf(ev + n, n < sizeof(ev) ? sizeof(ev) - n : 0, "%s%s: %s%s%s",
				      n ? "; " : "", d->devs[i].name, uv[0] ? uv : "-",
				      what[0] ? " " : "", what);
	}
	dr_add(d, "rdma.uverbs", bad ? IBVF_DOCTOR_FAIL : IBVF_DOCTOR_OK,
	       "modprobe ib_uverbs and check that udev creates /dev/infiniband/uverbs* (and that "
	       "the device plugin mounts them into Pods)",
	       SRC_UVERBS, "%s", ev);
}
