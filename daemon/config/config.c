// SPDX-License-Identifier: MIT
/* ibvfd configuration: JSON file + ib-kubernetes environment overrides. */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ibvf/types.h>

#include "err.h"
#include "sort.h"
#include "file_read.h"
#include "json_util.h"
#include "log.h"
#include "vf_driver.h"

#ifndef IBVF_SM_MODULE_DIR
#define IBVF_SM_MODULE_DIR "/usr/local/lib/ibvf/sm"
#endif
#ifndef IBVF_VF_MODULE_DIR
#define IBVF_VF_MODULE_DIR "/usr/local/lib/ibvf/vf"
#endif

/* Where VF driver modules live unless vf.module_dir says: the environment's
 * IBVF_VF_MODULE_DIR (the test setups point it at the build's lab modules),
 * else the install path. Only a vf.driver other than the built-in netlink
 * ever loads from it. */
static const char *vf_module_dir_default(void)
{
	const char *e = getenv("IBVF_VF_MODULE_DIR");

	return e && *e == '/' ? e : IBVF_VF_MODULE_DIR;
}

static int set_str(char **dst, const char *src)
{
	char *s = strdup(src);

	if (!s)
		return -ENOMEM;
	free(*dst);
	*dst = s;
	return 0;
}

static int set_defaults(struct ibvf_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	ibvf_port_watch_config_defaults(&cfg->port_watch);
	cfg->log_level = LOG_INFO;
	cfg->pool.quarantine_s = 60;
	cfg->pool.sync_full = true;
	cfg->pool.cluster.block_size = 256;
	cfg->pool.cluster.low_watermark = 64;
	cfg->pool.cluster.timeout_ms = 5000;
	cfg->sm.periodic_update_s = 5;
	cfg->sm.batch_window_ms = 0; /* self-clocking batches (issue 17) */
	cfg->sm.batch_max = 1024;
	cfg->vf.rebind_timeout_ms = 5000;
	cfg->api.allowed_uids[0] = 0;
	cfg->api.n_allowed_uids = 1;
	cfg->api.idle_timeout_s = 60;
	cfg->api.line_timeout_s = 10;
	cfg->http.enabled = true;
	snprintf(cfg->http.address, sizeof(cfg->http.address), "127.0.0.1");
	cfg->http.port = IBVF_HTTP_DEFAULT_PORT;
	cfg->daemon.prepare_timeout_s = 60;
	cfg->daemon.port_timeout_s = 30;
	cfg->daemon.stop_timeout_s = 20;
	cfg->daemon.workers = 16;
	cfg->smd.lease_ttl_s = 3;
	cfg->smd.reconcile_s = 30;
	cfg->smd.batch_max = 4096;
	cfg->daemon.reconcile = IBVF_RECONCILE_REPORT;
	snprintf(cfg->daemon.cni_cache_dir, sizeof(cfg->daemon.cni_cache_dir), "%s",
		 IBVF_DEFAULT_CNI_CACHE_DIR);
	if (set_str(&cfg->state_dir, IBVF_DEFAULT_STATE_DIR) ||
	    set_str(&cfg->run_dir, IBVF_DEFAULT_RUN_DIR) || set_str(&cfg->sysfs_root, "/sys") ||
	    set_str(&cfg->sm.backend, "noop") || set_str(&cfg->sm.module_dir, IBVF_SM_MODULE_DIR) ||
	    set_str(&cfg->vf.driver, "netlink") ||
	    set_str(&cfg->vf.module_dir, vf_module_dir_default()))
		return -ENOMEM;
	return 0;
}

/*
 * A path key must be absolute: ibvfd (started from /) and ibvfctl (run from
 * any directory) would otherwise resolve it differently, e.g. two GUID pool
 * stores handing out the same GUIDs.
 */
static int check_abs_path(const struct ibvf_jctx *c, const char *path, const char *key,
			  const char *v)
{
	if (v && v[0] != '/')
		return ibvf_json_err(c, path, key,
				     "'%.64s' is not an absolute path (ibvfd and ibvfctl run in "
				     "different directories)",
				     v);
	return 0;
}

static int range_cmp(const void *a, const void *b)
{
	const struct ibvf_guid_range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int parse_one_range(const struct ibvf_jctx *c, json_t *r, const char *path,
			   struct ibvf_guid_range *out)
{
	static const char *const keys[] = {"start", "end", NULL};
	const char *names[2] = {"start", "end"};
	uint64_t *vals[2] = {&out->start, &out->end};
	char e[IBVF_ERR_LEN];
	int ret;

	ret = ibvf_json_check_keys(c, r, path, keys);
	if (ret)
		return ret;
	for (int k = 0; k < 2; k++) {
		json_t *v = json_object_get(r, names[k]);

		if (!json_is_string(v))
			return ibvf_json_err(c, path, names[k], "required GUID string");
		if (ibvf_guid_parse(json_string_value(v), vals[k], e, sizeof(e)))
			return ibvf_json_err(c, path, names[k], "%s", e);
	}
	if (out->start > out->end)
		return ibvf_json_err(c, path, NULL, "start is greater than end");
	if (out->start == 0 || out->end == IBVF_GUID_ALL_ONES)
		return ibvf_json_err(c, path, NULL,
				     "range contains the invalid GUID %s (0 and all-ones are "
				     "never assignable)",
				     out->start == 0 ? "00:00:00:00:00:00:00:00"
						     : "ff:ff:ff:ff:ff:ff:ff:ff");
	return 0;
}

int ibvf_parse_guid_ranges(const char *file, const char *path, void *json_array,
			   struct ibvf_guid_range **out, size_t *n, char *err, size_t errlen)
{
	struct ibvf_jctx c = {file, err, errlen};
	json_t *arr = json_array;
	struct ibvf_guid_range *r;
	size_t i, cnt;
	int ret;

	if (!json_is_array(arr) || json_array_size(arr) == 0)
		return ibvf_json_err(&c, path, NULL, "expected a non-empty array of {start, end}");
	cnt = json_array_size(arr);
	r = calloc(cnt, sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (i = 0; i < cnt; i++) {
		char p[128];

		snprintf(p, sizeof(p), "%s[%zu]", path, i);
		ret = parse_one_range(&c, json_array_get(arr, i), p, &r[i]);
		if (ret) {
			free(r);
			return ret;
		}
	}
	ibvf_sort(r, cnt, sizeof(*r), range_cmp);
	for (i = 1; i < cnt; i++) {
		if (r[i].start <= r[i - 1].end) {
			char a[IBVF_GUID_STR_LEN], b[IBVF_GUID_STR_LEN];
			char r0[IBVF_GUID_STR_LEN], r1[IBVF_GUID_STR_LEN];
			uint64_t last = r[i].end < r[i - 1].end ? r[i].end : r[i - 1].end;

			/* format everything before r is freed */
			ibvf_guid_format(r[i].start, a);
			ibvf_guid_format(last, b);
			ibvf_guid_format(r[i - 1].start, r0);
			ibvf_guid_format(r[i - 1].end, r1);
			free(r);
			return ibvf_json_err(&c, path, NULL,
					     "ranges overlap at %s..%s (range %s..%s holds them "
					     "too)",
					     a, b, r0, r1);
		}
	}
	*out = r;
	*n = cnt;
	return 0;
}

/* An etcd endpoint: http(s)://host[:port], no user info (credentials are files), no path. */
static bool endpoint_ok(const char *u)
{
	const char *h = !strncmp(u, "http://", 7)    ? u + 7
			: !strncmp(u, "https://", 8) ? u + 8
						     : NULL;

	return h && *h && strlen(u) <= 256 && !strchr(h, '@') && !strchr(h, '/') &&
	       !strpbrk(h, " \t\r\n");
}

/* A Kubernetes node name: a DNS subdomain (RFC 1123), at most 253 bytes. */
static bool node_name_ok(const char *n)
{
	size_t l = strlen(n);

	if (!l || l > IBVF_CLUSTER_NODE_MAX || !isalnum((unsigned char)n[0]) ||
	    !isalnum((unsigned char)n[l - 1]))
		return false;
	for (size_t i = 0; i < l; i++)
		if (!isalnum((unsigned char)n[i]) && n[i] != '-' && n[i] != '.')
			return false;
	return true;
}

static void cluster_free(struct ibvf_cluster_config *k)
{
	for (size_t i = 0; i < k->n_endpoints; i++)
		free(k->endpoints[i]);
	free(k->endpoints);
	free(k->ca_file);
	free(k->cert_file);
	free(k->key_file);
	free(k->user);
	free(k->user_file);
	free(k->password_file);
	free(k->prefix);
	free(k->node);
	memset(k, 0, sizeof(*k));
}

static int parse_cluster(const struct ibvf_jctx *c, json_t *o, struct ibvf_cluster_config *k)
{
	static const char *const keys[] = {
		"endpoints",	 "ca_file",	  "cert_file",	    "key_file", "user",
		"user_file",	 "password_file", "prefix",	    "node",	"block_size",
		"low_watermark", "timeout_ms",	  "high_watermark", NULL};
	static const char *const P = "pool.cluster";
	uint64_t bs = k->block_size, lw = k->low_watermark, to = k->timeout_ms,
		 hw = k->high_watermark;
	json_t *eps = json_object_get(o, "endpoints");
	int ret = ibvf_json_check_keys(c, o, P, keys);
	size_t i;

	if (ret)
		return ret;
	if (!json_is_array(eps) || !json_array_size(eps) ||
	    json_array_size(eps) > IBVF_CLUSTER_MAX_ENDPOINTS)
		return ibvf_json_err(c, P, "endpoints",
				     "expected an array of 1 to %d etcd URLs (http(s)://host:port)",
				     IBVF_CLUSTER_MAX_ENDPOINTS);
	for (i = 0; i < k->n_endpoints; i++)
		free(k->endpoints[i]);
	free(k->endpoints);
	k->n_endpoints = 0;
	k->endpoints = calloc(json_array_size(eps), sizeof(*k->endpoints));
	if (!k->endpoints)
		return -ENOMEM;
	for (i = 0; i < json_array_size(eps); i++) {
		const char *u = json_string_value(json_array_get(eps, i));

		if (!u || !endpoint_ok(u))
			return ibvf_json_err(
				c, P, "endpoints",
				"[%zu]: expected http://host:port or https://host:port "
				"without user info or path (credentials go in "
				"user/password_file)",
				i);
		for (size_t j = 0; j < i; j++)
			if (!strcmp(k->endpoints[j], u))
				return ibvf_json_err(c, P, "endpoints", "[%zu]: \"%s\" twice", i,
						     u);
		if (!(k->endpoints[i] = strdup(u)))
			return -ENOMEM;
		k->n_endpoints++;
	}
	ret = ibvf_json_string(c, o, P, "ca_file", &k->ca_file);
	if (!ret)
		ret = ibvf_json_string(c, o, P, "cert_file", &k->cert_file);
	if (!ret)
		ret = ibvf_json_string(c, o, P, "key_file", &k->key_file);
	if (!ret)
		ret = ibvf_json_string(c, o, P, "user", &k->user);
	if (!ret)
		ret = ibvf_json_string(c, o, P, "user_file", &k->user_file);
	if (!ret)
		ret = ibvf_json_string(c, o, P, "password_file", &k->password_file);
	if (!ret)
		ret = ibvf_json_string(c, o, P, "prefix", &k->prefix);
	if (!ret)
		ret = ibvf_json_string(c, o, P, "node", &k->node);
	if (!ret)
		ret = ibvf_json_uint(c, o, P, "block_size", 1, 65536, &bs);
	if (!ret)
		ret = ibvf_json_uint(c, o, P, "low_watermark", 0, 65535, &lw);
	if (!ret)
		ret = ibvf_json_uint(c, o, P, "timeout_ms", 100, 600000, &to);
	if (!ret)
		ret = ibvf_json_uint(c, o, P, "high_watermark", 0, UINT32_MAX, &hw);
	if (ret)
		return ret;
	if (!ret)
		ret = check_abs_path(c, P, "ca_file", k->ca_file);
	if (!ret)
		ret = check_abs_path(c, P, "cert_file", k->cert_file);
	if (!ret)
		ret = check_abs_path(c, P, "key_file", k->key_file);
	if (!ret)
		ret = check_abs_path(c, P, "user_file", k->user_file);
	if (!ret)
		ret = check_abs_path(c, P, "password_file", k->password_file);
	if (ret)
		return ret;
	if (!k->cert_file != !k->key_file)
		return ibvf_json_err(c, P, k->cert_file ? "key_file" : "cert_file",
				     "a client certificate needs both cert_file and key_file");
	if (k->user && k->user_file)
		return ibvf_json_err(c, P, "user_file", "user and user_file exclude each other");
	if ((k->user || k->user_file) != !!k->password_file)
		return ibvf_json_err(c, P, k->password_file ? "password_file" : "user",
				     "basic auth needs user (or user_file) and password_file");
	if (k->prefix && (k->prefix[0] != '/' || strlen(k->prefix) > 128))
		return ibvf_json_err(c, P, "prefix",
				     "expected an absolute key prefix "
				     "(\"/ibvf/fabric-a/\"), at most 128 bytes");
	if (k->node && !node_name_ok(k->node))
		return ibvf_json_err(
			c, P, "node",
			"'%.64s' is not a node name (RFC 1123 subdomain, <= 253 bytes)", k->node);
	if (lw >= bs)
		return ibvf_json_err(c, P, "low_watermark", "%llu must be below block_size %llu",
				     (unsigned long long)lw, (unsigned long long)bs);
	/* a returned block must not bring the node below low_watermark (no claim/return
	 * flapping) */
	if (hw && hw < lw + bs)
		return ibvf_json_err(c, P, "high_watermark",
				     "%llu must be 0 (low_watermark + 2 blocks) or at least "
				     "low_watermark + block_size (%llu)",
				     (unsigned long long)hw, (unsigned long long)(lw + bs));
	k->block_size = (uint32_t)bs;
	k->low_watermark = (uint32_t)lw;
	k->high_watermark = (uint32_t)hw;
	k->timeout_ms = (uint32_t)to;
	k->enabled = true;
	return 0;
}

static int parse_pool(const struct ibvf_jctx *c, json_t *o, struct ibvf_config *cfg)
{
	static const char *const keys[] = {"ranges", "quarantine_s", "sync", "cluster", NULL};
	uint64_t q = cfg->pool.quarantine_s;
	char *sync = NULL;
	json_t *r;
	int ret;

	ret = ibvf_json_check_keys(c, o, "pool", keys);
	if (!ret)
		ret = ibvf_json_uint(c, o, "pool", "quarantine_s", 0, 30 * 24 * 3600, &q);
	if (!ret)
		ret = ibvf_json_string(c, o, "pool", "sync", &sync);
	if (ret)
		goto out;
	cfg->pool.quarantine_s = (uint32_t)q;
	if (sync) {
		if (strcmp(sync, "full") && strcmp(sync, "normal")) {
			ret = ibvf_json_err(c, "pool", "sync", "expected \"full\" or \"normal\"");
			goto out;
		}
		cfg->pool.sync_full = !strcmp(sync, "full");
	}
	r = json_object_get(o, "ranges");
	if (r) {
		free(cfg->pool.ranges);
		cfg->pool.ranges = NULL;
		ret = ibvf_parse_guid_ranges(c->file, "pool.ranges", r, &cfg->pool.ranges,
					     &cfg->pool.n_ranges, c->err, c->errlen);
	}
	if (!ret && (r = json_object_get(o, "cluster"))) {
		if (!json_is_object(r))
			ret = ibvf_json_err(c, "pool", "cluster", "expected an object");
		else
			ret = parse_cluster(c, r, &cfg->pool.cluster);
	}
out:
	free(sync);
	return ret;
}

/* free() a string that may hold a secret, wiping it first */
static void wipe_str(char *s)
{
	if (s)
		ibvf_file_wipe_free(s, strlen(s));
}

static int dump_json(json_t *o, char **out)
{
	char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);

	if (!s)
		return -ENOMEM;
	wipe_str(*out); /* sm.config may hold a secret (UFM_PASSWORD) */
	*out = s;
	return 0;
}

/*
 * A backend name becomes part of a module path (<module_dir>/<name>.so), so
 * it must be a plain name: 1..32 of [A-Za-z0-9_-], no '/' and no "..".
 */
static bool backend_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 32)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-')
			return false;
	return true;
}

static int parse_sm(const struct ibvf_jctx *c, json_t *o, struct ibvf_config *cfg)
{
	static const char *const keys[] = {
		"backend",	   "module_dir", "config", "periodic_update_s",
		"batch_window_ms", "batch_max",	 NULL};
	uint64_t per = cfg->sm.periodic_update_s, win = cfg->sm.batch_window_ms,
		 bmax = cfg->sm.batch_max;
	json_t *bc;
	int ret;

	ret = ibvf_json_check_keys(c, o, "sm", keys);
	if (!ret)
		ret = ibvf_json_string(c, o, "sm", "backend", &cfg->sm.backend);
	if (!ret)
		ret = ibvf_json_string(c, o, "sm", "module_dir", &cfg->sm.module_dir);
	if (!ret)
		ret = ibvf_json_uint(c, o, "sm", "periodic_update_s", 1, 86400, &per);
	if (!ret)
		ret = ibvf_json_uint(c, o, "sm", "batch_window_ms", 0, 10000, &win);
	if (!ret)
		ret = ibvf_json_uint(c, o, "sm", "batch_max", 1, 1000000, &bmax);
	if (!ret)
		ret = ibvf_json_object(c, o, "sm", "config", &bc);
	if (!ret)
		ret = check_abs_path(c, "sm", "module_dir", cfg->sm.module_dir);
	if (ret)
		return ret;
	if (!backend_name_ok(cfg->sm.backend))
		return ibvf_json_err(c, "sm", "backend",
				     "'%.40s' is not a backend name (1..32 of A-Z a-z 0-9 _ -)",
				     cfg->sm.backend);
	if (bc && dump_json(bc, &cfg->sm.backend_json))
		return -ENOMEM;
	cfg->sm.periodic_update_s = (uint32_t)per;
	cfg->sm.batch_window_ms = (uint32_t)win;
	cfg->sm.batch_max = (uint32_t)bmax;
	return 0;
}

static int parse_vf(const struct ibvf_jctx *c, json_t *o, struct ibvf_config *cfg)
{
	static const char *const keys[] = {
		"driver", "rebind_timeout_ms", "module_dir", "ibsim", "fake_dir", "warm", NULL};
	uint64_t t = cfg->vf.rebind_timeout_ms;
	json_t *ib;
	int ret;

	ret = ibvf_json_check_keys(c, o, "vf", keys);
	if (!ret)
		ret = ibvf_json_string(c, o, "vf", "driver", &cfg->vf.driver);
	if (!ret)
		ret = ibvf_json_uint(c, o, "vf", "rebind_timeout_ms", 1, 600000, &t);
	if (!ret)
		ret = ibvf_json_string(c, o, "vf", "module_dir", &cfg->vf.module_dir);
	if (!ret)
		ret = check_abs_path(c, "vf", "module_dir", cfg->vf.module_dir);
	if (!ret)
		ret = ibvf_json_object(c, o, "vf", "ibsim", &ib);
	if (!ret)
		ret = ibvf_json_string(c, o, "vf", "fake_dir", &cfg->vf.fake_dir);
	if (!ret && json_object_get(o, "warm")) {
		ret = ibvf_json_bool(c, o, "vf", "warm", &cfg->vf.warm);
		cfg->vf.warm_set = true;
	}
	if (ret)
		return ret;
	if (strcmp(cfg->vf.driver, "netlink") && strcmp(cfg->vf.driver, "ibsim") &&
	    strcmp(cfg->vf.driver, "fake"))
		return ibvf_json_err(c, "vf", "driver",
				     "expected \"netlink\", \"ibsim\" (labs) or \"fake\" (tests)");
	/* the lab driver's own keys, checked by its module (tests/lab/vf-drivers/) */
	if (ib &&
	    (ret = ibvf_vf_module_config_check(cfg->vf.module_dir, "ibsim", c, "vf.ibsim", ib)))
		return ret;
	if (!ib && !strcmp(cfg->vf.driver, "ibsim"))
		return ibvf_json_err(c, "vf", "ibsim", "required when vf.driver is \"ibsim\"");
	if (!strcmp(cfg->vf.driver, "fake") && !cfg->vf.fake_dir)
		return ibvf_json_err(c, "vf", "fake_dir", "required with driver \"fake\"");
	if (ib && dump_json(ib, &cfg->vf.ibsim_json))
		return -ENOMEM;
	cfg->vf.rebind_timeout_ms = (uint32_t)t;
	return 0;
}

static int parse_api(const struct ibvf_jctx *c, json_t *o, struct ibvf_config *cfg)
{
	static const char *const keys[] = {"socket", "allowed_uids", "idle_timeout_s",
					   "line_timeout_s", NULL};
	uint64_t idle = cfg->api.idle_timeout_s, line = cfg->api.line_timeout_s;
	json_t *u;
	int ret;

	ret = ibvf_json_check_keys(c, o, "api", keys);
	if (!ret)
		ret = ibvf_json_string(c, o, "api", "socket", &cfg->api.socket);
	if (!ret)
		ret = check_abs_path(c, "api", "socket", cfg->api.socket);
	if (!ret)
		ret = ibvf_json_uint(c, o, "api", "idle_timeout_s", 1, 86400, &idle);
	if (!ret)
		ret = ibvf_json_uint(c, o, "api", "line_timeout_s", 1, 3600, &line);
	if (ret)
		return ret;
	cfg->api.idle_timeout_s = (uint32_t)idle;
	cfg->api.line_timeout_s = (uint32_t)line;
	u = json_object_get(o, "allowed_uids");
	if (!u)
		return 0;
	if (!json_is_array(u) || json_array_size(u) == 0 ||
	    json_array_size(u) > IBVF_MAX_ALLOWED_UIDS)
		return ibvf_json_err(c, "api", "allowed_uids", "expected 1..%d user IDs",
				     IBVF_MAX_ALLOWED_UIDS);
	for (size_t i = 0; i < json_array_size(u); i++) {
		json_t *v = json_array_get(u, i);

		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > 0x7fffffff)
			return ibvf_json_err(c, "api", "allowed_uids", "entry %zu is not a uid", i);
		cfg->api.allowed_uids[i] = (uid_t)json_integer_value(v);
	}
	cfg->api.n_allowed_uids = json_array_size(u);
	return 0;
}

/* http: the metrics and health endpoint (docs/metrics.md). */
static int parse_http(const struct ibvf_jctx *c, json_t *o, struct ibvf_config *cfg)
{
	static const char *const keys[] = {"enabled", "address", "port", NULL};
	uint64_t port = cfg->http.port;
	char *addr = NULL;
	int ret;

	ret = ibvf_json_check_keys(c, o, "http", keys);
	if (!ret)
		ret = ibvf_json_bool(c, o, "http", "enabled", &cfg->http.enabled);
	if (!ret)
		ret = ibvf_json_uint(c, o, "http", "port", 0, 65535, &port);
	if (!ret)
		ret = ibvf_json_string(c, o, "http", "address", &addr);
	if (!ret && addr) {
		unsigned char a[16];

		if (strlen(addr) >= sizeof(cfg->http.address) ||
		    (inet_pton(AF_INET, addr, a) != 1 && inet_pton(AF_INET6, addr, a) != 1))
			ret = ibvf_json_err(c, "http", "address",
					    "expected a numeric IPv4 or IPv6 address, e.g. "
					    "127.0.0.1, 0.0.0.0 or ::1");
		else
			snprintf(cfg->http.address, sizeof(cfg->http.address), "%s", addr);
	}
	free(addr);
	cfg->http.port = (uint16_t)port;
	if (json_object_get(o, "port"))
		cfg->http.port_set = true;
	return ret;
}

static const char *const port_watch_sources[] = {"local", "fabric", NULL};

/* port_watch: { source, poll_min_ms, poll_max_ms, mad_timeout_ms, mad_retries } */
static int parse_port_watch(const struct ibvf_jctx *c, json_t *o, struct ibvf_port_watch_config *pw)
{
	static const char *const keys[] = {"source",	     "poll_min_ms", "poll_max_ms",
					   "mad_timeout_ms", "mad_retries", NULL};
	uint64_t pmin = pw->poll_min_ms, pmax = pw->poll_max_ms, to = pw->mad_timeout_ms;
	uint64_t rt = pw->mad_retries;
	char *src = NULL;
	int ret, i;

	ret = ibvf_json_check_keys(c, o, "port_watch", keys);
	if (!ret)
		ret = ibvf_json_string(c, o, "port_watch", "source", &src);
	if (!ret)
		ret = ibvf_json_uint(c, o, "port_watch", "poll_min_ms", 1, 60000, &pmin);
	if (!ret)
		ret = ibvf_json_uint(c, o, "port_watch", "poll_max_ms", 1, 600000, &pmax);
	if (!ret)
		ret = ibvf_json_uint(c, o, "port_watch", "mad_timeout_ms", 1, 60000, &to);
	if (!ret)
		ret = ibvf_json_uint(c, o, "port_watch", "mad_retries", 0, 20, &rt);
	if (!ret && src) {
		for (i = 0; port_watch_sources[i]; i++)
			if (!strcmp(src, port_watch_sources[i]))
				break;
		if (port_watch_sources[i])
			pw->source = i;
		else
			ret = ibvf_json_err(c, "port_watch", "source",
					    "expected \"local\" or \"fabric\"");
	}
	free(src);
	if (!ret && pmax < pmin)
		ret = ibvf_json_err(c, "port_watch", "poll_max_ms",
				    "%llu is below poll_min_ms (%llu)", (unsigned long long)pmax,
				    (unsigned long long)pmin);
	if (ret)
		return ret;
	pw->poll_min_ms = (uint32_t)pmin;
	pw->poll_max_ms = (uint32_t)pmax;
	pw->mad_timeout_ms = (uint32_t)to;
	pw->mad_retries = (uint32_t)rt;
	return 0;
}

static json_t *port_watch_json(const struct ibvf_port_watch_config *pw)
{
	return json_pack(
		"{s:s,s:i,s:i,s:i,s:i}", "source", port_watch_sources[pw->source == 1 ? 1 : 0],
		"poll_min_ms", (int)pw->poll_min_ms, "poll_max_ms", (int)pw->poll_max_ms,
		"mad_timeout_ms", (int)pw->mad_timeout_ms, "mad_retries", (int)pw->mad_retries);
}

static int parse_daemon(const struct ibvf_jctx *c, json_t *o, struct ibvf_config *cfg)
{
	static const char *const keys[] = {
		"prepare_timeout_s", "port_timeout_s", "stop_timeout_s", "workers",
		"reconcile",	     "parked_guid",    "cni_cache_dir",	 NULL};
	struct ibvf_daemon_config *d = &cfg->daemon;
	uint64_t pt = d->prepare_timeout_s, po = d->port_timeout_s, st = d->stop_timeout_s,
		 w = d->workers;
	char *mode = NULL, *parked = NULL, *cache = NULL, e[IBVF_ERR_LEN];
	int ret;

	ret = ibvf_json_check_keys(c, o, "daemon", keys);
	if (!ret)
		ret = ibvf_json_uint(c, o, "daemon", "prepare_timeout_s", 1, 3600, &pt);
	if (!ret)
		ret = ibvf_json_uint(c, o, "daemon", "port_timeout_s", 1, 3600, &po);
	if (!ret)
		ret = ibvf_json_uint(c, o, "daemon", "stop_timeout_s", 0, 3600, &st);
	if (!ret)
		ret = ibvf_json_uint(c, o, "daemon", "workers", 1, 256, &w);
	if (!ret)
		ret = ibvf_json_string(c, o, "daemon", "reconcile", &mode);
	if (!ret)
		ret = ibvf_json_string(c, o, "daemon", "parked_guid", &parked);
	if (!ret)
		ret = ibvf_json_string(c, o, "daemon", "cni_cache_dir", &cache);
	if (!ret && cache) {
		if (cache[0] && cache[0] != '/')
			ret = ibvf_json_err(c, "daemon", "cni_cache_dir",
					    "must be an absolute path or \"\"");
		else if (strlen(cache) >= sizeof(d->cni_cache_dir))
			ret = ibvf_json_err(c, "daemon", "cni_cache_dir", "too long");
		else
			snprintf(d->cni_cache_dir, sizeof(d->cni_cache_dir), "%s", cache);
	}
	if (!ret && mode) {
		if (!strcmp(mode, "report"))
			d->reconcile = IBVF_RECONCILE_REPORT;
		else if (!strcmp(mode, "fix"))
			d->reconcile = IBVF_RECONCILE_FIX;
		else
			ret = ibvf_json_err(c, "daemon", "reconcile",
					    "expected \"report\" or \"fix\"");
	}
	if (!ret && parked) {
		if (ibvf_guid_parse(parked, &d->parked_guid, e, sizeof(e)))
			ret = ibvf_json_err(c, "daemon", "parked_guid", "%s", e);
		else if (d->parked_guid == IBVF_GUID_ALL_ONES)
			ret = ibvf_json_err(c, "daemon", "parked_guid", "all-ones is reserved");
	}
	free(mode);
	free(parked);
	free(cache);
	if (ret)
		return ret;
	d->prepare_timeout_s = (uint32_t)pt;
	d->port_timeout_s = (uint32_t)po;
	d->stop_timeout_s = (uint32_t)st;
	d->workers = (uint32_t)w;
	return 0;
}

/* smd (ibvf-smd, the SM agent of cluster mode; docs/config.md "smd") */
static int parse_smd(const struct ibvf_jctx *c, json_t *o, struct ibvf_smd_config *k)
{
	static const char *const keys[] = {"id",	  "group",     "election", "lease_ttl_s",
					   "reconcile_s", "batch_max", NULL};
	uint64_t ttl = k->lease_ttl_s, rec = k->reconcile_s, bm = k->batch_max;
	json_t *el = json_object_get(o, "election");
	int ret = ibvf_json_check_keys(c, o, "smd", keys);

	if (!ret)
		ret = ibvf_json_string(c, o, "smd", "id", &k->id);
	if (!ret)
		ret = ibvf_json_string(c, o, "smd", "group", &k->group);
	if (!ret && el) {
		k->election_set = true;
		ret = ibvf_json_bool(c, o, "smd", "election", &k->election);
	}
	if (!ret)
		ret = ibvf_json_uint(c, o, "smd", "lease_ttl_s", 2, 600, &ttl);
	if (!ret)
		ret = ibvf_json_uint(c, o, "smd", "reconcile_s", 1, 86400, &rec);
	if (!ret)
		ret = ibvf_json_uint(c, o, "smd", "batch_max", 1, 1000000, &bm);
	if (!ret && k->id && !node_name_ok(k->id))
		ret = ibvf_json_err(c, "smd", "id", "expected a name (RFC 1123 subdomain)");
	if (!ret && k->group && !node_name_ok(k->group))
		ret = ibvf_json_err(c, "smd", "group", "expected a name (RFC 1123 subdomain)");
	k->lease_ttl_s = (uint32_t)ttl;
	k->reconcile_s = (uint32_t)rec;
	k->batch_max = (uint32_t)bm;
	return ret;
}

/*
 * The smd defaults that depend on the rest: id = pool.cluster.node; a ufm
 * backend elects one leader (group "ufm"), any other renders its own SM
 * (group = id).
 */
static int smd_finish(struct ibvf_config *cfg)
{
	struct ibvf_smd_config *k = &cfg->smd;

	if (!k->election_set)
		k->election = !strcmp(cfg->sm.backend, "ufm");
	if (!k->id && cfg->pool.cluster.node && set_str(&k->id, cfg->pool.cluster.node))
		return -ENOMEM;
	if (!k->group && set_str(&k->group, k->election ? "ufm" : (k->id ? k->id : "")))
		return -ENOMEM;
	return 0;
}

/*
 * sm.backend "cluster" (issue 19): the backend reaches the same etcd as
 * pool.cluster, so its etcd keys (endpoints, TLS, auth, prefix, node, the
 * call timeout as etcd_timeout_ms) are filled from pool.cluster where
 * sm.config leaves them out; without pool.cluster it is a config error.
 */
static int cluster_backend_fill(struct ibvf_config *cfg, char *err, size_t errlen)
{
	const struct ibvf_cluster_config *k = &cfg->pool.cluster;
	const char *file = cfg->path ? cfg->path : "<defaults>";
	const struct {
		const char *key, *v;
	} str[] = {{"ca_file", k->ca_file},	{"cert_file", k->cert_file},
		   {"key_file", k->key_file},	{"user", k->user},
		   {"user_file", k->user_file}, {"password_file", k->password_file},
		   {"prefix", k->prefix},	{"node", k->node}};
	json_t *o;
	int ret;

	if (strcmp(cfg->sm.backend, "cluster"))
		return 0;
	if (!k->enabled)
		return ibvf_errf(err, errlen, -EINVAL,
				 "%s: sm.backend: \"cluster\" needs pool.cluster (the etcd of the "
				 "fabric, docs/cluster.md)",
				 file);
	o = cfg->sm.backend_json ? json_loads(cfg->sm.backend_json, 0, NULL) : json_object();
	if (!o)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	if (!json_object_get(o, "endpoints")) {
		json_t *eps = json_array();

		for (size_t i = 0; eps && i < k->n_endpoints; i++)
			json_array_append_new(eps, json_string(k->endpoints[i]));
		json_object_set_new(o, "endpoints", eps ? eps : json_null());
	}
	for (size_t i = 0; i < sizeof(str) / sizeof(str[0]); i++)
		if (str[i].v && !json_object_get(o, str[i].key))
			json_object_set_new(o, str[i].key, json_string(str[i].v));
	if (!json_object_get(o, "etcd_timeout_ms"))
		json_object_set_new(o, "etcd_timeout_ms", json_integer(k->timeout_ms));
	ret = dump_json(o, &cfg->sm.backend_json);
	json_decref(o);
	return ret ? ibvf_errf(err, errlen, ret, "out of memory") : 0;
}

static int parse_top(const struct ibvf_jctx *c, json_t *root, struct ibvf_config *cfg)
{
	static const char *const keys[] = {
		"state_dir", "run_dir", "sysfs_root", "log_level", "allow_default_pkey",
		"pool",	     "sm",	"vf",	      "api",	   "port_watch",
		"daemon",    "http",	"log_format", "smd",	   NULL};
	char *level = NULL, *format = NULL;
	json_t *o;
	int ret;

	ret = ibvf_json_check_keys(c, root, "", keys);
	if (!ret)
		ret = ibvf_json_string(c, root, "", "state_dir", &cfg->state_dir);
	if (!ret)
		ret = ibvf_json_string(c, root, "", "run_dir", &cfg->run_dir);
	if (!ret)
		ret = ibvf_json_string(c, root, "", "sysfs_root", &cfg->sysfs_root);
	if (!ret)
		ret = check_abs_path(c, "", "state_dir", cfg->state_dir);
	if (!ret)
		ret = check_abs_path(c, "", "run_dir", cfg->run_dir);
	if (!ret)
		ret = check_abs_path(c, "", "sysfs_root", cfg->sysfs_root);
	if (!ret)
		ret = ibvf_json_bool(c, root, "", "allow_default_pkey", &cfg->allow_default_pkey);
	if (!ret)
		ret = ibvf_json_string(c, root, "", "log_level", &level);
	if (!ret && level) {
		int l = ibvf_log_level_parse(level);

		if (l < 0)
			ret = ibvf_json_err(c, "", "log_level",
					    "expected error, warning, notice, info or debug");
		else
			cfg->log_level = l;
	}
	free(level);
	if (!ret)
		ret = ibvf_json_string(c, root, "", "log_format", &format);
	if (!ret && format) {
		if (strcmp(format, "text") && strcmp(format, "json"))
			ret = ibvf_json_err(c, "", "log_format", "expected text or json");
		else
			cfg->log_json = !strcmp(format, "json");
	}
	free(format);
	if (!ret && !(ret = ibvf_json_object(c, root, "", "http", &o)) && o)
		ret = parse_http(c, o, cfg);
	if (!ret && !(ret = ibvf_json_object(c, root, "", "pool", &o)) && o)
		ret = parse_pool(c, o, cfg);
	if (!ret && !(ret = ibvf_json_object(c, root, "", "sm", &o)) && o)
		ret = parse_sm(c, o, cfg);
	if (!ret && !(ret = ibvf_json_object(c, root, "", "vf", &o)) && o)
		ret = parse_vf(c, o, cfg);
	if (!ret && !(ret = ibvf_json_object(c, root, "", "api", &o)) && o)
		ret = parse_api(c, o, cfg);
	if (!ret && !(ret = ibvf_json_object(c, root, "", "port_watch", &o)) && o)
		ret = parse_port_watch(c, o, &cfg->port_watch);
	if (!ret && !(ret = ibvf_json_object(c, root, "", "daemon", &o)) && o)
		ret = parse_daemon(c, o, cfg);
	if (!ret && !(ret = ibvf_json_object(c, root, "", "smd", &o)) && o)
		ret = parse_smd(c, o, &cfg->smd);
	return ret;
}

static const char *env_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);

	for (; envp && *envp; envp++)
		if (!strncmp(*envp, name, n) && (*envp)[n] == '=')
			return *envp + n + 1;
	return NULL;
}

/*
 * The cluster defaults that depend on the environment: the node name from
 * NODE_NAME (the Kubernetes downward API's spec.nodeName), else the
 * hostname; the key prefix "/ibvf/", which always ends in "/".
 */
static int cluster_finish(struct ibvf_cluster_config *k, char *const *envp, char *err,
			  size_t errlen)
{
	struct ibvf_jctx c = {"<environment>", err, errlen};
	const char *n = env_get(envp, "NODE_NAME");
	char host[IBVF_CLUSTER_NODE_MAX + 2] = "";

	if (!k->enabled)
		return 0;
	if (!k->node) {
		if (n && *n) {
			if (!node_name_ok(n))
				return ibvf_json_err(&c, "", "NODE_NAME",
						     "'%.64s' is not a node name (RFC 1123 "
						     "subdomain, <= 253 bytes)",
						     n);
		} else {
			if (gethostname(host, sizeof(host) - 1) || !node_name_ok(host))
				return ibvf_errf(err, errlen, -EINVAL,
						 "pool.cluster.node: not set, no NODE_NAME in the "
						 "environment, and the hostname '%.64s' is not a "
						 "node name",
						 host);
			n = host;
		}
		if (set_str(&k->node, n))
			return -ENOMEM;
	}
	if (!k->prefix && set_str(&k->prefix, "/ibvf/"))
		return -ENOMEM;
	if (k->prefix[strlen(k->prefix) - 1] != '/') {
		char *p;

		if (asprintf(&p, "%s/", k->prefix) < 0)
			return -ENOMEM;
		free(k->prefix);
		k->prefix = p;
	}
	return 0;
}

/* Set @key of the SM backend's JSON config to @v (a new reference). */
static int backend_set(struct ibvf_config *cfg, const char *key, json_t *v, char *err,
		       size_t errlen)
{
	json_t *o =
		cfg->sm.backend_json ? json_loads(cfg->sm.backend_json, 0, NULL) : json_object();
	int ret;

	if (!o || !v) {
		json_decref(o);
		json_decref(v);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	json_object_set_new(o, key, v);
	ret = dump_json(o, &cfg->sm.backend_json);
	json_decref(o);
	return ret;
}

/*
 * ib-kubernetes environment variables (deployment/ib-kubernetes-configmap.yaml
 * of Mellanox/ib-kubernetes). docs/config.md documents each mapping.
 */
static int apply_env(struct ibvf_config *cfg, char *const *envp, char *err, size_t errlen)
{
	static const struct {
		const char *env, *key;
		bool number;
	} ufm_map[] = {
		{"UFM_USERNAME", "username", false}, {"UFM_PASSWORD", "password", false},
		{"UFM_ADDRESS", "address", false},   {"UFM_HTTP_SCHEMA", "scheme", false},
		{"UFM_PORT", "port", true},	     {"UFM_CERTIFICATE", "ca_pem", false},
	};
	struct ibvf_jctx c = {"<environment>", err, errlen};
	const char *s = env_get(envp, "GUID_POOL_RANGE_START");
	const char *e = env_get(envp, "GUID_POOL_RANGE_END");
	int ignored = 0;
	int ret;

	if (s || e) {
		json_t *arr;

		if (!s || !e)
			return ibvf_json_err(&c, "",
					     s ? "GUID_POOL_RANGE_END" : "GUID_POOL_RANGE_START",
					     "both GUID_POOL_RANGE_START and GUID_POOL_RANGE_END "
					     "must be set");
		arr = json_pack("[{s:s,s:s}]", "start", s, "end", e);
		if (!arr)
			return -ENOMEM;
		free(cfg->pool.ranges);
		cfg->pool.ranges = NULL;
		ret = ibvf_parse_guid_ranges("<environment>", "GUID_POOL_RANGE_START..END", arr,
					     &cfg->pool.ranges, &cfg->pool.n_ranges, err, errlen);
		json_decref(arr);
		if (ret)
			return ret;
	}
	if ((s = env_get(envp, "DAEMON_SM_PLUGIN")) && *s) {
		if (!backend_name_ok(s))
			return ibvf_json_err(
				&c, "", "DAEMON_SM_PLUGIN",
				"'%.40s' is not a backend name (1..32 of A-Z a-z 0-9 _ -)", s);
		if (set_str(&cfg->sm.backend, s))
			return -ENOMEM;
	}
	/* IBVF_HTTP_PORT: the DaemonSet's env, and meson's test setup (0: any free port) */
	if ((s = env_get(envp, "IBVF_HTTP_PORT")) && *s) {
		char *end;
		unsigned long v = strtoul(s, &end, 10);

		if (*end || v > 65535)
			return ibvf_json_err(&c, "", "IBVF_HTTP_PORT",
					     "'%.32s' is not a TCP port (0..65535)", s);
		cfg->http.port = (uint16_t)v;
		cfg->http.port_set = true;
	}
	if ((s = env_get(envp, "DAEMON_PERIODIC_UPDATE")) && *s) {
		char *end;
		unsigned long v = strtoul(s, &end, 10);

		if (*end || v < 1 || v > 86400)
			return ibvf_json_err(&c, "", "DAEMON_PERIODIC_UPDATE",
					     "'%.32s' is not a number of seconds in 1..86400", s);
		cfg->sm.periodic_update_s = (uint32_t)v;
	}
	for (size_t i = 0; i < sizeof(ufm_map) / sizeof(ufm_map[0]); i++) {
		json_t *v;

		s = env_get(envp, ufm_map[i].env);
		if (!s || !*s)
			continue;
		if (ufm_map[i].number) {
			char *end;
			unsigned long p = strtoul(s, &end, 10);

			if (*end || p < 1 || p > 65535)
				return ibvf_json_err(&c, "", ufm_map[i].env,
						     "'%.32s' is not a TCP port", s);
			v = json_integer((json_int_t)p);
		} else {
			v = json_string(s);
		}
		/* ib-kubernetes ships the UFM secret whatever DAEMON_SM_PLUGIN says:
		 * merge it only into the ufm backend's config, so a switch to
		 * noop or opensm does not fail on keys that backend does not know */
		if (strcmp(cfg->sm.backend, "ufm")) {
			json_decref(v);
			ignored++;
			continue;
		}
		ret = backend_set(cfg, ufm_map[i].key, v, err, errlen);
		if (ret)
			return ret;
	}
	if (ignored)
		log_notice(
			"%d UFM_* environment variable(s) ignored: the SM backend is %s, not ufm",
			ignored, cfg->sm.backend);
	return 0;
}

/*
 * The keys of sm.config that are known not to hold a secret: the non-secret
 * keys of the noop, opensm and ufm backends (docs/config.md). Every other
 * value under sm.config is masked by --print-config, so that a misspelled
 * secret key ("pasword") or a third-party backend's key is never printed.
 * Paths to secret files (password_file, client_key) are not secrets.
 */
static bool is_public_key(const char *k)
{
	static const char *const pub[] = {
		/* ufm */
		"address", "scheme", "port", "auth", "username", "password_file", "token_file",
		"ca_file", "ca_pem", "client_cert", "client_key", "insecure_skip_verify",
		"connect_timeout_ms", "timeout_ms", "max_guids_per_request", "index0", "ip_over_ib",
		"change_wait_ms",
		/* opensm */
		"partition_file", "backup_file", "lock_file", "pid_file", "reload_timeout_ms",
		"lock_timeout_ms", "verify", "umad_ca", "umad_port", "poll_min_ms", "poll_max_ms",
		"defaults", "ipoib", "indx0", "mtu", "rate", "sl",
		/* cluster (pool.cluster's keys hold no secret value: files only) */
		"endpoints", "cert_file", "key_file", "user", "user_file", "prefix", "node",
		"etcd_timeout_ms", "apply_timeout_ms", NULL};

	for (const char *const *p = pub; *p; p++)
		if (!strcmp(k, *p))
			return true;
	return false;
}

/*
 * Replace every scalar (string, number, boolean) of @j whose key is not
 * public with "********", at any depth of objects and arrays (an array's
 * elements are judged by the array's key, @key). Return: values masked.
 */
static unsigned mask_secrets(json_t *j, const char *key)
{
	unsigned n = 0;
	const char *k;
	json_t *v;
	size_t i;

	if (json_is_array(j)) {
		json_array_foreach(j, i, v)
		{
			if (json_is_object(v) || json_is_array(v))
				n += mask_secrets(v, key);
			else if (!json_is_null(v) && (!key || !is_public_key(key))) {
				json_array_set_new(j, i, json_string("********"));
				n++;
			}
		}
		return n;
	}
	json_object_foreach(j, k, v)
	{
		if (json_is_object(v) || json_is_array(v))
			n += mask_secrets(v, k);
		else if (!json_is_null(v) && !is_public_key(k)) {
			json_object_set_new(j, k, json_string("********"));
			n++;
		}
	}
	return n;
}

/*
 * An inline secret (any value --print-config would mask) in a config file
 * that group or others may read: warn, naming the file and its mode.
 */
static void warn_inline_secrets(const char *file, const struct stat *st, const char *backend_json)
{
	json_t *b = backend_json ? json_loads(backend_json, 0, NULL) : NULL;
	unsigned n = b ? mask_secrets(b, NULL) : 0;

	json_decref(b);
	if (n && (st->st_mode & 044))
		log_warn("%s: sm.config holds %u inline secret value(s) (or unknown keys) but the "
			 "file is mode %04o, readable by %s: chmod 0600 %s, or move the secret "
			 "to a password_file/token_file of mode 0600",
			 file, n, (unsigned)(st->st_mode & 07777),
			 (st->st_mode & 04) ? "everyone" : "its group", file);
}

int ibvf_config_load(struct ibvf_config *cfg, const char *path, bool must_exist, char *const *envp,
		     char *err, size_t errlen)
{
	const char *file = path ? path : IBVF_DEFAULT_CONFIG;
	json_t *root = NULL;
	int ret;

	ret = set_defaults(cfg);
	if (ret)
		goto fail;
	if (access(file, F_OK) == 0) {
		struct ibvf_jctx c = {file, err, errlen};
		struct stat st;
		size_t len;
		char *text;

		/* never blocks: a FIFO or device in the file's place is refused at once */
		ret = ibvf_file_read_regular(file, IBVF_JSON_FILE_MAX, 0, &text, &len, &st, err,
					     errlen);
		if (ret)
			goto fail;
		root = ibvf_json_loadb(file, text, len, err, errlen);
		ibvf_file_wipe_free(text, len); /* it may hold an inline secret */
		if (!root) {
			ret = -EINVAL;
			goto fail;
		}
		ret = parse_top(&c, root, cfg);
		if (ret)
			goto fail;
		if (set_str(&cfg->path, file)) {
			ret = -ENOMEM;
			goto fail;
		}
		warn_inline_secrets(file, &st, cfg->sm.backend_json);
	} else if (must_exist) {
		ret = ibvf_errf(err, errlen, -ENOENT, "%s: %s", file, strerror(errno));
		goto fail;
	}
	ret = apply_env(cfg, envp, err, errlen);
	/* vf.warm defaults to on for the production driver only (docs/config.md) */
	if (!cfg->vf.warm_set)
		cfg->vf.warm = !strcmp(cfg->vf.driver, "netlink");
	if (!ret)
		ret = cluster_finish(&cfg->pool.cluster, envp, err, errlen);
	if (!ret)
		ret = cluster_backend_fill(cfg, err, errlen);
	if (!ret)
		ret = smd_finish(cfg);
	if (ret)
		goto fail;
	if (!cfg->api.socket) {
		if (asprintf(&cfg->api.socket, "%s/ibvfd.sock", cfg->run_dir) < 0) {
			cfg->api.socket = NULL;
			ret = -ENOMEM;
			goto fail;
		}
	}
	json_decref(root);
	return 0;
fail:
	if (ret == -ENOMEM)
		ibvf_errf(err, errlen, ret, "out of memory reading config");
	json_decref(root);
	ibvf_config_free(cfg);
	return ret;
}

/* Environment variables that hold a secret: scrubbed by ibvf_config_env_take(). */
static const char *const secret_env[] = {"UFM_PASSWORD", NULL};

char **ibvf_config_env_take(char **env)
{
	size_t n = 0;
	char **copy;

	while (env && env[n])
		n++;
	/* n + 1 entries, then room to note up to n secret entries */
	copy = calloc(2 * n + 1, sizeof(*copy));
	if (!copy)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		copy[i] = strdup(env[i]);
		if (!copy[i]) {
			ibvf_config_env_free(copy);
			return NULL;
		}
	}
	for (const char *const *name = secret_env; *name; name++) {
		size_t l = strlen(*name), k = 0;

		/* every occurrence (a name may be set twice), before unsetenv drops them all */
		for (size_t i = 0; i < n; i++)
			if (!strncmp(env[i], *name, l) && env[i][l] == '=')
				copy[n + 1 + k++] = env[i];
		if (!k)
			continue;
		/*
		 * unsetenv() only drops the pointers; the bytes stay in the
		 * initial stack that /proc/PID/environ shows: overwrite them.
		 */
		if (env == environ)
			unsetenv(*name);
		while (k--) {
			char *v = copy[n + 1 + k];

			explicit_bzero(v + l, strlen(v + l));
			copy[n + 1 + k] = NULL;
		}
	}
	return copy;
}

void ibvf_config_env_free(char **envp)
{
	for (size_t i = 0; envp && envp[i]; i++)
		wipe_str(envp[i]);
	free(envp);
}

void ibvf_config_free(struct ibvf_config *cfg)
{
	free(cfg->path);
	free(cfg->state_dir);
	free(cfg->run_dir);
	free(cfg->sysfs_root);
	free(cfg->pool.ranges);
	cluster_free(&cfg->pool.cluster);
	free(cfg->sm.backend);
	free(cfg->sm.module_dir);
	wipe_str(cfg->sm.backend_json);
	free(cfg->vf.driver);
	free(cfg->vf.ibsim_json);
	free(cfg->vf.fake_dir);
	free(cfg->vf.module_dir);
	free(cfg->api.socket);
	free(cfg->smd.id);
	free(cfg->smd.group);
	memset(cfg, 0, sizeof(*cfg));
}

static json_t *ranges_json(const struct ibvf_pool_config *p)
{
	json_t *arr = json_array();

	for (size_t i = 0; arr && i < p->n_ranges; i++) {
		char a[IBVF_GUID_STR_LEN], b[IBVF_GUID_STR_LEN];

		json_array_append_new(arr, json_pack("{s:s,s:s}", "start",
						     ibvf_guid_format(p->ranges[i].start, a), "end",
						     ibvf_guid_format(p->ranges[i].end, b)));
	}
	return arr;
}

/*
 * pool.cluster for --print-config. It holds no secret value: credentials
 * are only ever named by file (user_file, password_file, key_file), and an
 * endpoint with user info ("http://u:p@host") is refused at load. The user
 * name is shown; it is not a secret in etcd's model.
 */
static json_t *cluster_json(const struct ibvf_cluster_config *k)
{
	json_t *eps = json_array(), *o;

	for (size_t i = 0; eps && i < k->n_endpoints; i++)
		json_array_append_new(eps, json_string(k->endpoints[i]));
	o = json_pack("{s:o,s:s?,s:s?,s:s?,s:s?,s:s?,s:s?,s:s,s:s,s:i,s:i,s:I,s:i}", "endpoints",
		      eps, "ca_file", k->ca_file, "cert_file", k->cert_file, "key_file",
		      k->key_file, "user", k->user, "user_file", k->user_file, "password_file",
		      k->password_file, "prefix", k->prefix, "node", k->node, "block_size",
		      (int)k->block_size, "low_watermark", (int)k->low_watermark, "high_watermark",
		      (json_int_t)k->high_watermark, "timeout_ms", (int)k->timeout_ms);
	return o ? o : json_object();
}

static json_t *opt_json(const char *text)
{
	json_t *o = text ? json_loads(text, 0, NULL) : NULL;

	return o ? o : json_object();
}

int ibvf_config_print(const struct ibvf_config *cfg, FILE *f)
{
	json_t *uids = json_array(), *root, *backend = opt_json(cfg->sm.backend_json);
	char *s;

	for (size_t i = 0; uids && i < cfg->api.n_allowed_uids; i++)
		json_array_append_new(uids, json_integer(cfg->api.allowed_uids[i]));
	mask_secrets(backend, NULL);
	root = json_pack(
		"{s:s?,s:s,s:s,s:s,s:s,s:b,s:{s:o,s:i,s:s},s:{s:s,s:s,s:o,s:i,s:i,s:i},"
		"s:{s:s,s:i,s:s,s:o,s:b},s:{s:s,s:o,s:i,s:i}}",
		"config_file", cfg->path, "state_dir", cfg->state_dir, "run_dir", cfg->run_dir,
		"sysfs_root", cfg->sysfs_root, "log_level", ibvf_log_level_name(cfg->log_level),
		"allow_default_pkey", cfg->allow_default_pkey, "pool", "ranges",
		ranges_json(&cfg->pool), "quarantine_s", (int)cfg->pool.quarantine_s, "sync",
		cfg->pool.sync_full ? "full" : "normal", "sm", "backend", cfg->sm.backend,
		"module_dir", cfg->sm.module_dir, "config", backend, "periodic_update_s",
		(int)cfg->sm.periodic_update_s, "batch_window_ms", (int)cfg->sm.batch_window_ms,
		"batch_max", (int)cfg->sm.batch_max, "vf", "driver", cfg->vf.driver,
		"rebind_timeout_ms", (int)cfg->vf.rebind_timeout_ms, "module_dir",
		cfg->vf.module_dir, "ibsim", opt_json(cfg->vf.ibsim_json), "warm", cfg->vf.warm,
		"api", "socket", cfg->api.socket, "allowed_uids", uids, "idle_timeout_s",
		(int)cfg->api.idle_timeout_s, "line_timeout_s", (int)cfg->api.line_timeout_s);
	if (!root)
		return -ENOMEM;
	if (cfg->pool.cluster.enabled)
		json_object_set_new(json_object_get(root, "pool"), "cluster",
				    cluster_json(&cfg->pool.cluster));
	json_object_set_new(root, "port_watch", port_watch_json(&cfg->port_watch));
	json_object_set_new(root, "log_format", json_string(cfg->log_json ? "json" : "text"));
	json_object_set_new(root, "http",
			    json_pack("{s:b,s:s,s:i}", "enabled", cfg->http.enabled, "address",
				      cfg->http.address, "port", (int)cfg->http.port));
	json_object_set_new(root, "smd",
			    json_pack("{s:s?,s:s?,s:b,s:i,s:i,s:i}", "id", cfg->smd.id, "group",
				      cfg->smd.group, "election", cfg->smd.election, "lease_ttl_s",
				      (int)cfg->smd.lease_ttl_s, "reconcile_s",
				      (int)cfg->smd.reconcile_s, "batch_max",
				      (int)cfg->smd.batch_max));
	{
		char pg[IBVF_GUID_STR_LEN];

		json_object_set_new(
			root, "daemon",
			json_pack("{s:i,s:i,s:i,s:i,s:s,s:s,s:s}", "prepare_timeout_s",
				  (int)cfg->daemon.prepare_timeout_s, "port_timeout_s",
				  (int)cfg->daemon.port_timeout_s, "stop_timeout_s",
				  (int)cfg->daemon.stop_timeout_s, "workers",
				  (int)cfg->daemon.workers, "reconcile",
				  cfg->daemon.reconcile == IBVF_RECONCILE_FIX ? "fix" : "report",
				  "parked_guid",
				  cfg->daemon.parked_guid
					  ? ibvf_guid_format(cfg->daemon.parked_guid, pg)
					  : "pre-attach",
				  "cni_cache_dir", cfg->daemon.cni_cache_dir));
	}
	s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(root);
	if (!s)
		return -ENOMEM;
	fprintf(f, "%s\n", s);
	free(s);
	return 0;
}
