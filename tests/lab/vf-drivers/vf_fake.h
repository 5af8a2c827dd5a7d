/* SPDX-License-Identifier: MIT */
/*
 * "fake" VF driver for tests and benchmarks of the whole daemon on machines
 * without SR-IOV hardware (vf.driver = "fake"; logged loudly at start-up).
 *
 * A VF is one text file <dir>/<pci> holding
 *   "pf=<netdev> vf=<index> node=<16 hex> port=<16 hex> link=<state> gen=<n>\n"
 * (optionally followed by " netdev=<name>": the lab's own netdev, reported
 * as is), or one line "pci=<pci> pf=..." (the same fields) of its PCI bus's
 * table <dir>/<domain>:<bus>.vfs, the shape of the netlink driver's one
 * RTM_GETLINK dump per PF: a listing reads a table in one read, not one file
 * per VF (issue 17). A PCI address is in one place only (lookup tries its
 * own file first). "program"
 * rewrites a VF's own file in place, its fixed-width record in one pwrite()
 * under flock(LOCK_EX) of the file (readers take LOCK_SH), reading the old
 * record and the new one back through the same open file; a table line by
 * write temp + rename under flock(2) of <dir>. Either bumps gen (the "rebind"
 * that renames the netdev to <pf>v<index>g<gen>). The port
 * seam of this driver reports ACTIVE at once, with LID = 0x100 + VF index and
 * pkey_index = position of the PKey + 1 (index 0 is the default PKey).
 *
 * Test hooks (environment): IBVF_FAKE_VF_DELAY_MS adds a delay to program()
 * (to give kill -9 tests a window inside a step); IBVF_FAKE_VF_FAIL=<pci>
 * makes program() of that VF fail with -EIO.
 */
#ifndef IBVF_VF_FAKE_H
#define IBVF_VF_FAKE_H

#include <stdint.h>

#include "attach.h"

/**
 * ibvf_vf_fake_init() - VF and port seams over the directory @dir (must
 * exist). Return: 0 or -errno.
 */
int ibvf_vf_fake_init(const char *dir, struct ibvf_vf_ops *vf, struct ibvf_port_ops *port,
		      char *err, size_t errlen);

/** ibvf_vf_fake_fini() - free what init allocated (the seams' ctx). */
void ibvf_vf_fake_fini(struct ibvf_vf_ops *vf);

/**
 * ibvf_vf_fake_create() - create VF file @pci of @pf index @vf_index with
 * both GUIDs @guid (tests and lab scripts; ibvfctl has no use for it).
 */
int ibvf_vf_fake_create(const char *dir, const char *pci, const char *pf, int vf_index,
			uint64_t guid, char *err, size_t errlen);

/** One VF for ibvf_vf_fake_create_table(). */
struct ibvf_vf_fake_entry {
	const char *pci, *pf;
	int vf_index;
	uint64_t guid; /* node and port GUID */
};

/**
 * ibvf_vf_fake_create_table() - add the @n VFs @v (those of one bus next to
 * each other) to their bus tables in @dir, link "auto", gen 0 (benchmarks
 * with tens of thousands of VFs). Return: 0 or -errno with @err.
 */
int ibvf_vf_fake_create_table(const char *dir, const struct ibvf_vf_fake_entry *v, size_t n,
			      char *err, size_t errlen);

#endif /* IBVF_VF_FAKE_H */
