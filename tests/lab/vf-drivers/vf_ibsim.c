// SPDX-License-Identifier: MIT
/*
 * The ibsim lab VF driver. No kernel here implements VF GUIDs, so in the labs
 * each VF of a fake-sysfs PF is an HCA node of an ibsim fabric (OpenSM 3.3.23
 * and ibsim have no vports) and this driver plays both the firmware and the
 * kernel:
 *
 *   set port GUID X  ->  console `Guid "<node>" <X-1>`: ibsim derives a port's
 *                        GUID as node GUID + port number, so port 1 reports X.
 *                        X = 0 gives node GUID 0xffffffffffffffff and port GUID
 *                        0, the state of a fresh SR-IOV VF: OpenSM logs "ERR
 *                        0D17: Got Zero Port GUID!" and the port stays INIT.
 *   set node GUID N  ->  recorded only (sriov/<vf>/node). ibsim cannot set a
 *                        node GUID apart from its port GUIDs: the NodeInfo the
 *                        SM reads says port GUID - 1. The port GUID is what an
 *                        SM, the SA and P_Key membership use.
 *   link state       ->  sriov/<vf>/policy (Follow/Up/Down, the legacy
 *                        MLNX_OFED layout); "disable" unlinks the port.
 *   rebind           ->  the fake netdev and RDMA device go away, console
 *                        `Unlink "<node>"[1]`, then `ReLink "<node>"[1]` (unless
 *                        the policy is Down) so OpenSM re-discovers the port,
 *                        and the netdev comes back under a new name (as udev
 *                        may rename it), optionally renaming a real interface.
 *   read back        ->  sriov/<vf>/{node,port,policy} of the fake PF.
 *
 * Config: the vf.ibsim object (docs/config.md "vf.ibsim (lab VF driver)").
 */
#include "vf_ibsim.h"

#include <ctype.h>
#include <stdarg.h>
#include <strings.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <net/if.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <netlink/netlink.h>
#include <netlink/route/link.h>
#include <netlink/socket.h>

#include <ibvf/types.h>

#include "clock.h"
#include "err.h"
#include "fakesysfs.h"
#include "log.h"

#define IBSIM_NODE_MAX	       63
#define IBSIM_REPLY_TIMEOUT_MS 2000

struct ibsim_map {
	char *key; /* VF PCI address or "<pf netdev>/<vf index>" */
	char *node;
};

struct ibsim_priv {
	char *console;
	char *output;
	char *node_prefix;
	struct ibsim_map *map;
	size_t n_map;
	bool rename;
	bool real_netdevs;
	uint32_t relink_delay_ms;
	pthread_mutex_t lock; /* one console conversation at a time */
};

/* ------------------------------------------------------------ config -- */

static bool node_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > IBSIM_NODE_MAX)
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.')
			return false;
	return true;
}

static bool map_key_ok(const char *k)
{
	const char *slash = strchr(k, '/');
	char *end;

	if (!ibvf_pci_addr_valid(k, NULL, 0))
		return true;
	if (!slash || slash == k || (size_t)(slash - k) >= IBVF_IFNAME_LEN || !slash[1])
		return false;
	return strtol(slash + 1, &end, 10) >= 0 && !*end && isdigit((unsigned char)slash[1]);
}

static void free_priv(struct ibsim_priv *p)
{
	if (!p)
		return;
	free(p->console);
	free(p->output);
	free(p->node_prefix);
	for (size_t i = 0; i < p->n_map; i++) {
		free(p->map[i].key);
		free(p->map[i].node);
	}
	free(p->map);
}

static int parse_nodes(const struct ibvf_jctx *c, const char *path, json_t *nodes,
		       struct ibsim_priv *p)
{
	const char *k;
	json_t *v;

	if (!json_is_object(nodes))
		return ibvf_json_err(c, path, "nodes",
				     "expected an object {\"<VF PCI>\" or \"<PF>/<index>\": "
				     "\"<ibsim node>\"}");
	if (p && !(p->map = calloc(json_object_size(nodes) + 1, sizeof(*p->map))))
		return -ENOMEM;
	json_object_foreach(nodes, k, v)
	{
		if (!map_key_ok(k))
			return ibvf_json_err(c, path, "nodes",
					     "key '%.40s' is neither a VF PCI address "
					     "(0000:03:00.2) nor <PF netdev>/<VF index> (ib0/3)",
					     k);
		if (!json_is_string(v) || !node_name_ok(json_string_value(v)))
			return ibvf_json_err(c, path, "nodes",
					     "'%.40s': ibsim node name must be 1..%d of "
					     "[A-Za-z0-9_.-]",
					     k, IBSIM_NODE_MAX);
		if (!p)
			continue;
		p->map[p->n_map].key = strdup(k);
		p->map[p->n_map].node = strdup(json_string_value(v));
		p->n_map++;
		if (!p->map[p->n_map - 1].key || !p->map[p->n_map - 1].node)
			return -ENOMEM;
	}
	return 0;
}

/* Parse and check a vf.ibsim object into @p (NULL: check only). */
static int parse_cfg(const struct ibvf_jctx *c, const char *path, json_t *obj, struct ibsim_priv *p)
{
	static const char *const keys[] = {
		"console",	 "output",	 "nodes",	    "node_prefix",
		"rebind_netdev", "real_netdevs", "relink_delay_ms", NULL};
	struct ibsim_priv tmp = {0};
	char *rebind = NULL;
	uint64_t delay = 100;
	json_t *nodes;
	int ret;

	if (!p)
		p = &tmp;
	p->rename = true;
	ret = ibvf_json_check_keys(c, obj, path, keys);
	if (!ret)
		ret = ibvf_json_string(c, obj, path, "console", &p->console);
	if (!ret)
		ret = ibvf_json_string(c, obj, path, "output", &p->output);
	if (!ret)
		ret = ibvf_json_string(c, obj, path, "node_prefix", &p->node_prefix);
	if (!ret)
		ret = ibvf_json_string(c, obj, path, "rebind_netdev", &rebind);
	if (!ret)
		ret = ibvf_json_bool(c, obj, path, "real_netdevs", &p->real_netdevs);
	if (!ret)
		ret = ibvf_json_uint(c, obj, path, "relink_delay_ms", 0, 10000, &delay);
	if (ret)
		goto out;
	p->relink_delay_ms = (uint32_t)delay;
	if (!p->console || !p->console[0]) {
		ret = ibvf_json_err(c, path, "console",
				    "required: the ibsim console FIFO ($IBSIM_CONSOLE of the lab)");
		goto out;
	}
	if (rebind && strcmp(rebind, "rename") && strcmp(rebind, "same")) {
		ret = ibvf_json_err(c, path, "rebind_netdev", "expected \"rename\" or \"same\"");
		goto out;
	}
	p->rename = !rebind || !strcmp(rebind, "rename");
	if (p->node_prefix && (strlen(p->node_prefix) > IBSIM_NODE_MAX - 5 ||
			       (p->node_prefix[0] && !node_name_ok(p->node_prefix)))) {
		ret = ibvf_json_err(c, path, "node_prefix",
				    "must be [A-Za-z0-9_.-], at most %d characters",
				    IBSIM_NODE_MAX - 5);
		goto out;
	}
	nodes = json_object_get(obj, "nodes");
	if (nodes)
		ret = parse_nodes(c, path, nodes, p == &tmp ? NULL : p);
	if (!ret && !nodes && !p->node_prefix)
		ret = ibvf_json_err(c, path, "nodes",
				    "give \"nodes\" (VF -> ibsim node) or \"node_prefix\" (VF "
				    "index N -> node <prefix>N)");
out:
	free(rebind);
	if (p == &tmp)
		free_priv(&tmp);
	return ret;
}

int ibvf_vf_ibsim_config_check(const struct ibvf_jctx *c, const char *path, json_t *obj)
{
	return parse_cfg(c, path, obj, NULL);
}

/* ------------------------------------------------------------ helpers -- */

/* The ibsim node of @vf, or NULL (with @err filled). */
static const char *node_of(struct ibsim_priv *p, const struct ibvf_vf_info *vf, char *buf,
			   size_t len, char *err, size_t errlen)
{
	char key[IBVF_IFNAME_LEN + 16];

	snprintf(key, sizeof(key), "%s/%d", vf->pf_netdev, vf->index);
	for (size_t i = 0; i < p->n_map; i++)
		if (!strcasecmp(p->map[i].key, vf->pci) ||
		    (vf->pf_netdev[0] && !strcmp(p->map[i].key, key)))
			return p->map[i].node;
	if (p->node_prefix) {
		snprintf(buf, len, "%s%d", p->node_prefix, vf->index);
		return buf;
	}
	ibvf_errf(err, errlen, -ENOENT,
		  "vf.ibsim: no ibsim node for VF %d (%s) of PF %s: add it to \"nodes\"", vf->index,
		  vf->pci, vf->pf_netdev[0] ? vf->pf_netdev : vf->pf_pci);
	return NULL;
}

static off_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) ? -1 : st.st_size;
}

/*
 * Read what ibsim printed after @off until its next prompt; check for @node
 * errors. Polls ibsim's output file every 1 ms, backing off to 20 ms: the
 * polling is lab time that benchmarks report apart from product time.
 */
static int check_reply(struct ibsim_priv *p, off_t off, const char *node, const char *cmd,
		       char *err, size_t errlen)
{
	char buf[4096], pat[IBSIM_NODE_MAX + 8];
	struct timespec ts = {0, 1000000};
	int64_t end = ibvf_mono_ms() + IBSIM_REPLY_TIMEOUT_MS;
	ssize_t n = 0;

	for (;;) {
		/* O_NONBLOCK: a FIFO named as "output" must not block the open */
		int fd = open(p->output, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
		struct stat st;

		if (fd >= 0 && (fstat(fd, &st) || !S_ISREG(st.st_mode))) {
			close(fd);
			return ibvf_errf(err, errlen, -EINVAL,
					 "ibsim output %s is not a regular file (ibsim's stdout "
					 "redirected to a file)",
					 p->output);
		}
		if (fd >= 0) {
			n = pread(fd, buf, sizeof(buf) - 1, off);
			close(fd);
		}
		if (n > 0) {
			buf[n] = 0;
			if (strstr(buf, "sim> "))
				break;
		}
		if (ibvf_mono_ms() >= end)
			break;
		nanosleep(&ts, NULL);
		ts.tv_nsec = ts.tv_nsec * 2 > 20000000 ? 20000000 : ts.tv_nsec * 2;
	}
	if (n <= 0 || !strstr(buf, "sim> "))
		return ibvf_errf(err, errlen, -ETIMEDOUT,
				 "ibsim did not answer '%s' within %d ms (output %s)", cmd,
				 IBSIM_REPLY_TIMEOUT_MS, p->output);
	snprintf(pat, sizeof(pat), "\"%s\" (", node);
	/* strtok_r: ibvfd's workers rebind different VFs in parallel */
	for (char *sp, *line = strtok_r(buf, "\n", &sp); line; line = strtok_r(NULL, "\n", &sp))
		if (strstr(line, pat) && strstr(line, "not found"))
			return ibvf_errf(err, errlen, -ENOENT,
					 "ibsim has no node \"%s\" (answer to '%s': %s)", node, cmd,
					 line);
	return 0;
}

/*
 * Lab time of the calling thread's rebind (ib_rebind()): its console round
 * trips are logged with the rebind, not one by one.
 */
static _Thread_local bool in_rebind;
static _Thread_local uint64_t rebind_console_ns, rebind_delay_ns;
static _Thread_local unsigned rebind_console_n;

/* Send one console line; with "output" configured, check ibsim's answer. */
static int console(struct ibsim_priv *p, const char *node, char *err, size_t errlen,
		   const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static int console(struct ibsim_priv *p, const char *node, char *err, size_t errlen,
		   const char *fmt, ...)
{
	char line[256];
	off_t off = -1;
	uint64_t t0 = ibvf_mono_ns();
	va_list ap;
	ssize_t w;
	int fd, ret = 0, n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(line) - 1)
		return ibvf_errf(err, errlen, -EINVAL, "ibsim command too long");
	pthread_mutex_lock(&p->lock);
	if (p->output)
		off = file_size(p->output);
	fd = open(p->console, O_WRONLY | O_APPEND | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		pthread_mutex_unlock(&p->lock);
		if (e == ENXIO)
			return ibvf_errf(err, errlen, -ENXIO,
					 "no ibsim reads its console %s (is the lab up?)",
					 p->console);
		return ibvf_errf(err, errlen, -e, "ibsim console %s: %s", p->console, strerror(e));
	}
	line[n] = '\n';
	w = write(fd, line, (size_t)n + 1); /* < PIPE_BUF: one atomic write */
	close(fd);
	line[n] = 0;
	if (w != n + 1)
		ret = ibvf_errf(err, errlen, w < 0 ? -errno : -EIO, "writing '%s' to %s: %s", line,
				p->console, w < 0 ? strerror(errno) : "short write");
	else if (off >= 0)
		ret = check_reply(p, off, node, line, err, errlen);
	pthread_mutex_unlock(&p->lock);
	/* lab time, apart from product time (bench/bench_fabric_attach.py parses it) */
	t0 = ibvf_mono_ns() - t0;
	rebind_console_ns += t0;
	rebind_console_n++;
	if (!ret && !in_rebind)
		log_info("ibsim lab: node %s: console %.3f ms: '%s'", node, (double)t0 / 1e6, line);
	else if (!ret)
		log_debug("ibsim console: %s", line);
	return ret;
}

/* <pf device>/sriov/<index>/<name> of @vf into @buf. */
static int sriov_file(const struct ibvf_vf_driver *d, const struct ibvf_vf_info *vf,
		      const char *name, char *buf, size_t len)
{
	char sub[64];

	snprintf(sub, sizeof(sub), "sriov/%d/%s", vf->index, name);
	return ibvf_pci_dev_path(d->sysfs_root, vf->pf_pci, sub, buf, len);
}

static int write_sriov(const struct ibvf_vf_driver *d, const struct ibvf_vf_info *vf,
		       const char *name, const char *text, char *err, size_t errlen)
{
	char p[PATH_MAX], dir[PATH_MAX];
	FILE *f;
	int fd;

	if (sriov_file(d, vf, name, p, sizeof(p)))
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "sysfs path too long");
	snprintf(dir, sizeof(dir), "%s", p);
	*strrchr(dir, '/') = 0;
	mkdir(dir, 0755);
	/* O_NONBLOCK: a FIFO in the fake tree fails (ENXIO) instead of blocking */
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0644);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (!f || fprintf(f, "%s\n", text) < 0 || fclose(f)) {
		int e = errno;

		if (!f && fd >= 0)
			close(fd);
		return ibvf_errf(err, errlen, -e, "writing %s: %s", p, strerror(e));
	}
	return 0;
}

static int read_sriov(const struct ibvf_vf_driver *d, const struct ibvf_vf_info *vf,
		      const char *name, char *buf, size_t len)
{
	char p[PATH_MAX];

	if (sriov_file(d, vf, name, p, sizeof(p)) || ibvf_sysfs_read_str(p, buf, len))
		return -ENOENT;
	return 0;
}

static const char *const policy_names[] = {"Follow", "Up", "Down"};

static enum ibvf_vf_link_state read_policy(const struct ibvf_vf_driver *d,
					   const struct ibvf_vf_info *vf, bool *known)
{
	char b[32];

	*known = false;
	if (read_sriov(d, vf, "policy", b, sizeof(b)))
		return IBVF_VF_LINK_AUTO;
	for (int i = 0; i < 3; i++)
		if (!strcasecmp(b, policy_names[i])) {
			*known = true;
			return (enum ibvf_vf_link_state)i;
		}
	return IBVF_VF_LINK_AUTO;
}

/* ---------------------------------------------------------------- ops -- */

static int ib_set_guid(struct ibvf_vf_driver *d, const struct ibvf_vf_info *vf,
		       enum ibvf_guid_kind kind, uint64_t guid, char *err, size_t errlen)
{
	struct ibsim_priv *p = d->priv;
	char nb[IBSIM_NODE_MAX + 1], g[IBVF_GUID_STR_LEN];
	const char *node = node_of(p, vf, nb, sizeof(nb), err, errlen);
	int ret;

	if (!node)
		return -ENOENT;
	ibvf_guid_format(guid, g);
	if (kind == IBVF_GUID_PORT) {
		/* port GUID = node GUID + 1 in ibsim; 0 - 1 wraps to all-ones (zero GUID) */
		ret = console(p, node, err, errlen, "Guid \"%s\" 0x%016llx", node,
			      (unsigned long long)(guid - 1));
		if (ret)
			return ibvf_err_prefix(err, errlen, ret, "PF %s VF %d: port GUID %s",
					       vf->pf_netdev, vf->index, g);
	}
	ret = write_sriov(d, vf, kind == IBVF_GUID_PORT ? "port" : "node", g, err, errlen);
	if (!ret)
		log_debug("PF %s VF %d (%s, ibsim node %s): %s GUID set to %s", vf->pf_netdev,
			  vf->index, vf->pci, node, ibvf_guid_kind_name(kind), g);
	return ret;
}

static int ib_set_link_state(struct ibvf_vf_driver *d, const struct ibvf_vf_info *vf,
			     enum ibvf_vf_link_state st, char *err, size_t errlen)
{
	struct ibsim_priv *p = d->priv;
	char nb[IBSIM_NODE_MAX + 1];
	const char *node = node_of(p, vf, nb, sizeof(nb), err, errlen);
	enum ibvf_vf_link_state old;
	bool known;
	int ret;

	if (!node)
		return -ENOENT;
	if ((unsigned int)st > IBVF_VF_LINK_DISABLE)
		return ibvf_errf(err, errlen, -EINVAL, "bad link state %d", (int)st);
	old = read_policy(d, vf, &known);
	ret = write_sriov(d, vf, "policy", policy_names[st], err, errlen);
	if (ret)
		return ret;
	if (st == IBVF_VF_LINK_DISABLE && old != IBVF_VF_LINK_DISABLE)
		return console(p, node, err, errlen, "Unlink \"%s\"[1]", node);
	if (st != IBVF_VF_LINK_DISABLE && old == IBVF_VF_LINK_DISABLE)
		return console(p, node, err, errlen, "ReLink \"%s\"[1]", node);
	return 0;
}

/* The next name of a re-created netdev: "<base>r<N>", N = 1..9, cycling. */
static void next_name(const char *old, char *out, size_t len)
{
	size_t n = strlen(old);
	int gen = 1;

	if (n >= 2 && old[n - 2] == 'r' && isdigit((unsigned char)old[n - 1])) {
		gen = old[n - 1] == '9' ? 1 : old[n - 1] - '0' + 1;
		n -= 2;
	}
	if (n > IBVF_IFNAME_LEN - 3)
		n = IBVF_IFNAME_LEN - 3;
	snprintf(out, len, "%.*sr%d", (int)n, old, gen);
}

/* Take real interface @ifindex down and rename it to @name (RTM_NEWLINK/SETLINK). */
static int rename_real(int ifindex, const char *old, const char *name, char *err, size_t errlen)
{
	struct nl_sock *sk = nl_socket_alloc();
	struct rtnl_link *orig = rtnl_link_alloc(), *down = rtnl_link_alloc(),
			 *ren = rtnl_link_alloc();
	int ret = -ENOMEM;

	if (!sk || !orig || !down || !ren)
		goto out;
	ret = nl_connect(sk, NETLINK_ROUTE);
	if (ret >= 0) {
		rtnl_link_set_ifindex(orig, ifindex);
		rtnl_link_unset_flags(down, IFF_UP);
		ret = rtnl_link_change(sk, orig, down, 0);
	}
	if (ret >= 0) {
		rtnl_link_set_name(ren, name);
		ret = rtnl_link_change(sk, orig, ren, 0);
	}
	if (ret < 0)
		ret = ibvf_errf(err, errlen, -EIO, "renaming real netdev %s (ifindex %d) to %s: %s",
				old, ifindex, name, nl_geterror(ret));
out:
	rtnl_link_put(orig);
	rtnl_link_put(down);
	rtnl_link_put(ren);
	nl_socket_free(sk);
	return ret == -ENOMEM ? ibvf_errf(err, errlen, ret, "out of memory") : ret;
}

static int ib_rebind_do(struct ibvf_vf_driver *d, const struct ibvf_vf_info *vf, const char *driver,
			uint32_t timeout_ms, char *err, size_t errlen)
{
	struct ibsim_priv *p = d->priv;
	char nb[IBSIM_NODE_MAX + 1], name[IBVF_IFNAME_LEN], e[IBVF_ERR_LEN];
	const char *node = node_of(p, vf, nb, sizeof(nb), err, errlen);
	struct ibvf_fake_vf nv = {0};
	struct ibvf_vf_info cur;
	bool known;
	int ret;

	(void)timeout_ms;
	if (!node)
		return -ENOENT;
	if (!ibvf_pci_dev_exists(d->sysfs_root, vf->pci))
		return ibvf_errf(err, errlen, -ENODEV, "VF %s vanished (no PCI device)", vf->pci);
	/* What is there now; after a failed rebind fall back to what the caller saw. */
	if (ibvf_vf_lookup(d->sysfs_root, vf->pci, &cur, e, sizeof(e)))
		cur = *vf;
	if (!cur.netdev[0])
		memcpy(cur.netdev, vf->netdev, sizeof(cur.netdev)), cur.ifindex = vf->ifindex;
	if (!cur.rdma_dev[0])
		memcpy(cur.rdma_dev, vf->rdma_dev, sizeof(cur.rdma_dev));
	nv.driver = cur.driver[0] ? cur.driver : (driver && *driver ? driver : vf->driver);
	if (!nv.driver[0])
		return ibvf_errf(err, errlen, -EINVAL, "VF %s has no driver to bind", vf->pci);
	ret = ibvf_fake_vf_unbind(d->sysfs_root, vf->pci);
	if (ret)
		return ibvf_errf(err, errlen, ret, "unbinding fake VF %s: %s", vf->pci,
				 strerror(-ret));
	ret = console(p, node, err, errlen, "Unlink \"%s\"[1]", node);
	if (ret)
		return ret;
	if (p->relink_delay_ms) {
		uint64_t t0 = ibvf_mono_ns();

		usleep(p->relink_delay_ms * 1000u);
		rebind_delay_ns += ibvf_mono_ns() - t0;
	}
	if (read_policy(d, vf, &known) != IBVF_VF_LINK_DISABLE) {
		ret = console(p, node, err, errlen, "ReLink \"%s\"[1]", node);
		if (ret)
			return ret;
	}
	if (cur.netdev[0]) {
		if (p->rename)
			next_name(cur.netdev, name, sizeof(name));
		else
			snprintf(name, sizeof(name), "%s", cur.netdev);
		if (p->real_netdevs && strcmp(name, cur.netdev)) {
			ret = rename_real(cur.ifindex, cur.netdev, name, err, errlen);
			if (ret)
				return ret;
		}
		nv.netdev = name;
		nv.ifindex = cur.ifindex;
	}
	nv.rdma_dev = cur.rdma_dev[0] ? cur.rdma_dev : NULL;
	ret = ibvf_fake_vf_bind(d->sysfs_root, vf->pci, &nv);
	if (ret)
		return ibvf_errf(err, errlen, ret, "re-creating fake VF %s: %s", vf->pci,
				 strerror(-ret));
	log_info("PF %s VF %d (%s, ibsim node %s): rebound; netdev %s -> %s", vf->pf_netdev,
		 vf->index, vf->pci, node, cur.netdev[0] ? cur.netdev : "-",
		 nv.netdev ? nv.netdev : "-");
	return 0;
}

/*
 * The emulated rebind (fake sysfs unbind, Unlink, relink delay, ReLink, the
 * netdev's rename, bind): all of it is lab time, logged as such for
 * benchmarks (a real VF's unbind/bind is the mlx5 driver's probe instead).
 */
static int ib_rebind(struct ibvf_vf_driver *d, const struct ibvf_vf_info *vf, const char *driver,
		     uint32_t timeout_ms, char *err, size_t errlen)
{
	char nb[IBSIM_NODE_MAX + 1];
	const char *node = node_of(d->priv, vf, nb, sizeof(nb), NULL, 0);
	uint64_t t0 = ibvf_mono_ns();
	int ret;

	in_rebind = true;
	rebind_console_ns = rebind_delay_ns = 0;
	rebind_console_n = 0;
	ret = ib_rebind_do(d, vf, driver, timeout_ms, err, errlen);
	in_rebind = false;
	if (!ret)
		log_info("ibsim lab: node %s: rebind %.3f ms (relink delay %.3f ms, %u console "
			 "commands %.3f ms)",
			 node ? node : "?", (double)(ibvf_mono_ns() - t0) / 1e6,
			 (double)rebind_delay_ns / 1e6, rebind_console_n,
			 (double)rebind_console_ns / 1e6);
	return ret;
}

static int ib_read_back(struct ibvf_vf_driver *d, const struct ibvf_vf_info *const *vfs, size_t n,
			struct ibvf_vf_state *out, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	memset(out, 0, n * sizeof(*out));
	for (size_t i = 0; i < n; i++) {
		char b[64];

		if (!read_sriov(d, vfs[i], "node", b, sizeof(b)) &&
		    !ibvf_guid_parse(b, &out[i].node_guid, NULL, 0))
			out[i].node_guid_known = true;
		if (!read_sriov(d, vfs[i], "port", b, sizeof(b)) &&
		    !ibvf_guid_parse(b, &out[i].port_guid, NULL, 0))
			out[i].port_guid_known = true;
		out[i].link_state = read_policy(d, vfs[i], &out[i].link_state_known);
	}
	return 0;
}

static void ib_destroy(struct ibvf_vf_driver *d)
{
	struct ibsim_priv *p = d->priv;

	pthread_mutex_destroy(&p->lock);
	free_priv(p);
	free(p);
}

static const struct ibvf_vf_driver_ops ibsim_ops = {
	.name = "ibsim",
	.set_guid = ib_set_guid,
	.set_link_state = ib_set_link_state,
	.rebind = ib_rebind,
	.read_back = ib_read_back,
	.destroy = ib_destroy,
};

int ibvf_vf_driver_ibsim_create(const char *sysfs_root, const char *ibsim_json,
				struct ibvf_vf_driver **out, char *err, size_t errlen)
{
	struct ibvf_jctx c = {"<vf.ibsim>", err, errlen};
	struct ibvf_vf_driver *d = NULL;
	struct ibsim_priv *p = NULL;
	json_t *o;
	int ret;

	if (!ibsim_json)
		return ibvf_errf(err, errlen, -EINVAL,
				 "vf.driver is \"ibsim\" but the vf.ibsim object is missing");
	o = ibvf_json_load("<vf.ibsim>", ibsim_json, err, errlen);
	if (!o)
		return -EINVAL;
	p = calloc(1, sizeof(*p));
	d = calloc(1, sizeof(*d));
	if (!p || !d || !(d->sysfs_root = strdup(sysfs_root))) {
		ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		goto fail;
	}
	ret = parse_cfg(&c, "vf.ibsim", o, p);
	if (ret)
		goto fail;
	pthread_mutex_init(&p->lock, NULL);
	json_decref(o);
	d->ops = &ibsim_ops;
	d->priv = p;
	*out = d;
	return 0;
fail:
	json_decref(o);
	free_priv(p);
	free(p);
	if (d)
		free(d->sysfs_root);
	free(d);
	return ret == -ENOMEM ? ibvf_errf(err, errlen, ret, "out of memory") : ret;
}
