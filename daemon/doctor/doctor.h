/* SPDX-License-Identifier: MIT */
/*
 * ibvfctl doctor (issue 21 part 2): the node checks behind "the Pod has no
 * RDMA". Each check reads files of a node (/proc, /sys, /etc, /run) under a
 * root directory, so a test or an operator can point it at another tree,
 * and yields one result: an id, a verdict, the evidence it read and the fix
 * in one sentence. docs/doctor.md lists every check and the source of its
 * rule. No check changes anything on the node.
 */
#ifndef IBVF_DOCTOR_H
#define IBVF_DOCTOR_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/** The verdict of one check. */
enum ibvf_doctor_verdict {
	IBVF_DOCTOR_OK,
	IBVF_DOCTOR_WARN,
	IBVF_DOCTOR_FAIL,
	IBVF_DOCTOR_NA, /* the check does not apply to this node */
};

/** ibvf_doctor_verdict_name() - "ok", "warn", "fail" or "not-applicable". */
const char *ibvf_doctor_verdict_name(enum ibvf_doctor_verdict v);

/** What ibvf's store says a VF should carry (for the P_Key table check). */
struct ibvf_doctor_expect {
	char pci[32];	    /* VF PCI address, "0000:03:00.2" */
	uint64_t guid;	    /* the port GUID ibvf gave it (host byte order) */
	uint16_t pkeys[16]; /* P_Keys with the membership bit (0x8000 full) */
	size_t n_pkeys;
};

struct ibvf_doctor_opts {
	const char *root;	  /* tree holding proc/, sys/, etc/, run/; "/" = this node */
	const char *cni_conf_dir; /* NULL: <root>/etc/cni/net.d */
	/* the store's VFs in use; have_store false = no store was readable */
	const struct ibvf_doctor_expect *expect;
	size_t n_expect;
	int have_store;
};

/**
 * ibvf_doctor_run() - run every check against @o->root.
 * *@checks: a new JSON array of {id, verdict, evidence, fix, source}, in a
 * fixed order (docs/doctor.md). A file a check cannot read is evidence, not
 * an error.
 * Return: 0, -ENOENT when @o->root is not a directory, -ENOMEM.
 */
int ibvf_doctor_run(const struct ibvf_doctor_opts *o, json_t **checks, char *err, size_t errlen);

#endif /* IBVF_DOCTOR_H */
