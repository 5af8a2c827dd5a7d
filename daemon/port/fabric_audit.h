/* SPDX-License-Identifier: MIT */
/*
 * Fabric audit: the P_Key tables a fabric scan read (fabric_scan.h) against
 * the desired state (what owners asked for, which GUIDs are ibvf's, what the
 * SM is configured with). Pure: no I/O, so unit tests feed it fabrics.
 *
 * Rules (docs/fabric-audit.md): a P_Key entry's bit 15 is the membership
 * (1 full, 0 limited); two ports can talk in a partition when both hold its
 * key and at least one of them is a full member (IBTA vol. 1, 10.9.1.2);
 * 0x0000 and 0x8000 are empty slots (10.9.1.1); the default partition
 * (0x7fff) is never a tenant's. The master SM's own port is a full member of
 * every partition by construction (OpenSM adds it), so it is reported in
 * the matrix with role "sm" and never as a foreign member.
 * Byte order: host-order integers.
 */
#ifndef IBVF_FABRIC_AUDIT_H
#define IBVF_FABRIC_AUDIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fabric_scan.h"

#define IBVF_FA_OWNER_LEN  160
#define IBVF_FA_DETAIL_LEN 512
/** "no port" in a finding's port fields. */
#define IBVF_FA_NO_PORT ((size_t)-1)

enum ibvf_fa_kind {
	IBVF_FA_MISSING_PKEY = 0, /* a managed GUID lacks a PKey its owner asked for */
	IBVF_FA_WRONG_MEMBERSHIP, /* ... holds it with the other membership */
	IBVF_FA_ISOLATION_BREACH, /* a managed GUID holds a tenant PKey its owner did not ask for */
	IBVF_FA_FOREIGN_MEMBER,	  /* a port that is not ibvf's holds a tenant PKey */
	IBVF_FA_DUPLICATE_GUID,	  /* two or more ports carry one port GUID */
	IBVF_FA_VF_GUID_ZERO,	  /* a port with port GUID 0 (a VF nobody programmed) */
	IBVF_FA_UNKNOWN_POOL_GUID, /* a port carries a pool GUID no store knows */
	IBVF_FA_NOT_ON_FABRIC,	   /* a GUID an owner holds is on no port */
	IBVF_FA_UNREADABLE,	   /* a port whose PortInfo or P_Key table did not answer */
	IBVF_FA_KIND_COUNT,
};

/** One membership an owner asked for. */
struct ibvf_fa_want {
	uint64_t guid;
	uint16_t pkey; /* with membership bit: 0x8000|k full, k limited */
	char owner[IBVF_FA_OWNER_LEN];
	const char *source;    /* "store", "sm" (cluster: another node's Pod) */
	bool expect_on_fabric; /* the attach is far enough that the port must have it */
};

/** GUIDs some store knows, and who holds them. */
struct ibvf_fa_known {
	uint64_t first, last;
	char owner[IBVF_FA_OWNER_LEN];
};

/** One membership the SM's configuration lists (backend list_members). */
struct ibvf_fa_sm {
	uint64_t guid;
	uint16_t pkey; /* 15-bit key */
	bool full;
	bool managed; /* ibvf's part of the SM config; false: an administrator's */
};

struct ibvf_fa_range {
	uint64_t first, last;
};

struct ibvf_fa_input {
	const struct ibvf_fabric *fabric;
	const struct ibvf_fa_want *wants;
	size_t n_wants;
	const struct ibvf_fa_known *known;
	size_t n_known;
	const struct ibvf_fa_range *managed; /* the pool's GUID ranges: ibvf's GUIDs */
	size_t n_managed;
	const struct ibvf_fa_sm *sm;
	size_t n_sm;
	int pkey; /* -1 = every PKey; else only this 15-bit key */
};

struct ibvf_fa_finding {
	enum ibvf_fa_kind kind;
	bool problem; /* counts for exit 1; false: a notice */
	uint64_t guid;
	int pkey;     /* the entry involved, with membership bit; -1 none */
	size_t port;  /* index into the fabric's ports, or IBVF_FA_NO_PORT */
	size_t port2; /* DUPLICATE_GUID: the second port */
	char owner[IBVF_FA_OWNER_LEN];
	char detail[IBVF_FA_DETAIL_LEN];
};

enum ibvf_fa_role {
	IBVF_FA_ROLE_MANAGED = 0, /* GUID in the pool's ranges */
	IBVF_FA_ROLE_FOREIGN,
	IBVF_FA_ROLE_SM, /* the master SM's port */
};

struct ibvf_fa_member {
	size_t port;
	bool full;
	enum ibvf_fa_role role;
};

/** One PKey's who-can-talk-to-whom: its members; pairs that can talk. */
struct ibvf_fa_pkey {
	uint16_t pkey; /* 15-bit */
	bool tenant;   /* some owner asked for it (or ibvf's SM part lists it) */
	struct ibvf_fa_member *members;
	size_t n_members, n_full, n_limited;
	uint64_t full_full;    /* pairs of full members */
	uint64_t full_limited; /* pairs full x limited (limited-limited cannot talk) */
};

struct ibvf_fa_result {
	struct ibvf_fa_finding *findings;
	size_t n_findings;
	size_t n_problems;
	struct ibvf_fa_pkey *pkeys; /* ascending key */
	size_t n_pkeys;
};

/**
 * ibvf_fabric_audit() - compare @in->fabric with the desired state and fill
 * @out (free with ibvf_fa_result_free()). Findings come check by check:
 * unreadable ports, GUID 0, duplicates, unknown pool GUIDs, the owners'
 * requests (not on fabric, missing, wrong membership), then the tables
 * (breaches, foreign members), each in port order. The matrix covers every non-default
 * key seen in a table or asked for (only @in->pkey with a filter).
 * Return: 0 or -ENOMEM (@err says so).
 */
int ibvf_fabric_audit(const struct ibvf_fa_input *in, struct ibvf_fa_result *out, char *err,
		      size_t errlen);

/** ibvf_fa_result_free() - free @r's arrays (not @r). */
void ibvf_fa_result_free(struct ibvf_fa_result *r);

/** ibvf_fa_kind_name() - "missing-pkey", "isolation-breach", ... */
const char *ibvf_fa_kind_name(enum ibvf_fa_kind k);

/** ibvf_fa_role_name() - "managed", "foreign", "sm". */
const char *ibvf_fa_role_name(enum ibvf_fa_role r);

#endif /* IBVF_FABRIC_AUDIT_H */
