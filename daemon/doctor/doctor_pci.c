// SPDX-License-Identifier: MIT
/*
 * ibvfctl doctor: the PCIe path for GPUDirect. With an IOMMU on, DMA from
 * the HCA is translated unless the kernel runs it in passthrough
 * (iommu=pt); and Access Control Services on a bridge between an HCA and a
 * GPU, with P2P Request Redirect or Completion Redirect enabled, send
 * peer-to-peer traffic up to the root complex (slow, or refused).
 * The ACS capability is a PCIe extended capability (ID 0x000D, PCIe Base
 * Spec 7.7.11): its Control register at offset 6 holds RR (bit 2) and CR
 * (bit 3). Extended config space (offset >= 0x100) is readable in sysfs
 * only by root.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "doctor_int.h"

#define SRC_IOMMU                                                                                  \
	"Linux Documentation/admin-guide/kernel-parameters.txt (iommu=pt); NVIDIA "                \
	"GPUDirect RDMA guide"
#define SRC_ACS                                                                                    \
	"PCIe Base Specification 7.7.11 (ACS Extended Capability); NVIDIA GPUDirect "              \
	"RDMA guide (disable ACS on bridges between GPU and HCA)"

static bool iommu_on(struct dr *d)
{
	char path[DR_PATH];
	bool any = false;
	struct dirent *e;
	DIR *dir;

	dr_path(d, path, "/sys/class/iommu");
	dir = opendir(path);
	while (dir && !any && (e = readdir(dir)))
		any = e->d_name[0] != '.';
	if (dir)
		closedir(dir);
	return any;
}

static void iommu(struct dr *d, bool hca)
{
	char cmdline[4096];
	bool pt;

	if (!hca || !d->n_gpus) {
		dr_add(d, "pci.iommu", IBVF_DOCTOR_NA, NULL, SRC_IOMMU,
		       "GPUDirect needs both an HCA and an NVIDIA GPU (%s HCA, %d GPU)",
		       hca ? "an" : "no", d->n_gpus);
		return;
	}
	dr_read(d, cmdline, sizeof(cmdline), "/proc/cmdline");
	pt = strstr(cmdline, "iommu=pt") || strstr(cmdline, "iommu.passthrough=1");
	if (!iommu_on(d))
		dr_add(d, "pci.iommu", IBVF_DOCTOR_OK, NULL, SRC_IOMMU,
		       "no IOMMU is active (/sys/class/iommu is empty)");
	else if (pt)
		dr_add(d, "pci.iommu", IBVF_DOCTOR_OK, NULL, SRC_IOMMU,
		       "IOMMU active in passthrough (/proc/cmdline: %s)", cmdline);
	else
		dr_add(d, "pci.iommu", IBVF_DOCTOR_WARN,
		       "add iommu=pt to the kernel command line (GRUB_CMDLINE_LINUX) and reboot",
		       SRC_IOMMU,
		       "IOMMU active and not in passthrough (/proc/cmdline: %s): GPU-HCA DMA is "
		       "translated, GPUDirect P2P may fail or crawl",
		       cmdline);
}

/* The PCI addresses on the path from the root complex to @bdf, from its sysfs link. */
static size_t pci_path(struct dr *d, const char *bdf, char out[][16], size_t max)
{
	char path[DR_PATH], target[DR_PATH];
	size_t n = 0;
	ssize_t len;

	dr_path(d, path, "/sys/bus/pci/devices/%s", bdf);
	len = readlink(path, target, sizeof(target) - 1);
	if (len < 0)
		return 0;
	target[len] = '\0';
	for (char *c = strtok(target, "/"); c && n < max; c = strtok(NULL, "/")) {
		unsigned a, b, s, f;
		char tail;

		if (sscanf(c, "%4x:%2x:%2x.%1x%c", &a, &b, &s, &f, &tail) == 4)
			snprintf(out[n++], 16, "%s", c);
	}
	return n;
}

/* ACS Control of @bdf: >= 0, -1 no ACS capability, -2 config space unreadable. */
static int acs_ctrl(struct dr *d, const char *bdf)
{
	unsigned char cfg[4096];
	char path[DR_PATH];
	unsigned off = 0x100;
	ssize_t n;
	int fd;

	dr_path(d, path, "/sys/bus/pci/devices/%s/config", bdf);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -2;
	n = read(fd, cfg, sizeof(cfg));
	close(fd);
	if (n < 0x104)
		return -2;
	for (int hops = 0; off >= 0x100 && off + 8 <= (unsigned)n && hops < 64; hops++) {
		unsigned hdr = cfg[off] | cfg[off + 1] << 8 | cfg[off + 2] << 16 |
			       (unsigned)cfg[off + 3] << 24;

		if ((hdr & 0xffff) == 0x000d)
			return cfg[off + 6] | cfg[off + 7] << 8;
		off = hdr >> 20;
	}
	return -1;
}

static void acs(struct dr *d, bool hca)
{
	char ev[2048] = "", seen[64][16];
	size_t n = 0, nseen = 0;
	int redirect = 0, unreadable = 0, bridges = 0;

	if (!hca || !d->n_gpus) {
		dr_add(d, "pci.acs", IBVF_DOCTOR_NA, NULL, SRC_ACS,
		       "GPUDirect P2P needs both an HCA and an NVIDIA GPU");
		return;
	}
	for (size_t i = 0; i < d->n_devs; i++) {
		char hp[16][16];
		size_t nh;

		if (d->devs[i].is_vf || !d->devs[i].pci[0])
			continue;
		nh = pci_path(d, d->devs[i].pci, hp, 16);
		for (int g = 0; g < d->n_gpus && g < 8; g++) {
			char gp[16][16];
			size_t ng = pci_path(d, d->gpu_pci[g], gp, 16), c = 0;

			while (c < nh && c < ng && !strcmp(hp[c], gp[c]))
				c++;
			/* the bridges below the common one, on both sides, and the common one */
			for (size_t side = 0; side < 2; side++) {
				char(*p)[16] = side ? gp : hp;
				size_t len = side ? ng : nh;

				for (size_t k = c ? c - 1 : 0; k + 1 < len; k++) {
					bool dup = false;
					int ctrl;

					for (size_t s = 0; s < nseen; s++)
						dup |= !strcmp(seen[s], p[k]);
					if (dup || nseen >= 64)
						continue;
					snprintf(seen[nseen++], 16, "%s", p[k]);
					bridges++;
					ctrl = acs_ctrl(d, p[k]);
					if (ctrl == -2)
						unreadable++;
					if (ctrl >= 0 && (ctrl & 0xc)) {
						redirect++;
						n += (size_t)snprintf(
							ev + n, n < sizeof(ev) ? sizeof(ev) - n : 0,
							"%s%s ACSCtl 0x%04x (%s%s)", n ? "; " : "",
							p[k], ctrl, ctrl & 4 ? "RR" : "",
							ctrl & 8 ? (ctrl & 4 ? "+CR" : "CR") : "");
					}
				}
			}
		}
	}
	if (redirect)
		dr_add(d, "pci.acs", IBVF_DOCTOR_WARN,
		       "disable ACS P2P redirect on these bridges (BIOS setting, or setpci "
		       "ECAP_ACS+0x6.w=0000 at each boot), unless VM isolation needs it",
		       SRC_ACS, "%d of %d bridge(s) between HCA and GPU redirect P2P: %s", redirect,
		       bridges, ev);
	else if (unreadable)
		dr_add(d, "pci.acs", IBVF_DOCTOR_WARN, "run ibvfctl doctor as root", SRC_ACS,
		       "%d bridge(s) between HCA and GPU whose extended config space cannot be "
		       "read (not root?)",
		       unreadable);
	else
		dr_add(d, "pci.acs", IBVF_DOCTOR_OK, NULL, SRC_ACS,
		       "%d bridge(s) between HCA and GPU, none redirects P2P", bridges);
}

void dr_check_pci(struct dr *d)
{
	bool hca = false;

	for (size_t i = 0; i < d->n_devs; i++)
		hca |= d->devs[i].pci[0] && !d->devs[i].is_vf;
	iommu(d, hca);
	acs(d, hca);
}
