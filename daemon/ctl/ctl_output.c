// SPDX-License-Identifier: MIT
/* One print path for ibvfctl: the same JSON data as a table or as --json. */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

int ctl_error(int code, const char *fmt, ...)
{
	va_list ap;

	fputs("ibvfctl: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return code;
}

/* Length of a valid UTF-8 sequence at @u (1..4), or 0 (RFC 3629, 4). */
static size_t utf8_seq(const unsigned char *u)
{
	size_t n = u[0] < 0x80			  ? 1
		   : u[0] >= 0xc2 && u[0] <= 0xdf ? 2
		   : u[0] >= 0xe0 && u[0] <= 0xef ? 3
		   : u[0] >= 0xf0 && u[0] <= 0xf4 ? 4
						  : 0;
	uint32_t cp = n == 2 ? u[0] & 0x1fu : n == 3 ? u[0] & 0x0fu : u[0] & 0x07u;

	for (size_t i = 1; i < n; i++) {
		if ((u[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (u[i] & 0x3fu);
	}
	if ((n == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (n == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return n;
}

json_t *ctl_json_text(const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t o = 0;
	char *copy;
	json_t *j;

	if (!s)
		return json_null();
	j = json_string(s);
	if (j)
		return j;
	/* not UTF-8: each byte that is not part of a valid sequence becomes U+FFFD */
	copy = malloc(3 * strlen(s) + 1);
	if (!copy)
		return NULL;
	while (*u) {
		size_t n = utf8_seq(u);

		if (n) {
			memcpy(copy + o, u, n);
			o += n;
			u += n;
		} else {
			memcpy(copy + o, "\xef\xbf\xbd", 3);
			o += 3;
			u++;
		}
	}
	copy[o] = 0;
	j = json_string(copy);
	free(copy);
	return j;
}

/*
 * A string cell for a terminal: control characters (a newline, an escape
 * sequence) become '?' so that one odd value can neither break the table
 * nor drive the terminal.
 */
static const char *text_cell(const char *s, char *buf, size_t len)
{
	size_t i;

	if (!s[0])
		return "-";
	for (i = 0; s[i] && (unsigned char)s[i] >= 0x20 && s[i] != 0x7f; i++)
		;
	if (!s[i])
		return s;
	snprintf(buf, len, "%s", s);
	for (i = 0; buf[i]; i++)
		if ((unsigned char)buf[i] < 0x20 || buf[i] == 0x7f)
			buf[i] = '?';
	return buf;
}

/* Render a JSON scalar (or array of scalars) as text into @buf. */
static const char *cell(json_t *v, char *buf, size_t len)
{
	size_t off = 0, i;
	json_t *e;

	if (!v || json_is_null(v))
		return "-";
	if (json_is_string(v))
		return text_cell(json_string_value(v), buf, len);
	if (json_is_integer(v)) {
		snprintf(buf, len, "%lld", (long long)json_integer_value(v));
		return buf;
	}
	if (json_is_boolean(v))
		return json_is_true(v) ? "yes" : "no";
	if (json_is_real(v)) {
		snprintf(buf, len, "%.3f", json_real_value(v));
		return buf;
	}
	if (json_is_array(v)) {
		buf[0] = 0;
		json_array_foreach(v, i, e)
		{
			char tmp[256];

			off += (size_t)snprintf(buf + off, off < len ? len - off : 0, "%s%s",
						i ? "," : "", cell(e, tmp, sizeof(tmp)));
		}
		return buf[0] ? buf : "-";
	}
	return "?";
}

void ctl_emit_table(struct ctl_ctx *ctx, json_t *rows, const struct ctl_col *cols)
{
	size_t ncol = 0, i, c, w[32] = {0};
	json_t *row;
	char buf[1024];

	if (ctx->json) {
		char *s = json_dumps(rows, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

		printf("%s\n", s ? s : "[]");
		free(s);
		json_decref(rows);
		return;
	}
	while (cols[ncol].key && ncol < 32)
		ncol++;
	for (c = 0; c < ncol; c++)
		w[c] = strlen(cols[c].title);
	json_array_foreach(rows, i, row) for (c = 0; c < ncol; c++)
	{
		size_t l = strlen(cell(json_object_get(row, cols[c].key), buf, sizeof(buf)));

		if (l > w[c])
			w[c] = l;
	}
	for (c = 0; c < ncol; c++)
		printf("%-*s%s", c + 1 < ncol ? (int)w[c] : 0, cols[c].title,
		       c + 1 < ncol ? "  " : "\n");
	json_array_foreach(rows, i, row) for (c = 0; c < ncol; c++)
		printf("%-*s%s", c + 1 < ncol ? (int)w[c] : 0,
		       cell(json_object_get(row, cols[c].key), buf, sizeof(buf)),
		       c + 1 < ncol ? "  " : "\n");
	json_decref(rows);
}

void ctl_emit_object(struct ctl_ctx *ctx, json_t *obj, const struct ctl_col *cols)
{
	size_t w = 0;
	char buf[1024];

	if (ctx->json) {
		char *s = json_dumps(obj, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

		printf("%s\n", s ? s : "{}");
		free(s);
		json_decref(obj);
		return;
	}
	for (const struct ctl_col *c = cols; c->key; c++)
		if (strlen(c->title) > w)
			w = strlen(c->title);
	for (const struct ctl_col *c = cols; c->key; c++)
		printf("%-*s  %s\n", (int)w + 1, c->title,
		       cell(json_object_get(obj, c->key), buf, sizeof(buf)));
	json_decref(obj);
}

void ctl_cmd_usage(FILE *f, const struct ctl_object *obj, const struct ctl_cmd *cmd)
{
	fprintf(f, "Usage: ibvfctl [--json] %s %s%s%s\n       %s\n", obj->name, cmd->name,
		cmd->usage && *cmd->usage ? " " : "", cmd->usage ? cmd->usage : "", cmd->help);
}

int ctl_getopt(struct ctl_ctx *ctx, int argc, char **argv, const char *shortopts,
	       const struct option *longopts)
{
	struct option all[32];
	char sopts[64];
	size_t n = 0;
	int c;

	for (; longopts && longopts[n].name && n < 29; n++)
		all[n] = longopts[n];
	all[n++] = (struct option){"json", no_argument, NULL, 'j'};
	all[n++] = (struct option){"help", no_argument, NULL, 'h'};
	all[n] = (struct option){0};
	snprintf(sopts, sizeof(sopts), "+%shj", shortopts ? shortopts : "");
	for (;;) {
		opterr = 0;
		c = getopt_long(argc, argv, sopts, all, NULL);
		if (c != 'j')
			return c;
		ctx->json = true;
	}
}

void ctl_emit_stream(struct ctl_ctx *ctx, json_t *obj, const struct ctl_col *cols, bool *header)
{
	char buf[1024];
	size_t c;

	if (ctx->json) {
		char *s = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);

		printf("%s\n", s ? s : "{}");
		free(s);
	} else {
		/* column widths cannot depend on rows not seen yet: titles, min 8 */
		if (!*header) {
			for (c = 0; cols[c].key; c++)
				printf("%-*s%s", cols[c + 1].key ? 8 : 0, cols[c].title,
				       cols[c + 1].key ? "  " : "\n");
			*header = true;
		}
		for (c = 0; cols[c].key; c++)
			printf("%-*s%s", cols[c + 1].key ? 8 : 0,
			       cell(json_object_get(obj, cols[c].key), buf, sizeof(buf)),
			       cols[c + 1].key ? "  " : "\n");
	}
	fflush(stdout);
	json_decref(obj);
}

json_t *ctl_count_json(uint64_t v)
{
	char s[24];

	if (v <= INT64_MAX)
		return json_integer((json_int_t)v);
	snprintf(s, sizeof(s), "%llu", (unsigned long long)v);
	return json_string(s);
}
