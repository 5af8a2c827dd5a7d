/* SPDX-License-Identifier: MIT */
/*
 * C harness for the UFM API simulator (tests/lab/ufm-sim/ufm_sim.py): start
 * it on a free loopback port in a private temp dir, drive its control API
 * (/_sim/..., README.md next to this file), stop it by PID.
 *
 * The simulator child gets PR_SET_PDEATHSIG(SIGTERM) and watches its parent,
 * so it dies with the test even when the test crashes.
 */
#ifndef IBVF_UFM_SIM_HARNESS_H
#define IBVF_UFM_SIM_HARNESS_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct ufm_sim_opts {
	bool tls;	 /* HTTPS with a test CA made by the simulator */
	const char *san; /* server certificate subjectAltName, NULL: default */
	bool require_client_cert;
	const char *user; /* Basic auth user on /ufmRest, NULL: none */
	const char *password;
	const char *token; /* access token on /ufmRestV3, NULL: none */
};

struct ufm_sim {
	pid_t pid;
	int port;
	bool tls;
	char dir[256];		      /* private temp dir, removed by ufm_sim_stop() */
	char ca_file[PATH_MAX];	      /* the CA that signed the server certificate */
	char other_ca_file[PATH_MAX]; /* an unrelated CA (for "wrong CA" tests) */
	char client_cert[PATH_MAX];   /* a client certificate the simulator trusts */
	char client_key[PATH_MAX];
	char password_file[PATH_MAX]; /* holds opts.password (when given) */
	char token_file[PATH_MAX];    /* holds opts.token (when given) */
	char base_url[64];	      /* "https://127.0.0.1:<port>" */
};

/** ufm_sim_script() - path of ufm_sim.py ($IBVF_UFM_SIM overrides the built-in path). */
const char *ufm_sim_script(void);

/**
 * ufm_sim_missing() - NULL when python3, openssl and the script are there;
 * else a reason to skip ("python3 not found in PATH").
 */
const char *ufm_sim_missing(void);

/**
 * ufm_sim_skip() - print "SKIP: <reason>" to stderr and return the exit code:
 * 77 (meson SKIP), or 1 when IBVF_REQUIRE_LABS=1 (CI: a missing lab fails).
 */
int ufm_sim_skip(const char *reason);

/**
 * ufm_sim_start() - start a simulator and wait (up to 20 s) until it listens.
 * Return: 0, or a negative errno with the reason in @err.
 */
int ufm_sim_start(const struct ufm_sim_opts *o, struct ufm_sim *s, char *err, size_t errlen);

/** ufm_sim_stop() - SIGTERM (SIGKILL after 2 s) by PID, reap, remove the temp dir. */
void ufm_sim_stop(struct ufm_sim *s);

/**
 * ufm_sim_ctl() - one control call, e.g. ("POST", "/_sim/faults", "{...}").
 * *@reply (when not NULL) gets the JSON reply (caller decrefs).
 * Return: the HTTP status, or a negative errno.
 */
int ufm_sim_ctl(struct ufm_sim *s, const char *method, const char *path, const char *body,
		json_t **reply);

/** ufm_sim_reset() - POST /_sim/reset: state, counters, faults, latency, cap. 0 or -EIO. */
int ufm_sim_reset(struct ufm_sim *s);

/** ufm_sim_fault() - add one fault rule (a JSON object text). 0 or -EIO. */
int ufm_sim_fault(struct ufm_sim *s, const char *rule_json);

/** ufm_sim_config() - POST /_sim/config with @json. 0 or -EIO. */
int ufm_sim_config(struct ufm_sim *s, const char *json);

/** ufm_sim_calls() - calls so far to @endpoint ("add", "remove", "list", "version", "other"). */
long ufm_sim_calls(struct ufm_sim *s, const char *endpoint);

/** ufm_sim_last_request() - the newest logged UFM request (caller decrefs), or NULL. */
json_t *ufm_sim_last_request(struct ufm_sim *s);

#endif /* IBVF_UFM_SIM_HARNESS_H */
