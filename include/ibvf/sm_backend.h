/* SPDX-License-Identifier: MIT */
/*
 * ibvf SM backend ABI, version 2.
 *
 * An SM backend is a shared module (sm-backends/<name>/) that ibvfd loads with
 * dlopen(3). It exports exactly one symbol, IBVF_SM_ENTRY_SYMBOL (symbol
 * version IBVF_SM_SYMBOL_VERSION, through sm-backends/sm_backend.map), a
 * function returning a pointer to a static, read-only struct ibvf_sm_ops.
 * ibvfd refuses a module that exports the entry point of another ABI version
 * (ibvf_sm_backend_v1, ...), then checks abi_version and struct_size before
 * calling anything else.
 *
 * Rules for backends:
 *   - every call returns 0 (or a non-negative count) on success and a
 *     negative errno on failure, with a one-line reason in @err (@errlen
 *     bytes, always NUL-terminated); the reason never contains credentials;
 *   - the errno follows the error contract below: it alone decides whether
 *     the daemon retries the call;
 *   - never exit, never write to stdout/stderr, never install signal
 *     handlers, never retry; the daemon core does logging, batching, retries
 *     and backoff;
 *   - calls on one backend instance are made from one thread at a time.
 *
 * Error contract (new in version 2; version 1 retried every errno except a
 * short deny-list). An add_members() or remove_members() failure is either
 *
 *   transient - ibvf_sm_err_is_transient() is true: the SM could do it
 *     later. The core calls again with exponential backoff and jitter, a
 *     bounded number of times (8 attempts) and never past the latest
 *     deadline of the requests in the call; then the requests fail with the
 *     last errno and reason. The allow-list, and what each errno means from a backend:
 *
 *     -EAGAIN        the SM asks to come back later (HTTP 429 Too Many
 *                    Requests, 503 Service Unavailable), or a file the backend
 *                    replaces was changed by someone else meanwhile
 *     -EBUSY         a lock the backend needs is held by another process for
 *                    longer than the backend waits (opensm: lock_timeout_ms)
 *     -EINTR         the call was interrupted before it changed anything
 *     -ETIMEDOUT     no complete answer in time: connect or request timeout,
 *                    HTTP 408 or 504, an SA/SMP query unanswered, a change
 *                    not yet visible in the ports' P_Key tables
 *     -ECONNREFUSED  nothing listens at the SM's address (SM down, restarting)
 *     -ECONNRESET    the connection broke before a complete reply
 *     -ENOTCONN      the connection went away before the request was sent
 *     -EHOSTUNREACH  the SM's host name does not resolve or has no route, or
 *                    no SM has brought the backend's own port up yet
 *     -ENETUNREACH   no route to the SM's network
 *     -ENETDOWN      the local network interface is down
 *     -EREMOTEIO     the SM failed on its side (HTTP 500, 502)
 *     -ESRCH         the SM process is not running (opensm: no pid file, no
 *                    such process, or the pid belongs to another program)
 *
 *   permanent - every other errno: retrying the same call cannot help. The
 *     core does not call again; every request of the call fails at once
 *     with the backend's errno and reason. Examples the backends return:
 *     -EINVAL (bad PKey, GUID or membership; HTTP 400), -EACCES (HTTP
 *     401; umad device not accessible),
 *     -EPERM (HTTP 403; signalling OpenSM refused), -ENOENT (HTTP 404; a
 *     missing partition file), -EEXIST (HTTP 409; a GUID the administrator
 *     owns), -E2BIG (HTTP 413), -EPROTO (any other 4xx; TLS handshake
 *     refused), -EKEYREJECTED (TLS certificate or host name not verified),
 *     -EBADMSG (malformed reply; an administrator's file the backend
 *     refuses, such as a partitions.conf OpenSM would reject), -EMSGSIZE (reply too large), -EIO
 * (other 5xx; SMP or SA MAD error; a file system error), -ENODEV, -ENOMEM.
 *
 *     A permanent failure for which ibvf_sm_err_is_member_fault() is true
 *     (-EINVAL, -EEXIST, -E2BIG: one member, or the size of the call, may be
 *     at fault) of a call for several requests is split in halves, down to
 *     single requests, so the members at fault fail alone; any other
 *     permanent failure fails the whole call after one attempt.
 *
 * A backend that cannot tell a transient cause from a permanent one returns
 * the errno of the likelier cause and says both in @err. Calls must stay
 * idempotent (see add_members()), since a transient failure may have applied
 * part of the change. validate() and list_members() use the same errnos;
 * the daemon retries those on its own schedule (sm.periodic_update_s).
 *
 * Partition keys cross this ABI as the 15-bit key (0x0001..0x7fff, host
 * order, membership bit clear); membership is per member. GUIDs are port
 * GUIDs as host-order u64 (see ibvf/types.h).
 */
#ifndef IBVF_SM_BACKEND_H
#define IBVF_SM_BACKEND_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ibvf/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * Bumped on any incompatible change of struct ibvf_sm_ops, its types or the
 * error contract; the entry point's name carries the version.
 */
#define IBVF_SM_ABI_VERSION 2
/** Name of the one symbol a module exports (type ibvf_sm_entry_fn). */
#define IBVF_SM_ENTRY_SYMBOL "ibvf_sm_backend_v2"
/** Entry point names of all versions: this prefix and the version number. */
#define IBVF_SM_ENTRY_PREFIX "ibvf_sm_backend_v"
/** Version node of the entry symbol (sm-backends/sm_backend.map). */
#define IBVF_SM_SYMBOL_VERSION "IBVF_SM_2"

/**
 * ibvf_sm_err_is_transient() - does the error contract of SM ABI version 2
 * (top of this file) make the daemon retry a call that failed with @err?
 * @err: the negative errno a backend call returned (0 and positive values
 *       are not failures: false).
 * Return: true for the allow-list -EAGAIN, -EBUSY, -EINTR, -ETIMEDOUT,
 * -ECONNREFUSED, -ECONNRESET, -ENOTCONN, -EHOSTUNREACH, -ENETUNREACH,
 * -ENETDOWN, -EREMOTEIO, -ESRCH; false for every other value.
 */
static inline bool ibvf_sm_err_is_transient(int err)
{
	switch (err) {
	case -EAGAIN:
	case -EBUSY:
	case -EINTR:
	case -ETIMEDOUT:
	case -ECONNREFUSED:
	case -ECONNRESET:
	case -ENOTCONN:
	case -EHOSTUNREACH:
	case -ENETUNREACH:
	case -ENETDOWN:
	case -EREMOTEIO:
	case -ESRCH:
		return true;
	default:
		return false;
	}
}

/**
 * ibvf_sm_err_is_member_fault() - is @err a permanent failure that one
 * member of the call (or the call's size) may cause, so that the daemon
 * splits a call for several requests to find the members at fault?
 * Return: true for -EINVAL, -EEXIST and -E2BIG; false otherwise.
 */
static inline bool ibvf_sm_err_is_member_fault(int err)
{
	return err == -EINVAL || err == -EEXIST || err == -E2BIG;
}

/** One member of a partition: a port GUID and its membership. */
struct ibvf_sm_member {
	uint64_t guid; /* port GUID, host order */
	enum ibvf_membership membership;
};

/** Flags of a partition, applied when the backend creates it. */
struct ibvf_sm_pkey_flags {
	bool index0; /* put the PKey at P_Key table index 0 (UFM index0, OpenSM indx0) */
	bool ipoib;  /* create the IPoIB broadcast group (UFM ip_over_ib, OpenSM ipoib) */
};

/** Opaque per-instance state of a backend. */
struct ibvf_sm_backend;

/**
 * ibvf_sm_list_cb - called once per member by list_members().
 * @pkey:    15-bit partition key.
 * @member:  the member (valid only during the call).
 * @managed: true when ibvf manages this membership; false for memberships an
 *           administrator defined outside ibvf (read-only to ibvf).
 * Return 0 to continue, non-zero to stop listing (list_members returns it).
 */
typedef int (*ibvf_sm_list_cb)(void *arg, uint16_t pkey, const struct ibvf_sm_member *member,
			       bool managed);

struct ibvf_sm_ops {
	uint32_t abi_version; /* IBVF_SM_ABI_VERSION */
	uint32_t struct_size; /* sizeof(struct ibvf_sm_ops) as the module was built */
	const char *name;     /* "opensm", "ufm", "noop" */

	/**
	 * init() - create an instance from the backend's JSON config object
	 * (@json_config is the text of that object; unknown keys are an error).
	 */
	int (*init)(const char *json_config, struct ibvf_sm_backend **out, char *err,
		    size_t errlen);
	/** fini() - release everything; NULL is a no-op. */
	void (*fini)(struct ibvf_sm_backend *b);
	/**
	 * validate() - check reachability and version of the SM; on success
	 * writes a human-readable description (e.g. "UFM 6.18.0-5") to @desc.
	 */
	int (*validate)(struct ibvf_sm_backend *b, char *desc, size_t desclen, char *err,
			size_t errlen);
	/**
	 * add_members() - make @n GUIDs members of @pkey (creating the
	 * partition with @flags if needed; @flags NULL = the backend's
	 * configured defaults). Idempotent: adding a member that is already
	 * there with the same membership succeeds.
	 */
	int (*add_members)(struct ibvf_sm_backend *b, uint16_t pkey,
			   const struct ibvf_sm_member *members, size_t n,
			   const struct ibvf_sm_pkey_flags *flags, char *err, size_t errlen);
	/**
	 * remove_members() - remove @n GUIDs from @pkey. Idempotent: removing
	 * a GUID that is not a member succeeds.
	 */
	int (*remove_members)(struct ibvf_sm_backend *b, uint16_t pkey, const uint64_t *guids,
			      size_t n, char *err, size_t errlen);
	/**
	 * list_members() - call @cb for every member of @pkey, or of every
	 * partition when @pkey is -1.
	 */
	int (*list_members)(struct ibvf_sm_backend *b, int pkey, ibvf_sm_list_cb cb, void *arg,
			    char *err, size_t errlen);

	/*
	 * Optional entries (SM ABI 2, compatible additions): a module built
	 * before an entry existed has a smaller struct_size, and the daemon
	 * reads an entry only when struct_size covers it and it is not NULL
	 * (IBVF_SM_OPS_HAS()). Never reorder; add new entries at the end.
	 */

	/**
	 * add_members_owned() - add_members() with the owner of each member:
	 * @owners[i] (the array NULL, or an entry NULL or "": unknown) is the
	 * attachment that wants members[i], e.g. "ns/pod net1 (network)"; at
	 * most IBVF_SM_OWNER_MAX bytes of printable ASCII (the daemon cuts and
	 * replaces anything else, ibvf_sm_owner_clean()). For display and
	 * audit only: it never changes what the SM is asked to do. The daemon
	 * calls it instead of add_members() when the module has it (the
	 * `cluster` backend stores it in etcd); NULL: add_members() is called.
	 * Same errors and idempotence as add_members().
	 */
	int (*add_members_owned)(struct ibvf_sm_backend *b, uint16_t pkey,
				 const struct ibvf_sm_member *members, const char *const *owners,
				 size_t n, const struct ibvf_sm_pkey_flags *flags, char *err,
				 size_t errlen);
};

/**
 * Size of struct ibvf_sm_ops of SM ABI version 2 before any optional entry:
 * the smallest struct_size the daemon accepts.
 */
#define IBVF_SM_OPS_V2_BASE_SIZE offsetof(struct ibvf_sm_ops, add_members_owned)

/**
 * IBVF_SM_OPS_HAS() - does the module's ops table @o carry the optional
 * entry @field (its struct_size covers it, and it is not NULL)? Never read
 * an optional entry without it: an older module's table ends before it.
 */
#define IBVF_SM_OPS_HAS(o, field)                                                                  \
	((o)->struct_size >= offsetof(struct ibvf_sm_ops, field) + sizeof((o)->field) &&           \
	 (o)->field != NULL)

/** Longest owner string (bytes, NUL not counted) add_members_owned() carries. */
#define IBVF_SM_OWNER_MAX 255

/**
 * ibvf_sm_owner_clean() - copy the owner text @src (NULL: "") into @dst
 * (@dstlen bytes, at least 1), at most IBVF_SM_OWNER_MAX bytes, every byte
 * outside printable ASCII (0x20..0x7e) replaced by '?': the owner comes from
 * CNI input (pod name, network, ifname) and ends up in JSON and logs.
 * Return: @dst.
 */
static inline char *ibvf_sm_owner_clean(char *dst, size_t dstlen, const char *src)
{
	size_t i = 0;

	for (; src && src[i] && i + 1 < dstlen && i < IBVF_SM_OWNER_MAX; i++) {
		unsigned char c = (unsigned char)src[i];

		dst[i] = c >= 0x20 && c <= 0x7e ? (char)c : '?';
	}
	dst[i] = 0;
	return dst;
}

/** Type of the exported entry point. */
typedef const struct ibvf_sm_ops *(*ibvf_sm_entry_fn)(void);

#ifdef __cplusplus
}
#endif
#endif /* IBVF_SM_BACKEND_H */
