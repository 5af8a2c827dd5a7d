/* SPDX-License-Identifier: MIT */
/*
 * ibvf SM backend ABI, version 1.
 *
 * An SM backend is a shared module (sm-backends/<name>/) that ibvfd loads with
 * dlopen(3). It exports exactly one symbol, IBVF_SM_ENTRY_SYMBOL, a function
 * returning a pointer to a static, read-only struct ibvf_sm_ops. ibvfd
 * checks abi_version and struct_size before calling anything else.
 *
 * Rules for backends:
 *   - every call returns 0 (or a non-negative count) on success and a
 *     negative errno on failure, with a one-line reason in @err (@errlen
 *     bytes, always NUL-terminated); the reason never contains credentials;
 *   - never exit, never write to stdout/stderr, never install signal
 *     handlers; the daemon core does logging, batching, retries and backoff;
 *   - calls on one backend instance are made from one thread at a time.
 *
 * Partition keys cross this ABI as the 15-bit key (0x0001..0x7fff, host
 * order, membership bit clear); membership is per member. GUIDs are port
 * GUIDs as host-order u64 (see ibvf/types.h).
 */
#ifndef IBVF_SM_BACKEND_H
#define IBVF_SM_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ibvf/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Bumped on any incompatible change of struct ibvf_sm_ops or its types. */
#define IBVF_SM_ABI_VERSION 1
/** Name of the one symbol a module exports (type ibvf_sm_entry_fn). */
#define IBVF_SM_ENTRY_SYMBOL "ibvf_sm_backend_v1"

/** One member of a partition: a port GUID and its membership. */
struct ibvf_sm_member {
	uint64_t guid;			/* port GUID, host order */
	enum ibvf_membership membership;
};

/** Flags of a partition, applied when the backend creates it. */
struct ibvf_sm_pkey_flags {
	bool index0;	/* put the PKey at P_Key table index 0 (UFM index0, OpenSM indx0) */
	bool ipoib;	/* create the IPoIB broadcast group (UFM ip_over_ib, OpenSM ipoib) */
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
	uint32_t abi_version;	/* IBVF_SM_ABI_VERSION */
	uint32_t struct_size;	/* sizeof(struct ibvf_sm_ops) as the module was built */
	const char *name;	/* "opensm", "ufm", "noop" */

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
};

/** Type of the exported entry point. */
typedef const struct ibvf_sm_ops *(*ibvf_sm_entry_fn)(void);

#ifdef __cplusplus
}
#endif
#endif /* IBVF_SM_BACKEND_H */
