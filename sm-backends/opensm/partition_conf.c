// SPDX-License-Identifier: MIT
/*
 * OpenSM partition file: parser, admin/managed split, renderer.
 *
 * The parser follows OpenSM 3.3.23's reader (opensm/osm_prtn_config.c) rule
 * by rule, written as a scanner over byte offsets so every error has a line
 * and column:
 *   - lines are read whole; '#' starts a comment; white space is ' ', '\t'
 *     and '\n' only ('\r' is an ordinary byte to OpenSM);
 *   - a definition is "header : body ;" where the header (up to the first
 *     ':') must be on one line and the body may span lines up to ';';
 *   - header: "[name][=pkey]" then ","-separated flags; flags and keywords
 *     match by prefix (strncmp over the written length), unknown flags are
 *     ignored by OpenSM;
 *   - body: ","-separated port specifiers "guid|keyword[=membership]" and
 *     "mgid=GID[,group flags]" entries that consume the rest of the line.
 * OpenSM rejects the whole file (and falls back to Default ALL=full) on a
 * header line without ':', a PKey that strtoul() does not fully parse, a
 * port that is neither a keyword nor a nonzero number, or a file without any
 * definition. Where OpenSM's pointer runs past the end of a line (after
 * "mgid=GID;" and a ';' with nothing before it) what it reads next is in its
 * line buffer, not in the line: partition_osm.c models that buffer and gives
 * the verdict on the whole file, which this parser then follows.
 */
#include "partition_conf.h"
#include "partition_osm.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "sort.h"

/* ------------------------------------------------------------- scanner -- */

struct parser {
	const char *text;
	size_t len;
	const char *name;
	struct pc_file *f;
	size_t parts_cap, warn_cap;
	unsigned line;	     /* current line, 1-based */
	unsigned barrier[2]; /* marker lines no definition may be open across */
	size_t loff;	     /* offset of the current line */
	long cur;	     /* index of the open definition, -1 if none */
	bool leaves_line;    /* OpenSM's pointer may leave a line: ask the model */
	char *err;
	size_t errlen;
};

/* A half-open byte range [b, e) of the text. */
struct span {
	size_t b, e;
};

static bool is_ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n';
}

static unsigned col_of(const struct parser *p, size_t off)
{
	return (unsigned)(off - p->loff + 1);
}

static int perr(const struct parser *p, size_t off, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int perr(const struct parser *p, size_t off, const char *fmt, ...)
{
	char msg[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return ibvf_errf(p->err, p->errlen, -EINVAL, "%s:%u:%u: %s", p->name, p->line,
			 col_of(p, off), msg);
}

static int pwarn(struct parser *p, size_t off, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int pwarn(struct parser *p, size_t off, const char *fmt, ...)
{
	struct pc_file *f = p->f;
	struct pc_diag *d;
	va_list ap;

	if (f->n_warnings == p->warn_cap) {
		size_t cap = p->warn_cap ? 2 * p->warn_cap : 8;

		d = realloc(f->warnings, cap * sizeof(*d));
		if (!d)
			return ibvf_errf(p->err, p->errlen, -ENOMEM, "out of memory");
		f->warnings = d;
		p->warn_cap = cap;
	}
	d = &f->warnings[f->n_warnings++];
	d->pos.line = p->line;
	d->pos.col = col_of(p, off);
	va_start(ap, fmt);
	vsnprintf(d->msg, sizeof(d->msg), fmt, ap);
	va_end(ap);
	return 0;
}

static struct span trim(const struct parser *p, struct span s)
{
	while (s.b < s.e && is_ws(p->text[s.b]))
		s.b++;
	while (s.e > s.b && is_ws(p->text[s.e - 1]))
		s.e--;
	return s;
}

static size_t span_len(struct span s)
{
	return s.e - s.b;
}

/* Offset of @c in [b, e), or e. */
static size_t find(const struct parser *p, size_t b, size_t e, char c)
{
	const char *q = memchr(p->text + b, c, e - b);

	return q ? (size_t)(q - p->text) : e;
}

/* "name[=value]" → trimmed name and value; has_val false when there is no '='. */
static void split_eq(const struct parser *p, struct span tok, struct span *name, struct span *val,
		     bool *has_val)
{
	size_t eq = find(p, tok.b, tok.e, '=');

	*has_val = eq < tok.e;
	name->b = tok.b;
	name->e = eq;
	*name = trim(p, *name);
	val->b = *has_val ? eq + 1 : tok.e;
	val->e = tok.e;
	*val = trim(p, *val);
}

/* OpenSM's keyword test strncmp(s, kw, strlen(s)) == 0: @s is a prefix of @kw. */
static bool prefix_of(const struct parser *p, struct span s, const char *kw)
{
	size_t n = span_len(s);

	return n <= strlen(kw) && !memcmp(p->text + s.b, kw, n);
}

static bool span_eq(const struct parser *p, struct span s, const char *w)
{
	return span_len(s) == strlen(w) && !memcmp(p->text + s.b, w, span_len(s));
}

/*
 * The numbers OpenSM reads with strtoul(s, &end, 0) and accepts only when
 * *end == '\0': hex with 0x, octal with a leading 0, else decimal. Signs
 * and values above @max (which strtoul would wrap or truncate) are refused.
 */
static int parse_num(const struct parser *p, struct span s, uint64_t max, uint64_t *out)
{
	const char *t = p->text + s.b;
	size_t n = span_len(s), i = 0;
	unsigned base = 10;
	uint64_t v = 0;

	if (n >= 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
		base = 16;
		i = 2;
	} else if (n >= 2 && t[0] == '0') {
		base = 8;
		i = 1;
	}
	if (i == n)
		return -EINVAL; /* "" or "0x" */
	for (; i < n; i++) {
		int c = (unsigned char)t[i], d;

		if (isdigit(c))
			d = c - '0';
		else if (isxdigit(c))
			d = tolower(c) - 'a' + 10;
		else
			return -EINVAL;
		if ((unsigned)d >= base)
			return -EINVAL;
		if (v > (max - (uint64_t)d) / base)
			return -ERANGE;
		v = v * base + (uint64_t)d;
	}
	*out = v;
	return 0;
}

/*
 * A number as OpenSM reads a PKey and a port GUID: strtoul(s, &end, 0) /
 * strtoull(), accepted when the whole token was read. That is C's rule
 * (C11 7.22.1.4): leading white space, an optional sign, 0x for hex, a
 * leading 0 for octal; a value beyond 64 bits reads as UINT64_MAX, a
 * negative one wraps modulo 2^64. @odd is set when either happened.
 */
static int parse_c_num(const struct parser *p, struct span s, uint64_t *out, bool *odd)
{
	const char *t = p->text + s.b;
	size_t n = span_len(s), i = 0, digits = 0;
	bool neg = false, over = false;
	unsigned base = 10;
	uint64_t v = 0;

	while (i < n && isspace((unsigned char)t[i]))
		i++;
	if (i < n && (t[i] == '+' || t[i] == '-'))
		neg = t[i++] == '-';
	if (i + 2 < n && t[i] == '0' && (t[i + 1] == 'x' || t[i + 1] == 'X') &&
	    isxdigit((unsigned char)t[i + 2])) {
		base = 16;
		i += 2;
	} else if (i < n && t[i] == '0') {
		base = 8;
	}
	for (; i < n; i++, digits++) {
		int c = (unsigned char)t[i], d;

		if (isdigit(c))
			d = c - '0';
		else if (isxdigit(c))
			d = tolower(c) - 'a' + 10;
		else
			break;
		if ((unsigned)d >= base)
			break;
		if (v > (UINT64_MAX - (uint64_t)d) / base)
			over = true;
		else
			v = v * base + (uint64_t)d;
	}
	if (!digits || i != n)
		return -EINVAL;
	if (over)
		v = UINT64_MAX;
	else if (neg)
		v = (uint64_t)0 - v;
	*odd = over || (neg && v);
	*out = v;
	return 0;
}

/* ------------------------------------------------------------- header -- */

static struct pc_partition *cur_part(struct parser *p)
{
	return &p->f->parts[p->cur];
}

static int new_part(struct parser *p, size_t off)
{
	struct pc_file *f = p->f;
	struct pc_partition *np;

	if (f->n_parts == p->parts_cap) {
		size_t cap = p->parts_cap ? 2 * p->parts_cap : 8;

		np = realloc(f->parts, cap * sizeof(*np));
		if (!np)
			return ibvf_errf(p->err, p->errlen, -ENOMEM, "out of memory");
		f->parts = np;
		p->parts_cap = cap;
	}
	np = &f->parts[f->n_parts];
	memset(np, 0, sizeof(*np));
	np->defmember = PC_LIMITED;
	np->mtu = np->rate = np->sl = -1;
	np->pos.line = p->line;
	np->pos.col = col_of(p, off);
	np->last_line = p->line;
	p->cur = (long)f->n_parts++;
	return 0;
}

/* A numeric flag value: OpenSM warns and skips a missing or zero value. */
static int flag_value(struct parser *p, const char *flag, struct span val, bool has_val,
		      uint64_t lo, uint64_t hi, int *out)
{
	uint64_t v;

	if (!has_val || parse_num(p, val, UINT32_MAX, &v) || v < lo || v > hi)
		return pwarn(p, val.b, "flag '%s' needs a value in %llu..%llu; OpenSM skips it",
			     flag, (unsigned long long)lo, (unsigned long long)hi);
	if (out)
		*out = (int)v;
	return 0;
}

/*
 * A multicast group flag (partition header or after an mgid). Returns 1 when
 * @f names one (OpenSM's order and prefix rule: "" and "m" mean mtu, "s"
 * means scope), 0 when not, or a negative errno.
 */
static int group_flag(struct parser *p, struct span f, struct span val, bool has_val,
		      struct pc_partition *part)
{
	int scope = -1, ret;

	if (prefix_of(p, f, "mtu"))
		ret = flag_value(p, "mtu", val, has_val, 1, 5, part ? &part->mtu : NULL);
	else if (prefix_of(p, f, "rate"))
		ret = flag_value(p, "rate", val, has_val, 1, 63, part ? &part->rate : NULL);
	else if (prefix_of(p, f, "scope"))
		ret = flag_value(p, "scope", val, has_val, 1, 15, &scope);
	else if (prefix_of(p, f, "Q_Key"))
		ret = flag_value(p, "Q_Key", val, has_val, 1, UINT32_MAX, NULL);
	else if (prefix_of(p, f, "TClass"))
		ret = flag_value(p, "TClass", val, has_val, 1, 255, NULL);
	else if (prefix_of(p, f, "sl"))
		ret = flag_value(p, "sl", val, has_val, 0, 15, part ? &part->sl : NULL);
	else if (prefix_of(p, f, "FlowLabel"))
		ret = flag_value(p, "FlowLabel", val, has_val, 0, 0xfffff, NULL);
	else
		return 0;
	if (ret)
		return ret;
	if (part && scope > 0)
		part->scope_mask |= 1u << scope;
	return 1;
}

static int membership_of(const struct parser *p, struct span v, enum pc_membership *m)
{
	/* OpenSM tests full, then both, else limited; "" is a prefix of "full" */
	if (prefix_of(p, v, "full"))
		*m = PC_FULL;
	else if (prefix_of(p, v, "both"))
		*m = PC_BOTH;
	else if (prefix_of(p, v, "limited"))
		*m = PC_LIMITED;
	else
		return -EINVAL;
	return 0;
}

static int header_flag(struct parser *p, struct span tok)
{
	struct pc_partition *part = cur_part(p);
	struct span f, v;
	bool has_val;
	int ret;

	split_eq(p, tok, &f, &v, &has_val);
	ret = group_flag(p, f, v, has_val, part);
	if (ret)
		return ret < 0 ? ret : 0;
	if (prefix_of(p, f, "ipoib")) {
		part->ipoib = true;
	} else if (prefix_of(p, f, "defmember")) {
		if (!has_val || membership_of(p, v, &part->defmember))
			return pwarn(p, v.b,
				     "defmember needs full, limited or both; OpenSM "
				     "skips it");
	} else if (span_eq(p, f, "indx0")) {
		part->indx0 = true;
	} else {
		return pwarn(p, f.b, "unknown partition flag '%.*s'; OpenSM ignores it",
			     (int)span_len(f), p->text + f.b);
	}
	return 0;
}

static int header(struct parser *p, struct span h)
{
	struct pc_partition *part = cur_part(p);
	size_t comma = find(p, h.b, h.e, ',');
	struct span first = {h.b, comma}, name, id;
	bool has_id;
	uint64_t v;
	int ret;

	split_eq(p, first, &name, &id, &has_id);
	if (!has_id && span_len(name) && isdigit((unsigned char)p->text[name.b])) {
		id = name; /* "0x10 : ..." is a PKey without a name */
		name.e = name.b;
		has_id = true;
	}
	part->name = strndup(p->text + name.b, span_len(name));
	if (!part->name)
		return ibvf_errf(p->err, p->errlen, -ENOMEM, "out of memory");
	if (has_id) {
		if (!span_len(id))
			return perr(p, id.b, "missing PKey after '=' (OpenSM rejects the file)");
		bool odd;

		ret = parse_c_num(p, id, &v, &odd);
		if (ret)
			return perr(p, id.b,
				    "bad PKey '%.*s': expected a number such as 0x0a10 "
				    "(OpenSM rejects the file)",
				    (int)span_len(id), p->text + id.b);
		if (odd || v > 0xffff) {
			/* OpenSM keeps the low 16 bits of what strtoul() read */
			ret = pwarn(p, id.b,
				    "PKey '%.*s' is not a 16-bit number: OpenSM uses its low "
				    "16 bits, 0x%04x",
				    (int)span_len(id), p->text + id.b, (unsigned)(v & 0xffff));
			if (ret)
				return ret;
		}
		part->pkey = (uint16_t)(v & 0x7fff);
		part->has_pkey = part->pkey != 0;
		if (!part->has_pkey) {
			ret = pwarn(p, id.b,
				    "PKey 0x%04llx has no key bits; OpenSM generates "
				    "a PKey for it",
				    (unsigned long long)v);
			if (ret)
				return ret;
		}
	}
	while (comma < h.e) {
		size_t next = find(p, comma + 1, h.e, ',');

		ret = header_flag(p, (struct span){comma + 1, next});
		if (ret)
			return ret;
		comma = next;
	}
	return 0;
}

/* --------------------------------------------------------------- body -- */

static int add_port(struct parser *p, const struct pc_port *port)
{
	struct pc_partition *part = cur_part(p);
	struct pc_port *np;

	/* grow by doubling: the capacity is always a power of two */
	if ((part->n_ports & (part->n_ports - 1)) == 0) {
		size_t cap = part->n_ports ? 2 * part->n_ports : 1;

		np = realloc(part->ports, cap * sizeof(*np));
		if (!np)
			return ibvf_errf(p->err, p->errlen, -ENOMEM, "out of memory");
		part->ports = np;
	}
	part->ports[part->n_ports++] = *port;
	return 0;
}

static int port_entry(struct parser *p, struct span name, struct span val, bool has_val)
{
	static const struct {
		const char *kw;
		enum pc_port_kind kind;
	} kws[] = {
		{"ALL", PC_PORT_ALL},
		{"ALL_CAS", PC_PORT_ALL_CAS},
		{"ALL_SWITCHES", PC_PORT_ALL_SWITCHES},
		{"ALL_ROUTERS", PC_PORT_ALL_ROUTERS},
		{"SELF", PC_PORT_SELF},
	};
	struct pc_port port = {.kind = PC_PORT_GUID};
	size_t i;
	int ret;

	if (!span_len(name) || prefix_of(p, name, "NONE"))
		return 0; /* an empty entry, or NONE: no port */
	port.pos.line = p->line;
	port.pos.col = col_of(p, name.b);
	for (i = 0; i < sizeof(kws) / sizeof(kws[0]); i++) {
		if (prefix_of(p, name, kws[i].kw)) {
			port.kind = kws[i].kind;
			break;
		}
	}
	if (port.kind == PC_PORT_GUID) {
		bool odd = false;

		ret = parse_c_num(p, name, &port.guid, &odd);
		if (!ret && port.guid && odd)
			ret = pwarn(p, name.b,
				    "port GUID '%.*s' is negative or wider than 64 bits: OpenSM "
				    "reads it as 0x%016llx",
				    (int)span_len(name), p->text + name.b,
				    (unsigned long long)port.guid);
		else if (!ret && !port.guid)
			ret = -EINVAL;
		if (ret == -ENOMEM)
			return ret;
		if (ret)
			return perr(p, name.b,
				    "bad port GUID '%.*s': expected a nonzero number "
				    "such as 0x0002c90300001001 or one of ALL, ALL_CAS, "
				    "ALL_SWITCHES, ALL_ROUTERS, SELF (OpenSM rejects the file)",
				    (int)span_len(name), p->text + name.b);
	}
	port.membership = cur_part(p)->defmember;
	if (has_val) {
		port.explicit_membership = true;
		if (!span_len(val)) {
			port.membership = PC_FULL;
			ret = pwarn(p, val.b,
				    "empty membership after '=': OpenSM reads it as "
				    "full");
		} else if (membership_of(p, val, &port.membership)) {
			port.membership = PC_LIMITED;
			ret = pwarn(p, val.b,
				    "unknown membership '%.*s': OpenSM makes the port "
				    "a limited member",
				    (int)span_len(val), p->text + val.b);
		} else {
			ret = 0;
		}
		if (ret)
			return ret;
	}
	return add_port(p, &port);
}

/*
 * "mgid=GID[,group flags]": OpenSM consumes the rest of the segment as group
 * flags. When the segment ends with ';' on the same line, OpenSM 3.3.23's
 * offset arithmetic (parse_mgroup_flags() returns one byte more than the
 * line holds) makes it continue parsing *after the end of the line*, in
 * whatever an earlier, longer line left in its buffer. What it finds there
 * decides whether it rejects the file: osm_verdict() asks the model of its
 * line buffer (partition_osm.c).
 */
static int mgid_entry(struct parser *p, struct span name, struct span val, bool has_val,
		      size_t rest, size_t e, bool semi)
{
	char gid[INET6_ADDRSTRLEN + 1];
	unsigned char raw[16];
	int ret;

	if (!has_val)
		return perr(p, name.b,
			    "mgid without a GID: OpenSM 3.3.23 passes a NULL GID "
			    "to inet_pton() and crashes");
	snprintf(gid, sizeof(gid), "%.*s", (int)span_len(val), p->text + val.b);
	if (span_len(val) >= sizeof(gid) || inet_pton(AF_INET6, gid, raw) != 1 || raw[0] != 0xff) {
		ret = pwarn(p, val.b,
			    "mgid '%.*s' is not a multicast GID; OpenSM skips the "
			    "group",
			    (int)span_len(val), p->text + val.b);
		if (ret)
			return ret;
	}
	while (rest < e) {
		size_t next = find(p, rest, e, ',');
		struct span tok = trim(p, (struct span){rest, next}), f, v;
		bool hv;

		split_eq(p, tok, &f, &v, &hv);
		ret = span_len(tok) ? group_flag(p, f, v, hv, NULL) : 1;
		if (ret < 0)
			return ret;
		if (!ret) {
			ret = pwarn(p, tok.b,
				    "'%.*s' after an mgid entry is read as a multicast "
				    "group flag and ignored: put it on its own line",
				    (int)span_len(tok), p->text + tok.b);
			if (ret)
				return ret;
		}
		rest = next + 1;
	}
	/* a ';' here makes OpenSM read past the line: pc_osm_read() judges that */
	if (semi)
		p->leaves_line = true;
	cur_part(p)->n_mgroups++;
	return 0;
}

static int body(struct parser *p, size_t b, size_t e, bool semi)
{
	while (b <= e) {
		size_t comma = find(p, b, e, ',');
		struct span name, val;
		bool has_val;
		int ret;

		split_eq(p, (struct span){b, comma}, &name, &val, &has_val);
		if (span_eq(p, name, "mgid"))
			return mgid_entry(p, name, val, has_val, comma + 1, e, semi);
		ret = port_entry(p, name, val, has_val);
		if (ret)
			return ret;
		b = comma + 1;
	}
	return 0;
}

/* ---------------------------------------------------------------- file -- */

static int line(struct parser *p, size_t clen)
{
	size_t pos = p->loff, end = p->loff + clen;

	for (;;) {
		size_t semi, seg_end, b;
		int ret;

		while (pos < end && is_ws(p->text[pos]))
			pos++;
		if (pos >= end)
			return 0;
		semi = find(p, pos, end, ';');
		seg_end = semi;
		if (semi == pos) {
			/*
			 * OpenSM skips the ';' and reads what follows it on the
			 * line as members of the definition it ends, then goes on
			 * past the end of the line (pc_osm_read() judges that).
			 */
			size_t r = semi + 1;

			p->leaves_line = true;
			while (r < end && is_ws(p->text[r]))
				r++;
			if (r < end && p->cur < 0)
				return perr(p, r,
					    "text after a ';' that begins its line, outside a "
					    "definition: OpenSM 3.3.23 reads it unpredictably; "
					    "remove the ';'");
			if (r < end) {
				/* to the end of the line, later ';' included */
				ret = pwarn(p, r,
					    "text after a ';' that begins its line: OpenSM "
					    "3.3.23 reads all of it, later ';' included, as "
					    "members of the definition the ';' ends");
				if (!ret)
					ret = body(p, semi + 1, end, false);
				if (ret)
					return ret;
			}
			if (p->cur >= 0) {
				cur_part(p)->last_line = p->line;
				cur_part(p)->terminated = true;
				p->cur = -1;
			}
			return 0;
		}
		if (p->cur < 0) {
			size_t colon = find(p, pos, seg_end, ':');

			if (colon == seg_end)
				return perr(p, pos,
					    "no ':' after the partition name and flags "
					    "(expected \"Name=PKey[,flags] : members ;\" with "
					    "the ':' on the first line; OpenSM rejects the file)");
			ret = new_part(p, pos);
			if (!ret)
				ret = header(p, (struct span){pos, colon});
			if (ret)
				return ret;
			b = colon + 1;
		} else {
			b = pos;
		}
		ret = body(p, b, seg_end, semi < end);
		if (ret)
			return ret;
		cur_part(p)->last_line = p->line;
		if (semi == end)
			return 0;
		cur_part(p)->terminated = true;
		p->cur = -1;
		pos = semi + 1;
	}
}

static int parse_lines(struct parser *p)
{
	bool split = false; /* the last piece was cut out of a longer line */
	size_t off = 0;
	int ret;

	while (off < p->len) {
		const char *s = p->text + off, *nl = memchr(s, '\n', p->len - off);
		size_t rest = nl ? (size_t)(nl - s) + 1 : p->len - off;
		/* fgets(line, 4095, f): at most PC_LINE_MAX bytes at a time */
		size_t chunk = rest > PC_LINE_MAX ? PC_LINE_MAX : rest;
		size_t raw = chunk - (chunk == rest && nl ? 1 : 0);
		const char *hash = memchr(s, '#', raw), *nul = memchr(s, '\0', raw);
		const char *stop = hash && (!nul || hash < nul) ? hash : nul;

		if (!split)
			p->line++;
		p->loff = off;
		if (!split && p->cur >= 0 && (p->line == p->barrier[0] || p->line == p->barrier[1]))
			return perr(p, off,
				    "the definition at line %u is not terminated by ';' "
				    "before the ibvf section marker on this line",
				    cur_part(p)->pos.line);
		if (chunk < rest && !split) {
			ret = pwarn(p, off + PC_LINE_MAX,
				    "line is %zu bytes long; OpenSM reads it in pieces of %d "
				    "bytes, each a line of its own (a '#' comment ends with its "
				    "piece)",
				    rest, PC_LINE_MAX);
			if (ret)
				return ret;
		}
		if (nul && nul == stop) {
			/* strchr() and strlen() stop there: the rest is unseen */
			ret = pwarn(p, (size_t)(nul - p->text),
				    "NUL byte: OpenSM ignores the rest of the line");
			if (ret)
				return ret;
		}
		ret = line(p, stop ? (size_t)(stop - s) : raw);
		if (ret)
			return ret;
		split = chunk < rest;
		off += chunk;
	}
	p->f->n_lines = p->line;
	if (p->cur >= 0) {
		ret = pwarn(p, p->loff,
			    "the definition at line %u is not terminated by ';' "
			    "(OpenSM accepts that only at the end of the file)",
			    cur_part(p)->pos.line);
		if (ret)
			return ret;
	}
	if (!p->f->n_parts) {
		p->loff = off;
		p->line = p->line ? p->line : 1;
		return perr(p, off,
			    "no partition definition: OpenSM treats such a file as an "
			    "error and falls back to Default=0x7fff : ALL=full, dropping "
			    "every other PKey");
	}
	return 0;
}

/*
 * OpenSM's verdict on the whole file (partition_osm.h): the span parser
 * above knows the partitions; where OpenSM's pointer leaves the line it is
 * reading, only a model of its line buffer knows what it reads next.
 */
static int osm_verdict(struct parser *p)
{
	struct pc_osm_result r;
	int ret = 0;

	/*
	 * Only after "mgid=GID;" and a ';' that begins its line does OpenSM's
	 * pointer leave the line it read (partition_osm.h); elsewhere this
	 * parser alone follows OpenSM, and the model (about 35 ns a byte) is
	 * not run. The corpus test (test_corpus) checks both on every file.
	 */
	if (!p->leaves_line)
		return 0;
	pc_osm_read(p->text, p->len, &r);
	p->f->overread_last = r.last_over;
	p->loff = 0;
	switch (r.verdict) {
	case PC_OSM_REJECTS:
		p->line = r.line;
		return ibvf_errf(p->err, p->errlen, -EINVAL,
				 "%s:%u: OpenSM 3.3.23 rejects the file (%s) and falls back to "
				 "Default=0x7fff : ALL=full",
				 p->name, r.line, r.why);
	case PC_OSM_CRASHES:
		return ibvf_errf(p->err, p->errlen, -EINVAL, "%s:%u: OpenSM 3.3.23 crashes: %s",
				 p->name, r.line, r.why);
	case PC_OSM_UNDEFINED:
		p->line = r.undef_line;
		ret = pwarn(p, 0,
			    "OpenSM 3.3.23 reads past the end of this line into bytes of its "
			    "line buffer that no line wrote (what it does then is undefined; "
			    "OpenSM accepted such files in the lab): put the ';' after the "
			    "last member or after a member on the mgid's line");
		break;
	case PC_OSM_ACCEPTS:
		break;
	}
	for (size_t i = 0; !ret && i < r.n_over; i++) {
		if (!r.over[i].from_line)
			continue;
		if (r.over[i].parsed && !p->f->leftover_line) {
			p->f->leftover_line = r.over[i].line;
			p->f->leftover_from = r.over[i].from_line;
			snprintf(p->f->leftover, sizeof(p->f->leftover), "%s", r.over[i].text);
		}
		p->line = r.over[i].line;
		if (r.over[i].parsed && r.over[i].from_line == r.over[i].line) {
			ret = pwarn(p, 0,
				    "OpenSM 3.3.23 parses '%s' on this line as a new partition "
				    "definition where the file shows none",
				    r.over[i].text);
			continue;
		}
		if (r.over[i].parsed) {
			ret = pwarn(
				p, 0,
				"OpenSM 3.3.23 reads past the end of this line and parses '%s', "
				"which line %u left in its line buffer, as partition text",
				r.over[i].text, r.over[i].from_line);
			continue;
		}
		ret = pwarn(p, 0,
			    "OpenSM 3.3.23 reads past the end of this line into what line %u "
			    "left in its line buffer (only white space now, so harmless; a "
			    "longer line %u could make OpenSM reject the file): put the ';' "
			    "after the last member",
			    r.over[i].from_line, r.over[i].from_line);
	}
	return ret;
}

static int parse_text(const char *text, size_t len, const char *name, const unsigned barrier[2],
		      struct pc_file **out, char *err, size_t errlen)
{
	struct parser p = {
		.text = text,
		.len = len,
		.name = name ? name : "<partitions>",
		.cur = -1,
		.barrier = {barrier[0], barrier[1]},
		.err = err,
		.errlen = errlen,
	};
	int ret;

	*out = NULL;
	p.f = calloc(1, sizeof(*p.f));
	if (!p.f)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	ret = parse_lines(&p);
	if (!ret)
		ret = osm_verdict(&p);
	if (ret) {
		pc_file_free(p.f);
		return ret;
	}
	*out = p.f;
	return 0;
}

int pc_parse(const char *text, size_t len, const char *name, struct pc_file **out, char *err,
	     size_t errlen)
{
	static const unsigned none[2];

	return parse_text(text, len, name, none, out, err, errlen);
}

void pc_file_free(struct pc_file *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->n_parts; i++) {
		free(f->parts[i].name);
		free(f->parts[i].ports);
	}
	free(f->parts);
	free(f->warnings);
	free(f);
}

const char *pc_membership_name(enum pc_membership m)
{
	switch (m) {
	case PC_FULL:
		return "full";
	case PC_BOTH:
		return "both";
	default:
		return "limited";
	}
}

/* ------------------------------------------------------- managed model -- */

void pc_managed_free(struct pc_managed *m)
{
	for (size_t i = 0; i < m->n; i++)
		free(m->pkeys[i].members);
	free(m->pkeys);
	memset(m, 0, sizeof(*m));
}

int pc_managed_copy(struct pc_managed *dst, const struct pc_managed *src)
{
	struct pc_managed c = {0};

	c.pkeys = calloc(src->n ? src->n : 1, sizeof(*c.pkeys));
	if (!c.pkeys)
		return -ENOMEM;
	c.cap = src->n ? src->n : 1;
	for (size_t i = 0; i < src->n; i++) {
		const struct pc_mpkey *s = &src->pkeys[i];
		struct pc_mpkey *d = &c.pkeys[i];

		*d = *s;
		d->cap = s->n;
		d->members = malloc((s->n ? s->n : 1) * sizeof(*d->members));
		if (!d->members) {
			c.n = i;
			pc_managed_free(&c);
			return -ENOMEM;
		}
		memcpy(d->members, s->members, s->n * sizeof(*d->members));
		c.n = i + 1;
	}
	*dst = c;
	return 0;
}

struct pc_mpkey *pc_managed_find(const struct pc_managed *m, uint16_t pkey)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->pkeys[mid].pkey == pkey)
			return &m->pkeys[mid];
		if (m->pkeys[mid].pkey < pkey)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

struct pc_member *pc_mpkey_find(const struct pc_mpkey *p, uint64_t guid)
{
	size_t lo = 0, hi = p->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->members[mid].guid == guid)
			return &p->members[mid];
		if (p->members[mid].guid < guid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static struct pc_mpkey *mpkey_get(struct pc_managed *m, uint16_t pkey, const struct pc_props *pr)
{
	struct pc_mpkey *p = pc_managed_find(m, pkey);
	size_t i;

	if (p)
		return p;
	if (m->n == m->cap) {
		size_t cap = m->cap ? 2 * m->cap : 4;
		struct pc_mpkey *np = realloc(m->pkeys, cap * sizeof(*np));

		if (!np)
			return NULL;
		m->pkeys = np;
		m->cap = cap;
	}
	for (i = m->n; i > 0 && m->pkeys[i - 1].pkey > pkey; i--)
		m->pkeys[i] = m->pkeys[i - 1];
	p = &m->pkeys[i];
	memset(p, 0, sizeof(*p));
	p->pkey = pkey;
	if (pr) {
		p->props = *pr;
	} else {
		p->props.mtu = p->props.rate = p->props.sl = -1;
	}
	m->n++;
	return p;
}

/* A member with the order it was given in: later wins for the same GUID. */
struct seq_member {
	struct pc_member m;
	size_t seq;
};

static int seq_cmp(const void *a, const void *b)
{
	const struct seq_member *x = a, *y = b;

	if (x->m.guid != y->m.guid)
		return x->m.guid < y->m.guid ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static bool member_eq(const struct pc_member *a, const struct pc_member *b)
{
	return a->guid == b->guid && a->full == b->full && a->index0 == b->index0;
}

int pc_managed_add(struct pc_managed *m, uint16_t pkey, const struct pc_props *props,
		   const struct pc_member *members, size_t n, size_t *changed)
{
	struct pc_mpkey *p;
	struct seq_member *all;
	size_t total, i, out = 0;

	if (!n)
		return 0;
	p = mpkey_get(m, pkey, props);
	if (!p)
		return -ENOMEM;
	total = p->n + n;
	all = malloc(total * sizeof(*all));
	if (!all)
		return -ENOMEM;
	for (i = 0; i < p->n; i++)
		all[i] = (struct seq_member){p->members[i], i};
	for (i = 0; i < n; i++)
		all[p->n + i] = (struct seq_member){members[i], p->n + i};
	ibvf_sort(all, total, sizeof(*all), seq_cmp);
	for (i = 0; i < total; i++) {
		const struct seq_member *last = &all[i];
		const struct pc_member *old = all[i].seq < p->n ? &all[i].m : NULL;

		while (i + 1 < total && all[i + 1].m.guid == last->m.guid)
			last = &all[++i];
		if (!old || !member_eq(old, &last->m))
			++*changed;
		all[out++].m = last->m;
	}
	if (out > p->cap) {
		struct pc_member *nm = realloc(p->members, out * sizeof(*nm));

		if (!nm) {
			free(all);
			return -ENOMEM;
		}
		p->members = nm;
		p->cap = out;
	}
	for (i = 0; i < out; i++)
		p->members[i] = all[i].m;
	p->n = out;
	free(all);
	return 0;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

int pc_managed_remove(struct pc_managed *m, uint16_t pkey, const uint64_t *guids, size_t n,
		      size_t *changed)
{
	struct pc_mpkey *p = pc_managed_find(m, pkey);
	uint64_t *sorted;
	size_t i, out = 0;

	if (!p || !n)
		return 0;
	sorted = malloc(n * sizeof(*sorted));
	if (!sorted)
		return -ENOMEM;
	memcpy(sorted, guids, n * sizeof(*sorted));
	ibvf_sort(sorted, n, sizeof(*sorted), u64_cmp);
	for (i = 0; i < p->n; i++) {
		if (bsearch(&p->members[i].guid, sorted, n, sizeof(*sorted), u64_cmp))
			++*changed;
		else
			p->members[out++] = p->members[i];
	}
	free(sorted);
	p->n = out;
	if (!out) {
		size_t idx = (size_t)(p - m->pkeys);

		free(p->members);
		memmove(p, p + 1, (m->n - idx - 1) * sizeof(*p));
		m->n--;
	}
	return 0;
}

size_t pc_managed_count(const struct pc_managed *m)
{
	size_t n = 0;

	for (size_t i = 0; i < m->n; i++)
		n += m->pkeys[i].n;
	return n;
}

/* ------------------------------------------------------------ document -- */

void pc_doc_free(struct pc_doc *d)
{
	if (!d)
		return;
	free(d->text);
	pc_file_free(d->file);
	free(d->admin);
	pc_managed_free(&d->managed);
	free(d);
}

/* Does [s, s + n) hold @needle? */
static bool has_text(const char *s, size_t n, const char *needle)
{
	size_t k = strlen(needle);

	for (size_t i = 0; i + k <= n; i++)
		if (!memcmp(s + i, needle, k))
			return true;
	return false;
}

/*
 * Find the marker lines; fills begin/end line numbers and offsets. A marker
 * line may end in white space or '\r' (an editor or a template may add
 * them; the section, markers included, is rewritten exactly). Any other line
 * holding "BEGIN/END ibvf managed partitions" is refused: the section would
 * silently become the administrator's text (its members never removed
 * again) and a second one would be appended.
 */
static int find_markers(struct pc_doc *d, const char *name, char *err, size_t errlen)
{
	size_t off = 0, blen = strlen(PC_BEGIN_MARKER), elen = strlen(PC_END_MARKER);
	unsigned ln = 0;

	d->head_len = d->len;
	d->tail_off = d->len;
	while (off < d->len) {
		const char *s = d->text + off, *nl = memchr(s, '\n', d->len - off);
		size_t raw = nl ? (size_t)(nl - s) : d->len - off;
		size_t next = off + raw + (nl ? 1 : 0);

		ln++;
		while (raw && (s[raw - 1] == ' ' || s[raw - 1] == '\t' || s[raw - 1] == '\r'))
			raw--;
		if (!(raw == blen && !memcmp(s, PC_BEGIN_MARKER, blen)) &&
		    !(raw == elen && !memcmp(s, PC_END_MARKER, elen)) &&
		    (has_text(s, raw, "BEGIN ibvf managed partitions") ||
		     has_text(s, raw, "END ibvf managed partitions")))
			return ibvf_errf(err, errlen, -EINVAL,
					 "%s:%u:1: this line looks like an "
					 "ibvf section marker but is not one; the markers are the "
					 "exact lines \"%s\" and \"%s\": restore it (or remove the "
					 "section with both markers)",
					 name, ln, PC_BEGIN_MARKER, PC_END_MARKER);
		if (raw == blen && !memcmp(s, PC_BEGIN_MARKER, blen)) {
			if (d->begin_line)
				return ibvf_errf(err, errlen, -EINVAL,
						 "%s:%u:1: a second ibvf "
						 "BEGIN marker (the first is at line %u)",
						 name, ln, d->begin_line);
			d->begin_line = ln;
			d->head_len = off;
		} else if (raw == elen && !memcmp(s, PC_END_MARKER, elen)) {
			if (d->end_line)
				return ibvf_errf(err, errlen, -EINVAL,
						 "%s:%u:1: a second ibvf END "
						 "marker (the first is at line %u)",
						 name, ln, d->end_line);
			if (!d->begin_line)
				return ibvf_errf(err, errlen, -EINVAL,
						 "%s:%u:1: ibvf END marker "
						 "without a BEGIN marker before it",
						 name, ln);
			d->end_line = ln;
			d->tail_off = next;
		}
		off = next;
	}
	if (d->begin_line && !d->end_line)
		return ibvf_errf(err, errlen, -EINVAL,
				 "%s:%u:1: ibvf BEGIN marker without an "
				 "END marker after it",
				 name, d->begin_line);
	d->has_section = d->begin_line != 0;
	return 0;
}

/* Take a definition of the section into the managed model. */
static int take_managed(struct pc_doc *d, const struct pc_partition *pt, const char *name,
			char *err, size_t errlen)
{
	struct pc_props props = {pt->ipoib, pt->mtu, pt->rate, pt->sl};
	struct pc_member *mem;
	struct pc_mpkey *mp;
	size_t changed = 0;
	int ret;

	if (!pt->has_pkey || pt->n_mgroups || pt->scope_mask || !pt->terminated)
		return ibvf_errf(err, errlen, -EINVAL,
				 "%s:%u:%u: the ibvf section (lines "
				 "%u-%u) was edited: this definition is not in ibvf's form "
				 "(explicit PKey, no mgid, no scope, ends with ';'); restore "
				 "the section from the backup file or delete it with its markers",
				 name, pt->pos.line, pt->pos.col, d->begin_line, d->end_line);
	mem = calloc(pt->n_ports ? pt->n_ports : 1, sizeof(*mem));
	if (!mem)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	for (size_t i = 0; i < pt->n_ports; i++) {
		const struct pc_port *po = &pt->ports[i];

		if (po->kind != PC_PORT_GUID || !po->explicit_membership ||
		    po->membership == PC_BOTH) {
			free(mem);
			return ibvf_errf(err, errlen, -EINVAL,
					 "%s:%u:%u: the ibvf section "
					 "(lines %u-%u) was edited: members there must be GUIDs "
					 "with =full or =limited",
					 name, po->pos.line, po->pos.col, d->begin_line,
					 d->end_line);
		}
		mem[i] = (struct pc_member){po->guid, po->membership == PC_FULL, pt->indx0};
	}
	ret = pc_managed_add(&d->managed, pt->pkey, &props, mem, pt->n_ports, &changed);
	free(mem);
	if (ret)
		return ibvf_errf(err, errlen, ret, "out of memory");
	mp = pc_managed_find(&d->managed, pt->pkey);
	if (mp) {
		/* several definitions of one PKey: properties are the union */
		mp->props.ipoib |= props.ipoib;
		if (props.mtu >= 0)
			mp->props.mtu = props.mtu;
		if (props.rate >= 0)
			mp->props.rate = props.rate;
		if (props.sl >= 0)
			mp->props.sl = props.sl;
	}
	return 0;
}

static int split_doc(struct pc_doc *d, const char *name, char *err, size_t errlen)
{
	const struct pc_file *f = d->file;
	int ret;

	d->admin = calloc(f->n_parts, sizeof(*d->admin));
	if (!d->admin)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	for (size_t i = 0; i < f->n_parts; i++) {
		const struct pc_partition *pt = &f->parts[i];

		if (!d->has_section || pt->last_line < d->begin_line ||
		    pt->pos.line > d->end_line) {
			if (!strncmp(pt->name, PC_NAME_PREFIX, strlen(PC_NAME_PREFIX)))
				return ibvf_errf(err, errlen, -EINVAL,
						 "%s:%u:%u: partition '%.40s' is outside ibvf's "
						 "section but named like ibvf's (the prefix %s is "
						 "reserved): a section whose markers were removed? "
						 "Remove the definition, or restore the markers "
						 "around it",
						 name, pt->pos.line, pt->pos.col, pt->name,
						 PC_NAME_PREFIX);
			d->admin[d->n_admin++] = i;
			if (pt->has_pkey)
				d->admin_pkeys[pt->pkey / 64] |= UINT64_C(1) << (pt->pkey % 64);
			continue;
		}
		if (pt->pos.line < d->begin_line || pt->last_line > d->end_line)
			return ibvf_errf(err, errlen, -EINVAL,
					 "%s:%u:%u: this definition runs "
					 "across the ibvf section marker at line %u (is its ';' "
					 "missing?)",
					 name, pt->pos.line, pt->pos.col,
					 pt->pos.line < d->begin_line ? d->begin_line
								      : d->end_line);
		ret = take_managed(d, pt, name, err, errlen);
		if (ret)
			return ret;
	}
	if (!d->n_admin)
		return ibvf_errf(err, errlen, -EINVAL,
				 "%s: no partition definition outside the "
				 "ibvf section: with only ibvf's partitions OpenSM would make "
				 "every port a limited member of the Default partition; define "
				 "it first, e.g. \"Default=0x7fff, ipoib : ALL=full ;\"",
				 name);
	return 0;
}

int pc_doc_load(const char *text, size_t len, const char *name, struct pc_doc **out, char *err,
		size_t errlen)
{
	struct pc_doc *d;
	int ret;

	*out = NULL;
	name = name ? name : "<partitions>";
	d = calloc(1, sizeof(*d));
	if (!d)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	d->text = malloc(len + 1);
	if (!d->text) {
		free(d);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	}
	memcpy(d->text, text, len);
	d->text[len] = '\0';
	d->len = len;
	ret = find_markers(d, name, err, errlen);
	if (!ret) {
		unsigned barrier[2] = {d->begin_line, d->end_line};

		ret = parse_text(d->text, d->len, name, barrier, &d->file, err, errlen);
	}
	if (!ret && d->file->leftover_line && d->file->leftover_from == d->file->leftover_line)
		ret = ibvf_errf(err, errlen, -EINVAL,
				"%s:%u: OpenSM 3.3.23 parses '%s' on this line as a new partition "
				"definition where the file shows none (text after an mgid entry "
				"whose GID is not multicast, or a comment after a ';' that "
				"begins the line): OpenSM accepts the file, but that partition "
				"is not one a reader sees, and ibvf does not edit the file",
				name ? name : "<partitions>", d->file->leftover_line,
				d->file->leftover);
	else if (!ret && d->file->leftover_line)
		ret = ibvf_errf(err, errlen, -EINVAL,
				"%s:%u: OpenSM 3.3.23 reads past the end of this line and parses "
				"'%s', which line %u left in its line buffer, as partition text: "
				"OpenSM accepts the file, but which partitions that makes is not "
				"in the file, and ibvf does not edit it; put the ';' after the "
				"last member of line %u",
				name ? name : "<partitions>", d->file->leftover_line,
				d->file->leftover, d->file->leftover_from, d->file->leftover_line);
	/*
	 * What OpenSM reads past a line's end was left there by the lines before
	 * it. ibvf's write adds a newline to a last line without one and puts its
	 * section before the lines after it: refuse where that changes what
	 * OpenSM reads (the install gate would refuse every rendering).
	 */
	if (!ret && d->file->overread_last &&
	    ((d->begin_line && d->file->overread_last >= d->begin_line) ||
	     (d->file->overread_last == d->file->n_lines && len && text[len - 1] != '\n')))
		ret = ibvf_errf(err, errlen, -EINVAL,
				"%s:%u: OpenSM 3.3.23 reads past the end of this line, into what "
				"the lines before it left in its line buffer, and ibvf's next "
				"write changes those: ibvf does not edit the file; put the ';' "
				"after the last member",
				name ? name : "<partitions>", d->file->overread_last);
	if (!ret)
		ret = split_doc(d, name, err, errlen);
	if (ret) {
		pc_doc_free(d);
		return ret;
	}
	*out = d;
	return 0;
}

bool pc_admin_defines(const struct pc_doc *d, uint16_t pkey)
{
	return pkey < 0x8000 && (d->admin_pkeys[pkey / 64] >> (pkey % 64) & 1);
}

const struct pc_port *pc_admin_find_guid(const struct pc_doc *d, uint16_t pkey, uint64_t guid)
{
	const struct pc_port *found = NULL;

	for (size_t i = 0; i < d->n_admin; i++) {
		const struct pc_partition *pt = &d->file->parts[d->admin[i]];

		if (!pt->has_pkey || pt->pkey != pkey)
			continue;
		for (size_t k = 0; k < pt->n_ports; k++)
			if (pt->ports[k].kind == PC_PORT_GUID && pt->ports[k].guid == guid)
				found = &pt->ports[k];
	}
	return found;
}

bool pc_admin_has_keywords(const struct pc_doc *d, uint16_t pkey)
{
	for (size_t i = 0; i < d->n_admin; i++) {
		const struct pc_partition *pt = &d->file->parts[d->admin[i]];

		if (!pt->has_pkey || pt->pkey != pkey)
			continue;
		for (size_t k = 0; k < pt->n_ports; k++)
			if (pt->ports[k].kind != PC_PORT_GUID)
				return true;
	}
	return false;
}

/* ------------------------------------------------------------- render -- */

static void render_props(FILE *o, const struct pc_props *pr)
{
	if (pr->ipoib)
		fputs(", ipoib", o);
	if (pr->mtu >= 0)
		fprintf(o, ", mtu=%d", pr->mtu);
	if (pr->rate >= 0)
		fprintf(o, ", rate=%d", pr->rate);
	if (pr->sl >= 0)
		fprintf(o, ", sl=%d", pr->sl);
}

/* One definition with the members of @p whose index0 equals @index0. */
static void render_def(FILE *o, const struct pc_mpkey *p, bool index0, bool with_props)
{
	size_t k = 0;

	fprintf(o, PC_NAME_PREFIX "0x%04x=0x%04x", p->pkey, p->pkey);
	if (index0)
		fputs(", indx0", o);
	if (with_props)
		render_props(o, &p->props);
	fputs(" :\n", o);
	for (size_t i = 0; i < p->n; i++) {
		const struct pc_member *m = &p->members[i];

		if (m->index0 != index0)
			continue;
		fprintf(o, "%s0x%016llx=%s", k % PC_MEMBERS_PER_LINE ? ", " : (k ? ",\n\t" : "\t"),
			(unsigned long long)m->guid, m->full ? "full" : "limited");
		k++;
	}
	/* never a line with only ';': see line() */
	fputs(" ;\n", o);
}

static void render_section(FILE *o, const struct pc_managed *m)
{
	fputs(PC_BEGIN_MARKER "\n", o);
	for (size_t i = 0; i < m->n; i++) {
		const struct pc_mpkey *p = &m->pkeys[i];
		size_t n0 = 0;

		for (size_t k = 0; k < p->n; k++)
			n0 += p->members[k].index0;
		if (n0 < p->n)
			render_def(o, p, false, true);
		if (n0)
			render_def(o, p, true, n0 == p->n);
	}
	fputs(PC_END_MARKER "\n", o);
}

/* Does the admin head need a newline before the section? */
static bool needs_newline(const struct pc_doc *d)
{
	return d->head_len && d->text[d->head_len - 1] != '\n';
}

int pc_render(const struct pc_doc *d, const struct pc_managed *m, char **out, size_t *out_len,
	      char *err, size_t errlen)
{
	char *buf = NULL;
	size_t blen = 0;
	FILE *o = open_memstream(&buf, &blen);

	if (!o)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory rendering partitions");
	fwrite(d->text, 1, d->head_len, o);
	if (needs_newline(d))
		fputc('\n', o);
	render_section(o, m);
	fwrite(d->text + d->tail_off, 1, d->len - d->tail_off, o);
	if (fclose(o) || !buf) {
		free(buf);
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory rendering partitions");
	}
	*out = buf;
	*out_len = blen;
	return 0;
}

static bool props_eq(const struct pc_props *a, const struct pc_props *b)
{
	return a->ipoib == b->ipoib && a->mtu == b->mtu && a->rate == b->rate && a->sl == b->sl;
}

static int managed_diff(const struct pc_managed *a, const struct pc_managed *b, char *err,
			size_t errlen)
{
	if (a->n != b->n)
		return ibvf_errf(err, errlen, -EINVAL,
				 "the rendered section holds %zu PKeys, "
				 "expected %zu",
				 a->n, b->n);
	for (size_t i = 0; i < a->n; i++) {
		const struct pc_mpkey *x = &a->pkeys[i], *y = &b->pkeys[i];

		if (x->pkey != y->pkey || x->n != y->n || !props_eq(&x->props, &y->props))
			return ibvf_errf(err, errlen, -EINVAL,
					 "the rendered section differs at "
					 "PKey 0x%04x",
					 y->pkey);
		for (size_t k = 0; k < x->n; k++)
			if (!member_eq(&x->members[k], &y->members[k]))
				return ibvf_errf(err, errlen, -EINVAL,
						 "the rendered section "
						 "differs at PKey 0x%04x GUID 0x%016llx",
						 y->pkey, (unsigned long long)y->members[k].guid);
	}
	return 0;
}

int pc_check_rendered(const struct pc_doc *old, const struct pc_managed *want, const char *text,
		      size_t len, const char *name, char *err, size_t errlen)
{
	size_t head = old->head_len + (needs_newline(old) ? 1 : 0);
	size_t tail = old->len - old->tail_off;
	struct pc_doc *nd;
	int ret;

	ret = pc_doc_load(text, len, name, &nd, err, errlen);
	if (ret)
		return ibvf_err_prefix(err, errlen, ret, "refusing the new partition file");
	if (!nd->has_section || nd->head_len != head || len - nd->tail_off != tail ||
	    memcmp(nd->text, old->text, old->head_len) ||
	    (head > old->head_len && nd->text[old->head_len] != '\n') ||
	    memcmp(nd->text + nd->tail_off, old->text + old->tail_off, tail))
		ret = ibvf_errf(err, errlen, -EINVAL, "the administrator's part would change");
	else
		ret = managed_diff(&nd->managed, want, err, errlen);
	if (ret)
		ibvf_err_prefix(err, errlen, ret, "refusing the new partition file");
	pc_doc_free(nd);
	return ret;
}
