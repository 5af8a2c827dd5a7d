// SPDX-License-Identifier: MIT
/*
 * ibvfctl doctor: kernel modules. The RDMA core and its user-space access
 * (ib_core, ib_uverbs for verbs, ib_umad for MADs, rdma_ucm for RDMA CM),
 * the HCA driver pair (mlx5_core + mlx5_ib on ConnectX), IPoIB, and
 * GPUDirect RDMA: nvidia_peermem, or dma-buf with NVIDIA's open kernel
 * modules (Linux >= 5.12 with the open GPU driver >= 515).
 */
#include <stdio.h>
#include <string.h>

#include "doctor_int.h"

#define SRC_KMOD "Linux Documentation/infiniband/user_verbs.rst, user_mad.rst; rdma-core README"
#define SRC_GPU	 "NVIDIA GPUDirect RDMA guide (nvidia-peermem; dma-buf with the open kernel modules)"

static void one_module(struct dr *d, const char *id, const char *name,
		       enum ibvf_doctor_verdict missing, const char *why)
{
	char fix[128];

	if (dr_module_loaded(d, name)) {
		dr_add(d, id, IBVF_DOCTOR_OK, NULL, SRC_KMOD, "%s is loaded", name);
		return;
	}
	snprintf(fix, sizeof(fix), "modprobe %s, and list it in /etc/modules-load.d/", name);
	dr_add(d, id, missing, fix, SRC_KMOD, "%s is not loaded (/proc/modules): %s", name, why);
}

/* The HCA drivers: a ConnectX needs mlx5_core (PCI) and mlx5_ib (RDMA). */
static void hca_driver(struct dr *d)
{
	char list[512] = "";
	size_t n = 0;

	for (size_t i = 0; i < d->n_devs; i++)
		n += (size_t)snprintf(list + n, n < sizeof(list) ? sizeof(list) - n : 0,
				      "%s%s (%s)", n ? ", " : "", d->devs[i].name,
				      d->devs[i].driver[0] ? d->devs[i].driver : "no PCI driver");
	if (dr_module_loaded(d, "mlx5_core") && !dr_module_loaded(d, "mlx5_ib")) {
		dr_add(d, "kmod.hca", IBVF_DOCTOR_FAIL,
		       "modprobe mlx5_ib (the RDMA half of the ConnectX driver)", SRC_KMOD,
		       "mlx5_core is loaded but mlx5_ib is not: the HCA has no RDMA device; "
		       "RDMA devices: %s",
		       d->n_devs ? list : "none");
		return;
	}
	if (!d->n_devs) {
		dr_add(d, "kmod.hca", IBVF_DOCTOR_FAIL,
		       "load the HCA driver (mlx5_core and mlx5_ib for ConnectX) or check the "
		       "HCA is seen on PCI (lspci)",
		       SRC_KMOD, "no RDMA device in /sys/class/infiniband");
		return;
	}
	dr_add(d, "kmod.hca", IBVF_DOCTOR_OK, NULL, SRC_KMOD, "RDMA devices: %s", list);
}

/* GPUDirect RDMA: only when NVIDIA GPUs are on the PCI bus. */
static void gpudirect(struct dr *d)
{
	char ver[512];
	bool open_km;

	if (!d->n_gpus) {
		dr_add(d, "kmod.gpudirect", IBVF_DOCTOR_NA, NULL, SRC_GPU,
		       "no NVIDIA GPU on the PCI bus (vendor 0x10de, class 0x03xx)");
		return;
	}
	if (dr_module_loaded(d, "nvidia_peermem")) {
		dr_add(d, "kmod.gpudirect", IBVF_DOCTOR_OK, NULL, SRC_GPU,
		       "%d NVIDIA GPU(s) (first %s); nvidia_peermem is loaded", d->n_gpus,
		       d->gpu_pci[0]);
		return;
	}
	open_km = dr_read(d, ver, sizeof(ver), "/proc/driver/nvidia/version") > 0 &&
		  strstr(ver, "Open Kernel Module");
	if (open_km) {
		dr_add(d, "kmod.gpudirect", IBVF_DOCTOR_OK, NULL, SRC_GPU,
		       "%d NVIDIA GPU(s) (first %s); no nvidia_peermem, but the open kernel "
		       "modules offer dma-buf (the application must register GPU memory with "
		       "ibv_reg_dmabuf_mr)",
		       d->n_gpus, d->gpu_pci[0]);
		return;
	}
	dr_add(d, "kmod.gpudirect", IBVF_DOCTOR_FAIL,
	       "modprobe nvidia_peermem (ships with the NVIDIA driver), or use the open GPU "
	       "kernel modules for dma-buf",
	       SRC_GPU,
	       "%d NVIDIA GPU(s) (first %s) but neither nvidia_peermem nor the open kernel "
	       "modules (/proc/driver/nvidia/version: %s): GPUDirect RDMA falls back to host "
	       "memory copies",
	       d->n_gpus, d->gpu_pci[0], ver[0] ? ver : "absent");
}

void dr_check_modules(struct dr *d)
{
	one_module(d, "kmod.ib_core", "ib_core", IBVF_DOCTOR_FAIL, "no RDMA at all");
	one_module(d, "kmod.ib_uverbs", "ib_uverbs", IBVF_DOCTOR_FAIL,
		   "no /dev/infiniband/uverbs*: verbs applications in Pods cannot open a device");
	one_module(d, "kmod.ib_umad", "ib_umad", IBVF_DOCTOR_FAIL,
		   "no /dev/infiniband/umad*: ibvfd cannot watch ports (PortInfo, P_KeyTable)");
	one_module(d, "kmod.rdma_ucm", "rdma_ucm", IBVF_DOCTOR_WARN,
		   "no /dev/infiniband/rdma_cm: RDMA CM applications (MPI, NVMe-oF, some NCCL "
		   "setups) cannot connect");
	hca_driver(d);
	one_module(d, "kmod.ib_ipoib", "ib_ipoib", IBVF_DOCTOR_WARN,
		   "no IPoIB netdevs: an InfiniBand VF gets no interface for the Pod's IP address");
	gpudirect(d);
}
