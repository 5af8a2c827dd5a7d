/* SPDX-License-Identifier: MIT */
/*
 * Typed, range-checked reads of JSON config objects (jansson), with errors
 * that name the file and the key path ("ibvfd.json: pool.ranges[1].start:
 * ..."). Used by the daemon config and by SM backends for their own config.
 * All functions return 0 or -EINVAL with the reason in @err.
 */
#ifndef IBVF_JSON_UTIL_H
#define IBVF_JSON_UTIL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/** Context of one parse: where the JSON came from, for error messages. */
struct ibvf_jctx {
	const char *file; /* file name or "<env>", "<backend config>" */
	char *err;
	size_t errlen;
};

/**
 * ibvf_json_check_keys() - fail on any key of @obj not in the NULL-terminated
 * @allowed list (typos must not be silently ignored). @path names @obj
 * ("" for the top level).
 */
int ibvf_json_check_keys(const struct ibvf_jctx *c, json_t *obj, const char *path,
			 const char *const *allowed);

/** ibvf_json_object() - *out = @obj[key] if it is an object; absent → *out = NULL, 0. */
int ibvf_json_object(const struct ibvf_jctx *c, json_t *obj, const char *path, const char *key,
		     json_t **out);

/**
 * ibvf_json_string() - copy @obj[key] (must be a string) into a new malloc'd
 * *out, freeing the previous value; absent → unchanged, 0.
 */
int ibvf_json_string(const struct ibvf_jctx *c, json_t *obj, const char *path, const char *key,
		     char **out);

/** ibvf_json_uint() - @obj[key] must be an integer in [@min, @max]; absent → unchanged. */
int ibvf_json_uint(const struct ibvf_jctx *c, json_t *obj, const char *path, const char *key,
		   uint64_t min, uint64_t max, uint64_t *out);

/** ibvf_json_bool() - @obj[key] must be true/false; absent → unchanged. */
int ibvf_json_bool(const struct ibvf_jctx *c, json_t *obj, const char *path, const char *key,
		   bool *out);

/** ibvf_json_err() - format "<file>: <path>.<key>: <msg>" into the context's buffer. */
int ibvf_json_err(const struct ibvf_jctx *c, const char *path, const char *key, const char *fmt,
		  ...) __attribute__((format(printf, 4, 5)));

/* The largest JSON file ibvf reads (ibvfd.json, a CNI cache entry): 4 MiB. */
#define IBVF_JSON_FILE_MAX (4u << 20)

/**
 * ibvf_json_load() - parse JSON text (@text) or a file (@text NULL, @file
 * read through ibvf_file_read_regular(): a regular file of at most
 * IBVF_JSON_FILE_MAX bytes, never a FIFO or device); duplicate keys are
 * rejected; an error names file, line and column but never quotes the
 * offending text (it may be a secret).
 * Return: the new reference, or NULL with the reason in @err.
 */
json_t *ibvf_json_load(const char *file, const char *text, char *err, size_t errlen);

/**
 * ibvf_json_loadb() - as ibvf_json_load() for @len bytes of @text (which may
 * hold a NUL: it is then an error, never a silent end of the text); @file
 * names the source in messages.
 */
json_t *ibvf_json_loadb(const char *file, const char *text, size_t len, char *err, size_t errlen);

/**
 * ibvf_json_wipe_on_free() - make jansson wipe every block it frees, for
 * the whole process: a secret passes through JSON strings, dumps and
 * parse buffers (sm.config, UFM replies) and must not outlive them in freed
 * heap memory. Call once in main() before the first JSON value exists.
 */
void ibvf_json_wipe_on_free(void);

#endif /* IBVF_JSON_UTIL_H */
