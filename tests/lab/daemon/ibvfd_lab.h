/* SPDX-License-Identifier: MIT */
/*
 * Harness for whole-daemon tests and benchmarks: a private temp dir with a
 * config, fake VFs (vf.driver "fake"), a state dir, a NOTIFY_SOCKET the
 * daemon reports READY=1 to; start/stop the real ibvfd by PID; API helpers.
 */
#ifndef IBVF_IBVFD_LAB_H
#define IBVF_IBVFD_LAB_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "api_client.h"

#define LAB_RANGE_START 0x0002c90300b00001ull
#define LAB_RANGE_END	0x0002c90300bfffffull

struct lab {
	char dir[64];
	char cfg[128], sock[128], smfile[128], vfdir[128], state[128], notify[128], log[128];
	char failfile[128];
	const char *ibvfd;
	char backend[32], moddir[512], backend_json[PATH_MAX + 512];
	unsigned window_ms;	/* sm.batch_window_ms, default 5 */
	unsigned periodic_s;	/* sm.periodic_update_s, 0 = 1 */
	char daemon_extra[256]; /* appended inside the "daemon" object */
	const char *reconcile;	/* daemon.reconcile, NULL = "fix" */
	char pool_sync[8];
	int n_vfs;
	int nfd; /* our NOTIFY_SOCKET */
	pid_t pid;
	const char *delay_ms; /* IBVF_FAKE_VF_DELAY_MS for the daemon */
	bool warm;	      /* vf.warm (issue 17 item 3); default off for the fake driver */
};

/**
 * lab_init() - temp dir, @n_vfs fake VFs "0000:BB:SS.F" from bus 05,
 * 256 per bus (lab_pci()), a
 * config with SM backend @backend from @moddir (@backend_json: its config
 * object text; NULL for the file backend's default).
 */
int lab_init(struct lab *l, const char *ibvfd, int n_vfs, const char *backend, const char *moddir,
	     const char *backend_json);
void lab_write_config(struct lab *l);
const char *lab_pci(int vf, char buf[16]);
bool lab_wait_notify(struct lab *l, const char *what, int ms);
void lab_drain_notify(struct lab *l);
/** lab_start() - start ibvfd and wait for READY=1 (@timeout_ms). Return pid or -1. */
pid_t lab_start(struct lab *l, int timeout_ms);
/** lab_stop() - signal, wait (10 s, then SIGKILL). Return the wait status or -1. */
int lab_stop(struct lab *l, int sig);
void lab_fini(struct lab *l);

json_t *lab_owner(const char *cid);
int lab_api(struct lab *l, const char *method, json_t *params, json_t **res,
	    struct ibvf_rpc_error *re, int timeout_ms);
int lab_prepare(struct lab *l, const char *cid, int vf, const char *pkey, json_t **res,
		struct ibvf_rpc_error *re);
int lab_release(struct lab *l, const char *cid);
/**
 * lab_release_at() - release @cid saying where it was attached, as the CNI
 * plugin's DEL does: VF @vf (-1: not said) and GUID @guid (0: not said).
 */
int lab_release_at(struct lab *l, const char *cid, int vf, uint64_t guid, json_t **res);
/** lab_rss_kb() - VmRSS of @pid in kB, or -1. */
long lab_rss_kb(pid_t pid);

/** TAP counters of lab_result(). */
extern int lab_n_ok, lab_n_fail;

/** lab_result() - print one TAP line "ok N - ..." / "not ok N - ..." and count it. */
void lab_result(bool ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
