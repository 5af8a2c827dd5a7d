/* SPDX-License-Identifier: MIT */
/*
 * rc_check - RC QP ping-pong check of one RDMA device port (libibverbs).
 *
 * Before a VF is handed to a Pod, prove that its RDMA path works end to end:
 * open the device, register memory, bring two RC QPs on the same port through
 * INIT -> RTR -> RTS with the tenant's pkey_index, connect them to each other
 * (no out-of-band exchange is needed within one process), bounce messages
 * between them and measure the round trips.
 *
 * The verbs sequence follows rdma-core's libibverbs/examples/rc_pingpong.c;
 * QP state transitions and attributes are those of IBTA vol. 1, 11.2.4.2
 * (Modify QP) and 10.3 (QP state machine).
 *
 * The module is a library: it never prints (debug lines go through log.h
 * only), every failure is returned as a negative errno with a one-line reason
 * in the caller's error buffer, and the details (failing verb, errno,
 * latency figures) are in struct ibvf_rc_result. Used by `ibvfctl rc-check`
 * and by the ib-sriov CNI plugin. libibverbs is loaded at the first check
 * (dlopen, rc_verbs.h), so programs that link this module do not load it
 * at start.
 *
 * See docs/rc-check.md for what a passing check proves and what it does not.
 */
#ifndef IBVF_RC_CHECK_H
#define IBVF_RC_CHECK_H

#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>
#include <ibvf/types.h>

#include "err.h"

/* Defaults of ibvf_rc_opts_init(). */
#define IBVF_RC_DEF_ITERATIONS	  1000u
#define IBVF_RC_DEF_WARMUP	  16u
#define IBVF_RC_DEF_MSG_SIZE	  64u
#define IBVF_RC_DEF_MR_BYTES	  65536u
#define IBVF_RC_DEF_OP_TIMEOUT_MS 2000u
#define IBVF_RC_DEF_TIMEOUT_MS	  20000u
#define IBVF_RC_DEF_SPIN_US	  100u

/* Limits checked by ibvf_rc_check() (-EINVAL beyond them). */
#define IBVF_RC_MAX_ITERATIONS 1000000u
#define IBVF_RC_MAX_MSG_SIZE   (16u << 20)
#define IBVF_RC_MAX_MR_BYTES   (256u << 20)
#define IBVF_RC_MAX_TIMEOUT_MS 3600000u
#define IBVF_RC_MAX_SPIN_US    1000000u

/** Length of the device name buffers (libibverbs' IBV_SYSFS_NAME_MAX). */
#define IBVF_RC_DEV_LEN 64
/* The default P_Key, full member of the default partition (IBTA 10.9.1.1). */
#define IBVF_RC_DEFAULT_PKEY 0xffffu

/** What a check concluded; the caller acts on this. */
enum ibvf_rc_status {
	/* messages went both ways intact; p99 within the bound (if any) */
	IBVF_RC_PASS = 0,
	/* the RDMA path does not work: a verb failed, a timeout, a bad
	 * completion or payload, the P_Key or GID is missing, the device went
	 * away. ibvf_rc_result.verb and .error_errno say where. */
	IBVF_RC_FAIL,
	/* it works, but p99 exceeded ibvf_rc_opts.p99_max_us */
	IBVF_RC_SLOW,
	/* limited-only membership: two limited members cannot talk (IBTA
	 * vol. 1, 10.9.3), so a loopback on one port cannot prove it. See
	 * ibvf_rc_pkey_pick(). */
	IBVF_RC_NOT_CHECKABLE,
	/* bad options; nothing was touched */
	IBVF_RC_INVALID,
	/* the check could not run: netns, fork, pipe, out of memory */
	IBVF_RC_ERROR,
};

/** Options of one check. Start from ibvf_rc_opts_init(). */
struct ibvf_rc_opts {
	const char *dev;	    /* RDMA device name ("mlx5_3", "rxe0"); required */
	uint8_t port;		    /* port number, 1-based; default 1 */
	bool use_pkey;		    /* false: use P_Key index 0, as rc_pingpong does */
	uint16_t pkey;		    /* host order; bit 15 = full member (IBTA 10.9.1.2) */
	int gid_index;		    /* -1: pick one (see ibvf_rc_gid_pick()) */
	unsigned int iterations;    /* measured round trips; default 1000 */
	unsigned int warmup;	    /* round trips before measuring; default 16 */
	size_t msg_size;	    /* bytes per message; default 64 */
	size_t mr_bytes;	    /* bytes registered at least; default 64 KiB */
	unsigned int op_timeout_ms; /* longest wait for one completion; default 2000 */
	unsigned int timeout_ms;    /* whole check, open to close; default 20000 */
	unsigned int spin_us;	    /* busy-poll this long before sleeping; default 100 */
	double p99_max_us;	    /* > 0: IBVF_RC_SLOW when p99 exceeds it; 0 = off */
	const char *netns;	    /* NULL, a name (/run/netns/NAME) or a path */
	bool roce_default_pkey;	    /* RoCE rule of ibvf_rc_pkey_pick_port(); default off */
	const char *verbs_lib;	    /* NULL: libibverbs.so.1 (rc_verbs.h); tests name another */
};

/**
 * struct ibvf_rc_result - everything a check learnt. Plain data (no
 * pointers), so it can cross a pipe from the netns child.
 *
 * Latency figures are round trips (QP A -> QP B -> QP A, one message each
 * way) in microseconds from CLOCK_MONOTONIC; percentiles use the
 * nearest-rank method. They are valid when @iterations > 0.
 */
struct ibvf_rc_result {
	enum ibvf_rc_status status;
	char dev[IBVF_RC_DEV_LEN];
	uint8_t port;
	bool ethernet;		      /* link layer Ethernet (RoCE) rather than InfiniBand */
	uint16_t lid;		      /* port LID (0 on RoCE) */
	unsigned int mtu;	      /* path MTU used, bytes */
	int pkey_index;		      /* P_Key index of QP A (tenant's); -1 = unknown */
	int peer_pkey_index;	      /* P_Key index of QP B (differs for limited+full) */
	uint16_t pkey;		      /* P_Key value at @pkey_index, host order */
	uint16_t peer_pkey;	      /* P_Key value at @peer_pkey_index */
	bool pkey_roce_default;	      /* RoCE: requested P_Key absent, default 0xffff checked */
	int gid_index;		      /* SGID index in the GRH; -1 = no GRH (IB: LID) */
	char gid[INET6_ADDRSTRLEN];   /* that GID as an IPv6 address text */
	char gid_netdev[IF_NAMESIZE]; /* netdev of that GID entry (RoCE), "" if none */
	unsigned int iterations;      /* measured round trips completed */
	size_t msg_size;
	size_t mr_bytes; /* bytes registered */
	double min_us, p50_us, p99_us, max_us, avg_us;
	double elapsed_ms; /* whole check, open to close */
	char verb[32];	   /* failing verb ("ibv_reg_mr") or step ("pkey_lookup") */
	int error_errno;   /* positive errno of the failure; 0 on pass */
};

/** ibvf_rc_opts_init() - fill @o with the defaults above (no device). */
void ibvf_rc_opts_init(struct ibvf_rc_opts *o);

/**
 * ibvf_rc_check() - run the RC QP ping-pong check.
 * @o:      options; @o->dev is required.
 * @res:    filled on every return (status, where it failed, figures).
 * @err:    one-line reason on failure (IBVF_ERR_LEN bytes always suffice); it
 *          names the device and port, the failing verb and errno, and a hint
 *          (RLIMIT_MEMLOCK, P_Key table, GID table, netns) where one helps.
 *
 * When @o->netns is set the check runs in a forked child that enters that
 * network namespace with setns(2) and a private mount namespace with sysfs
 * remounted (as `ip netns exec` does, so sysfs shows the devices of that
 * netns); the caller's namespaces are untouched. This needs CAP_SYS_ADMIN.
 * The parent kills the child when @o->timeout_ms passes.
 *
 * Every resource (device context, PD, MR, buffer, completion channel, CQ,
 * QPs) is released on every path before returning.
 *
 * Return: 0 when @res->status is IBVF_RC_PASS; otherwise a negative errno:
 *   -EINVAL bad options (IBVF_RC_INVALID);
 *   -ERANGE p99 above the bound (IBVF_RC_SLOW);
 *   -EOPNOTSUPP limited-only membership (IBVF_RC_NOT_CHECKABLE);
 *   for IBVF_RC_FAIL the errno of the failing verb, or -ENODEV (device or
 *   port missing, device removed, no RDMA device in the netns), -ENOENT
 *   (P_Key or GID not in its table), -ENETDOWN (port not ACTIVE),
 *   -ETIMEDOUT (no completion in time), -EIO (bad completion or payload);
 *   for IBVF_RC_ERROR the errno of setns/fork/pipe/malloc, or -ELIBACC
 *   (libibverbs cannot be loaded: @err names the library and the Debian
 *   package, "rcCheck needs libibverbs.so.1 (Debian: libibverbs1): ...";
 *   it is loaded at the first check, not at program start: rc_verbs.h).
 */
int ibvf_rc_check(const struct ibvf_rc_opts *o, struct ibvf_rc_result *res, char *err,
		  size_t errlen);

/** ibvf_rc_status_name() - "pass", "fail", "slow", "not-checkable", "invalid", "error". */
const char *ibvf_rc_status_name(enum ibvf_rc_status s);

/* ------------------------------------------------ pure helpers (tested) -- */

/** P_Key indexes chosen for the two QPs of a check. */
struct ibvf_rc_pkey_pick {
	uint16_t index;	     /* QP A: the entry that matches the requested P_Key */
	uint16_t peer_index; /* QP B: same entry, or the full-member entry (see below) */
	uint16_t pkey;	     /* table value at @index */
	uint16_t peer_pkey;  /* table value at @peer_index */
	bool roce_default;   /* RoCE rule: requested P_Key absent, default used (see below) */
};

/**
 * ibvf_rc_pkey_pick() - find the P_Key indexes for a check in a port's table.
 * @table: the port's P_Key table in host order, as read with ibv_query_pkey()
 *         for indexes 0..pkey_tbl_len-1 (entries 0x0000 and 0x8000 are
 *         invalid, IBTA 10.9.1.1, and never match).
 * @len:   number of entries.
 * @pkey:  requested P_Key, host order; bit 15 says which membership to find:
 *         full (0x8000|k) or limited (k). Matching is exact on 16 bits.
 *
 * Membership rule (IBTA vol. 1, 10.9.3: a packet is accepted when the keys
 * match and at least one side is a full member):
 *   - full: both QPs use the full entry (full <-> full can talk);
 *   - limited, and the table also holds the full entry of the same key: QP A
 *     uses the limited entry and QP B the full one, which proves the limited
 *     entry the way a tenant uses it (limited members talk to full members);
 *   - limited only: -EOPNOTSUPP ("not checkable"): two limited members cannot
 *     talk, so the loopback cannot succeed; the check reports that rather
 *     than a pass or a false failure.
 * A request for one membership when the table holds only the other is
 * -ENOENT: the port's membership differs from what the tenant was given.
 *
 * Return: 0; -EINVAL (key 0 requested); -ENOENT (not in the table; @err names
 * the P_Key and lists the table); -EOPNOTSUPP (limited-only, see above).
 */
int ibvf_rc_pkey_pick(const uint16_t *table, size_t len, uint16_t pkey,
		      struct ibvf_rc_pkey_pick *out, char *err, size_t errlen);

/**
 * ibvf_rc_pkey_pick_port() - ibvf_rc_pkey_pick() with the RoCE rule.
 * @ethernet: the port's link layer is Ethernet (RoCE) and the caller asked
 *            for the rule (opts.roce_default_pkey); false: strict.
 *
 * Without @ethernet it is ibvf_rc_pkey_pick(). On RoCE no SM manages
 * P_Keys (IBTA vol. 1 annex A16/A17: RoCE has no subnet manager; RoCE HCAs
 * and rdma_rxe report a table holding only the default P_Key 0xffff), so a
 * tenant P_Key can never be there: when ibvf_rc_pkey_pick() says -ENOENT and
 * every valid entry of the table is 0xffff, both QPs use the first 0xffff
 * entry and @out->roce_default is set -- the caller must say that the
 * default P_Key, not the requested one, was checked. Any other RoCE table
 * (an administrator configured P_Keys) keeps the strict rule.
 *
 * Return: as ibvf_rc_pkey_pick().
 */
int ibvf_rc_pkey_pick_port(const uint16_t *table, size_t len, uint16_t pkey, bool ethernet,
			   struct ibvf_rc_pkey_pick *out, char *err, size_t errlen);

/**
 * ibvf_rc_pkey_table_format() - "[0]=0xffff [3]=0x8001", valid entries only,
 * at most 16 (then "... and N more"); "no valid entry among N" when empty.
 * Return: @buf.
 */
char *ibvf_rc_pkey_table_format(const uint16_t *table, size_t len, char *buf, size_t buflen);

/**
 * ibvf_rc_gid_pick() - choose the source GID index of a check.
 * @tab:      valid GID entries as returned by ibv_query_gid_table() (any port).
 * @n:        number of entries in @tab.
 * @port:     the port of the check; entries of other ports are ignored.
 * @ethernet: the port's link layer is Ethernet (RoCE): a GRH is mandatory.
 * @want:     requested index, or -1 to pick.
 * @out:      the index; -1 means "no GRH" (InfiniBand, routed by LID).
 *
 * Picking on RoCE prefers, lowest index first: RoCE v2 with an IPv4-mapped
 * address (::ffff:a.b.c.d, i.e. the netdev's IPv4 address), then RoCE v2
 * with a global IPv6 address, then RoCE v2 link-local, then RoCE v1. On
 * InfiniBand no GRH is needed between two QPs of one port (same subnet,
 * IBTA 8.3.1), so -1 unless @want is given.
 *
 * Return: 0, or -ENOENT (@want is not a valid entry of @port, or RoCE with
 * no GID at all; @err lists the valid indexes).
 */
int ibvf_rc_gid_pick(const struct ibv_gid_entry *tab, size_t n, uint32_t port, bool ethernet,
		     int want, int *out, char *err, size_t errlen);

/**
 * ibvf_rc_netns_path() - the file of a network namespace argument.
 * @netns: a name ("blue" -> "/run/netns/blue", as `ip netns` names them) or
 *         a path containing '/' (used as given, e.g. "/proc/123/ns/net" or
 *         the CNI_NETNS path).
 * Return: 0, or -EINVAL (empty, "." or "..", too long).
 */
int ibvf_rc_netns_path(const char *netns, char *buf, size_t buflen, char *err, size_t errlen);

#endif /* IBVF_RC_CHECK_H */
