// SPDX-License-Identifier: MIT
/*
 * The engine's JSON-RPC layer (include/ibvf/api.h): the method table,
 * params -> typed requests (struct eng_req, checked here), typed results ->
 * JSON. Besides api_server.c (framing), the only engine file that knows the
 * API's JSON shapes. A method is one line of the table: its name, the
 * operation it starts, its parser and its result builder.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ibvf/api.h>
#include <ibvf/types.h>

#include "engine_int.h"
#include "clock.h"
#include "engine_metrics.h"
#include "log.h"

/* -------------------------------------------------------------- params -- */

static int copy_str(json_t *o, const char *key, char *dst, size_t len, bool required, char *err,
		    size_t errlen)
{
	json_t *v = json_object_get(o, key);

	if (!v || json_is_null(v)) {
		if (required)
			return ibvf_errf(err, errlen, -EINVAL, "missing \"%s\"", key);
		return 0;
	}
	if (!json_is_string(v))
		return ibvf_errf(err, errlen, -EINVAL, "\"%s\" must be a string", key);
	if (json_string_length(v) >= len)
		return ibvf_errf(err, errlen, -EINVAL, "\"%s\" is longer than %zu bytes", key,
				 len - 1);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return ibvf_errf(err, errlen, -EINVAL, "\"%s\" contains a NUL byte", key);
	memcpy(dst, json_string_value(v), json_string_length(v) + 1);
	if (required && !dst[0])
		return ibvf_errf(err, errlen, -EINVAL, "\"%s\" is empty", key);
	return 0;
}

/*
 * The pseudo-owners of ibvfd's own records (guid_pool.h): a warm VF's
 * (warm_vf.c) and one `ibvfctl pool rebuild` adopted from a VF. A caller
 * acting as one would be answered with that record as its attachment, or
 * have its own attachment taken for a warm VF or released by another
 * owner's release naming its VF. -EINVAL with the reason in @err, or 0.
 */
static int reserved_owner(const char *cid, char *err, size_t errlen)
{
	bool warm = !strncmp(cid, IBVF_OWNER_WARM_PREFIX, strlen(IBVF_OWNER_WARM_PREFIX));

	if (!ibvf_owner_reserved(cid)) /* <ibvf/api.h>: the one list of the prefixes */
		return 0;
	return ibvf_errf(err, errlen, -EINVAL,
			 "container_id '%.64s' starts with '%s', which ibvfd reserves for %s", cid,
			 warm ? IBVF_OWNER_WARM_PREFIX : IBVF_OWNER_ADOPTED_PREFIX,
			 warm ? "its warm VF records (vf.warm)"
			      : "the records 'ibvfctl pool rebuild' adopts");
}

int eng_parse_owner(json_t *params, struct ibvf_owner *o, char *err, size_t errlen)
{
	json_t *j = json_object_get(params, "owner");
	int ret;

	memset(o, 0, sizeof(*o));
	if (!json_is_object(j))
		return ibvf_errf(err, errlen, -EINVAL, "missing \"owner\" object");
	ret = copy_str(j, "container_id", o->container_id, sizeof(o->container_id), true, err,
		       errlen);
	if (!ret)
		ret = copy_str(j, "ifname", o->ifname, sizeof(o->ifname), true, err, errlen);
	if (!ret)
		ret = copy_str(j, "pod_namespace", o->pod_namespace, sizeof(o->pod_namespace),
			       false, err, errlen);
	if (!ret)
		ret = copy_str(j, "pod_name", o->pod_name, sizeof(o->pod_name), false, err, errlen);
	if (!ret)
		ret = copy_str(j, "pod_uid", o->pod_uid, sizeof(o->pod_uid), false, err, errlen);
	if (!ret)
		ret = copy_str(j, "network", o->network, sizeof(o->network), false, err, errlen);
	if (!ret && strchr(o->container_id, '/'))
		ret = ibvf_errf(err, errlen, -EINVAL, "container_id contains '/'");
	if (!ret)
		ret = reserved_owner(o->container_id, err, errlen);
	return ret ? ibvf_err_prefix(err, errlen, ret, "owner") : 0;
}

int eng_parse_pkey_list(json_t *arr, bool allow_default, uint16_t *pkeys, size_t *n, char *err,
			size_t errlen)
{
	json_t *it;
	size_t i;

	*n = 0;
	if (!json_is_array(arr) || json_array_size(arr) > IBVF_POOL_MAX_PKEYS)
		return ibvf_errf(err, errlen, -EINVAL,
				 "\"pkeys\" must be an array of at most %d {pkey, membership}",
				 IBVF_POOL_MAX_PKEYS);
	json_array_foreach(arr, i, it)
	{
		json_t *pk = json_object_get(it, "pkey"), *m = json_object_get(it, "membership");
		uint16_t v;
		int ret;

		if (!json_is_object(it))
			return ibvf_errf(err, errlen, -EINVAL, "pkeys[%zu] is not an object", i);
		if (json_is_string(pk)) {
			ret = ibvf_pkey_parse(json_string_value(pk), &v, err, errlen);
			if (ret)
				return ibvf_err_prefix(err, errlen, ret, "pkeys[%zu]", i);
		} else if (json_is_integer(pk) && json_integer_value(pk) >= 0 &&
			   json_integer_value(pk) <= 0xffff) {
			v = (uint16_t)json_integer_value(pk);
		} else {
			return ibvf_errf(err, errlen, -EINVAL,
					 "pkeys[%zu].pkey: expected \"0x....\"", i);
		}
		if (m && !json_is_string(m))
			return ibvf_errf(err, errlen, -EINVAL,
					 "pkeys[%zu].membership: expected \"full\" or \"limited\"",
					 i);
		ret = ibvf_pkey_member(v, m ? json_string_value(m) : NULL, allow_default, &v, err,
				       errlen);
		if (ret)
			return ibvf_err_prefix(err, errlen, ret, "pkeys[%zu]", i);
		for (size_t k = 0; k < *n; k++)
			if (ibvf_pkey_key(pkeys[k]) == ibvf_pkey_key(v))
				return ibvf_errf(err, errlen, -EINVAL, "PKey 0x%04x given twice",
						 ibvf_pkey_key(v));
		pkeys[(*n)++] = v;
	}
	return 0;
}

static int parse_pkeys(bool allow_default, json_t *params, struct eng_req *req, char *err,
		       size_t errlen)
{
	json_t *arr = json_object_get(params, "pkeys");

	/*
	 * Absent or empty: a network without a PKey (SriovIBNetwork's pkey is
	 * optional): no tenant membership, the port keeps what the SM gives
	 * every port (issue 15 item 1).
	 */
	req->n_pkeys = 0;
	if (!arr || (json_is_array(arr) && json_array_size(arr) == 0))
		return 0;
	if (!json_is_array(arr))
		return ibvf_errf(err, errlen, -EINVAL,
				 "\"pkeys\" must be an array of {pkey, membership}");
	if (json_array_size(arr) > IBVF_POOL_MAX_PKEYS)
		return ibvf_errf(err, errlen, -EINVAL, "at most %d PKeys", IBVF_POOL_MAX_PKEYS);
	return eng_parse_pkey_list(arr, allow_default, req->pkeys, &req->n_pkeys, err, errlen);
}

/* The prepare parameters; the PCI address and link state come out in lower case. */
static int parse_prepare_params(bool allow_default, json_t *params, struct eng_req *req, char *err,
				size_t errlen)
{
	json_t *g = json_object_get(params, "guid");
	enum ibvf_vf_link_state ls;
	char pci[IBVF_PCI_ADDR_LEN];
	int ret = eng_parse_owner(params, &req->owner, err, errlen);

	if (!ret)
		ret = copy_str(params, "pci", req->pci, sizeof(req->pci), true, err, errlen);
	if (!ret) {
		ret = ibvf_pci_addr_parse(req->pci, pci, err, errlen);
		if (ret)
			ibvf_err_prefix(err, errlen, ret, "\"pci\"");
		else
			snprintf(req->pci, sizeof(req->pci), "%s", pci);
	}
	if (!ret)
		ret = parse_pkeys(allow_default, params, req, err, errlen);
	if (!ret && g && !json_is_null(g)) {
		if (!json_is_string(g))
			return ibvf_errf(err, errlen, -EINVAL, "\"guid\" must be a string");
		ret = ibvf_guid_parse(json_string_value(g), &req->req_guid, err, errlen);
		if (!ret && !ibvf_guid_is_assignable(req->req_guid))
			ret = ibvf_errf(err, errlen, -EINVAL, "\"guid\" %s is 0 or all-ones",
					json_string_value(g));
	}
	req->index0 = 0;
	if (!ret && json_object_get(params, "index0")) {
		json_t *i0 = json_object_get(params, "index0");

		if (!json_is_boolean(i0))
			return ibvf_errf(err, errlen, -EINVAL, "\"index0\" must be true or false");
		req->index0 = json_is_true(i0) ? 2 : 1;
	}
	if (!ret)
		ret = copy_str(params, "link_state", req->link_state, sizeof(req->link_state),
			       false, err, errlen);
	if (!ret && req->link_state[0]) {
		ret = ibvf_vf_link_state_parse(req->link_state, &ls, err, errlen);
		if (ret)
			ibvf_err_prefix(err, errlen, ret, "\"link_state\"");
		else
			snprintf(req->link_state, sizeof(req->link_state), "%s",
				 ibvf_vf_link_state_name(ls));
	}
	return ret;
}

static int parse_prepare(struct ibvf_engine *e, json_t *params, struct eng_req *req, char *err,
			 size_t errlen)
{
	return parse_prepare_params(e->allow_default_pkey, params, req, err, errlen);
}

int ibvf_prepare_params_parse(json_t *params, bool allow_default_pkey,
			      struct ibvf_prepare_params *out, char *err, size_t errlen)
{
	struct eng_req *req = calloc(1, sizeof(*req));
	int ret;

	if (!req)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	ret = parse_prepare_params(allow_default_pkey, params, req, err, errlen);
	if (!ret) {
		memset(out, 0, sizeof(*out));
		out->owner = req->owner;
		snprintf(out->pci, sizeof(out->pci), "%s", req->pci);
		memcpy(out->pkeys, req->pkeys, sizeof(out->pkeys));
		out->n_pkeys = req->n_pkeys;
		out->req_guid = req->req_guid;
		snprintf(out->link_state, sizeof(out->link_state), "%s", req->link_state);
	}
	free(req);
	return ret;
}

/* gc: the attachments to keep; one too long for the store matches none. */

static int parse_valid(json_t *v, struct eng_req *req, char *err, size_t errlen)
{
	json_t *it;
	size_t i;

	req->valid = calloc(json_array_size(v) ? json_array_size(v) : 1, sizeof(*req->valid));
	if (!req->valid)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	json_array_foreach(v, i, it)
	{
		const char *c = json_string_value(json_object_get(it, "container_id"));
		const char *n = json_string_value(json_object_get(it, "ifname"));
		struct eng_owner_id *o = &req->valid[req->n_valid];

		if (strlen(c) >= sizeof(o->container_id) || strlen(n) >= sizeof(o->ifname))
			continue;
		memcpy(o->container_id, c, strlen(c) + 1);
		memcpy(o->ifname, n, strlen(n) + 1);
		req->n_valid++;
	}
	return 0;
}

static int parse_gc(struct ibvf_engine *e, json_t *params, struct eng_req *req, char *err,
		    size_t errlen)
{
	json_t *v = json_object_get(params, "valid"), *it;
	size_t i;
	int ret;

	(void)e;
	ret = copy_str(params, "network", req->network, sizeof(req->network), false, err, errlen);
	if (ret)
		return ret;
	req->has_network = req->network[0] != 0;
	if (!json_is_array(v))
		return ibvf_errf(err, errlen, -EINVAL,
				 "\"valid\" must be an array of {container_id, ifname}");
	json_array_foreach(v, i, it)
	{
		if (!json_is_string(json_object_get(it, "container_id")) ||
		    !json_is_string(json_object_get(it, "ifname")))
			return ibvf_errf(err, errlen, -EINVAL,
					 "valid[%zu] needs container_id and ifname strings", i);
	}
	return parse_valid(v, req, err, errlen);
}

static int parse_list(struct ibvf_engine *e, json_t *params, struct eng_req *req, char *err,
		      size_t errlen)
{
	json_t *l = json_object_get(params, "limit"), *o = json_object_get(params, "offset");
	int ret =
		copy_str(params, "network", req->network, sizeof(req->network), false, err, errlen);

	(void)e;
	req->has_network = req->network[0] != 0;
	if (!ret && l && (!json_is_integer(l) || json_integer_value(l) < 1))
		ret = ibvf_errf(err, errlen, -EINVAL, "\"limit\" must be a positive integer");
	if (!ret && o && (!json_is_integer(o) || json_integer_value(o) < 0))
		ret = ibvf_errf(err, errlen, -EINVAL, "\"offset\" must be >= 0");
	req->limit = l ? (size_t)json_integer_value(l) : 0;
	req->offset = o ? (size_t)json_integer_value(o) : 0;
	return ret;
}

static int parse_owner_req(struct ibvf_engine *e, json_t *params, struct eng_req *req, char *err,
			   size_t errlen)
{
	(void)e;
	return eng_parse_owner(params, &req->owner, err, errlen);
}

/*
 * release: the owner, and optionally where it was attached ("pci", "guid",
 * as the CNI plugin's cache has them): they let a release reach a record
 * that `ibvfctl pool rebuild` adopted from that VF (attach.c, release_begin()).
 */
static int parse_release_req(struct ibvf_engine *e, json_t *params, struct eng_req *req, char *err,
			     size_t errlen)
{
	json_t *g = json_object_get(params, "guid");
	char pci[IBVF_PCI_ADDR_LEN];
	int ret = eng_parse_owner(params, &req->owner, err, errlen);

	(void)e;
	if (!ret && json_object_get(params, "pci")) {
		ret = copy_str(params, "pci", req->pci, sizeof(req->pci), true, err, errlen);
		if (!ret)
			ret = ibvf_pci_addr_parse(req->pci, pci, err, errlen);
		if (ret)
			return ibvf_err_prefix(err, errlen, ret, "\"pci\"");
		snprintf(req->pci, sizeof(req->pci), "%s", pci);
	}
	if (!ret && g) {
		if (!json_is_string(g))
			return ibvf_errf(err, errlen, -EINVAL, "\"guid\" must be a string");
		ret = ibvf_guid_parse(json_string_value(g), &req->req_guid, err, errlen);
		if (ret)
			return ibvf_err_prefix(err, errlen, ret, "\"guid\"");
	}
	return ret;
}

/*
 * release.sm: release's parameters; the SM half of the release only (the
 * VF's netdev is still in the Pod: attach.c, release_finish()).
 */
static int parse_release_sm_req(struct ibvf_engine *e, json_t *params, struct eng_req *req,
				char *err, size_t errlen)
{
	int ret = parse_release_req(e, params, req, err, errlen);

	req->sm_stage = true;
	return ret;
}

static int parse_audit(struct ibvf_engine *e, json_t *params, struct eng_req *req, char *err,
		       size_t errlen)
{
	(void)e, (void)err, (void)errlen;
	req->fix = json_is_true(json_object_get(params, "fix"));
	return 0;
}

/* ------------------------------------------------------------- results -- */

static json_t *guid_json(uint64_t g)
{
	char s[IBVF_GUID_STR_LEN];

	return json_string(ibvf_guid_format(g, s));
}

static json_t *pkey_json(uint16_t pk)
{
	char s[8];

	snprintf(s, sizeof(s), "0x%04x", pk);
	return json_string(s);
}

static json_t *owner_json(const struct ibvf_owner *o)
{
	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "container_id", o->container_id, "ifname",
			 o->ifname, "pod_namespace", o->pod_namespace, "pod_name", o->pod_name,
			 "pod_uid", o->pod_uid, "network", o->network);
}

static json_t *pkeys_json(const uint16_t *pk, size_t n, const struct ibvf_port_result *port)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < n; i++) {
		json_t *o = json_pack(
			"{s:o,s:s}", "pkey", pkey_json(ibvf_pkey_key(pk[i])), "membership",
			ibvf_membership_name(ibvf_pkey_is_full(pk[i]) ? IBVF_MEMBER_FULL
								      : IBVF_MEMBER_LIMITED));

		if (port)
			json_object_set_new(o, "index", json_integer(port->pkey_index[i]));
		json_array_append_new(arr, o);
	}
	return arr;
}

static json_t *prepare_json(struct op *op)
{
	return json_pack("{s:o,s:s,s:i,s:s,s:s,s:s,s:o,s:o,s:i,s:i,s:s,s:o,s:s}", "guid",
			 guid_json(op->a.guid), "pf", op->vf.pf, "vf_index", op->vf.vf_index, "pci",
			 op->vf.pci, "netdev", op->vf.netdev, "rdma_dev", op->vf.rdma_dev,
			 "node_guid", guid_json(op->a.guid), "port_guid", guid_json(op->a.guid),
			 "lid", (int)op->port.lid, "sm_lid", (int)op->port.sm_lid, "port_state",
			 op->port.state, "pkeys", pkeys_json(op->a.pkeys, op->a.n_pkeys, &op->port),
			 "state", ibvf_alloc_state_name(op->a.state));
}

static json_t *commit_json(struct op *op)
{
	return json_pack("{s:o,s:s}", "guid", guid_json(op->a.guid), "state", "handed");
}

static json_t *release_json(struct op *op)
{
	json_t *r;

	if (!op->released)
		return json_pack("{s:b}", "released", 0);
	r = json_pack("{s:b,s:o}", "released", 1, "guid", guid_json(op->a.guid));
	if (r && op->sm_removal_pending)
		json_object_set_new(r, "sm_removal_pending", json_true());
	return r;
}

/* release.sm: {held: false} or {held: true, guid, sm_removed} */
static json_t *release_sm_json(struct op *op)
{
	if (!op->created)
		return json_pack("{s:b}", "held", 0);
	return json_pack("{s:b,s:o,s:b}", "held", 1, "guid", guid_json(op->a.guid), "sm_removed",
			 op->sm_removed);
}

static json_t *guids_json(const struct eng_guids *l)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < l->n; i++)
		json_array_append_new(arr, guid_json(l->v[i]));
	return arr;
}

static json_t *gc_json(struct op *op)
{
	return json_pack("{s:o,s:o}", "released", guids_json(&op->gc_released), "skipped_busy",
			 guids_json(&op->gc_skipped));
}

static json_t *sm_stats_json(const struct ibvf_sm_batch_stats *st)
{
	return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "call_ms_total",
			 (json_int_t)st->call_ms_total, "requests", (json_int_t)st->requests,
			 "coalesced", (json_int_t)st->coalesced, "flushes", (json_int_t)st->flushes,
			 "add_calls", (json_int_t)st->add_calls, "remove_calls",
			 (json_int_t)st->remove_calls, "retries", (json_int_t)st->retries,
			 "failures", (json_int_t)st->failures);
}

static json_t *sm_call_json(const struct ibvf_sm_call_record *c)
{
	json_t *o;

	if (!c->seq)
		return json_null();
	o = json_pack("{s:b,s:I,s:s,s:o,s:I}", "ok", c->result == 0, "at_ms", (json_int_t)c->at_ms,
		      "kind", c->kind == IBVF_SM_REQ_ADD ? "add" : "remove", "pkey",
		      pkey_json(c->pkey), "guids", (json_int_t)c->n);
	if (o && c->result) {
		json_object_set_new(o, "errno", json_integer(-c->result));
		json_object_set_new(o, "error", json_string(c->error));
	}
	return o;
}

static json_t *store_json(const struct eng_status *st)
{
	const struct ibvf_pool_health *h = &st->store;
	json_t *o, *w = json_null();

	if (h->last_write_ms) {
		w = json_pack("{s:b,s:I}", "ok", h->last_write_result == 0, "at_ms",
			      (json_int_t)h->last_write_ms);
		if (w && h->last_write_result) {
			json_object_set_new(w, "errno", json_integer(-h->last_write_result));
			json_object_set_new(w, "error", json_string(h->last_error));
		}
	}
	o = json_pack("{s:b,s:o,s:I,s:I}", "ok", st->pool_ok && h->last_write_result == 0,
		      "last_write", w, "last_ok_ms", (json_int_t)h->last_ok_ms, "write_failures",
		      (json_int_t)h->write_failures);
	return o;
}

/* not_ready: [{check, reason}], [] when ready (include/ibvf/api.h) */
static json_t *not_ready_json(const struct eng_readiness *rd)
{
	json_t *arr = json_array();

	for (size_t i = 0; arr && i < rd->n; i++)
		json_array_append_new(arr, json_pack("{s:s,s:s}", "check", rd->r[i].check, "reason",
						     rd->r[i].reason));
	return arr;
}

static json_t *status_json(struct op *op)
{
	const struct eng_status *st = op->status;
	json_t *backend, *r;

	backend = json_pack("{s:s,s:b,s:s,s:I,s:o,s:o,s:o}", "name", st->sm_name, "ok", st->sm_ok,
			    "description", st->sm_desc, "checked_ms", (json_int_t)st->sm_checked_ms,
			    "last_call", sm_call_json(&st->sm.last_call), "last_add",
			    sm_call_json(&st->sm.last_add), "last_remove",
			    sm_call_json(&st->sm.last_remove));
	if (backend && !st->sm_ok)
		json_object_set_new(backend, "error", json_string(st->sm_err));
	r = json_pack("{s:b,s:o,s:s,s:o,s:o,s:{s:I,s:I,s:I,s:I},s:I,s:b,s:b}", "ready",
		      st->rd.ready, "not_ready", not_ready_json(&st->rd), "version", IBVF_VERSION,
		      "backend", backend, "store", store_json(st), "pool", "total",
		      (json_int_t)st->pool.total, "allocated", (json_int_t)st->pool.allocated,
		      "quarantined", (json_int_t)st->pool.quarantined, "free",
		      (json_int_t)st->pool.free, "inflight", (json_int_t)st->inflight, "reconciled",
		      st->reconciled, "stopping", st->stopping);
	if (r)
		json_object_set_new(r, "sm", sm_stats_json(&st->sm));
	if (r)
		json_object_set_new(r, "warm",
				    json_pack("{s:b,s:I,s:I}", "enabled", st->warm_on, "ready",
					      (json_int_t)st->warm_ready, "warming",
					      (json_int_t)st->warm_warming));
	{
		struct ibvf_engine *e = op->e;
		json_t *(*fn)(void *arg);
		const char *key;
		void *arg;

		pthread_mutex_lock(&e->lock);
		fn = e->status_fn;
		key = e->status_key;
		arg = e->status_arg;
		pthread_mutex_unlock(&e->lock);
		if (r && fn && key)
			json_object_set_new(r, key, fn(arg)); /* NULL: not set */
	}
	return r;
}

static json_t *list_json(struct op *op)
{
	return json_pack("{s:O,s:I}", "owners", op->sink.arg, "total", (json_int_t)op->total);
}

static json_t *audit_json(struct op *op)
{
	return json_pack("{s:i,s:O}", "problems", op->problems, "findings", op->sink.arg);
}

/* ---------------------------------------------------------------- sink -- */

/* list: one owner record as the API shows it. */
static int sink_record(void *arg, const struct ibvf_alloc *a)
{
	return json_array_append_new(
		arg, json_pack("{s:o,s:o,s:s,s:s,s:i,s:s,s:o}", "owner", owner_json(&a->owner),
			       "guid", guid_json(a->guid), "state", ibvf_alloc_state_name(a->state),
			       "pf", a->pf, "vf_index", a->vf_index, "pci", a->pci, "pkeys",
			       pkeys_json(a->pkeys, a->n_pkeys, NULL)));
}

/* audit (and ibvf_engine_reconcile()): {kind, severity, guid, pkey?, pci?, detail, fix, fixed} */
static void sink_finding(void *arg, const struct ibvf_reconcile_finding *f)
{
	char g[IBVF_GUID_STR_LEN];
	json_t *o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:b}", "kind", f->kind, "severity",
			      f->problem ? "problem" : "notice", "guid",
			      f->guid ? ibvf_guid_format(f->guid, g) : "", "detail", f->detail,
			      "fix", f->fix, "fixed", f->fixed);

	if (f->pkey >= 0) {
		char p[16];

		snprintf(p, sizeof(p), "0x%04x", f->pkey);
		json_object_set_new(o, "pkey", json_string(p));
	}
	if (f->pci && *f->pci)
		json_object_set_new(o, "pci", json_string(f->pci));
	json_array_append_new(arg, o);
}

static void sink_free(void *arg)
{
	json_decref(arg);
}

static int sink_new(struct op *op)
{
	op->sink = (struct eng_sink){sink_record, sink_finding, sink_free, json_array()};
	return op->sink.arg ? 0 : -ENOMEM;
}

/* ------------------------------------------------------------ methods -- */

struct api_method {
	const char *name;
	enum op_kind kind;
	int (*parse)(struct ibvf_engine *e, json_t *params, struct eng_req *req, char *err,
		     size_t errlen);
	json_t *(*result)(struct op *op);
	bool sink; /* the op streams records/findings into its result */
};

static const struct api_method methods[] = {
	{"prepare", OP_PREPARE, parse_prepare, prepare_json, false},
	{"commit", OP_COMMIT, parse_owner_req, commit_json, false},
	{"release", OP_RELEASE, parse_release_req, release_json, false},
	{"release.sm", OP_RELEASE, parse_release_sm_req, release_sm_json, false},
	{"status", OP_STATUS, NULL, status_json, false},
	{"list", OP_LIST, parse_list, list_json, true},
	{"gc", OP_GC, parse_gc, gc_json, false},
	{"audit", OP_AUDIT, parse_audit, audit_json, true},
};

#define N_METHODS (sizeof(methods) / sizeof(methods[0]))

const char *eng_kind_name(enum op_kind k)
{
	static const char *const names[] = {"prepare", "commit", "release", "status",
					    "list",    "gc",	 "audit",   "undo"};

	return (unsigned)k < sizeof(names) / sizeof(names[0]) ? names[k] : "?";
}

/* Loop thread: the op's outcome as the JSON-RPC reply. */
static bool api_done(struct op *op)
{
	const struct api_method *m = op->method;
	json_t *result = NULL;

	if (!op->code) {
		result = m->result(op);
		if (result &&
		    (op->kind == OP_PREPARE || op->kind == OP_COMMIT || op->kind == OP_RELEASE))
			json_object_set_new(result, "timing", ibvf_timing_json(&op->timing));
		if (!result) {
			op->code = IBVF_RPC_INTERNAL_ERROR;
			op->err_no = ENOMEM;
			snprintf(op->msg, sizeof(op->msg), "out of memory");
		}
	}
	eng_metrics_request(m->name, op->code, op->step,
			    (double)(ibvf_mono_ns() - op->arrived_ns) / 1e9);
	return op->reply(op->ctx, result, op->code, op->msg, op->err_no, op->step);
}

static const struct api_method *find_method(const char *name)
{
	for (size_t i = 0; i < N_METHODS; i++)
		if (!strcmp(methods[i].name, name))
			return &methods[i];
	return NULL;
}

void ibvf_engine_call(struct ibvf_engine *e, const char *method, json_t *params,
		      ibvf_reply_fn reply, void *ctx)
{
	const struct api_method *m = find_method(method);
	char err[IBVF_ERR_LEN + 64] = "";
	struct op *op;
	int ret = 0;

	if (eng_pool_method(e, method, params, reply, ctx))
		return; /* pool.allocate, pool.release: api_pool.c */
	if (!m) {
		reply(ctx, NULL, IBVF_RPC_METHOD_NOT_FOUND, "method not found", 0, "");
		return;
	}
	if (params && !json_is_object(params)) {
		reply(ctx, NULL, IBVF_RPC_INVALID_PARAMS, "params must be an object", EINVAL, "");
		return;
	}
	op = calloc(1, sizeof(*op));
	if (op && m->kind == OP_STATUS && !(op->status = calloc(1, sizeof(*op->status)))) {
		free(op);
		op = NULL;
	}
	if (!op || (m->sink && sink_new(op))) {
		if (op)
			free(op->status);
		free(op);
		reply(ctx, NULL, IBVF_RPC_INTERNAL_ERROR, "out of memory", ENOMEM, "");
		return;
	}
	ibvf_timing_start(&op->timing);
	op->e = e;
	op->arrived_ns = ibvf_mono_ns();
	op->kind = m->kind;
	op->done = api_done;
	op->method = m;
	op->reply = reply;
	op->ctx = ctx;
	if (m->parse)
		ret = m->parse(e, params, &op->req, err, sizeof(err));
	if (ret) {
		eng_metrics_request(m->name, IBVF_RPC_INVALID_PARAMS, "validate", 0);
		reply(ctx, NULL, IBVF_RPC_INVALID_PARAMS, err, -ret, "validate");
		eng_op_free(op);
		return;
	}
	eng_start(op);
}

json_t *ibvf_engine_sm_stats(struct ibvf_engine *e)
{
	struct ibvf_sm_batch_stats st;

	ibvf_sm_batch_get_stats(e->batch, &st);
	return sm_stats_json(&st);
}

int ibvf_engine_reconcile(struct ibvf_engine *e, enum ibvf_reconcile_pass mode, json_t *findings,
			  char *err, size_t errlen)
{
	return eng_reconcile(e, mode, findings ? sink_finding : NULL, findings, err, errlen);
}
