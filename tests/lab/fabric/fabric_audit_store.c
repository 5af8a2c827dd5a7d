// SPDX-License-Identifier: MIT
/*
 * fabric_audit_store - lab tool: write GUID pool records in a chosen attach
 * state, so that the fabric audit lab (test-fabric-audit.sh) has owners
 * whose requests the ports must show (`ibvfctl pool allocate` only makes
 * ALLOCATED records; an attach to HANDED needs the whole daemon).
 *
 *   fabric_audit_store STATE_DIR FIRST LAST RECORD...
 *     FIRST, LAST: the pool range (GUIDs); RECORD: GUID/PKEY[+PKEY...]/POD/STATE
 *     e.g. 0x0002c90300100001/0x8a01/tenant-a/handed ("-" for no PKey);
 *     STATE: an attach state name (ibvf_alloc_state_parse(): allocated,
 *     handed, quarantined, ...). The POD is namespace "lab", the container
 *     ID "c-POD-N".
 *   fabric_audit_store --claim CONFIG NODE COUNT
 *     claim COUNT cluster GUID blocks in etcd for node NODE (another node
 *     than this one), with the pool.cluster and pool.ranges of CONFIG.
 * Exit 0 ok, 1 failure, 2 usage.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ibvf/types.h>

#include "cluster_pool.h"
#include "config.h"
#include "err.h"
#include "etcd_client.h"
#include "guid_blocks.h"
#include "guid_pool.h"

extern char **environ;

static int claim(const char *config, const char *node, int count)
{
	struct ibvf_config cfg;
	struct etcd_client *etcd = NULL;
	struct cluster_blocks *b = NULL;
	struct cluster_range r[16];
	char err[IBVF_ERR_LEN];
	int ret = 1;

	if (ibvf_config_load(&cfg, config, true, environ, err, sizeof(err))) {
		fprintf(stderr, "config: %s\n", err);
		return 2;
	}
	if (!cfg.pool.cluster.enabled || cfg.pool.n_ranges > 16) {
		fprintf(stderr, "config: no pool.cluster, or more than 16 ranges\n");
		ibvf_config_free(&cfg);
		return 2;
	}
	for (size_t i = 0; i < cfg.pool.n_ranges; i++)
		r[i] = (struct cluster_range){cfg.pool.ranges[i].start, cfg.pool.ranges[i].end};
	if (ibvf_cluster_etcd_new(&cfg.pool.cluster, &etcd, err, sizeof(err))) {
		fprintf(stderr, "etcd: %s\n", err);
		goto out;
	}
	{
		struct cluster_blocks_opts o = {.etcd = etcd,
						.prefix = cfg.pool.cluster.prefix,
						.node = node,
						.ranges = r,
						.n_ranges = cfg.pool.n_ranges,
						.block_size = cfg.pool.cluster.block_size,
						.quarantine_s = cfg.pool.quarantine_s};

		if (cluster_blocks_open(&o, &b, err, sizeof(err))) {
			fprintf(stderr, "cluster blocks: %s\n", err);
			goto out;
		}
	}
	for (int i = 0; i < count; i++) {
		struct cluster_block blk;

		if (cluster_blocks_claim(b, &blk, err, sizeof(err))) {
			fprintf(stderr, "claim: %s\n", err);
			goto out;
		}
		printf("0x%016llx 0x%016llx %s\n", (unsigned long long)blk.first,
		       (unsigned long long)blk.last, blk.node);
	}
	ret = 0;
out:
	cluster_blocks_free(b);
	etcd_client_free(etcd);
	ibvf_config_free(&cfg);
	return ret;
}

int main(int argc, char **argv)
{
	struct ibvf_guid_range r;
	struct ibvf_pool_opts o = {0};
	struct ibvf_pool *p;
	char err[IBVF_ERR_LEN];

	if (argc == 5 && !strcmp(argv[1], "--claim"))
		return claim(argv[2], argv[3], atoi(argv[4]));
	if (argc < 4) {
		fprintf(stderr, "usage: %s STATE_DIR FIRST LAST GUID/PKEY[+PKEY]/POD/STATE...\n",
			argv[0]);
		return 2;
	}
	if (ibvf_guid_parse(argv[2], &r.start, err, sizeof(err)) ||
	    ibvf_guid_parse(argv[3], &r.end, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	o.state_dir = argv[1];
	o.ranges = &r;
	o.n_ranges = 1;
	o.quarantine_s = 3600;
	if (ibvf_pool_open(&o, &p, err, sizeof(err))) {
		fprintf(stderr, "open: %s\n", err);
		return 1;
	}
	for (int i = 4; i < argc; i++) {
		char buf[512], *guid_s, *pkeys_s, *pod, *state_s, *save = NULL;
		struct ibvf_alloc_request req = {.vf_index = -1};
		struct ibvf_alloc a;
		uint16_t pkeys[IBVF_POOL_MAX_PKEYS];
		size_t n = 0;
		int st;

		snprintf(buf, sizeof(buf), "%s", argv[i]);
		guid_s = strtok_r(buf, "/", &save);
		pkeys_s = strtok_r(NULL, "/", &save);
		pod = strtok_r(NULL, "/", &save);
		state_s = strtok_r(NULL, "/", &save);
		st = state_s ? ibvf_alloc_state_parse(state_s) : -1;
		if (!pod || st < 0 || ibvf_guid_parse(guid_s, &req.guid, err, sizeof(err))) {
			fprintf(stderr, "bad record '%s'\n", argv[i]);
			ibvf_pool_close(p);
			return 2;
		}
		for (char *k = strcmp(pkeys_s, "-") ? strtok_r(pkeys_s, "+", &save) : NULL;
		     k && n < IBVF_POOL_MAX_PKEYS; k = strtok_r(NULL, "+", &save))
			if (ibvf_pkey_parse(k, &pkeys[n++], err, sizeof(err))) {
				fprintf(stderr, "bad PKey '%s': %s\n", k, err);
				ibvf_pool_close(p);
				return 2;
			}
		snprintf(req.owner.container_id, sizeof(req.owner.container_id), "c-%s-%d", pod, i);
		snprintf(req.owner.ifname, sizeof(req.owner.ifname), "net1");
		snprintf(req.owner.pod_namespace, sizeof(req.owner.pod_namespace), "lab");
		snprintf(req.owner.pod_name, sizeof(req.owner.pod_name), "%s", pod);
		req.pkeys = pkeys;
		req.n_pkeys = n;
		if (ibvf_pool_allocate(p, &req, &a, err, sizeof(err))) {
			fprintf(stderr, "allocate %s: %s\n", argv[i], err);
			ibvf_pool_close(p);
			return 1;
		}
		if (st == IBVF_ALLOC_QUARANTINED) {
			if (ibvf_pool_release(p, a.guid, err, sizeof(err))) {
				fprintf(stderr, "release %s: %s\n", argv[i], err);
				ibvf_pool_close(p);
				return 1;
			}
			continue;
		}
		a.state = (enum ibvf_alloc_state)st;
		if (ibvf_pool_update(p, &a, err, sizeof(err))) {
			fprintf(stderr, "update %s: %s\n", argv[i], err);
			ibvf_pool_close(p);
			return 1;
		}
	}
	ibvf_pool_close(p);
	return 0;
}
