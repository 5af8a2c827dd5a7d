// SPDX-License-Identifier: MIT
/*
 * `ibvfctl cluster status|blocks|nodes|reclaim-node` (the built binary,
 * argv[1]) against a real 3-member etcd on loopback, with blocks claimed and
 * a heartbeat kept through daemon/cluster/ as two nodes would.
 */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "err.h"
#include "etcd_client.h"
#include "etcd_lab.h"
#include "guid_blocks.h"

static int failures, checks;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		checks++;                                                                          \
		if (cond) {                                                                        \
			printf("ok %d - ", checks);                                                \
		} else {                                                                           \
			failures++;                                                                \
			printf("not ok %d - (%s:%d) ", checks, __FILE__, __LINE__);                \
		}                                                                                  \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
		fflush(stdout);                                                                    \
	} while (0)

static struct etcd_lab lab;
static const char *ibvfctl;
static char config[PATH_MAX];
static char out[65536], errout[8192];

/* Run ibvfctl --config CONFIG ARGS...; stdout into out, stderr into errout. */
static int ctl(const char *const *args)
{
	const char *argv[16] = {ibvfctl, "--config", config};
	int po[2], pe[2], st, n = 3;
	ssize_t r;
	size_t lo = 0, le = 0;
	pid_t pid;

	for (const char *const *a = args; *a && n < 15; a++)
		argv[n++] = *a;
	argv[n] = NULL;
	if (pipe(po) || pipe(pe))
		return -1;
	pid = fork();
	if (!pid) {
		dup2(po[1], 1);
		dup2(pe[1], 2);
		close(po[0]);
		close(pe[0]);
		execv(ibvfctl, (char *const *)argv);
		_exit(127);
	}
	close(po[1]);
	close(pe[1]);
	while ((r = read(po[0], out + lo, sizeof(out) - 1 - lo)) > 0)
		lo += (size_t)r;
	while ((r = read(pe[0], errout + le, sizeof(errout) - 1 - le)) > 0)
		le += (size_t)r;
	out[lo] = errout[le] = '\0';
	close(po[0]);
	close(pe[0]);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int open_node(const char *name, struct etcd_client **c, struct cluster_blocks **b)
{
	static const struct cluster_range r = {0x0200000000000001ull, 0x0200000000000040ull};
	struct etcd_client_opts eo = {.endpoints = lab.urls, .n_endpoints = 3};
	struct cluster_blocks_opts o = {.prefix = "/ctl/",
					.node = name,
					.ranges = &r,
					.n_ranges = 1,
					.block_size = 16,
					.quarantine_s = 60};
	char err[IBVF_ERR_LEN];
	int ret = etcd_client_new(&eo, c, err, sizeof(err));

	o.etcd = *c;
	ret = ret ? ret : cluster_blocks_open(&o, b, err, sizeof(err));
	if (ret)
		printf("# open %s: %s\n", name, err);
	return ret;
}

static json_t *row_of(json_t *rows, const char *node)
{
	size_t i;
	json_t *it;

	json_array_foreach(rows, i, it)
	{
		const char *n = json_string_value(json_object_get(it, "node"));

		if (n && !strcmp(n, node))
			return it;
	}
	return NULL;
}

int main(int argc, char **argv)
{
	const char *missing = etcd_lab_missing();
	struct etcd_client *ca = NULL, *cb = NULL;
	struct cluster_blocks *ba = NULL, *bb = NULL;
	struct cluster_block blk;
	char err[IBVF_ERR_LEN], text[2048];
	int64_t lease = 0;
	json_t *j;
	int rc;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc != 2) {
		fprintf(stderr, "usage: %s IBVFCTL\n", argv[0]);
		return 2;
	}
	ibvfctl = argv[1];
	if (missing)
		return etcd_lab_skip(missing);
	if (etcd_lab_start(&lab, 3, err, sizeof(err))) {
		fprintf(stderr, "FAIL: %s\n", err);
		etcd_lab_stop(&lab);
		return 1;
	}
	snprintf(text, sizeof(text),
		 "{\"state_dir\": \"%s/state\", \"run_dir\": \"%s/run\", "
		 "\"pool\": {\"ranges\": [{\"start\": \"02:00:00:00:00:00:00:01\", \"end\": "
		 "\"02:00:00:00:00:00:00:40\"}], \"quarantine_s\": 60, \"cluster\": "
		 "{\"endpoints\": [\"%s\", \"%s\", \"%s\"], \"prefix\": \"/ctl/\", \"node\": "
		 "\"node-a\", \"block_size\": 16, \"low_watermark\": 4, "
		 "\"timeout_ms\": 1000}}}",
		 lab.dir, lab.dir, lab.urls[0], lab.urls[1], lab.urls[2]);
	etcd_lab_write_file(&lab, "ibvfd.json", text, 0644, config, sizeof(config));

	/* node-a: 2 blocks and a heartbeat; node-b: 1 block, gone (no heartbeat) */
	if (open_node("node-a", &ca, &ba) || open_node("node-b", &cb, &bb)) {
		etcd_lab_stop(&lab);
		return 1;
	}
	cluster_blocks_claim(ba, &blk, err, sizeof(err));
	cluster_blocks_claim(ba, &blk, err, sizeof(err));
	cluster_blocks_claim(bb, &blk, err, sizeof(err));
	cluster_node_heartbeat(ba, 60, &lease, err, sizeof(err));

	rc = ctl((const char *[]){"--json", "cluster", "status", NULL});
	j = json_loads(out, 0, NULL);
	CHECK(rc == 0 && j && !strcmp(json_string_value(json_object_get(j, "node")), "node-a") &&
		      json_integer_value(json_object_get(j, "blocks_total")) == 4 &&
		      json_integer_value(json_object_get(j, "blocks_claimed")) == 3 &&
		      json_integer_value(json_object_get(j, "node_blocks")) == 2 &&
		      !strcmp(json_string_value(json_object_get(j, "node_alive")), "alive"),
	      "cluster status --json: node-a, 4 blocks, 3 claimed, 2 its own, alive (rc %d) %s", rc,
	      errout);
	json_decref(j);

	rc = ctl((const char *[]){"--json", "cluster", "blocks", NULL});
	j = json_loads(out, 0, NULL);
	CHECK(rc == 0 && json_array_size(j) == 3 &&
		      json_integer_value(json_object_get(json_array_get(j, 0), "size")) == 16,
	      "cluster blocks --json: 3 blocks of 16 (rc %d)", rc);
	json_decref(j);
	rc = ctl((const char *[]){"--json", "cluster", "blocks", "--node", "node-b", NULL});
	j = json_loads(out, 0, NULL);
	CHECK(rc == 0 && json_array_size(j) == 1, "cluster blocks --node node-b: 1 (rc %d)", rc);
	json_decref(j);
	rc = ctl((const char *[]){"cluster", "blocks", NULL});
	CHECK(rc == 0 && strstr(out, "First GUID") && strstr(out, "node-b") &&
		      strstr(out, "02:00:00:00:00:00:00:"),
	      "cluster blocks as a table");

	rc = ctl((const char *[]){"--json", "cluster", "nodes", NULL});
	j = json_loads(out, 0, NULL);
	{
		json_t *a = row_of(j, "node-a"), *b = row_of(j, "node-b");

		CHECK(rc == 0 && a && b &&
			      !strcmp(json_string_value(json_object_get(a, "heartbeat")),
				      "alive") &&
			      !strcmp(json_string_value(json_object_get(b, "heartbeat")), "none") &&
			      json_integer_value(json_object_get(a, "blocks")) == 2 &&
			      json_integer_value(json_object_get(a, "guids")) == 32,
		      "cluster nodes --json: node-a alive with 2 blocks (32 GUIDs), node-b none");
	}
	json_decref(j);

	rc = ctl((const char *[]){"cluster", "reclaim-node", "node-a", NULL});
	CHECK(rc == 3 && strstr(errout, "2 blocks (32 GUIDs)") && strstr(errout, "live heartbeat"),
	      "reclaim-node of a live node: exit 3, says what it would free (%s)", errout);
	rc = ctl((const char *[]){"cluster", "reclaim-node", "nobody", NULL});
	CHECK(rc == 2 && strstr(errout, "no node 'nobody'"), "reclaim-node of an unknown node: "
							     "exit 2");
	rc = ctl((const char *[]){"--json", "cluster", "reclaim-node", "node-b", NULL});
	j = json_loads(out, 0, NULL);
	CHECK(rc == 0 && json_integer_value(json_object_get(j, "blocks_freed")) == 1 &&
		      strstr(errout, "1 blocks (16 GUIDs)"),
	      "reclaim-node of a gone node: exit 0, 1 block freed (%s)", errout);
	json_decref(j);
	rc = ctl((const char *[]){"--json", "cluster", "reclaim-node", "--force", "node-a", NULL});
	j = json_loads(out, 0, NULL);
	CHECK(rc == 0 && json_integer_value(json_object_get(j, "blocks_freed")) == 2,
	      "reclaim-node --force of a live node: 2 blocks freed");
	json_decref(j);
	rc = ctl((const char *[]){"--json", "cluster", "status", NULL});
	j = json_loads(out, 0, NULL);
	CHECK(rc == 0 && json_integer_value(json_object_get(j, "blocks_claimed")) == 0,
	      "no block claimed any more");
	json_decref(j);

	/* ibvfctl pool with ibvfd down: the node's recorded blocks, never the whole ranges */
	rc = ctl((const char *[]){"pool", "allocate", "--owner", "c1", NULL});
	CHECK(rc == 2 && strstr(errout, "cluster-blocks.json"),
	      "pool allocate offline before ibvfd recorded blocks: refused, exit 2 (%.160s)",
	      errout);
	{
		char sd[PATH_MAX], f[PATH_MAX + 32];
		FILE *fp;

		snprintf(sd, sizeof(sd), "%s/state", lab.dir);
		mkdir(sd, 0700);
		snprintf(f, sizeof(f), "%s/cluster-blocks.json", sd);
		fp = fopen(f, "w");
		if (fp) {
			fprintf(fp, "{\"node\": \"node-a\", \"prefix\": \"/ctl/\", \"blocks\": "
				    "[[\"0200000000000021\", \"0200000000000030\"]]}");
			fclose(fp);
		}
	}
	rc = ctl((const char *[]){"--json", "pool", "allocate", "--owner", "c1", NULL});
	j = json_loads(out, 0, NULL);
	CHECK(rc == 0 && j && strstr(out, "02:00:00:00:00:00:00:21"),
	      "pool allocate offline: the first GUID of the node's block, not of the ranges "
	      "(rc %d: %.120s %.200s)",
	      rc, out, errout);
	json_decref(j);
	rc = ctl((const char *[]){"--json", "pool", "status", NULL});
	CHECK(rc == 0 && strstr(out, "\"total\": 16"),
	      "pool status counts the node's 16 GUIDs "
	      "(%.200s)",
	      out);

	etcd_lab_member_stop(&lab, 0, true);
	etcd_lab_member_stop(&lab, 1, true);
	etcd_lab_member_stop(&lab, 2, true);
	rc = ctl((const char *[]){"cluster", "status", NULL});
	CHECK(rc == 3 && strstr(errout, lab.urls[0]) && strstr(errout, lab.urls[2]),
	      "etcd down: exit 3, the endpoints tried are named (%.200s)", errout);

	cluster_blocks_free(ba);
	cluster_blocks_free(bb);
	etcd_client_free(ca);
	etcd_client_free(cb);
	etcd_lab_stop(&lab);
	printf("1..%d\n# %d failure(s)\n", checks, failures);
	return failures ? 1 : 0;
}
