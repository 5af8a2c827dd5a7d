// SPDX-License-Identifier: MIT
/* ibvfctl doctor: the TOML subset reader (toml_scan.h says why it exists). */
#include "toml_scan.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Copy @s..@e without quotes and blanks into @out (header or key names). */
static void squeeze(const char *s, const char *e, char *out, size_t len)
{
	size_t n = 0;

	for (; s < e && n + 1 < len; s++)
		if (*s != '"' && *s != '\'' && !isspace((unsigned char)*s))
			out[n++] = *s;
	out[n] = '\0';
}

/* A basic ("...") or literal ('...') string at @p into @out; returns the end. */
static const char *read_string(const char *p, char *out, size_t len)
{
	char q = *p++;
	size_t n = 0;

	for (; *p && *p != q && *p != '\n'; p++) {
		char c = *p;

		if (q == '"' && c == '\\' && p[1]) {
			c = *++p;
			c = c == 'n' ? '\n' : c == 't' ? '\t' : c;
		}
		if (n + 1 < len)
			out[n++] = c;
	}
	out[n] = '\0';
	return *p == q ? p + 1 : p;
}

/* An array from '[' at @p to its matching ']' (across lines) into @out. */
static const char *read_array(const char *p, char *out, size_t len)
{
	size_t n = 0;
	int depth = 0;
	char q = 0;

	for (; *p; p++) {
		if (q) {
			q = *p == q ? 0 : q;
		} else if (*p == '"' || *p == '\'') {
			q = *p;
		} else if (*p == '#') {
			while (p[1] && p[1] != '\n')
				p++;
			continue;
		} else if (*p == '[') {
			depth++;
		} else if (*p == ']' && --depth == 0) {
			if (n + 1 < len)
				out[n++] = *p;
			p++;
			break;
		}
		if (n + 1 < len)
			out[n++] = *p;
	}
	out[n] = '\0';
	return p;
}

int dr_toml_each(const char *text,
		 int (*cb)(void *arg, const char *table, const char *key, const char *value),
		 void *arg)
{
	char table[512] = "", key[256], *value;
	const char *p = text;
	int ret = 0;

	value = malloc(8192);
	if (!value)
		return -1;
	while (p && *p && !ret) {
		const char *eol = strchr(p, '\n'), *eq, *k;

		if (!eol)
			eol = p + strlen(p);
		while (p < eol && isspace((unsigned char)*p))
			p++;
		if (*p == '[') {
			const char *s = p + (p[1] == '[' ? 2 : 1),
				   *e = memchr(s, ']', (size_t)(eol - s));

			if (e)
				squeeze(s, e, table, sizeof(table));
		} else if (*p != '#' && (eq = memchr(p, '=', (size_t)(eol - p)))) {
			squeeze(p, eq, key, sizeof(key));
			for (k = eq + 1; k < eol && isspace((unsigned char)*k); k++)
				;
			if (*k == '"' || *k == '\'') {
				read_string(k, value, 8192);
			} else if (*k == '[') {
				const char *end = read_array(k, value, 8192);

				eol = strchr(end, '\n');
				if (!eol)
					eol = end + strlen(end);
			} else {
				const char *e = k;
				size_t n;

				while (e < eol && *e != '#')
					e++;
				while (e > k && isspace((unsigned char)e[-1]))
					e--;
				n = (size_t)(e - k) < 8191 ? (size_t)(e - k) : 8191;
				memcpy(value, k, n);
				value[n] = '\0';
			}
			if (key[0])
				ret = cb(arg, table, key, value);
		}
		p = *eol ? eol + 1 : NULL;
	}
	free(value);
	return ret;
}
