// SPDX-License-Identifier: MIT
/*
 * The `cluster` SM backend (sm_cluster.h, docs/cluster.md): desired
 * memberships in etcd, applied by the SM agent ibvf-smd.
 */
#include "sm_cluster.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "err.h"
#include "json_util.h"
#include "sm_members.h"

#define CL_CFG_NAME	    "sm.config (cluster)"
#define CL_TXN_MEMBERS	    64 /* members per txn: a compare and an op each (etcd --max-txn-ops 128) */
#define CL_DEFAULT_APPLY_MS 10000
#define CL_DEFAULT_POLL_MAX 50
#define CL_MAX_ENDPOINTS    16
#define CL_FIRST_POLL_MS    2

struct ibvf_sm_backend {
	struct etcd_client *etcd;
	char *prefix;
	char *node;
	uint64_t apply_timeout_ms;
	uint64_t poll_max_ms;
	struct ibvf_sm_pkey_flags defaults;
	bool view_ok; /* P bynode/<node>/ is complete (ensure_view()) */
	struct sm_cluster_stats st;
};

void sm_cluster_get_stats(const struct ibvf_sm_backend *b, struct sm_cluster_stats *out)
{
	*out = b->st;
}

struct cl_config {
	const char *endpoints[CL_MAX_ENDPOINTS];
	size_t n_endpoints;
	char *ca_file, *cert_file, *key_file, *user, *user_file, *password_file, *prefix, *node;
	uint64_t etcd_timeout_ms, apply_timeout_ms, poll_max_ms;
	bool index0, ipoib;
};

static void cl_config_free(struct cl_config *k)
{
	free(k->ca_file);
	free(k->cert_file);
	free(k->key_file);
	free(k->user);
	free(k->user_file);
	free(k->password_file);
	free(k->prefix);
	free(k->node);
}

static int cl_parse(json_t *root, struct cl_config *k, char *err, size_t errlen)
{
	static const char *const keys[] = {
		"endpoints", "ca_file",		 "cert_file",	    "key_file", "user",
		"user_file", "password_file",	 "etcd_timeout_ms", "prefix",	"node",
		"index0",    "apply_timeout_ms", "poll_max_ms",	    "ipoib",	NULL};
	struct ibvf_jctx c = {CL_CFG_NAME, err, errlen};
	json_t *eps = json_object_get(root, "endpoints");
	int ret = ibvf_json_check_keys(&c, root, "", keys);

	if (ret)
		return ret;
	if (!json_is_array(eps) || !json_array_size(eps) || json_array_size(eps) > CL_MAX_ENDPOINTS)
		return ibvf_json_err(
			&c, "", "endpoints",
			"expected an array of 1 to %d etcd URLs (pool.cluster.endpoints "
			"fills it when absent)",
			CL_MAX_ENDPOINTS);
	for (size_t i = 0; i < json_array_size(eps); i++) {
		k->endpoints[i] = json_string_value(json_array_get(eps, i));
		if (!k->endpoints[i])
			return ibvf_json_err(&c, "", "endpoints", "[%zu]: expected a string", i);
		k->n_endpoints++;
	}
	ret = ibvf_json_string(&c, root, "", "ca_file", &k->ca_file);
	if (!ret)
		ret = ibvf_json_string(&c, root, "", "cert_file", &k->cert_file);
	if (!ret)
		ret = ibvf_json_string(&c, root, "", "key_file", &k->key_file);
	if (!ret)
		ret = ibvf_json_string(&c, root, "", "user", &k->user);
	if (!ret)
		ret = ibvf_json_string(&c, root, "", "user_file", &k->user_file);
	if (!ret)
		ret = ibvf_json_string(&c, root, "", "password_file", &k->password_file);
	if (!ret)
		ret = ibvf_json_string(&c, root, "", "prefix", &k->prefix);
	if (!ret)
		ret = ibvf_json_string(&c, root, "", "node", &k->node);
	if (!ret)
		ret = ibvf_json_uint(&c, root, "", "etcd_timeout_ms", 100, 600000,
				     &k->etcd_timeout_ms);
	if (!ret)
		ret = ibvf_json_uint(&c, root, "", "apply_timeout_ms", 100, 600000,
				     &k->apply_timeout_ms);
	if (!ret)
		ret = ibvf_json_uint(&c, root, "", "poll_max_ms", 1, 5000, &k->poll_max_ms);
	if (!ret)
		ret = ibvf_json_bool(&c, root, "", "index0", &k->index0);
	if (!ret)
		ret = ibvf_json_bool(&c, root, "", "ipoib", &k->ipoib);
	if (ret)
		return ret;
	if (!k->prefix || !*k->prefix || k->prefix[strlen(k->prefix) - 1] != '/')
		return ibvf_json_err(
			&c, "", "prefix",
			"expected the etcd key prefix ending in '/' (pool.cluster.prefix)");
	if (!cluster_name_ok(k->node))
		return ibvf_json_err(&c, "", "node",
				     "expected this node's name (pool.cluster.node): 1..253 of "
				     "[A-Za-z0-9._-]");
	return 0;
}

static int cl_init(const char *json_config, struct ibvf_sm_backend **out, char *err, size_t errlen)
{
	struct cl_config k = {.apply_timeout_ms = CL_DEFAULT_APPLY_MS,
			      .poll_max_ms = CL_DEFAULT_POLL_MAX,
			      .ipoib = true};
	struct ibvf_sm_backend *b = NULL;
	json_t *root;
	int ret;

	*out = NULL;
	root = ibvf_json_load(CL_CFG_NAME, json_config ? json_config : "{}", err, errlen);
	if (!root)
		return -EINVAL;
	ret = cl_parse(root, &k, err, errlen);
	if (!ret && !(b = calloc(1, sizeof(*b))))
		ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	if (!ret) {
		struct etcd_client_opts o = {
			.endpoints = k.endpoints,
			.n_endpoints = k.n_endpoints,
			.ca_file = k.ca_file,
			.cert_file = k.cert_file,
			.key_file = k.key_file,
			.user = k.user,
			.user_file = k.user_file,
			.password_file = k.password_file,
			.timeout_ms = (uint32_t)k.etcd_timeout_ms,
		};

		ret = etcd_client_new(&o, &b->etcd, err, errlen);
	}
	if (!ret) {
		b->prefix = k.prefix;
		b->node = k.node;
		k.prefix = k.node = NULL;
		b->apply_timeout_ms = k.apply_timeout_ms;
		b->poll_max_ms = k.poll_max_ms;
		b->defaults.index0 = k.index0;
		b->defaults.ipoib = k.ipoib;
		*out = b;
		b = NULL;
	}
	free(b);
	cl_config_free(&k);
	json_decref(root);
	return ret;
}

static void cl_fini(struct ibvf_sm_backend *b)
{
	if (!b)
		return;
	etcd_client_free(b->etcd);
	free(b->prefix);
	free(b->node);
	free(b);
}

static int cl_validate(struct ibvf_sm_backend *b, char *desc, size_t desclen, char *err,
		       size_t errlen)
{
	struct cluster_sm_state s;
	int ret = cluster_sm_state_read(b->etcd, b->prefix, &s, err, errlen);
	size_t off;

	if (ret)
		return ret;
	if (!s.n_agents) {
		cluster_sm_state_free(&s);
		return ibvf_errf(err, errlen, -EHOSTUNREACH,
				 "cluster: no SM agent (ibvf-smd) is live under %ssmd/agents/ in "
				 "etcd %s: memberships would never be applied",
				 b->prefix, etcd_client_endpoint(b->etcd));
	}
	off = (size_t)snprintf(desc, desclen, "cluster: etcd %s, node %s, %zu SM agent(s):",
			       etcd_client_endpoint(b->etcd), b->node, s.n_agents);
	for (size_t i = 0; i < s.n_agents && off < desclen; i++)
		off += (size_t)snprintf(desc + off, desclen - off, " %s(%s%s)", s.agents[i].id,
					s.agents[i].group, s.agents[i].leader ? ",leader" : "");
	cluster_sm_state_free(&s);
	return 0;
}

static int check_pkey(uint16_t pkey, char *err, size_t errlen)
{
	if (pkey == 0 || pkey > 0x7fff)
		return ibvf_errf(err, errlen, -EINVAL,
				 "PKey 0x%04x: expected a 15-bit partition key 0x0001..0x7fff",
				 pkey);
	return 0;
}

static const struct cluster_member *find(const struct cluster_member *v, size_t n, uint64_t guid)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].guid < guid)
			lo = mid + 1;
		else if (v[mid].guid > guid)
			hi = mid;
		else
			return &v[mid];
	}
	return NULL;
}

static void count_reads(struct ibvf_sm_backend *b, const struct cluster_read_stats *rs)
{
	b->st.reads += rs->reads;
	b->st.read_keys += rs->keys;
	b->st.read_bytes += rs->bytes;
}

/* The desired keys of exactly these GUIDs of @pkey (every node's), sorted by GUID. */
static int read_guids(struct ibvf_sm_backend *b, uint16_t pkey, const uint64_t *g, size_t n,
		      struct cluster_member **v, size_t *nv, char *err, size_t errlen)
{
	struct cluster_read_stats rs = {0};
	int ret = cluster_members_get(b->etcd, b->prefix, pkey, g, n, v, nv, &rs, err, errlen);

	count_reads(b, &rs);
	return ret;
}

/* One txn: @n_cmp compares, @n_ops ops; *@rev gets the max, *@this_rev its revision. */
static int write_txn(struct ibvf_sm_backend *b, const struct etcd_cmp *cmp, size_t n_cmp,
		     const struct etcd_op *ops, size_t n_ops, int64_t *rev, int64_t *this_rev,
		     char *err, size_t errlen)
{
	struct etcd_txn_result r = {0};
	int ret;

	if (!n_ops)
		return 0;
	ret = etcd_txn(b->etcd, cmp, n_cmp, ops, n_ops, NULL, 0, &r, err, errlen);
	b->st.txns++;
	if (ret)
		return ret;
	if (!r.succeeded) {
		etcd_txn_result_free(&r);
		return ibvf_errf(err, errlen, -EAGAIN,
				 "cluster: a membership key changed meanwhile (another writer); "
				 "the call is retried");
	}
	if (r.revision > *rev)
		*rev = r.revision;
	if (this_rev)
		*this_rev = r.revision;
	etcd_txn_result_free(&r);
	return 0;
}

/*
 * The node's view (P bynode/<node>/) rebuilt from members/ once per process,
 * unless its marker says it was done: keys written before the view existed
 * (or by a node that ran an older ibvfd) get their view key, view keys whose
 * desire is gone are deleted. Each change is guarded by the member key's
 * mod revision, so a concurrent change fails the txn (-EAGAIN, transient).
 */
static int ensure_view(struct ibvf_sm_backend *b, char *err, size_t errlen)
{
	struct cluster_member *all = NULL, *view = NULL;
	struct etcd_range_result mr = {0};
	struct cluster_read_stats rs = {0};
	struct etcd_cmp cmp[CL_TXN_MEMBERS];
	struct etcd_op op[CL_TXN_MEMBERS];
	char(*key)[512] = NULL, (*mkey)[512] = NULL, *val[CL_TXN_MEMBERS] = {0};
	char marker[512];
	size_t n_all = 0, n_view = 0, q = 0, nc = 0;
	int64_t rev = 0;
	int ret;

	if (b->view_ok)
		return 0;
	if (cluster_member_marker_key(b->prefix, b->node, marker, sizeof(marker)) < 0)
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "etcd prefix too long");
	ret = etcd_range(b->etcd, marker, 0, NULL, 0, 0, true, &mr, err, errlen);
	if (ret)
		return ret;
	b->st.reads++;
	if (mr.n_kvs) {
		etcd_range_result_free(&mr);
		b->view_ok = true;
		return 0;
	}
	etcd_range_result_free(&mr);
	/* the old layout's read: every desired membership of the cluster, once */
	ret = cluster_members_list(b->etcd, b->prefix, -1, b->node, &all, &n_all, NULL, NULL, err,
				   errlen);
	b->st.reads++;
	if (!ret)
		ret = cluster_members_list_node(b->etcd, b->prefix, b->node, -1, &view, &n_view,
						NULL, NULL, &rs, err, errlen);
	count_reads(b, &rs);
	key = calloc(CL_TXN_MEMBERS, sizeof(*key));
	mkey = calloc(CL_TXN_MEMBERS, sizeof(*mkey));
	if (!ret && (!key || !mkey))
		ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	/* both lists are in (PKey, GUID) order: one merge */
	for (size_t i = 0, j = 0; !ret && (i < n_all || j < n_view);) {
		const struct cluster_member *d = i < n_all ? &all[i] : NULL,
					    *x = j < n_view ? &view[j] : NULL;
		int c = !d		     ? 1
			: !x		     ? -1
			: d->pkey != x->pkey ? (d->pkey < x->pkey ? -1 : 1)
			: d->guid != x->guid ? (d->guid < x->guid ? -1 : 1)
					     : 0;
		const struct cluster_member *src = c <= 0 ? d : x;

		if (c <= 0)
			i++;
		if (c >= 0)
			j++;
		if (c == 0 && !d->removed && d->membership == x->membership &&
		    d->index0 == x->index0 && d->ipoib == x->ipoib && !strcmp(d->owner, x->owner))
			continue;
		if (c > 0 || (c == 0 && d->removed)) {
			/* a view key without a live desire of this node: delete it */
			cluster_member_index_key(b->prefix, b->node, src->pkey, src->guid, false,
						 key[q], sizeof(key[q]));
			op[q] = (struct etcd_op){.type = ETCD_OP_DELETE, .key = key[q]};
		} else if (!d->removed) {
			/* a desire without its view key (the old layout): put it */
			cluster_member_index_key(b->prefix, b->node, d->pkey, d->guid, false,
						 key[q], sizeof(key[q]));
			val[q] = cluster_member_value(d);
			if (!val[q]) {
				ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
				break;
			}
			op[q] = (struct etcd_op){
				.type = ETCD_OP_PUT, .key = key[q], .value = val[q]};
			/* guarded: the desire is still the one read */
			cluster_member_key(b->prefix, d->pkey, d->guid, false, mkey[nc],
					   sizeof(mkey[nc]));
			cmp[nc] = (struct etcd_cmp){.key = mkey[nc],
						    .target = ETCD_CMP_MOD,
						    .result = ETCD_CMP_EQUAL,
						    .number = d->mod_revision};
			nc++;
		} else {
			continue; /* a tombstone and no view key: nothing to do */
		}
		q++;
		b->st.view_migrated++;
		if (q == CL_TXN_MEMBERS) {
			ret = write_txn(b, cmp, nc, op, q, &rev, NULL, err, errlen);
			for (size_t k = 0; k < q; k++) {
				free(val[k]);
				val[k] = NULL;
			}
			q = nc = 0;
		}
	}
	if (!ret && q)
		ret = write_txn(b, cmp, nc, op, q, &rev, NULL, err, errlen);
	for (size_t k = 0; k < q; k++)
		free(val[k]);
	if (!ret) {
		char v[64];

		snprintf(v, sizeof(v), "{\"migrated_ms\":%lld}", (long long)ibvf_wall_ms());
		ret = etcd_put(b->etcd, marker, 0, v, 0, 0, NULL, err, errlen);
	}
	if (!ret)
		b->view_ok = true;
	else
		ibvf_err_prefix(err, errlen, ret, "cluster: node %s's view (%sbynode/%s/)", b->node,
				b->prefix, b->node);
	free(key);
	free(mkey);
	free(all);
	free(view);
	return ret;
}

static int wake_cb(void *arg, const struct etcd_event *ev)
{
	(void)arg;
	(void)ev;
	return 1; /* any change under smd/: read the state again */
}

/*
 * A permanent refusal of one of @n GUIDs (desired at @wrev[k]; 0: not
 * checked) of @pkey in @s: its errno (permanent by the SM ABI; -EPROTO if
 * the record says otherwise) with the PKey, the GUID, the group and the
 * SM's reason in @err. 0 when none.
 */
static int refusal(struct ibvf_sm_backend *b, const struct cluster_sm_state *s, uint16_t pkey,
		   const uint64_t *g, const int64_t *wrev, size_t n, char *err, size_t errlen)
{
	for (size_t k = 0; k < n; k++) {
		const char *group = "";
		const struct cluster_refusal *r =
			wrev[k] ? cluster_sm_refused(s, pkey, g[k], wrev[k], &group) : NULL;
		int e;

		if (!r)
			continue;
		e = r->err < 0 && !ibvf_sm_err_is_transient(r->err) ? r->err : -EPROTO;
		b->st.refused++;
		return ibvf_errf(err, errlen, e,
				 "cluster: PKey 0x%04x refused by the SM of group %.64s for GUID "
				 "0x%016llx (desired at etcd revision %lld): %s",
				 pkey, group, (unsigned long long)g[k], (long long)wrev[k],
				 r->error);
	}
	return 0;
}

/*
 * Wait until every live SM agent group has applied revision @rev: read P smd/,
 * then watch it from the read's revision + 1 until anything changes there (at
 * most 1 s, then read again); a failed watch falls back to a pause of 2 ms
 * doubling to poll_max_ms. -ETIMEDOUT after apply_timeout_ms. A permanent
 * refusal of one of the @n GUIDs @g of @pkey at its desired revision @wrev
 * (smd/status/, written before the group's applied revision) ends the wait
 * at once with the SM's errno.
 */
static int wait_applied(struct ibvf_sm_backend *b, int64_t rev, uint16_t pkey, const uint64_t *g,
			const int64_t *wrev, size_t n, char *err, size_t errlen)
{
	int64_t end = ibvf_mono_ms() + (int64_t)b->apply_timeout_ms;
	uint64_t delay = CL_FIRST_POLL_MS;
	char why[320] = "", key[512], kend[512], werr[IBVF_ERR_LEN];
	int kl = snprintf(key, sizeof(key), "%ssmd/", b->prefix);
	int el = kl > 0 && (size_t)kl < sizeof(key)
			 ? etcd_prefix_end(key, (size_t)kl, kend, sizeof(kend))
			 : -ENAMETOOLONG;

	b->st.last_revision = rev;
	for (;;) {
		struct cluster_sm_state s;
		int ret = cluster_sm_state_read(b->etcd, b->prefix, &s, err, errlen);
		int64_t at = s.revision, left;
		bool done;

		b->st.polls++;
		if (ret && !ibvf_sm_err_is_transient(ret))
			return ret;
		if (!ret && (ret = refusal(b, &s, pkey, g, wrev, n, err, errlen))) {
			cluster_sm_state_free(&s);
			return ret;
		}
		done = !ret && cluster_sm_applied(&s, rev, why, sizeof(why));
		if (ret)
			snprintf(why, sizeof(why), "%.300s", err);
		cluster_sm_state_free(&s);
		if (done)
			return 0;
		left = end - ibvf_mono_ms();
		if (left <= 0) {
			b->st.timeouts++;
			return ibvf_errf(err, errlen, -ETIMEDOUT,
					 "cluster: etcd revision %lld not applied by the SM agents "
					 "within %llu ms: %s",
					 (long long)rev, (unsigned long long)b->apply_timeout_ms,
					 why);
		}
		if (!ret && el > 0 &&
		    !etcd_watch(b->etcd, key, (size_t)kl, kend, (size_t)el, at + 1,
				(uint32_t)(left < 1000 ? left : 1000), wake_cb, NULL, NULL, werr,
				sizeof(werr)))
			continue;
		if ((int64_t)delay > left)
			delay = (uint64_t)left;
		nanosleep(&(struct timespec){.tv_sec = (time_t)(delay / 1000),
					     .tv_nsec = (long)(delay % 1000) * 1000000L},
			  NULL);
		delay = delay * 2 > b->poll_max_ms ? b->poll_max_ms : delay * 2;
	}
}

/*
 * Member changes queued for one txn: per member a compare on its members/ key,
 * the put of that key and, in the same txn, the put (desire) or delete
 * (tombstone) of its view key P bynode/<node>/<pkey>/<guid>.
 */
struct txn_buf {
	struct etcd_cmp cmp[CL_TXN_MEMBERS];
	struct etcd_op op[2 * CL_TXN_MEMBERS];
	char key[CL_TXN_MEMBERS][512];
	char ikey[CL_TXN_MEMBERS][512];
	char *val[CL_TXN_MEMBERS];
	size_t idx[CL_TXN_MEMBERS]; /* the member's index in the call */
	int64_t *wrev;		    /* per member of the call: the revision of its key */
	size_t n;
};

static void txn_buf_clear(struct txn_buf *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->val[i]);
	t->n = 0;
}

static int txn_buf_send(struct ibvf_sm_backend *b, struct txn_buf *t, int64_t *rev, char *err,
			size_t errlen)
{
	int64_t at = 0;
	int ret = write_txn(b, t->cmp, t->n, t->op, 2 * t->n, rev, &at, err, errlen);

	for (size_t i = 0; !ret && i < t->n; i++)
		t->wrev[t->idx[i]] = at;
	txn_buf_clear(t);
	return ret;
}

/*
 * Queue the put of t->key[i] = t->val[i] guarded by @cmp (its key filled in)
 * and its view key (put the same value, or delete it when @remove) for the
 * call's member @idx, sending the txn when it is full.
 * Return: 0 or write_txn()'s error.
 */
static int txn_buf_put(struct ibvf_sm_backend *b, struct txn_buf *t, struct etcd_cmp cmp,
		       bool remove, size_t idx, int64_t *rev, char *err, size_t errlen)
{
	size_t i = t->n;

	cmp.key = t->key[i];
	t->cmp[i] = cmp;
	t->idx[i] = idx;
	t->op[2 * i] = (struct etcd_op){.type = ETCD_OP_PUT, .key = t->key[i], .value = t->val[i]};
	t->op[2 * i + 1] = remove ? (struct etcd_op){.type = ETCD_OP_DELETE, .key = t->ikey[i]}
				  : (struct etcd_op){.type = ETCD_OP_PUT,
						     .key = t->ikey[i],
						     .value = t->val[i]};
	t->n++;
	return t->n == CL_TXN_MEMBERS ? txn_buf_send(b, t, rev, err, errlen) : 0;
}

/*
 * Send what is queued, then wait until the agents applied the last revision
 * written (or refused one of @g at its revision in t->wrev: adds only, @g
 * NULL for removes).
 */
static int txn_buf_finish(struct ibvf_sm_backend *b, struct txn_buf *t, int ret, int64_t rev,
			  uint16_t pkey, const uint64_t *g, size_t n, char *err, size_t errlen)
{
	if (!ret && t->n)
		ret = txn_buf_send(b, t, &rev, err, errlen);
	txn_buf_clear(t);
	if (!ret && rev)
		ret = wait_applied(b, rev, pkey, g, t->wrev, g ? n : 0, err, errlen);
	return ret;
}

static int cl_add_owned(struct ibvf_sm_backend *b, uint16_t pkey, const struct ibvf_sm_member *m,
			const char *const *owners, size_t n, const struct ibvf_sm_pkey_flags *flags,
			char *err, size_t errlen)
{
	const struct ibvf_sm_pkey_flags *f = flags ? flags : &b->defaults;
	struct cluster_member *cur = NULL;
	struct txn_buf *t = NULL;
	uint64_t *g = NULL;
	size_t n_cur = 0;
	int64_t rev = 0;
	int ret = check_pkey(pkey, err, errlen);

	if (ret || !n)
		return ret;
	if (!m)
		return ibvf_errf(err, errlen, -EINVAL, "no member array");
	for (size_t k = 0; k < n; k++) {
		if (!ibvf_guid_is_assignable(m[k].guid))
			return ibvf_errf(err, errlen, -EINVAL,
					 "GUID 0x%016llx cannot be a partition member",
					 (unsigned long long)m[k].guid);
		if (m[k].membership != IBVF_MEMBER_FULL && m[k].membership != IBVF_MEMBER_LIMITED)
			return ibvf_errf(err, errlen, -EINVAL,
					 "GUID 0x%016llx: invalid membership %d",
					 (unsigned long long)m[k].guid, (int)m[k].membership);
	}
	ret = ensure_view(b, err, errlen);
	if (ret)
		return ret;
	t = calloc(1, sizeof(*t));
	g = calloc(n, sizeof(*g));
	if (t)
		t->wrev = calloc(n, sizeof(*t->wrev));
	if (!t || !g || !t->wrev) {
		ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		goto out;
	}
	for (size_t k = 0; k < n; k++)
		g[k] = m[k].guid;
	/* only these GUIDs' keys: another node's desire of one of them, or ours */
	ret = read_guids(b, pkey, g, n, &cur, &n_cur, err, errlen);
	if (ret)
		goto out;
	/* another node's desire for one of these GUIDs is a member fault: never taken over */
	for (size_t k = 0; k < n; k++) {
		const struct cluster_member *c = find(cur, n_cur, m[k].guid);

		if (c && !c->removed && strcmp(c->node, b->node)) {
			ret = ibvf_errf(err, errlen, -EEXIST,
					"cluster: GUID 0x%016llx in PKey 0x%04x is desired by node "
					"%.64s, not %.64s",
					(unsigned long long)m[k].guid, pkey, c->node, b->node);
			goto out;
		}
	}
	rev = 0;
	for (size_t k = 0; k < n && !ret; k++) {
		const struct cluster_member *c = find(cur, n_cur, m[k].guid);
		struct cluster_member want = {.pkey = pkey,
					      .guid = m[k].guid,
					      .membership = m[k].membership,
					      .index0 = f->index0,
					      .ipoib = f->ipoib,
					      .ms = ibvf_wall_ms()};
		size_t i = t->n;
		bool dup = false;

		for (size_t j = 0; j < k; j++)
			dup |= m[j].guid == m[k].guid;
		if (dup)
			continue; /* the first of several entries for one GUID wins */
		snprintf(want.node, sizeof(want.node), "%s", b->node);
		ibvf_sm_owner_clean(want.owner, sizeof(want.owner), owners ? owners[k] : NULL);
		if (!want.owner[0] && c && !c->removed) /* unknown here: keep what is recorded */
			snprintf(want.owner, sizeof(want.owner), "%s", c->owner);
		if (c && !c->removed && c->membership == want.membership &&
		    c->index0 == want.index0 && c->ipoib == want.ipoib &&
		    !strcmp(c->owner, want.owner)) {
			/* already desired as asked: wait for its write to be applied */
			if (c->mod_revision > rev)
				rev = c->mod_revision;
			t->wrev[k] = c->mod_revision;
			b->st.skipped_puts++;
			continue;
		}
		cluster_member_key(b->prefix, pkey, m[k].guid, false, t->key[i], sizeof(t->key[i]));
		cluster_member_index_key(b->prefix, b->node, pkey, m[k].guid, false, t->ikey[i],
					 sizeof(t->ikey[i]));
		t->val[i] = cluster_member_value(&want);
		if (!t->val[i]) {
			ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
			break;
		}
		ret = txn_buf_put(b, t,
				  (struct etcd_cmp){.target = c ? ETCD_CMP_MOD : ETCD_CMP_CREATE,
						    .result = ETCD_CMP_EQUAL,
						    .number = c ? c->mod_revision : 0},
				  false, k, &rev, err, errlen);
	}
	ret = txn_buf_finish(b, t, ret, rev, pkey, g, n, err, errlen);
out:
	if (t)
		free(t->wrev);
	free(t);
	free(g);
	free(cur);
	return ret;
}

static int cl_add(struct ibvf_sm_backend *b, uint16_t pkey, const struct ibvf_sm_member *m,
		  size_t n, const struct ibvf_sm_pkey_flags *flags, char *err, size_t errlen)
{
	return cl_add_owned(b, pkey, m, NULL, n, flags, err, errlen);
}

static int cl_remove(struct ibvf_sm_backend *b, uint16_t pkey, const uint64_t *guids, size_t n,
		     char *err, size_t errlen)
{
	struct cluster_member *cur = NULL;
	struct txn_buf *t = NULL;
	int64_t rev = 0;
	size_t n_cur = 0;
	int ret = check_pkey(pkey, err, errlen);

	if (ret || !n)
		return ret;
	if (!guids)
		return ibvf_errf(err, errlen, -EINVAL, "no GUID array");
	ret = ensure_view(b, err, errlen);
	if (!ret)
		ret = read_guids(b, pkey, guids, n, &cur, &n_cur, err, errlen);
	if (ret)
		return ret;
	t = calloc(1, sizeof(*t));
	if (t)
		t->wrev = calloc(n, sizeof(*t->wrev));
	if (!t || !t->wrev) {
		if (t)
			free(t->wrev);
		free(t);
		free(cur);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	for (size_t k = 0; k < n && !ret; k++) {
		const struct cluster_member *c = find(cur, n_cur, guids[k]);
		struct cluster_member tomb = {
			.pkey = pkey, .guid = guids[k], .removed = true, .ms = ibvf_wall_ms()};
		size_t i = t->n;
		bool dup = false;

		for (size_t j = 0; j < k; j++)
			dup |= guids[j] == guids[k];
		/*
		 * Absent: never desired, or its tombstone was applied by every
		 * live agent group and deleted. Another node's desire is never
		 * removed from here.
		 */
		if (dup || !c || strcmp(c->node, b->node))
			continue;
		if (c->removed) {
			/* an earlier call's tombstone: wait until it is applied */
			if (c->mod_revision > rev)
				rev = c->mod_revision;
			continue;
		}
		snprintf(tomb.node, sizeof(tomb.node), "%s", b->node);
		cluster_member_key(b->prefix, pkey, guids[k], false, t->key[i], sizeof(t->key[i]));
		cluster_member_index_key(b->prefix, b->node, pkey, guids[k], false, t->ikey[i],
					 sizeof(t->ikey[i]));
		t->val[i] = cluster_member_value(&tomb);
		if (!t->val[i]) {
			ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
			break;
		}
		ret = txn_buf_put(b, t,
				  (struct etcd_cmp){.target = ETCD_CMP_MOD,
						    .result = ETCD_CMP_EQUAL,
						    .number = c->mod_revision},
				  true, k, &rev, err, errlen);
	}
	/* the removal is verified (applied) before the node quarantines the GUID ([safety]) */
	ret = txn_buf_finish(b, t, ret, rev, pkey, NULL, 0, err, errlen);
	free(t->wrev);
	free(t);
	free(cur);
	return ret;
}

static int cl_list(struct ibvf_sm_backend *b, int pkey, ibvf_sm_list_cb cb, void *arg, char *err,
		   size_t errlen)
{
	struct cluster_read_stats rs = {0};
	struct cluster_member *v = NULL;
	size_t n = 0;
	int ret;

	if (pkey < -1 || pkey > 0x7fff || !cb)
		return ibvf_errf(err, errlen, -EINVAL,
				 "list_members: PKey %d: expected -1 (all) or 0x0000..0x7fff, and "
				 "a callback",
				 pkey);
	/*
	 * This node's desired memberships from its own view (P bynode/<node>/):
	 * other nodes' are not this node's to reconcile, and reading them all
	 * was the cluster's largest etcd load.
	 */
	ret = ensure_view(b, err, errlen);
	if (!ret)
		ret = cluster_members_list_node(b->etcd, b->prefix, b->node, pkey, &v, &n, NULL,
						NULL, &rs, err, errlen);
	count_reads(b, &rs);
	b->st.list_keys += rs.keys;
	b->st.list_bytes += rs.bytes;
	for (size_t i = 0; !ret && i < n; i++) {
		struct ibvf_sm_member sm = {.guid = v[i].guid, .membership = v[i].membership};

		if (!v[i].removed)
			ret = cb(arg, v[i].pkey, &sm, true);
	}
	free(v);
	return ret;
}

const struct ibvf_sm_ops cluster_ops = {
	.abi_version = IBVF_SM_ABI_VERSION,
	.struct_size = sizeof(struct ibvf_sm_ops),
	.name = "cluster",
	.init = cl_init,
	.fini = cl_fini,
	.validate = cl_validate,
	.add_members = cl_add,
	.remove_members = cl_remove,
	.list_members = cl_list,
	.add_members_owned = cl_add_owned,
};
