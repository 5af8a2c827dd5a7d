// SPDX-License-Identifier: MIT
/*
 * Fabric audit: findings and the per-PKey matrix from a fabric scan and the
 * desired state. See fabric_audit.h.
 */
#include "fabric_audit.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ibvf/types.h>

#include "err.h"

static const char *const kind_names[IBVF_FA_KIND_COUNT] = {
	[IBVF_FA_MISSING_PKEY] = "missing-pkey",
	[IBVF_FA_WRONG_MEMBERSHIP] = "wrong-membership",
	[IBVF_FA_ISOLATION_BREACH] = "isolation-breach",
	[IBVF_FA_FOREIGN_MEMBER] = "foreign-member",
	[IBVF_FA_DUPLICATE_GUID] = "duplicate-guid",
	[IBVF_FA_VF_GUID_ZERO] = "vf-guid-zero",
	[IBVF_FA_UNKNOWN_POOL_GUID] = "unknown-pool-guid",
	[IBVF_FA_NOT_ON_FABRIC] = "not-on-fabric",
	[IBVF_FA_UNREADABLE] = "unreadable-port",
};

const char *ibvf_fa_kind_name(enum ibvf_fa_kind k)
{
	return (unsigned)k < IBVF_FA_KIND_COUNT ? kind_names[k] : "?";
}

const char *ibvf_fa_role_name(enum ibvf_fa_role r)
{
	switch (r) {
	case IBVF_FA_ROLE_MANAGED:
		return "managed";
	case IBVF_FA_ROLE_FOREIGN:
		return "foreign";
	case IBVF_FA_ROLE_SM:
		return "sm";
	}
	return "?";
}

struct ctx {
	const struct ibvf_fa_input *in;
	struct ibvf_fa_result *out;
	size_t cap_f, cap_k;
	size_t *by_guid; /* port indices sorted by port GUID */
	bool tenant[IBVF_PKEY_KEY_MASK + 1];
};

struct guid_idx {
	uint64_t guid;
	size_t idx;
};

static int cmp_guid_idx(const void *a, const void *b)
{
	const struct guid_idx *x = a, *y = b;

	if (x->guid != y->guid)
		return x->guid < y->guid ? -1 : 1;
	return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* First index into c->by_guid whose port has @guid; n_ports when none. */
static size_t first_with_guid(const struct ctx *c, uint64_t guid)
{
	const struct ibvf_fabric *f = c->in->fabric;
	size_t lo = 0, hi = f->n_ports;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->ports[c->by_guid[mid]].port_guid < guid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < f->n_ports && f->ports[c->by_guid[lo]].port_guid == guid ? lo : f->n_ports;
}

static bool filtered_out(const struct ctx *c, uint16_t key)
{
	return c->in->pkey >= 0 && c->in->pkey != key;
}

static bool in_managed(const struct ibvf_fa_input *in, uint64_t g)
{
	for (size_t i = 0; i < in->n_managed; i++)
		if (g >= in->managed[i].first && g <= in->managed[i].last)
			return true;
	return false;
}

static const char *known_owner(const struct ibvf_fa_input *in, uint64_t g)
{
	for (size_t i = 0; i < in->n_known; i++)
		if (g >= in->known[i].first && g <= in->known[i].last)
			return in->known[i].owner;
	return NULL;
}

static const struct ibvf_fa_want *want_of(const struct ibvf_fa_input *in, uint64_t g, uint16_t key)
{
	for (size_t i = 0; i < in->n_wants; i++)
		if (in->wants[i].guid == g && ibvf_pkey_key(in->wants[i].pkey) == key)
			return &in->wants[i];
	return NULL;
}

static const struct ibvf_fa_sm *sm_of(const struct ibvf_fa_input *in, uint64_t g, uint16_t key)
{
	for (size_t i = 0; i < in->n_sm; i++)
		if (in->sm[i].guid == g && in->sm[i].pkey == key)
			return &in->sm[i];
	return NULL;
}

static bool is_sm_port(const struct ibvf_fabric_port *p)
{
	return p->lid && p->sm_lid == p->lid;
}

static int __attribute__((format(printf, 7, 8)))
add(struct ctx *c, enum ibvf_fa_kind kind, bool problem, uint64_t guid, int pkey, size_t port,
    const char *fmt, ...)
{
	struct ibvf_fa_result *r = c->out;
	struct ibvf_fa_finding *f;
	va_list ap;

	if (r->n_findings == c->cap_f) {
		size_t cap = c->cap_f ? c->cap_f * 2 : 32;
		void *n = realloc(r->findings, cap * sizeof(*r->findings));

		if (!n)
			return -ENOMEM;
		r->findings = n;
		c->cap_f = cap;
	}
	f = &r->findings[r->n_findings++];
	memset(f, 0, sizeof(*f));
	f->kind = kind;
	f->problem = problem;
	f->guid = guid;
	f->pkey = pkey;
	f->port = port;
	f->port2 = IBVF_FA_NO_PORT;
	if (guid) {
		const char *o = known_owner(c->in, guid);

		snprintf(f->owner, sizeof(f->owner), "%s", o ? o : "");
	}
	va_start(ap, fmt);
	vsnprintf(f->detail, sizeof(f->detail), fmt, ap);
	va_end(ap);
	r->n_problems += problem;
	return 0;
}

static const char *where(const struct ibvf_fabric_port *p, char *buf, size_t len)
{
	snprintf(buf, len, "%s%.64s%s (DR %.120s, LID %u, %s)", p->desc[0] ? "\"" : "", p->desc,
		 p->desc[0] ? "\"" : "node", p->dr, p->lid, ibvf_port_state_name(p->state));
	return buf;
}

/* Ports: unreadable, GUID 0, duplicates, unknown pool GUIDs. */
static int check_ports(struct ctx *c)
{
	const struct ibvf_fabric *f = c->in->fabric;
	char w[256], w2[256];
	int ret = 0;

	for (size_t i = 0; !ret && i < f->n_ports; i++) {
		const struct ibvf_fabric_port *p = &f->ports[i];

		if (!p->read_ok)
			ret = add(c, IBVF_FA_UNREADABLE, true, p->port_guid, -1, i,
				  "port %s: %s; its P_Key table is not audited",
				  where(p, w, sizeof(w)), p->error);
	}
	for (size_t i = 0; !ret && i < f->n_ports; i++) {
		const struct ibvf_fabric_port *p = &f->ports[i];

		if (!p->port_guid && c->in->pkey < 0)
			ret = add(c, IBVF_FA_VF_GUID_ZERO, true, 0, -1, i,
				  "port %s has port GUID 0: a VF nobody gave a GUID; no SM brings "
				  "it past INIT (program its GUID: ibvfd attach, or ip link set "
				  "... vf N port_guid)",
				  where(p, w, sizeof(w)));
	}
	for (size_t k = 0; !ret && k < f->n_ports;) {
		size_t e = k + 1;
		uint64_t g = f->ports[c->by_guid[k]].port_guid;

		while (e < f->n_ports && f->ports[c->by_guid[e]].port_guid == g)
			e++;
		if (g && e - k > 1 && c->in->pkey < 0) {
			ret = add(c, IBVF_FA_DUPLICATE_GUID, true, g, -1, c->by_guid[k],
				  "port GUID 0x%016" PRIx64 " on %zu ports: %s and %s%s", g, e - k,
				  where(&f->ports[c->by_guid[k]], w, sizeof(w)),
				  where(&f->ports[c->by_guid[k + 1]], w2, sizeof(w2)),
				  e - k > 2 ? " (and more)" : "");
			if (!ret)
				c->out->findings[c->out->n_findings - 1].port2 = c->by_guid[k + 1];
		}
		k = e;
	}
	for (size_t i = 0; !ret && i < f->n_ports; i++) {
		const struct ibvf_fabric_port *p = &f->ports[i];

		if (p->port_guid && c->in->pkey < 0 && in_managed(c->in, p->port_guid) &&
		    !known_owner(c->in, p->port_guid))
			ret = add(c, IBVF_FA_UNKNOWN_POOL_GUID, true, p->port_guid, -1, i,
				  "port %s carries pool GUID 0x%016" PRIx64
				  " that no store knows (a GUID leaked from another node, or left "
				  "on a VF after its release)",
				  where(p, w, sizeof(w)), p->port_guid);
	}
	return ret;
}

/* What owners asked for, against the ports that carry their GUIDs. */
static int check_wants(struct ctx *c)
{
	const struct ibvf_fa_input *in = c->in;
	const struct ibvf_fabric *f = in->fabric;
	char w[256];
	int ret = 0;

	for (size_t i = 0; !ret && i < in->n_wants; i++) {
		const struct ibvf_fa_want *wt = &in->wants[i];
		uint16_t key = ibvf_pkey_key(wt->pkey);
		bool full = wt->pkey & IBVF_PKEY_FULL_BIT;
		size_t k = first_with_guid(c, wt->guid);

		if (filtered_out(c, key) || key == IBVF_PKEY_DEFAULT)
			continue;
		if (k == f->n_ports) {
			ret = add(c, IBVF_FA_NOT_ON_FABRIC, wt->expect_on_fabric, wt->guid,
				  wt->pkey, IBVF_FA_NO_PORT,
				  "GUID 0x%016" PRIx64 " (%s, from the %s) is on no port of the "
				  "fabric%s",
				  wt->guid, wt->owner, wt->source,
				  wt->expect_on_fabric ? " although its attach is done" : "");
			continue;
		}
		for (; !ret && k < f->n_ports && f->ports[c->by_guid[k]].port_guid == wt->guid;
		     k++) {
			const struct ibvf_fabric_port *p = &f->ports[c->by_guid[k]];
			uint16_t entry = 0;

			if (!p->read_ok || !wt->expect_on_fabric)
				continue;
			if (ibvf_pkey_find(p->pkeys, p->n_pkeys, key, IBVF_PKEY_MATCH_ANY, &entry) <
			    0)
				ret = add(c, IBVF_FA_MISSING_PKEY, true, wt->guid, wt->pkey,
					  c->by_guid[k],
					  "%s asked for P_Key 0x%04x (%s) on GUID 0x%016" PRIx64
					  "; port %s does not hold it",
					  wt->owner, wt->pkey, full ? "full" : "limited", wt->guid,
					  where(p, w, sizeof(w)));
			else if (!!(entry & IBVF_PKEY_FULL_BIT) != full)
				ret = add(c, IBVF_FA_WRONG_MEMBERSHIP, true, wt->guid, entry,
					  c->by_guid[k],
					  "%s asked for P_Key 0x%04x (%s) on GUID 0x%016" PRIx64
					  "; port %s holds 0x%04x (%s)",
					  wt->owner, wt->pkey, full ? "full" : "limited", wt->guid,
					  where(p, w, sizeof(w)), entry,
					  entry & IBVF_PKEY_FULL_BIT ? "full" : "limited");
		}
	}
	return ret;
}

static int add_member(struct ctx *c, uint16_t key, size_t port, bool full, enum ibvf_fa_role role)
{
	struct ibvf_fa_result *r = c->out;
	struct ibvf_fa_pkey *k = NULL;

	for (size_t i = 0; i < r->n_pkeys; i++)
		if (r->pkeys[i].pkey == key)
			k = &r->pkeys[i];
	if (!k) {
		if (r->n_pkeys == c->cap_k) {
			size_t cap = c->cap_k ? c->cap_k * 2 : 16;
			void *n = realloc(r->pkeys, cap * sizeof(*r->pkeys));

			if (!n)
				return -ENOMEM;
			r->pkeys = n;
			c->cap_k = cap;
		}
		k = &r->pkeys[r->n_pkeys++];
		memset(k, 0, sizeof(*k));
		k->pkey = key;
		k->tenant = c->tenant[key];
	}
	if (port == IBVF_FA_NO_PORT)
		return 0;
	if ((k->n_members & (k->n_members + 1)) == 0 || !k->members) {
		/* grow at 0, 1, 3, 7, ...: capacity n+1 rounded to a power of two */
		size_t cap = (k->n_members + 1) * 2;
		void *n = realloc(k->members, cap * sizeof(*k->members));

		if (!n)
			return -ENOMEM;
		k->members = n;
	}
	k->members[k->n_members++] = (struct ibvf_fa_member){port, full, role};
	if (full)
		k->n_full++;
	else
		k->n_limited++;
	return 0;
}

/* Every table entry: breaches, foreign members, and the matrix. */
static int check_tables(struct ctx *c)
{
	const struct ibvf_fa_input *in = c->in;
	const struct ibvf_fabric *f = in->fabric;
	char w[256];
	int ret = 0;

	for (size_t i = 0; !ret && i < f->n_ports; i++) {
		const struct ibvf_fabric_port *p = &f->ports[i];
		bool managed = p->port_guid && in_managed(in, p->port_guid);
		enum ibvf_fa_role role = is_sm_port(p) ? IBVF_FA_ROLE_SM
					 : managed     ? IBVF_FA_ROLE_MANAGED
						       : IBVF_FA_ROLE_FOREIGN;

		if (!p->read_ok)
			continue;
		for (size_t e = 0; !ret && e < p->n_pkeys; e++) {
			uint16_t entry = p->pkeys[e], key = ibvf_pkey_key(entry);
			bool full = entry & IBVF_PKEY_FULL_BIT, dup = false;
			const struct ibvf_fa_sm *sm;

			if (!key || key == IBVF_PKEY_DEFAULT || filtered_out(c, key))
				continue;
			for (size_t e2 = 0; e2 < e; e2++)
				dup |= ibvf_pkey_key(p->pkeys[e2]) == key;
			if (dup)
				continue; /* one port, one member; ibvf_pkey_find() prefers full */
			if (ibvf_pkey_find(p->pkeys, p->n_pkeys, key, IBVF_PKEY_MATCH_FULL, NULL) >=
			    0)
				full = true, entry = key | IBVF_PKEY_FULL_BIT;
			ret = add_member(c, key, i, full, role);
			if (ret || !c->tenant[key] || role == IBVF_FA_ROLE_SM)
				continue;
			sm = sm_of(in, p->port_guid, key);
			if (managed && !want_of(in, p->port_guid, key))
				ret = add(c, IBVF_FA_ISOLATION_BREACH, true, p->port_guid, entry, i,
					  "managed GUID 0x%016" PRIx64 " on port %s holds tenant "
					  "P_Key 0x%04x (%s) that its owner did not ask for; %s",
					  p->port_guid, where(p, w, sizeof(w)), entry,
					  full ? "full" : "limited",
					  !sm		? "the SM's configuration does not list it "
							  "by GUID (ALL= or another SM's rule)"
					  : sm->managed ? "ibvf's part of the SM configuration "
							  "still lists it (stale membership)"
							: "the administrator's part of the SM "
							  "configuration lists it");
			else if (!managed)
				ret = add(c, IBVF_FA_FOREIGN_MEMBER, true, p->port_guid, entry, i,
					  "port %s (GUID 0x%016" PRIx64
					  ", not ibvf's) holds tenant "
					  "P_Key 0x%04x (%s); %s",
					  where(p, w, sizeof(w)), p->port_guid, entry,
					  full ? "full: it can talk to every member"
					       : "limited: it can talk to the full members",
					  !sm		? "the SM's configuration does not list it "
							  "by GUID (an ALL= member, or a stale GUID)"
					  : sm->managed ? "ibvf's part of the SM configuration "
							  "lists it (stale membership)"
							: "the administrator's part of the SM "
							  "configuration lists it");
		}
	}
	/* keys asked for that no port holds still get a (empty) matrix entry */
	for (size_t i = 0; !ret && i < in->n_wants; i++) {
		uint16_t key = ibvf_pkey_key(in->wants[i].pkey);

		if (key != IBVF_PKEY_DEFAULT && !filtered_out(c, key))
			ret = add_member(c, key, IBVF_FA_NO_PORT, false, IBVF_FA_ROLE_MANAGED);
	}
	return ret;
}

static int cmp_pkey(const void *a, const void *b)
{
	return (int)((const struct ibvf_fa_pkey *)a)->pkey -
	       (int)((const struct ibvf_fa_pkey *)b)->pkey;
}

int ibvf_fabric_audit(const struct ibvf_fa_input *in, struct ibvf_fa_result *out, char *err,
		      size_t errlen)
{
	const struct ibvf_fabric *f = in->fabric;
	struct ctx *c = calloc(1, sizeof(*c));
	int ret;

	memset(out, 0, sizeof(*out));
	if (!c)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	c->in = in;
	c->out = out;
	for (size_t i = 0; i < in->n_wants; i++)
		c->tenant[ibvf_pkey_key(in->wants[i].pkey)] = true;
	for (size_t i = 0; i < in->n_sm; i++)
		if (in->sm[i].managed)
			c->tenant[in->sm[i].pkey & IBVF_PKEY_KEY_MASK] = true;
	c->tenant[IBVF_PKEY_DEFAULT] = false;
	c->tenant[0] = false;
	c->by_guid = malloc((f->n_ports ? f->n_ports : 1) * sizeof(*c->by_guid));
	if (!c->by_guid) {
		free(c);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	if (f->n_ports) {
		struct guid_idx *gi = malloc(f->n_ports * sizeof(*gi));

		if (!gi) {
			free(c->by_guid);
			free(c);
			return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		}
		for (size_t i = 0; i < f->n_ports; i++)
			gi[i] = (struct guid_idx){f->ports[i].port_guid, i};
		qsort(gi, f->n_ports, sizeof(*gi), cmp_guid_idx);
		for (size_t i = 0; i < f->n_ports; i++)
			c->by_guid[i] = gi[i].idx;
		free(gi);
	}
	ret = check_ports(c);
	if (!ret)
		ret = check_wants(c);
	if (!ret)
		ret = check_tables(c);
	for (size_t i = 0; !ret && i < out->n_pkeys; i++) {
		struct ibvf_fa_pkey *k = &out->pkeys[i];

		k->full_full = k->n_full * (uint64_t)(k->n_full ? k->n_full - 1 : 0) / 2;
		k->full_limited = k->n_full * (uint64_t)k->n_limited;
	}
	if (!ret && out->n_pkeys)
		qsort(out->pkeys, out->n_pkeys, sizeof(*out->pkeys), cmp_pkey);
	free(c->by_guid);
	free(c);
	if (ret) {
		ibvf_fa_result_free(out);
		return ibvf_errf(err, errlen, ret, "out of memory");
	}
	return 0;
}

void ibvf_fa_result_free(struct ibvf_fa_result *r)
{
	if (!r)
		return;
	for (size_t i = 0; i < r->n_pkeys; i++)
		free(r->pkeys[i].members);
	free(r->pkeys);
	free(r->findings);
	memset(r, 0, sizeof(*r));
}
