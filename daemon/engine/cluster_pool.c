// SPDX-License-Identifier: MIT
/* Cluster mode at start-up: the node's etcd GUID blocks as the pool's ranges (cluster_pool.h). */
#include "cluster_pool.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ibvf/types.h>

#include "err.h"
#include "etcd_client.h"
#include "attach_seams.h"
#include "clock.h"
#include "guid_blocks.h"
#include "json_util.h"
#include "log.h"
#include "statedir.h"

#define MAX_START_CLAIMS 64

struct held {
	struct cluster_range *v; /* the node's blocks, sorted by first GUID */
	size_t n, cap;
};

static int held_add(struct held *h, uint64_t first, uint64_t last)
{
	for (size_t i = 0; i < h->n; i++)
		if (h->v[i].start == first)
			return 0;
	if (h->n == h->cap) {
		size_t c = h->cap ? h->cap * 2 : 16;
		struct cluster_range *nv = realloc(h->v, c * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		h->v = nv;
		h->cap = c;
	}
	h->v[h->n].start = first;
	h->v[h->n].end = last;
	h->n++;
	return 0;
}

/* A set of GUIDs (reservations, pending prepares): small, unsorted. */
struct u64v {
	uint64_t *v;
	size_t n, cap;
};

static bool u64v_has(const struct u64v *s, uint64_t g)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == g)
			return true;
	return false;
}

/* Add @g (@dup: also when present). 0 or -ENOMEM. */
static int u64v_add(struct u64v *s, uint64_t g, bool dup)
{
	if (!dup && u64v_has(s, g))
		return 0;
	if (s->n == s->cap) {
		size_t c = s->cap ? s->cap * 2 : 16;
		uint64_t *nv = realloc(s->v, c * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		s->v = nv;
		s->cap = c;
	}
	s->v[s->n++] = g;
	return 0;
}

/* Remove one occurrence of @g. */
static void u64v_del(struct u64v *s, uint64_t g)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == g) {
			s->v[i] = s->v[--s->n];
			return;
		}
}

static bool held_has(const struct held *h, uint64_t g)
{
	for (size_t i = 0; i < h->n; i++)
		if (g >= h->v[i].start && g <= h->v[i].end)
			return true;
	return false;
}

static int cmp_range(const void *a, const void *b)
{
	uint64_t x = ((const struct cluster_range *)a)->start;
	uint64_t y = ((const struct cluster_range *)b)->start;

	return x < y ? -1 : x > y;
}

struct ibvf_cluster_hb {
	struct etcd_client *etcd;
	struct cluster_blocks *b;      /* NULL until etcd answered the layout check */
	struct cluster_blocks_opts bo; /* to open it then */
	struct cluster_range *ranges;  /* bo's copy of the configured ranges */
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool stop;
	int64_t lease;
	int64_t next_hb_ms; /* when the heartbeat is due (CLOCK_MONOTONIC ms) */
	/* the claimer (one per node: claims are serialized, docs/cluster.md) */
	char path[4096]; /* <state_dir>/cluster-blocks.json */
	char node[256], prefix[256];
	uint64_t low_watermark;
	char endpoints[512];	    /* for the not-ready reason */
	struct cluster_range *held; /* the node's blocks, sorted; under mu */
	size_t n_held, cap_held;
	/* ibvf_cluster_hb_attach(): under attach_mu (held while they are used) */
	pthread_mutex_t attach_mu;
	struct ibvf_pool *pool;
	ibvf_cluster_add_range_fn add_range, remove_range;
	void *add_arg;
	uint64_t high_watermark; /* return an idle block above this many free GUIDs */
	int64_t next_return_ms;	 /* the thread's: next look for an idle block (monotonic) */
	/* under mu: the claimer's view for ibvf_cluster_ready() */
	bool claim_failing;	     /* the thread's own: the last claim failed */
	bool out;		     /* no free GUID and the last claim failed */
	char why[IBVF_ERR_LEN + 64]; /* ... and why */
	bool kicked;
	/* the thread's own: the use rate that sizes the claim ahead (claim_need()) */
	uint64_t last_free; /* the free count at the last sample */
	uint64_t added;	    /* GUIDs of blocks added since */
	int64_t last_ms;    /* when (0: no sample yet) */
	double use_per_ms;  /* GUIDs taken per ms, smoothed */
	int64_t look_ms;    /* the claimer's next look at the free count */
	json_t *conflicts;  /* under mu: [{guid, block, reason, owner, container, ifname, pci}] */
	/* requested GUIDs reserved outside the node's blocks (ibvf_cluster_reserve()) */
	pthread_mutex_t resv_mu; /* held across a reservation's deletion */
	struct u64v resv;	 /* this node's guids/ keys */
	struct u64v pending;	 /* reserved by a prepare that has not finished */
};

static int64_t mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int file_write(const char *path, const struct ibvf_cluster_config *k, const struct held *h,
		      json_t *conflicts, char *err, size_t errlen);

/* h->b, opened when etcd first answers (by the thread only; read under mu elsewhere). */
static int hb_open_blocks(struct ibvf_cluster_hb *h, char *err, size_t errlen)
{
	struct cluster_blocks *b = NULL;
	int ret;

	if (h->b)
		return 0;
	ret = cluster_blocks_open(&h->bo, &b, err, errlen);
	if (!ret) {
		pthread_mutex_lock(&h->mu);
		h->b = b;
		pthread_mutex_unlock(&h->mu);
	}
	return ret;
}

/* The heartbeat, when due. Outside mu. */
static void hb_beat(struct ibvf_cluster_hb *h, bool *failing)
{
	char err[IBVF_ERR_LEN];
	int ret;

	if (mono_ms() < h->next_hb_ms)
		return;
	ret = hb_open_blocks(h, err, sizeof(err));
	if (!ret)
		ret = cluster_node_heartbeat(h->b, IBVF_CLUSTER_HEARTBEAT_TTL_S, &h->lease, err,
					     sizeof(err));
	if (ret && !*failing)
		log_warn("cluster: heartbeat not renewed (retrying): %s", err);
	else if (!ret && *failing)
		log_notice("cluster: heartbeat renewed again");
	*failing = ret != 0;
	h->next_hb_ms = mono_ms() + (*failing ? 2000 : IBVF_CLUSTER_HEARTBEAT_TTL_S / 3 * 1000);
}

static void set_out(struct ibvf_cluster_hb *h, bool out, const char *why)
{
	pthread_mutex_lock(&h->mu);
	if (out && !h->out)
		log_err("cluster: node %s is out of GUIDs: %s", h->node, why);
	else if (!out && h->out)
		log_notice("cluster: node %s has free GUIDs again", h->node);
	h->out = out;
	if (out)
		snprintf(h->why, sizeof(h->why), "%s", why);
	pthread_mutex_unlock(&h->mu);
}

/*
 * How many free GUIDs the node holds before it claims: the low watermark
 * plus what one second at its recent use rate takes (at most 8 blocks more),
 * so that a run of ADDs faster than low_watermark per look does not use the
 * blocks up between two looks (each prepare would then answer not ready).
 * The rate is the net use between samples at least 10 ms apart (the drop of
 * the free count, blocks added since counted back in), halved toward each
 * new sample. Sets h->look_ms: the next look comes at half the time the free
 * GUIDs above the low watermark last at that rate, 50..500 ms (500 ms while
 * idle).
 */
static uint64_t claim_need(struct ibvf_cluster_hb *h, uint64_t nfree)
{
	uint64_t cap = 8 * (uint64_t)h->bo.block_size, extra;
	int64_t now = mono_ms(), dt = now - h->last_ms;

	if (!h->last_ms || dt >= 10) {
		uint64_t had = h->last_free + h->added;
		double used = h->last_ms && had > nfree ? (double)(had - nfree) : 0;

		if (h->last_ms)
			h->use_per_ms = 0.5 * h->use_per_ms + 0.5 * used / (double)dt;
		h->last_ms = now;
		h->last_free = nfree;
		h->added = 0;
	}
	extra = (uint64_t)(h->use_per_ms * 1000.0);
	if (extra > cap)
		extra = cap;
	h->look_ms = 500;
	if (h->use_per_ms > 1e-3) {
		double left = nfree > h->low_watermark ? (double)(nfree - h->low_watermark) : 0;
		double t = left / h->use_per_ms / 2;

		h->look_ms = t < 50 ? 50 : t > 500 ? 500 : (int64_t)t;
	}
	return h->low_watermark + extra;
}

/*
 * The claimer, while attached: one block claimed (recorded in the file, then
 * given to the engine and the pool) when fewer GUIDs are free than
 * claim_need() says (the low watermark, more while GUIDs are being used).
 * Return: true when another claim may be due at once.
 */
static bool hb_claim(struct ibvf_cluster_hb *h)
{
	struct ibvf_pool_stats st = {0};
	struct ibvf_cluster_config k = {.node = h->node, .prefix = h->prefix};
	struct cluster_block blk;
	char err[IBVF_ERR_LEN], why[IBVF_ERR_LEN + 64];
	bool again = false;
	int ret;

	pthread_mutex_lock(&h->attach_mu);
	/* the free list's size: cheap enough for frequent looks */
	if (!h->pool || ibvf_pool_free_count(h->pool, &st.free, err, sizeof(err))) {
		pthread_mutex_unlock(&h->attach_mu);
		return false;
	}
	pthread_mutex_unlock(&h->attach_mu);
	if (st.free >= claim_need(h, st.free)) {
		set_out(h, false, "");
		return false;
	}
	ret = hb_open_blocks(h, err, sizeof(err));
	if (!ret)
		ret = cluster_blocks_claim(h->b, &blk, err, sizeof(err));
	if (ret) {
		if (snprintf(why, sizeof(why),
			     "cluster %s: node %s has %" PRIu64 " free GUIDs in its %zu blocks "
			     "and claims no new block (etcd %s): %s",
			     h->prefix, h->node, st.free, h->n_held, h->endpoints, err) < 0)
			why[0] = 0; /* (a long message is cut) */
		if (st.free == 0)
			set_out(h, true, why);
		else if (!h->claim_failing)
			log_warn("%s (retrying every 2 s)", why);
		h->claim_failing = true;
		return false;
	}
	h->claim_failing = false;
	/* recorded in the file before the pool sees it (a crash leaves it "unlisted") */
	pthread_mutex_lock(&h->mu);
	{
		struct held hd = {.v = h->held, .n = h->n_held, .cap = h->cap_held};

		ret = held_add(&hd, blk.first, blk.last);
		if (!ret)
			qsort(hd.v, hd.n, sizeof(*hd.v), cmp_range);
		h->held = hd.v;
		h->n_held = hd.n;
		h->cap_held = hd.cap;
		if (!ret)
			ret = file_write(h->path, &k, &hd, h->conflicts, err, sizeof(err));
	}
	pthread_mutex_unlock(&h->mu);
	if (ret) {
		log_err("cluster: node %s: block %016" PRIx64 " claimed but not recorded in %s "
			"(the next start adopts it): %s",
			h->node, blk.first, h->path, err);
		return false;
	}
	pthread_mutex_lock(&h->attach_mu);
	if (h->pool) {
		ret = h->add_range ? h->add_range(h->add_arg, blk.first, blk.last) : 0;
		if (!ret)
			ret = ibvf_pool_add_range(h->pool, blk.first, blk.last, err, sizeof(err));
		if (ret)
			log_err("cluster: node %s: block %016" PRIx64 " recorded but not added "
				"to the pool (the next start uses it): %s",
				h->node, blk.first, err);
		else
			log_notice("cluster: node %s claimed block %016" PRIx64 "-%016" PRIx64
				   " while running (%" PRIu64 " GUIDs were free)",
				   h->node, blk.first, blk.last, st.free);
		if (!ret)
			h->added += blk.last - blk.first + 1;
		again = !ret;
	}
	pthread_mutex_unlock(&h->attach_mu);
	if (again)
		set_out(h, false, "");
	return again;
}

/*
 * The node's reservations: one whose GUID has no record left (released, and
 * its quarantine over: the pool deletes the record only then) and no prepare
 * in flight is deleted in etcd; conflicts whose attachment is gone are
 * dropped. Never while claims fail (etcd is down: each call would wait).
 */
static void hb_sweep(struct ibvf_cluster_hb *h)
{
	struct ibvf_cluster_config k = {.node = h->node, .prefix = h->prefix};
	char err[IBVF_ERR_LEN], g[IBVF_GUID_STR_LEN];
	struct ibvf_alloc a;
	bool changed = false;

	pthread_mutex_lock(&h->attach_mu);
	if (!h->pool || !h->b || h->claim_failing) {
		pthread_mutex_unlock(&h->attach_mu);
		return;
	}
	pthread_mutex_lock(&h->resv_mu);
	for (size_t i = 0; i < h->resv.n;) {
		uint64_t guid = h->resv.v[i];
		int ret;

		if (u64v_has(&h->pending, guid) ||
		    ibvf_pool_get(h->pool, guid, &a, err, sizeof(err)) != -ENOENT) {
			i++;
			continue;
		}
		ret = cluster_guid_unreserve(h->b, guid, err, sizeof(err));
		if (ret) {
			log_warn(
				"cluster: node %s: reservation of GUID %s not deleted (retrying): %s",
				h->node, ibvf_guid_format(guid, g), err);
			break;
		}
		log_info("cluster: node %s: GUID %s released cluster-wide (no record left: its "
			 "quarantine is over)",
			 h->node, ibvf_guid_format(guid, g));
		u64v_del(&h->resv, guid);
	}
	pthread_mutex_unlock(&h->resv_mu);
	pthread_mutex_lock(&h->mu);
	for (size_t i = 0; i < json_array_size(h->conflicts);) {
		json_t *c = json_array_get(h->conflicts, i);
		const char *cid = json_string_value(json_object_get(c, "container"));
		uint64_t guid = 0;

		if (json_is_true(json_object_get(c, "vf"))) {
			i++; /* a VF carrying it, no record: looked at again at each start */
			continue;
		}
		if (ibvf_guid_parse(json_string_value(json_object_get(c, "guid")), &guid, NULL,
				    0) ||
		    ibvf_pool_get(h->pool, guid, &a, err, sizeof(err)) ||
		    a.state == IBVF_ALLOC_QUARANTINED ||
		    (cid && strcmp(cid, a.owner.container_id))) {
			log_notice("cluster: node %s: conflict of GUID %s is over (its attachment "
				   "is released)",
				   h->node, ibvf_guid_format(guid, g));
			json_array_remove(h->conflicts, i);
			changed = true;
			continue;
		}
		i++;
	}
	if (changed) {
		struct held hd = {.v = h->held, .n = h->n_held, .cap = h->cap_held};

		if (file_write(h->path, &k, &hd, h->conflicts, err, sizeof(err)))
			log_warn("cluster: %s", err);
	}
	pthread_mutex_unlock(&h->mu);
	pthread_mutex_unlock(&h->attach_mu);
}

/* Drop [first, ...] from the node's blocks and rewrite the file. Under mu. */
static int held_drop(struct ibvf_cluster_hb *h, uint64_t first, char *err, size_t errlen)
{
	struct ibvf_cluster_config k = {.node = h->node, .prefix = h->prefix};
	struct held hd;

	for (size_t i = 0; i < h->n_held; i++)
		if (h->held[i].start == first) {
			memmove(&h->held[i], &h->held[i + 1],
				(h->n_held - i - 1) * sizeof(*h->held));
			h->n_held--;
			break;
		}
	hd = (struct held){.v = h->held, .n = h->n_held, .cap = h->cap_held};
	return file_write(h->path, &k, &hd, h->conflicts, err, errlen);
}

/*
 * Above high_watermark free GUIDs, return one idle block (docs/cluster.md),
 * the highest first: taken out of the pool first (one store transaction that
 * refuses a block with a held GUID), then out of the engine's pool GUIDs and
 * the file, then returned in etcd with its released/ marker (quarantine
 * holds across nodes). An etcd failure puts it back everywhere. A crash in
 * between leaves it in etcd and not in the file: the next start adopts it.
 */
static void hb_return(struct ibvf_cluster_hb *h)
{
	struct ibvf_pool_stats st = {0};
	char err[IBVF_ERR_LEN];
	struct cluster_range *v = NULL;
	size_t n = 0;

	if (mono_ms() < h->next_return_ms)
		return;
	h->next_return_ms = mono_ms() + 2000;
	pthread_mutex_lock(&h->attach_mu);
	if (!h->pool || !h->b || h->claim_failing ||
	    ibvf_pool_stats(h->pool, &st, err, sizeof(err)) ||
	    st.free + st.quarantined <= h->high_watermark)
		goto out; /* quarantined GUIDs come back: they count as idle */
	pthread_mutex_lock(&h->mu);
	if (h->n_held > 1 && (v = calloc(h->n_held, sizeof(*v)))) {
		n = h->n_held;
		memcpy(v, h->held, n * sizeof(*v));
	}
	pthread_mutex_unlock(&h->mu);
	for (size_t i = n; i-- > 0;) {
		uint64_t first = v[i].start, last = v[i].end, size = last - first + 1;
		int ret;

		if (st.free + st.quarantined < size ||
		    st.free + st.quarantined - size < h->low_watermark)
			continue;
		/* the pool checks, in one transaction, that it is idle and that at least
		 * low_watermark GUIDs stay free */
		ret = ibvf_pool_remove_range(h->pool, first, last, h->low_watermark, err,
					     sizeof(err));
		if (ret == -EBUSY || ret == -ENOSPC)
			continue; /* not idle, or needed */
		if (ret) {
			log_warn("cluster: node %s: block %016" PRIx64 " not returned: %s", h->node,
				 first, err);
			break;
		}
		if (h->remove_range)
			h->remove_range(h->add_arg, first, last);
		pthread_mutex_lock(&h->mu);
		ret = held_drop(h, first, err, sizeof(err));
		pthread_mutex_unlock(&h->mu);
		if (!ret)
			ret = cluster_block_return(h->b, first, err, sizeof(err));
		if (!ret || ret == -ENOENT || ret == -EPERM) {
			if (ret)
				log_err("cluster: node %s: block %016" PRIx64 " was not its own in "
					"etcd: %s",
					h->node, first, err);
			else
				log_notice("cluster: node %s returned idle block %016" PRIx64
					   "-%016" PRIx64 " (%" PRIu64 " GUIDs were free, %" PRIu64
					   " quarantined, high watermark %" PRIu64 ")",
					   h->node, first, last, st.free, st.quarantined,
					   h->high_watermark);
			break;
		}
		/* etcd did not take it back: it stays this node's */
		log_warn("cluster: node %s: block %016" PRIx64 " not returned (kept): %s", h->node,
			 first, err);
		pthread_mutex_lock(&h->mu);
		{
			struct ibvf_cluster_config k = {.node = h->node, .prefix = h->prefix};
			struct held hd = {.v = h->held, .n = h->n_held, .cap = h->cap_held};

			ret = held_add(&hd, first, last);
			if (!ret)
				qsort(hd.v, hd.n, sizeof(*hd.v), cmp_range);
			h->held = hd.v;
			h->n_held = hd.n;
			h->cap_held = hd.cap;
			if (!ret)
				ret = file_write(h->path, &k, &hd, h->conflicts, err, sizeof(err));
		}
		pthread_mutex_unlock(&h->mu);
		if (!ret && h->add_range)
			ret = h->add_range(h->add_arg, first, last);
		if (!ret)
			ret = ibvf_pool_add_range(h->pool, first, last, err, sizeof(err));
		if (ret)
			log_err("cluster: node %s: block %016" PRIx64 " not put back (the next "
				"start does): %s",
				h->node, first, err);
		h->next_return_ms = mono_ms() + 10000;
		break;
	}
out:
	pthread_mutex_unlock(&h->attach_mu);
	free(v);
}

static bool in_cfg_ranges(const struct ibvf_cluster_hb *h, uint64_t g)
{
	for (size_t i = 0; i < h->bo.n_ranges; i++)
		if (g >= h->ranges[i].start && g <= h->ranges[i].end)
			return true;
	return false;
}

int ibvf_cluster_reserve(void *arg, uint64_t guid, bool done, char *err, size_t errlen)
{
	struct ibvf_cluster_hb *h = arg;
	struct cluster_blocks *b;
	char s[IBVF_GUID_STR_LEN];
	int ret;

	if (done) {
		pthread_mutex_lock(&h->resv_mu);
		u64v_del(&h->pending, guid);
		pthread_mutex_unlock(&h->resv_mu);
		return 0;
	}
	ibvf_guid_format(guid, s);
	if (!in_cfg_ranges(h, guid))
		return ibvf_errf(err, errlen, -ERANGE,
				 "requested GUID %s is outside the configured pool ranges", s);
	pthread_mutex_lock(&h->mu);
	b = h->b;
	pthread_mutex_unlock(&h->mu);
	if (!b)
		return ibvf_errf(err, errlen, -EAGAIN,
				 "etcd has not answered since ibvfd started (etcd %s)",
				 h->endpoints);
	pthread_mutex_lock(&h->resv_mu);
	ret = u64v_add(&h->pending, guid, true);
	pthread_mutex_unlock(&h->resv_mu);
	if (ret)
		return ibvf_errf(err, errlen, ret, "out of memory");
	ret = cluster_guid_reserve(b, guid, NULL, 0, err, errlen);
	pthread_mutex_lock(&h->resv_mu);
	if (!ret && u64v_add(&h->resv, guid, false))
		ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	if (ret)
		u64v_del(&h->pending, guid);
	pthread_mutex_unlock(&h->resv_mu);
	if (!ret)
		log_info("cluster: node %s reserved requested GUID %s (outside its blocks)",
			 h->node, s);
	return ret;
}

json_t *ibvf_cluster_status(void *arg)
{
	struct ibvf_cluster_hb *h = arg;
	json_t *o;
	size_t n_resv;

	pthread_mutex_lock(&h->resv_mu);
	n_resv = h->resv.n;
	pthread_mutex_unlock(&h->resv_mu);
	pthread_mutex_lock(&h->mu);
	o = json_pack("{s:s,s:s,s:I,s:I,s:O}", "node", h->node, "prefix", h->prefix, "blocks",
		      (json_int_t)h->n_held, "reserved", (json_int_t)n_resv, "conflicts",
		      h->conflicts);
	pthread_mutex_unlock(&h->mu);
	return o;
}

static void *hb_main(void *arg)
{
	struct ibvf_cluster_hb *h = arg;
	bool failing = false;

	pthread_mutex_lock(&h->mu);
	while (!h->stop) {
		struct timespec ts;
		bool again;
		int64_t wait;

		h->kicked = false;
		pthread_mutex_unlock(&h->mu);
		hb_beat(h, &failing);
		again = hb_claim(h);
		hb_sweep(h);
		if (!again)
			hb_return(h);
		/* the claimer looks at the free count every 500 ms, sooner while GUIDs
		 * are being used (claim_need()), every 2 s while claims fail */
		wait = again ? 0 : h->claim_failing ? 2000 : h->look_ms > 0 ? h->look_ms : 500;
		ibvf_mono_deadline_us((int64_t)wait * 1000, &ts);
		pthread_mutex_lock(&h->mu);
		/* a kick (a readiness query) is ignored while claims fail: every prepare
		 * would start another etcd timeout */
		while (!h->stop && wait && (!h->kicked || h->claim_failing) &&
		       pthread_cond_timedwait(&h->cond, &h->mu, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

void ibvf_cluster_hb_attach(struct ibvf_cluster_hb *h, struct ibvf_pool *pool,
			    ibvf_cluster_add_range_fn add_range,
			    ibvf_cluster_add_range_fn remove_range, void *arg)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->attach_mu);
	h->pool = pool;
	h->add_range = add_range;
	h->remove_range = remove_range;
	h->add_arg = arg;
	pthread_mutex_unlock(&h->attach_mu);
	pthread_mutex_lock(&h->mu);
	h->kicked = true;
	pthread_cond_signal(&h->cond);
	pthread_mutex_unlock(&h->mu);
}

bool ibvf_cluster_ready(void *arg, char *why, size_t len)
{
	struct ibvf_cluster_hb *h = arg;
	bool out;

	pthread_mutex_lock(&h->mu);
	out = h->out;
	if (out)
		snprintf(why, len, "%s", h->why);
	h->kicked = true; /* asked: look again now */
	pthread_cond_signal(&h->cond);
	pthread_mutex_unlock(&h->mu);
	return !out;
}

void ibvf_cluster_hb_stop(struct ibvf_cluster_hb *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&h->mu);
	h->stop = true;
	pthread_cond_signal(&h->cond);
	pthread_mutex_unlock(&h->mu);
	pthread_join(h->thread, NULL);
	pthread_mutex_destroy(&h->mu);
	pthread_mutex_destroy(&h->attach_mu);
	pthread_mutex_destroy(&h->resv_mu);
	pthread_cond_destroy(&h->cond);
	json_decref(h->conflicts);
	free(h->resv.v);
	free(h->pending.v);
	free(h->held);
	cluster_blocks_free(h->b);
	etcd_client_free(h->etcd);
	free(h->ranges);
	free(h);
}

/* Hand @etcd, @b and @hd (the node's blocks) to a new heartbeat and claimer thread. */
static int hb_start(struct etcd_client *etcd, struct cluster_blocks *b,
		    const struct cluster_blocks_opts *bo, const struct ibvf_config *cfg,
		    struct held *hd, struct u64v *resv, json_t *conflicts, const char *path,
		    struct ibvf_cluster_hb **out, char *err, size_t errlen)
{
	const struct ibvf_cluster_config *k = &cfg->pool.cluster;
	struct ibvf_cluster_hb *h = calloc(1, sizeof(*h));
	size_t o = 0;

	if (h)
		h->ranges = calloc(bo->n_ranges, sizeof(*h->ranges));
	if (!h || !h->ranges) {
		free(h);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	memcpy(h->ranges, bo->ranges, bo->n_ranges * sizeof(*h->ranges));
	h->bo = *bo;
	h->bo.ranges = h->ranges;
	h->bo.etcd = etcd;
	snprintf(h->node, sizeof(h->node), "%s", k->node);
	snprintf(h->prefix, sizeof(h->prefix), "%s", k->prefix);
	h->bo.node = h->node;
	h->bo.prefix = h->prefix;
	snprintf(h->path, sizeof(h->path), "%s", path);
	h->low_watermark = k->low_watermark;
	h->high_watermark = k->high_watermark ? k->high_watermark
					      : (uint64_t)k->low_watermark + 2ull * k->block_size;
	for (size_t i = 0; i < k->n_endpoints && o < sizeof(h->endpoints); i++) {
		int n = snprintf(h->endpoints + o, sizeof(h->endpoints) - o, "%s%s", i ? ", " : "",
				 k->endpoints[i]);

		if (n < 0)
			break;
		o += (size_t)n;
	}
	h->etcd = etcd;
	h->b = b;
	h->held = hd->v;
	h->n_held = hd->n;
	h->cap_held = hd->cap;
	h->resv = *resv;
	h->conflicts = json_incref(conflicts);
	pthread_mutex_init(&h->mu, NULL);
	pthread_mutex_init(&h->attach_mu, NULL);
	pthread_mutex_init(&h->resv_mu, NULL);
	{
		pthread_condattr_t ca;

		/* its waits are deadlines: immune to wall-clock steps (clock.h) */
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&h->cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	if (pthread_create(&h->thread, NULL, hb_main, h)) {
		pthread_mutex_destroy(&h->mu);
		pthread_mutex_destroy(&h->attach_mu);
		pthread_mutex_destroy(&h->resv_mu);
		pthread_cond_destroy(&h->cond);
		json_decref(h->conflicts);
		free(h->ranges);
		free(h);
		return ibvf_errf(err, errlen, -EAGAIN, "cluster: no heartbeat thread");
	}
	*hd = (struct held){0};
	*resv = (struct u64v){0};
	*out = h;
	return 0;
}

/* <state_dir>/cluster-blocks.json: {"node","prefix","blocks":[["hex","hex"],...]} */
static int file_read(const char *path, const struct ibvf_cluster_config *k, struct held *h,
		     json_t *conflicts, char *err, size_t errlen)
{
	json_t *j, *blocks, *it;
	const char *node, *prefix;
	size_t i;
	int ret = 0;

	if (access(path, F_OK))
		return 0; /* first start in cluster mode */
	j = ibvf_json_load(path, NULL, err, errlen);
	if (!j)
		return -EINVAL;
	node = json_string_value(json_object_get(j, "node"));
	prefix = json_string_value(json_object_get(j, "prefix"));
	if (!node || !prefix || strcmp(node, k->node) || strcmp(prefix, k->prefix)) {
		ret = ibvf_errf(err, errlen, -EINVAL,
				"%s: written for node %s under %s, but this is node %s under %s: "
				"move the file away only if that node's blocks are reclaimed",
				path, node ? node : "?", prefix ? prefix : "?", k->node, k->prefix);
		json_decref(j);
		return ret;
	}
	blocks = json_object_get(j, "blocks");
	json_array_foreach(blocks, i, it)
	{
		const char *a = json_string_value(json_array_get(it, 0));
		const char *z = json_string_value(json_array_get(it, 1));

		if (!a || !z) {
			ret = ibvf_errf(err, errlen, -EINVAL,
					"%s: blocks[%zu]: expected [first, last]", path, i);
			break;
		}
		ret = held_add(h, strtoull(a, NULL, 16), strtoull(z, NULL, 16));
		if (ret)
			break;
	}
	/* conflicts found at an earlier start stay until their attachment is released */
	if (!ret && conflicts)
		json_array_extend(conflicts, json_object_get(j, "conflicts"));
	json_decref(j);
	return ret;
}

static int file_write(const char *path, const struct ibvf_cluster_config *k, const struct held *h,
		      json_t *conflicts, char *err, size_t errlen)
{
	json_t *arr = json_array(), *j;
	char *text;
	int ret;

	for (size_t i = 0; arr && i < h->n; i++) {
		char a[17], z[17];

		snprintf(a, sizeof(a), "%016" PRIx64, h->v[i].start);
		snprintf(z, sizeof(z), "%016" PRIx64, h->v[i].end);
		json_array_append_new(arr, json_pack("[s,s]", a, z));
	}
	j = arr ? json_pack("{s:s,s:s,s:o}", "node", k->node, "prefix", k->prefix, "blocks", arr)
		: NULL;
	if (j && json_array_size(conflicts))
		json_object_set(j, "conflicts", conflicts);
	text = j ? json_dumps(j, JSON_INDENT(1)) : NULL;
	json_decref(j);
	if (!text)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	ret = ibvf_write_file_atomic(path, text, strlen(text), 0600, err, errlen);
	free(text);
	return ret;
}

/* The node's blocks as pool ranges, adjacent blocks merged. */
static int to_ranges(const struct held *h, struct ibvf_guid_range **out, size_t *n)
{
	struct ibvf_guid_range *r = calloc(h->n ? h->n : 1, sizeof(*r));
	size_t k = 0;

	if (!r)
		return -ENOMEM;
	for (size_t i = 0; i < h->n; i++) {
		if (k && r[k - 1].end + 1 == h->v[i].start) {
			r[k - 1].end = h->v[i].end;
			continue;
		}
		r[k].start = h->v[i].start;
		r[k].end = h->v[i].end;
		k++;
	}
	*out = r;
	*n = k;
	return 0;
}

/* One conflict for status and the blocks file (ibvfctl cluster status). */
static void conflict_add(json_t *conflicts, const struct ibvf_alloc *a, uint64_t block,
			 const char *owner, const char *reason)
{
	char g[IBVF_GUID_STR_LEN], b[17];

	ibvf_guid_format(a->guid, g);
	for (size_t i = 0; i < json_array_size(conflicts); i++) {
		const char *x =
			json_string_value(json_object_get(json_array_get(conflicts, i), "guid"));

		if (x && !strcmp(x, g))
			return;
	}
	snprintf(b, sizeof(b), "%016" PRIx64, block);
	json_array_append_new(conflicts,
			      json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "guid", g, "block", b,
					"owner", owner ? owner : "", "reason", reason, "container",
					a->owner.container_id, "ifname", a->owner.ifname, "pci",
					a->pci));
}

struct conflict_scan {
	const struct cluster_block_check *bad;
	size_t n_bad;
	size_t hits;
	json_t *conflicts;
};

static int conflict_cb(void *arg, const struct ibvf_alloc *a)
{
	struct conflict_scan *s = arg;
	char g[IBVF_GUID_STR_LEN];

	if (a->state == IBVF_ALLOC_QUARANTINED)
		return 0;
	for (size_t i = 0; i < s->n_bad; i++) {
		bool lost = s->bad[i].state == CLUSTER_BLOCK_LOST;

		if (!lost && s->bad[i].state != CLUSTER_BLOCK_FOREIGN)
			continue;
		if (a->guid < s->bad[i].first || a->guid > s->bad[i].last)
			continue;
		s->hits++;
		log_err("cluster conflict: GUID %s of %s/%s (PCI %s) is live here but its block "
			"%016" PRIx64 " is %s%s%s: it may be live on another node too",
			ibvf_guid_format(a->guid, g), a->owner.container_id, a->owner.ifname,
			a->pci[0] ? a->pci : "-", s->bad[i].first,
			lost ? "no longer claimed in etcd" : "owned by node ", s->bad[i].owner, "");
		conflict_add(s->conflicts, a, s->bad[i].first, lost ? "" : s->bad[i].owner,
			     lost ? "block reclaimed while this node was away"
				  : "block owned by another node");
	}
	return 0;
}

/*
 * Adoption (docs/cluster.md): a GUID this node already uses (a store record,
 * a VF carrying it) that lies in the configured ranges but outside its blocks
 * and reservations is made its own in etcd before it serves prepare: its
 * block claimed if nobody ever had it, else the GUID reserved alone; what
 * cannot be had is a conflict (reported, never handed out here: it stays
 * outside the node's ranges).
 */
struct adopt {
	struct cluster_blocks *b;
	const struct cluster_range *ranges; /* configured */
	size_t n_ranges;
	const struct cluster_block_check *bad; /* lost and foreign blocks: conflicts already */
	size_t n_bad;
	struct held *held; /* the node's blocks, added to */
	struct held added; /* blocks adopted by this pass */
	struct u64v *resv; /* the node's reservations, added to */
	json_t *conflicts; /* added to */
	size_t n_blocks, n_reserved, n_conflicts;
	const char *node;
};

static void adopt_one(struct adopt *ad, const struct ibvf_alloc *a, const char *source)
{
	char err[IBVF_ERR_LEN], owner[CLUSTER_NODE_MAX + 1] = "", g[IBVF_GUID_STR_LEN];
	struct cluster_block blk;
	uint64_t first = 0, last = 0;
	bool live = a->state != IBVF_ALLOC_QUARANTINED, in = false;
	int ret;

	for (size_t i = 0; !in && i < ad->n_ranges; i++)
		in = a->guid >= ad->ranges[i].start && a->guid <= ad->ranges[i].end;
	if (!in || held_has(ad->held, a->guid) || u64v_has(ad->resv, a->guid))
		return;
	for (size_t i = 0; i < ad->n_bad; i++)
		if (a->guid >= ad->bad[i].first && a->guid <= ad->bad[i].last)
			return;
	ibvf_guid_format(a->guid, g);
	cluster_block_of(ad->b, a->guid, &first, &last);
	ret = cluster_block_claim_at(ad->b, a->guid, &blk, owner, sizeof(owner), err, sizeof(err));
	if (!ret) {
		ret = held_add(ad->held, blk.first, blk.last);
		if (!ret)
			ret = held_add(&ad->added, blk.first, blk.last);
		if (!ret) {
			ad->n_blocks++;
			log_notice("cluster: node %s adopted block %016" PRIx64 "..%016" PRIx64
				   " for GUID %s (%s)",
				   ad->node, blk.first, blk.last, g, source);
			return;
		}
		snprintf(err, sizeof(err), "out of memory");
	} else if (ret == -ENOTEMPTY) {
		ret = cluster_guid_reserve(ad->b, a->guid, owner, sizeof(owner), err, sizeof(err));
		if (!ret)
			ret = u64v_add(ad->resv, a->guid, false);
		if (!ret) {
			ad->n_reserved++;
			log_notice("cluster: node %s adopted GUID %s as a reservation (%s)",
				   ad->node, g, source);
			return;
		}
	}
	if (!live) {
		log_warn("cluster: node %s: quarantined GUID %s not adopted (%s): %s", ad->node, g,
			 source, err);
		return;
	}
	ad->n_conflicts++;
	log_err("cluster conflict: GUID %s (%s) is live here but could not be adopted: %s; "
		"it is never handed out here, and may be live on another node too",
		g, source, err);
	conflict_add(ad->conflicts, a, first, owner, err);
	if (!a->owner.container_id[0]) /* a VF's, no record: not dropped by the sweep */
		json_object_set_new(
			json_array_get(ad->conflicts, json_array_size(ad->conflicts) - 1), "vf",
			json_true());
}

static int adopt_cb(void *arg, const struct ibvf_alloc *a)
{
	char src[256];

	snprintf(src, sizeof(src), "store record of %.64s/%s", a->owner.container_id,
		 a->owner.ifname);
	adopt_one(arg, a, src);
	return 0;
}

/* The store's records against etcd, before the pool opens (read-only look). */
static int adopt_store(struct adopt *ad, const struct ibvf_pool_opts *o, char *err, size_t errlen)
{
	struct ibvf_pool_opts ro = *o;
	struct ibvf_pool_filter f = {.pkey = -1, .include_quarantined = true};
	struct ibvf_pool *p = NULL;
	int ret;

	ro.read_only = true;
	ret = ibvf_pool_open(&ro, &p, err, errlen);
	if (ret == -ENOENT)
		return 0; /* no store yet: nothing to adopt */
	if (ret)
		return ret;
	ret = ibvf_pool_list(p, &f, adopt_cb, ad, err, errlen);
	ibvf_pool_close(p);
	return ret;
}

static int open_pool(const struct ibvf_pool_opts *o, const struct held *h,
		     struct ibvf_guid_range **ranges, size_t *n, struct ibvf_pool **out, char *err,
		     size_t errlen)
{
	struct ibvf_pool_opts po = *o;
	int ret = to_ranges(h, ranges, n);

	if (ret)
		return ibvf_errf(err, errlen, ret, "out of memory");
	po.ranges = *ranges;
	po.n_ranges = *n;
	return ibvf_pool_open(&po, out, err, errlen);
}

int ibvf_cluster_local_ranges(const struct ibvf_config *cfg, struct ibvf_guid_range **out,
			      size_t *n, char *err, size_t errlen)
{
	struct held h = {0};
	char path[4096];
	int ret;

	*out = NULL;
	*n = 0;
	snprintf(path, sizeof(path), "%s/%s", cfg->state_dir, IBVF_CLUSTER_BLOCKS_FILE);
	ret = file_read(path, &cfg->pool.cluster, &h, NULL, err, errlen);
	if (!ret && !h.n)
		ret = ibvf_errf(err, errlen, -ENOENT,
				"%s: no GUID block recorded (ibvfd has not started in cluster "
				"mode here)",
				path);
	if (!ret) {
		qsort(h.v, h.n, sizeof(*h.v), cmp_range);
		ret = to_ranges(&h, out, n);
		if (ret)
			ret = ibvf_errf(err, errlen, ret, "out of memory");
	}
	free(h.v);
	return ret;
}

struct vf_list {
	struct ibvf_attach_vf *v;
	size_t n, cap;
};

static int vf_list_cb(void *arg, const struct ibvf_attach_vf *vf)
{
	struct vf_list *l = arg;

	if (!vf->guids_known)
		return 0;
	if (l->n == l->cap) {
		size_t c = l->cap ? l->cap * 2 : 32;
		struct ibvf_attach_vf *nv = realloc(l->v, c * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		l->v = nv;
		l->cap = c;
	}
	l->v[l->n++] = *vf;
	return 0;
}

int ibvf_cluster_adopt_vfs(struct ibvf_cluster_hb *h, const struct ibvf_vf_ops *vf, char *err,
			   size_t errlen)
{
	struct ibvf_cluster_config k = {.node = h->node, .prefix = h->prefix};
	struct vf_list l = {0};
	struct held hd = {0};
	struct u64v resv = {0};
	json_t *conflicts = json_array();
	struct adopt ad = {0};
	int ret;

	if (!conflicts)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	ret = vf->list(vf->ctx, vf_list_cb, &l, err, errlen);
	pthread_mutex_lock(&h->attach_mu);
	pthread_mutex_lock(&h->mu);
	ad.b = h->b; /* set by the thread under mu */
	pthread_mutex_unlock(&h->mu);
	if (ret || !h->pool || !ad.b) {
		if (!ret && l.n)
			log_warn("cluster: node %s: the GUIDs its VFs carry are not adopted (etcd "
				 "has not answered since start-up)",
				 h->node);
		goto out;
	}
	/* work on copies: the etcd calls run without the thread's locks */
	pthread_mutex_lock(&h->mu);
	ret = -ENOMEM;
	hd.v = calloc(h->n_held + 1, sizeof(*hd.v));
	if (hd.v) {
		memcpy(hd.v, h->held, h->n_held * sizeof(*hd.v));
		hd.n = hd.cap = h->n_held;
		ret = 0;
	}
	/* the VF conflicts of the last start are looked at again */
	for (size_t i = 0; !ret && i < json_array_size(h->conflicts);)
		if (json_is_true(json_object_get(json_array_get(h->conflicts, i), "vf")))
			json_array_remove(h->conflicts, i);
		else
			i++;
	pthread_mutex_unlock(&h->mu);
	pthread_mutex_lock(&h->resv_mu);
	for (size_t i = 0; !ret && i < h->resv.n; i++)
		ret = u64v_add(&resv, h->resv.v[i], false);
	pthread_mutex_unlock(&h->resv_mu);
	if (ret) {
		ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		goto out;
	}
	ad = (struct adopt){.b = ad.b,
			    .ranges = h->ranges,
			    .n_ranges = h->bo.n_ranges,
			    .held = &hd,
			    .resv = &resv,
			    .conflicts = conflicts,
			    .node = h->node};
	for (size_t i = 0; i < l.n; i++) {
		uint64_t gs[2] = {l.v[i].port_guid, l.v[i].node_guid};
		char src[128];

		for (int k2 = 0; k2 < 2; k2++) {
			struct ibvf_alloc a = {.guid = gs[k2], .state = IBVF_ALLOC_HANDED}, rec;

			if (!gs[k2] || (k2 && gs[1] == gs[0]) || !ibvf_guid_is_assignable(gs[k2]) ||
			    !ibvf_pool_get(h->pool, gs[k2], &rec, err, errlen))
				continue; /* a record holds it: the store's adoption decided */
			snprintf(a.pci, sizeof(a.pci), "%s", l.v[i].pci);
			snprintf(src, sizeof(src),
				 "carried by VF %s (PF %s VF %d) without a record", l.v[i].pci,
				 l.v[i].pf, l.v[i].vf_index);
			adopt_one(&ad, &a, src);
		}
	}
	ret = 0;
	/* hand the adopted blocks over as a claim would: file, engine, pool */
	pthread_mutex_lock(&h->mu);
	for (size_t i = 0; !ret && i < ad.added.n; i++) {
		struct held cur = {.v = h->held, .n = h->n_held, .cap = h->cap_held};

		ret = held_add(&cur, ad.added.v[i].start, ad.added.v[i].end);
		if (!ret)
			qsort(cur.v, cur.n, sizeof(*cur.v), cmp_range);
		h->held = cur.v;
		h->n_held = cur.n;
		h->cap_held = cur.cap;
	}
	json_array_extend(h->conflicts, conflicts);
	if (!ret && (ad.added.n || json_array_size(conflicts))) {
		struct held cur = {.v = h->held, .n = h->n_held, .cap = h->cap_held};

		ret = file_write(h->path, &k, &cur, h->conflicts, err, errlen);
	}
	pthread_mutex_unlock(&h->mu);
	for (size_t i = 0; !ret && i < ad.added.n; i++) {
		ret = h->add_range
			      ? h->add_range(h->add_arg, ad.added.v[i].start, ad.added.v[i].end)
			      : 0;
		if (!ret)
			ret = ibvf_pool_add_range(h->pool, ad.added.v[i].start, ad.added.v[i].end,
						  err, errlen);
	}
	pthread_mutex_lock(&h->resv_mu);
	for (size_t i = 0; !ret && i < resv.n; i++)
		ret = u64v_add(&h->resv, resv.v[i], false);
	pthread_mutex_unlock(&h->resv_mu);
	if (ad.n_blocks || ad.n_reserved || ad.n_conflicts)
		log_notice("cluster: node %s adoption of its VFs' GUIDs: %zu blocks claimed, %zu "
			   "GUIDs reserved, %zu conflicts",
			   h->node, ad.n_blocks, ad.n_reserved, ad.n_conflicts);
out:
	pthread_mutex_unlock(&h->attach_mu);
	free(l.v);
	free(hd.v);
	free(ad.added.v);
	free(resv.v);
	json_decref(conflicts);
	return ret;
}

int ibvf_cluster_local_conflicts(const struct ibvf_config *cfg, json_t **out, char *err,
				 size_t errlen)
{
	struct held h = {0};
	char path[4096];
	int ret;

	*out = json_array();
	if (!*out)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	snprintf(path, sizeof(path), "%s/%s", cfg->state_dir, IBVF_CLUSTER_BLOCKS_FILE);
	ret = file_read(path, &cfg->pool.cluster, &h, *out, err, errlen);
	free(h.v);
	if (ret) {
		json_decref(*out);
		*out = NULL;
	}
	return ret;
}

int ibvf_cluster_etcd_new(const struct ibvf_cluster_config *k, struct etcd_client **out, char *err,
			  size_t errlen)
{
	struct etcd_client_opts o = {
		.endpoints = (const char *const *)k->endpoints,
		.n_endpoints = k->n_endpoints,
		.ca_file = k->ca_file,
		.cert_file = k->cert_file,
		.key_file = k->key_file,
		.user = k->user,
		.user_file = k->user_file,
		.password_file = k->password_file,
		.timeout_ms = k->timeout_ms,
	};

	return etcd_client_new(&o, out, err, errlen);
}

int ibvf_cluster_pool_open(struct ibvf_config *cfg, const struct ibvf_pool_opts *o,
			   struct ibvf_pool **out, struct ibvf_cluster_hb **hb, char *err,
			   size_t errlen)
{
	const struct ibvf_cluster_config *k = &cfg->pool.cluster;
	struct cluster_range *ranges = calloc(cfg->pool.n_ranges + 1, sizeof(*ranges));
	struct cluster_block_check *chk = NULL;
	struct ibvf_guid_range *pr = NULL;
	struct etcd_client *etcd = NULL;
	struct cluster_blocks *b = NULL;
	struct held h = {0};
	struct u64v resv = {0};
	json_t *conflicts = json_array();
	struct cluster_blocks_opts bo = {
		.prefix = k->prefix,
		.node = k->node,
		.ranges = ranges,
		.n_ranges = cfg->pool.n_ranges,
		.block_size = k->block_size,
		.quarantine_s = cfg->pool.quarantine_s,
	};
	char path[4096], why[IBVF_ERR_LEN] = "";
	size_t n_chk = 0, n_pr = 0;
	bool online = false;
	int ret;

	*out = NULL;
	*hb = NULL;
	if (!ranges || !conflicts) {
		free(ranges);
		json_decref(conflicts);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < cfg->pool.n_ranges; i++) {
		ranges[i].start = cfg->pool.ranges[i].start;
		ranges[i].end = cfg->pool.ranges[i].end;
	}
	snprintf(path, sizeof(path), "%s/%s", cfg->state_dir, IBVF_CLUSTER_BLOCKS_FILE);
	ret = file_read(path, k, &h, conflicts, err, errlen);
	if (ret)
		goto out;
	{
		ret = ibvf_cluster_etcd_new(k, &etcd, err, errlen);
		if (ret)
			goto out;
		bo.etcd = etcd;
		ret = cluster_blocks_open(&bo, &b, why, sizeof(why));
		if (ret == -EEXIST || ret == -EINVAL) {
			snprintf(err, errlen, "%s", why);
			goto out;
		}
		online = ret == 0;
	}
	if (online) {
		uint64_t *firsts = calloc(h.n + 1, sizeof(*firsts));
		struct held keep = {0};

		if (!firsts) {
			ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
			goto out;
		}
		for (size_t i = 0; i < h.n; i++)
			firsts[i] = h.v[i].start;
		ret = cluster_blocks_verify(b, firsts, h.n, &chk, &n_chk, why, sizeof(why));
		free(firsts);
		if (ret >= 0) {
			/* the node's reservations: deleted once their GUID has no record */
			ret = cluster_guid_reservations(b, k->node, &resv.v, &resv.n, why,
							sizeof(why));
			resv.cap = resv.n;
		}
		if (ret < 0) {
			online = false;
			ret = 0;
		} else {
			ret = 0; /* the count of blocks not owned: logged by the check */
			for (size_t i = 0; !ret && i < n_chk; i++)
				if (chk[i].state == CLUSTER_BLOCK_OWNED ||
				    chk[i].state == CLUSTER_BLOCK_UNLISTED)
					ret = held_add(&keep, chk[i].first, chk[i].last);
			if (ret) {
				free(keep.v);
				ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
				goto out;
			}
			free(h.v);
			h = keep;
		}
	}
	if (online) {
		/* adoption: the store's GUIDs of the ranges become this node's first */
		struct adopt ad = {.b = b,
				   .ranges = ranges,
				   .n_ranges = cfg->pool.n_ranges,
				   .bad = chk,
				   .n_bad = n_chk,
				   .held = &h,
				   .resv = &resv,
				   .conflicts = conflicts,
				   .node = k->node};

		ret = adopt_store(&ad, o, err, errlen);
		free(ad.added.v);
		if (ret)
			goto out;
		if (ad.n_blocks || ad.n_reserved || ad.n_conflicts)
			log_notice(
				"cluster: node %s adoption of its store: %zu blocks claimed, %zu "
				"GUIDs reserved, %zu conflicts",
				k->node, ad.n_blocks, ad.n_reserved, ad.n_conflicts);
	}
	if (!online) {
		if (!h.n) {
			ret = ibvf_errf(err, errlen, -EIO,
					"cluster: node %s holds no GUID block and etcd is "
					"unreachable: %s",
					k->node, why);
			goto out;
		}
		log_warn("cluster: etcd unreachable (%s): node %s goes on with the %zu blocks of "
			 "%s; no new block until etcd answers",
			 why, k->node, h.n, path);
	}
	if (h.n) /* (no block yet: h.v is NULL, and qsort(NULL, 0, ...) is undefined) */
		qsort(h.v, h.n, sizeof(*h.v), cmp_range);
	if (online && (ret = file_write(path, k, &h, conflicts, err, errlen)))
		goto out;
	for (int claims = 0;; claims++) {
		struct ibvf_pool_stats st = {0};
		struct cluster_block blk;

		if (h.n) {
			free(pr);
			pr = NULL;
			ret = open_pool(o, &h, &pr, &n_pr, out, err, errlen);
			if (ret)
				goto out;
			ret = ibvf_pool_stats(*out, &st, err, errlen);
			if (ret)
				goto out;
			if (!online || st.free >= k->low_watermark || claims >= MAX_START_CLAIMS)
				break;
			ibvf_pool_close(*out);
			*out = NULL;
		}
		/* claim ahead of need: recorded in the file before the pool sees it */
		ret = cluster_blocks_claim(b, &blk, why, sizeof(why));
		if (ret) {
			if (h.n) {
				log_warn("cluster: node %s: no further block (%s); %" PRIu64
					 " GUIDs free",
					 k->node, why, st.free);
				free(pr);
				pr = NULL;
				ret = open_pool(o, &h, &pr, &n_pr, out, err, errlen);
				break;
			}
			snprintf(err, errlen, "%s", why);
			goto out;
		}
		ret = held_add(&h, blk.first, blk.last);
		if (!ret) {
			qsort(h.v, h.n, sizeof(*h.v), cmp_range);
			ret = file_write(path, k, &h, conflicts, err, errlen);
		}
		if (ret)
			goto out;
	}
	if (ret)
		goto out;
	if (n_chk) {
		struct conflict_scan s = {.bad = chk, .n_bad = n_chk, .conflicts = conflicts};
		struct ibvf_pool_filter f = {.pkey = -1};

		ibvf_pool_list(*out, &f, conflict_cb, &s, why, sizeof(why));
		if (s.hits)
			log_err("cluster: node %s: %zu live attachment(s) in blocks it no longer "
				"owns (docs/cluster.md)",
				k->node, s.hits);
	}
	if (json_array_size(conflicts) && file_write(path, k, &h, conflicts, why, sizeof(why)) &&
	    online)
		log_warn("cluster: %s", why);
	/* the engine's pool GUIDs are this node's blocks (reconciliation) */
	free(cfg->pool.ranges);
	cfg->pool.ranges = pr;
	cfg->pool.n_ranges = n_pr;
	pr = NULL;
	log_info("cluster: node %s allocates from %zu blocks (%zu ranges) of %s, %zu requested "
		 "GUIDs reserved, %zu conflicts",
		 k->node, h.n, cfg->pool.n_ranges, k->prefix, resv.n, json_array_size(conflicts));
	/* the client (and blocks, when etcd answered) go to the heartbeat thread */
	ret = hb_start(etcd, b, &bo, cfg, &h, &resv, conflicts, path, hb, err, errlen);
	if (!ret) {
		etcd = NULL;
		b = NULL;
	}
out:
	if (ret && *out) {
		ibvf_pool_close(*out);
		*out = NULL;
	}
	free(pr);
	free(chk);
	free(h.v);
	free(resv.v);
	json_decref(conflicts);
	free(ranges);
	cluster_blocks_free(b);
	etcd_client_free(etcd);
	return ret;
}
