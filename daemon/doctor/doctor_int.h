/* SPDX-License-Identifier: MIT */
/* ibvfctl doctor internals: the run's state and the helpers every check uses. */
#ifndef IBVF_DOCTOR_INT_H
#define IBVF_DOCTOR_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "doctor.h"

#define DR_PATH	    4096
#define DR_MAX_DEVS 64

/** One RDMA device of /sys/class/infiniband, as the checks need it. */
struct dr_dev {
	char name[64];
	char pci[32];	 /* "" for a device without a PCI parent (rxe, siw) */
	char driver[64]; /* PCI driver of the parent, "" when unbound or none */
	bool is_vf;	 /* the parent is a VF (has a physfn link) */
	char pf_pci[32]; /* the VF's PF */
	bool ethernet;	 /* port 1 link_layer Ethernet (RoCE) */
	int state;	 /* port 1 state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 0 unknown */
	uint64_t port_guid;
};

struct dr {
	const struct ibvf_doctor_opts *o;
	json_t *checks;
	struct dr_dev devs[DR_MAX_DEVS];
	size_t n_devs;
	int n_gpus; /* NVIDIA GPUs (PCI vendor 0x10de, class 0x03xx) */
	char gpu_pci[8][32];
	int oom;
};

/** dr_add() - append one result; @fix may be NULL (nothing to do). */
void dr_add(struct dr *d, const char *id, enum ibvf_doctor_verdict v, const char *fix,
	    const char *source, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/** dr_path() - <root>/<rel> into @out (DR_PATH bytes); @rel starts with '/'. */
void dr_path(const struct dr *d, char *out, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/**
 * dr_read() - read the small text file <root>/<rel> into @buf, trailing
 * newlines removed. Return: its length, or -errno.
 */
int dr_read(const struct dr *d, char *buf, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/** dr_read_alloc() - the whole file <root>/<rel> (at most 1 MiB), NUL-terminated; NULL if none. */
char *dr_read_alloc(const struct dr *d, const char *rel);

/** dr_exists() - true when <root>/<rel> exists (lstat). */
bool dr_exists(const struct dr *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/** dr_link_base() - basename of the symlink <root>/<rel>'s target; -errno if not a link. */
int dr_link_base(const struct dr *d, char *out, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/** dr_module_loaded() - @name in <root>/proc/modules or built in (<root>/sys/module/@name). */
bool dr_module_loaded(const struct dr *d, const char *name);

/* The checks, in the order they run (one file per concern). */
void dr_check_modules(struct dr *d);	/* doctor_kmod.c */
void dr_check_rdma_netns(struct dr *d); /* doctor_rdma.c */
void dr_check_uverbs(struct dr *d);	/* doctor_rdma.c */
void dr_check_memlock(struct dr *d);	/* doctor_memlock.c */
void dr_check_sriov(struct dr *d);	/* doctor_sriov.c */
void dr_check_pci(struct dr *d);	/* doctor_pci.c */
void dr_check_roce(struct dr *d);	/* doctor_roce.c */
void dr_check_cdi(struct dr *d);	/* doctor_cdi.c */

#endif /* IBVF_DOCTOR_INT_H */
