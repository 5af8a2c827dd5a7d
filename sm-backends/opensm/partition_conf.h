/* SPDX-License-Identifier: MIT */
/*
 * OpenSM partition configuration (partitions.conf): a parser of OpenSM's
 * grammar that accepts and rejects what OpenSM 3.3.23 does, the split of the
 * file into the administrator's text and the section ibvf owns, and the
 * renderer of that section.
 *
 * Grammar and semantics: man opensm(8), PARTITION CONFIGURATION, and
 * opensm/osm_prtn_config.c (linux-rdma/opensm 3.3.23, unchanged at 3.3.24+).
 * docs/opensm.md explains the managed section and the merge rule.
 *
 * Why the parser matters: on ANY parse error, and on a file without a single
 * definition, OpenSM logs "Partition configuration in error; retrying with
 * default config" and programs `Default=0x7fff : ALL=full` only, removing
 * every other P_Key from the fabric. A file this parser accepts must be a
 * file OpenSM accepts, and the other way round. Where OpenSM's reader runs
 * past the end of a line (after "mgid=...;" and after a ';' with nothing
 * before it on its line) the verdict is that of a model of OpenSM's line
 * buffer (partition_osm.h): refused when OpenSM rejects the file, a warning
 * when it reads only white space there or bytes no line wrote (undefined).
 *
 * Positions are 1-based line and byte column. GUIDs are host-order u64,
 * P_Keys host-order u16 with the 15-bit key (membership bit clear).
 */
#ifndef IBVF_PARTITION_CONF_H
#define IBVF_PARTITION_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* OpenSM reads the file with fgets() into a 4096-byte buffer of which it
 * passes 4095 bytes: a line longer than 4094 bytes is cut into two "lines". */
#define PC_LINE_MAX 4094

/* The marker lines around the section ibvf owns (whole lines, exact). */
#define PC_BEGIN_MARKER "# BEGIN ibvf managed partitions: do not edit (ibvfd rewrites up to END)"
#define PC_END_MARKER	"# END ibvf managed partitions"

/* Name of every partition definition ibvf writes: "ibvf_0x0a10". */
#define PC_NAME_PREFIX "ibvf_"

/* Members per rendered line (keeps lines far below PC_LINE_MAX). */
#define PC_MEMBERS_PER_LINE 4

/** Membership in a definition (OpenSM: `=full`, `=limited`, `=both`). */
enum pc_membership {
	PC_LIMITED = 0,
	PC_FULL = 1,
	PC_BOTH = 2, /* full and limited with allow_both_pkeys, else full */
};

/** What a port specifier names. */
enum pc_port_kind {
	PC_PORT_GUID = 0,
	PC_PORT_ALL, /* every end port */
	PC_PORT_ALL_CAS,
	PC_PORT_ALL_SWITCHES,
	PC_PORT_ALL_ROUTERS,
	PC_PORT_SELF, /* the SM's own port */
};

struct pc_pos {
	unsigned line;
	unsigned col;
};

/** One port specifier of a definition. */
struct pc_port {
	enum pc_port_kind kind;
	uint64_t guid;		       /* PC_PORT_GUID only */
	enum pc_membership membership; /* resolved: explicit, or the defmember */
	bool explicit_membership;      /* "=..." was given */
	struct pc_pos pos;
};

/** One partition definition ("Name=PKey,flags : members ;"). */
struct pc_partition {
	char *name;    /* "" when omitted */
	bool has_pkey; /* false: OpenSM generates a PKey */
	uint16_t pkey; /* 15-bit key (only when has_pkey) */
	bool ipoib;
	bool indx0;
	enum pc_membership defmember; /* default LIMITED */
	int mtu, rate, sl;	      /* -1 when not given */
	unsigned scope_mask;	      /* bit n: scope=n given */
	struct pc_port *ports;
	size_t n_ports;
	size_t n_mgroups;   /* "mgid=" entries */
	bool terminated;    /* ended by ';' (OpenSM accepts EOF too) */
	struct pc_pos pos;  /* first byte of the definition */
	unsigned last_line; /* line of its ';' (or last content line) */
};

/** A warning: text OpenSM accepts but ignores or reads unexpectedly. */
struct pc_diag {
	struct pc_pos pos;
	char msg[200];
};

struct pc_file {
	struct pc_partition *parts;
	size_t n_parts;
	struct pc_diag *warnings;
	size_t n_warnings;
	unsigned n_lines;
	/* OpenSM reads past the end of this line and parses what an earlier line
	 * left in its buffer as partition text (0: never); the file parses, but
	 * what it means is not in @parts: pc_doc_load() refuses to edit it */
	unsigned leftover_line, leftover_from;
	char leftover[48];
	/* the last line OpenSM reads past the end of (0: none): what it finds
	 * there depends on the lines before it (pc_doc_load()) */
	unsigned overread_last;
};

/**
 * pc_parse() - parse the text of a partition file.
 * @text, @len: the file's bytes (need not be NUL-terminated).
 * @name:       file name for messages.
 * @out:        the parse; free with pc_file_free().
 *
 * Return: 0; -EINVAL with "@name:LINE[:COL]: reason" in @err when OpenSM
 * 3.3.23 rejects the file (or crashes on it), including a file without any
 * definition; -ENOMEM. Numbers are read as OpenSM reads them (strtoul():
 * a PKey keeps its low 16 bits, a negative GUID wraps; with a warning).
 */
int pc_parse(const char *text, size_t len, const char *name, struct pc_file **out, char *err,
	     size_t errlen);

/** pc_file_free() - free a parse; NULL is a no-op. */
void pc_file_free(struct pc_file *f);

/* ------------------------------------------------------- managed model -- */

/** One GUID ibvf made a member of a PKey. */
struct pc_member {
	uint64_t guid;
	bool full;   /* full (P_Key bit 15 set) or limited */
	bool index0; /* rendered in a definition with indx0 */
};

/** Properties ibvf gives a partition it creates (not one the admin defines). */
struct pc_props {
	bool ipoib;
	int mtu, rate, sl; /* -1: leave OpenSM's default */
};

/** The members ibvf manages in one PKey, sorted by GUID. */
struct pc_mpkey {
	uint16_t pkey; /* 15-bit */
	struct pc_props props;
	struct pc_member *members;
	size_t n, cap;
};

/** Everything in the managed section, sorted by PKey. */
struct pc_managed {
	struct pc_mpkey *pkeys;
	size_t n, cap;
};

/** pc_managed_free() - free the contents (not @m itself). */
void pc_managed_free(struct pc_managed *m);

/** pc_managed_copy() - deep copy @src into @dst (which is overwritten). */
int pc_managed_copy(struct pc_managed *dst, const struct pc_managed *src);

/** pc_managed_find() - the managed PKey @pkey, or NULL. */
struct pc_mpkey *pc_managed_find(const struct pc_managed *m, uint16_t pkey);

/** pc_mpkey_find() - the member @guid of @p, or NULL. */
struct pc_member *pc_mpkey_find(const struct pc_mpkey *p, uint64_t guid);

/**
 * pc_managed_add() - make @n members of @pkey, creating the PKey with
 * @props when it is new (an existing PKey keeps its properties). A member
 * already there takes the new membership and index0.
 * @changed: incremented by the number of members added or altered.
 * Return: 0 or -ENOMEM.
 */
int pc_managed_add(struct pc_managed *m, uint16_t pkey, const struct pc_props *props,
		   const struct pc_member *members, size_t n, size_t *changed);

/**
 * pc_managed_remove() - remove @guids from @pkey; absent GUIDs are fine.
 * A PKey left without members is dropped.
 * @changed: incremented by the number of members removed.
 * Return: 0 or -ENOMEM.
 */
int pc_managed_remove(struct pc_managed *m, uint16_t pkey, const uint64_t *guids, size_t n,
		      size_t *changed);

/** pc_managed_count() - total members over all PKeys. */
size_t pc_managed_count(const struct pc_managed *m);

/* -------------------------------------------------------------- document -- */

/**
 * struct pc_doc - a partition file split into the administrator's text and
 * ibvf's section.
 * @text/@len:      the whole file.
 * @head_len:       admin bytes before the BEGIN marker (all of them when
 *                  there is no section).
 * @tail_off:       offset of the admin bytes after the END marker line
 *                  (@len when there is no section).
 * @has_section:    the markers were found.
 * @file:           the parse of the whole file.
 * @admin:          indexes into @file->parts of the admin's definitions.
 * @managed:        the members the section holds.
 * @admin_pkeys:    bit k set: an admin definition has PKey k (so that
 *                  pc_admin_defines() is O(1) with 10^5 definitions).
 */
struct pc_doc {
	char *text;
	size_t len;
	size_t head_len;
	size_t tail_off;
	bool has_section;
	unsigned begin_line, end_line;
	struct pc_file *file;
	size_t *admin;
	size_t n_admin;
	struct pc_managed managed;
	uint64_t admin_pkeys[0x8000 / 64];
};

/**
 * pc_doc_load() - parse @text and split it.
 *
 * Refused (-EINVAL, with line and column): anything pc_parse() refuses; a
 * marker without its partner, a repeated or misordered marker; a definition
 * that crosses a marker (e.g. an admin definition not terminated by ';'
 * before the section); a managed section that is not in ibvf's form
 * (explicit PKey, GUID members with =full or =limited, no mgid, flags only
 * ipoib/indx0/mtu/rate/sl); an admin part without any definition (writing
 * only ibvf's partitions would turn OpenSM's Default into ALL=limited); a
 * file OpenSM reads leftover bytes of its line buffer of as partition text
 * (pc_file.leftover_line: its partitions are not all known).
 *
 * Return: 0, -EINVAL, -ENOMEM. Free with pc_doc_free().
 */
int pc_doc_load(const char *text, size_t len, const char *name, struct pc_doc **out, char *err,
		size_t errlen);

/** pc_doc_free() - NULL is a no-op. */
void pc_doc_free(struct pc_doc *d);

/** pc_admin_defines() - does an admin definition have PKey @pkey? */
bool pc_admin_defines(const struct pc_doc *d, uint16_t pkey);

/**
 * pc_admin_find_guid() - the admin's explicit port specifier of @guid in a
 * definition of @pkey (the last one, as OpenSM applies them in order), or NULL.
 */
const struct pc_port *pc_admin_find_guid(const struct pc_doc *d, uint16_t pkey, uint64_t guid);

/**
 * pc_admin_has_keywords() - does a definition of @pkey use ALL, ALL_CAS,
 * ALL_SWITCHES, ALL_ROUTERS or SELF (membership ibvf cannot predict)?
 */
bool pc_admin_has_keywords(const struct pc_doc *d, uint16_t pkey);

/**
 * pc_render() - the whole new file: the admin text byte for byte with the
 * section for @m in place of the old one (appended after a newline when the
 * file had none). For a PKey the admin defines too, ibvf's definition
 * carries no partition properties (only indx0 for index0 members), so
 * OpenSM merges it into the admin's partition (man opensm: "If PKey is
 * repeated then those partition configurations will be merged").
 * @out: malloc'd, @out_len bytes (also NUL-terminated).
 * Return: 0 or -ENOMEM.
 */
int pc_render(const struct pc_doc *d, const struct pc_managed *m, char **out, size_t *out_len,
	      char *err, size_t errlen);

/**
 * pc_check_rendered() - the install gate: parse @text with the same parser
 * and refuse it unless it parses, its admin bytes equal @old's (plus a final
 * newline when @old's lacked one), and its section holds exactly @want.
 * Return: 0, -EINVAL (with the reason), -ENOMEM.
 */
int pc_check_rendered(const struct pc_doc *old, const struct pc_managed *want, const char *text,
		      size_t len, const char *name, char *err, size_t errlen);

/** pc_membership_name() - "limited", "full", "both". */
const char *pc_membership_name(enum pc_membership m);

#endif /* IBVF_PARTITION_CONF_H */
