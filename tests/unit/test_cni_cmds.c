// SPDX-License-Identifier: MIT
/*
 * Unit tests: the ib-sriov commands ADD, DEL, CHECK, GC and STATUS
 * (cni/cni_add.c, cni_del.c, cni_check.c, cni_gc.c, cni_cmd.c) run
 * unprivileged against a fake ibvfd and a fake host through the seams of
 * cni/cni_ops.h. The fake host models two VFs (netdev, its IPoIB GUID and
 * ifalias, its RDMA device) and where each sits (host or a Pod netns); the
 * fake ibvfd holds owners. Every state-changing call is appended to a log
 * ("prepare:c1/net1 rdma:mlx5_4>pod to_pod:ib0v2>net1 ..."; a failed one
 * ends in '!'), so the tests assert the exact order of steps and undo.
 * The end of the file drives the built ib-sriov binary with bad input
 * (cni/ib_sriov.c: stdin and environment checks, no host access).
 */
#include <errno.h>
#include <inttypes.h>
#include <net/if.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include <ibvf/api.h>

#include "cni_cache.h"
#include "cni_cmd.h"
#include "cni_config.h"
#include "cni_daemon.h"
#include "cni_ops.h"
#include "cni_result.h"
#include "log.h"
#include "rc_check.h"
#include "release_spool.h"
#include "testutil.h"

#define POD_A	 "/run/netns/pod-a"
#define POD_B	 "/run/netns/pod-b"
#define VF0	 "0000:3b:00.2"
#define VF1	 "0000:3b:00.3"
#define DMN_GUID 0x0002c90300c0ff00ull /* + VF number: what the fake ibvfd assigns */
#define OLD_GUID 0x0002c90300aa0000ull /* + VF number: the VF's GUID before ADD */

/* ------------------------------------------------------------ the fake world -- */

struct fvf {
	const char *pci, *host_name, *rdma;
	char name[CNI_IFNAME_LEN]; /* the netdev's current name */
	char where[64];		   /* "host" or the Pod netns path it is in */
	char rdma_where[64];
	char alias[256];
	bool up;
	uint64_t guid; /* in the netdev's IPoIB address */
	int ifindex;
	bool eth_addr; /* the netdev has a 6-byte address (not IPoIB) */
	bool rb_known; /* the VF driver reads back rb_guid */
	uint64_t rb_guid;
};

struct fowner {
	bool used;
	char cid[64], ifname[CNI_IFNAME_LEN], network[64], state[16];
	uint64_t guid;
};

static struct world {
	struct fvf vf[2];
	struct fowner own[4];
	char log[4096];
	int ns_open;	      /* opened and not yet closed */
	const char *gone;     /* a netns path that no longer exists */
	const char *notns;    /* a netns path that is a regular file */
	const char *decoy;    /* a Pod netns that already has a "net1" */
	bool shared_rdma;     /* RDMA subsystem in shared netns mode */
	bool daemon_down;     /* connect() to ibvfd is refused */
	const char *fail;     /* the next call of this op fails (one shot) */
	int fail_ret;	      /* its errno (negative) */
	int fail_code;	      /* its CNI code (ibvfd's mapping, the IPAM plugin's code) */
	int fail_rpc;	      /* ibvfd's JSON-RPC error code for it, 0: none */
	const char *fail_msg; /* ibvfd's message for it, NULL: "injected failure" */
	int port_ret;	      /* cni_vf_port_check() */
	int ipam_check_ret;   /* cni_ipam_check() */
	unsigned ipam_ver;    /* VERSION of the IPAM plugin; 0: not in CNI_PATH */
	size_t gc_valid;      /* valid attachments ibvfd's gc was given */
	char rel_pci[32];     /* where the last release said the attachment was */
	uint64_t rel_guid;
} W;

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
	size_t n = strlen(W.log);
	va_list ap;

	if (n)
		n += (size_t)snprintf(W.log + n, sizeof(W.log) - n, " ");
	va_start(ap, fmt);
	vsnprintf(W.log + n, sizeof(W.log) - n, fmt, ap);
	va_end(ap);
}

/* Does op @op fail this time? Logs @what, with '!' when it does. */
static bool failing(const char *op, const char *what, int *ret)
{
	bool f = W.fail && !strcmp(W.fail, op);

	logf_("%s%s", what, f ? "!" : "");
	if (f) {
		W.fail = NULL;
		*ret = W.fail_ret;
	}
	return f;
}

static void world_reset(void)
{
	memset(&W, 0, sizeof(W));
	W.vf[0] = (struct fvf){.pci = VF0, .host_name = "ib0v2", .rdma = "mlx5_4", .ifindex = 12};
	W.vf[1] = (struct fvf){.pci = VF1, .host_name = "ib0v3", .rdma = "mlx5_5", .ifindex = 13};
	for (int i = 0; i < 2; i++) {
		struct fvf *v = &W.vf[i];

		snprintf(v->name, sizeof(v->name), "%s", v->host_name);
		strcpy(v->where, "host");
		strcpy(v->rdma_where, "host");
		v->guid = OLD_GUID + (unsigned)i;
	}
	W.ipam_ver = 10100;
}

static struct fvf *vf_by_pci(const char *pci)
{
	for (int i = 0; i < 2; i++)
		if (pci && !strcmp(W.vf[i].pci, pci))
			return &W.vf[i];
	return NULL;
}

static struct fvf *vf_by_rdma(const char *dev)
{
	for (int i = 0; i < 2; i++)
		if (!strcmp(W.vf[i].rdma, dev))
			return &W.vf[i];
	return NULL;
}

/* The IPoIB hardware address of a netdev with port GUID @guid, as `ip link` prints it. */
static void mac_for(uint64_t guid, char *buf, size_t len)
{
	size_t n = (size_t)snprintf(buf, len, "00:00:10:49:fe:80:00:00:00:00:00:00");

	for (int b = 7; b >= 0; b--)
		n += (size_t)snprintf(buf + n, len - n, ":%02x",
				      (unsigned)(guid >> (b * 8)) & 0xff);
}

static void fill_link(const struct fvf *v, struct cni_link *l)
{
	memset(l, 0, sizeof(*l));
	l->ifindex = v->ifindex;
	snprintf(l->name, sizeof(l->name), "%s", v->name);
	l->flags = v->up ? IFF_UP : 0;
	l->mtu = 2044;
	l->addr_len = v->eth_addr ? 6 : 20;
	if (v->eth_addr)
		goto alias;
	l->addr[2] = 0x10;
	l->addr[3] = 0x49;
	l->addr[4] = 0xfe;
	l->addr[5] = 0x80;
	for (int b = 0; b < 8; b++)
		l->addr[12 + b] = (unsigned char)(v->guid >> ((7 - b) * 8));
alias:
	snprintf(l->alias, sizeof(l->alias), "%s", v->alias);
}

/* -------------------------------------------------------------- fake host -- */

static int f_ns_open(struct cni_ns *ns, const char *path, char *err, size_t errlen)
{
	static int next_fd = 1000;

	if (path && W.gone && !strcmp(path, W.gone))
		return ibvf_errf(err, errlen, -ENOENT, "netns %s: No such file or directory", path);
	if (path && W.notns && !strcmp(path, W.notns)) /* what cni_ns_open() answers */
		return ibvf_errf(err, errlen, -EINVAL, "%s is not a network namespace", path);
	ns->fd = next_fd++;
	ns->sk = NULL;
	snprintf(ns->path, sizeof(ns->path), "%s", path ? path : "host");
	W.ns_open++;
	return 0;
}

static void f_ns_close(struct cni_ns *ns)
{
	if (ns->fd >= 1000)
		W.ns_open--;
	ns->fd = -1;
}

static int f_link_get(struct cni_ns *ns, const char *name, int ifindex, struct cni_link *l,
		      char *err, size_t errlen)
{
	if (name && W.decoy && !strcmp(ns->path, W.decoy) && !strcmp(name, "net1")) {
		memset(l, 0, sizeof(*l));
		strcpy(l->name, "net1");
		return 0;
	}
	for (int i = 0; i < 2; i++) {
		struct fvf *v = &W.vf[i];

		if (strcmp(v->where, ns->path) ||
		    (name ? strcmp(v->name, name) != 0 : v->ifindex != ifindex))
			continue;
		fill_link(v, l);
		return 0;
	}
	return ibvf_errf(err, errlen, -ENODEV, "no netdev %s in netns %s", name ? name : "?",
			 ns->path);
}

static struct fvf *netdev_in(const char *where, const char *name)
{
	for (int i = 0; i < 2; i++)
		if (!strcmp(W.vf[i].where, where) && !strcmp(W.vf[i].name, name))
			return &W.vf[i];
	return NULL;
}

static int f_netdev_to_pod(struct cni_ns *host, struct cni_ns *pod, const char *host_name,
			   const char *pod_name, const char *alias, struct cni_moved *out,
			   char *err, size_t errlen)
{
	struct fvf *v = netdev_in(host->path, host_name);
	char what[64];
	int ret;

	snprintf(what, sizeof(what), "to_pod:%s>%s", host_name, pod_name);
	if (failing("to_pod", what, &ret))
		return ibvf_errf(err, errlen, ret, "injected failure");
	if (!v)
		return ibvf_errf(err, errlen, -ENODEV, "no netdev %s", host_name);
	snprintf(v->name, sizeof(v->name), "%s", pod_name);
	snprintf(v->where, sizeof(v->where), "%.63s", pod->path);
	snprintf(v->alias, sizeof(v->alias), "%s", alias);
	v->up = true;
	memset(out, 0, sizeof(*out));
	snprintf(out->temp_name, sizeof(out->temp_name), "ibvftmp%d", v->ifindex);
	out->pod_ifindex = v->ifindex;
	fill_link(v, &out->link);
	return 0;
}

static int f_netdev_to_host(struct cni_ns *pod, struct cni_ns *host, const char *pod_name,
			    const char *host_name, char *final_name, char *err, size_t errlen)
{
	struct fvf *v = netdev_in(pod->path, pod_name);
	char what[64];
	int ret;

	snprintf(what, sizeof(what), "to_host:%s>%s", pod_name, host_name);
	if (failing("to_host", what, &ret))
		return ibvf_errf(err, errlen, ret, "injected failure");
	if (!v)
		return ibvf_errf(err, errlen, -ENODEV, "no netdev %s", pod_name);
	snprintf(v->name, sizeof(v->name), "%s", host_name);
	snprintf(v->where, sizeof(v->where), "%.63s", host->path);
	v->alias[0] = 0;
	v->up = false;
	if (final_name)
		snprintf(final_name, CNI_IFNAME_LEN, "%s", host_name);
	return 0;
}

static int f_rdma_netns_exclusive(bool *exclusive, char *err, size_t errlen)
{
	(void)err;
	(void)errlen;
	*exclusive = !W.shared_rdma;
	return 0;
}

static int f_rdma_dev_move(struct cni_ns *from, const char *dev, struct cni_ns *to, char *err,
			   size_t errlen)
{
	struct fvf *v = vf_by_rdma(dev);
	char what[64];
	int ret;

	snprintf(what, sizeof(what), "rdma:%s>%s", dev, strcmp(to->path, "host") ? "pod" : "host");
	if (failing("rdma", what, &ret))
		return ibvf_errf(err, errlen, ret, "injected failure");
	if (!v || strcmp(v->rdma_where, from->path))
		return ibvf_errf(err, errlen, -ENODEV, "no RDMA device %s in %s", dev, from->path);
	snprintf(v->rdma_where, sizeof(v->rdma_where), "%.63s", to->path);
	return 0;
}

static int f_rdma_dev_visible(struct cni_ns *ns, const char *dev, char *err, size_t errlen)
{
	struct fvf *v = vf_by_rdma(dev);

	(void)err;
	(void)errlen;
	return v && !strcmp(v->rdma_where, ns->path);
}

static int f_vf_lookup(const char *pci, struct cni_vf *out, char *err, size_t errlen)
{
	struct fvf *v = vf_by_pci(pci);

	if (!v)
		return ibvf_errf(err, errlen, -ENODEV, "no PCI device %s in sysfs", pci);
	memset(out, 0, sizeof(*out));
	snprintf(out->pci, sizeof(out->pci), "%s", pci);
	out->is_vf = true;
	strcpy(out->pf_pci, "0000:3b:00.0");
	strcpy(out->pf_netdev, "ib0");
	out->vf_index = v == &W.vf[0] ? 2 : 3;
	if (!strcmp(v->where, "host"))
		snprintf(out->netdev, sizeof(out->netdev), "%s", v->name);
	snprintf(out->rdma_dev, sizeof(out->rdma_dev), "%s", v->rdma);
	strcpy(out->driver, "mlx5_core");
	return 0;
}

static int f_vf_netdev(const char *pci, char *name, char *err, size_t errlen)
{
	struct fvf *v = vf_by_pci(pci);

	if (!v || strcmp(v->where, "host"))
		return ibvf_errf(err, errlen, -ENODEV, "no netdev under %s", pci);
	snprintf(name, CNI_IFNAME_LEN, "%s", v->name);
	return 0;
}

static int f_vf_rdma_dev(const char *pci, char *name, size_t len, char *err, size_t errlen)
{
	struct fvf *v = vf_by_pci(pci);

	if (!v)
		return ibvf_errf(err, errlen, -ENODEV, "no RDMA device under %s", pci);
	snprintf(name, len, "%s", v->rdma);
	return 0;
}

static int f_vf_port_check(const char *rdma_dev, int netns_fd, const struct cni_pkey *pkeys,
			   size_t n_pkeys, char *err, size_t errlen)
{
	(void)netns_fd;
	(void)pkeys;
	(void)n_pkeys;
	if (W.port_ret)
		return ibvf_errf(err, errlen, W.port_ret, "%s port 1 is DOWN", rdma_dev);
	return 0;
}

static int f_vf_compat_apply(const struct cni_vf *vf, enum cni_link_state ls, bool set_guid,
			     uint64_t guid, uint64_t present_guid, char prev_guid[24], char *err,
			     size_t errlen)
{
	struct fvf *v = vf_by_pci(vf->pci);
	char what[64];
	int ret;

	(void)ls;
	(void)present_guid;
	snprintf(what, sizeof(what), "apply:%s:%016" PRIx64, vf->pci, set_guid ? guid : 0);
	if (failing("apply", what, &ret))
		return ibvf_errf(err, errlen, ret, "injected failure");
	if (set_guid) {
		ibvf_guid_format(v->guid, prev_guid);
		v->guid = guid;
	}
	return 0;
}

static int f_vf_restore(const struct cni_cache *c, char *err, size_t errlen)
{
	struct fvf *v = vf_by_pci(c->device_id);
	char what[64];
	uint64_t g;
	int ret;

	snprintf(what, sizeof(what), "restore:%s:%s", c->device_id, c->prev_guid);
	if (failing("restore", what, &ret))
		return ibvf_errf(err, errlen, ret, "injected failure");
	if (v && c->prev_guid[0] && !ibvf_guid_parse(c->prev_guid, &g, NULL, 0))
		v->guid = g;
	return 0;
}

static int f_vf_guid(const struct cni_vf *vf, uint64_t *guid, bool *known, char *err, size_t errlen)
{
	struct fvf *v = vf_by_pci(vf->pci);

	if (!v)
		return ibvf_errf(err, errlen, -ENODEV, "no VF %s", vf->pci);
	*known = v->rb_known;
	*guid = v->rb_known ? v->rb_guid : 0;
	return 0;
}

static const char ipam_result[] = "{\"cniVersion\":\"1.0.0\",\"ips\":[{\"address\":"
				  "\"10.1.2.3/24\",\"gateway\":\"10.1.2.1\"}],\"routes\":"
				  "[{\"dst\":\"0.0.0.0/0\"}]}";

static int f_ipam_exec(struct cni_ipam_call *c, json_t **out, char *err, size_t errlen)
{
	char what[128], op[32];
	int ret;

	assert_string_equal(c->type, "fake-ipam");
	snprintf(what, sizeof(what), "ipam:%s%s%s", c->command, c->container_id ? ":" : "",
		 c->container_id ? c->container_id : "");
	snprintf(op, sizeof(op), "ipam:%s", c->command);
	if (out)
		*out = NULL;
	if (failing(op, what, &ret)) {
		c->remote_code = W.fail_code;
		return ibvf_errf(err, errlen, ret, "fake-ipam %s failed (code %d)", c->command,
				 W.fail_code);
	}
	if (!strcmp(c->command, "ADD") && out)
		*out = json_loads(ipam_result, 0, NULL);
	return 0;
}

static int f_ipam_max_version(const char *type, const char *cni_path, unsigned *version, char *err,
			      size_t errlen)
{
	(void)cni_path;
	if (!W.ipam_ver)
		return ibvf_errf(err, errlen, -ENOENT, "%s: not found in CNI_PATH", type);
	*version = W.ipam_ver;
	return 0;
}

static int f_ipam_apply(struct cni_ns *ns, int ifindex, json_t *res, char *err, size_t errlen)
{
	char what[64];
	int ret;

	(void)res;
	snprintf(what, sizeof(what), "ipam_apply:%d", ifindex);
	if (failing("ipam_apply", what, &ret))
		return ibvf_errf(err, errlen, ret, "injected failure in %s", ns->path);
	return 0;
}

static int f_ipam_check(struct cni_ns *ns, int ifindex, json_t *res, int iface, char *err,
			size_t errlen)
{
	(void)ifindex;
	(void)res;
	(void)iface;
	if (W.ipam_check_ret)
		return ibvf_errf(err, errlen, W.ipam_check_ret, "10.1.2.3/24 not on net1 in %s",
				 ns->path);
	return 0;
}

static int f_rc_check(const struct ibvf_rc_opts *o, struct ibvf_rc_result *res, char *err,
		      size_t errlen)
{
	char what[64];
	int ret;

	memset(res, 0, sizeof(*res));
	snprintf(what, sizeof(what), "rc_check:%s", o->dev);
	if (failing("rc_check", what, &ret)) {
		res->status = IBVF_RC_FAIL;
		strcpy(res->verb, "ibv_modify_qp");
		return ibvf_errf(err, errlen, ret, "injected failure");
	}
	res->iterations = o->iterations;
	return 0;
}

static const struct cni_host_ops fake_host = {
	.ns_open = f_ns_open,
	.ns_close = f_ns_close,
	.link_get = f_link_get,
	.netdev_to_pod = f_netdev_to_pod,
	.netdev_to_host = f_netdev_to_host,
	.rdma_netns_exclusive = f_rdma_netns_exclusive,
	.rdma_dev_move = f_rdma_dev_move,
	.rdma_dev_visible = f_rdma_dev_visible,
	.vf_lookup = f_vf_lookup,
	.vf_netdev = f_vf_netdev,
	.vf_rdma_dev = f_vf_rdma_dev,
	.vf_port_check = f_vf_port_check,
	.vf_compat_apply = f_vf_compat_apply,
	.vf_restore = f_vf_restore,
	.vf_guid = f_vf_guid,
	.ipam_exec = f_ipam_exec,
	.ipam_max_version = f_ipam_max_version,
	.ipam_apply = f_ipam_apply,
	.ipam_check = f_ipam_check,
	.rc_check = f_rc_check,
};

/* ------------------------------------------------------------- fake ibvfd -- */

static struct fowner *owner_find(const char *cid, const char *ifname)
{
	for (size_t i = 0; i < sizeof(W.own) / sizeof(W.own[0]); i++)
		if (W.own[i].used && !strcmp(W.own[i].cid, cid) && !strcmp(W.own[i].ifname, ifname))
			return &W.own[i];
	return NULL;
}

static const char *jstr(json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "";
}

/* The common failure paths: ibvfd down, or an injected failure of @op. */
static int d_fail(const char *op, const char *what, struct cni_daemon_error *de, char *err,
		  size_t errlen)
{
	int ret = 0;

	memset(de, 0, sizeof(*de));
	if (failing(op, what, &ret)) {
		de->ret = ret;
		de->cni_code = W.fail_code;
		de->rpc.code = W.fail_rpc;
		return ibvf_errf(err, errlen, ret, "ibvfd %s: %s", op,
				 W.fail_msg ? W.fail_msg : "injected failure");
	}
	if (W.daemon_down) {
		de->ret = -ECONNREFUSED;
		de->cni_code = CNI_ERR_TRY_AGAIN;
		return ibvf_errf(err, errlen, -ECONNREFUSED, "connect: Connection refused");
	}
	return 0;
}

/*
 * ibvfd's refusal of an owner it reserves (api_methods.c, reserved_owner()):
 * "invalid params" for prepare, commit and release alike. Spelled out here,
 * not through api.h's check, so that the test does not share the rule it tests.
 */
static int d_reserved(const char *cid, struct cni_daemon_error *de, char *err, size_t errlen)
{
	if (strncmp(cid, "ibvf-warm-", 10) && strncmp(cid, "ibvf-adopted-", 13))
		return 0;
	de->ret = -EREMOTEIO;
	de->cni_code = CNI_ERR_INVALID_CONFIG;
	de->rpc.code = IBVF_RPC_INVALID_PARAMS;
	return ibvf_errf(err, errlen, -EREMOTEIO,
			 "owner: container_id '%s' starts with a prefix ibvfd reserves", cid);
}

static int d_prepare(const char *socket, const struct cni_netconf *nc, json_t *owner,
		     const char *pci, struct cni_prepared *out, struct cni_daemon_error *de,
		     char *err, size_t errlen)
{
	const char *cid = jstr(owner, "container_id"), *ifn = jstr(owner, "ifname");
	struct fvf *v = vf_by_pci(pci);
	struct fowner *o = NULL;
	char what[96];
	int ret;

	(void)socket;
	snprintf(what, sizeof(what), "prepare:%s/%s", cid, ifn);
	if ((ret = d_fail("prepare", what, de, err, errlen)) ||
	    (ret = d_reserved(cid, de, err, errlen)))
		return ret;
	assert_non_null(v);
	assert_string_equal(jstr(owner, "network"), nc->name);
	for (size_t i = 0; !o && i < sizeof(W.own) / sizeof(W.own[0]); i++)
		if (!W.own[i].used)
			o = &W.own[i];
	assert_non_null(o);
	*o = (struct fowner){.used = true, .guid = DMN_GUID + (v == &W.vf[0] ? 0 : 1)};
	snprintf(o->cid, sizeof(o->cid), "%s", cid);
	snprintf(o->ifname, sizeof(o->ifname), "%s", ifn);
	snprintf(o->network, sizeof(o->network), "%s", nc->name);
	strcpy(o->state, "prepared");
	v->guid = o->guid; /* ibvfd set the GUID and rebound the VF */
	memset(out, 0, sizeof(*out));
	out->guid = o->guid;
	strcpy(out->pf, "ib0");
	out->vf_index = v == &W.vf[0] ? 2 : 3;
	snprintf(out->netdev, sizeof(out->netdev), "%s", v->name);
	snprintf(out->rdma_dev, sizeof(out->rdma_dev), "%s", v->rdma);
	strcpy(out->port_state, "ACTIVE");
	return 0;
}

static int d_commit(const char *socket, unsigned timeout_ms, json_t *owner,
		    struct cni_daemon_error *de, char *err, size_t errlen)
{
	struct fowner *o = owner_find(jstr(owner, "container_id"), jstr(owner, "ifname"));
	int ret;

	(void)socket;
	(void)timeout_ms;
	if ((ret = d_fail("commit", "commit", de, err, errlen)))
		return ret;
	assert_non_null(o);
	strcpy(o->state, "handed");
	return 0;
}

static int d_release(const char *socket, unsigned timeout_ms, json_t *owner, bool *released,
		     struct cni_daemon_error *de, char *err, size_t errlen)
{
	const char *cid = jstr(owner, "container_id"), *ifn = jstr(owner, "ifname");
	struct fowner *o = owner_find(cid, ifn);
	char what[96];
	int ret;

	(void)socket;
	(void)timeout_ms;
	snprintf(what, sizeof(what), "release:%s/%s", cid, ifn);
	if ((ret = d_fail("release", what, de, err, errlen)) ||
	    (ret = d_reserved(cid, de, err, errlen)))
		return ret;
	if (released)
		*released = o != NULL;
	if (o)
		o->used = false;
	return 0;
}

static int d_release_at(const char *socket, unsigned timeout_ms, json_t *owner, const char *pci,
			uint64_t guid, bool *released, struct cni_daemon_error *de, char *err,
			size_t errlen)
{
	snprintf(W.rel_pci, sizeof(W.rel_pci), "%s", pci ? pci : "");
	W.rel_guid = guid;
	return d_release(socket, timeout_ms, owner, released, de, err, errlen);
}

static int d_owner(const char *socket, unsigned timeout_ms, const char *network,
		   const char *container_id, const char *ifname, uint64_t *guid, char *state,
		   struct cni_daemon_error *de, char *err, size_t errlen)
{
	struct fowner *o = owner_find(container_id, ifname);
	char what[96];
	int ret;

	(void)socket;
	(void)timeout_ms;
	snprintf(what, sizeof(what), "owner:%s/%s", container_id, ifname);
	if ((ret = d_fail("owner", what, de, err, errlen)))
		return ret;
	if (!o || strcmp(o->network, network))
		return ibvf_errf(err, errlen, -ENOENT, "ibvfd has no owner %s/%s", container_id,
				 ifname);
	*guid = o->guid;
	snprintf(state, 32, "%s", o->state);
	return 0;
}

static int d_gc(const char *socket, unsigned timeout_ms, const char *network, json_t *valid,
		size_t *n_released, struct cni_daemon_error *de, char *err, size_t errlen)
{
	char what[64];
	int ret;

	(void)socket;
	(void)timeout_ms;
	(void)network;
	snprintf(what, sizeof(what), "gc:%zu", json_array_size(valid));
	if ((ret = d_fail("gc", what, de, err, errlen)))
		return ret;
	W.gc_valid = json_array_size(valid);
	if (n_released)
		*n_released = 0;
	return 0;
}

static int d_status(const char *socket, unsigned timeout_ms, struct cni_daemon_error *de, char *err,
		    size_t errlen)
{
	(void)socket;
	(void)timeout_ms;
	return d_fail("status", "status", de, err, errlen);
}

static const struct cni_ibvfd_ops fake_ibvfd = {
	.prepare = d_prepare,
	.commit = d_commit,
	.release = d_release,
	.release_at = d_release_at,
	.owner = d_owner,
	.gc = d_gc,
	.status = d_status,
};

/* ------------------------------------------------------- running commands -- */

static struct {
	char *dir, *cache, *sock, *nosock;
	int sock_fd;
} T;

static int setup(void **state)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char *lock;

	(void)state;
	world_reset();
	T.dir = tu_mkdtemp("cni-cmds");
	if (!T.dir)
		return -1;
	T.cache = tu_path(T.dir, "cache");
	T.sock = tu_path(T.dir, "ibvfd.sock");
	T.nosock = tu_path(T.dir, "no-ibvfd.sock");
	lock = tu_path(T.dir, "lock");
	setenv("IBVF_CNI_LOCK_DIR", lock, 1);
	setenv("IBVF_CNI_SOCKET", T.nosock, 1); /* compatibility mode unless configured */
	free(lock);
	/* a socket file nobody listens on: "ibvfd's socket exists" for DEL without a cache */
	T.sock_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", T.sock);
	if (T.sock_fd < 0 || bind(T.sock_fd, (struct sockaddr *)&sa, sizeof(sa)))
		return -1;
	cni_ibvfd = &fake_ibvfd;
	cni_host = &fake_host;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	cni_ibvfd = &cni_ibvfd_real;
	cni_host = &cni_host_real;
	close(T.sock_fd);
	free(T.cache);
	free(T.sock);
	free(T.nosock);
	tu_rmrf(T.dir);
	memset(&T, 0, sizeof(T));
	return 0;
}

/* One invocation: the environment strings and stdin stay alive as long as the context. */
struct call {
	struct cni_ctx ctx;
	char *envs[6];
	char *envp[7];
	char *text;
	int ret;
};

struct conf_opts {
	const char *version; /* default "1.1.0" */
	const char *pci;     /* default VF0 */
	bool compat;	     /* no ibvfd.socket: compatibility mode */
	bool no_rdma_iso;
	bool no_ipam;
	json_t *extra; /* merged into the configuration (stolen) */
};

static char *conf_new(const struct conf_opts *o)
{
	json_t *c = json_pack("{s:s,s:s,s:s,s:s,s:s,s:b,s:{s:[s]}}", "cniVersion",
			      o->version ? o->version : "1.1.0", "name", "ibnet", "type",
			      "ib-sriov", "deviceID", o->pci ? o->pci : VF0, "pkey", "0x10",
			      "rdmaIsolation", !o->no_rdma_iso, "dns", "nameservers", "10.9.0.53");
	char *s;

	assert_non_null(c);
	if (!o->no_ipam)
		json_object_set_new(c, "ipam", json_pack("{s:s}", "type", "fake-ipam"));
	if (!o->compat)
		json_object_set_new(c, "ibvfd", json_pack("{s:s}", "socket", T.sock));
	if (o->extra) {
		json_object_update(c, o->extra);
		json_decref(o->extra);
	}
	s = json_dumps(c, JSON_COMPACT);
	json_decref(c);
	assert_non_null(s);
	return s;
}

static void call_free(struct call *k)
{
	json_decref(k->ctx.result);
	cni_netconf_free(&k->ctx.nc);
	cni_env_free(&k->ctx.env);
	for (size_t i = 0; i < sizeof(k->envs) / sizeof(k->envs[0]); i++)
		free(k->envs[i]);
	free(k->text);
	memset(k, 0, sizeof(*k));
}

/* Run @cmd for container @cid (ifname net1) in @netns (NULL: unset) with @conf (taken). */
static int run(struct call *k, const char *cmd, const char *cid, const char *netns, char *conf)
{
	enum cni_conf_error kind;
	char err[IBVF_ERR_LEN];
	int n = 0;

	memset(k, 0, sizeof(*k));
	k->text = conf;
	assert_true(asprintf(&k->envs[n++], "CNI_COMMAND=%s", cmd) > 0);
	if (cid)
		assert_true(asprintf(&k->envs[n++], "CNI_CONTAINERID=%s", cid) > 0);
	if (netns)
		assert_true(asprintf(&k->envs[n++], "CNI_NETNS=%s", netns) > 0);
	assert_true(asprintf(&k->envs[n++], "CNI_IFNAME=net1") > 0);
	assert_true(asprintf(&k->envs[n++], "CNI_PATH=/opt/cni/bin") > 0);
	assert_true(asprintf(&k->envs[n++], "CNI_ARGS=K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=p") > 0);
	memcpy(k->envp, k->envs, sizeof(k->envs));
	k->envp[n] = NULL;
	assert_int_equal(cni_env_load(&k->ctx.env, k->envp, err, sizeof(err)), 0);
	if (cni_netconf_parse(&k->ctx.nc, conf, strlen(conf), k->ctx.env.cmd, &kind, err,
			      sizeof(err))) {
		print_error("configuration refused: %s\n%s\n", err, conf);
		fail();
	}
	k->ctx.conf_text = conf;
	k->ctx.conf_len = strlen(conf);
	k->ctx.cache_dir = T.cache;
	switch (k->ctx.env.cmd) {
	case CNI_CMD_ADD:
		k->ret = cni_cmd_add(&k->ctx);
		break;
	case CNI_CMD_DEL:
		k->ret = cni_cmd_del(&k->ctx);
		break;
	case CNI_CMD_CHECK:
		k->ret = cni_cmd_check(&k->ctx);
		break;
	case CNI_CMD_GC:
		k->ret = cni_cmd_gc(&k->ctx);
		break;
	case CNI_CMD_STATUS:
		k->ret = cni_cmd_status(&k->ctx);
		break;
	default:
		fail();
	}
	assert_int_equal(W.ns_open, 0); /* every netns the command opened is closed */
	if (k->ret)
		assert_int_equal(k->ret, -1);
	return k->ret;
}

#define assert_log(want)                                                                           \
	do {                                                                                       \
		assert_string_equal(W.log, (want));                                                \
		W.log[0] = 0;                                                                      \
	} while (0)

/* The command failed with CNI code @code and message @msg. */
static void assert_failed(const struct call *k, int code, const char *msg)
{
	if (k->ret != -1 || k->ctx.fail.code != code || strcmp(k->ctx.fail.msg, msg)) {
		print_error("ret %d code %d msg \"%s\" details \"%s\"; wanted code %d \"%s\"\n",
			    k->ret, k->ctx.fail.code, k->ctx.fail.msg, k->ctx.fail.details, code,
			    msg);
		fail();
	}
}

static bool cached(const char *cid)
{
	char *p, name[128];
	bool there;

	snprintf(name, sizeof(name), "%s-net1", cid);
	p = tu_path(T.cache, name);
	there = access(p, F_OK) == 0;
	free(p);
	return there;
}

/* VF @v is back where it started: netdev in the host under its name, no mark, RDMA there too. */
static void assert_vf_home(const struct fvf *v)
{
	assert_string_equal(v->where, "host");
	assert_string_equal(v->name, v->host_name);
	assert_string_equal(v->alias, "");
	assert_string_equal(v->rdma_where, "host");
}

/* A successful ADD of VF @pci for @cid in @netns; the log of it is dropped. */
static void add_ok(const char *cid, const char *netns, const char *pci)
{
	struct call k;

	run(&k, "ADD", cid, netns, conf_new(&(struct conf_opts){.pci = pci}));
	if (k.ret)
		print_error("ADD failed: %d %s: %s\n", k.ctx.fail.code, k.ctx.fail.msg,
			    k.ctx.fail.details);
	assert_int_equal(k.ret, 0);
	call_free(&k);
	W.log[0] = 0;
}

/* ------------------------------------------------------------------- ADD -- */

static void add_daemon_result(const char *version)
{
	char mac[96], alias[64];
	struct call k;
	json_t *r, *ifc, *ip, *dns;

	run(&k, "ADD", "c1", POD_A, conf_new(&(struct conf_opts){.version = version}));
	assert_int_equal(k.ret, 0);
	assert_log("prepare:c1/net1 rdma:mlx5_4>pod to_pod:ib0v2>net1 ipam:ADD ipam_apply:12 "
		   "rc_check:mlx5_4 commit");
	/* the result, as ib_sriov.c prints it (CNI spec "ADD Success") */
	r = cni_result_convert(k.ctx.result, k.ctx.nc.cni_version);
	assert_non_null(r);
	assert_string_equal(jstr(r, "cniVersion"), version);
	assert_int_equal(json_array_size(json_object_get(r, "interfaces")), 1);
	ifc = json_array_get(json_object_get(r, "interfaces"), 0);
	assert_string_equal(jstr(ifc, "name"), "net1");
	assert_string_equal(jstr(ifc, "sandbox"), POD_A);
	mac_for(DMN_GUID, mac, sizeof(mac)); /* the GUID ibvfd assigned, in the IPoIB address */
	assert_string_equal(jstr(ifc, "mac"), mac);
	if (!strcmp(version, "1.1.0")) {
		assert_int_equal(json_integer_value(json_object_get(ifc, "mtu")), 2044);
		assert_string_equal(jstr(ifc, "pciID"), VF0);
	} else { /* 1.0.0 has neither key */
		assert_null(json_object_get(ifc, "mtu"));
		assert_null(json_object_get(ifc, "pciID"));
	}
	assert_int_equal(json_array_size(json_object_get(r, "ips")), 1);
	ip = json_array_get(json_object_get(r, "ips"), 0);
	assert_string_equal(jstr(ip, "address"), "10.1.2.3/24");
	assert_string_equal(jstr(ip, "gateway"), "10.1.2.1");
	assert_int_equal(json_integer_value(json_object_get(ip, "interface")), 0);
	assert_non_null(json_object_get(ip, "interface"));
	assert_string_equal(jstr(json_array_get(json_object_get(r, "routes"), 0), "dst"),
			    "0.0.0.0/0");
	dns = json_object_get(r, "dns");
	assert_string_equal(
		json_string_value(json_array_get(json_object_get(dns, "nameservers"), 0)),
		"10.9.0.53");
	json_decref(r);
	/* the world: VF in the Pod, marked, RDMA device with it, ibvfd handed, cache written */
	snprintf(alias, sizeof(alias), "ibvf %s ib0v2", VF0);
	assert_string_equal(W.vf[0].where, POD_A);
	assert_string_equal(W.vf[0].name, "net1");
	assert_string_equal(W.vf[0].alias, alias);
	assert_true(W.vf[0].up);
	assert_string_equal(W.vf[0].rdma_where, POD_A);
	assert_string_equal(owner_find("c1", "net1")->state, "handed");
	assert_true(cached("c1"));
	call_free(&k);
}

static void test_add_daemon_result_1_1(void **state)
{
	(void)state;
	add_daemon_result("1.1.0");
}

static void test_add_daemon_result_1_0(void **state)
{
	(void)state;
	add_daemon_result("1.0.0");
}

/* ADD fails at a step after prepare: everything done so far is undone, in reverse. */
struct rollback_case {
	const char *fail;
	int code;
	const char *msg;
	const char *log;
};

static const struct rollback_case rollback_cases[] = {
	{"rdma", CNI_ERR_VF, "failed to move the RDMA device",
	 "prepare:c1/net1 rdma:mlx5_4>pod! release:c1/net1"},
	{"to_pod", CNI_ERR_VF, "failed to move the VF netdev into the Pod",
	 "prepare:c1/net1 rdma:mlx5_4>pod to_pod:ib0v2>net1! rdma:mlx5_4>host release:c1/net1"},
	{"ipam:ADD", CNI_ERR_IPAM, "IPAM failed",
	 "prepare:c1/net1 rdma:mlx5_4>pod to_pod:ib0v2>net1 ipam:ADD! to_host:net1>ib0v2 "
	 "rdma:mlx5_4>host release:c1/net1"},
	{"ipam_apply", CNI_ERR_IPAM, "failed to configure IP addresses",
	 "prepare:c1/net1 rdma:mlx5_4>pod to_pod:ib0v2>net1 ipam:ADD ipam_apply:12! ipam:DEL "
	 "to_host:net1>ib0v2 rdma:mlx5_4>host release:c1/net1"},
	{"rc_check", CNI_ERR_RC_CHECK, "RC check failed: VF not handed over",
	 "prepare:c1/net1 rdma:mlx5_4>pod to_pod:ib0v2>net1 ipam:ADD ipam_apply:12 "
	 "rc_check:mlx5_4! ipam:DEL to_host:net1>ib0v2 rdma:mlx5_4>host release:c1/net1"},
	{"commit", CNI_ERR_DAEMON, "ibvfd did not accept the hand-over",
	 "prepare:c1/net1 rdma:mlx5_4>pod to_pod:ib0v2>net1 ipam:ADD ipam_apply:12 "
	 "rc_check:mlx5_4 commit! ipam:DEL to_host:net1>ib0v2 rdma:mlx5_4>host release:c1/net1"},
};

static void test_add_rollback(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(rollback_cases) / sizeof(rollback_cases[0]); i++) {
		const struct rollback_case *rc = &rollback_cases[i];
		struct call k;

		world_reset();
		W.fail = rc->fail;
		W.fail_ret = rc->code == CNI_ERR_DAEMON ? -EREMOTEIO : -EIO;
		W.fail_code = rc->code;
		print_message("ADD failing at %s\n", rc->fail);
		run(&k, "ADD", "c1", POD_A, conf_new(&(struct conf_opts){0}));
		assert_failed(&k, rc->code, rc->msg);
		assert_null(k.ctx.result);
		assert_log(rc->log);
		assert_vf_home(&W.vf[0]);
		assert_null(owner_find("c1", "net1"));
		assert_false(cached("c1"));
		call_free(&k);
	}
}

/* prepare without an answer may still complete in ibvfd: release it; a refusal holds nothing. */
static void test_add_prepare_fails(void **state)
{
	struct call k;

	(void)state;
	W.fail = "prepare";
	W.fail_ret = -ETIMEDOUT;
	W.fail_code = CNI_ERR_TRY_AGAIN;
	run(&k, "ADD", "c1", POD_A, conf_new(&(struct conf_opts){0}));
	assert_failed(&k, CNI_ERR_TRY_AGAIN, "ibvfd could not prepare the VF");
	assert_log("prepare:c1/net1! release:c1/net1");
	call_free(&k);

	W.fail = "prepare";
	W.fail_ret = -EREMOTEIO;
	W.fail_code = CNI_ERR_INVALID_CONFIG; /* e.g. GUID conflict */
	run(&k, "ADD", "c1", POD_A, conf_new(&(struct conf_opts){0}));
	assert_failed(&k, CNI_ERR_INVALID_CONFIG, "ibvfd could not prepare the VF");
	assert_log("prepare:c1/net1!");
	call_free(&k);

	/* ibvfd refuses the PKey: the error names the NAD's "pkey", code 7 (issue 15 item 1) */
	W.fail = "prepare";
	W.fail_ret = -EREMOTEIO;
	W.fail_code = CNI_ERR_INVALID_CONFIG;
	W.fail_rpc = IBVF_RPC_INVALID_PARAMS;
	W.fail_msg = "pkeys[0]: PKey 0x7fff is the default partition";
	run(&k, "ADD", "c1", POD_A, conf_new(&(struct conf_opts){0}));
	assert_failed(&k, CNI_ERR_INVALID_CONFIG, "invalid pkey");
	assert_contains(k.ctx.fail.details, "\"pkey\"");
	assert_contains(k.ctx.fail.details, "0x7fff");
	assert_log("prepare:c1/net1!");
	call_free(&k);
	W.fail_rpc = 0;
	W.fail_msg = NULL;

	W.daemon_down = true;
	run(&k, "ADD", "c1", POD_A, conf_new(&(struct conf_opts){0}));
	assert_failed(&k, CNI_ERR_TRY_AGAIN, "ibvfd could not prepare the VF");
	assert_log("prepare:c1/net1");
	assert_vf_home(&W.vf[0]);
	assert_false(cached("c1"));
	call_free(&k);
}

/* Refused before anything is changed: nothing in the log, nothing to undo. */
static void test_add_refused_early(void **state)
{
	struct call k;

	(void)state;
	W.gone = POD_A;
	run(&k, "ADD", "c1", POD_A, conf_new(&(struct conf_opts){0}));
	assert_failed(&k, CNI_ERR_UNKNOWN_CONTAINER, "cannot open the Pod netns");
	call_free(&k);
	W.gone = NULL;

	/* a netns path that is a regular file: container unknown (3), not 100 (issue 15) */
	{
		char *file = tu_path(T.dir, "not-a-netns"), e[IBVF_ERR_LEN];
		struct cni_ns ns;

		assert_int_equal(tu_write_str(file, "x"), 0);
		assert_int_equal(cni_ns_open(&ns, file, e, sizeof(e)), -EINVAL);
		assert_contains(e, "is not a network namespace");
		W.notns = POD_A;
		run(&k, "ADD", "c1", POD_A, conf_new(&(struct conf_opts){0}));
		assert_failed(&k, CNI_ERR_UNKNOWN_CONTAINER, "cannot open the Pod netns");
		call_free(&k);
		W.notns = NULL;
		free(file);
	}

	run(&k, "ADD", "c1", POD_A, conf_new(&(struct conf_opts){.pci = "0000:3b:00.7"}));
	assert_failed(&k, CNI_ERR_VF, "VF not found");
	call_free(&k);

	W.decoy = POD_A;
	run(&k, "ADD", "c1", POD_A, conf_new(&(struct conf_opts){0}));
	assert_failed(&k, CNI_ERR_VF, "interface exists in the Pod");
	call_free(&k);
	W.decoy = NULL;

	W.shared_rdma = true;
	run(&k, "ADD", "c1", POD_A, conf_new(&(struct conf_opts){0}));
	assert_failed(&k, CNI_ERR_INVALID_CONFIG, "rdmaIsolation needs RDMA netns exclusive mode");
	call_free(&k);

	assert_log("");
	assert_vf_home(&W.vf[0]);
	assert_false(cached("c1"));
}

/* Compatibility mode: the GUID from the runtime is set on the VF, and restored on undo. */
static void test_add_compat(void **state)
{
	json_t *rc = json_pack("{s:{s:s}}", "runtimeConfig", "infinibandGUID",
			       "02:00:00:00:00:00:00:07");
	char mac[96];
	struct call k;

	(void)state;
	run(&k, "ADD", "c1", POD_A,
	    conf_new(&(struct conf_opts){.compat = true, .no_rdma_iso = true, .extra = rc}));
	assert_int_equal(k.ret, 0);
	/* rcCheck by default: RDMA device not isolated, so checked in the host netns */
	assert_log("apply:" VF0 ":0200000000000007 to_pod:ib0v2>net1 ipam:ADD ipam_apply:12 "
		   "rc_check:mlx5_4");
	mac_for(0x0200000000000007ull, mac, sizeof(mac));
	assert_string_equal(
		jstr(json_array_get(json_object_get(k.ctx.result, "interfaces"), 0), "mac"), mac);
	assert_string_equal(W.vf[0].rdma_where, "host");
	call_free(&k);

	run(&k, "DEL", "c1", POD_A, conf_new(&(struct conf_opts){.compat = true}));
	assert_int_equal(k.ret, 0);
	assert_log("ipam:DEL to_host:net1>ib0v2 restore:" VF0 ":00:02:c9:03:00:aa:00:00");
	assert_vf_home(&W.vf[0]);
	assert_true(W.vf[0].guid == OLD_GUID);
	call_free(&k);

	rc = json_pack("{s:{s:s}}", "runtimeConfig", "infinibandGUID", "02:00:00:00:00:00:00:07");
	W.fail = "ipam_apply";
	W.fail_ret = -EEXIST;
	run(&k, "ADD", "c1", POD_A,
	    conf_new(&(struct conf_opts){.compat = true, .no_rdma_iso = true, .extra = rc}));
	assert_failed(&k, CNI_ERR_IPAM, "failed to configure IP addresses");
	assert_log("apply:" VF0 ":0200000000000007 to_pod:ib0v2>net1 ipam:ADD ipam_apply:12! "
		   "ipam:DEL to_host:net1>ib0v2 restore:" VF0 ":00:02:c9:03:00:aa:00:00");
	assert_vf_home(&W.vf[0]);
	assert_true(W.vf[0].guid == OLD_GUID);
	call_free(&k);
}

/*
 * Compatibility mode, no GUID given: a VF whose driver reads back GUID 0 is
 * refused even when its netdev has no IPoIB address to check (issue 15
 * item 5: the Pod got a port that stays INIT); a readable good GUID passes.
 */
static void test_add_compat_dead_vf(void **state)
{
	struct call k;

	(void)state;
	W.vf[0].eth_addr = true;
	W.vf[0].rb_known = true;
	W.vf[0].rb_guid = 0;
	run(&k, "ADD", "c1", POD_A,
	    conf_new(&(struct conf_opts){.compat = true, .no_rdma_iso = true}));
	assert_failed(&k, CNI_ERR_VF, "VF has no valid GUID");
	assert_contains(k.ctx.fail.details, "reads back GUID 0000000000000000");
	assert_vf_home(&W.vf[0]);
	assert_false(cached("c1"));
	call_free(&k);

	/* all-ones is no GUID either */
	W.vf[0].rb_guid = ~0ull;
	run(&k, "ADD", "c1", POD_A,
	    conf_new(&(struct conf_opts){.compat = true, .no_rdma_iso = true}));
	assert_failed(&k, CNI_ERR_VF, "VF has no valid GUID");
	call_free(&k);

	/* no read-back, an IPoIB address with GUID 0: refused by the address */
	W.vf[0].rb_known = false;
	W.vf[0].eth_addr = false;
	W.vf[0].guid = 0;
	run(&k, "ADD", "c1", POD_A,
	    conf_new(&(struct conf_opts){.compat = true, .no_rdma_iso = true}));
	assert_failed(&k, CNI_ERR_VF, "VF has no valid GUID");
	call_free(&k);
	W.vf[0].guid = OLD_GUID;

	/* a good read-back GUID: attached with it */
	W.vf[0].rb_known = true;
	W.vf[0].rb_guid = 0x0002c90300aa0042ull;
	run(&k, "ADD", "c1", POD_A,
	    conf_new(&(struct conf_opts){.compat = true, .no_rdma_iso = true}));
	assert_int_equal(k.ret, 0);
	assert_true(cached("c1"));
	call_free(&k);
}

/* ------------------------------------------------------------------- DEL -- */

/* The steps' times add up to the time from the start to the last mark, exactly. */
static void assert_steps_add_up(const struct cni_steps *st)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < st->n; i++)
		sum += st->ns[i];
	assert_true(st->t0 != 0 && st->last >= st->t0);
	assert_true(sum == st->last - st->t0);
}

static void assert_steps(const struct cni_steps *st, const char *want)
{
	char got[512] = "";
	size_t off = 0;

	for (unsigned i = 0; i < st->n; i++)
		off += (size_t)snprintf(got + off, sizeof(got) - off, "%s%s", i ? " " : "",
					st->name[i]);
	if (strcmp(got, want))
		print_error("steps \"%s\", want \"%s\"\n", got, want);
	assert_string_equal(got, want);
	assert_steps_add_up(st);
}

/*
 * The plugin's per-step times (the debug line "ADD steps (ms)" that
 * bench/bench_cni.py reads): a name marked again adds up, names past
 * CNI_STEPS_MAX go to the last one, and nothing is lost; ADD and DEL mark
 * their steps in order, daemon mode "prepare"/"commit"/"release", compatibility
 * mode "apply"/"restore".
 */
static void test_steps(void **state)
{
	static const char *const many[] = {"s0",  "s1",	 "s2",	"s3",  "s4",  "s5",
					   "s6",  "s7",	 "s8",	"s9",  "s10", "s11",
					   "s12", "s13", "s14", "s15", "s16", "s17"};
	json_t *rc = json_pack("{s:{s:s}}", "runtimeConfig", "infinibandGUID",
			       "02:00:00:00:00:00:00:07");
	struct cni_steps st;
	struct call k;

	(void)state;
	cni_steps_start(&st);
	cni_steps_mark(&st, "a");
	cni_steps_mark(&st, "b");
	usleep(1000);
	cni_steps_mark(&st, "a");
	assert_steps(&st, "a b");
	assert_true(st.ns[0] >= 1000000); /* the second "a" (after the sleep) is in it */
	for (size_t i = 0; i < sizeof(many) / sizeof(many[0]); i++)
		cni_steps_mark(&st, many[i]);
	assert_int_equal(st.n, CNI_STEPS_MAX);
	assert_string_equal(st.name[CNI_STEPS_MAX - 1], "s13");
	assert_steps_add_up(&st);
	/* not started (GC's teardown): marks are ignored */
	memset(&st, 0, sizeof(st));
	cni_steps_mark(&st, "a");
	assert_int_equal(st.n, 0);

	run(&k, "ADD", "c1", POD_A, conf_new(&(struct conf_opts){0}));
	assert_int_equal(k.ret, 0);
	assert_steps(&k.ctx.steps, "validate lock prepare rdma_move netdev_lookup netdev_move "
				   "ipam rc_check cache commit close");
	call_free(&k);
	run(&k, "DEL", "c1", POD_A, conf_new(&(struct conf_opts){0}));
	assert_int_equal(k.ret, 0);
	assert_steps(&k.ctx.steps, "cache_read lock ipam netns_open netdev_move rdma_move "
				   "netns_close release cache_remove close");
	call_free(&k);
	run(&k, "ADD", "c2", POD_A,
	    conf_new(&(struct conf_opts){.compat = true, .no_rdma_iso = true, .extra = rc}));
	assert_int_equal(k.ret, 0);
	assert_steps(&k.ctx.steps,
		     "validate lock apply netdev_lookup netdev_move ipam rc_check cache close");
	call_free(&k);
	run(&k, "DEL", "c2", POD_A, conf_new(&(struct conf_opts){.compat = true}));
	assert_int_equal(k.ret, 0);
	assert_true(strstr(k.ctx.steps.name[k.ctx.steps.n - 3], "restore") != NULL);
	call_free(&k);
}

/*
 * ibvfd calls in two halves (issue 17), on a fake that logs each half: DEL's
 * release.sm goes out before the netdev move and its answer is read after the
 * move and the RDMA device's, then the plain release; ADD's commit goes out
 * before the cache write and its answer is read after it.
 */
static bool staged_refuse; /* release.sm answered as by an ibvfd without it (-32601) */
static char staged_cid[64];

static int d_release_sm_send(const char *socket, unsigned timeout_ms, json_t *owner,
			     const char *pci, uint64_t guid, struct cni_daemon_error *de, char *err,
			     size_t errlen)
{
	(void)socket, (void)timeout_ms, (void)pci, (void)guid;
	memset(de, 0, sizeof(*de));
	(void)err, (void)errlen, (void)owner;
	logf_("release.sm>");
	return 0;
}

static int d_release_sm_recv(bool *sm_removed, struct cni_daemon_error *de, char *err,
			     size_t errlen)
{
	memset(de, 0, sizeof(*de));
	logf_("release.sm<");
	if (staged_refuse) {
		de->ret = -EREMOTEIO;
		de->rpc.code = IBVF_RPC_METHOD_NOT_FOUND;
		de->cni_code = CNI_ERR_DAEMON;
		return ibvf_errf(err, errlen, -EREMOTEIO, "ibvfd: no method release.sm");
	}
	if (sm_removed)
		*sm_removed = true;
	return 0;
}

static int d_commit_send(const char *socket, unsigned timeout_ms, json_t *owner,
			 struct cni_daemon_error *de, char *err, size_t errlen)
{
	(void)socket, (void)timeout_ms, (void)err, (void)errlen;
	memset(de, 0, sizeof(*de));
	snprintf(staged_cid, sizeof(staged_cid), "%s", jstr(owner, "container_id"));
	assert_false(cached(staged_cid)); /* the commit leaves before the cache write */
	logf_("commit>");
	return 0;
}

static int d_commit_recv(struct cni_daemon_error *de, char *err, size_t errlen)
{
	struct fowner *o = owner_find(staged_cid, "net1");

	(void)err, (void)errlen;
	memset(de, 0, sizeof(*de));
	assert_true(cached(staged_cid)); /* ... and its answer is read after it */
	assert_non_null(o);
	strcpy(o->state, "handed");
	logf_("commit<");
	return 0;
}

static const struct cni_ibvfd_ops fake_ibvfd_staged = {
	.prepare = d_prepare,
	.commit = d_commit,
	.release = d_release,
	.release_at = d_release_at,
	.owner = d_owner,
	.gc = d_gc,
	.status = d_status,
	.release_sm_send = d_release_sm_send,
	.release_sm_recv = d_release_sm_recv,
	.commit_send = d_commit_send,
	.commit_recv = d_commit_recv,
};

static void test_staged_calls(void **state)
{
	struct call k;

	(void)state;
	cni_ibvfd = &fake_ibvfd_staged;
	for (int refuse = 0; refuse < 2; refuse++) {
		staged_refuse = refuse;
		run(&k, "ADD", "c1", POD_A, conf_new(&(struct conf_opts){0}));
		assert_int_equal(k.ret, 0);
		assert_non_null(strstr(W.log, "commit> commit<"));
		assert_string_equal(owner_find("c1", "net1")->state, "handed");
		call_free(&k);
		W.log[0] = 0;
		run(&k, "DEL", "c1", POD_A, conf_new(&(struct conf_opts){0}));
		assert_int_equal(k.ret, 0);
		assert_log("ipam:DEL release.sm> to_host:net1>ib0v2 rdma:mlx5_4>host release.sm< "
			   "release:c1/net1");
		assert_null(owner_find("c1", "net1"));
		assert_vf_home(&W.vf[0]);
		assert_false(cached("c1"));
		call_free(&k);
	}
	/* again (no cache, nothing in the Pod): both idempotent, nothing held */
	run(&k, "DEL", "c1", POD_A, conf_new(&(struct conf_opts){0}));
	assert_int_equal(k.ret, 0);
	assert_log("ipam:DEL release.sm> release.sm< release:c1/net1");
	call_free(&k);
	/* no Pod netns (gone): nothing to overlap, release only */
	run(&k, "DEL", "c1", "", conf_new(&(struct conf_opts){0}));
	assert_int_equal(k.ret, 0);
	assert_log("ipam:DEL release:c1/net1");
	call_free(&k);
	staged_refuse = false;
	cni_ibvfd = &fake_ibvfd;
}

static void test_del_twice(void **state)
{
	struct call k;

	(void)state;
	add_ok("c1", POD_A, VF0);
	run(&k, "DEL", "c1", POD_A, conf_new(&(struct conf_opts){0}));
	assert_int_equal(k.ret, 0);
	assert_log("ipam:DEL to_host:net1>ib0v2 rdma:mlx5_4>host release:c1/net1");
	/* the release says where it was (a record adopted after a store loss, issue 14) */
	assert_string_equal(W.rel_pci, VF0);
	assert_true(W.rel_guid != 0);
	assert_vf_home(&W.vf[0]);
	assert_null(owner_find("c1", "net1"));
	assert_false(cached("c1"));
	call_free(&k);

	/* again: no cache, nothing in the Pod; IPAM and ibvfd are asked (both idempotent) */
	run(&k, "DEL", "c1", POD_A, conf_new(&(struct conf_opts){0}));
	assert_int_equal(k.ret, 0);
	assert_log("ipam:DEL release:c1/net1");
	assert_vf_home(&W.vf[0]);
	call_free(&k);
}

static int spool_n(void *arg, const char *name, const struct ibvf_release_req *r)
{
	(void)name;
	(void)r;
	(*(int *)arg)++;
	return 0;
}

/*
 * A container ID with a prefix ibvfd reserves (ibvf-warm-, ibvf-adopted-):
 * ADD is refused, and the DEL the runtime sends after it succeeds without
 * asking ibvfd (whose refusal would fail every DEL the runtime repeats), and
 * leaves no release request in the spool when ibvfd is down (one that
 * ibvfd's start would apply to its own record of that name).
 */
static void test_del_reserved_owner(void **state)
{
	static const char *const cids[] = {"ibvf-warm-0000-03-00.2",
					   "ibvf-adopted-0200000000001001"};
	char *spool = tu_path(T.dir, "release.d");
	struct call k;
	int n;

	(void)state;
	for (size_t i = 0; i < sizeof(cids) / sizeof(cids[0]); i++) {
		W.log[0] = 0;
		run(&k, "ADD", cids[i], POD_A, conf_new(&(struct conf_opts){0}));
		assert_int_not_equal(k.ret, 0);
		call_free(&k);
		W.log[0] = 0;
		run(&k, "DEL", cids[i], POD_A, conf_new(&(struct conf_opts){0}));
		assert_int_equal(k.ret, 0);
		assert_null(strstr(W.log, "release:"));
		call_free(&k);
		W.daemon_down = true;
		run(&k, "DEL", cids[i], POD_A, conf_new(&(struct conf_opts){0}));
		assert_int_equal(k.ret, 0);
		call_free(&k);
		W.daemon_down = false;
		n = 0;
		ibvf_spool_scan(spool, spool_n, &n, NULL, 0); /* no directory: none */
		assert_int_equal(n, 0);
	}
	free(spool);
}

/* No cache and no ibvfd socket: nothing says ibvfd held it, so it is not asked. */
static void test_del_unknown_no_daemon(void **state)
{
	json_t *no = json_pack("{s:{s:s}}", "ibvfd", "socket", T.nosock);
	struct call k;

	(void)state;
	run(&k, "DEL", "c1", POD_A, conf_new(&(struct conf_opts){.extra = no}));
	assert_int_equal(k.ret, 0);
	assert_log("ipam:DEL restore:" VF0 ":");
	assert_vf_home(&W.vf[0]);
	call_free(&k);
}

static void test_del_after_failed_add(void **state)
{
	struct call k;

	(void)state;
	W.fail = "rc_check";
	W.fail_ret = -ETIMEDOUT;
	run(&k, "ADD", "c1", POD_A, conf_new(&(struct conf_opts){0}));
	assert_failed(&k, CNI_ERR_RC_CHECK, "RC check failed: VF not handed over");
	call_free(&k);
	W.log[0] = 0;
	run(&k, "DEL", "c1", POD_A, conf_new(&(struct conf_opts){0}));
	assert_int_equal(k.ret, 0);
	assert_log("ipam:DEL release:c1/net1");
	assert_vf_home(&W.vf[0]);
	call_free(&k);
}

/* The Pod netns is gone (the kernel gave the devices back), or CNI_NETNS is not passed. */
static void test_del_missing_netns(void **state)
{
	struct call k;

	(void)state;
	add_ok("c1", POD_A, VF0);
	W.gone = POD_A;
	snprintf(W.vf[0].name, sizeof(W.vf[0].name), "%s", "ib0v2");
	strcpy(W.vf[0].where, "host");
	W.vf[0].alias[0] = 0;
	strcpy(W.vf[0].rdma_where, "host");
	run(&k, "DEL", "c1", POD_A, conf_new(&(struct conf_opts){0}));
	assert_int_equal(k.ret, 0);
	assert_log("ipam:DEL release:c1/net1");
	assert_false(cached("c1"));
	call_free(&k);

	W.gone = NULL;
	add_ok("c2", POD_B, VF0);
	run(&k, "DEL", "c2", NULL, conf_new(&(struct conf_opts){0})); /* netns from the cache */
	assert_int_equal(k.ret, 0);
	assert_log("ipam:DEL to_host:net1>ib0v2 rdma:mlx5_4>host release:c2/net1");
	assert_vf_home(&W.vf[0]);
	call_free(&k);
}

/* A release ibvfd could not do fails DEL and keeps the cache, so the retry finds the state. */
static int spool_cb(void *arg, const char *name, const struct ibvf_release_req *r)
{
	struct ibvf_release_req *out = arg;

	assert_string_equal(name, "c1.net1.json");
	assert_non_null(r);
	*out = *r;
	return 0;
}

/*
 * ibvfd down at DEL (issue 15 item 7: Podman never retries a failed DEL): the
 * plugin leaves a release request in ibvfd's spool, next to its socket, and
 * DEL succeeds, cache removed. When the spool cannot be written, DEL fails as
 * a transient error and keeps its cache, so a runtime that retries can.
 */
static void test_del_release_fails(void **state)
{
	char *spool = tu_path(T.dir, "release.d"), *file = tu_path(spool, "c1.net1.json");
	struct ibvf_release_req r;
	struct stat st;
	struct call k;

	(void)state;
	/* no spool possible: a regular file where the directory goes */
	assert_int_equal(tu_write_str(spool, "x"), 0);
	add_ok("c1", POD_A, VF0);
	W.daemon_down = true;
	run(&k, "DEL", "c1", POD_A, conf_new(&(struct conf_opts){0}));
	assert_failed(&k, CNI_ERR_TRY_AGAIN, "failed to release the attachment");
	assert_contains(k.ctx.fail.details, "releasing GUID 00:02:c9:03:00:c0:ff:00 in ibvfd");
	assert_log("ipam:DEL to_host:net1>ib0v2 rdma:mlx5_4>host release:c1/net1");
	assert_true(cached("c1"));
	call_free(&k);

	/* the spool can be written: DEL succeeds, the request is on disk */
	assert_int_equal(unlink(spool), 0);
	run(&k, "DEL", "c1", POD_A, conf_new(&(struct conf_opts){0}));
	assert_int_equal(k.ret, 0);
	assert_log("ipam:DEL release:c1/net1");
	assert_false(cached("c1"));
	call_free(&k);
	assert_int_equal(stat(spool, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);
	assert_int_equal(stat(file, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	assert_int_equal(ibvf_spool_scan(spool, spool_cb, &r, NULL, 0), 1);
	assert_string_equal(r.container_id, "c1");
	assert_string_equal(r.ifname, "net1");
	assert_true(r.guid == 0x0002c90300c0ff00ull);
	assert_string_equal(r.device_id, VF0);
	assert_true(r.network[0] && r.created_ms > 0);

	/* ibvfd back: a DEL the runtime repeats still releases and succeeds */
	W.daemon_down = false;
	run(&k, "DEL", "c1", POD_A, conf_new(&(struct conf_opts){0}));
	assert_int_equal(k.ret, 0);
	assert_log("ipam:DEL release:c1/net1");
	assert_null(owner_find("c1", "net1"));
	call_free(&k);
	free(file);
	free(spool);
}

/* ----------------------------------------------------------------- CHECK -- */

/* prevResult = what ADD returned (as the runtime keeps it). */
static json_t *add_with_result(void)
{
	json_t *r;
	struct call k;

	run(&k, "ADD", "c1", POD_A, conf_new(&(struct conf_opts){0}));
	assert_int_equal(k.ret, 0);
	r = cni_result_convert(k.ctx.result, "1.1.0");
	call_free(&k);
	W.log[0] = 0;
	return r;
}

static int run_check(struct call *k, json_t *prev)
{
	return run(k, "CHECK", "c1", POD_A,
		   conf_new(&(struct conf_opts){.extra = json_pack("{s:O}", "prevResult", prev)}));
}

static void mut_guid(json_t *pr)
{
	(void)pr;
	W.vf[0].guid = DMN_GUID + 0x100;
}

static void mut_down(json_t *pr)
{
	(void)pr;
	W.vf[0].up = false;
}

static void mut_gone(json_t *pr)
{
	(void)pr;
	strcpy(W.vf[0].where, "host");
}

static void mut_no_owner(json_t *pr)
{
	(void)pr;
	owner_find("c1", "net1")->used = false;
}

static void mut_prepared(json_t *pr)
{
	(void)pr;
	strcpy(owner_find("c1", "net1")->state, "prepared");
}

static void mut_daemon_guid(json_t *pr)
{
	(void)pr;
	owner_find("c1", "net1")->guid = DMN_GUID + 0x200;
}

static void mut_prev_mac(json_t *pr)
{
	json_object_set_new(json_array_get(json_object_get(pr, "interfaces"), 0), "mac",
			    json_string("00:00:10:49:fe:80:00:00:00:00:00:00:00:02:c9:03:00:00:00:"
					"01"));
}

static void mut_addr(json_t *pr)
{
	(void)pr;
	W.ipam_check_ret = -ENOENT;
}

static void mut_port(json_t *pr)
{
	(void)pr;
	W.port_ret = -ENETDOWN;
}

static void mut_ipam_check(json_t *pr)
{
	(void)pr;
	W.fail = "ipam:CHECK";
	W.fail_ret = -EREMOTEIO;
	W.fail_code = 7;
}

static void mut_daemon_down(json_t *pr)
{
	(void)pr;
	W.daemon_down = true;
}

static const struct {
	void (*mutate)(json_t *pr);
	int code;
	const char *msg;
} check_cases[] = {
	{mut_guid, CNI_ERR_CHECK, "GUID changed"},
	{mut_down, CNI_ERR_CHECK, "interface down"},
	{mut_gone, CNI_ERR_CHECK, "interface missing"},
	{mut_prev_mac, CNI_ERR_CHECK, "hardware address differs from prevResult"},
	{mut_addr, CNI_ERR_CHECK, "address missing"},
	{mut_ipam_check, CNI_ERR_IPAM, "IPAM CHECK failed"},
	{mut_no_owner, CNI_ERR_CHECK, "ibvfd does not hold the VF"},
	{mut_prepared, CNI_ERR_CHECK, "VF not handed over"},
	{mut_daemon_guid, CNI_ERR_CHECK, "GUID differs from ibvfd's"},
	{mut_daemon_down, CNI_ERR_TRY_AGAIN, "cannot ask ibvfd"},
	{mut_port, CNI_ERR_CHECK, "VF port not ready"},
};

static void test_check(void **state)
{
	json_t *prev;
	struct call k;

	(void)state;
	prev = add_with_result();
	run_check(&k, prev);
	if (k.ret)
		print_error("CHECK: %s: %s\n", k.ctx.fail.msg, k.ctx.fail.details);
	assert_int_equal(k.ret, 0);
	assert_log("ipam:CHECK owner:c1/net1");
	call_free(&k);
	json_decref(prev);

	for (size_t i = 0; i < sizeof(check_cases) / sizeof(check_cases[0]); i++) {
		world_reset();
		tu_rmrf(tu_path(T.dir, "cache"));
		prev = add_with_result();
		check_cases[i].mutate(prev);
		print_message("CHECK expecting \"%s\"\n", check_cases[i].msg);
		run_check(&k, prev);
		assert_failed(&k, check_cases[i].code, check_cases[i].msg);
		call_free(&k);
		json_decref(prev);
	}
}

static void test_check_refused(void **state)
{
	json_t *prev;
	struct call k;

	(void)state;
	prev = add_with_result();
	run(&k, "CHECK", "c1", POD_A,
	    conf_new(&(struct conf_opts){.version = "0.3.1",
					 .extra = json_pack("{s:O}", "prevResult", prev)}));
	assert_failed(&k, CNI_ERR_INCOMPATIBLE_VERSION, "config version does not allow CHECK");
	call_free(&k);
	run(&k, "CHECK", "c9", POD_A,
	    conf_new(&(struct conf_opts){.extra = json_pack("{s:O}", "prevResult", prev)}));
	assert_failed(&k, CNI_ERR_CHECK, "no record of this attachment");
	call_free(&k);
	json_decref(prev);
	assert_log("");
}

/* -------------------------------------------------------------------- GC -- */

static char *gc_conf(const char *version, const char *valid_cid)
{
	json_t *v = valid_cid ? json_pack("{s:[{s:s,s:s}]}", "cni.dev/valid-attachments",
					  "containerID", valid_cid, "ifname", "net1")
			      : NULL;

	return conf_new(&(struct conf_opts){.version = version, .extra = v});
}

static void test_gc(void **state)
{
	struct call k;

	(void)state;
	add_ok("c1", POD_A, VF0);
	add_ok("c2", POD_B, VF1);
	run(&k, "GC", NULL, NULL, gc_conf("1.1.0", "c1"));
	assert_int_equal(k.ret, 0);
	/* c2 torn down with IPAM DEL naming c2 (not the caller), then ibvfd's gc, IPAM's GC */
	assert_log("ipam:DEL:c2 to_host:net1>ib0v3 rdma:mlx5_5>host release:c2/net1 gc:1 ipam:GC");
	assert_int_equal(W.gc_valid, 1);
	assert_vf_home(&W.vf[1]);
	assert_false(cached("c2"));
	assert_null(owner_find("c2", "net1"));
	/* c1 untouched */
	assert_true(cached("c1"));
	assert_string_equal(W.vf[0].where, POD_A);
	assert_string_equal(W.vf[0].rdma_where, POD_A);
	assert_string_equal(owner_find("c1", "net1")->state, "handed");
	call_free(&k);

	/* an IPAM plugin before 1.1.0 gets no GC; ibvfd's gc failing fails GC, after the sweep */
	W.ipam_ver = 10000;
	W.fail = "gc";
	W.fail_ret = -EREMOTEIO;
	W.fail_code = CNI_ERR_DAEMON;
	run(&k, "GC", NULL, NULL, gc_conf("1.1.0", "c9"));
	assert_failed(&k, CNI_ERR_DAEMON, "ibvfd GC failed");
	assert_log("ipam:DEL:c1 to_host:net1>ib0v2 rdma:mlx5_4>host release:c1/net1 gc:1!");
	assert_vf_home(&W.vf[0]);
	assert_false(cached("c1"));
	call_free(&k);
}

static void test_gc_refused(void **state)
{
	struct call k;

	(void)state;
	add_ok("c1", POD_A, VF0);
	run(&k, "GC", NULL, NULL, gc_conf("1.1.0", NULL));
	assert_failed(&k, CNI_ERR_INVALID_CONFIG, "cni.dev/valid-attachments missing");
	call_free(&k);
	run(&k, "GC", NULL, NULL, gc_conf("1.0.0", NULL));
	assert_failed(&k, CNI_ERR_INCOMPATIBLE_VERSION, "config version does not allow GC");
	call_free(&k);
	assert_log("");
	assert_true(cached("c1"));
	assert_string_equal(W.vf[0].where, POD_A);
}

/* ---------------------------------------------------------------- STATUS -- */

static void test_status(void **state)
{
	struct call k;

	(void)state;
	run(&k, "STATUS", NULL, NULL, conf_new(&(struct conf_opts){0}));
	assert_int_equal(k.ret, 0);
	assert_log("status ipam:STATUS");
	call_free(&k);

	W.daemon_down = true; /* CNI spec "Error codes": 50, the plugin is not available */
	run(&k, "STATUS", NULL, NULL, conf_new(&(struct conf_opts){0}));
	assert_failed(&k, CNI_ERR_NOT_AVAILABLE, "ibvfd not available");
	assert_log("status");
	call_free(&k);
	W.daemon_down = false;

	W.fail = "ipam:STATUS"; /* 51: available with limits, passed on from the IPAM plugin */
	W.fail_ret = -EREMOTEIO;
	W.fail_code = CNI_ERR_NOT_AVAILABLE_LIMITED;
	run(&k, "STATUS", NULL, NULL, conf_new(&(struct conf_opts){0}));
	assert_failed(&k, CNI_ERR_NOT_AVAILABLE_LIMITED, "IPAM plugin not available");
	assert_log("status ipam:STATUS!");
	call_free(&k);

	W.fail = "ipam:STATUS"; /* another code from IPAM is 50 */
	W.fail_code = CNI_ERR_IO;
	run(&k, "STATUS", NULL, NULL, conf_new(&(struct conf_opts){0}));
	assert_failed(&k, CNI_ERR_NOT_AVAILABLE, "IPAM plugin not available");
	call_free(&k);

	W.ipam_ver = 0;
	run(&k, "STATUS", NULL, NULL, conf_new(&(struct conf_opts){0}));
	assert_failed(&k, CNI_ERR_NOT_AVAILABLE, "IPAM plugin not available");
	call_free(&k);

	W.ipam_ver = 10000; /* no STATUS before 1.1.0: not asked */
	W.log[0] = 0;
	run(&k, "STATUS", NULL, NULL, conf_new(&(struct conf_opts){0}));
	assert_int_equal(k.ret, 0);
	assert_log("status");
	call_free(&k);

	run(&k, "STATUS", NULL, NULL, conf_new(&(struct conf_opts){.version = "1.0.0"}));
	assert_failed(&k, CNI_ERR_INCOMPATIBLE_VERSION, "config version does not allow STATUS");
	call_free(&k);
}

/* The real ibvfd client: a socket nobody listens on, and no socket file at all. */
static void test_status_real_client(void **state)
{
	json_t *no = json_pack("{s:{s:s}}", "ibvfd", "socket", T.nosock);
	struct call k;

	(void)state;
	cni_ibvfd = &cni_ibvfd_real;
	run(&k, "STATUS", NULL, NULL, conf_new(&(struct conf_opts){.no_ipam = true}));
	assert_failed(&k, CNI_ERR_NOT_AVAILABLE, "ibvfd not available");
	call_free(&k);
	run(&k, "STATUS", NULL, NULL, conf_new(&(struct conf_opts){.no_ipam = true, .extra = no}));
	assert_failed(&k, CNI_ERR_NOT_AVAILABLE, "ibvfd not available");
	call_free(&k);
	assert_log("");
}

/* ----------------------------------------------- the binary: bad input -- */

/* Run ib-sriov with @cmd, CNI_NETNS (unless @no_netns) and @stdin_text; parse its stdout. */
static json_t *plugin(const char *cmd, bool no_netns, const char *stdin_text, int *status)
{
	const char *bin = tu_binary("IB_SRIOV");
	const char *argv[] = {"/bin/sh", "-c", "exec \"$IB_SRIOV\" <\"$IN\"", NULL};
	char *in = tu_path(T.dir, "stdin"), *env[12];
	struct tu_result r;
	json_t *out;
	int n = 0;

	assert_non_null(bin);
	assert_int_equal(tu_write_str(in, stdin_text), 0);
	assert_true(asprintf(&env[n++], "IB_SRIOV=%s", bin) > 0);
	assert_true(asprintf(&env[n++], "IN=%s", in) > 0);
	assert_true(asprintf(&env[n++], "CNI_COMMAND=%s", cmd) > 0);
	assert_true(asprintf(&env[n++], "CNI_CONTAINERID=c1") > 0);
	if (!no_netns)
		assert_true(asprintf(&env[n++], "CNI_NETNS=%s", POD_A) > 0);
	assert_true(asprintf(&env[n++], "CNI_IFNAME=net1") > 0);
	assert_true(asprintf(&env[n++], "CNI_PATH=/nonexistent") > 0);
	assert_true(asprintf(&env[n++], "IBVF_CNI_CACHE_DIR=%s", T.cache) > 0);
	assert_true(asprintf(&env[n++], "IBVF_CNI_LOCK_DIR=%s/lock", T.dir) > 0);
	assert_true(asprintf(&env[n++], "IBVF_CNI_SOCKET=%s", T.nosock) > 0);
	env[n] = NULL;
	assert_int_equal(tu_run(&r, (const char *const *)env, 30, argv), 0);
	*status = r.status;
	out = json_loads(r.out, 0, NULL);
	if (!out)
		print_error("stdout not JSON: \"%s\" (stderr \"%s\")\n", r.out, r.err);
	assert_non_null(out);
	tu_result_free(&r);
	for (int i = 0; i < n; i++)
		free(env[i]);
	free(in);
	return out;
}

static void assert_plugin_error(json_t *o, int status, int code, const char *details)
{
	assert_int_equal(status, 1);
	assert_int_equal(json_integer_value(json_object_get(o, "code")), code);
	assert_true(json_string_value(json_object_get(o, "msg"))[0] != 0);
	assert_contains(jstr(o, "details"), details);
}

static void test_binary_bad_input(void **state)
{
	const char *good = "{\"cniVersion\":\"1.0.0\",\"name\":\"ibnet\",\"type\":\"ib-sriov\","
			   "\"deviceID\":\"" VF0 "\"}";
	json_t *o;
	int st;

	(void)state;
	o = plugin("ADD", false, "{\"cniVersion\":\"1.0.0\",\"name\":", &st);
	assert_plugin_error(o, st, CNI_ERR_DECODE, "");
	json_decref(o);

	o = plugin("ADD", true, good, &st);
	assert_plugin_error(o, st, CNI_ERR_INVALID_ENV, "CNI_NETNS");
	json_decref(o);

	o = plugin("ADD", false,
		   "{\"cniVersion\":\"9.9.9\",\"name\":\"ibnet\",\"type\":\"ib-sriov\","
		   "\"deviceID\":\"" VF0 "\"}",
		   &st);
	assert_plugin_error(o, st, CNI_ERR_INCOMPATIBLE_VERSION, "9.9.9");
	json_decref(o);

	o = plugin("ADD", false,
		   "{\"cniVersion\":\"1.0.0\",\"name\":\"ibnet\",\"type\":\"ib-sriov\"}", &st);
	assert_plugin_error(o, st, CNI_ERR_INVALID_CONFIG, "deviceID");
	assert_string_equal(jstr(o, "cniVersion"), "1.0.0");
	json_decref(o);

	o = plugin("FROB", false, good, &st);
	assert_plugin_error(o, st, CNI_ERR_INVALID_ENV, "CNI_COMMAND");
	json_decref(o);
}

/* No CNI_COMMAND (run by hand): name, version, CNI versions on stderr, nothing on stdout, 0. */
static void test_binary_about(void **state)
{
	const char *bin = tu_binary("IB_SRIOV");
	const char *argv[] = {"/bin/sh", "-c", "exec \"$IB_SRIOV\" </dev/null", NULL};
	char *env[3] = {NULL};
	struct tu_result r;

	(void)state;
	assert_non_null(bin);
	assert_true(asprintf(&env[0], "IB_SRIOV=%s", bin) > 0);
	for (int empty = 0; empty < 2; empty++) {
		if (empty)
			assert_true(asprintf(&env[1], "CNI_COMMAND=") > 0);
		assert_int_equal(tu_run(&r, (const char *const *)env, 30, argv), 0);
		assert_int_equal(r.status, 0);
		assert_string_equal(r.out, "");
		assert_contains(r.err, "ib-sriov");
		assert_contains(r.err, IBVF_VERSION);
		assert_contains(r.err, "CNI protocol versions supported: 0.1.0,");
		assert_contains(r.err, "1.1.0");
		tu_result_free(&r);
	}
	free(env[0]);
	free(env[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_add_daemon_result_1_1, setup, teardown),
		cmocka_unit_test_setup_teardown(test_binary_about, setup, teardown),
		cmocka_unit_test_setup_teardown(test_add_daemon_result_1_0, setup, teardown),
		cmocka_unit_test_setup_teardown(test_add_rollback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_add_prepare_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_add_refused_early, setup, teardown),
		cmocka_unit_test_setup_teardown(test_add_compat, setup, teardown),
		cmocka_unit_test_setup_teardown(test_add_compat_dead_vf, setup, teardown),
		cmocka_unit_test_setup_teardown(test_del_twice, setup, teardown),
		cmocka_unit_test_setup_teardown(test_staged_calls, setup, teardown),
		cmocka_unit_test_setup_teardown(test_steps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_del_unknown_no_daemon, setup, teardown),
		cmocka_unit_test_setup_teardown(test_del_reserved_owner, setup, teardown),
		cmocka_unit_test_setup_teardown(test_del_after_failed_add, setup, teardown),
		cmocka_unit_test_setup_teardown(test_del_missing_netns, setup, teardown),
		cmocka_unit_test_setup_teardown(test_del_release_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_check, setup, teardown),
		cmocka_unit_test_setup_teardown(test_check_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gc, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gc_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_real_client, setup, teardown),
		cmocka_unit_test_setup_teardown(test_binary_bad_input, setup, teardown),
	};
	const char *lvl = getenv("IBVF_TEST_LOG_LEVEL");

	ibvf_log_init("test_cni_cmds", IBVF_LOG_STDERR, lvl ? atoi(lvl) : LOG_CRIT);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
