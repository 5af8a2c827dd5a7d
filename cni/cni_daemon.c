// SPDX-License-Identifier: MIT
/* ib-sriov CNI plugin: ibvfd calls (prepare, commit, release, list, gc, status). */
#include "cni_daemon.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <ibvf/api.h>

#include "cni_result.h"
#include "err.h"
#include "log.h"

/** Owners asked for per "list" call. */
#define CNI_LIST_PAGE 500

enum cni_mode cni_mode_select(const struct cni_netconf *nc, const char **socket)
{
	const char *env = getenv("IBVF_CNI_SOCKET");
	struct stat st;

	*socket = nc->ibvfd_socket ? nc->ibvfd_socket : env && *env ? env : IBVF_API_DEFAULT_SOCKET;
	if (nc->ib_kubernetes_enabled)
		return CNI_MODE_COMPAT;
	if (nc->ibvfd_socket)
		return CNI_MODE_DAEMON;
	if (!stat(*socket, &st) && S_ISSOCK(st.st_mode))
		return CNI_MODE_DAEMON;
	return CNI_MODE_COMPAT;
}

json_t *cni_owner_new(const char *container_id, const char *ifname, const char *pod_namespace,
		      const char *pod_name, const char *pod_uid, const char *network)
{
	json_t *o = json_pack("{s:s,s:s}", "container_id", container_id, "ifname", ifname);

	if (!o)
		return NULL;
	if (pod_namespace && *pod_namespace)
		json_object_set_new(o, "pod_namespace", json_string(pod_namespace));
	if (pod_name && *pod_name)
		json_object_set_new(o, "pod_name", json_string(pod_name));
	if (pod_uid && *pod_uid)
		json_object_set_new(o, "pod_uid", json_string(pod_uid));
	if (network && *network)
		json_object_set_new(o, "network", json_string(network));
	return o;
}

/*
 * The CNI error code for a failed call (CNI spec 1.1 "Error"): 11 (try again
 * later) only for what a retry can fix (no answer, busy, not ready yet, the
 * port not up yet, the deadline); permanent failures get permanent codes.
 */
static int cni_code_for(int ret, const struct ibvf_rpc_error *rpc)
{
	if (ret != -EREMOTEIO) /* no answer: socket missing, refused, timed out */
		return CNI_ERR_TRY_AGAIN;
	switch (rpc->code) {
	case IBVF_RPC_BUSY:
	case IBVF_RPC_NOT_READY:
	case IBVF_RPC_DEADLINE:
	case IBVF_RPC_PORT_NOT_READY:
		return CNI_ERR_TRY_AGAIN;
	case IBVF_RPC_GUID_CONFLICT:
	case IBVF_RPC_INVALID_PARAMS:
		return CNI_ERR_INVALID_CONFIG;
	case IBVF_RPC_VF_ERROR:
	case IBVF_RPC_VF_IN_USE: /* deviceID names a VF another Pod holds: permanent */
		return CNI_ERR_VF;
	default:
		return CNI_ERR_DAEMON;
	}
}

/*
 * The one connection to ibvfd a plugin process keeps: ADD's prepare and
 * commit (and a rollback's release) go over it instead of one connection
 * each (issue 17). ibvf_api_conn_call() replaces it when ibvfd has closed it.
 */
static struct ibvf_api_conn *kept;
static char kept_socket[sizeof(((struct sockaddr_un *)0)->sun_path)];

static int kept_conn(const char *socket, char *err, size_t errlen)
{
	int ret;

	if (kept && !strcmp(kept_socket, socket))
		return 0;
	cni_daemon_disconnect();
	ret = ibvf_api_conn_open(socket, &kept, err, errlen);
	if (!ret)
		snprintf(kept_socket, sizeof(kept_socket), "%s", socket);
	return ret;
}

void cni_daemon_disconnect(void)
{
	if (kept)
		log_debug("ibvfd at %s: %u connection(s) made", kept_socket,
			  ibvf_api_conn_connects(kept));
	ibvf_api_conn_close(kept);
	kept = NULL;
	kept_socket[0] = 0;
}

static void call_failed(const char *method, int ret, struct cni_daemon_error *de, const char *err)
{
	de->ret = ret;
	de->cni_code = cni_code_for(ret, &de->rpc);
	log_debug("ibvfd %s: %s", method, err);
}

/* The first half of call(): @method's request is out on the kept connection. */
static int call_send(const char *socket, const char *method, json_t *params, unsigned timeout_ms,
		     struct cni_daemon_error *de, char *err, size_t errlen)
{
	int ret;

	memset(de, 0, sizeof(*de));
	ret = kept_conn(socket, err, errlen);
	if (!ret)
		ret = ibvf_api_conn_send(kept, method, params, (int)timeout_ms, err, errlen);
	if (ret)
		call_failed(method, ret, de, err);
	return ret;
}

/* The second half: the reply of the request call_send() sent. */
static int call_recv(const char *method, json_t **result, struct cni_daemon_error *de, char *err,
		     size_t errlen)
{
	int ret;

	memset(de, 0, sizeof(*de));
	*result = NULL;
	ret = kept ? ibvf_api_conn_recv(kept, result, &de->rpc, err, errlen)
		   : ibvf_errf(err, errlen, -EINVAL, "no request to ibvfd waits for a reply");
	if (ret) {
		call_failed(method, ret, de, err);
	} else if (json_object_get(*result, "timing") && ibvf_log_level() >= LOG_DEBUG) {
		/* ibvfd's per-step ms (docs/api.md "Per-step timing") */
		char *t = json_dumps(json_object_get(*result, "timing"),
				     JSON_COMPACT | JSON_REAL_PRECISION(9));

		log_debug("ibvfd %s timing (ms): %s", method, t ? t : "?");
		free(t);
	}
	return ret;
}

static int call(const char *socket, const char *method, json_t *params, unsigned timeout_ms,
		json_t **result, struct cni_daemon_error *de, char *err, size_t errlen)
{
	int ret = call_send(socket, method, params, timeout_ms, de, err, errlen);

	*result = NULL;
	return ret ? ret : call_recv(method, result, de, err, errlen);
}

static void copy(char *dst, size_t len, json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	snprintf(dst, len, "%s", s ? s : "");
}

static int parse_prepared(json_t *r, const struct cni_netconf *nc, struct cni_prepared *out,
			  char *err, size_t errlen)
{
	const char *g = json_string_value(json_object_get(r, "guid"));
	json_t *e, *vf = json_object_get(r, "vf_index");
	size_t i;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < CNI_MAX_PKEYS; i++)
		out->pkey_index[i] = -1;
	if (!g || ibvf_guid_parse(g, &out->guid, NULL, 0) || !ibvf_guid_is_assignable(out->guid))
		return ibvf_errf(err, errlen, -EPROTO, "ibvfd prepare: reply has no valid guid");
	copy(out->pf, sizeof(out->pf), r, "pf");
	copy(out->netdev, sizeof(out->netdev), r, "netdev");
	copy(out->rdma_dev, sizeof(out->rdma_dev), r, "rdma_dev");
	copy(out->port_state, sizeof(out->port_state), r, "port_state");
	out->vf_index = json_is_integer(vf) ? (int)json_integer_value(vf) : -1;
	json_array_foreach(json_object_get(r, "pkeys"), i, e)
	{
		const char *k = json_string_value(json_object_get(e, "pkey"));
		json_t *idx = json_object_get(e, "index");
		uint16_t v;

		if (!k || ibvf_pkey_parse(k, &v, NULL, 0) || !json_is_integer(idx))
			continue;
		for (size_t j = 0; j < nc->n_pkeys; j++)
			if (nc->pkeys[j].key == ibvf_pkey_key(v))
				out->pkey_index[j] = (int)json_integer_value(idx);
	}
	return 0;
}

int cni_daemon_prepare(const char *socket, const struct cni_netconf *nc, json_t *owner,
		       const char *pci, struct cni_prepared *out, struct cni_daemon_error *de,
		       char *err, size_t errlen)
{
	json_t *params = json_pack("{s:O,s:s,s:[]}", "owner", owner, "pci", pci, "pkeys");
	json_t *pkeys, *res = NULL;
	int ret;

	if (!params)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	pkeys = json_object_get(params, "pkeys");
	for (size_t i = 0; i < nc->n_pkeys; i++) {
		char k[8];

		snprintf(k, sizeof(k), "0x%04x", nc->pkeys[i].key);
		json_array_append_new(pkeys,
				      json_pack("{s:s,s:s}", "pkey", k, "membership",
						ibvf_membership_name(nc->pkeys[i].membership)));
	}
	if (nc->guid_source) {
		char g[IBVF_GUID_STR_LEN];

		json_object_set_new(params, "guid", json_string(ibvf_guid_format(nc->guid, g)));
	}
	if (nc->link_state != CNI_LINK_STATE_UNSET)
		json_object_set_new(params, "link_state",
				    json_string(cni_link_state_name(nc->link_state)));
	if (nc->pkey_index0 >= 0)
		json_object_set_new(params, "index0", json_boolean(nc->pkey_index0));
	ret = call(socket, "prepare", params, nc->ibvfd_timeout_ms, &res, de, err, errlen);
	json_decref(params);
	if (!ret) {
		ret = parse_prepared(res, nc, out, err, errlen);
		if (ret) {
			de->ret = ret;
			de->cni_code = CNI_ERR_DAEMON;
		}
	}
	json_decref(res);
	return ret;
}

int cni_daemon_commit(const char *socket, unsigned timeout_ms, json_t *owner,
		      struct cni_daemon_error *de, char *err, size_t errlen)
{
	json_t *params = json_pack("{s:O}", "owner", owner), *res = NULL;
	int ret = call(socket, "commit", params, timeout_ms, &res, de, err, errlen);

	json_decref(params);
	json_decref(res);
	return ret;
}

int cni_daemon_commit_send(const char *socket, unsigned timeout_ms, json_t *owner,
			   struct cni_daemon_error *de, char *err, size_t errlen)
{
	json_t *params = json_pack("{s:O}", "owner", owner);
	int ret;

	if (!params)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	ret = call_send(socket, "commit", params, timeout_ms, de, err, errlen);
	json_decref(params);
	return ret;
}

int cni_daemon_commit_recv(struct cni_daemon_error *de, char *err, size_t errlen)
{
	json_t *res = NULL;
	int ret = call_recv("commit", &res, de, err, errlen);

	json_decref(res);
	return ret;
}

/* release's and release.sm's params: the owner, and where it was (cache) */
static json_t *release_params(json_t *owner, const char *pci, uint64_t guid)
{
	json_t *params = json_pack("{s:O}", "owner", owner);
	char g[IBVF_GUID_STR_LEN];

	if (params && pci && *pci)
		json_object_set_new(params, "pci", json_string(pci));
	if (params && guid)
		json_object_set_new(params, "guid", json_string(ibvf_guid_format(guid, g)));
	return params;
}

int cni_daemon_release_sm_send(const char *socket, unsigned timeout_ms, json_t *owner,
			       const char *pci, uint64_t guid, struct cni_daemon_error *de,
			       char *err, size_t errlen)
{
	json_t *params = release_params(owner, pci, guid);
	int ret;

	if (!params)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	ret = call_send(socket, "release.sm", params, timeout_ms, de, err, errlen);
	json_decref(params);
	return ret;
}

int cni_daemon_release_sm_recv(bool *sm_removed, struct cni_daemon_error *de, char *err,
			       size_t errlen)
{
	json_t *res = NULL;
	int ret = call_recv("release.sm", &res, de, err, errlen);

	if (sm_removed)
		*sm_removed = !ret && json_is_true(json_object_get(res, "sm_removed"));
	json_decref(res);
	return ret;
}

int cni_daemon_release(const char *socket, unsigned timeout_ms, json_t *owner, bool *released,
		       struct cni_daemon_error *de, char *err, size_t errlen)
{
	return cni_daemon_release_at(socket, timeout_ms, owner, NULL, 0, released, de, err, errlen);
}

int cni_daemon_release_at(const char *socket, unsigned timeout_ms, json_t *owner, const char *pci,
			  uint64_t guid, bool *released, struct cni_daemon_error *de, char *err,
			  size_t errlen)
{
	json_t *params = release_params(owner, pci, guid), *res = NULL;
	int ret;

	ret = call(socket, "release", params, timeout_ms, &res, de, err, errlen);

	if (!ret && released)
		*released = json_is_true(json_object_get(res, "released"));
	json_decref(params);
	json_decref(res);
	return ret;
}

/* Look @container_id/@ifname up in one page of "list"; 1 found, 0 not, <0 error. */
static int find_owner(json_t *res, const char *container_id, const char *ifname, uint64_t *guid,
		      char *state)
{
	json_t *e;
	size_t i;

	json_array_foreach(json_object_get(res, "owners"), i, e)
	{
		json_t *o = json_object_get(e, "owner");
		const char *c = json_string_value(json_object_get(o, "container_id"));
		const char *n = json_string_value(json_object_get(o, "ifname"));
		const char *g = json_string_value(json_object_get(e, "guid"));

		if (!c || !n || strcmp(c, container_id) || strcmp(n, ifname))
			continue;
		*guid = 0;
		if (g)
			ibvf_guid_parse(g, guid, NULL, 0);
		copy(state, 32, e, "state");
		return 1;
	}
	return 0;
}

int cni_daemon_owner(const char *socket, unsigned timeout_ms, const char *network,
		     const char *container_id, const char *ifname, uint64_t *guid, char *state,
		     struct cni_daemon_error *de, char *err, size_t errlen)
{
	json_int_t offset = 0, total;
	int ret, found = 0;

	/* "list" is paged (an answer must fit one line with 10,000+ owners) */
	do {
		json_t *params = json_pack("{s:I,s:I}", "limit", (json_int_t)CNI_LIST_PAGE,
					   "offset", offset);
		json_t *res = NULL;
		size_t n;

		if (!params)
			return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		if (network && *network)
			json_object_set_new(params, "network", json_string(network));
		ret = call(socket, "list", params, timeout_ms, &res, de, err, errlen);
		json_decref(params);
		if (ret)
			return ret;
		found = find_owner(res, container_id, ifname, guid, state);
		n = json_array_size(json_object_get(res, "owners"));
		total = json_is_integer(json_object_get(res, "total"))
				? json_integer_value(json_object_get(res, "total"))
				: 0; /* no paging: the whole list came */
		json_decref(res);
		offset += (json_int_t)n;
		if (!n)
			break;
	} while (!found && offset < total);
	if (!found)
		return ibvf_errf(err, errlen, -ENOENT, "ibvfd has no owner %s/%s", container_id,
				 ifname);
	return 0;
}

int cni_daemon_gc(const char *socket, unsigned timeout_ms, const char *network, json_t *valid,
		  size_t *n_released, struct cni_daemon_error *de, char *err, size_t errlen)
{
	json_t *params = json_pack("{s:[]}", "valid"), *res = NULL, *e;
	size_t i;
	int ret;

	if (!params)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	if (network && *network)
		json_object_set_new(params, "network", json_string(network));
	json_array_foreach(valid, i, e) json_array_append_new(
		json_object_get(params, "valid"),
		json_pack("{s:O,s:O}", "container_id", json_object_get(e, "containerID"), "ifname",
			  json_object_get(e, "ifname")));
	ret = call(socket, "gc", params, timeout_ms, &res, de, err, errlen);
	if (!ret && n_released)
		*n_released = json_array_size(json_object_get(res, "released"));
	if (!ret && json_array_size(json_object_get(res, "skipped_busy")))
		log_warn("GC: ibvfd skipped %zu owners of network %s that are busy; the next GC "
			 "or its reconciliation releases them",
			 json_array_size(json_object_get(res, "skipped_busy")),
			 network ? network : "(all)");
	json_decref(params);
	json_decref(res);
	return ret;
}

int cni_daemon_status(const char *socket, unsigned timeout_ms, struct cni_daemon_error *de,
		      char *err, size_t errlen)
{
	json_t *res = NULL, *b, *first;
	const char *berr, *check, *reason;
	int ret = call(socket, "status", NULL, timeout_ms, &res, de, err, errlen);

	if (ret)
		return ret;
	b = json_object_get(res, "backend");
	berr = json_string_value(json_object_get(b, "error"));
	/* the daemon's own reasons (store, SM calls, reconciliation) when it gives them */
	first = json_array_get(json_object_get(res, "not_ready"), 0);
	check = json_string_value(json_object_get(first, "check"));
	reason = json_string_value(json_object_get(first, "reason"));
	if (!json_is_true(json_object_get(res, "ready")) && check && reason)
		ret = ibvf_errf(err, errlen, -EAGAIN, "ibvfd is not ready: %s: %s%s", check, reason,
				json_array_size(json_object_get(res, "not_ready")) > 1
					? " (more: ibvfctl daemon status)"
					: "");
	else if (!json_is_true(json_object_get(res, "ready")) ||
		 !json_is_true(json_object_get(b, "ok")))
		ret = ibvf_errf(err, errlen, -EAGAIN, "ibvfd is not ready: SM backend %s %s%s%s",
				json_string_value(json_object_get(b, "name"))
					? json_string_value(json_object_get(b, "name"))
					: "?",
				json_is_true(json_object_get(b, "ok")) ? "validated"
								       : "not validated",
				berr ? ": " : "", berr ? berr : "");
	json_decref(res);
	return ret;
}
