// SPDX-License-Identifier: MIT
/*
 * OpenSM 3.3.23's partition file reader, modelled on its line buffer
 * (partition_osm.h). Every access goes through rd()/wr() so that reads past
 * the current line are seen: from bytes an earlier line wrote (then the
 * model knows exactly what OpenSM reads) or from bytes none wrote (then the
 * result is undefined).
 */
#include "partition_osm.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct osm {
	char buf[PC_OSM_BUF];
	bool known[PC_OSM_BUF];	     /* written by some line */
	unsigned origin[PC_OSM_BUF]; /* the line that wrote it */
	size_t eol;		     /* index of the NUL fgets() wrote */
	unsigned line;
	bool undef;	 /* an unwritten byte was read */
	bool conf, prtn; /* OpenSM's conf and conf->p_prtn */
	bool seg_over;	 /* the segment began past the line's end */
	bool quiet;	 /* reading mgid flags: they only warn */
	struct pc_osm_result *r;
};

/* A C string of at most this many bytes is copied out of the buffer. */
#define TOK_MAX PC_OSM_BUF

static void note_over(struct osm *s, size_t i, bool parsed)
{
	struct pc_osm_result *r = s->r;
	struct pc_osm_overread *o;
	size_t n = 0;

	r->last_over = s->line;
	if (r->n_over && r->over[r->n_over - 1].line == s->line) {
		o = &r->over[r->n_over - 1];
		if (!parsed || o->parsed)
			return;
	} else {
		if (r->n_over == PC_OSM_MAX_OVERREADS)
			return;
		o = &r->over[r->n_over++];
		memset(o, 0, sizeof(*o));
		o->line = s->line;
		o->from_line = i < PC_OSM_BUF && s->known[i] ? s->origin[i] : 0;
	}
	if (!parsed)
		return;
	o->parsed = true;
	o->from_line = s->origin[i];
	for (; i < PC_OSM_BUF && s->known[i] && s->buf[i] && n + 1 < sizeof(o->text); i++)
		o->text[n++] = isprint((unsigned char)s->buf[i]) ? s->buf[i] : '?';
	o->text[n] = '\0';
}

/* The byte OpenSM reads at @i; unwritten bytes read as NUL (and are noted). */
static char rd(struct osm *s, size_t i)
{
	if (i <= s->eol) /* the current line: always written */
		return s->buf[i];
	if (i >= PC_OSM_BUF || !s->known[i]) {
		if (s->quiet)
			return '\0';
		if (!s->undef) {
			note_over(s, i, false);
			s->r->undef_line = s->line;
		}
		s->undef = true;
		return '\0';
	}
	if (i > s->eol && !s->quiet)
		note_over(s, i, false);
	return s->buf[i];
}

static void wr0(struct osm *s, size_t i)
{
	if (i < PC_OSM_BUF && s->known[i])
		s->buf[i] = '\0';
}

static bool ws(char c)
{
	return c == ' ' || c == '\t' || c == '\n';
}

static size_t slen(struct osm *s, size_t i)
{
	size_t n = 0;

	while (rd(s, i + n))
		n++;
	return n;
}

/* strchr(): index of @c from @i, or (size_t)-1 (a NUL comes first). */
static size_t schr(struct osm *s, size_t i, char c)
{
	for (;; i++) {
		char b = rd(s, i);

		if (b == c)
			return i;
		if (!b)
			return (size_t)-1;
	}
}

static void copy_str(struct osm *s, size_t i, char *out)
{
	size_t n = 0;

	while (n + 1 < TOK_MAX && (out[n] = rd(s, i + n)))
		n++;
	out[n] = '\0';
}

static int fail(struct osm *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct osm *s, const char *fmt, ...)
{
	va_list ap;

	if (s->r->verdict == PC_OSM_ACCEPTS) {
		s->r->verdict = PC_OSM_REJECTS;
		s->r->line = s->line;
		va_start(ap, fmt);
		vsnprintf(s->r->why, sizeof(s->r->why), fmt, ap);
		va_end(ap);
	}
	return -1;
}

#define NO_VAL ((size_t)-1)

/*
 * parse_name_token(): "name[=val]" with white space around both trimmed by
 * writing NULs; returns how far OpenSM then advances, which counts the
 * untrimmed lengths (and so may point past the end of the line).
 */
static size_t name_token(struct osm *s, size_t str, size_t *name, size_t *val)
{
	size_t p = str, q, e, len, vstr;

	while (ws(rd(s, p)))
		p++;
	q = schr(s, p, '=');
	if (q != NO_VAL)
		wr0(s, q++);
	len = slen(s, str) + 1;
	vstr = q;
	e = p + slen(s, p);
	while (e != p && (!rd(s, e) || ws(rd(s, e))))
		wr0(s, e--);
	*name = p;
	*val = NO_VAL;
	if (vstr == NO_VAL)
		return len;
	p = vstr;
	while (ws(rd(s, p)))
		p++;
	e = p + slen(s, p);
	len += e - vstr + 1;
	while (e != p && (!rd(s, e) || ws(rd(s, e))))
		wr0(s, e--);
	*val = p;
	return len;
}

static bool prefix(const char *s, const char *kw)
{
	return !strncmp(s, kw, strlen(s));
}

/* partition_create()'s checks: a PKey strtoul() reads whole. */
static int create(struct osm *s, size_t name, size_t id)
{
	char n[TOK_MAX], v[TOK_MAX], *end;

	copy_str(s, name, n);
	if (id == NO_VAL && isdigit((unsigned char)n[0]))
		id = name; /* "0x10 : ..." */
	if (id != NO_VAL) {
		copy_str(s, id, v);
		(void)strtoul(v, &end, 0);
		if (end == v || *end)
			return -1;
	}
	return 0;
}

/* partition_add_port()'s checks: a keyword or a nonzero number read whole. */
static int add_port(struct osm *s, size_t name)
{
	char n[TOK_MAX], *end;

	copy_str(s, name, n);
	if (!n[0] || prefix(n, "NONE") || prefix(n, "ALL") || prefix(n, "ALL_CAS") ||
	    prefix(n, "ALL_SWITCHES") || prefix(n, "ALL_ROUTERS") || prefix(n, "SELF"))
		return 0;
	if (!strtoull(n, &end, 0) || *end)
		return -1;
	return 0;
}

/* parse_mgroup_flags(): consumes ","-separated flags; flags only warn. */
static size_t mgroup_flags(struct osm *s, size_t p)
{
	size_t len = 0, q, name, val, ret;

	do {
		q = schr(s, p, ',');
		if (q != NO_VAL)
			wr0(s, q++);
		ret = name_token(s, p, &name, &val);
		p += ret;
		len += ret;
	} while (q != NO_VAL);
	return len;
}

/* mgroup_create(): flags are read only after a multicast GID. */
static int mgroup(struct osm *s, size_t p, size_t mgid, size_t *used)
{
	char g[TOK_MAX];
	unsigned char raw[16];

	*used = 0;
	if (mgid == NO_VAL) {
		if (s->r->verdict == PC_OSM_ACCEPTS) {
			s->r->verdict = PC_OSM_CRASHES;
			s->r->line = s->line;
			snprintf(s->r->why, sizeof(s->r->why),
				 "mgid without '=GID': OpenSM passes NULL to inet_pton() and "
				 "crashes");
		}
		return -1;
	}
	copy_str(s, mgid, g);
	if (inet_pton(AF_INET6, g, raw) != 1 || raw[0] != 0xff)
		return 0; /* "gid is not multicast": nothing more is read */
	/*
	 * Flags after "mgid=GID" at the end of a line are read from past its
	 * end, but they only warn, and without a ';' on the line OpenSM reads
	 * no further: only a ';' makes the main loop go on from there.
	 */
	s->quiet = !s->seg_over;
	*used = mgroup_flags(s, p);
	s->quiet = false;
	return 0;
}

/* parse_part_conf(): one ';'-free segment; returns how far to advance, or -1. */
static long part_conf(struct osm *s, size_t str)
{
	size_t p = str, q, len = 0, ret, name, val, used;
	char c = rd(s, p), n[TOK_MAX];

	if (c == '\t' || c == '\0' || c == '\n')
		p++;
	len += p - str;
	str = p;
	if (!s->prtn) {
		q = schr(s, p, ':');
		if (q == NO_VAL) {
			char t[40];
			size_t k = 0;

			for (; k + 1 < sizeof(t) && rd(s, p + k); k++)
				t[k] = isprint((unsigned char)rd(s, p + k)) ? rd(s, p + k) : '?';
			t[k] = '\0';
			if (s->seg_over)
				return fail(s,
					    "PARSE ERROR: line %u: no partition definition found "
					    "(in '%s', which line %u left in OpenSM's line buffer "
					    "past the end of line %u)",
					    s->line, t, s->origin[p], s->line);
			return fail(s,
				    "PARSE ERROR: line %u: no partition definition found (in '%s')",
				    s->line, t);
		}
		wr0(s, q);
		str = q + 1;
		q = schr(s, p, ',');
		if (q != NO_VAL)
			wr0(s, q);
		ret = name_token(s, p, &name, &val);
		p += ret;
		len += ret;
		{
			size_t pname = name, pid = val;

			while (q != NO_VAL) {
				size_t f, fv;

				q = schr(s, p, ',');
				if (q != NO_VAL)
					wr0(s, q++);
				ret = name_token(s, p, &f, &fv);
				p += ret;
				len += ret;
			}
			if (p != str || create(s, pname, pid))
				return fail(s, "PARSE ERROR: line %u: bad partition definition",
					    s->line);
		}
		s->prtn = true;
	}
	do {
		q = schr(s, p, ',');
		if (q != NO_VAL)
			wr0(s, q++);
		ret = name_token(s, p, &name, &val);
		len += ret;
		copy_str(s, name, n);
		if (!strcmp(n, "mgid")) {
			if (mgroup(s, p + ret, val, &used))
				return -1;
			len += used;
			return (long)len;
		}
		if (add_port(s, name))
			return fail(s, "PARSE ERROR: line %u: bad PortGUID", s->line);
		p += ret;
	} while (q != NO_VAL);
	return (long)len;
}

/* fgets(buf, PC_OSM_BUF - 1, f): false at the end of the file. */
static bool get_line(struct osm *s, const char *text, size_t len, size_t *off)
{
	size_t n = 0;

	if (*off >= len)
		return false;
	while (n < PC_OSM_BUF - 2 && *off < len) {
		char c = text[(*off)++];

		s->buf[n] = c;
		s->known[n] = true;
		s->origin[n] = s->line + 1;
		n++;
		if (c == '\n')
			break;
	}
	s->buf[n] = '\0';
	s->known[n] = true;
	s->origin[n] = s->line + 1;
	s->eol = n;
	s->line++;
	return true;
}

void pc_osm_read(const char *text, size_t len, struct pc_osm_result *r)
{
	struct osm *s = calloc(1, sizeof(*s));
	size_t off = 0;
	int success = 0;

	memset(r, 0, sizeof(*r));
	if (!s) {
		r->verdict = PC_OSM_UNDEFINED;
		snprintf(r->why, sizeof(r->why), "out of memory");
		return;
	}
	s->r = r;
	s->known[0] = true; /* line[0] = '\0' */
	while (success >= 0 && get_line(s, text, len, &off)) {
		size_t p = 0, q = schr(s, 0, '#'), semi = NO_VAL;
		/* where the line's text ends for a reader: its '#' or a NUL byte */
		size_t shown = q != NO_VAL ? q : slen(s, 0);

		if (q != NO_VAL)
			wr0(s, q);
		do {
			long used;

			while (ws(rd(s, p)))
				p++;
			if (!rd(s, p))
				break;
			s->seg_over = p > s->eol;
			/*
			 * Past the line, past its '#' (a lone ';' skips one byte
			 * too many), or still before the ';' that ended the last
			 * segment (after an mgid entry whose GID is not multicast
			 * OpenSM stops there): text parsed as a new definition that
			 * a reader of the file would not see as one.
			 */
			if (s->seg_over || p > shown || (semi != NO_VAL && p < semi))
				note_over(s, p, true);
			if (!s->conf) {
				s->conf = true;
				s->prtn = false;
			}
			q = schr(s, p, ';');
			if (q != NO_VAL)
				wr0(s, q);
			used = part_conf(s, p);
			if (used < 0) {
				success = -1;
				break;
			}
			success = 1;
			p += (size_t)used;
			semi = q;
			if (q != NO_VAL)
				s->conf = s->prtn = false;
		} while (q != NO_VAL);
	}
	if (!success && r->verdict == PC_OSM_ACCEPTS) {
		r->verdict = PC_OSM_REJECTS;
		r->line = s->line;
		snprintf(r->why, sizeof(r->why), "no partition definition in the file");
	}
	/* an error after a guessed byte is a guess too */
	if (s->undef && (r->verdict == PC_OSM_ACCEPTS || r->undef_line <= r->line))
		r->verdict = PC_OSM_UNDEFINED;
	free(s);
}
