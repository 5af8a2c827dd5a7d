/* SPDX-License-Identifier: MIT */
/*
 * A model of how OpenSM 3.3.23 reads partitions.conf byte by byte: its line
 * buffer (4096 bytes, filled by fgets(), never cleared between lines), the
 * NUL bytes its tokenizer writes into that buffer, and its pointer
 * arithmetic, which after some inputs ("mgid=GID;", a ';' with nothing
 * before it) steps past the end of the current line and goes on reading what
 * earlier, longer lines left in the buffer.
 *
 * partition_conf.c's parser gives the partitions and members and the
 * messages; this model gives OpenSM's verdict on the whole file, so that a
 * file ibvf accepts is a file OpenSM accepts and the other way round. It
 * reports bytes that no line ever wrote (the buffer's first use: what is
 * there is OpenSM's stack, undefined) as PC_OSM_UNDEFINED.
 *
 * Source of the rules: opensm/osm_prtn_config.c of linux-rdma/opensm 3.3.23
 * (osm_prtn_config_parse_file(), parse_part_conf(), parse_name_token(),
 * parse_mgroup_flags(), mgroup_create(), partition_create(),
 * partition_add_port()); checked against the real OpenSM by
 * tests/lab/fabric/test-partition-conformance.sh.
 */
#ifndef IBVF_PARTITION_OSM_H
#define IBVF_PARTITION_OSM_H

#include <stdbool.h>
#include <stddef.h>

/* OpenSM's line buffer: char line[4096], read with fgets(line, 4095, f). */
#define PC_OSM_BUF 4096

enum pc_osm_verdict {
	PC_OSM_ACCEPTS = 0, /* OpenSM programs the file */
	PC_OSM_REJECTS,	    /* "Partition configuration in error": Default only */
	PC_OSM_CRASHES,	    /* a NULL pointer reaches libc (bare "mgid") */
	PC_OSM_UNDEFINED,   /* the result depends on bytes no line wrote */
};

/**
 * One place where OpenSM reads past the end of the current line, or parses
 * text of the line as a new definition where the text shows none (after an
 * mgid entry whose GID is not multicast: @from_line == @line).
 */
struct pc_osm_overread {
	unsigned line;	    /* the line being read (1-based) */
	unsigned from_line; /* the line that left the bytes there; 0: none did */
	bool parsed;	    /* the leftover was parsed as partition text */
	char text[48];	    /* the leftover text that was parsed, printable */
};

#define PC_OSM_MAX_OVERREADS 8

struct pc_osm_result {
	enum pc_osm_verdict verdict;
	unsigned line; /* of the error (REJECTS, CRASHES) */
	char why[200]; /* OpenSM's PARSE ERROR text, with the leftover */
	struct pc_osm_overread over[PC_OSM_MAX_OVERREADS];
	size_t n_over;	     /* recorded (at most PC_OSM_MAX_OVERREADS) */
	unsigned undef_line; /* first line that read unwritten bytes; 0: none */
	unsigned last_over;  /* last line OpenSM read past the end of; 0: none */
};

/**
 * pc_osm_read() - run OpenSM 3.3.23's reader over @len bytes of @text.
 * @r: the verdict, the line and reason of an error, and the over-reads.
 * Pure: no I/O, no allocation. Undefined bytes (never written by a line)
 * are read as NUL and make the verdict PC_OSM_UNDEFINED unless an error
 * comes first.
 */
void pc_osm_read(const char *text, size_t len, struct pc_osm_result *r);

#endif /* IBVF_PARTITION_OSM_H */
