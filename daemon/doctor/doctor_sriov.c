// SPDX-License-Identifier: MIT
/*
 * ibvfctl doctor: SR-IOV VFs of the HCAs. VFs configured against the PF's
 * total, VF driver bound, VF port GUID (0 never comes up: the SM assigns no
 * LID to a zero GUID), VF port state, the SM's virtualization support, and
 * the P_Key table against what ibvf's store says each VF should carry.
 *
 * A ConnectX VF on InfiniBand is a virtual port (IBTA 1.3 virtualization,
 * annex A19): only an SM with virtualization support gives it a LID —
 * NVIDIA's OpenSM with virtualization enabled, or UFM. Upstream OpenSM
 * (3.3.23 included) has none; its VFs stay in INIT with a nonzero GUID
 * while the PF is ACTIVE. That is what the check reads (the capability bit,
 * CapabilityMask2.IsVirtualizationSupported, is in PortInfo and needs a
 * MAD: `ibvfctl fabric audit` territory).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor_int.h"

#define SRC_SRIOV                                                                                  \
	"Linux Documentation/PCI/pci-iov-howto.rst (sriov_numvfs); NVIDIA MLNX_OFED "              \
	"SR-IOV for InfiniBand (VF GUIDs)"
#define SRC_VIRT "IBTA Vol. 1 rel. 1.3 annex A19 (virtualization); OpenSM 3.3.23 (no vports)"
#define SRC_PKEY "IBTA Vol. 1 14.2.5.7 (P_KeyTable); ibvf's store"

#define LIST(buf, n, ...)                                                                          \
	((n) +=                                                                                    \
	 (size_t)snprintf((buf) + (n), (n) < sizeof(buf) ? sizeof(buf) - (n) : 0, __VA_ARGS__))

static const char *state_name(int s)
{
	static const char *const names[] = {"unknown", "DOWN", "INIT", "ARMED", "ACTIVE"};

	return s >= 0 && s <= 4 ? names[s] : "unknown";
}

static struct dr_dev *dev_by_pci(struct dr *d, const char *pci)
{
	for (size_t i = 0; i < d->n_devs; i++)
		if (d->devs[i].pci[0] && !strcmp(d->devs[i].pci, pci))
			return &d->devs[i];
	return NULL;
}

static void vfs_and_drivers(struct dr *d)
{
	char ev[1024] = "", unb[1024] = "", buf[32], path[DR_PATH], drv[64];
	size_t n = 0, u = 0;
	int pfs = 0, zero = 0, unbound = 0;

	for (size_t i = 0; i < d->n_devs; i++) {
		const struct dr_dev *v = &d->devs[i];
		struct dirent *e;
		long total, num;
		DIR *dir;

		if (v->is_vf || !v->pci[0] ||
		    dr_read(d, buf, sizeof(buf), "/sys/bus/pci/devices/%s/sriov_totalvfs",
			    v->pci) <= 0)
			continue;
		total = atol(buf);
		num = dr_read(d, buf, sizeof(buf), "/sys/bus/pci/devices/%s/sriov_numvfs", v->pci) >
				      0
			      ? atol(buf)
			      : 0;
		pfs++;
		zero += num == 0;
		LIST(ev, n, "%s%s (%s): %ld of %ld VFs", n ? "; " : "", v->name, v->pci, num,
		     total);
		dr_path(d, path, "/sys/bus/pci/devices/%s", v->pci);
		dir = opendir(path);
		while (dir && (e = readdir(dir))) {
			char vf[32];

			if (strncmp(e->d_name, "virtfn", 6) ||
			    dr_link_base(d, vf, sizeof(vf), "/sys/bus/pci/devices/%s/%s", v->pci,
					 e->d_name))
				continue;
			if (dr_link_base(d, drv, sizeof(drv), "/sys/bus/pci/devices/%s/driver",
					 vf)) {
				unbound++;
				LIST(unb, u, "%s%s", u ? ", " : "", vf);
			}
		}
		if (dir)
			closedir(dir);
	}
	if (!pfs) {
		dr_add(d, "sriov.vfs", IBVF_DOCTOR_NA, NULL, SRC_SRIOV,
		       "no RDMA device with an SR-IOV capable PCI function (sriov_totalvfs)");
		dr_add(d, "sriov.vf_driver", IBVF_DOCTOR_NA, NULL, SRC_SRIOV, "no SR-IOV PF");
		return;
	}
	dr_add(d, "sriov.vfs", zero ? IBVF_DOCTOR_WARN : IBVF_DOCTOR_OK,
	       "create VFs: echo N > /sys/bus/pci/devices/<PF>/sriov_numvfs (or the SR-IOV "
	       "operator's node policy), with SR-IOV enabled in the HCA firmware (mlxconfig "
	       "SRIOV_EN=1 NUM_OF_VFS=N)",
	       SRC_SRIOV, "%s", ev);
	if (unbound)
		dr_add(d, "sriov.vf_driver", IBVF_DOCTOR_WARN,
		       "bind the VFs to their driver (mlx5_core): echo <VF> > "
		       "/sys/bus/pci/drivers/mlx5_core/bind; ibvfd binds the VFs it hands out",
		       SRC_SRIOV, "%d VF(s) bound to no driver: %s", unbound, unb);
	else
		dr_add(d, "sriov.vf_driver", IBVF_DOCTOR_OK, NULL, SRC_SRIOV,
		       "every VF is bound to a driver");
}

static void vf_ports(struct dr *d)
{
	char zero[1024] = "", down[1024] = "", stuck[1024] = "";
	size_t z = 0, dn = 0, s = 0;
	int vfs = 0, nz = 0, nd = 0, ns = 0;

	for (size_t i = 0; i < d->n_devs; i++) {
		const struct dr_dev *v = &d->devs[i];
		const struct dr_dev *pf;

		if (!v->is_vf || v->ethernet)
			continue;
		vfs++;
		pf = dev_by_pci(d, v->pf_pci);
		if (!v->port_guid) {
			nz++;
			LIST(zero, z, "%s%s (%s, %s)", z ? ", " : "", v->name, v->pci,
			     state_name(v->state));
		} else if (v->state == 2 && pf && pf->state == 4) {
			ns++;
			LIST(stuck, s, "%s%s (%s) GUID 0x%016llx INIT while PF %s is ACTIVE",
			     s ? ", " : "", v->name, v->pci, (unsigned long long)v->port_guid,
			     pf->name);
		}
		if (v->state != 4) {
			nd++;
			LIST(down, dn, "%s%s %s", dn ? ", " : "", v->name, state_name(v->state));
		}
	}
	if (!vfs) {
		dr_add(d, "sriov.vf_guid", IBVF_DOCTOR_NA, NULL, SRC_SRIOV,
		       "no InfiniBand VF RDMA device");
		dr_add(d, "sriov.vf_port", IBVF_DOCTOR_NA, NULL, SRC_SRIOV,
		       "no InfiniBand VF RDMA device");
		dr_add(d, "sm.virtualization", IBVF_DOCTOR_NA, NULL, SRC_VIRT,
		       "no InfiniBand VF RDMA device");
		return;
	}
	if (nz)
		dr_add(d, "sriov.vf_guid", IBVF_DOCTOR_FAIL,
		       "give each VF a nonzero, fabric-unique port GUID before it is bound (ibvfd "
		       "does it for the VFs it hands out; by hand: ip link set <PF> vf N port_guid "
		       "G node_guid G, then rebind the VF)",
		       SRC_SRIOV, "%d of %d VF(s) with port GUID 0 (the SM gives them no LID): %s",
		       nz, vfs, zero);
	else
		dr_add(d, "sriov.vf_guid", IBVF_DOCTOR_OK, NULL, SRC_SRIOV,
		       "%d VF(s), every port GUID nonzero", vfs);
	if (nd)
		dr_add(d, "sriov.vf_port", IBVF_DOCTOR_WARN,
		       "a VF port comes up ACTIVE once the SM has assigned it a LID: check the SM "
		       "(sm.virtualization) and the VF's GUID",
		       SRC_SRIOV, "%d of %d VF port(s) not ACTIVE: %s", nd, vfs, down);
	else
		dr_add(d, "sriov.vf_port", IBVF_DOCTOR_OK, NULL, SRC_SRIOV,
		       "%d VF port(s), all ACTIVE", vfs);
	if (ns)
		dr_add(d, "sm.virtualization", IBVF_DOCTOR_FAIL,
		       "run an SM with virtualization support: NVIDIA's OpenSM with "
		       "virt_enabled 2 in opensm.conf, or UFM; upstream OpenSM cannot bring VFs up",
		       SRC_VIRT, "%d VF(s) stuck: %s", ns, stuck);
	else
		dr_add(d, "sm.virtualization", IBVF_DOCTOR_OK, NULL, SRC_VIRT,
		       "no VF with a GUID stuck in INIT behind an ACTIVE PF");
}

/* Does the P_Key table of @dev port 1 hold @pkey with at least its membership? */
static bool table_has(struct dr *d, const char *dev, uint16_t pkey, uint16_t *found)
{
	char path[DR_PATH], buf[16];
	struct dirent *e;
	bool ok = false;
	DIR *dir;

	*found = 0;
	dr_path(d, path, "/sys/class/infiniband/%s/ports/1/pkeys", dev);
	dir = opendir(path);
	while (dir && !ok && (e = readdir(dir))) {
		uint16_t v;

		if (e->d_name[0] == '.' ||
		    dr_read(d, buf, sizeof(buf), "/sys/class/infiniband/%s/ports/1/pkeys/%s", dev,
			    e->d_name) <= 0)
			continue;
		v = (uint16_t)strtoul(buf, NULL, 0);
		if ((v & 0x7fff) != (pkey & 0x7fff))
			continue;
		*found = v;
		/* a full member needs the full entry; a limited one is met by either */
		ok = !(pkey & 0x8000) || (v & 0x8000);
	}
	if (dir)
		closedir(dir);
	return ok;
}

static void vf_pkeys(struct dr *d)
{
	char ev[2048] = "";
	size_t n = 0;
	int checked = 0, bad = 0;

	if (!d->o->have_store || !d->o->n_expect) {
		dr_add(d, "sriov.vf_pkey", IBVF_DOCTOR_NA, NULL, SRC_PKEY,
		       d->o->have_store ? "no VF in use in ibvf's store"
					: "ibvf's store could not be read (--state-dir)");
		return;
	}
	for (size_t i = 0; i < d->o->n_expect; i++) {
		const struct ibvf_doctor_expect *x = &d->o->expect[i];
		struct dr_dev *v = dev_by_pci(d, x->pci);

		if (!v) {
			bad++;
			LIST(ev, n, "%s%s: in the store (GUID 0x%016llx) but no RDMA device here",
			     n ? "; " : "", x->pci, (unsigned long long)x->guid);
			continue;
		}
		for (size_t k = 0; k < x->n_pkeys; k++) {
			uint16_t found;

			checked++;
			if (table_has(d, v->name, x->pkeys[k], &found))
				continue;
			bad++;
			LIST(ev, n, "%s%s (%s) GUID 0x%016llx: PKey 0x%04x %s", n ? "; " : "",
			     v->name, x->pci, (unsigned long long)x->guid, x->pkeys[k],
			     found ? "only as a limited member" : "missing from the P_Key table");
		}
	}
	if (bad)
		dr_add(d, "sriov.vf_pkey", IBVF_DOCTOR_FAIL,
		       "the SM has not applied the membership: check the SM backend (ibvfctl "
		       "daemon status, the SM's log) and `ibvfctl pool audit`",
		       SRC_PKEY, "%s", ev);
	else
		dr_add(d, "sriov.vf_pkey", IBVF_DOCTOR_OK, NULL, SRC_PKEY,
		       "%d PKey membership(s) of %zu VF(s) present in their P_Key tables", checked,
		       d->o->n_expect);
}

void dr_check_sriov(struct dr *d)
{
	vfs_and_drivers(d);
	vf_ports(d);
	vf_pkeys(d);
}
