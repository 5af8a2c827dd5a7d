// SPDX-License-Identifier: MIT
/*
 * Cluster membership keys in etcd (sm_members.h): the desired memberships the
 * nodes' `cluster` SM backend writes and the applied revisions the SM agents
 * write back (issue 19, docs/cluster.md).
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "sm_members.h"

bool cluster_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (!n || n > CLUSTER_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

int cluster_member_key(const char *prefix, int pkey, uint64_t guid, bool all_guids, char *buf,
		       size_t len)
{
	int n;

	if (pkey < 0)
		n = snprintf(buf, len, "%smembers/", prefix);
	else if (all_guids)
		n = snprintf(buf, len, "%smembers/%04x/", prefix, (unsigned)pkey);
	else
		n = snprintf(buf, len, "%smembers/%04x/%016llx", prefix, (unsigned)pkey,
			     (unsigned long long)guid);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : n;
}

int cluster_sm_key(const char *prefix, const char *kind, const char *name, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%ssmd/%s/%s", prefix, kind, name ? name : "");

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : n;
}

char *cluster_member_value(const struct cluster_member *m)
{
	json_t *o;
	char *s;

	if (m->removed) /* a tombstone */
		o = json_pack("{s:b,s:s,s:I}", "removed", 1, "node", m->node, "ms",
			      (json_int_t)m->ms);
	else
		o = json_pack("{s:s,s:b,s:b,s:s,s:s,s:I}", "membership",
			      ibvf_membership_name(m->membership), "index0", m->index0, "ipoib",
			      m->ipoib, "node", m->node, "owner", m->owner, "ms",
			      (json_int_t)m->ms);
	s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(o);
	return s;
}

/* Parse exactly @digits lowercase hex digits of @s into *@out. */
static bool hex_exact(const char *s, size_t digits, uint64_t *out)
{
	uint64_t v = 0;

	for (size_t i = 0; i < digits; i++) {
		char c = s[i];

		if (c >= '0' && c <= '9')
			v = v << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (uint64_t)(c - 'a' + 10);
		else
			return false;
	}
	*out = v;
	return true;
}

/* A membership from @kv whose key is @base (@bl bytes) + "<pkey>/<guid>". */
static int member_parse(const char *base, size_t bl, const struct etcd_kv *kv,
			struct cluster_member *out, char *err, size_t errlen)
{
	const char *k = kv->key, *s;
	uint64_t pkey, guid;
	json_error_t je;
	json_t *o, *v;
	int ret = 0;

	memset(out, 0, sizeof(*out));
	if (kv->key_len != bl + 4 + 1 + 16 || memcmp(k, base, bl) || k[bl + 4] != '/' ||
	    !hex_exact(k + bl, 4, &pkey) || !hex_exact(k + bl + 5, 16, &guid) || !pkey ||
	    pkey > 0x7fff || !ibvf_guid_is_assignable(guid))
		return ibvf_errf(err, errlen, -EBADMSG,
				 "key '%.300s': not %.300s<4 hex PKey>/<16 hex GUID>", k, base);
	out->pkey = (uint16_t)pkey;
	out->guid = guid;
	out->mod_revision = kv->mod_revision;
	o = json_loadb(kv->value, kv->value_len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(o)) {
		json_decref(o);
		return ibvf_errf(err, errlen, -EBADMSG, "key '%.300s': value is not a JSON object",
				 k);
	}
	out->removed = json_is_true(json_object_get(o, "removed"));
	s = json_string_value(json_object_get(o, "membership"));
	if (out->removed)
		out->membership = IBVF_MEMBER_FULL;
	else if (!s || ibvf_membership_parse(s, &out->membership, NULL, 0))
		ret = ibvf_errf(err, errlen, -EBADMSG, "key '%.300s': no membership full|limited",
				k);
	out->index0 = json_is_true(json_object_get(o, "index0"));
	out->ipoib = json_is_true(json_object_get(o, "ipoib"));
	s = json_string_value(json_object_get(o, "node"));
	if (!ret && (!s || !*s || strlen(s) > CLUSTER_NAME_MAX))
		ret = ibvf_errf(err, errlen, -EBADMSG, "key '%.300s': no node name", k);
	else if (!ret)
		snprintf(out->node, sizeof(out->node), "%s", s);
	s = json_string_value(json_object_get(o, "owner"));
	if (s)
		snprintf(out->owner, sizeof(out->owner), "%s", s);
	v = json_object_get(o, "ms");
	out->ms = json_is_integer(v) ? (int64_t)json_integer_value(v) : 0;
	json_decref(o);
	return ret;
}

int cluster_member_parse(const char *prefix, const struct etcd_kv *kv, struct cluster_member *out,
			 char *err, size_t errlen)
{
	char base[512];
	int bl = cluster_member_key(prefix, -1, 0, false, base, sizeof(base));

	if (bl < 0)
		return ibvf_errf(err, errlen, -EBADMSG, "etcd prefix too long");
	return member_parse(base, (size_t)bl, kv, out, err, errlen);
}

int cluster_member_index_key(const char *prefix, const char *node, int pkey, uint64_t guid,
			     bool all_guids, char *buf, size_t len)
{
	int n;

	if (pkey < 0)
		n = snprintf(buf, len, "%sbynode/%s/", prefix, node);
	else if (all_guids)
		n = snprintf(buf, len, "%sbynode/%s/%04x/", prefix, node, (unsigned)pkey);
	else
		n = snprintf(buf, len, "%sbynode/%s/%04x/%016llx", prefix, node, (unsigned)pkey,
			     (unsigned long long)guid);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : n;
}

int cluster_member_marker_key(const char *prefix, const char *node, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%sbynode/%s", prefix, node);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : n;
}

static void read_count(struct cluster_read_stats *rs, const struct etcd_range_result *r)
{
	if (!rs)
		return;
	rs->reads++;
	rs->keys += r->n_kvs;
	for (size_t i = 0; i < r->n_kvs; i++)
		rs->bytes += r->kvs[i].key_len + r->kvs[i].value_len;
}

/*
 * Range the keys under @key (@kl bytes) and parse each as a member whose
 * key starts with @base (@bl bytes) into a calloc'ed *@out (*@n). A member
 * of another node than @node (when not NULL) is skipped, and counted in
 * *@bad with the unparsable ones when @foreign_bad. @rs counts the read.
 */
static int range_members(struct etcd_client *etcd, const char *key, int kl, const char *base,
			 int bl, const char *node, bool foreign_bad, struct cluster_member **out,
			 size_t *n, int64_t *revision, size_t *bad, struct cluster_read_stats *rs,
			 char *err, size_t errlen)
{
	struct etcd_range_result r = {0};
	char end[512], why[IBVF_ERR_LEN];
	struct cluster_member *v;
	size_t k = 0, nbad = 0;
	int el, ret;

	el = etcd_prefix_end(key, (size_t)kl, end, sizeof(end));
	if (el < 0)
		return ibvf_errf(err, errlen, el, "etcd prefix too long");
	ret = etcd_range(etcd, key, (size_t)kl, end, (size_t)el, 0, false, &r, err, errlen);
	if (ret)
		return ret;
	read_count(rs, &r);
	v = calloc(r.n_kvs + 1, sizeof(*v));
	if (!v) {
		etcd_range_result_free(&r);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < r.n_kvs; i++) {
		bool parsed = !member_parse(base, (size_t)bl, &r.kvs[i], &v[k], why, sizeof(why));

		if (parsed && (!node || !strcmp(v[k].node, node)))
			k++;
		else if (!parsed || foreign_bad)
			nbad++;
	}
	if (revision)
		*revision = r.revision;
	if (bad)
		*bad = nbad;
	etcd_range_result_free(&r);
	*out = v;
	*n = k;
	return 0;
}

int cluster_members_list_node(struct etcd_client *etcd, const char *prefix, const char *node,
			      int pkey, struct cluster_member **out, size_t *n, int64_t *revision,
			      size_t *bad, struct cluster_read_stats *rs, char *err, size_t errlen)
{
	char key[512], base[512];
	int kl, bl;

	*out = NULL;
	*n = 0;
	bl = cluster_member_index_key(prefix, node, -1, 0, false, base, sizeof(base));
	kl = cluster_member_index_key(prefix, node, pkey, 0, true, key, sizeof(key));
	if (bl < 0 || kl < 0 || !cluster_name_ok(node))
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "etcd prefix or node name too long");
	/* a view key naming another node is damage: counted as bad */
	return range_members(etcd, key, kl, base, bl, node, true, out, n, revision, bad, rs, err,
			     errlen);
}

static int cmp_guid(const void *x, const void *y)
{
	const struct cluster_member *a = x, *b = y;

	return a->guid < b->guid ? -1 : a->guid > b->guid;
}

#define GET_PER_TXN 64 /* ranges per txn (etcd --max-txn-ops 128) */

int cluster_members_get(struct etcd_client *etcd, const char *prefix, uint16_t pkey,
			const uint64_t *guids, size_t n, struct cluster_member **out, size_t *n_out,
			struct cluster_read_stats *rs, char *err, size_t errlen)
{
	struct etcd_op ops[GET_PER_TXN];
	char(*keys)[128] = NULL, why[IBVF_ERR_LEN];
	struct cluster_member *v;
	size_t k = 0;
	int ret = 0;

	*out = NULL;
	*n_out = 0;
	v = calloc(n + 1, sizeof(*v));
	keys = calloc(GET_PER_TXN, sizeof(*keys));
	if (!v || !keys) {
		free(v);
		free(keys);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n && !ret; i += GET_PER_TXN) {
		size_t m = n - i < GET_PER_TXN ? n - i : GET_PER_TXN;
		struct etcd_txn_result r = {0};

		for (size_t j = 0; j < m; j++) {
			if (cluster_member_key(prefix, pkey, guids[i + j], false, keys[j],
					       sizeof(keys[j])) < 0) {
				ret = ibvf_errf(err, errlen, -ENAMETOOLONG, "etcd prefix too long");
				break;
			}
			ops[j] = (struct etcd_op){.type = ETCD_OP_RANGE, .key = keys[j]};
		}
		if (ret || (ret = etcd_txn(etcd, NULL, 0, ops, m, NULL, 0, &r, err, errlen)))
			break;
		for (size_t j = 0; j < r.n_responses; j++) {
			read_count(rs, &r.responses[j]);
			for (size_t q = 0; q < r.responses[j].n_kvs && k < n; q++)
				if (!cluster_member_parse(prefix, &r.responses[j].kvs[q], &v[k],
							  why, sizeof(why)))
					k++;
		}
		etcd_txn_result_free(&r);
	}
	free(keys);
	if (ret) {
		free(v);
		return ret;
	}
	qsort(v, k, sizeof(*v), cmp_guid);
	*out = v;
	*n_out = k;
	return 0;
}

int cluster_members_list(struct etcd_client *etcd, const char *prefix, int pkey, const char *node,
			 struct cluster_member **out, size_t *n, int64_t *revision, size_t *bad,
			 char *err, size_t errlen)
{
	char key[512], base[512];
	int kl, bl;

	*out = NULL;
	*n = 0;
	kl = cluster_member_key(prefix, pkey, 0, true, key, sizeof(key));
	if (kl < 0)
		return ibvf_errf(err, errlen, kl, "etcd prefix too long");
	bl = cluster_member_key(prefix, -1, 0, false, base, sizeof(base));
	if (bl < 0)
		return ibvf_errf(err, errlen, bl, "etcd prefix too long");
	return range_members(etcd, key, kl, base, bl, node, false, out, n, revision, bad, NULL, err,
			     errlen);
}

static const char *jstr(json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "";
}

static int64_t jint(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	if (json_is_integer(v))
		return (int64_t)json_integer_value(v);
	if (json_is_string(v))
		return strtoll(json_string_value(v), NULL, 10);
	return 0;
}

void cluster_sm_state_free(struct cluster_sm_state *s)
{
	if (!s)
		return;
	for (size_t i = 0; s->status && i < s->n_status; i++)
		free(s->status[i].refused);
	free(s->agents);
	free(s->status);
	memset(s, 0, sizeof(*s));
}

/*
 * The "refused" array of a status value into @st (one entry per member);
 * entries that do not parse are skipped. Return: 0 or -ENOMEM.
 */
static int parse_refused(json_t *arr, struct cluster_pkey_status *st)
{
	size_t i, total = 0, k = 0;
	json_t *g;

	if (!json_is_array(arr))
		return 0;
	json_array_foreach(arr, i, g) total += json_array_size(json_object_get(g, "members"));
	if (!total)
		return 0;
	st->refused = calloc(total, sizeof(*st->refused));
	if (!st->refused)
		return -ENOMEM;
	json_array_foreach(arr, i, g)
	{
		json_t *mem = json_object_get(g, "members"), *m;
		int e = (int)jint(g, "errno");
		size_t j;

		json_array_foreach(mem, j, m)
		{
			const char *hex = jstr(m, "guid");
			struct cluster_refusal *r = &st->refused[k];

			if (strlen(hex) != 16 || !hex_exact(hex, 16, &r->guid) || e >= 0)
				continue;
			r->rev = jint(m, "rev");
			r->err = e;
			snprintf(r->error, sizeof(r->error), "%s", jstr(g, "error"));
			k++;
		}
	}
	st->n_refused = k;
	return 0;
}

const struct cluster_refusal *cluster_sm_refused(const struct cluster_sm_state *s, uint16_t pkey,
						 uint64_t guid, int64_t rev, const char **group)
{
	for (size_t i = 0; i < s->n_status; i++) {
		const struct cluster_pkey_status *st = &s->status[i];
		bool live = false;

		if (st->pkey != pkey || !st->n_refused)
			continue;
		for (size_t a = 0; a < s->n_agents && !live; a++)
			live = !strcmp(s->agents[a].group, st->group);
		if (!live)
			continue; /* a group that is gone has no vote (cluster_sm_applied()) */
		for (size_t k = 0; k < st->n_refused; k++) {
			if (st->refused[k].guid != guid || st->refused[k].rev != rev)
				continue;
			if (group)
				*group = st->group;
			return &st->refused[k];
		}
	}
	return NULL;
}

/* Applied revisions and leaders, before they are joined to the agents. */
struct group_rec {
	char group[CLUSTER_NAME_MAX + 1];
	char leader[CLUSTER_NAME_MAX + 1];
	int64_t applied, applied_ms;
};

static struct group_rec *group_get(struct group_rec *g, size_t *n, const char *name)
{
	for (size_t i = 0; i < *n; i++)
		if (!strcmp(g[i].group, name))
			return &g[i];
	snprintf(g[*n].group, sizeof(g[*n].group), "%s", name);
	return &g[(*n)++];
}

int cluster_sm_state_read(struct etcd_client *etcd, const char *prefix,
			  struct cluster_sm_state *out, char *err, size_t errlen)
{
	struct etcd_range_result r = {0};
	struct group_rec *g = NULL;
	char key[512], end[512], name[CLUSTER_NAME_MAX + 8];
	size_t ng = 0;
	int kl, el, ret;

	memset(out, 0, sizeof(*out));
	kl = snprintf(key, sizeof(key), "%ssmd/", prefix);
	if (kl < 0 || (size_t)kl >= sizeof(key))
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "etcd prefix too long");
	el = etcd_prefix_end(key, (size_t)kl, end, sizeof(end));
	if (el < 0)
		return ibvf_errf(err, errlen, el, "etcd prefix too long");
	ret = etcd_range(etcd, key, (size_t)kl, end, (size_t)el, 0, false, &r, err, errlen);
	if (ret)
		return ret;
	out->agents = calloc(r.n_kvs + 1, sizeof(*out->agents));
	out->status = calloc(r.n_kvs + 1, sizeof(*out->status));
	g = calloc(r.n_kvs + 1, sizeof(*g));
	if (!out->agents || !out->status || !g) {
		ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		goto out;
	}
	out->revision = r.revision;
	for (size_t i = 0; i < r.n_kvs; i++) {
		const char *k = r.kvs[i].key + kl, *slash;
		json_t *o = json_loadb(r.kvs[i].value, r.kvs[i].value_len, 0, NULL);

		if (!json_is_object(o)) {
			json_decref(o);
			continue;
		}
		if (!strncmp(k, "agents/", 7)) {
			struct cluster_agent *a = &out->agents[out->n_agents];

			snprintf(a->id, sizeof(a->id), "%s", k + 7);
			snprintf(a->group, sizeof(a->group), "%s", jstr(o, "group"));
			snprintf(a->mode, sizeof(a->mode), "%s", jstr(o, "mode"));
			a->since_ms = jint(o, "since_ms");
			if (cluster_name_ok(a->id) && cluster_name_ok(a->group))
				out->n_agents++;
		} else if (!strncmp(k, "leader/", 7) && cluster_name_ok(k + 7)) {
			snprintf(group_get(g, &ng, k + 7)->leader, sizeof(g->leader), "%s",
				 jstr(o, "id"));
		} else if (!strncmp(k, "applied/", 8) && cluster_name_ok(k + 8)) {
			struct group_rec *gr = group_get(g, &ng, k + 8);

			gr->applied = jint(o, "revision");
			gr->applied_ms = jint(o, "ms");
		} else if (!strncmp(k, "status/", 7) && (slash = strrchr(k + 7, '/')) &&
			   (size_t)(slash - (k + 7)) < sizeof(name)) {
			struct cluster_pkey_status *st = &out->status[out->n_status];
			uint64_t pk;

			memcpy(name, k + 7, (size_t)(slash - (k + 7)));
			name[slash - (k + 7)] = 0;
			if (strlen(slash + 1) == 4 && hex_exact(slash + 1, 4, &pk) &&
			    cluster_name_ok(name)) {
				snprintf(st->group, sizeof(st->group), "%.253s", name);
				st->pkey = (uint16_t)pk;
				st->desired = (uint32_t)jint(o, "desired");
				st->applied = (uint32_t)jint(o, "applied");
				st->revision = jint(o, "revision");
				st->ms = jint(o, "ms");
				snprintf(st->error, sizeof(st->error), "%s", jstr(o, "error"));
				if (parse_refused(json_object_get(o, "refused"), st)) {
					ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
					json_decref(o);
					out->n_status++;
					goto out;
				}
				out->n_status++;
			}
		}
		json_decref(o);
	}
	for (size_t i = 0; i < out->n_agents; i++) {
		struct cluster_agent *a = &out->agents[i];

		for (size_t j = 0; j < ng; j++) {
			if (strcmp(g[j].group, a->group))
				continue;
			a->applied_revision = g[j].applied;
			a->applied_ms = g[j].applied_ms;
			a->leader = !strcmp(g[j].leader, a->id);
		}
	}
out:
	free(g);
	etcd_range_result_free(&r);
	if (ret)
		cluster_sm_state_free(out);
	return ret;
}

bool cluster_sm_applied(const struct cluster_sm_state *s, int64_t rev, char *why, size_t whylen)
{
	if (!s->n_agents) {
		if (why)
			snprintf(why, whylen, "no SM agent is live (no key under smd/agents/)");
		return false;
	}
	for (size_t i = 0; i < s->n_agents; i++) {
		const struct cluster_agent *a = &s->agents[i];

		if (a->applied_revision < rev) {
			if (why)
				snprintf(why, whylen,
					 "SM group %.64s (agent %.64s) has applied revision %lld, "
					 "not yet %lld",
					 a->group, a->id, (long long)a->applied_revision,
					 (long long)rev);
			return false;
		}
	}
	return true;
}

/* ---------------------------------------- a reclaimed node's keys (rule 2) -- */

/* members per txn: 2 ops and 1 compare each (etcd --max-txn-ops 128) */
#define RECLAIM_PER_TXN 32
/* re-reads after a txn found a key changed */
#define RECLAIM_ROUNDS 8

/*
 * One txn: the node's desires @v[0..@n) (each still at its mod revision, and
 * @guard absent when not NULL) become tombstones and their view keys go.
 * Return: 1 done (*@rev: its revision), 0 a compare failed (*@back: the guard
 * exists), or a negative errno.
 */
static int tombstone_some(struct etcd_client *etcd, const char *prefix, const char *node,
			  const char *guard, const struct cluster_member *v, size_t n, int64_t *rev,
			  bool *back, char *err, size_t errlen)
{
	struct etcd_cmp cmp[RECLAIM_PER_TXN + 1];
	struct etcd_op ops[2 * RECLAIM_PER_TXN];
	struct etcd_op get = {.type = ETCD_OP_RANGE, .key = guard};
	char(*keys)[2][512] = calloc(n, sizeof(*keys));
	char *vals[RECLAIM_PER_TXN] = {0};
	struct etcd_txn_result t = {0};
	size_t nc = 0;
	int ret = 0;

	if (!keys)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	for (size_t i = 0; i < n && !ret; i++) {
		struct cluster_member m = {.removed = true, .ms = ibvf_wall_ms()};

		snprintf(m.node, sizeof(m.node), "%s", node);
		vals[i] = cluster_member_value(&m);
		if (!vals[i]) {
			ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
			break;
		}
		if (cluster_member_key(prefix, v[i].pkey, v[i].guid, false, keys[i][0],
				       sizeof(keys[i][0])) < 0 ||
		    cluster_member_index_key(prefix, node, v[i].pkey, v[i].guid, false, keys[i][1],
					     sizeof(keys[i][1])) < 0) {
			ret = ibvf_errf(err, errlen, -ENAMETOOLONG, "etcd prefix too long");
			break;
		}
		cmp[nc++] = (struct etcd_cmp){.key = keys[i][0],
					      .target = ETCD_CMP_MOD,
					      .result = ETCD_CMP_EQUAL,
					      .number = v[i].mod_revision};
		ops[2 * i] =
			(struct etcd_op){.type = ETCD_OP_PUT, .key = keys[i][0], .value = vals[i]};
		ops[2 * i + 1] = (struct etcd_op){.type = ETCD_OP_DELETE, .key = keys[i][1]};
	}
	if (!ret && guard)
		cmp[nc++] = (struct etcd_cmp){
			.key = guard, .target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL};
	if (!ret)
		ret = etcd_txn(etcd, cmp, nc, ops, 2 * n, guard ? &get : NULL, guard ? 1 : 0, &t,
			       err, errlen);
	if (!ret) {
		ret = t.succeeded;
		*rev = t.revision;
		*back = !t.succeeded && t.n_responses == 1 && t.responses[0].n_kvs > 0;
		etcd_txn_result_free(&t);
	}
	for (size_t i = 0; i < n; i++)
		free(vals[i]);
	free(keys);
	return ret;
}

/*
 * Delete P bynode/<node> (the marker) and every key under P bynode/<node>/
 * (two ranges: a range from the marker would take "bynode/<node>-2/..."
 * too); *@n: how many there were.
 */
static int delete_view(struct etcd_client *etcd, const char *prefix, const char *node,
		       const char *guard, size_t *n, char *err, size_t errlen)
{
	char mkey[512], key[512], end[512];
	struct etcd_range_result r = {0}, rm = {0};
	struct etcd_txn_result t = {0};
	int ml = cluster_member_marker_key(prefix, node, mkey, sizeof(mkey)),
	    kl = cluster_member_index_key(prefix, node, -1, 0, false, key, sizeof(key)), el, ret;

	if (ml < 0 || kl < 0)
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "etcd prefix or node name too long");
	el = etcd_prefix_end(key, (size_t)kl, end, sizeof(end));
	if (el < 0)
		return ibvf_errf(err, errlen, el, "etcd prefix too long");
	ret = etcd_range(etcd, key, (size_t)kl, end, (size_t)el, 0, true, &r, err, errlen);
	if (!ret)
		ret = etcd_range(etcd, mkey, (size_t)ml, NULL, 0, 0, true, &rm, err, errlen);
	*n = r.n_kvs + rm.n_kvs;
	etcd_range_result_free(&r);
	etcd_range_result_free(&rm);
	if (ret || !*n)
		return ret;
	{
		struct etcd_cmp cmp = {
			.key = guard, .target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL};
		struct etcd_op del[] = {
			{.type = ETCD_OP_DELETE,
			 .key = key,
			 .key_len = (size_t)kl,
			 .range_end = end,
			 .range_end_len = (size_t)el},
			{.type = ETCD_OP_DELETE, .key = mkey, .key_len = (size_t)ml}};

		ret = etcd_txn(etcd, &cmp, guard ? 1 : 0, del, 2, NULL, 0, &t, err, errlen);
	}
	if (ret)
		return ret;
	if (!t.succeeded) {
		etcd_txn_result_free(&t);
		return ibvf_errf(err, errlen, -EAGAIN,
				 "cluster: node %s came back (%s) during the reclaim: its view "
				 "(bynode/%s) kept",
				 node, guard, node);
	}
	etcd_txn_result_free(&t);
	return 0;
}

int cluster_members_reclaim_node(struct etcd_client *etcd, const char *prefix, const char *node,
				 const char *guard, struct cluster_members_reclaim *out, char *err,
				 size_t errlen)
{
	struct cluster_member *v = NULL;
	size_t n = 0;
	int ret = 0, round;

	memset(out, 0, sizeof(*out));
	if (!cluster_name_ok(node))
		return ibvf_errf(err, errlen, -EINVAL, "cluster: bad node name '%.64s'", node);
	for (round = 0; round < RECLAIM_ROUNDS; round++) {
		size_t k = 0, pending = 0;
		bool changed = false;

		free(v);
		ret = cluster_members_list(etcd, prefix, -1, node, &v, &n, NULL, NULL, err, errlen);
		if (ret)
			return ret;
		/* the desires first, the tombstones already there after them */
		for (size_t i = 0; i < n; i++)
			if (!v[i].removed) {
				struct cluster_member x = v[k];

				v[k++] = v[i];
				v[i] = x;
			}
		for (size_t i = k; i < n; i++) {
			pending++;
			if (v[i].mod_revision > out->revision)
				out->revision = v[i].mod_revision;
		}
		out->pending = pending;
		for (size_t i = 0; i < k && !ret; i += RECLAIM_PER_TXN) {
			size_t m = k - i < RECLAIM_PER_TXN ? k - i : RECLAIM_PER_TXN;
			bool back = false;
			int64_t rev = 0;

			ret = tombstone_some(etcd, prefix, node, guard, &v[i], m, &rev, &back, err,
					     errlen);
			if (ret == 1) {
				ret = 0;
				out->removed += m;
				if (rev > out->revision)
					out->revision = rev;
			} else if (ret == 0 && back) {
				ret = ibvf_errf(
					err, errlen, -EAGAIN,
					"cluster: node %s came back (%s) during the reclaim: "
					"stopped after %zu memberships",
					node, guard, out->removed);
			} else if (ret == 0) {
				changed = true; /* a key changed since the read: read again */
			}
		}
		if (ret || !changed)
			break;
	}
	free(v);
	if (!ret && round == RECLAIM_ROUNDS)
		ret = ibvf_errf(err, errlen, -EAGAIN,
				"cluster: the memberships of node %s kept changing during the "
				"reclaim (%d reads): stopped after %zu; run it again",
				node, RECLAIM_ROUNDS, out->removed);
	if (!ret)
		ret = delete_view(etcd, prefix, node, guard, &out->view_keys, err, errlen);
	return ret;
}
