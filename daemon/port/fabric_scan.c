// SPDX-License-Identifier: MIT
/*
 * Fabric scan: a directed-route walk of the subnet and the P_Key table of
 * every CA port, paced SMPs through the port watcher's fabric source. See
 * fabric_scan.h.
 */
#include "fabric_scan.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/mad.h>

#include "clock.h"
#include "err.h"
#include "log.h"

/* One switch still to visit: its route and the port the walk entered it by. */
struct sw_todo {
	char dr[4 * (IBVF_DR_MAX_HOPS + 1)];
	unsigned entry;
	unsigned nports;
	uint64_t guid;
};

struct scan {
	struct ibvf_port_src *src;
	struct ibvf_fabric *f;
	size_t cap;
	uint64_t interval_ns, next_ns;
	unsigned max_hops;
	struct sw_todo *todo;
	size_t n_todo, cap_todo, head;
};

struct node_info {
	unsigned type, nports, local_port, pcap;
	uint64_t node_guid, port_guid;
};

static void pace(struct scan *s)
{
	uint64_t now = ibvf_mono_ns();

	if (!s->interval_ns)
		return;
	if (s->next_ns > now) {
		uint64_t d = s->next_ns - now;
		struct timespec ts = {(time_t)(d / 1000000000ull), (long)(d % 1000000000ull)};

		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
		now = s->next_ns;
	}
	s->next_ns = now + s->interval_ns;
}

static int smp(struct scan *s, const char *dr, unsigned attr, unsigned mod,
	       uint8_t data[IB_SMP_DATA_SIZE], char *err, size_t errlen)
{
	int ret;

	pace(s);
	s->f->smps++;
	ret = ibvf_port_smp_get(s->src, dr, 0, attr, mod, data, err, errlen);
	if (ret)
		s->f->smp_errors++;
	return ret;
}

static int node_info(struct scan *s, const char *dr, struct node_info *ni, char *err, size_t errlen)
{
	uint8_t d[IB_SMP_DATA_SIZE];
	int ret = smp(s, dr, IB_ATTR_NODE_INFO, 0, d, err, errlen);

	if (ret)
		return ret;
	mad_decode_field(d, IB_NODE_TYPE_F, &ni->type);
	mad_decode_field(d, IB_NODE_NPORTS_F, &ni->nports);
	mad_decode_field(d, IB_NODE_LOCAL_PORT_F, &ni->local_port);
	mad_decode_field(d, IB_NODE_PARTITION_CAP_F, &ni->pcap);
	mad_decode_field(d, IB_NODE_GUID_F, &ni->node_guid);
	mad_decode_field(d, IB_NODE_PORT_GUID_F, &ni->port_guid);
	return 0;
}

static struct ibvf_fabric_port *new_port(struct scan *s)
{
	struct ibvf_fabric *f = s->f;

	if (f->n_ports == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		void *n = realloc(f->ports, cap * sizeof(*f->ports));

		if (!n)
			return NULL;
		f->ports = n;
		s->cap = cap;
	}
	memset(&f->ports[f->n_ports], 0, sizeof(f->ports[0]));
	return &f->ports[f->n_ports++];
}

/* A CA port reached at @dr: NodeDescription, PortInfo, every P_KeyTable block. */
static int record_ca(struct scan *s, const char *dr, const struct node_info *ni, uint64_t peer,
		     unsigned peer_port, bool local)
{
	struct ibvf_fabric_port *p = new_port(s);
	uint8_t d[IB_SMP_DATA_SIZE];
	char err[IBVF_ERR_LEN];
	unsigned v, n, blocks;

	if (!p)
		return -ENOMEM;
	p->node_guid = ni->node_guid;
	p->port_guid = ni->port_guid;
	p->port_num = (uint8_t)ni->local_port;
	p->peer_guid = peer;
	p->peer_port = (uint8_t)peer_port;
	p->local = local;
	p->pkey_cap = (uint16_t)ni->pcap;
	snprintf(p->dr, sizeof(p->dr), "%s", dr);
	if (!smp(s, dr, IB_ATTR_NODE_DESC, 0, d, err, sizeof(err))) {
		size_t i;

		for (i = 0; i < IBVF_NODE_DESC_LEN - 1 && d[i]; i++)
			p->desc[i] = d[i] >= 0x20 && d[i] < 0x7f ? (char)d[i] : '?';
		p->desc[i] = 0;
	}
	if (smp(s, dr, IB_ATTR_PORT_INFO, 0, d, err, sizeof(err)))
		goto fail;
	mad_decode_field(d, IB_PORT_STATE_F, &v);
	p->state = (uint8_t)v;
	mad_decode_field(d, IB_PORT_PHYS_STATE_F, &v);
	p->phys_state = (uint8_t)v;
	mad_decode_field(d, IB_PORT_LID_F, &v);
	p->lid = (uint16_t)v;
	mad_decode_field(d, IB_PORT_SMLID_F, &v);
	p->sm_lid = (uint16_t)v;
	n = ni->pcap < IBVF_PKEY_TABLE_MAX ? ni->pcap : IBVF_PKEY_TABLE_MAX;
	p->pkeys = calloc(n ? n : 1, sizeof(*p->pkeys));
	if (!p->pkeys)
		return -ENOMEM;
	blocks = (n + IBVF_PKEY_BLOCK_SIZE - 1) / IBVF_PKEY_BLOCK_SIZE;
	for (unsigned b = 0; b < blocks; b++) {
		if (smp(s, dr, IB_ATTR_PKEY_TBL, b, d, err, sizeof(err)))
			goto fail;
		for (unsigned i = 0; i < IBVF_PKEY_BLOCK_SIZE && b * IBVF_PKEY_BLOCK_SIZE + i < n;
		     i++)
			p->pkeys[b * IBVF_PKEY_BLOCK_SIZE + i] =
				(uint16_t)((d[2 * i] << 8) | d[2 * i + 1]);
	}
	p->n_pkeys = (uint16_t)n;
	p->read_ok = true;
	return 0;
fail:
	p->n_pkeys = 0;
	snprintf(p->error, sizeof(p->error), "%.*s", (int)sizeof(p->error) - 1, err);
	log_debug("fabric scan: CA port at %s (0x%016" PRIx64 "): %s", dr, ni->port_guid, err);
	return 0;
}

static bool switch_seen(const struct scan *s, uint64_t guid)
{
	for (size_t i = 0; i < s->n_todo; i++)
		if (s->todo[i].guid == guid)
			return true;
	return false;
}

static int add_switch(struct scan *s, const char *dr, const struct node_info *ni)
{
	if (switch_seen(s, ni->node_guid))
		return 0;
	if (s->n_todo == s->cap_todo) {
		size_t cap = s->cap_todo ? s->cap_todo * 2 : 16;
		void *n = realloc(s->todo, cap * sizeof(*s->todo));

		if (!n)
			return -ENOMEM;
		s->todo = n;
		s->cap_todo = cap;
	}
	snprintf(s->todo[s->n_todo].dr, sizeof(s->todo[0].dr), "%s", dr);
	s->todo[s->n_todo].entry = ni->local_port;
	s->todo[s->n_todo].nports = ni->nports;
	s->todo[s->n_todo].guid = ni->node_guid;
	s->n_todo++;
	s->f->n_switches++;
	return 0;
}

/* Whatever sits behind route @dr: a switch to visit, or a CA port to record. */
static int reach(struct scan *s, const char *dr, uint64_t peer, unsigned peer_port)
{
	struct node_info ni = {0};
	char err[IBVF_ERR_LEN];

	if (node_info(s, dr, &ni, err, sizeof(err))) {
		log_debug("fabric scan: nothing answers at %s: %s", dr, err);
		return 0;
	}
	if (ni.type == IB_NODE_SWITCH)
		return add_switch(s, dr, &ni);
	return record_ca(s, dr, &ni, peer, peer_port, false);
}

static int visit_switch(struct scan *s, size_t i)
{
	struct sw_todo sw = s->todo[i];
	unsigned hops = 0;
	char err[IBVF_ERR_LEN];

	for (const char *c = sw.dr; *c; c++)
		hops += *c == ',';
	if (hops >= s->max_hops)
		return 0;
	for (unsigned p = 1; p <= sw.nports; p++) {
		uint8_t d[IB_SMP_DATA_SIZE];
		char child[sizeof(sw.dr)];
		unsigned state;
		int ret;

		if (p == sw.entry)
			continue;
		if (smp(s, sw.dr, IB_ATTR_PORT_INFO, p, d, err, sizeof(err)))
			continue;
		mad_decode_field(d, IB_PORT_STATE_F, &state);
		if (state <= IBVF_PORT_DOWN)
			continue;
		if ((size_t)snprintf(child, sizeof(child), "%s,%u", sw.dr, p) >= sizeof(child))
			continue;
		ret = reach(s, child, sw.guid, p);
		if (ret)
			return ret;
	}
	return 0;
}

int ibvf_fabric_scan(struct ibvf_port_src *src, const struct ibvf_fabric_scan_opts *o,
		     struct ibvf_fabric *out, char *err, size_t errlen)
{
	struct scan s = {.src = src, .f = out};
	struct node_info self = {0};
	int64_t t0 = ibvf_mono_ms();
	uint32_t rate = o && o->smp_rate ? o->smp_rate : IBVF_FABRIC_SMP_RATE_DEFAULT;
	int ret;

	memset(out, 0, sizeof(*out));
	if (ibvf_port_src_kind(src) != IBVF_PORT_SRC_FABRIC)
		return ibvf_errf(err, errlen, -EOPNOTSUPP,
				 "a fabric scan needs the fabric (SMP) port source");
	s.interval_ns = rate == UINT32_MAX ? 0 : 1000000000ull / rate;
	s.max_hops =
		o && o->max_hops && o->max_hops < IBVF_DR_MAX_HOPS ? o->max_hops : IBVF_DR_MAX_HOPS;
	ret = node_info(&s, "0", &self, err, errlen);
	if (ret)
		goto out;
	if (self.type == IB_NODE_SWITCH) {
		ret = add_switch(&s, "0", &self);
	} else {
		char dr[16];

		ret = record_ca(&s, "0", &self, 0, 0, true);
		snprintf(dr, sizeof(dr), "0,%u", self.local_port);
		if (!ret)
			ret = reach(&s, dr, self.port_guid, self.local_port);
	}
	for (s.head = 0; !ret && s.head < s.n_todo; s.head++)
		ret = visit_switch(&s, s.head);
	if (ret == -ENOMEM)
		ibvf_errf(err, errlen, ret, "out of memory");
	/* the local port's peer: the switch found behind "0,<port>" */
	if (!ret && out->n_ports && s.n_todo && self.type != IB_NODE_SWITCH &&
	    !strchr(s.todo[0].dr + 2, ',')) {
		out->ports[0].peer_guid = s.todo[0].guid;
		out->ports[0].peer_port = (uint8_t)s.todo[0].entry;
	}
out:
	free(s.todo);
	out->elapsed_ms = ibvf_mono_ms() - t0;
	if (ret)
		ibvf_fabric_free(out);
	return ret;
}

void ibvf_fabric_free(struct ibvf_fabric *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n_ports; i++)
		free(f->ports[i].pkeys);
	free(f->ports);
	f->ports = NULL;
	f->n_ports = 0;
}
