/* SPDX-License-Identifier: MIT */
/*
 * Verifying through SMPs that OpenSM applied a partition change: after the
 * reload, each added GUID's port must hold the P_Key with the right
 * membership bit, and each removed one must have lost it (IBTA vol. 1,
 * 10.9.1.2: bit 15 set = full member; 14.2.5.7 P_KeyTable).
 *
 * The SMP work itself (SA GUID → LID, PortInfo, P_KeyTable, polling with a
 * bound) is the port watcher's (daemon/port/port_watch.h); this module is a
 * small interface over it so the backend logic can be tested with a fake.
 */
#ifndef IBVF_PKEY_VERIFY_H
#define IBVF_PKEY_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** The expected P_Key table state of one port. */
enum pv_want {
	PV_ABSENT = 0, /* no entry with the key, full or limited */
	PV_LIMITED,    /* the entry with bit 15 clear */
	PV_FULL,       /* the entry with bit 15 set */
};

/** Which ports are verified (config key "verify"). */
enum pv_policy {
	PV_OFF = 0, /* none: trust the reload */
	PV_FABRIC,  /* ports the SA knows when the change is made (default) */
	PV_ALL,	    /* every added GUID must come up with the P_Key */
};

/** What a verifier can do; every call returns 0 or a negative errno. */
struct pkey_verifier_ops {
	/** resolve() - port GUID → LID; -ENOENT when the SA knows no such port. */
	int (*resolve)(void *ctx, uint64_t guid, uint16_t *lid, char *err, size_t errlen);
	/**
	 * wait() - poll the port at @lid until its P_Key table shows @pkey
	 * (15-bit) as @want, at most @timeout_ms; -ETIMEDOUT with what was seen.
	 */
	int (*wait)(void *ctx, uint16_t lid, uint16_t pkey, enum pv_want want, uint32_t timeout_ms,
		    char *err, size_t errlen);
	/** name() - where the SMPs leave from, e.g. "mlx5_0:1". */
	const char *(*name)(void *ctx);
	void (*close)(void *ctx);
};

struct pkey_verifier {
	const struct pkey_verifier_ops *ops; /* NULL: not open */
	void *ctx;
};

/** One port to check. */
struct pv_item {
	uint64_t guid;
	enum pv_want want;
	uint16_t lid; /* resolved LID; 0 = not known (yet) */
	bool skip;    /* not verified (see pv_prepare()) */
};

/**
 * pv_open_smp() - a verifier sending SMPs from local umad port @ca/@port
 * (NULL/0: libibumad's defaults) through the port watcher's fabric source,
 * polling a port every @poll_min_ms at first, backing off to @poll_max_ms
 * while nothing changes (MAD timeouts: the port watcher's defaults).
 * Return: 0, or ibvf_port_src_open()'s errors.
 */
int pv_open_smp(const char *ca, int port, uint32_t poll_min_ms, uint32_t poll_max_ms,
		struct pkey_verifier *out, char *err, size_t errlen);

/** pv_close() - close an open verifier (a closed one is a no-op). */
void pv_close(struct pkey_verifier *v);

/**
 * pv_prepare() - before the change, resolve each item's GUID to a LID.
 * Items the caller marked @skip stay skipped. A GUID the SA does not know
 * is skipped for PV_ABSENT (no port, no P_Key) and with PV_FABRIC (OpenSM
 * ignores GUIDs not on the fabric; the port watcher waits for them when
 * they come up); with PV_ALL it is resolved again after the reload.
 * Return: how many items will be verified, or a negative errno when the SA
 * cannot be asked at all (no SM LID, MAD timeout).
 */
int pv_prepare(struct pkey_verifier *v, enum pv_policy policy, struct pv_item *items, size_t n,
	       char *err, size_t errlen);

/**
 * pv_run() - after the reload, wait until every item that is not skipped
 * shows @pkey as wanted; @timeout_ms bounds the whole run.
 * Return: 0; -ETIMEDOUT naming how many ports failed and the first few
 * (GUID, LID and what their P_Key table held).
 */
int pv_run(struct pkey_verifier *v, uint16_t pkey, struct pv_item *items, size_t n,
	   uint32_t timeout_ms, char *err, size_t errlen);

/** pv_policy_parse() - "off", "fabric", "all"; -EINVAL otherwise. */
int pv_policy_parse(const char *s, enum pv_policy *out);

#endif /* IBVF_PKEY_VERIFY_H */
