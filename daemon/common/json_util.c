// SPDX-License-Identifier: MIT
#include "json_util.h"

#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "file_read.h"

int ibvf_json_err(const struct ibvf_jctx *c, const char *path, const char *key, const char *fmt,
		  ...)
{
	char msg[384], where[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(where, sizeof(where), "%s%s%s", path ? path : "",
		 (path && *path && key) ? "." : "", key ? key : "");
	/* the top level itself has no key path: "<file>: <msg>" */
	if (!where[0])
		return ibvf_errf(c->err, c->errlen, -EINVAL, "%s: %s", c->file, msg);
	return ibvf_errf(c->err, c->errlen, -EINVAL, "%s: %s: %s", c->file, where, msg);
}

int ibvf_json_check_keys(const struct ibvf_jctx *c, json_t *obj, const char *path,
			 const char *const *allowed)
{
	const char *key;
	json_t *v;

	if (!json_is_object(obj))
		return ibvf_json_err(c, path, NULL, "expected a JSON object");
	json_object_foreach(obj, key, v)
	{
		const char *const *a;

		(void)v;
		for (a = allowed; *a; a++)
			if (!strcmp(*a, key))
				break;
		if (!*a)
			return ibvf_json_err(c, path, key, "unknown key");
	}
	return 0;
}

int ibvf_json_object(const struct ibvf_jctx *c, json_t *obj, const char *path, const char *key,
		     json_t **out)
{
	json_t *v = json_object_get(obj, key);

	*out = NULL;
	if (!v)
		return 0;
	if (!json_is_object(v))
		return ibvf_json_err(c, path, key, "expected an object");
	*out = v;
	return 0;
}

int ibvf_json_string(const struct ibvf_jctx *c, json_t *obj, const char *path, const char *key,
		     char **out)
{
	json_t *v = json_object_get(obj, key);
	char *s;

	if (!v)
		return 0;
	if (!json_is_string(v))
		return ibvf_json_err(c, path, key, "expected a string");
	if (strlen(json_string_value(v)) != json_string_length(v))
		return ibvf_json_err(c, path, key, "string contains a NUL byte");
	s = strdup(json_string_value(v));
	if (!s)
		return ibvf_errf(c->err, c->errlen, -ENOMEM, "out of memory");
	free(*out);
	*out = s;
	return 0;
}

int ibvf_json_uint(const struct ibvf_jctx *c, json_t *obj, const char *path, const char *key,
		   uint64_t min, uint64_t max, uint64_t *out)
{
	json_t *v = json_object_get(obj, key);
	json_int_t i;

	if (!v)
		return 0;
	if (!json_is_integer(v))
		return ibvf_json_err(c, path, key, "expected an integer in %llu..%llu",
				     (unsigned long long)min, (unsigned long long)max);
	i = json_integer_value(v);
	if (i < 0 || (uint64_t)i < min || (uint64_t)i > max)
		return ibvf_json_err(c, path, key, "%lld is out of range %llu..%llu", (long long)i,
				     (unsigned long long)min, (unsigned long long)max);
	*out = (uint64_t)i;
	return 0;
}

int ibvf_json_bool(const struct ibvf_jctx *c, json_t *obj, const char *path, const char *key,
		   bool *out)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return ibvf_json_err(c, path, key, "expected true or false");
	*out = json_is_true(v);
	return 0;
}

json_t *ibvf_json_loadb(const char *file, const char *text, size_t len, char *err, size_t errlen)
{
	json_error_t je;
	json_t *root;

	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!root) {
		/*
		 * jansson quotes the offending token ("invalid token near
		 * 'hunter2'"); in a config that token may be a secret, so keep
		 * only the reason: file, line and column locate it.
		 */
		char *near = strstr(je.text, " near '");

		if (near)
			*near = 0;
		ibvf_errf(err, errlen, -EINVAL, "%s:%d:%d: %s", file ? file : "<json>", je.line,
			  je.column, je.text);
		return NULL;
	}
	return root;
}

json_t *ibvf_json_load(const char *file, const char *text, char *err, size_t errlen)
{
	json_t *root;
	size_t len;
	char *buf;

	if (text)
		return ibvf_json_loadb(file, text, strlen(text), err, errlen);
	/* never json_load_file(): it would block in open(2) on a FIFO */
	if (ibvf_file_read_regular(file, IBVF_JSON_FILE_MAX, 0, &buf, &len, NULL, err, errlen))
		return NULL;
	root = ibvf_json_loadb(file, buf, len, err, errlen);
	/* a config file may hold an inline secret */
	ibvf_file_wipe_free(buf, len);
	return root;
}

/* jansson's free: wipe the block first (its size is what malloc gave) */
static void wiping_free(void *p)
{
	if (p) {
		explicit_bzero(p, malloc_usable_size(p));
		free(p);
	}
}

void ibvf_json_wipe_on_free(void)
{
	json_set_alloc_funcs(malloc, wiping_free);
}
