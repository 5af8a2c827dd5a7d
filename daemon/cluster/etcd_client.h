/* SPDX-License-Identifier: MIT */
/*
 * A client of etcd v3 over its JSON gateway (grpc-gateway), with libcurl and
 * jansson: KV range, txn, lease grant/keepalive/revoke and watch. No
 * well-kept C client of etcd v3 exists (docs/cluster.md, design-cluster.md).
 *
 * Gateway facts this module relies on (checked against Debian's etcd 3.4.23):
 * every call is a POST of a JSON body to <endpoint><api>/<service>/<method>;
 * <api> is "/v3" (3.4 and 3.5+) or "/v3beta" (3.3 and 3.4); keys and values
 * are base64 in JSON; int64 fields (revisions, lease IDs, TTLs) are JSON
 * strings; proto3 omits default values (a failed txn has no "succeeded", a
 * missing "count" is 0); errors are {"error","message","code"} with a gRPC
 * status code; a watch is a stream of newline-delimited {"result":...}.
 *
 * Endpoints are tried in turn: a call goes to the endpoint that last
 * answered and moves to the next one on a transport failure (connect, TLS,
 * attempt timeout), an HTTP 5xx, or an etcd "unavailable" answer (no leader,
 * leader changed, stopping); after a pass over all endpoints it waits a
 * little (50 ms, doubling to 400 ms) and passes again until the call's
 * timeout, so a leader election (about one election timeout) is ridden out. Application answers (a
 * failed compare, a missing lease, a refused password) are never retried elsewhere. Every message
 * names the endpoint(s) tried and the call.
 *
 * One client may be used from several threads; its calls are serialized on
 * one connection cache (watch streams use their own connection).
 */
#ifndef IBVF_ETCD_CLIENT_H
#define IBVF_ETCD_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Which gateway prefix to use. */
enum etcd_api {
	ETCD_API_AUTO = 0, /* "/v3"; an endpoint that answers 404 there is asked at "/v3beta" */
	ETCD_API_V3,	   /* "/v3" only: etcd 3.4, 3.5+ */
	ETCD_API_V3BETA,   /* "/v3beta" only: etcd 3.3, 3.4 */
};

#define ETCD_MAX_ENDPOINTS 16

struct etcd_client_opts {
	const char *const *endpoints; /* "http://host:port" or "https://host:port", no path */
	size_t n_endpoints;	      /* 1 .. ETCD_MAX_ENDPOINTS */
	const char *ca_file;	      /* PEM CA bundle for https endpoints; NULL: system CAs */
	const char *cert_file;	      /* PEM client certificate (with key_file) or NULL */
	const char *key_file;	      /* PEM client key; a secret file (owner only, mode 0600) */
	const char *user;	      /* etcd user for basic auth, or NULL */
	const char *user_file;	      /* or: a file holding the user name (one line) */
	const char *password_file;    /* the user's password; a secret file (owner, 0600) */
	uint32_t timeout_ms;	      /* per call, every endpoint and retry included; 0: 5000 */
	uint32_t attempt_timeout_ms;  /* per attempt at one endpoint; 0: timeout / endpoints */
	enum etcd_api api;
};

struct etcd_client;

/** One key-value as etcd returns it (mvccpb.KeyValue). Keys and values are bytes. */
struct etcd_kv {
	char *key; /* NUL-terminated copy (the bytes may hold NULs: use key_len) */
	size_t key_len;
	char *value;
	size_t value_len;
	int64_t create_revision;
	int64_t mod_revision;
	int64_t version;
	int64_t lease;
};

/** The answer of a range (RangeResponse). */
struct etcd_range_result {
	struct etcd_kv *kvs;
	size_t n_kvs;
	int64_t count;	  /* keys in the range (more than n_kvs with a limit) */
	bool more;	  /* a limit cut the answer */
	int64_t revision; /* the store revision the answer reflects */
};

/** Compare target and result (etcdserverpb.Compare). */
enum etcd_cmp_target { ETCD_CMP_VERSION, ETCD_CMP_CREATE, ETCD_CMP_MOD, ETCD_CMP_VALUE };
enum etcd_cmp_result { ETCD_CMP_EQUAL, ETCD_CMP_GREATER, ETCD_CMP_LESS, ETCD_CMP_NOT_EQUAL };

/**
 * One compare of a txn. With @range_end the compare must hold for every key
 * in [@key, @range_end); an empty range compares as one absent key
 * (revisions and version 0), so "CREATE == 0 over a range" means "no key in
 * the range" (etcd 3.3+).
 */
struct etcd_cmp {
	const char *key;
	size_t key_len; /* 0: strlen(key) */
	const char *range_end;
	size_t range_end_len; /* 0: strlen(range_end) when range_end is not NULL */
	enum etcd_cmp_target target;
	enum etcd_cmp_result result;
	int64_t number;	   /* for VERSION, CREATE, MOD */
	const char *value; /* for VALUE */
	size_t value_len;
};

enum etcd_op_type { ETCD_OP_RANGE, ETCD_OP_PUT, ETCD_OP_DELETE };

/** One operation of a txn branch (RequestOp). */
struct etcd_op {
	enum etcd_op_type type;
	const char *key;
	size_t key_len;	       /* 0: strlen(key) */
	const char *range_end; /* RANGE and DELETE; NULL: the one key */
	size_t range_end_len;  /* 0: strlen(range_end) */
	const char *value;     /* PUT */
	size_t value_len;      /* PUT; 0: strlen(value) */
	int64_t lease;	       /* PUT; 0: none */
};

/** The answer of a txn: which branch ran, and one result per op of that branch. */
struct etcd_txn_result {
	bool succeeded;
	int64_t revision;
	struct etcd_range_result *responses; /* RANGE ops: their kvs; PUT, DELETE: empty */
	size_t n_responses;
};

enum etcd_event_type { ETCD_EVENT_PUT, ETCD_EVENT_DELETE };

struct etcd_event {
	enum etcd_event_type type;
	const struct etcd_kv *kv; /* a DELETE carries the key and mod_revision only */
	int64_t revision;	  /* header revision of the watch response */
};

/**
 * etcd_watch_cb - called once per event, in revision order. Return 0 to go
 * on, anything else to end the watch (etcd_watch() then returns 0).
 */
typedef int (*etcd_watch_cb)(void *arg, const struct etcd_event *ev);

/**
 * etcd_client_new() - check @o (endpoints are http(s)://host[:port] without
 * user info or path; a client key or password file must be a secret file),
 * read the credentials files, and make a client. No call goes out yet.
 * Return: 0, -EINVAL (@err names the option), -EPERM (secret file mode),
 * -ENOENT, -ENOMEM.
 */
int etcd_client_new(const struct etcd_client_opts *o, struct etcd_client **out, char *err,
		    size_t errlen);

/** etcd_client_free() - close connections, wipe the password and token; NULL is a no-op. */
void etcd_client_free(struct etcd_client *c);

/** etcd_client_endpoint() - the endpoint the next call goes to first (for status output). */
const char *etcd_client_endpoint(const struct etcd_client *c);

/**
 * etcd_client_calls() - HTTP requests sent so far (every attempt at every
 * endpoint, authentication included): the benchmark's "requests per prepare".
 */
uint64_t etcd_client_calls(const struct etcd_client *c);

/**
 * etcd_range() - KV Range of [@key, @range_end) (@range_end NULL: the one
 * key; "\0" with @range_end_len 1: every key >= @key), at most @limit keys
 * (0: all); @keys_only leaves values out. Linearizable read.
 * Return: 0, -ETIMEDOUT / -ECONNREFUSED / -EHOSTUNREACH / -EIO (no endpoint
 * answered; @err lists each endpoint and why), -EACCES (authentication),
 * -EINVAL (etcd refused the request), -EPROTO (an answer that is not the
 * gateway's JSON), -ENOMEM.
 */
int etcd_range(struct etcd_client *c, const char *key, size_t key_len, const char *range_end,
	       size_t range_end_len, int64_t limit, bool keys_only, struct etcd_range_result *out,
	       char *err, size_t errlen);

/** etcd_range_result_free() - free the kvs of @r (not @r itself). */
void etcd_range_result_free(struct etcd_range_result *r);

/**
 * etcd_put() - KV Put of one key (with @lease, 0: none). *@revision (may be
 * NULL) gets the revision of the write. Errors as etcd_range().
 */
int etcd_put(struct etcd_client *c, const char *key, size_t key_len, const char *value,
	     size_t value_len, int64_t lease, int64_t *revision, char *err, size_t errlen);

/**
 * etcd_txn() - one transaction: if every compare holds, the success ops run,
 * else the failure ops; atomically (etcd's Txn, rpc.proto). A failed compare
 * is not an error: @out->succeeded is false. Errors as etcd_range().
 */
int etcd_txn(struct etcd_client *c, const struct etcd_cmp *cmp, size_t n_cmp,
	     const struct etcd_op *success, size_t n_success, const struct etcd_op *failure,
	     size_t n_failure, struct etcd_txn_result *out, char *err, size_t errlen);

/** etcd_txn_result_free() - free what etcd_txn() put in @r. */
void etcd_txn_result_free(struct etcd_txn_result *r);

/**
 * etcd_lease_grant() - a lease of @ttl_s seconds (@id 0: etcd picks the ID).
 * *@id_out and *@ttl_out (may be NULL) get the ID and the granted TTL.
 * Errors as etcd_range(); -EEXIST when @id is taken.
 */
int etcd_lease_grant(struct etcd_client *c, int64_t ttl_s, int64_t id, int64_t *id_out,
		     int64_t *ttl_out, char *err, size_t errlen);

/**
 * etcd_lease_keepalive() - renew lease @id once (one message of the
 * LeaseKeepAlive stream). *@ttl_out (may be NULL) gets the new TTL, s.
 * Return: 0, -ENOENT (the lease expired or was revoked: etcd answers TTL 0),
 * or the errors of etcd_range().
 */
int etcd_lease_keepalive(struct etcd_client *c, int64_t id, int64_t *ttl_out, char *err,
			 size_t errlen);

/**
 * etcd_lease_revoke() - revoke lease @id; its keys are deleted.
 * Return: 0, -ENOENT (no such lease), or the errors of etcd_range().
 */
int etcd_lease_revoke(struct etcd_client *c, int64_t id, char *err, size_t errlen);

/**
 * etcd_watch() - watch [@key, @range_end) from revision @start_rev (0: from
 * now) and call @cb for each event, for at most @duration_ms (0: until @cb
 * ends it). On a transport failure the watch resumes at the next endpoint
 * from the revision after the last event delivered, so no event is lost or
 * repeated. *@next_rev (may be NULL) gets the revision to resume from.
 * Return: 0 (@cb ended it or @duration_ms passed), -ERANGE (@start_rev was
 * compacted: @err names the compact revision, *@next_rev gets it), or the
 * errors of etcd_range() when no endpoint could hold the stream.
 */
int etcd_watch(struct etcd_client *c, const char *key, size_t key_len, const char *range_end,
	       size_t range_end_len, int64_t start_rev, uint32_t duration_ms, etcd_watch_cb cb,
	       void *arg, int64_t *next_rev, char *err, size_t errlen);

/**
 * etcd_prefix_end() - the range end that makes [@prefix, end) "every key
 * starting with @prefix" (etcd's GetPrefixRangeEnd: the last byte below 0xff
 * incremented, the rest cut). Writes at most @len bytes to @end.
 * Return: the length of the end, or -ENOSPC.
 */
int etcd_prefix_end(const char *prefix, size_t len, char *end, size_t end_size);

#endif /* IBVF_ETCD_CLIENT_H */
