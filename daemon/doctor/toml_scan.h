/* SPDX-License-Identifier: MIT */
/*
 * A reader for the part of TOML (https://toml.io/en/v1.0.0) that container
 * runtimes' config files use: [table] and [[array]] headers, key = value
 * with basic/literal strings, booleans, integers and (multi-line) arrays,
 * comments. Written by hand because Debian 12 ships no C TOML library;
 * it only reads, and what it does not understand it skips.
 */
#ifndef IBVF_TOML_SCAN_H
#define IBVF_TOML_SCAN_H

#include <stddef.h>

/**
 * dr_toml_each() - call @cb for every key = value of @text, in order.
 * @table: the enclosing header with quotes and blanks removed
 * ("plugins.io.containerd.grpc.v1.cri"; "" before the first header); @key
 * unquoted; @value a string's content unescaped (\" \\ \n \t), else the raw
 * text (an array's whole text, brackets included). A non-zero return of @cb
 * stops the walk and is returned.
 */
int dr_toml_each(const char *text,
		 int (*cb)(void *arg, const char *table, const char *key, const char *value),
		 void *arg);

#endif /* IBVF_TOML_SCAN_H */
