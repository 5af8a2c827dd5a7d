// SPDX-License-Identifier: MIT
/*
 * Port watcher: port state and P_Key table from libibumad (local sysfs) or
 * from SMPs/SA queries built with libibmad (fabric). See port_watch.h.
 *
 * MAD transport: packets are built by libibmad (mad_build_pkt()) and decoded
 * with mad_decode_field(); the agents come from mad_rpc_open_port(). The
 * send/receive loop is ours (umad_send()/umad_recv() of libibumad) instead of
 * libibmad's mad_rpc() because mad_rpc() writes an unconditional "ibwarn"
 * line to stderr for every MAD that gets no reply, which a poller hits by
 * design many times a second, and because it folds an SA "no records" answer
 * and a silent SM into the same NULL. Our loop also keeps its own TIDs, so
 * it does not touch libibmad's unlocked global TID counter.
 */
#include "port_watch.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include <endian.h>
#include <infiniband/mad.h>
#include <infiniband/umad.h>

#include <ibvf/types.h>

#include "clock.h"
#include "err.h"
#include "file_read.h"
#include "log.h"

/* IBTA vol. 1, 13.4.7: MAD status; 15.2.1.1: SA class-specific codes in bits 8..15. */
#define MAD_STATUS_SA_CODE(st) (((st) >> 8) & 0xff)
#define SA_ERR_NO_RECORDS      3
/* IBTA vol. 1, 15.2.5.16: PathRecord component mask bits for DGID and SGID. */
#define PR_COMPMASK_DGID (1ull << 2)
#define PR_COMPMASK_SGID (1ull << 3)
/* Unicast LIDs: 0x0001..0xbfff (IBTA vol. 1, 4.1.3). */
#define LID_UNICAST_MAX 0xbfff
/* GUID -> LID answers kept per source (one SA query per new GUID target). */
#define LID_CACHE_SIZE 32

struct ibvf_port_src {
	enum ibvf_port_source kind;
	char ca[UMAD_CA_NAME_LEN];
	int port;
	char name[UMAD_CA_NAME_LEN + 8];
	struct ibvf_port_watch_config cfg;
	struct ibmad_port *mp; /* fabric only */
	int umad_fd;	       /* mad_rpc_portid(mp) */
	uint32_t trid;	       /* our own transaction IDs (low 32 bits) */
	struct {
		uint64_t guid; /* GUID targets resolved through the SA ... */
		uint16_t lid;  /* ... and their LIDs (0 = free slot) */
	} lids[LID_CACHE_SIZE];
	unsigned lids_next; /* round-robin replacement */
};

/* The cached LID of GUID target @t, or 0. */
static uint16_t lid_cache_get(const struct ibvf_port_src *s, const struct ibvf_port_target *t)
{
	for (unsigned i = 0; t->kind == IBVF_TARGET_GUID && i < LID_CACHE_SIZE; i++)
		if (s->lids[i].lid && s->lids[i].guid == t->guid)
			return s->lids[i].lid;
	return 0;
}

static void lid_cache_put(struct ibvf_port_src *s, uint64_t guid, uint16_t lid)
{
	s->lids[s->lids_next].guid = guid;
	s->lids[s->lids_next].lid = lid;
	s->lids_next = (s->lids_next + 1) % LID_CACHE_SIZE;
}

/* Forget @t's LID after a failed query: the SM may have moved it. */
static void lid_cache_drop(struct ibvf_port_src *s, const struct ibvf_port_target *t)
{
	for (unsigned i = 0; t->kind == IBVF_TARGET_GUID && i < LID_CACHE_SIZE; i++)
		if (s->lids[i].guid == t->guid)
			s->lids[i].lid = 0;
}

/* ibvf_port_watch_config_defaults() is in port_watch_config.c (no libibumad there). */

/* ------------------------------------------------------------ names -- */

const char *ibvf_port_state_name(unsigned state)
{
	static const char *const n[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};

	return state < sizeof(n) / sizeof(n[0]) ? n[state] : "?";
}

const char *ibvf_port_phys_state_name(unsigned phys_state)
{
	static const char *const n[] = {"NoStateChange",
					"Sleep",
					"Polling",
					"Disabled",
					"PortConfigurationTraining",
					"LinkUp",
					"LinkErrorRecovery",
					"PhyTest"};

	return phys_state < sizeof(n) / sizeof(n[0]) ? n[phys_state] : "?";
}

/* ------------------------------------------------------- P_Key lookup -- */

int ibvf_pkey_find(const uint16_t *table, size_t n, uint16_t pkey, enum ibvf_pkey_match match,
		   uint16_t *entry)
{
	uint16_t key = ibvf_pkey_key(pkey);
	int limited = -1;

	if (!key)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		uint16_t e = table[i];

		if (ibvf_pkey_key(e) != key)
			continue;
		if (ibvf_pkey_is_full(e)) {
			if (match == IBVF_PKEY_MATCH_LIMITED)
				continue;
			if (entry)
				*entry = e;
			return (int)i;
		}
		if (match != IBVF_PKEY_MATCH_FULL && limited < 0)
			limited = (int)i;
	}
	if (limited < 0)
		return -ENOENT;
	if (entry)
		*entry = table[limited];
	return limited;
}

struct ibvf_port_cond ibvf_port_cond_ready(uint16_t pkey, enum ibvf_pkey_match match)
{
	struct ibvf_port_cond c = {
		.state = IBVF_PORT_ACTIVE,
		.need_lid = true,
		.pkey_want = IBVF_PKEY_WANT_PRESENT,
		.pkey = pkey,
		.match = match,
	};

	return c;
}

bool ibvf_port_cond_met(const struct ibvf_port_info *info, const struct ibvf_port_cond *c,
			int *pkey_index)
{
	int idx = -1;

	if (pkey_index)
		*pkey_index = -1;
	if (c->unreachable)
		return !info->reachable;
	if (!info->reachable)
		return false;
	if (c->state && info->state != c->state)
		return false;
	if (c->need_lid && !info->lid)
		return false;
	if (c->pkey_want != IBVF_PKEY_WANT_NONE) {
		idx = ibvf_pkey_find(info->pkeys, info->n_pkeys, c->pkey, c->match, NULL);
		if (c->pkey_want == IBVF_PKEY_WANT_PRESENT && idx < 0)
			return false;
		if (c->pkey_want == IBVF_PKEY_WANT_ABSENT && idx >= 0)
			return false;
	}
	if (pkey_index && c->pkey_want == IBVF_PKEY_WANT_PRESENT)
		*pkey_index = idx;
	return true;
}

/* ------------------------------------------------------- describing -- */

struct sbuf {
	char *p;
	size_t len, off;
};

static void __attribute__((format(printf, 2, 3))) sb_add(struct sbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->off >= b->len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(b->p + b->off, b->len - b->off, fmt, ap);
	va_end(ap);
	if (n > 0)
		b->off += (size_t)n;
	if (b->off >= b->len)
		b->off = b->len;
}

/* The P_Key as the condition names it: 0x8001 (full), 0x0001 (limited), 0x0001 (any). */
static void sb_pkey(struct sbuf *b, const struct ibvf_port_cond *c)
{
	uint16_t k = ibvf_pkey_key(c->pkey);

	if (c->match == IBVF_PKEY_MATCH_FULL)
		sb_add(b, "P_Key 0x%04x", k | IBVF_PKEY_FULL_BIT);
	else if (c->match == IBVF_PKEY_MATCH_LIMITED)
		sb_add(b, "P_Key 0x%04x (limited)", k);
	else
		sb_add(b, "P_Key 0x%04x (full or limited)", k);
}

static void sb_missing(struct sbuf *b, const struct ibvf_port_info *i,
		       const struct ibvf_port_cond *c)
{
	const char *sep = ", but ";
	uint16_t e;
	int idx;

	if (c->state && i->state != c->state) {
		sb_add(b, "%sstate is not %s", sep, ibvf_port_state_name(c->state));
		sep = ", ";
	}
	if (c->need_lid && !i->lid) {
		sb_add(b, "%sno LID assigned", sep);
		sep = ", ";
	}
	if (c->pkey_want == IBVF_PKEY_WANT_NONE)
		return;
	idx = ibvf_pkey_find(i->pkeys, i->n_pkeys, c->pkey, c->match, NULL);
	if (c->pkey_want == IBVF_PKEY_WANT_PRESENT && idx < 0) {
		sb_add(b, "%s", sep);
		sb_pkey(b, c);
		idx = ibvf_pkey_find(i->pkeys, i->n_pkeys, c->pkey, IBVF_PKEY_MATCH_ANY, &e);
		if (idx >= 0)
			sb_add(b, " absent: index %d holds 0x%04x (%s member)", idx, e,
			       ibvf_pkey_is_full(e) ? "full" : "limited");
		else
			sb_add(b, " absent");
	} else if (c->pkey_want == IBVF_PKEY_WANT_ABSENT && idx >= 0) {
		sb_add(b, "%s", sep);
		sb_pkey(b, c);
		sb_add(b, " still present at index %d", idx);
	}
}

char *ibvf_port_describe(const struct ibvf_port_info *info, const struct ibvf_port_cond *c,
			 char *buf, size_t len)
{
	struct sbuf b = {buf, len, 0};
	bool any = false;

	if (!len)
		return buf;
	buf[0] = 0;
	if (!info->reachable) {
		sb_add(&b, "port unreachable: %s", info->error[0] ? info->error : "no answer");
		return buf;
	}
	sb_add(&b, "port %s (%s), LID %u", ibvf_port_state_name(info->state),
	       ibvf_port_phys_state_name(info->phys_state), info->lid);
	if (info->sm_lid)
		sb_add(&b, ", SM LID %u", info->sm_lid);
	else
		sb_add(&b, ", no SM LID");
	if (c && ibvf_port_cond_met(info, c, NULL))
		sb_add(&b, ": condition met");
	else if (c)
		sb_missing(&b, info, c);
	sb_add(&b, "; table:");
	for (size_t i = 0; i < info->n_pkeys; i++) {
		if (!ibvf_pkey_key(info->pkeys[i]))
			continue;
		sb_add(&b, " 0x%04x", info->pkeys[i]);
		any = true;
	}
	if (!any)
		sb_add(&b, " empty");
	return buf;
}

/* ---------------------------------------------------------- sources -- */

enum ibvf_port_source ibvf_port_src_kind(const struct ibvf_port_src *src)
{
	return src->kind;
}

const char *ibvf_port_src_name(const struct ibvf_port_src *src)
{
	return src->name;
}

static bool link_layer_is_ib(const char *ll)
{
	/* sysfs link_layer: "InfiniBand" or "Ethernet"; umad2sim writes "IB"; kernels
	 * without the file predate RoCE, so an empty value means InfiniBand */
	return !ll[0] || !strcmp(ll, "InfiniBand") || !strcmp(ll, "IB");
}

/* Fill @out from umad_get_port() (sysfs). */
static int local_read(const char *ca, int port, struct ibvf_port_info *out, char *err,
		      size_t errlen)
{
	umad_port_t p;
	int ret;

	memset(&p, 0, sizeof(p));
	ret = umad_get_port(ca, port, &p);
	if (ret < 0)
		return ibvf_errf(err, errlen, -ENODEV, "%s port %d: not found (umad_get_port: %s)",
				 ca ? ca : "default CA", port, strerror(-ret));
	out->reachable = true;
	out->state = (uint8_t)p.state;
	out->phys_state = (uint8_t)p.phys_state;
	out->lid = (uint16_t)p.base_lid;
	out->lmc = (uint8_t)p.lmc;
	out->sm_lid = (uint16_t)p.sm_lid;
	out->port_guid = be64toh(p.port_guid);
	out->link_layer_ib = link_layer_is_ib(p.link_layer);
	out->pkey_cap = p.pkeys_size > UINT16_MAX ? UINT16_MAX : (uint16_t)p.pkeys_size;
	out->n_pkeys = out->pkey_cap < IBVF_PKEY_TABLE_MAX ? out->pkey_cap : IBVF_PKEY_TABLE_MAX;
	for (size_t i = 0; i < out->n_pkeys; i++)
		out->pkeys[i] = p.pkeys ? p.pkeys[i] : 0;
	umad_release_port(&p);
	return 0;
}

/* A sysfs attribute as a stdio stream, opened by ibvf_file_open_regular() (never blocks). */
static FILE *open_sysfs(const char *path)
{
	int fd = ibvf_file_open_regular(path, 0, NULL, NULL, 0);
	FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;

	if (!f && fd >= 0)
		close(fd);
	return f;
}

/* /dev/infiniband/umadN of @ca port @port from /sys/class/infiniband_mad (for messages). */
static void umad_dev_path(const char *ca, int port, char *buf, size_t len)
{
	DIR *d = opendir(SYS_INFINIBAND_MAD);
	struct dirent *de;

	snprintf(buf, len, "/dev/infiniband/umad* of %s port %d", ca, port);
	if (!d)
		return;
	while ((de = readdir(d))) {
		char path[300], dev[UMAD_CA_NAME_LEN] = "";
		unsigned p = 0;
		FILE *f;

		if (strncmp(de->d_name, "umad", 4))
			continue;
		snprintf(path, sizeof(path), "%s/%s/ibdev", SYS_INFINIBAND_MAD, de->d_name);
		f = open_sysfs(path);
		if (!f)
			continue;
		if (fscanf(f, "%19s", dev) != 1)
			dev[0] = 0;
		fclose(f);
		snprintf(path, sizeof(path), "%s/%s/port", SYS_INFINIBAND_MAD, de->d_name);
		f = open_sysfs(path);
		if (!f)
			continue;
		if (fscanf(f, "%u", &p) != 1)
			p = 0;
		fclose(f);
		if (!strcmp(dev, ca) && (int)p == port) {
			snprintf(buf, len, "/dev/infiniband/%.32s", de->d_name);
			break;
		}
	}
	closedir(d);
}

static int fabric_open(struct ibvf_port_src *s, char *err, size_t errlen)
{
	int classes[] = {IB_SMI_CLASS, IB_SMI_DIRECT_CLASS, IB_SA_CLASS};
	char dev[128];
	int e;

	errno = 0;
	s->mp = mad_rpc_open_port(s->ca, s->port, classes, 3);
	if (s->mp) {
		s->umad_fd = mad_rpc_portid(s->mp);
		return 0;
	}
	e = errno;
	umad_dev_path(s->ca, s->port, dev, sizeof(dev));
	if (e == EACCES || e == EPERM)
		return ibvf_errf(err, errlen, -EACCES,
				 "%s: cannot open %s: %s; sending SMPs and SA queries needs "
				 "read-write access to it (root, or CAP_NET_ADMIN with the device "
				 "file granted)",
				 s->name, dev, strerror(e));
	if (e == ENOENT || e == ENODEV || e == ENXIO)
		return ibvf_errf(err, errlen, -ENODEV,
				 "%s: umad device %s missing (is the ib_umad module loaded?)",
				 s->name, dev);
	return ibvf_errf(err, errlen, -EIO, "%s: libibmad could not open %s for SMPs: %s", s->name,
			 dev, e ? strerror(e) : "unknown error");
}

int ibvf_port_src_open(const char *ca, int port, enum ibvf_port_source kind,
		       const struct ibvf_port_watch_config *cfg, struct ibvf_port_src **out,
		       char *err, size_t errlen)
{
	struct ibvf_port_src *s;
	struct ibvf_port_info *self;
	umad_ca_t c;
	int ret;

	*out = NULL;
	if (kind != IBVF_PORT_SRC_LOCAL && kind != IBVF_PORT_SRC_FABRIC)
		return ibvf_errf(err, errlen, -EINVAL, "unknown port source %d", (int)kind);
	if (port < 0 || port > 254)
		return ibvf_errf(err, errlen, -EINVAL, "port number %d out of range 1..254", port);
	if (umad_init() < 0)
		return ibvf_errf(err, errlen, -ENODEV, "libibumad: umad_init failed");
	memset(&c, 0, sizeof(c));
	ret = umad_get_ca(ca, &c);
	if (ret < 0)
		return ibvf_errf(err, errlen, -ENODEV, "no RDMA device '%s' (umad_get_ca: %s)",
				 ca ? ca : "(default)", strerror(-ret));
	if (port > c.numports) {
		ret = ibvf_errf(err, errlen, -ENODEV, "%s has %d port(s), no port %d", c.ca_name,
				c.numports, port);
		umad_release_ca(&c);
		return ret;
	}
	s = calloc(1, sizeof(*s));
	self = calloc(1, sizeof(*self));
	if (!s || !self) {
		umad_release_ca(&c);
		free(s);
		free(self);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	snprintf(s->ca, sizeof(s->ca), "%s", c.ca_name);
	umad_release_ca(&c);
	s->kind = kind;
	s->port = port;
	s->umad_fd = -1;
	s->trid = (uint32_t)(ibvf_mono_ms() ^ ((uint32_t)getpid() << 16)) | 1;
	if (cfg)
		s->cfg = *cfg;
	else
		ibvf_port_watch_config_defaults(&s->cfg);
	/* port 0: libibumad picks the default port (first ACTIVE, else first) */
	ret = local_read(s->ca, port, self, err, errlen);
	if (ret)
		goto fail;
	if (!port) {
		umad_port_t p;

		if (umad_get_port(s->ca, 0, &p) == 0) {
			s->port = p.portnum;
			umad_release_port(&p);
		}
	}
	snprintf(s->name, sizeof(s->name), "%s:%d", s->ca, s->port);
	if (!self->link_layer_ib) {
		ret = ibvf_errf(err, errlen, -EPROTONOSUPPORT,
				"%s: link layer is not InfiniBand (RoCE/Ethernet ports have no "
				"IB port state or P_Key table to watch)",
				s->name);
		goto fail;
	}
	if (kind == IBVF_PORT_SRC_FABRIC) {
		ret = fabric_open(s, err, errlen);
		if (ret)
			goto fail;
	}
	free(self);
	*out = s;
	return 0;
fail:
	free(self);
	free(s);
	return ret;
}

void ibvf_port_src_close(struct ibvf_port_src *src)
{
	if (!src)
		return;
	if (src->mp)
		mad_rpc_close_port(src->mp);
	free(src);
}

int ibvf_port_src_self(struct ibvf_port_src *src, struct ibvf_port_info *out, char *err,
		       size_t errlen)
{
	int ret;

	memset(out, 0, sizeof(*out));
	out->ms = ibvf_mono_ms();
	ret = local_read(src->ca, src->port, out, err, errlen);
	if (ret)
		snprintf(out->error, sizeof(out->error), "%s", err ? err : "");
	return ret;
}

/* --------------------------------------------------------- MAD RPC -- */

/*
 * One request/response: send @rpc to @dport, wait for the response with our
 * TID, retrying cfg.mad_retries times after cfg.mad_timeout_ms each.
 * @data: in: request payload (rpc->datasz bytes at rpc->dataoffs); out: the
 * response payload. *@status: the MAD status (DR SMPs: without the D bit).
 * Return: 0, -ETIMEDOUT (no reply), -EIO (send/receive failed).
 */
static int mad_call(struct ibvf_port_src *s, ib_rpc_t *rpc, ib_portid_t *dport, void *data,
		    unsigned *status)
{
	size_t bufsz = umad_size() + IB_MAD_SIZE;
	uint8_t sbuf[1024], rbuf[1024];
	int agent, len, attempt;
	uint32_t trid;

	if (bufsz > sizeof(sbuf))
		return -EIO;
	agent = mad_rpc_class_agent(s->mp, rpc->mgtclass & 0xff);
	if (agent < 0)
		return -EIO;
	trid = ++s->trid;
	if (!trid)
		trid = ++s->trid;
	rpc->trid = trid;
	memset(sbuf, 0, bufsz);
	len = mad_build_pkt(sbuf, rpc, dport, NULL, data);
	if (len < 0)
		return -EIO;
	for (attempt = 0; attempt <= (int)s->cfg.mad_retries; attempt++) {
		int64_t deadline = ibvf_mono_ms() + s->cfg.mad_timeout_ms;

		if (umad_send(s->umad_fd, agent, sbuf, len, (int)s->cfg.mad_timeout_ms, 0) < 0)
			return -EIO;
		for (;;) {
			int64_t left = deadline - ibvf_mono_ms();
			int rlen = IB_MAD_SIZE, r;
			uint8_t *mad;

			if (left <= 0)
				break;
			r = umad_recv(s->umad_fd, rbuf, &rlen, (int)left);
			if (r == -ETIMEDOUT || r == -EAGAIN || r == -EINTR)
				continue;
			if (r < 0)
				return -EIO;
			mad = umad_get_mad(rbuf);
			if ((uint32_t)mad_get_field64(mad, 0, IB_MAD_TRID_F) != trid)
				continue; /* a late answer to an earlier attempt */
			if (umad_status(rbuf))
				break; /* kernel send timeout: try again */
			if ((rpc->mgtclass & 0xff) == IB_SA_CLASS)
				*status = mad_get_field(mad, 0, IB_MAD_STATUS_F);
			else
				*status = mad_get_field(mad, 0, IB_DRSMP_STATUS_F);
			memcpy(data, mad + rpc->dataoffs, (size_t)rpc->datasz);
			return 0;
		}
	}
	return -ETIMEDOUT;
}

static void target_str(const struct ibvf_port_target *t, char *buf, size_t len)
{
	switch (t->kind) {
	case IBVF_TARGET_SELF:
		snprintf(buf, len, "the local port");
		break;
	case IBVF_TARGET_LID:
		snprintf(buf, len, "LID %u", t->lid);
		break;
	case IBVF_TARGET_GUID:
		snprintf(buf, len, "port GUID 0x%016" PRIx64, t->guid);
		break;
	case IBVF_TARGET_DR:
		snprintf(buf, len, "directed route %.*s", (int)sizeof(t->dr) - 1, t->dr);
		break;
	}
	if (t->port) {
		size_t l = strlen(buf);

		snprintf(buf + l, len - l, " port %u", t->port);
	}
}

/* Get one SMP attribute. Return 0, -ETIMEDOUT, -EIO (bad status). */
static int smp_get(struct ibvf_port_src *s, ib_portid_t *id, unsigned attr, unsigned mod,
		   uint8_t data[IB_SMP_DATA_SIZE], const char *what, char *err, size_t errlen)
{
	ib_rpc_t rpc = {0};
	unsigned status = 0;
	int ret;

	rpc.mgtclass = id->lid > 0 ? IB_SMI_CLASS : IB_SMI_DIRECT_CLASS;
	rpc.method = IB_MAD_METHOD_GET;
	rpc.attr.id = attr;
	rpc.attr.mod = mod;
	rpc.datasz = IB_SMP_DATA_SIZE;
	rpc.dataoffs = IB_SMP_DATA_OFFS;
	id->sl = 0;
	id->qp = 0;
	memset(data, 0, IB_SMP_DATA_SIZE);
	ret = mad_call(s, &rpc, id, data, &status);
	if (ret == -ETIMEDOUT)
		return ibvf_errf(err, errlen, ret, "no SMP reply (%s, %u x %u ms)", what,
				 s->cfg.mad_retries + 1, s->cfg.mad_timeout_ms);
	if (ret)
		return ibvf_errf(err, errlen, ret, "SMP %s: umad send/receive failed", what);
	if (status)
		return ibvf_errf(err, errlen, -EIO, "SMP %s: MAD status 0x%04x", what, status);
	return 0;
}

/* Directed route "0" (the local port); str2drpath() takes a writable string. */
static void drpath_local(ib_dr_path_t *path)
{
	char zero[] = "0";

	str2drpath(path, zero, 0, 0);
}

static int self_portinfo(struct ibvf_port_src *s, uint8_t pi[IB_SMP_DATA_SIZE],
			 uint8_t ni[IB_SMP_DATA_SIZE], char *err, size_t errlen)
{
	ib_portid_t self;
	int ret;

	memset(&self, 0, sizeof(self));
	drpath_local(&self.drpath);
	ret = smp_get(s, &self, IB_ATTR_NODE_INFO, 0, ni, "NodeInfo of the local port", err,
		      errlen);
	if (!ret)
		ret = smp_get(s, &self, IB_ATTR_PORT_INFO, 0, pi, "PortInfo of the local port", err,
			      errlen);
	return ret;
}

int ibvf_port_resolve_guid(struct ibvf_port_src *s, uint64_t guid, uint16_t *lid, char *err,
			   size_t errlen)
{
	uint8_t pi[IB_SMP_DATA_SIZE], ni[IB_SMP_DATA_SIZE], rec[IB_SA_DATA_SIZE];
	ibmad_gid_t sgid, dgid;
	uint64_t prefix, selfguid;
	unsigned smlid, mylid, smsl, status = 0;
	ib_rpc_t rpc = {0};
	ib_portid_t sm;
	int ret, dlid;

	if (s->kind != IBVF_PORT_SRC_FABRIC)
		return ibvf_errf(err, errlen, -EOPNOTSUPP,
				 "resolving a port GUID needs the fabric source (SA query)");
	if (!guid)
		return ibvf_errf(err, errlen, -EINVAL, "port GUID 0 cannot be resolved");
	ret = self_portinfo(s, pi, ni, err, errlen);
	if (ret)
		return ret;
	mad_decode_field(pi, IB_PORT_SMLID_F, &smlid);
	mad_decode_field(pi, IB_PORT_LID_F, &mylid);
	mad_decode_field(pi, IB_PORT_SMSL_F, &smsl);
	mad_decode_field(pi, IB_PORT_GID_PREFIX_F, &prefix);
	mad_decode_field(ni, IB_NODE_PORT_GUID_F, &selfguid);
	if (!smlid || smlid > LID_UNICAST_MAX || !mylid)
		return ibvf_errf(err, errlen, -EHOSTUNREACH,
				 "%s has LID %u and SM LID %u: no SM has brought this port up, "
				 "so there is no SA to ask",
				 s->name, mylid, smlid);
	if (!prefix)
		prefix = IB_DEFAULT_SUBN_PREFIX;
	mad_encode_field(sgid, IB_GID_PREFIX_F, &prefix);
	mad_encode_field(sgid, IB_GID_GUID_F, &selfguid);
	mad_encode_field(dgid, IB_GID_PREFIX_F, &prefix);
	mad_encode_field(dgid, IB_GID_GUID_F, &guid);

	memset(&sm, 0, sizeof(sm));
	ib_portid_set(&sm, (int)smlid, 1, IB_DEFAULT_QP1_QKEY);
	sm.sl = (uint8_t)smsl;
	memset(rec, 0, sizeof(rec));
	mad_encode_field(rec, IB_SA_PR_DGID_F, dgid);
	mad_encode_field(rec, IB_SA_PR_SGID_F, sgid);
	rpc.mgtclass = IB_SA_CLASS;
	rpc.method = IB_MAD_METHOD_GET;
	rpc.attr.id = IB_SA_ATTR_PATHRECORD;
	rpc.mask = PR_COMPMASK_DGID | PR_COMPMASK_SGID;
	rpc.datasz = IB_SA_DATA_SIZE;
	rpc.dataoffs = IB_SA_DATA_OFFS;
	ret = mad_call(s, &rpc, &sm, rec, &status);
	if (ret == -ETIMEDOUT)
		return ibvf_errf(err, errlen, ret,
				 "the SA (SM LID %u) did not answer a PathRecord query for "
				 "0x%016" PRIx64 " (%u x %u ms)",
				 smlid, guid, s->cfg.mad_retries + 1, s->cfg.mad_timeout_ms);
	if (ret)
		return ibvf_errf(err, errlen, ret, "SA PathRecord query: umad send/receive failed");
	if (status && MAD_STATUS_SA_CODE(status) == SA_ERR_NO_RECORDS)
		return ibvf_errf(err, errlen, -ENOENT,
				 "the SA knows no path to port GUID 0x%016" PRIx64
				 " (port not ACTIVE yet, or not on the fabric)",
				 guid);
	if (status)
		return ibvf_errf(err, errlen, -EIO,
				 "SA PathRecord query for 0x%016" PRIx64 ": MAD status 0x%04x",
				 guid, status);
	mad_decode_field(rec, IB_SA_PR_DLID_F, &dlid);
	if (dlid <= 0 || dlid > LID_UNICAST_MAX)
		return ibvf_errf(err, errlen, -ENOENT,
				 "the SA returned DLID %d for port GUID 0x%016" PRIx64, dlid, guid);
	*lid = (uint16_t)dlid;
	return 0;
}

static int parse_dr(const char *dr, char *err, size_t errlen)
{
	const char *p = dr;
	int hops = -1;

	if (p[0] != '0' || (p[1] && p[1] != ','))
		return ibvf_errf(err, errlen, -EINVAL,
				 "directed route '%s' must start with 0 (e.g. 0,1,4)", dr);
	while (*p) {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(p, &end, 10);
		if (end == p || errno || (hops >= 0 && (v < 1 || v > 254)) || (*end && *end != ','))
			return ibvf_errf(err, errlen, -EINVAL,
					 "directed route '%s': bad hop at '%s' (ports 1..254)", dr,
					 p);
		if (++hops > IBVF_DR_MAX_HOPS)
			return ibvf_errf(err, errlen, -EINVAL,
					 "directed route '%s' has more than %d hops", dr,
					 IBVF_DR_MAX_HOPS);
		p = *end ? end + 1 : end;
		if (*end && !*p)
			return ibvf_errf(err, errlen, -EINVAL,
					 "directed route '%s' ends with a comma", dr);
	}
	return 0;
}

/* Validate @t against the source (without any MAD). */
int ibvf_port_smp_get(struct ibvf_port_src *src, const char *dr, uint16_t lid, unsigned attr,
		      unsigned mod, uint8_t data[64], char *err, size_t errlen)
{
	char path[4 * (IBVF_DR_MAX_HOPS + 1)], what[320];
	ib_portid_t id;

	if (src->kind != IBVF_PORT_SRC_FABRIC)
		return ibvf_errf(err, errlen, -EOPNOTSUPP, "%s: SMPs need the fabric source",
				 src->name);
	memset(&id, 0, sizeof(id));
	if (lid) {
		ib_portid_set(&id, lid, 0, 0);
		snprintf(what, sizeof(what), "attribute 0x%04x of LID %u", attr, lid);
	} else {
		if (!dr || parse_dr(dr, err, errlen) < 0)
			return dr ? -EINVAL : ibvf_errf(err, errlen, -EINVAL, "no directed route");
		snprintf(path, sizeof(path), "%s", dr);
		if (str2drpath(&id.drpath, path, 0, 0) < 0)
			return ibvf_errf(err, errlen, -EINVAL, "bad directed route '%s'", dr);
		snprintf(what, sizeof(what), "attribute 0x%04x at directed route %s", attr, dr);
	}
	return smp_get(src, &id, attr, mod, data, what, err, errlen);
}

static int target_check(const struct ibvf_port_src *s, const struct ibvf_port_target *t, char *err,
			size_t errlen)
{
	if (s->kind == IBVF_PORT_SRC_LOCAL && t->kind != IBVF_TARGET_SELF)
		return ibvf_errf(err, errlen, -EOPNOTSUPP,
				 "the local source reads only %s itself; a LID, GUID or directed "
				 "route target needs the fabric source",
				 s->name);
	switch (t->kind) {
	case IBVF_TARGET_SELF:
		return 0;
	case IBVF_TARGET_LID:
		if (!t->lid || t->lid > LID_UNICAST_MAX)
			return ibvf_errf(err, errlen, -EINVAL,
					 "LID %u is not a unicast LID (1..0xbfff)", t->lid);
		return 0;
	case IBVF_TARGET_GUID:
		if (!t->guid)
			return ibvf_errf(err, errlen, -EINVAL, "port GUID 0 is not a valid target");
		return 0;
	case IBVF_TARGET_DR:
		if (!memchr(t->dr, 0, sizeof(t->dr)))
			return ibvf_errf(err, errlen, -EINVAL, "directed route too long");
		return parse_dr(t->dr, err, errlen);
	}
	return ibvf_errf(err, errlen, -EINVAL, "unknown target kind %d", (int)t->kind);
}

/* Address of @t for an SMP; resolves (and caches) a GUID target through the SA. */
static int target_portid(struct ibvf_port_src *s, const struct ibvf_port_target *t, ib_portid_t *id,
			 char *err, size_t errlen)
{
	char dr[sizeof(t->dr)];
	uint16_t lid;
	int ret;

	memset(id, 0, sizeof(*id));
	switch (t->kind) {
	case IBVF_TARGET_SELF:
		drpath_local(&id->drpath);
		return 0;
	case IBVF_TARGET_DR:
		snprintf(dr, sizeof(dr), "%s", t->dr);
		if (str2drpath(&id->drpath, dr, 0, 0) < 0)
			return ibvf_errf(err, errlen, -EINVAL, "bad directed route '%s'", t->dr);
		return 0;
	case IBVF_TARGET_LID:
		ib_portid_set(id, t->lid, 0, 0);
		return 0;
	case IBVF_TARGET_GUID:
		lid = lid_cache_get(s, t);
		if (!lid) {
			ret = ibvf_port_resolve_guid(s, t->guid, &lid, err, errlen);
			if (ret)
				return ret;
			lid_cache_put(s, t->guid, lid);
		}
		ib_portid_set(id, lid, 0, 0);
		return 0;
	}
	return -EINVAL;
}

static void mark_unreachable(struct ibvf_port_info *out, const char *why)
{
	out->reachable = false;
	snprintf(out->error, sizeof(out->error), "%.*s", (int)sizeof(out->error) - 1, why);
}

/*
 * NodeInfo of the target: node type, port GUID (the port the SMP arrived on)
 * and PartitionCap. A GUID target whose cached LID now answers with another
 * port GUID is re-resolved once (the SM moved LIDs).
 */
static int fabric_nodeinfo(struct ibvf_port_src *s, const struct ibvf_port_target *t,
			   ib_portid_t *id, unsigned *node_type, uint64_t *pguid, unsigned *pcap,
			   char *err, size_t errlen)
{
	uint8_t ni[IB_SMP_DATA_SIZE];
	char what[400], tgt[300];
	int ret, tries;

	for (tries = 0; tries < 2; tries++) {
		ret = target_portid(s, t, id, err, errlen);
		if (ret)
			return ret;
		target_str(t, tgt, sizeof(tgt));
		snprintf(what, sizeof(what), "NodeInfo of %s", tgt);
		ret = smp_get(s, id, IB_ATTR_NODE_INFO, 0, ni, what, err, errlen);
		if (ret) {
			lid_cache_drop(s, t); /* re-resolve a GUID target next time */
			return ret;
		}
		mad_decode_field(ni, IB_NODE_TYPE_F, node_type);
		mad_decode_field(ni, IB_NODE_PORT_GUID_F, pguid);
		mad_decode_field(ni, IB_NODE_PARTITION_CAP_F, pcap);
		if (t->kind != IBVF_TARGET_GUID || *pguid == t->guid ||
		    *node_type == IB_NODE_SWITCH)
			return 0;
		lid_cache_drop(s, t);
	}
	return ibvf_errf(err, errlen, -ENOENT,
			 "LID %u answers with port GUID 0x%016" PRIx64 ", not 0x%016" PRIx64,
			 id->lid, *pguid, t->guid);
}

static int fabric_portinfo(struct ibvf_port_src *s, const struct ibvf_port_target *t,
			   ib_portid_t *id, struct ibvf_port_info *out, char *err, size_t errlen)
{
	uint8_t pi[IB_SMP_DATA_SIZE];
	char what[400], tgt[300];
	unsigned v;
	int ret;

	target_str(t, tgt, sizeof(tgt));
	snprintf(what, sizeof(what), "PortInfo of %s", tgt);
	ret = smp_get(s, id, IB_ATTR_PORT_INFO, t->port, pi, what, err, errlen);
	if (ret) {
		lid_cache_drop(s, t);
		return ret;
	}
	mad_decode_field(pi, IB_PORT_STATE_F, &v);
	out->state = (uint8_t)v;
	mad_decode_field(pi, IB_PORT_PHYS_STATE_F, &v);
	out->phys_state = (uint8_t)v;
	mad_decode_field(pi, IB_PORT_LID_F, &v);
	out->lid = (uint16_t)v;
	mad_decode_field(pi, IB_PORT_LMC_F, &v);
	out->lmc = (uint8_t)v;
	mad_decode_field(pi, IB_PORT_SMLID_F, &v);
	out->sm_lid = (uint16_t)v;
	out->link_layer_ib = true;
	return 0;
}

static int fabric_pkeys(struct ibvf_port_src *s, const struct ibvf_port_target *t, ib_portid_t *id,
			unsigned node_type, unsigned cap, struct ibvf_port_info *out, char *err,
			size_t errlen)
{
	uint8_t data[IB_SMP_DATA_SIZE];
	char what[400], tgt[300];
	unsigned n, blocks;
	int ret;

	if (node_type == IB_NODE_SWITCH && t->port) {
		/* external switch ports: SwitchInfo:PartitionEnforcementCap (IBTA 14.2.5.4) */
		ret = smp_get(s, id, IB_ATTR_SWITCH_INFO, 0, data, "SwitchInfo", err, errlen);
		if (ret)
			return ret;
		mad_decode_field(data, IB_SW_PARTITION_ENFORCE_CAP_F, &cap);
	}
	out->pkey_cap = (uint16_t)cap;
	n = cap < IBVF_PKEY_TABLE_MAX ? cap : IBVF_PKEY_TABLE_MAX;
	blocks = (n + IBVF_PKEY_BLOCK_SIZE - 1) / IBVF_PKEY_BLOCK_SIZE;
	target_str(t, tgt, sizeof(tgt));
	for (unsigned b = 0; b < blocks; b++) {
		snprintf(what, sizeof(what), "P_KeyTable block %u of %s", b, tgt);
		ret = smp_get(s, id, IB_ATTR_PKEY_TBL, b | ((unsigned)t->port << 16), data, what,
			      err, errlen);
		if (ret) {
			lid_cache_drop(s, t);
			return ret;
		}
		for (unsigned i = 0; i < IBVF_PKEY_BLOCK_SIZE && b * IBVF_PKEY_BLOCK_SIZE + i < n;
		     i++)
			out->pkeys[b * IBVF_PKEY_BLOCK_SIZE + i] =
				(uint16_t)((data[2 * i] << 8) | data[2 * i + 1]);
	}
	out->n_pkeys = (uint16_t)n;
	return 0;
}

enum { Q_PORTINFO = 1, Q_PKEYS = 2 };

static int do_query(struct ibvf_port_src *s, const struct ibvf_port_target *t, unsigned what,
		    struct ibvf_port_info *out, char *err, size_t errlen)
{
	char ebuf[IBVF_ERR_LEN];
	unsigned node_type = 0, pcap = 0;
	uint64_t pguid = 0;
	ib_portid_t id;
	int ret;

	if (!err) {
		err = ebuf;
		errlen = sizeof(ebuf);
	}
	out->ms = ibvf_mono_ms();
	ret = target_check(s, t, err, errlen);
	if (ret)
		goto fail;
	if (s->kind == IBVF_PORT_SRC_LOCAL) {
		struct ibvf_port_info *tmp = calloc(1, sizeof(*tmp));

		if (!tmp) {
			ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
			goto fail;
		}
		ret = local_read(s->ca, s->port, tmp, err, errlen);
		if (!ret) {
			if (what & Q_PORTINFO) {
				out->state = tmp->state;
				out->phys_state = tmp->phys_state;
				out->lid = tmp->lid;
				out->lmc = tmp->lmc;
				out->sm_lid = tmp->sm_lid;
				out->port_guid = tmp->port_guid;
				out->link_layer_ib = tmp->link_layer_ib;
			}
			if (what & Q_PKEYS) {
				out->pkey_cap = tmp->pkey_cap;
				out->n_pkeys = tmp->n_pkeys;
				memcpy(out->pkeys, tmp->pkeys, sizeof(out->pkeys));
			}
		}
		free(tmp);
		if (ret)
			goto fail;
		out->reachable = true;
		out->error[0] = 0;
		return 0;
	}
	ret = fabric_nodeinfo(s, t, &id, &node_type, &pguid, &pcap, err, errlen);
	if (!ret && (what & Q_PORTINFO)) {
		out->port_guid = t->kind == IBVF_TARGET_GUID ? t->guid : pguid;
		ret = fabric_portinfo(s, t, &id, out, err, errlen);
	}
	if (!ret && (what & Q_PKEYS))
		ret = fabric_pkeys(s, t, &id, node_type, pcap, out, err, errlen);
	if (ret)
		goto fail;
	out->reachable = true;
	out->error[0] = 0;
	return 0;
fail:
	mark_unreachable(out, err);
	return ret;
}

int ibvf_port_query_portinfo(struct ibvf_port_src *src, const struct ibvf_port_target *t,
			     struct ibvf_port_info *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	return do_query(src, t, Q_PORTINFO, out, err, errlen);
}

int ibvf_port_query_pkeys(struct ibvf_port_src *src, const struct ibvf_port_target *t,
			  struct ibvf_port_info *out, char *err, size_t errlen)
{
	out->pkey_cap = 0;
	out->n_pkeys = 0;
	memset(out->pkeys, 0, sizeof(out->pkeys));
	return do_query(src, t, Q_PKEYS, out, err, errlen);
}

int ibvf_port_query(struct ibvf_port_src *src, const struct ibvf_port_target *t,
		    struct ibvf_port_info *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	return do_query(src, t, Q_PORTINFO | Q_PKEYS, out, err, errlen);
}

/* --------------------------------------------------------- changes -- */

static unsigned info_diff(const struct ibvf_port_info *a, const struct ibvf_port_info *b)
{
	unsigned m = 0;

	if (a->reachable != b->reachable)
		m |= IBVF_PORT_CHG_REACHABLE;
	if (!a->reachable || !b->reachable)
		return m | (strcmp(a->error, b->error) ? IBVF_PORT_CHG_REACHABLE : 0);
	if (a->state != b->state)
		m |= IBVF_PORT_CHG_STATE;
	if (a->phys_state != b->phys_state)
		m |= IBVF_PORT_CHG_PHYS;
	if (a->lid != b->lid || a->lmc != b->lmc)
		m |= IBVF_PORT_CHG_LID;
	if (a->sm_lid != b->sm_lid)
		m |= IBVF_PORT_CHG_SM_LID;
	if (a->port_guid != b->port_guid)
		m |= IBVF_PORT_CHG_GUID;
	if (a->n_pkeys != b->n_pkeys ||
	    memcmp(a->pkeys, b->pkeys, a->n_pkeys * sizeof(a->pkeys[0])))
		m |= IBVF_PORT_CHG_PKEYS;
	return m;
}

/* Next adaptive interval: reset on change, else double up to the cap. */
static uint32_t next_interval(const struct ibvf_port_watch_config *c, uint32_t cur, bool changed)
{
	uint64_t n;

	if (changed || !cur)
		return c->poll_min_ms;
	n = (uint64_t)cur * 2;
	return n > c->poll_max_ms ? c->poll_max_ms : (uint32_t)n;
}

/* ------------------------------------------------------------- wait -- */

static int cond_check(const struct ibvf_port_cond *c, char *err, size_t errlen)
{
	if (c->state > IBVF_PORT_ACTIVE_DEFER)
		return ibvf_errf(err, errlen, -EINVAL, "unknown port state %u", c->state);
	if (c->pkey_want != IBVF_PKEY_WANT_NONE && !ibvf_pkey_key(c->pkey))
		return ibvf_errf(err, errlen, -EINVAL,
				 "P_Key 0x%04x has key 0, which is reserved (IBTA 10.9.1.1)",
				 c->pkey);
	if (c->pkey_want > IBVF_PKEY_WANT_ABSENT || c->match > IBVF_PKEY_MATCH_LIMITED)
		return ibvf_errf(err, errlen, -EINVAL, "bad P_Key condition");
	return 0;
}

/* "mlx5_0:1" for the source's own port, "mlx5_0:1 -> LID 7" for a target. */
static void who_str(const struct ibvf_port_src *s, const struct ibvf_port_target *t, char *buf,
		    size_t len)
{
	char tgt[300];

	if (t->kind == IBVF_TARGET_SELF) {
		snprintf(buf, len, "%s", s->name);
		return;
	}
	target_str(t, tgt, sizeof(tgt));
	snprintf(buf, len, "%s -> %s", s->name, tgt);
}

/* Sleep @ms or until @fd is readable. Return -ECANCELED when it is. */
static int nap(int fd, int64_t ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	int64_t end = ibvf_mono_ms() + ms;

	for (;;) {
		int64_t left = end - ibvf_mono_ms();
		int r;

		if (left <= 0)
			return 0;
		if (fd < 0) {
			struct timespec ts = {left / 1000, (left % 1000) * 1000000};

			nanosleep(&ts, NULL);
			continue;
		}
		r = poll(&p, 1, (int)left);
		if (r > 0)
			return -ECANCELED;
		if (r < 0 && errno != EINTR)
			return -errno;
	}
}

int ibvf_port_wait(struct ibvf_port_src *src, const struct ibvf_port_target *t,
		   const struct ibvf_port_cond *c, uint32_t timeout_ms, int cancel_fd,
		   struct ibvf_port_info *observed, int *pkey_index, char *err, size_t errlen)
{
	struct ibvf_port_info *cur, *prev;
	char desc[IBVF_PORT_DESC_LEN], who[360];
	int64_t start = ibvf_mono_ms(), deadline = start + timeout_ms;
	uint32_t interval = 0;
	int ret, polls = 0;

	if (pkey_index)
		*pkey_index = -1;
	ret = cond_check(c, err, errlen);
	if (!ret)
		ret = target_check(src, t, err, errlen);
	if (ret)
		return ret;
	cur = calloc(1, sizeof(*cur));
	prev = calloc(1, sizeof(*prev));
	if (!cur || !prev) {
		free(cur);
		free(prev);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	for (;;) {
		bool changed;

		ibvf_port_query(src, t, cur, NULL, 0);
		polls++;
		if (ibvf_port_cond_met(cur, c, pkey_index)) {
			ret = 0;
			break;
		}
		changed = polls == 1 || info_diff(prev, cur);
		interval = next_interval(&src->cfg, interval, changed);
		memcpy(prev, cur, sizeof(*cur));
		if (ibvf_mono_ms() >= deadline) {
			ret = -ETIMEDOUT;
			break;
		}
		if (ibvf_mono_ms() + interval > deadline)
			interval = (uint32_t)(deadline - ibvf_mono_ms());
		/* a cancel already pending is seen here, after one observation to report */
		ret = nap(cancel_fd, interval ? interval : 1);
		if (ret)
			break;
	}
	who_str(src, t, who, sizeof(who));
	if (ret == -ETIMEDOUT)
		ibvf_errf(err, errlen, ret, "%s: timed out after %lld ms (%d polls): %s", who,
			  (long long)(ibvf_mono_ms() - start), polls,
			  ibvf_port_describe(cur, c, desc, sizeof(desc)));
	else if (ret == -ECANCELED)
		ibvf_errf(err, errlen, ret, "%s: wait cancelled after %lld ms: %s", who,
			  (long long)(ibvf_mono_ms() - start),
			  ibvf_port_describe(cur, c, desc, sizeof(desc)));
	else if (ret)
		ibvf_errf(err, errlen, ret, "%s: wait failed: %s", who, strerror(-ret));
	if (observed)
		memcpy(observed, cur, sizeof(*cur));
	free(cur);
	free(prev);
	return ret;
}

/* ------------------------------------------------------------ watch -- */

struct ibvf_port_watch {
	struct ibvf_port_src *src;
	struct ibvf_port_target target;
	ibvf_port_watch_fn fn;
	void *arg;
	int tfd;
	uint32_t interval;
	bool have_last;
	struct ibvf_port_info last, cur;
};

static int arm(struct ibvf_port_watch *w, uint32_t ms)
{
	struct itimerspec its = {0};

	its.it_value.tv_sec = ms / 1000;
	its.it_value.tv_nsec = (long)(ms % 1000) * 1000000L;
	if (!ms)
		its.it_value.tv_nsec = 1; /* "now": a zero it_value would disarm */
	return timerfd_settime(w->tfd, 0, &its, NULL) < 0 ? -errno : 0;
}

int ibvf_port_watch_new(struct ibvf_port_src *src, const struct ibvf_port_target *t,
			ibvf_port_watch_fn fn, void *arg, struct ibvf_port_watch **out, char *err,
			size_t errlen)
{
	struct ibvf_port_watch *w;
	int ret;

	*out = NULL;
	if (!fn)
		return ibvf_errf(err, errlen, -EINVAL, "port watch needs a callback");
	ret = target_check(src, t, err, errlen);
	if (ret)
		return ret;
	w = calloc(1, sizeof(*w));
	if (!w)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	w->src = src;
	w->target = *t;
	w->fn = fn;
	w->arg = arg;
	w->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (w->tfd < 0) {
		ret = -errno;
		free(w);
		return ibvf_errf(err, errlen, ret, "timerfd_create: %s", strerror(-ret));
	}
	ret = arm(w, 0);
	if (ret) {
		ibvf_port_watch_free(w);
		return ibvf_errf(err, errlen, ret, "timerfd_settime: %s", strerror(-ret));
	}
	*out = w;
	return 0;
}

int ibvf_port_watch_fd(const struct ibvf_port_watch *w)
{
	return w->tfd;
}

const struct ibvf_port_info *ibvf_port_watch_last(const struct ibvf_port_watch *w)
{
	return w->have_last ? &w->last : NULL;
}

int ibvf_port_watch_dispatch(struct ibvf_port_watch *w, char *err, size_t errlen)
{
	uint64_t expirations;
	unsigned changed;
	int ret;

	if (read(w->tfd, &expirations, sizeof(expirations)) != sizeof(expirations)) {
		if (errno == EAGAIN || errno == EINTR)
			return 0;
		return ibvf_errf(err, errlen, -errno, "port watch timerfd: %s", strerror(errno));
	}
	ibvf_port_query(w->src, &w->target, &w->cur, NULL, 0);
	changed = w->have_last ? info_diff(&w->last, &w->cur) : ~0u;
	w->interval = next_interval(&w->src->cfg, w->interval, changed != 0);
	if (changed)
		w->fn(w->have_last ? &w->last : NULL, &w->cur, changed, w->arg);
	memcpy(&w->last, &w->cur, sizeof(w->cur));
	w->have_last = true;
	ret = arm(w, w->interval);
	if (ret)
		return ibvf_errf(err, errlen, ret, "timerfd_settime: %s", strerror(-ret));
	return changed != 0;
}

void ibvf_port_watch_free(struct ibvf_port_watch *w)
{
	if (!w)
		return;
	if (w->tfd >= 0)
		close(w->tfd);
	free(w);
}
