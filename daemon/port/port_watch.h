/* SPDX-License-Identifier: MIT */
/*
 * Port watcher: is an InfiniBand port ready to carry a tenant's traffic?
 *
 * "Ready" (docs/port-ready.md) means PortState ACTIVE, a nonzero base LID,
 * and the tenant P_Key in the port's P_Key table with the expected
 * membership. This module reads that state from one of two sources:
 *
 *   - local:  libibumad umad_get_ca()/umad_get_port() on a local RDMA device
 *             (live sysfs on hardware, re-read on every poll). Sees only the
 *             device's own port.
 *   - fabric: SMPs through libibmad (Get PortInfo, attribute 0x15; Get
 *             P_KeyTable, attribute 0x16; IBTA vol. 1, 14.2.5) sent from a
 *             local umad port to a target addressed by LID, by port GUID
 *             (resolved to a LID through an SA PathRecord query, IBTA 15.2.5.16)
 *             or by directed route. This is the SM's view of the port. Under
 *             umad2sim (the fabric lab) the local sysfs is a snapshot taken at
 *             process start, so labs use this source.
 *
 * Threads: libibmad keeps unlocked global state (mad_trid()'s counter) and
 * its RPC loop discards any MAD whose TID it did not send, so a struct
 * ibvf_port_src (which owns one struct ibmad_port / umad fd) must be used by
 * one thread only: open one source per thread, or give the source to one
 * owner thread (ibvfd: its event-loop thread) and send it requests. Never
 * share a source with an SA Report listener.
 *
 * Byte order: every LID, P_Key and GUID in this API is a host-order integer;
 * the module converts from the network-order MAD fields.
 */
#ifndef IBVF_PORT_WATCH_H
#define IBVF_PORT_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/**
 * Port watcher (docs/config.md "port_watch").
 * @source: where port state is read: IBVF_PORT_SRC_LOCAL (0, libibumad sysfs,
 *          the default) or IBVF_PORT_SRC_FABRIC (1, SMPs through libibmad).
 */
struct ibvf_port_watch_config {
	int source;		 /* enum ibvf_port_source; "local" (default) or "fabric" */
	uint32_t poll_min_ms;	 /* first poll interval, ms; default 10 */
	uint32_t poll_max_ms;	 /* backoff cap, ms; default 500 */
	uint32_t mad_timeout_ms; /* per SMP/SA MAD attempt, ms; default 200 */
	uint32_t mad_retries;	 /* libibmad retries per MAD; default 2 */
};

/**
 * ibvf_port_watch_config_defaults() - fill @pw with the defaults above.
 * Pure data, in port_watch_config.c (layer port_config: links no libibumad
 * or libibmad, so programs that only read a config, e.g. the CNI plugin,
 * do not load them). No errors.
 */
void ibvf_port_watch_config_defaults(struct ibvf_port_watch_config *pw);

/** Most P_Key table entries read from one port (16 blocks of 32; mlx5 ports have 128). */
#define IBVF_PKEY_TABLE_MAX 512
/** Entries per P_KeyTable SMP block (IBTA vol. 1, 14.2.5.7). */
#define IBVF_PKEY_BLOCK_SIZE 32
/** Longest directed route accepted, in hops (IBTA vol. 1, 14.2.2.2: 63 max). */
#define IBVF_DR_MAX_HOPS 63
/** Buffer for ibvf_port_describe(): state, LID, verdict and the whole table. */
#define IBVF_PORT_DESC_LEN 4096

/** PortInfo:PortState (IBTA vol. 1, 14.2.5.6, table 155). */
enum ibvf_port_state {
	IBVF_PORT_NOP = 0, /* no state change / unknown */
	IBVF_PORT_DOWN = 1,
	IBVF_PORT_INIT = 2,
	IBVF_PORT_ARMED = 3,
	IBVF_PORT_ACTIVE = 4,
	IBVF_PORT_ACTIVE_DEFER = 5,
};

/** Where port state is read from; see the file comment. */
enum ibvf_port_source {
	IBVF_PORT_SRC_LOCAL = 0,
	IBVF_PORT_SRC_FABRIC = 1,
};

/** How a fabric-source query addresses its target port. */
enum ibvf_port_target_kind {
	IBVF_TARGET_SELF = 0, /* the source's own port (local: sysfs; fabric: DR path "0") */
	IBVF_TARGET_LID,      /* LID-routed SMP to @lid */
	IBVF_TARGET_GUID,     /* SA PathRecord → LID, re-resolved when a query fails */
	IBVF_TARGET_DR,	      /* directed route @dr ("0,1,5": out port 1, then 5) */
};

/**
 * struct ibvf_port_target - which port to look at.
 * @kind:  see enum ibvf_port_target_kind; the local source takes only SELF.
 * @lid:   IBVF_TARGET_LID: unicast LID (1..0xbfff), host order.
 * @guid:  IBVF_TARGET_GUID: port GUID, host order.
 * @dr:    IBVF_TARGET_DR: comma-separated out-port list starting with 0,
 *         as smpquery -D takes it.
 * @port:  port number on the target node used as PortInfo's attribute
 *         modifier and in P_KeyTable's modifier bits 16..31 (IBTA 14.2.5.6,
 *         14.2.5.7). 0 = the port the SMP arrives on, right for CA ports; a
 *         switch port needs its number.
 */
struct ibvf_port_target {
	enum ibvf_port_target_kind kind;
	uint16_t lid;
	uint64_t guid;
	char dr[4 * (IBVF_DR_MAX_HOPS + 1)];
	uint8_t port;
};

/**
 * struct ibvf_port_info - one observation of a port.
 * @reachable:  false when the query failed (MAD timeout, unknown device,
 *              GUID not known to the SA); then only @error and the address
 *              fields are meaningful.
 * @error:      why @reachable is false ("" when reachable).
 * @state:      PortInfo:PortState (enum ibvf_port_state).
 * @phys_state: PortInfo:PortPhysicalState (1 Sleep, 2 Polling, 3 Disabled,
 *              4 PortConfigurationTraining, 5 LinkUp, 6 LinkErrorRecovery,
 *              7 PhyTest; IBTA 14.2.5.6).
 * @lid:        base LID (0 = none assigned yet), host order.
 * @lmc:        LID mask control.
 * @sm_lid:     LID of the master SM as the port knows it (0 = none).
 * @port_guid:  port GUID, host order (local: sysfs gids/0; fabric: NodeInfo,
 *              or the target GUID; 0 when unknown).
 * @link_layer_ib: local source: sysfs link_layer is "InfiniBand"; fabric: true.
 * @pkey_cap:   P_Key table size the port reports (local: entries in sysfs
 *              pkeys/; fabric: NodeInfo:PartitionCap for a CA).
 * @n_pkeys:    entries read into @pkeys (min(@pkey_cap, IBVF_PKEY_TABLE_MAX)).
 * @pkeys:      the P_Key table, host order, indexed by P_Key index; 0x0000
 *              and 0x8000 are empty slots (IBTA 10.9.1.1). Bit 15 is the
 *              membership bit: 1 full, 0 limited (IBTA 10.9.1.2).
 * @ms:         CLOCK_MONOTONIC time of the observation, milliseconds.
 */
struct ibvf_port_info {
	bool reachable;
	char error[256];
	uint8_t state;
	uint8_t phys_state;
	uint16_t lid;
	uint8_t lmc;
	uint16_t sm_lid;
	uint64_t port_guid;
	bool link_layer_ib;
	uint16_t pkey_cap;
	uint16_t n_pkeys;
	uint16_t pkeys[IBVF_PKEY_TABLE_MAX];
	int64_t ms;
};

/** Which entries a P_Key lookup accepts (IBTA vol. 1, 10.9.1.2). */
enum ibvf_pkey_match {
	IBVF_PKEY_MATCH_ANY = 0, /* full (0x8000|k) or limited (k) */
	IBVF_PKEY_MATCH_FULL,	 /* only 0x8000|k */
	IBVF_PKEY_MATCH_LIMITED, /* only k (bit 15 clear) */
};

/** What a wait expects of the P_Key. */
enum ibvf_pkey_want {
	IBVF_PKEY_WANT_NONE = 0, /* do not look at the P_Key table */
	IBVF_PKEY_WANT_PRESENT,	 /* an entry matching @match exists */
	IBVF_PKEY_WANT_ABSENT,	 /* no entry matching @match exists */
};

/**
 * struct ibvf_port_cond - the condition a wait waits for; all parts must hold.
 * @state:     0 = any; otherwise exactly this PortState (e.g. IBVF_PORT_ACTIVE,
 *             or IBVF_PORT_DOWN to wait for a link loss).
 * @need_lid:  base LID != 0.
 * @pkey_want: see enum ibvf_pkey_want.
 * @pkey:      the partition key; only bits 0..14 are compared, @match says
 *             which membership counts.
 * @match:     see enum ibvf_pkey_match.
 * @unreachable: true = the condition is "the port cannot be queried" (e.g. a
 *             LID-routed SMP after the link went down); other fields ignored.
 */
struct ibvf_port_cond {
	uint8_t state;
	bool need_lid;
	enum ibvf_pkey_want pkey_want;
	uint16_t pkey;
	enum ibvf_pkey_match match;
	bool unreachable;
};

/** ibvf_port_cond_ready() - the "ready" condition: ACTIVE, LID != 0, @pkey present per @match. */
struct ibvf_port_cond ibvf_port_cond_ready(uint16_t pkey, enum ibvf_pkey_match match);

/** Opaque: one open source (umad CA/port, plus a struct ibmad_port for the fabric source). */
struct ibvf_port_src;

/**
 * ibvf_port_src_open() - open a port-state source on a local CA port.
 * @ca:      RDMA device name as libibumad lists it ("mlx5_0"); NULL = the
 *           first CA (libibumad's default).
 * @port:    port number on @ca (1-based); 0 = libibumad's default port
 *           (first ACTIVE, else first).
 * @kind:    IBVF_PORT_SRC_LOCAL or IBVF_PORT_SRC_FABRIC.
 * @cfg:     MAD timeout/retries and poll bounds (NULL = defaults of
 *           ibvf_port_watch_config_defaults()).
 * @out:     the new source; free with ibvf_port_src_close().
 *
 * The fabric source opens /dev/infiniband/umadN of @ca/@port for the SMI,
 * directed-route SMI and SA classes (mad_rpc_open_port()). That needs root
 * or CAP_NET_ADMIN on hardware (rdma-core udev rule: umad* mode 0600).
 *
 * Return: 0; -ENODEV (no such CA or port), -EPROTONOSUPPORT (the port's
 * link layer is not InfiniBand), -EACCES (umad device not accessible: the
 * message names the device file and the privilege needed), -EIO (libibmad
 * could not open the port), -ENOMEM. @err says which.
 */
int ibvf_port_src_open(const char *ca, int port, enum ibvf_port_source kind,
		       const struct ibvf_port_watch_config *cfg, struct ibvf_port_src **out,
		       char *err, size_t errlen);

/** ibvf_port_src_close() - close the umad/libibmad port and free @src (NULL is fine). */
void ibvf_port_src_close(struct ibvf_port_src *src);

/** ibvf_port_src_kind() - the source's kind. */
enum ibvf_port_source ibvf_port_src_kind(const struct ibvf_port_src *src);

/** ibvf_port_src_name() - "mlx5_0:1", the CA and port the source is open on. */
const char *ibvf_port_src_name(const struct ibvf_port_src *src);

/**
 * ibvf_port_src_self() - the source's own port as read from libibumad
 * (umad_get_port(), which under umad2sim is the start-up snapshot).
 * Return: 0 or a negative errno (see ibvf_port_query()).
 */
int ibvf_port_src_self(struct ibvf_port_src *src, struct ibvf_port_info *out, char *err,
		       size_t errlen);

/**
 * ibvf_port_resolve_guid() - port GUID → base LID through the SA (fabric
 * source only): an SA PathRecord Get (IBTA vol. 1, 15.2.5.16) from this
 * port's GID to <subnet prefix, @guid>, sent to the SM LID the source's port
 * knows (libibmad ib_path_query_via()). The SM answers only for ports it
 * has brought up, so a port in INIT has no LID yet.
 * @lid: host-order DLID of the path.
 *
 * Results are not cached here; GUID targets of queries are (32 per source,
 * dropped when a query to the LID fails or answers with another GUID).
 *
 * Return: 0; -ENOENT (the SA knows no path to @guid: port down, INIT, or
 * GUID not on the fabric), -EHOSTUNREACH (this port has no SM LID: no SM
 * has swept), -ETIMEDOUT (the SA did not answer, or no SMP reply from the
 * local port), -EIO (other MAD status), -EOPNOTSUPP (local source),
 * -EINVAL (@guid is 0).
 */
int ibvf_port_resolve_guid(struct ibvf_port_src *src, uint64_t guid, uint16_t *lid, char *err,
			   size_t errlen);

/**
 * ibvf_port_query_portinfo() - Get PortInfo of @t: state, phys state, LID,
 * LMC, SM LID (and port GUID, from NodeInfo for the fabric source). Does not
 * read the P_Key table (@out->n_pkeys = 0).
 *
 * Return: 0 (then @out->reachable); -ETIMEDOUT (no SMP reply: libibmad gave
 * up after its retries), -ENOENT (GUID target not resolvable through the
 * SA), -EOPNOTSUPP (local source asked for a non-SELF target), -EINVAL (bad
 * target), -EIO. On error @out->reachable is false and @out->error repeats
 * @err.
 */
int ibvf_port_query_portinfo(struct ibvf_port_src *src, const struct ibvf_port_target *t,
			     struct ibvf_port_info *out, char *err, size_t errlen);

/**
 * ibvf_port_query_pkeys() - read the P_Key table of @t: all P_KeyTable
 * blocks up to the table size (NodeInfo:PartitionCap for a CA port; for a
 * switch port, SwitchInfo:PartitionEnforcementCap), 32 entries per block,
 * attribute modifier block | port << 16 (IBTA vol. 1, 14.2.5.7). Local
 * source: sysfs ports/N/pkeys/ through umad_get_port().
 * Fills @out->pkey_cap, @out->n_pkeys and @out->pkeys (plus @out->ms,
 * @out->reachable and @out->error); the PortInfo fields are left as they are.
 *
 * Return: as ibvf_port_query_portinfo().
 */
int ibvf_port_query_pkeys(struct ibvf_port_src *src, const struct ibvf_port_target *t,
			  struct ibvf_port_info *out, char *err, size_t errlen);

/**
 * ibvf_port_query() - PortInfo and the whole P_Key table of @t in one
 * observation (@out->ms set). Return: as ibvf_port_query_portinfo().
 */
int ibvf_port_query(struct ibvf_port_src *src, const struct ibvf_port_target *t,
		    struct ibvf_port_info *out, char *err, size_t errlen);

/**
 * ibvf_port_smp_get() - one SMP Get of attribute @attr (modifier @mod) sent
 * through @src (fabric source only), addressed by directed route @dr
 * ("0,1,5" as smpquery -D takes it) when @lid is 0, else LID-routed to @lid.
 * @data: IB_SMP_DATA_SIZE (64) bytes: the attribute as it came in the MAD
 *        (network order; decode with libibmad's mad_decode_field()).
 * Used by the fabric walk (fabric_scan.h); attributes: IBTA vol. 1, 14.2.5.
 * Return: 0; -ETIMEDOUT (no reply after the retries), -EIO (bad MAD status
 * or umad failure), -EINVAL (bad route), -EOPNOTSUPP (local source).
 */
int ibvf_port_smp_get(struct ibvf_port_src *src, const char *dr, uint16_t lid, unsigned attr,
		      unsigned mod, uint8_t data[64], char *err, size_t errlen);

/**
 * ibvf_pkey_find() - look up partition key @pkey in a P_Key table.
 * @table: @n host-order entries, indexed by P_Key index.
 * @pkey:  only bits 0..14 are used (0x8001 and 0x0001 look up the same key).
 * @match: FULL accepts only 0x8000|k, LIMITED only k, ANY either (the full
 *         entry wins when a table holds both).
 * @entry: when not NULL, the matching entry with its membership bit.
 *
 * Empty slots (0x0000, 0x8000) never match (IBTA vol. 1, 10.9.1.1).
 * Return: the P_Key index (>= 0, what a QP's pkey_index needs), -ENOENT when
 * absent, -EINVAL when the key is 0.
 */
int ibvf_pkey_find(const uint16_t *table, size_t n, uint16_t pkey, enum ibvf_pkey_match match,
		   uint16_t *entry);

/**
 * ibvf_port_cond_met() - does observation @info satisfy @c?
 * @pkey_index: when not NULL and the P_Key is wanted present, its index
 *              (else -1).
 */
bool ibvf_port_cond_met(const struct ibvf_port_info *info, const struct ibvf_port_cond *c,
			int *pkey_index);

/**
 * ibvf_port_describe() - one line about @info against @c for errors and
 * logs, e.g. "port ACTIVE (LinkUp), LID 7, SM LID 1, but P_Key 0x8001 absent;
 * table: 0xffff 0x7fff" or "port unreachable: no SMP reply from LID 7".
 * @c may be NULL (just the state and the non-empty table).
 * Return: @buf (IBVF_PORT_DESC_LEN bytes hold any description).
 */
char *ibvf_port_describe(const struct ibvf_port_info *info, const struct ibvf_port_cond *c,
			 char *buf, size_t len);

/** ibvf_port_state_name() - "DOWN", "INIT", "ARMED", "ACTIVE", ... or "?". */
const char *ibvf_port_state_name(unsigned state);

/** ibvf_port_phys_state_name() - "LinkUp", "Polling", "Disabled", ... or "?". */
const char *ibvf_port_phys_state_name(unsigned phys_state);

/**
 * ibvf_port_wait() - poll @t until @c holds, @timeout_ms passes, or
 * @cancel_fd becomes readable.
 * @timeout_ms: total time budget, ms (0 = one query, no waiting).
 * @cancel_fd:  -1, or an fd (eventfd, pipe, signalfd) whose readability
 *              cancels the wait; it is polled, never read.
 * @observed:   the last observation (on success the one that satisfied @c);
 *              may be NULL.
 * @pkey_index: when not NULL and @c wants a P_Key present: its index.
 *
 * Polling is adaptive: the first interval is cfg.poll_min_ms, each poll that
 * sees no change doubles it up to cfg.poll_max_ms, a change resets it. Query
 * failures (MAD timeouts, an SA that does not know the GUID yet, an SM that
 * never answers) are observations, not errors: the wait goes on and reports
 * them if it times out.
 *
 * Return: 0 when @c holds; -ETIMEDOUT with @err = "timed out after N ms:
 * <ibvf_port_describe() of the last observation>"; -ECANCELED; -EINVAL (bad
 * condition or target); -EOPNOTSUPP (target not supported by the source).
 */
int ibvf_port_wait(struct ibvf_port_src *src, const struct ibvf_port_target *t,
		   const struct ibvf_port_cond *c, uint32_t timeout_ms, int cancel_fd,
		   struct ibvf_port_info *observed, int *pkey_index, char *err, size_t errlen);

/* ------------------------------------------------------------ watch mode -- */

/** Bits of the @changed mask passed to an ibvf_port_watch_fn. */
enum ibvf_port_change {
	IBVF_PORT_CHG_REACHABLE = 1 << 0, /* became reachable or unreachable */
	IBVF_PORT_CHG_STATE = 1 << 1,
	IBVF_PORT_CHG_PHYS = 1 << 2,
	IBVF_PORT_CHG_LID = 1 << 3, /* LID or LMC */
	IBVF_PORT_CHG_SM_LID = 1 << 4,
	IBVF_PORT_CHG_PKEYS = 1 << 5, /* any P_Key table entry */
	IBVF_PORT_CHG_GUID = 1 << 6,
};

/**
 * ibvf_port_watch_fn - called by ibvf_port_watch_dispatch() for the first
 * observation (@prev NULL, @changed all bits) and for each one that differs
 * from the previous (@changed: enum ibvf_port_change bits). Runs on the
 * dispatching thread; must not call ibvf_port_watch_free() on its own watch.
 */
typedef void (*ibvf_port_watch_fn)(const struct ibvf_port_info *prev,
				   const struct ibvf_port_info *now, unsigned changed, void *arg);

/** Opaque: a timerfd-driven poller of one port. */
struct ibvf_port_watch;

/**
 * ibvf_port_watch_new() - watch @t through @src, reporting changes to @fn.
 * The watch owns a timerfd (CLOCK_MONOTONIC, non-blocking, close-on-exec)
 * armed for an immediate first poll. Integration with an epoll loop:
 *
 *     epoll_ctl(ep, EPOLL_CTL_ADD, ibvf_port_watch_fd(w), EPOLLIN);
 *     ... when it is readable: ibvf_port_watch_dispatch(w, err, len);
 *
 * Each dispatch reads the timer, queries the port once (blocking for at most
 * the MAD timeout × (retries + 1) per SMP), calls @fn on a change and
 * re-arms the timer with the adaptive interval (cfg.poll_min_ms after a
 * change, doubling to cfg.poll_max_ms while nothing changes). @src is
 * borrowed and must outlive the watch; @src's thread rule applies: dispatch
 * on the thread that owns @src.
 *
 * Return: 0; -EINVAL, -EOPNOTSUPP (target), -ENOMEM, or timerfd_create()'s
 * errno.
 */
int ibvf_port_watch_new(struct ibvf_port_src *src, const struct ibvf_port_target *t,
			ibvf_port_watch_fn fn, void *arg, struct ibvf_port_watch **out, char *err,
			size_t errlen);

/** ibvf_port_watch_fd() - the timerfd to put into epoll (EPOLLIN). */
int ibvf_port_watch_fd(const struct ibvf_port_watch *w);

/**
 * ibvf_port_watch_dispatch() - one poll (see ibvf_port_watch_new()); call
 * when the fd is readable. A spurious call (timer not expired) does nothing.
 * Query failures are reported to @fn as an unreachable observation, not
 * returned.
 * Return: 1 if @fn was called, 0 if not, or a negative errno (timerfd error).
 */
int ibvf_port_watch_dispatch(struct ibvf_port_watch *w, char *err, size_t errlen);

/** ibvf_port_watch_last() - the latest observation (NULL before the first poll). */
const struct ibvf_port_info *ibvf_port_watch_last(const struct ibvf_port_watch *w);

/** ibvf_port_watch_free() - disarm and close the timerfd, free @w (NULL is fine). */
void ibvf_port_watch_free(struct ibvf_port_watch *w);

#endif /* IBVF_PORT_WATCH_H */
