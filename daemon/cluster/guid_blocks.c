// SPDX-License-Identifier: MIT
/* Cluster GUID blocks in etcd (see guid_blocks.h, docs/cluster.md). */
#include "guid_blocks.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "err.h"
#include "log.h"
#include "sm_members.h"

#define KEY_MAX		   (128 + 16 + CLUSTER_NODE_MAX + 2) /* prefix, kind, node name */
#define CLAIM_TRIES	   64 /* txns lost to other nodes before the claimed blocks are listed again */
#define CLAIM_RELISTS	   8
#define CLUSTER_MAX_RANGES 4096

struct cluster_blocks {
	struct etcd_client *etcd;
	char prefix[129];
	char node[CLUSTER_NODE_MAX + 1];
	struct cluster_range *ranges;
	uint64_t *base; /* index of each range's first block */
	size_t n_ranges;
	uint32_t block_size;
	uint32_t quarantine_s;
	uint64_t total;
};

/* A returned or reclaimed block's marker: P released/<first> */
struct released {
	uint64_t first;
	int64_t released_ms;
	int64_t mod_revision;
	int64_t members_rev; /* a reclaim: the SM agents must have applied this revision */
};

static void hex16(uint64_t v, char out[17])
{
	snprintf(out, 17, "%016" PRIx64, v);
}

static int key_of(const struct cluster_blocks *b, char *out, const char *kind, uint64_t guid)
{
	char h[17];

	hex16(guid, h);
	return snprintf(out, KEY_MAX, "%s%s%s", b->prefix, kind, h);
}

static uint64_t blocks_in(const struct cluster_blocks *b, size_t i)
{
	return (b->ranges[i].end - b->ranges[i].start) / b->block_size + 1;
}

static void block_at(const struct cluster_blocks *b, uint64_t idx, uint64_t *first, uint64_t *last)
{
	size_t i = 0;

	while (i + 1 < b->n_ranges && idx >= b->base[i + 1])
		i++;
	*first = b->ranges[i].start + (idx - b->base[i]) * b->block_size;
	*last = b->ranges[i].end - *first < b->block_size - 1 ? b->ranges[i].end
							      : *first + b->block_size - 1;
}

/* The block index of @guid, or -ERANGE. */
static int index_of(const struct cluster_blocks *b, uint64_t guid, uint64_t *idx)
{
	for (size_t i = 0; i < b->n_ranges; i++)
		if (guid >= b->ranges[i].start && guid <= b->ranges[i].end) {
			*idx = b->base[i] + (guid - b->ranges[i].start) / b->block_size;
			return 0;
		}
	return -ERANGE;
}

int cluster_block_of(const struct cluster_blocks *b, uint64_t guid, uint64_t *first, uint64_t *last)
{
	uint64_t idx;
	int ret = index_of(b, guid, &idx);

	if (!ret)
		block_at(b, idx, first, last);
	return ret;
}

uint64_t cluster_blocks_total(const struct cluster_blocks *b)
{
	return b->total;
}

const char *cluster_block_state_name(enum cluster_block_state s)
{
	static const char *const names[] = {"owned", "lost", "foreign", "unlisted"};

	return s <= CLUSTER_BLOCK_UNLISTED ? names[s] : "?";
}

/* The canonical text of the layout (sorted keys, compact): equal configs, equal bytes. */
static char *layout_text(const struct cluster_blocks *b)
{
	json_t *r = json_array(), *o;
	char *s;

	for (size_t i = 0; r && i < b->n_ranges; i++) {
		char a[17], z[17];

		hex16(b->ranges[i].start, a);
		hex16(b->ranges[i].end, z);
		json_array_append_new(r, json_pack("[s,s]", a, z));
	}
	o = r ? json_pack("{s:i,s:o}", "block_size", (json_int_t)b->block_size, "ranges", r) : NULL;
	s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(o);
	return s;
}

int cluster_blocks_open(const struct cluster_blocks_opts *o, struct cluster_blocks **out, char *err,
			size_t errlen)
{
	struct cluster_blocks *b;
	struct etcd_txn_result t;
	char key[KEY_MAX], *text;
	int ret;

	*out = NULL;
	if (!o->etcd || !o->prefix || o->prefix[0] != '/' || strlen(o->prefix) > 128 ||
	    o->prefix[strlen(o->prefix) - 1] != '/')
		return ibvf_errf(err, errlen, -EINVAL,
				 "cluster: the key prefix must start and end with '/' (128 bytes)");
	if (!o->node || !*o->node || strlen(o->node) > CLUSTER_NODE_MAX || strchr(o->node, '"'))
		return ibvf_errf(err, errlen, -EINVAL, "cluster: no valid node name");
	if (!o->n_ranges || o->n_ranges > CLUSTER_MAX_RANGES || !o->block_size ||
	    o->block_size > 65536)
		return ibvf_errf(err, errlen, -EINVAL,
				 "cluster: %zu ranges, block size %u (expected 1..%d, 1..65536)",
				 o->n_ranges, o->block_size, CLUSTER_MAX_RANGES);
	for (size_t i = 0; i < o->n_ranges; i++)
		if (o->ranges[i].start > o->ranges[i].end ||
		    (i && o->ranges[i].start <= o->ranges[i - 1].end))
			return ibvf_errf(err, errlen, -EINVAL,
					 "cluster: ranges must be sorted and disjoint");
	b = calloc(1, sizeof(*b));
	if (!b)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	b->ranges = calloc(o->n_ranges, sizeof(*b->ranges));
	b->base = calloc(o->n_ranges, sizeof(*b->base));
	if (!b->ranges || !b->base) {
		cluster_blocks_free(b);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	b->etcd = o->etcd;
	snprintf(b->prefix, sizeof(b->prefix), "%s", o->prefix);
	snprintf(b->node, sizeof(b->node), "%s", o->node);
	memcpy(b->ranges, o->ranges, o->n_ranges * sizeof(*b->ranges));
	b->n_ranges = o->n_ranges;
	b->block_size = o->block_size;
	b->quarantine_s = o->quarantine_s;
	for (size_t i = 0; i < b->n_ranges; i++) {
		b->base[i] = b->total;
		b->total += blocks_in(b, i);
	}

	text = layout_text(b);
	if (!text) {
		cluster_blocks_free(b);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	snprintf(key, sizeof(key), "%slayout", b->prefix);
	{
		struct etcd_cmp absent = {
			.key = key, .target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL};
		struct etcd_op put = {.type = ETCD_OP_PUT, .key = key, .value = text};
		struct etcd_op get = {.type = ETCD_OP_RANGE, .key = key};

		ret = etcd_txn(b->etcd, &absent, 1, &put, 1, &get, 1, &t, err, errlen);
	}
	if (!ret) {
		const struct etcd_range_result *r = t.n_responses ? &t.responses[0] : NULL;

		if (!t.succeeded && (!r || r->n_kvs != 1 || strcmp(r->kvs[0].value, text)))
			ret = ibvf_errf(err, errlen, -EEXIST,
					"cluster: etcd key %s holds the layout %.160s, this node's "
					"config gives %.160s: every node must use the same "
					"pool.ranges and pool.cluster.block_size",
					key, r && r->n_kvs ? r->kvs[0].value : "(none)", text);
		etcd_txn_result_free(&t);
	}
	free(text);
	if (ret) {
		cluster_blocks_free(b);
		return ret;
	}
	*out = b;
	return 0;
}

void cluster_blocks_free(struct cluster_blocks *b)
{
	if (!b)
		return;
	free(b->ranges);
	free(b->base);
	free(b);
}

/* A block key and value as ibvf writes them; -EPROTO otherwise. */
static int parse_block(const struct cluster_blocks *b, const struct etcd_kv *kv,
		       struct cluster_block *out)
{
	size_t pl = strlen(b->prefix) + strlen("blocks/");
	const char *hex = kv->key + pl, *node;
	json_t *j;
	char *end;
	uint64_t idx;

	memset(out, 0, sizeof(*out));
	if (kv->key_len != pl + 16)
		return -EPROTO;
	out->first = strtoull(hex, &end, 16);
	if (*end || index_of(b, out->first, &idx))
		return -EPROTO;
	block_at(b, idx, &out->first, &out->last);
	if (strtoull(hex, NULL, 16) != out->first)
		return -EPROTO; /* not at a block boundary */
	j = json_loadb(kv->value, kv->value_len, 0, NULL);
	node = json_string_value(json_object_get(j, "node"));
	if (!node || strlen(node) > CLUSTER_NODE_MAX) {
		json_decref(j);
		return -EPROTO;
	}
	snprintf(out->node, sizeof(out->node), "%s", node);
	out->claimed_ms = json_integer_value(json_object_get(j, "claimed_ms"));
	out->mod_revision = kv->mod_revision;
	json_decref(j);
	return 0;
}

int cluster_blocks_list(struct cluster_blocks *b, const char *node, struct cluster_block **out,
			size_t *n, char *err, size_t errlen)
{
	char key[KEY_MAX], end[KEY_MAX];
	struct etcd_range_result r;
	int el, ret;

	*out = NULL;
	*n = 0;
	snprintf(key, sizeof(key), "%sblocks/", b->prefix);
	el = etcd_prefix_end(key, strlen(key), end, sizeof(end));
	ret = etcd_range(b->etcd, key, 0, end, (size_t)el, 0, false, &r, err, errlen);
	if (ret)
		return ret;
	if (r.n_kvs) {
		*out = calloc(r.n_kvs, sizeof(**out));
		if (!*out) {
			etcd_range_result_free(&r);
			return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		}
	}
	for (size_t i = 0; i < r.n_kvs; i++) {
		struct cluster_block blk;

		if (parse_block(b, &r.kvs[i], &blk)) {
			ret = ibvf_errf(err, errlen, -EPROTO,
					"cluster: etcd key %.160s is not a block of this layout "
					"(or its value is not ibvf's)",
					r.kvs[i].key);
			free(*out);
			*out = NULL;
			*n = 0;
			break;
		}
		if (!node || !strcmp(node, blk.node))
			(*out)[(*n)++] = blk;
	}
	etcd_range_result_free(&r);
	return ret;
}

static bool value_node(const struct etcd_range_result *r, char *out, size_t len);

/* Every released/ marker (returned or reclaimed blocks), in key order. */
static int list_released(struct cluster_blocks *b, struct released **out, size_t *n, char *err,
			 size_t errlen)
{
	char key[KEY_MAX], end[KEY_MAX];
	size_t pl;
	struct etcd_range_result r;
	int el, ret;

	*out = NULL;
	*n = 0;
	snprintf(key, sizeof(key), "%sreleased/", b->prefix);
	pl = strlen(key);
	el = etcd_prefix_end(key, pl, end, sizeof(end));
	ret = etcd_range(b->etcd, key, 0, end, (size_t)el, 0, false, &r, err, errlen);
	if (ret)
		return ret;
	*out = calloc(r.n_kvs + 1, sizeof(**out));
	if (!*out) {
		etcd_range_result_free(&r);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < r.n_kvs; i++) {
		json_t *j = json_loadb(r.kvs[i].value, r.kvs[i].value_len, 0, NULL);
		char *e;
		struct released *x = &(*out)[*n];

		x->first = r.kvs[i].key_len == pl + 16 ? strtoull(r.kvs[i].key + pl, &e, 16) : 0;
		x->released_ms = json_integer_value(json_object_get(j, "released_ms"));
		x->members_rev = json_integer_value(json_object_get(j, "members_rev"));
		x->mod_revision = r.kvs[i].mod_revision;
		json_decref(j);
		if (x->first)
			(*n)++;
	}
	etcd_range_result_free(&r);
	return 0;
}

static const struct released *find_released(const struct released *v, size_t n, uint64_t first)
{
	for (size_t i = 0; i < n; i++)
		if (v[i].first == first)
			return &v[i];
	return NULL;
}

static bool in_quarantine(const struct cluster_blocks *b, const struct released *r)
{
	return r && ibvf_wall_ms() < r->released_ms + (int64_t)b->quarantine_s * 1000;
}

/*
 * Is the reclaim behind marker @r waiting for the SM agents? Its node's
 * memberships were tombstoned at revision members_rev; until every live
 * group reports it applied, a GUID of the block may still be in the
 * reclaimed node's PKeys (rule 2). *@s is read once (*@have) on first need;
 * an unreadable state, or no live agent, counts as "waiting".
 */
static bool members_pending(struct cluster_blocks *b, const struct released *r,
			    struct cluster_sm_state *s, int *have, char *why, size_t whylen)
{
	char err[IBVF_ERR_LEN];

	if (!r || r->members_rev <= 0)
		return false;
	if (!*have) {
		*have = cluster_sm_state_read(b->etcd, b->prefix, s, err, sizeof(err)) ? -1 : 1;
		if (*have < 0)
			snprintf(why, whylen, "the SM agents' state is unreadable: %.400s", err);
	}
	if (*have < 0)
		return true;
	return !cluster_sm_applied(s, r->members_rev, why, whylen);
}

/* The marker value of a block freed at @now by @by (@members_rev: see struct released). */
static char *released_value(const char *by, int64_t now, int64_t members_rev)
{
	json_t *v = members_rev > 0
			    ? json_pack("{s:s,s:I,s:I}", "by", by, "released_ms", (json_int_t)now,
					"members_rev", (json_int_t)members_rev)
			    : json_pack("{s:s,s:I}", "by", by, "released_ms", (json_int_t)now);
	char *s = v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

	json_decref(v);
	return s;
}

static uint64_t fnv1a(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
	return h;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static bool taken(const uint64_t *v, size_t n, uint64_t idx)
{
	return bsearch(&idx, v, n, sizeof(*v), cmp_u64) != NULL;
}

/*
 * One claim txn of block @idx. Return 1 when this node got it, 0 when it
 * was taken (another node's block, or a GUID of it reserved), or -errno.
 */
static int try_claim(struct cluster_blocks *b, uint64_t idx, int64_t released_mod,
		     struct cluster_block *out, char *err, size_t errlen)
{
	char key[KEY_MAX], gfrom[KEY_MAX], gto[KEY_MAX], rkey[KEY_MAX], last_hex[17], *val;
	struct etcd_txn_result t;
	uint64_t first, last;
	int64_t now = ibvf_wall_ms();
	int ret;

	block_at(b, idx, &first, &last);
	key_of(b, key, "blocks/", first);
	key_of(b, gfrom, "guids/", first);
	key_of(b, rkey, "released/", first);
	if (last == UINT64_MAX)
		snprintf(gto, sizeof(gto), "%sguids0", b->prefix); /* never: ranges exclude it */
	else
		key_of(b, gto, "guids/", last + 1);
	hex16(last, last_hex);
	{
		json_t *v = json_pack("{s:s,s:s,s:I}", "node", b->node, "last", last_hex,
				      "claimed_ms", (json_int_t)now);

		val = v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		json_decref(v);
	}
	if (!val)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	{
		struct etcd_cmp cmp[] = {
			{.key = key, .target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL},
			{.key = gfrom,
			 .range_end = gto,
			 .target = ETCD_CMP_CREATE,
			 .result = ETCD_CMP_EQUAL},
			/* its release marker is the one judged past quarantine (0: none) */
			{.key = rkey,
			 .target = ETCD_CMP_MOD,
			 .result = ETCD_CMP_EQUAL,
			 .number = released_mod},
		};
		struct etcd_op ops[] = {{.type = ETCD_OP_PUT, .key = key, .value = val},
					{.type = ETCD_OP_DELETE, .key = rkey}};
		struct etcd_op get = {.type = ETCD_OP_RANGE, .key = key};

		ret = etcd_txn(b->etcd, cmp, 3, ops, released_mod ? 2 : 1, &get, 1, &t, err,
			       errlen);
	}
	free(val);
	if (ret)
		return ret;
	ret = t.succeeded;
	/*
	 * The client retries a call whose answer it did not get: an earlier
	 * attempt of this very txn may have been applied. The block was not
	 * listed when this claim began, so a key naming this node is this
	 * claim's own write (claims of one node are serialized by its caller).
	 */
	if (!ret && t.n_responses == 1) {
		char who[CLUSTER_NODE_MAX + 1] = "";

		if (value_node(&t.responses[0], who, sizeof(who)) && !strcmp(who, b->node)) {
			ret = 1;
			t.revision = t.responses[0].kvs[0].mod_revision;
		}
	}
	if (ret) {
		memset(out, 0, sizeof(*out));
		out->first = first;
		out->last = last;
		snprintf(out->node, sizeof(out->node), "%s", b->node);
		out->claimed_ms = now;
		out->mod_revision = t.revision;
	}
	etcd_txn_result_free(&t);
	return ret;
}

int cluster_blocks_claim(struct cluster_blocks *b, struct cluster_block *out, char *err,
			 size_t errlen)
{
	uint64_t start = fnv1a(b->node) % b->total;

	for (int relist = 0; relist < CLAIM_RELISTS; relist++) {
		struct cluster_block *blocks;
		struct released *rel = NULL;
		struct cluster_sm_state sms;
		int have_sms = 0;
		char why[IBVF_ERR_LEN];
		size_t n, n_rel = 0, n_taken = 0, n_held = 0;
		uint64_t *tk, cand = start, steps = 0;
		int ret = cluster_blocks_list(b, NULL, &blocks, &n, err, errlen);

		if (ret)
			return ret;
		ret = list_released(b, &rel, &n_rel, err, errlen);
		tk = ret ? NULL : calloc(n + n_rel + CLAIM_TRIES + 1, sizeof(*tk));
		if (!tk) {
			free(blocks);
			free(rel);
			return ret ? ret : ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		}
		for (size_t i = 0; i < n; i++)
			index_of(b, blocks[i].first, &tk[n_taken++]);
		free(blocks);
		/* quarantine holds across nodes: a block freed lately is not claimable yet */
		for (size_t i = 0; i < n_rel; i++) {
			bool held = !in_quarantine(b, &rel[i]) &&
				    members_pending(b, &rel[i], &sms, &have_sms, why, sizeof(why));

			/* and a reclaimed block waits for the agents' removals (rule 2) */
			if (held && !n_held++)
				log_info("cluster: GUID block %016" PRIx64
					 " (reclaimed) is held until the SM agents apply revision "
					 "%lld: %s",
					 rel[i].first, (long long)rel[i].members_rev, why);
			if ((held || in_quarantine(b, &rel[i])) &&
			    !index_of(b, rel[i].first, &tk[n_taken]))
				n_taken++;
		}
		if (have_sms > 0)
			cluster_sm_state_free(&sms);
		qsort(tk, n_taken, sizeof(*tk), cmp_u64);
		for (int tries = 0; tries < CLAIM_TRIES; tries++) {
			while (steps < b->total && taken(tk, n_taken, cand)) {
				cand = cand + 1 == b->total ? 0 : cand + 1;
				steps++;
			}
			if (steps >= b->total) {
				free(tk);
				free(rel);
				return ibvf_errf(err, errlen, -ENOSPC,
						 "cluster: no free GUID block: all %" PRIu64
						 " blocks of %u GUIDs are claimed, in quarantine "
						 "(%u s), hold a reserved GUID or wait for the SM "
						 "agents to remove a reclaimed node's memberships "
						 "(%zu)",
						 b->total, b->block_size, b->quarantine_s, n_held);
			}
			{
				uint64_t f, l;
				const struct released *r;

				block_at(b, cand, &f, &l);
				r = find_released(rel, n_rel, f);
				ret = try_claim(b, cand, r ? r->mod_revision : 0, out, err, errlen);
			}
			if (ret < 0) {
				free(tk);
				free(rel);
				return ret;
			}
			if (ret == 1) {
				free(tk);
				free(rel);
				log_info("cluster: node %s claimed GUID block %016" PRIx64
					 "..%016" PRIx64,
					 b->node, out->first, out->last);
				return 0;
			}
			/* lost to another node (or a reserved GUID): the next one */
			tk[n_taken++] = cand;
			qsort(tk, n_taken, sizeof(*tk), cmp_u64);
		}
		free(tk);
		free(rel);
	}
	return ibvf_errf(err, errlen, -EAGAIN,
			 "cluster: lost %d block claims in a row to other nodes; try again",
			 CLAIM_TRIES * CLAIM_RELISTS);
}

int cluster_block_claim_at(struct cluster_blocks *b, uint64_t guid, struct cluster_block *out,
			   char *owner, size_t owner_len, char *err, size_t errlen)
{
	char bkey[KEY_MAX], rkey[KEY_MAX], who[CLUSTER_NODE_MAX + 1] = "";
	struct etcd_range_result r;
	uint64_t first, last, idx;
	int ret;

	if (cluster_block_of(b, guid, &first, &last) || index_of(b, first, &idx))
		return ibvf_errf(err, errlen, -ERANGE, "GUID %016" PRIx64 " is in no pool range",
				 guid);
	/* only a block never freed: a released/ marker means it was returned or
	 * reclaimed, and taking it back is not adoption (docs/cluster.md) */
	ret = try_claim(b, idx, 0, out, err, errlen);
	if (ret < 0)
		return ret;
	if (ret == 1) {
		log_info("cluster: node %s adopted GUID block %016" PRIx64 "..%016" PRIx64, b->node,
			 first, last);
		return 0;
	}
	key_of(b, bkey, "blocks/", first);
	ret = etcd_range(b->etcd, bkey, 0, NULL, 0, 0, false, &r, err, errlen);
	if (ret)
		return ret;
	if (value_node(&r, who, sizeof(who))) {
		etcd_range_result_free(&r);
		if (owner)
			snprintf(owner, owner_len, "%s", who);
		if (!strcmp(who, b->node)) {
			memset(out, 0, sizeof(*out));
			out->first = first;
			out->last = last;
			snprintf(out->node, sizeof(out->node), "%s", who);
			return 0;
		}
		return ibvf_errf(err, errlen, -EEXIST,
				 "GUID %016" PRIx64 ": its block %016" PRIx64 " belongs to node %s",
				 guid, first, who);
	}
	etcd_range_result_free(&r);
	key_of(b, rkey, "released/", first);
	ret = etcd_range(b->etcd, rkey, 0, NULL, 0, 0, false, &r, err, errlen);
	if (ret)
		return ret;
	ret = r.n_kvs ? -EBUSY : -ENOTEMPTY;
	etcd_range_result_free(&r);
	if (ret == -EBUSY)
		return ibvf_errf(err, errlen, ret,
				 "GUID %016" PRIx64 ": its block %016" PRIx64
				 " was returned or reclaimed (released/ marker)",
				 guid, first);
	return ibvf_errf(err, errlen, ret,
			 "GUID %016" PRIx64 ": its block %016" PRIx64 " holds GUIDs reserved by "
			 "other nodes",
			 guid, first);
}

/* The "node" of a JSON value written by ibvf, into @out; false if none. */
static bool value_node(const struct etcd_range_result *r, char *out, size_t len)
{
	json_t *j;
	const char *n;

	if (!r || r->n_kvs != 1)
		return false;
	j = json_loadb(r->kvs[0].value, r->kvs[0].value_len, 0, NULL);
	n = json_string_value(json_object_get(j, "node"));
	if (n)
		snprintf(out, len, "%s", n);
	json_decref(j);
	return n != NULL;
}

int cluster_guid_reserve(struct cluster_blocks *b, uint64_t guid, char *owner, size_t owner_len,
			 char *err, size_t errlen)
{
	char bkey[KEY_MAX], gkey[KEY_MAX], rkey[KEY_MAX], who[CLUSTER_NODE_MAX + 1] = "", *val;
	struct etcd_txn_result t;
	uint64_t first, last;
	bool in_block = !cluster_block_of(b, guid, &first, &last), owned;
	struct etcd_cmp cmp[3];
	size_t n_cmp = 0;
	int ret;

	key_of(b, gkey, "guids/", guid);
	cmp[n_cmp++] =
		(struct etcd_cmp){.key = gkey, .target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL};
	if (in_block) {
		struct etcd_range_result rr;
		struct released r = {0};

		key_of(b, bkey, "blocks/", first);
		cmp[n_cmp++] = (struct etcd_cmp){
			.key = bkey, .target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL};
		/* quarantine holds across nodes: the block's release marker, if any */
		key_of(b, rkey, "released/", first);
		ret = etcd_range(b->etcd, rkey, 0, NULL, 0, 0, false, &rr, err, errlen);
		if (ret)
			return ret;
		if (rr.n_kvs) {
			json_t *j = json_loadb(rr.kvs[0].value, rr.kvs[0].value_len, 0, NULL);

			r.released_ms = json_integer_value(json_object_get(j, "released_ms"));
			r.members_rev = json_integer_value(json_object_get(j, "members_rev"));
			r.mod_revision = rr.kvs[0].mod_revision;
			json_decref(j);
		}
		etcd_range_result_free(&rr);
		if (r.mod_revision && in_quarantine(b, &r))
			return ibvf_errf(err, errlen, -EBUSY,
					 "GUID %016" PRIx64
					 ": its block was released %lld s ago and "
					 "stays in quarantine for %u s",
					 guid, (long long)((ibvf_wall_ms() - r.released_ms) / 1000),
					 b->quarantine_s);
		if (r.mod_revision) {
			struct cluster_sm_state sms;
			char why[IBVF_ERR_LEN] = "";
			int have = 0;
			bool held = members_pending(b, &r, &sms, &have, why, sizeof(why));

			if (have > 0)
				cluster_sm_state_free(&sms);
			if (held)
				return ibvf_errf(err, errlen, -EBUSY,
						 "GUID %016" PRIx64
						 ": its block was reclaimed and the SM agents have "
						 "not yet removed the old node's memberships "
						 "(revision %lld): %s",
						 guid, (long long)r.members_rev, why);
		}
		cmp[n_cmp++] = (struct etcd_cmp){.key = rkey,
						 .target = ETCD_CMP_MOD,
						 .result = ETCD_CMP_EQUAL,
						 .number = r.mod_revision};
	}
	{
		json_t *v = json_pack("{s:s,s:I}", "node", b->node, "reserved_ms",
				      (json_int_t)ibvf_wall_ms());

		val = v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
		json_decref(v);
	}
	if (!val)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	{
		struct etcd_op put = {.type = ETCD_OP_PUT, .key = gkey, .value = val};
		struct etcd_op get[] = {{.type = ETCD_OP_RANGE, .key = gkey},
					{.type = ETCD_OP_RANGE, .key = bkey}};

		ret = etcd_txn(b->etcd, cmp, n_cmp, &put, 1, get, in_block ? 2 : 1, &t, err,
			       errlen);
	}
	free(val);
	if (ret)
		return ret;
	if (t.succeeded) {
		etcd_txn_result_free(&t);
		return 0;
	}
	/* who has it: a block owner, or a reservation */
	owned = in_block && t.n_responses > 1 && value_node(&t.responses[1], who, sizeof(who));
	if (!owned)
		value_node(t.n_responses ? &t.responses[0] : NULL, who, sizeof(who));
	etcd_txn_result_free(&t);
	if (!strcmp(who, b->node))
		return 0; /* this node's block (the local pool decides) or reservation */
	if (owner)
		snprintf(owner, owner_len, "%s", who);
	return ibvf_errf(err, errlen, -EEXIST,
			 "GUID %016" PRIx64 " belongs to node %s (cluster %s%s): never taken from "
			 "a live owner",
			 guid, *who ? who : "(unknown)", b->prefix,
			 owned ? ", inside its block" : ", reserved");
}

int cluster_guid_unreserve(struct cluster_blocks *b, uint64_t guid, char *err, size_t errlen)
{
	char gkey[KEY_MAX], who[CLUSTER_NODE_MAX + 1] = "";
	struct etcd_range_result r;
	struct etcd_txn_result t;
	int ret;

	key_of(b, gkey, "guids/", guid);
	ret = etcd_range(b->etcd, gkey, 0, NULL, 0, 0, false, &r, err, errlen);
	if (ret)
		return ret;
	if (!value_node(&r, who, sizeof(who)) || strcmp(who, b->node)) {
		etcd_range_result_free(&r);
		return 0;
	}
	{
		/* delete only the very value read: another node's later key stays */
		struct etcd_cmp same = {.key = gkey,
					.target = ETCD_CMP_MOD,
					.result = ETCD_CMP_EQUAL,
					.number = r.kvs[0].mod_revision};
		struct etcd_op del = {.type = ETCD_OP_DELETE, .key = gkey};

		etcd_range_result_free(&r);
		ret = etcd_txn(b->etcd, &same, 1, &del, 1, NULL, 0, &t, err, errlen);
	}
	if (!ret)
		etcd_txn_result_free(&t);
	return ret;
}

int cluster_blocks_verify(struct cluster_blocks *b, const uint64_t *firsts, size_t n_firsts,
			  struct cluster_block_check **out, size_t *n, char *err, size_t errlen)
{
	struct cluster_block *all;
	size_t n_all, bad = 0;
	int ret = cluster_blocks_list(b, NULL, &all, &n_all, err, errlen);

	*out = NULL;
	*n = 0;
	if (ret)
		return ret;
	*out = calloc(n_firsts + n_all + 1, sizeof(**out));
	if (!*out) {
		free(all);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n_firsts; i++) {
		struct cluster_block_check *c = &(*out)[(*n)++];
		const struct cluster_block *hit = NULL;

		c->first = firsts[i];
		if (cluster_block_of(b, firsts[i], &c->first, &c->last) || c->first != firsts[i]) {
			c->first = firsts[i];
			c->last = firsts[i];
			c->state = CLUSTER_BLOCK_LOST; /* not a block of the layout any more */
			bad++;
			continue;
		}
		for (size_t k = 0; k < n_all && !hit; k++)
			if (all[k].first == c->first)
				hit = &all[k];
		if (!hit) {
			c->state = CLUSTER_BLOCK_LOST;
		} else if (strcmp(hit->node, b->node)) {
			c->state = CLUSTER_BLOCK_FOREIGN;
			snprintf(c->owner, sizeof(c->owner), "%s", hit->node);
		} else {
			c->state = CLUSTER_BLOCK_OWNED;
			continue;
		}
		bad++;
		log_err("cluster: node %s: GUID block %016" PRIx64 "..%016" PRIx64
			" of the local store is %s%s%s: no new GUID comes from it; its live "
			"attachments are in conflict",
			b->node, c->first, c->last,
			c->state == CLUSTER_BLOCK_LOST ? "no longer claimed in etcd (reclaimed?)"
						       : "owned by node ",
			c->owner, "");
	}
	for (size_t k = 0; k < n_all; k++) {
		bool listed = false;

		if (strcmp(all[k].node, b->node))
			continue;
		for (size_t i = 0; i < n_firsts && !listed; i++)
			listed = firsts[i] == all[k].first;
		if (listed)
			continue;
		(*out)[*n] = (struct cluster_block_check){.first = all[k].first,
							  .last = all[k].last,
							  .state = CLUSTER_BLOCK_UNLISTED};
		snprintf((*out)[*n].owner, sizeof((*out)[*n].owner), "%s", b->node);
		(*n)++;
		bad++;
		log_warn("cluster: node %s owns GUID block %016" PRIx64 "..%016" PRIx64
			 " in etcd but its store does not list it",
			 b->node, all[k].first, all[k].last);
	}
	free(all);
	return (int)bad;
}

/*
 * Free one block: delete its key if it is still at @mod and put its release
 * marker; with @guard, also require that key (a heartbeat) to be absent.
 * Return: 1 done, 0 something changed meanwhile, or a negative errno.
 */
static int free_block(struct cluster_blocks *b, uint64_t first, int64_t mod, const char *guard,
		      int64_t members_rev, char *err, size_t errlen)
{
	char key[KEY_MAX], rkey[KEY_MAX],
		*val = released_value(b->node, ibvf_wall_ms(), members_rev);
	struct etcd_txn_result t;
	int ret;

	if (!val)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	key_of(b, key, "blocks/", first);
	key_of(b, rkey, "released/", first);
	{
		struct etcd_cmp cmp[] = {
			{.key = key,
			 .target = ETCD_CMP_MOD,
			 .result = ETCD_CMP_EQUAL,
			 .number = mod},
			{.key = guard, .target = ETCD_CMP_CREATE, .result = ETCD_CMP_EQUAL},
		};
		struct etcd_op ops[] = {{.type = ETCD_OP_DELETE, .key = key},
					{.type = ETCD_OP_PUT, .key = rkey, .value = val}};

		ret = etcd_txn(b->etcd, cmp, guard ? 2 : 1, ops, 2, NULL, 0, &t, err, errlen);
	}
	free(val);
	if (ret)
		return ret;
	ret = t.succeeded;
	etcd_txn_result_free(&t);
	return ret;
}

int cluster_block_return(struct cluster_blocks *b, uint64_t first, char *err, size_t errlen)
{
	char key[KEY_MAX], who[CLUSTER_NODE_MAX + 1] = "";
	struct etcd_range_result r;
	int64_t mod;
	int ret;

	key_of(b, key, "blocks/", first);
	ret = etcd_range(b->etcd, key, 0, NULL, 0, 0, false, &r, err, errlen);
	if (ret)
		return ret;
	if (!value_node(&r, who, sizeof(who))) {
		etcd_range_result_free(&r);
		return ibvf_errf(err, errlen, -ENOENT, "cluster: no claimed block at %s", key);
	}
	mod = r.kvs[0].mod_revision;
	etcd_range_result_free(&r);
	if (strcmp(who, b->node))
		return ibvf_errf(err, errlen, -EPERM,
				 "cluster: block %s belongs to node %s, not %s", key, who, b->node);
	ret = free_block(b, first, mod, NULL, 0, err, errlen);
	if (ret == 0)
		return ibvf_errf(err, errlen, -EAGAIN, "cluster: block %s changed meanwhile", key);
	if (ret == 1)
		log_info("cluster: node %s returned GUID block %s (quarantine %u s)", b->node, key,
			 b->quarantine_s);
	return ret < 0 ? ret : 0;
}

int cluster_node_heartbeat(struct cluster_blocks *b, int64_t ttl_s, int64_t *lease, char *err,
			   size_t errlen)
{
	char key[KEY_MAX], *val;
	json_t *v;
	int ret;

	if (*lease) {
		ret = etcd_lease_keepalive(b->etcd, *lease, NULL, err, errlen);
		if (ret != -ENOENT)
			return ret;
		log_warn("cluster: node %s: heartbeat lease expired; granting a new one", b->node);
		*lease = 0;
	}
	ret = etcd_lease_grant(b->etcd, ttl_s, 0, lease, NULL, err, errlen);
	if (ret)
		return ret;
	snprintf(key, sizeof(key), "%snodes/%s", b->prefix, b->node);
	v = json_pack("{s:s,s:I}", "node", b->node, "since_ms", (json_int_t)ibvf_wall_ms());
	val = v ? json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	json_decref(v);
	if (!val)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	ret = etcd_put(b->etcd, key, 0, val, 0, *lease, NULL, err, errlen);
	free(val);
	return ret;
}

int cluster_node_alive(struct cluster_blocks *b, const char *node, bool *alive, char *err,
		       size_t errlen)
{
	char key[KEY_MAX];
	struct etcd_range_result r;
	int ret;

	snprintf(key, sizeof(key), "%snodes/%s", b->prefix, node);
	ret = etcd_range(b->etcd, key, 0, NULL, 0, 0, true, &r, err, errlen);
	if (!ret)
		*alive = r.n_kvs > 0;
	etcd_range_result_free(&r);
	return ret;
}

int cluster_node_reclaim_all(struct cluster_blocks *b, const char *node, bool force,
			     struct cluster_reclaim *out, char *err, size_t errlen)
{
	char hb[KEY_MAX], key[KEY_MAX], end[KEY_MAX], who[CLUSTER_NODE_MAX + 1],
		why[IBVF_ERR_LEN] = "";
	struct cluster_members_reclaim mr;
	struct cluster_block *blocks = NULL;
	struct etcd_range_result r;
	size_t n = 0;
	bool alive = false;
	int ret, el;

	memset(out, 0, sizeof(*out));
	snprintf(hb, sizeof(hb), "%snodes/%s", b->prefix, node);
	ret = cluster_node_alive(b, node, &alive, err, errlen);
	if (ret)
		return ret;
	if (alive && !force)
		return ibvf_errf(err, errlen, -EBUSY,
				 "cluster: node %s has a live heartbeat (%s): not reclaimed "
				 "(force only when the node is gone for good)",
				 node, hb);
	/*
	 * Its memberships first (rule 2): the agents must take its GUIDs out
	 * of its PKeys before anyone gets them again. A failure here leaves
	 * the blocks claimed, so running the reclaim again finishes it.
	 */
	ret = cluster_members_reclaim_node(b->etcd, b->prefix, node, force ? NULL : hb, &mr, err,
					   errlen);
	if (ret)
		return ret;
	out->memberships = mr.removed;
	out->pending = mr.pending;
	out->view_keys = mr.view_keys;
	out->members_rev = mr.revision;
	ret = cluster_blocks_list(b, node, &blocks, &n, err, errlen);
	for (size_t i = 0; !ret && i < n; i++) {
		ret = free_block(b, blocks[i].first, blocks[i].mod_revision, force ? NULL : hb,
				 mr.revision, err, errlen);
		if (ret == 0) {
			ret = ibvf_errf(err, errlen, -EAGAIN,
					"cluster: node %s came back (or its block %016" PRIx64
					" changed) during the reclaim: stopped after %zu blocks",
					node, blocks[i].first, out->blocks);
		} else if (ret == 1) {
			ret = 0;
			out->blocks++;
		}
	}
	free(blocks);
	if (ret)
		return ret;
	/*
	 * Its single reservations have no marker to hold them: while the agents
	 * have not applied the removals they stay (a second reclaim frees them).
	 */
	out->applied = true;
	if (mr.revision > 0) {
		struct cluster_sm_state s;

		ret = cluster_sm_state_read(b->etcd, b->prefix, &s, err, errlen);
		if (ret)
			return ret;
		out->applied = cluster_sm_applied(&s, mr.revision, why, sizeof(why));
		cluster_sm_state_free(&s);
	}
	snprintf(key, sizeof(key), "%sguids/", b->prefix);
	el = etcd_prefix_end(key, strlen(key), end, sizeof(end));
	ret = etcd_range(b->etcd, key, 0, end, (size_t)el, 0, false, &r, err, errlen);
	if (ret)
		return ret;
	for (size_t i = 0; !ret && i < r.n_kvs; i++) {
		struct etcd_range_result one = {.kvs = &r.kvs[i], .n_kvs = 1};
		struct etcd_txn_result t;

		if (!value_node(&one, who, sizeof(who)) || strcmp(who, node))
			continue;
		if (!out->applied) {
			out->guids_kept++;
			continue;
		}
		{
			struct etcd_cmp same = {.key = r.kvs[i].key,
						.key_len = r.kvs[i].key_len,
						.target = ETCD_CMP_MOD,
						.result = ETCD_CMP_EQUAL,
						.number = r.kvs[i].mod_revision};
			struct etcd_op del = {.type = ETCD_OP_DELETE,
					      .key = r.kvs[i].key,
					      .key_len = r.kvs[i].key_len};

			ret = etcd_txn(b->etcd, &same, 1, &del, 1, NULL, 0, &t, err, errlen);
		}
		if (!ret) {
			out->guids += t.succeeded;
			etcd_txn_result_free(&t);
		}
	}
	etcd_range_result_free(&r);
	if (!ret)
		log_warn("cluster: node %s reclaimed%s: %zu memberships removed (%zu pending), "
			 "%zu blocks to quarantine, %zu reserved GUIDs freed, %zu kept%s%s",
			 node, force ? " (forced)" : "", out->memberships, out->pending,
			 out->blocks, out->guids, out->guids_kept,
			 out->applied ? "" : " until the SM agents apply the removals: ", why);
	return ret;
}

int cluster_node_reclaim(struct cluster_blocks *b, const char *node, bool force, size_t *n_blocks,
			 size_t *n_guids, char *err, size_t errlen)
{
	struct cluster_reclaim r;
	int ret = cluster_node_reclaim_all(b, node, force, &r, err, errlen);

	*n_blocks = r.blocks;
	*n_guids = r.guids;
	return ret;
}

static struct cluster_node *node_entry(struct cluster_node **v, size_t *n, size_t *cap,
				       const char *name)
{
	struct cluster_node *nv;

	for (size_t i = 0; i < *n; i++)
		if (!strcmp((*v)[i].name, name))
			return &(*v)[i];
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 16;

		nv = realloc(*v, c * sizeof(**v));
		if (!nv)
			return NULL;
		*v = nv;
		*cap = c;
	}
	memset(&(*v)[*n], 0, sizeof(**v));
	snprintf((*v)[*n].name, sizeof((*v)[*n].name), "%s", name);
	return &(*v)[(*n)++];
}

static int cmp_node(const void *a, const void *b)
{
	return strcmp(((const struct cluster_node *)a)->name,
		      ((const struct cluster_node *)b)->name);
}

/* the whole of the prefix P <kind> (one range request) */
static int scan_prefix(struct cluster_blocks *b, const char *kind, struct etcd_range_result *r,
		       char *err, size_t errlen)
{
	char key[KEY_MAX], end[KEY_MAX];
	int el;

	snprintf(key, sizeof(key), "%s%s", b->prefix, kind);
	el = etcd_prefix_end(key, strlen(key), end, sizeof(end));
	return etcd_range(b->etcd, key, 0, end, (size_t)el, 0, false, r, err, errlen);
}

int cluster_guid_reservations(struct cluster_blocks *b, const char *node, uint64_t **out, size_t *n,
			      char *err, size_t errlen)
{
	size_t plen = strlen(b->prefix) + strlen("guids/");
	char who[CLUSTER_NODE_MAX + 1];
	struct etcd_range_result r;
	int ret;

	*out = NULL;
	*n = 0;
	ret = scan_prefix(b, "guids/", &r, err, errlen);
	if (ret)
		return ret;
	*out = calloc(r.n_kvs + 1, sizeof(**out));
	if (!*out) {
		etcd_range_result_free(&r);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < r.n_kvs; i++) {
		struct etcd_range_result one = {.kvs = &r.kvs[i], .n_kvs = 1};
		const char *hex = r.kvs[i].key + plen;
		char *end;
		uint64_t g;

		if (r.kvs[i].key_len != plen + 16 || !value_node(&one, who, sizeof(who)) ||
		    strcmp(who, node))
			continue;
		g = strtoull(hex, &end, 16);
		if (*end)
			continue;
		(*out)[(*n)++] = g;
	}
	etcd_range_result_free(&r);
	return 0;
}

int cluster_nodes_list(struct cluster_blocks *b, struct cluster_node **out, size_t *n, char *err,
		       size_t errlen)
{
	struct cluster_block *blocks = NULL;
	struct etcd_range_result r;
	size_t nb = 0, cap = 0;
	char who[CLUSTER_NODE_MAX + 1];
	struct cluster_node *e;
	int ret;

	*out = NULL;
	*n = 0;
	ret = scan_prefix(b, "nodes/", &r, err, errlen);
	if (ret)
		return ret;
	for (size_t i = 0; !ret && i < r.n_kvs; i++) {
		struct etcd_range_result one = {.kvs = &r.kvs[i], .n_kvs = 1};
		json_t *j;

		if (!value_node(&one, who, sizeof(who)))
			continue;
		if (!(e = node_entry(out, n, &cap, who))) {
			ret = -ENOMEM;
			break;
		}
		e->alive = true;
		j = json_loadb(r.kvs[i].value, r.kvs[i].value_len, 0, NULL);
		e->since_ms = json_integer_value(json_object_get(j, "since_ms"));
		json_decref(j);
	}
	etcd_range_result_free(&r);
	if (!ret)
		ret = cluster_blocks_list(b, NULL, &blocks, &nb, err, errlen);
	for (size_t i = 0; !ret && i < nb; i++) {
		if (!(e = node_entry(out, n, &cap, blocks[i].node))) {
			ret = -ENOMEM;
			break;
		}
		e->n_blocks++;
		e->n_guids += blocks[i].last - blocks[i].first + 1;
	}
	free(blocks);
	if (!ret && !(ret = scan_prefix(b, "guids/", &r, err, errlen))) {
		for (size_t i = 0; !ret && i < r.n_kvs; i++) {
			struct etcd_range_result one = {.kvs = &r.kvs[i], .n_kvs = 1};

			if (!value_node(&one, who, sizeof(who)))
				continue;
			if (!(e = node_entry(out, n, &cap, who)))
				ret = -ENOMEM;
			else
				e->n_reserved++;
		}
		etcd_range_result_free(&r);
	}
	if (ret) {
		free(*out);
		*out = NULL;
		*n = 0;
		return ret == -ENOMEM ? ibvf_errf(err, errlen, -ENOMEM, "out of memory") : ret;
	}
	if (*n)
		qsort(*out, *n, sizeof(**out), cmp_node);
	return 0;
}
