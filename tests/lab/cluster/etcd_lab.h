/* SPDX-License-Identifier: MIT */
/*
 * The etcd lab: a real etcd cluster (Debian's etcd-server) of N members on
 * loopback, in a private temp dir, started and stopped by PID by the test.
 * Each member listens for clients on plain HTTP and on HTTPS (a test CA made
 * here with openssl; client certificates required on HTTPS), and on a peer
 * port. Members get PR_SET_PDEATHSIG(SIGKILL): they die with the test.
 */
#ifndef IBVF_ETCD_LAB_H
#define IBVF_ETCD_LAB_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define ETCD_LAB_MAX 5

struct etcd_lab_member {
	pid_t pid; /* 0: not running */
	int client_port, tls_port, peer_port;
	char url[64];	  /* "http://127.0.0.1:<client_port>" */
	char tls_url[64]; /* "https://127.0.0.1:<tls_port>" */
};

struct etcd_lab {
	int n;
	struct etcd_lab_member m[ETCD_LAB_MAX];
	char dir[256];
	char ca_file[PATH_MAX];		    /* signed the members' server certificates */
	char other_ca_file[PATH_MAX];	    /* an unrelated CA */
	char client_cert[PATH_MAX];	    /* signed by ca_file */
	char client_key[PATH_MAX];	    /* mode 0600 */
	const char *urls[ETCD_LAB_MAX];	    /* m[i].url */
	const char *tls_urls[ETCD_LAB_MAX]; /* m[i].tls_url */
};

/** etcd_lab_missing() - NULL when etcd and openssl are in PATH, else why not. */
const char *etcd_lab_missing(void);

/** etcd_lab_skip() - "SKIP: reason" and 77, or 1 with IBVF_REQUIRE_LABS=1. */
int etcd_lab_skip(const char *reason);

/**
 * etcd_lab_start() - make the temp dir and certificates, start @n members
 * and wait (up to 20 s) until the cluster answers writes.
 * Return: 0 or a negative errno with the reason in @err.
 */
int etcd_lab_start(struct etcd_lab *lab, int n, char *err, size_t errlen);

/** etcd_lab_member_stop() - SIGKILL (or SIGTERM, then SIGKILL after 2 s) member @i and reap it. */
void etcd_lab_member_stop(struct etcd_lab *lab, int i, bool kill9);

/** etcd_lab_member_start() - start member @i again on its data dir. 0 or -errno. */
int etcd_lab_member_start(struct etcd_lab *lab, int i, char *err, size_t errlen);

/**
 * etcd_lab_wait_writable() - wait up to @timeout_ms until a put through any
 * running member succeeds. 0 or -ETIMEDOUT.
 */
int etcd_lab_wait_writable(struct etcd_lab *lab, int timeout_ms);

/** etcd_lab_leader() - index of the current leader among running members, or -1. */
int etcd_lab_leader(struct etcd_lab *lab);

/**
 * etcd_lab_enable_auth() - add user "root" with @password, the root role,
 * and enable authentication (etcd's Auth API through member 0..n).
 * Return: 0 or -EIO.
 */
int etcd_lab_enable_auth(struct etcd_lab *lab, const char *password);

/** etcd_lab_write_file() - write @text to <dir>/@name with @mode; the path into @path. */
int etcd_lab_write_file(struct etcd_lab *lab, const char *name, const char *text, int mode,
			char *path, size_t len);

/** etcd_lab_stop() - stop every member this lab started (by PID), remove the temp dir. */
void etcd_lab_stop(struct etcd_lab *lab);

#endif /* IBVF_ETCD_LAB_H */
