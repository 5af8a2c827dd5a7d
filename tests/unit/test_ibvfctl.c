// SPDX-License-Identifier: MIT
/*
 * End-to-end tests of the built ibvfctl binary (path in $IBVFCTL, set by
 * meson): the pool commands on a real store, table output against --json
 * (the same data), exit codes 0/1/2/3, usage on unknown objects/commands,
 * and that read-only commands leave the store untouched.
 */
#include <errno.h>
#include <jansson.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "testutil.h"

#define G1 "02:00:00:00:00:00:00:01"
#define G2 "02:00:00:00:00:00:00:02"
#define G3 "02:00:00:00:00:00:00:03"

struct fx {
	const char *bin;
	char *dir, *cfg, *state, *db, *sock;
	struct tu_result r;
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	if (!f)
		return -1;
	f->bin = tu_binary("IBVFCTL");
	if (!f->bin) {
		print_error("IBVFCTL is not set to the built ibvfctl\n");
		return -1;
	}
	f->dir = tu_mkdtemp("ctl");
	if (!f->dir)
		return -1;
	f->cfg = tu_path(f->dir, "ibvfd.json");
	f->state = tu_path(f->dir, "state");
	f->db = tu_path(f->state, "pool.db");
	f->sock = tu_path(f->dir, "ibvfd.sock");
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	tu_result_free(&f->r);
	free(f->cfg);
	free(f->state);
	free(f->db);
	free(f->sock);
	tu_rmrf(f->dir);
	free(f);
	return 0;
}

/* Write the config: 16 GUIDs from G1, @quarantine_s, @extra JSON members. */
static void write_cfg(struct fx *f, const char *start, const char *end, int quarantine_s)
{
	char json[1024];

	/* a socket of this test: nothing listens there unless the test does */
	snprintf(json, sizeof(json),
		 "{\"state_dir\": \"%s\", \"pool\": {\"ranges\": [{\"start\": \"%s\", "
		 "\"end\": \"%s\"}], \"quarantine_s\": %d}, \"api\": {\"socket\": \"%s\"}}",
		 f->state, start, end, quarantine_s, f->sock);
	assert_int_equal(tu_write_str(f->cfg, json), 0);
}

/* Run ibvfctl -c <cfg> ARGS... (NULL-terminated); returns the exit code. */
static int ctl_env(struct fx *f, const char *const *env, ...)
{
	const char *argv[32];
	int n = 0;
	va_list ap;

	argv[n++] = f->bin;
	argv[n++] = "-c";
	argv[n++] = f->cfg;
	va_start(ap, env);
	for (char *a; n < 31 && (a = va_arg(ap, char *));)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	tu_result_free(&f->r);
	assert_int_equal(tu_run(&f->r, env, 60, argv), 0);
	return f->r.status;
}

#define ctl(f, ...) ctl_env((f), NULL, __VA_ARGS__, NULL)

/* Run ibvfctl with exactly these arguments (no -c). */
static int ctl_raw(struct fx *f, ...)
{
	const char *argv[32];
	int n = 0;
	va_list ap;

	argv[n++] = f->bin;
	va_start(ap, f);
	for (char *a; n < 31 && (a = va_arg(ap, char *));)
		argv[n++] = a;
	va_end(ap);
	argv[n] = NULL;
	tu_result_free(&f->r);
	assert_int_equal(tu_run(&f->r, NULL, 60, argv), 0);
	return f->r.status;
}

static void expect(struct fx *f, int code)
{
	if (f->r.status != code)
		print_error("exit %d, want %d\nstdout:\n%s\nstderr:\n%s\n", f->r.status, code,
			    f->r.out, f->r.err);
	assert_int_equal(f->r.status, code);
}

static json_t *out_json(struct fx *f)
{
	json_error_t je;
	json_t *j = json_loads(f->r.out, 0, &je);

	if (!j)
		print_error("stdout is not JSON (%s):\n%s\n", je.text, f->r.out);
	assert_non_null(j);
	return j;
}

/* How the table print path renders one JSON value (ctl_output.c cell()). */
static void render(json_t *v, char *buf, size_t len)
{
	size_t i, off = 0;
	json_t *e;

	if (!v || json_is_null(v))
		snprintf(buf, len, "-");
	else if (json_is_string(v))
		snprintf(buf, len, "%s", *json_string_value(v) ? json_string_value(v) : "-");
	else if (json_is_integer(v))
		snprintf(buf, len, "%lld", (long long)json_integer_value(v));
	else if (json_is_array(v)) {
		buf[0] = 0;
		json_array_foreach(v, i, e)
		{
			char tmp[256];

			render(e, tmp, sizeof(tmp));
			off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? "," : "", tmp);
		}
		if (!buf[0])
			snprintf(buf, len, "-");
	} else
		snprintf(buf, len, "?");
}

struct col {
	const char *key, *title;
};

/* "Title:   value" lines of an object table match the JSON object's fields. */
static void object_matches(const char *table, json_t *obj, const struct col *cols)
{
	for (const struct col *c = cols; c->key; c++) {
		const char *line = strstr(table, c->title);
		char want[1024], got[1024];
		const char *v, *eol;

		if (!line)
			print_error("no '%s' line in\n%s\n", c->title, table);
		assert_non_null(line);
		v = line + strlen(c->title);
		while (*v == ' ')
			v++;
		eol = strchr(v, '\n');
		snprintf(got, sizeof(got), "%.*s", (int)(eol ? eol - v : (long)strlen(v)), v);
		render(json_object_get(obj, c->key), want, sizeof(want));
		if (strcmp(got, want))
			print_error("%s table '%s' json '%s'\n", c->title, got, want);
		assert_string_equal(got, want);
	}
}

/* A list table (header + one row per line) matches the JSON array, cell by cell. */
static void rows_match(const char *table, json_t *arr, const struct col *cols)
{
	char *copy = strdup(table), *save = NULL, *line;
	size_t row = 0, ncols = 0;

	while (cols[ncols].key)
		ncols++;
	line = strtok_r(copy, "\n", &save);
	assert_non_null(line);
	for (size_t c = 0; c < ncols; c++)
		assert_contains(line, cols[c].title);
	while ((line = strtok_r(NULL, "\n", &save))) {
		json_t *o = json_array_get(arr, row++);
		char *cell_save = NULL, *cell = strtok_r(line, " ", &cell_save);

		assert_non_null(o);
		for (size_t c = 0; c < ncols; c++) {
			char want[1024];

			render(json_object_get(o, cols[c].key), want, sizeof(want));
			assert_non_null(cell);
			if (strcmp(cell, want))
				print_error("row %zu %s: table '%s' json '%s'\n", row,
					    cols[c].title, cell, want);
			assert_string_equal(cell, want);
			cell = strtok_r(NULL, " ", &cell_save);
		}
	}
	assert_int_equal(row, json_array_size(arr));
	free(copy);
}

static const struct col status_cols[] = {
	{"store", "Store:"},
	{"ranges", "Ranges:"},
	{"total", "Total:"},
	{"allocated", "Allocated:"},
	{"quarantined", "Quarantined:"},
	{"free", "Free:"},
	{"outside_ranges", "Outside ranges:"},
	{"quarantine_s", "Quarantine (s):"},
	{0},
};

static const struct col alloc_cols[] = {
	{"guid", "GUID:"},
	{"state", "State:"},
	{"container_id", "Container:"},
	{"ifname", "Interface:"},
	{"pod", "Pod:"},
	{"pod_uid", "Pod UID:"},
	{"network", "Network:"},
	{"pf", "PF:"},
	{"vf", "VF:"},
	{"pci", "PCI:"},
	{"pkeys", "PKeys:"},
	{"created", "Created:"},
	{"updated", "Updated:"},
	{"released", "Released:"},
	{0},
};

static const struct col list_cols[] = {
	{"guid", "GUID"},
	{"state", "STATE"},
	{"owner_short", "CONTAINER"},
	{"ifname", "IF"},
	{"pod", "POD"},
	{"pf", "PF"},
	{"vf", "VF"},
	{"pkeys", "PKEYS"},
	{"updated", "UPDATED"},
	{0},
};

static const struct col audit_cols[] = {
	{"severity", "SEVERITY"},
	{"kind", "KIND"},
	{"guid", "GUID"},
	{0},
};

/* --------------------------------------------------------------- tests -- */

static void test_no_store_yet(void **state)
{
	struct fx *f = *state;

	write_cfg(f, G1, "02:00:00:00:00:00:00:10", 60);
	/* read-only commands never create a store */
	for (const char *const *c = (const char *const[]){"status", "list", "audit", NULL}; *c;
	     c++) {
		assert_int_equal(ctl(f, "pool", (char *)*c), 3);
		assert_contains(f->r.err, "no GUID pool store at ");
		assert_contains(f->r.err, f->db);
	}
	assert_int_equal(ctl(f, "pool", "show", G1), 3);
	assert_int_equal(access(f->state, F_OK), -1);
}

static void test_allocate_status_list_show(void **state)
{
	struct fx *f = *state;
	json_t *j, *j2;
	struct stat st;

	write_cfg(f, G1, "02:00:00:00:00:00:00:10", 60);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "ctr-aaaa1111bbbb2222cccc",
			     "--ifname", "net1", "--pod", "ns1/pod1", "--pod-uid", "U-1",
			     "--network", "ibnet", "--pkey", "0x8001", "--pkey", "2"),
			 0);
	expect(f, 0);
	assert_contains(f->r.out, "GUID:");
	assert_contains(f->r.out, G1);
	/* the first write created a private state dir */
	assert_int_equal(stat(f->state, &st), 0);
	assert_int_equal(st.st_mode & 07777, 0700);

	/* --json before the object or after the command: the same */
	assert_int_equal(ctl(f, "--json", "pool", "allocate", "--owner", "ctr-2", "--pod", "p2"),
			 0);
	j = out_json(f);
	assert_string_equal(json_string_value(json_object_get(j, "guid")), G2);
	assert_string_equal(json_string_value(json_object_get(j, "state")), "allocated");
	assert_string_equal(json_string_value(json_object_get(j, "container_id")), "ctr-2");
	assert_string_equal(json_string_value(json_object_get(j, "ifname")), "net1");
	assert_string_equal(json_string_value(json_object_get(j, "pod")), "p2");
	assert_true(json_is_null(json_object_get(j, "released")));
	json_decref(j);

	/* show: table and JSON hold the same data */
	assert_int_equal(ctl(f, "pool", "show", G1), 0);
	{
		char *table = strdup(f->r.out);

		assert_int_equal(ctl(f, "pool", "show", "--json", "0x0200000000000001"), 0);
		j = out_json(f);
		assert_string_equal(json_string_value(json_object_get(j, "pod")), "ns1/pod1");
		assert_string_equal(json_string_value(json_object_get(j, "pod_uid")), "U-1");
		assert_string_equal(json_string_value(json_object_get(j, "network")), "ibnet");
		assert_int_equal(json_array_size(json_object_get(j, "pkeys")), 2);
		assert_string_equal(
			json_string_value(json_array_get(json_object_get(j, "pkeys"), 1)),
			"0x0002");
		object_matches(table, j, alloc_cols);
		json_decref(j);
		free(table);
	}

	/* status */
	assert_int_equal(ctl(f, "pool", "status"), 0);
	{
		char *table = strdup(f->r.out);

		assert_int_equal(ctl(f, "--json", "pool", "status"), 0);
		j = out_json(f);
		assert_int_equal(json_integer_value(json_object_get(j, "total")), 16);
		assert_int_equal(json_integer_value(json_object_get(j, "allocated")), 2);
		assert_int_equal(json_integer_value(json_object_get(j, "quarantined")), 0);
		assert_int_equal(json_integer_value(json_object_get(j, "free")), 14);
		assert_int_equal(json_integer_value(json_object_get(j, "outside_ranges")), 0);
		assert_string_equal(json_string_value(json_object_get(j, "store")), f->db);
		assert_string_equal(
			json_string_value(json_array_get(json_object_get(j, "ranges"), 0)),
			G1 "-02:00:00:00:00:00:00:10");
		object_matches(table, j, status_cols);
		json_decref(j);
		free(table);
	}
	/* the object alone runs its default command, status */
	assert_int_equal(ctl(f, "--json", "pool"), 0);
	j = out_json(f);
	assert_int_equal(ctl(f, "pool", "--json"), 0);
	j2 = out_json(f);
	assert_true(json_equal(j, j2));
	assert_int_equal(json_integer_value(json_object_get(j, "allocated")), 2);
	json_decref(j);
	json_decref(j2);

	/* list */
	assert_int_equal(ctl(f, "pool", "list"), 0);
	{
		char *table = strdup(f->r.out);

		assert_int_equal(ctl(f, "pool", "list", "--json"), 0);
		j = out_json(f);
		assert_int_equal(json_array_size(j), 2);
		assert_string_equal(
			json_string_value(json_object_get(json_array_get(j, 0), "owner_short")),
			"ctr-aaaa1111");
		rows_match(table, j, list_cols);
		json_decref(j);
		free(table);
	}
}

static void test_list_filters_and_release(void **state)
{
	struct fx *f = *state;
	json_t *j;

	write_cfg(f, G1, "02:00:00:00:00:00:00:10", 60);
	assert_int_equal(
		ctl(f, "pool", "allocate", "--owner", "a", "--pod", "nsA/x", "--pkey", "0x8001"),
		0);
	assert_int_equal(
		ctl(f, "pool", "allocate", "--owner", "b", "--pod", "nsB/y", "--pkey", "0x0002"),
		0);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "c", "--pod", "nsB/z"), 0);

	assert_int_equal(ctl(f, "--json", "pool", "list", "--owner", "nsB"), 0);
	j = out_json(f);
	assert_int_equal(json_array_size(j), 2);
	json_decref(j);
	/* the PKey filter ignores the membership bit */
	assert_int_equal(ctl(f, "--json", "pool", "list", "--pkey", "0x0001"), 0);
	j = out_json(f);
	assert_int_equal(json_array_size(j), 1);
	assert_string_equal(json_string_value(json_object_get(json_array_get(j, 0), "guid")), G1);
	json_decref(j);
	assert_int_equal(ctl(f, "pool", "list", "--pkey", "0x12345"), 2);
	assert_contains(f->r.err, "invalid PKey '0x12345'");

	/* release: quarantined, gone from the default list, back with --all */
	assert_int_equal(ctl(f, "pool", "release", G2), 0);
	assert_contains(f->r.out, "released into quarantine");
	assert_int_equal(ctl(f, "pool", "release", G2), 0);
	{
		static const struct col release_cols[] = {
			{"guid", "GUID:"},
			{"result", "Result:"},
			{0},
		};
		char *table = strdup(f->r.out);

		assert_contains(table, "was not held (nothing to do)");
		assert_int_equal(ctl(f, "--json", "pool", "release", G2), 0);
		j = out_json(f);
		assert_string_equal(json_string_value(json_object_get(j, "guid")), G2);
		assert_true(json_is_false(json_object_get(j, "released")));
		object_matches(table, j, release_cols);
		assert_contains(table, "Released:");
		json_decref(j);
		free(table);
	}
	assert_int_equal(ctl(f, "--json", "pool", "list"), 0);
	j = out_json(f);
	assert_int_equal(json_array_size(j), 2);
	json_decref(j);
	assert_int_equal(ctl(f, "pool", "list", "--all"), 0);
	{
		char *table = strdup(f->r.out);

		assert_int_equal(ctl(f, "--json", "pool", "list", "--all"), 0);
		j = out_json(f);
		assert_int_equal(json_array_size(j), 3);
		assert_string_equal(
			json_string_value(json_object_get(json_array_get(j, 1), "state")),
			"quarantined");
		assert_true(json_is_string(json_object_get(json_array_get(j, 1), "released")));
		rows_match(table, j, list_cols);
		json_decref(j);
		free(table);
	}
	assert_int_equal(ctl(f, "--json", "pool", "status"), 0);
	j = out_json(f);
	assert_int_equal(json_integer_value(json_object_get(j, "quarantined")), 1);
	assert_int_equal(json_integer_value(json_object_get(j, "free")), 13);
	json_decref(j);
	/* a quarantined GUID can be shown */
	assert_int_equal(ctl(f, "pool", "show", G2), 0);
	assert_contains(f->r.out, "quarantined");
}

static void test_allocate_errors(void **state)
{
	struct fx *f = *state;

	write_cfg(f, G1, "02:00:00:00:00:00:00:10", 60);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "holder"), 0);
	/* an explicit GUID held by another owner is refused: operation failed */
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "thief", "--guid", G1), 3);
	assert_contains(f->r.err, "is held by container holder");
	assert_contains(f->r.err, "refusing to take it away");
	assert_int_equal(
		ctl(f, "pool", "allocate", "--owner", "thief", "--guid", "02:00:00:00:00:00:00:11"),
		3);
	assert_contains(f->r.err, "outside the configured pool ranges");
	/* usage errors */
	assert_int_equal(ctl(f, "pool", "allocate"), 2);
	assert_contains(f->r.err, "pool allocate needs --owner");
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "x", "--guid", "zz"), 2);
	assert_contains(f->r.err, "invalid GUID 'zz'");
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "x", "--pkey", "0x7fff"), 2);
	assert_contains(f->r.err, "default partition");
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "x", "--pkey", "0x8000"), 2);
	assert_contains(f->r.err, "reserved");
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "x", "--ifname",
			     "a-very-long-interface-name"),
			 2);
	assert_contains(f->r.err, "ifname");
	/* ibvfd's own records' owners: refused offline as pool.allocate refuses them */
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "ibvf-warm-0000-03-00.2"), 2);
	assert_contains(f->r.err, "reserves for its own records");
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "ibvf-adopted-x"), 2);
	assert_contains(f->r.err, "reserves for its own records");
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "x", "extra"), 2);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "x", "--bogus"), 2);
	assert_contains(f->r.err, "Usage: ibvfctl");
	/* nothing of that was stored */
	assert_int_equal(ctl(f, "--json", "pool", "list", "--all"), 0);
	{
		json_t *j = out_json(f);

		assert_int_equal(json_array_size(j), 1);
		json_decref(j);
	}
}

static void test_show_errors(void **state)
{
	struct fx *f = *state;

	write_cfg(f, G1, "02:00:00:00:00:00:00:10", 60);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "a"), 0);
	/* not in the store: reported as a problem, exit 1 */
	assert_int_equal(ctl(f, "pool", "show", G3), 1);
	assert_contains(f->r.err, G3 " is not in the pool store");
	assert_int_equal(ctl(f, "pool", "show", "nonsense"), 2);
	assert_contains(f->r.err, "invalid GUID 'nonsense'");
	assert_int_equal(ctl(f, "pool", "show"), 2);
	assert_int_equal(ctl(f, "pool", "show", G1, G2), 2);
	assert_int_equal(ctl(f, "pool", "release"), 2);
	assert_int_equal(ctl(f, "pool", "release", "0x1"), 2);
}

static void test_audit(void **state)
{
	struct fx *f = *state;
	json_t *j;

	write_cfg(f, G1, "02:00:00:00:00:00:00:10", 1);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "a"), 0);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "b"), 0);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "c"), 0);
	assert_int_equal(ctl(f, "pool", "audit"), 0);
	assert_contains(f->r.out, "audit clean: no findings");
	assert_int_equal(ctl(f, "--json", "pool", "audit"), 0);
	j = out_json(f);
	assert_true(json_is_array(j) && json_array_size(j) == 0);
	json_decref(j);

	/* a finished quarantine is a notice, not a problem; --fix frees it */
	assert_int_equal(ctl(f, "pool", "release", G2), 0);
	sleep(1);
	usleep(100000);
	assert_int_equal(ctl(f, "pool", "audit"), 0);
	assert_contains(f->r.out, "expired-quarantine");
	assert_contains(f->r.out, "notice");
	assert_int_equal(ctl(f, "pool", "audit", "--fix"), 0);
	assert_contains(f->r.out, "freed 1 GUID(s)");
	assert_contains(f->r.out, "audit clean");

	/* a range change leaves G1 outside: problems, exit 1, same data in JSON */
	write_cfg(f, G2, "02:00:00:00:00:00:00:10", 1);
	assert_int_equal(ctl(f, "pool", "audit"), 1);
	{
		char *table = strdup(f->r.out);

		assert_contains(table, "outside-range");
		assert_int_equal(ctl(f, "--json", "pool", "audit"), 1);
		j = out_json(f);
		assert_int_equal(json_array_size(j), 1);
		assert_string_equal(
			json_string_value(json_object_get(json_array_get(j, 0), "kind")),
			"outside-range");
		assert_string_equal(
			json_string_value(json_object_get(json_array_get(j, 0), "severity")),
			"problem");
		assert_string_equal(
			json_string_value(json_object_get(json_array_get(j, 0), "guid")), G1);
		assert_contains(json_string_value(json_object_get(json_array_get(j, 0), "detail")),
				"container a");
		rows_match(table, j, audit_cols);
		json_decref(j);
		free(table);
	}
	assert_int_equal(ctl(f, "--json", "pool", "status"), 0);
	j = out_json(f);
	assert_int_equal(json_integer_value(json_object_get(j, "outside_ranges")), 1);
	assert_int_equal(json_integer_value(json_object_get(j, "total")), 15);
	json_decref(j);
	assert_int_equal(ctl(f, "pool", "audit", "extra"), 2);
}

/* Read-only commands do not change the store (not even its bytes). */
static void test_read_commands_do_not_write(void **state)
{
	struct fx *f = *state;
	size_t l0, l1;
	char *before, *after;

	write_cfg(f, G1, "02:00:00:00:00:00:00:10", 60);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "a"), 0);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "b"), 0);
	assert_int_equal(ctl(f, "pool", "release", G1), 0);
	before = tu_read_file(f->db, &l0);
	assert_non_null(before);
	assert_int_equal(ctl(f, "pool", "status"), 0);
	assert_int_equal(ctl(f, "pool", "list", "--all"), 0);
	assert_int_equal(ctl(f, "pool", "show", G2), 0);
	assert_int_equal(ctl(f, "pool", "audit"), 0);
	assert_int_equal(ctl(f, "--json", "pool", "status"), 0);
	/* even with other ranges configured, a read does not rebuild the free list */
	write_cfg(f, G1, "02:00:00:00:00:00:00:20", 60);
	assert_int_equal(ctl(f, "pool", "status"), 0);
	assert_int_equal(ctl(f, "pool", "audit"), 0);
	after = tu_read_file(f->db, &l1);
	assert_non_null(after);
	assert_int_equal(l0, l1);
	assert_memory_equal(before, after, l0);
	free(before);
	free(after);
}

static void test_usage_and_exit_codes(void **state)
{
	struct fx *f = *state;

	write_cfg(f, G1, "02:00:00:00:00:00:00:10", 60);
	assert_int_equal(ctl_raw(f, NULL), 2);
	assert_contains(f->r.err, "Usage: ibvfctl");
	assert_int_equal(ctl(f, "bogus"), 2);
	assert_contains(f->r.err, "unknown object 'bogus'");
	assert_contains(f->r.err, "Usage: ibvfctl");
	assert_contains(f->r.err, "pool status");
	assert_int_equal(ctl(f, "pool", "bogus"), 2);
	assert_contains(f->r.err, "unknown command 'pool bogus'");
	assert_contains(f->r.err, "Usage: ibvfctl [--json] pool status");
	assert_contains(f->r.err, "Usage: ibvfctl [--json] pool audit");
	assert_int_equal(ctl(f, "pool", "status", "extra"), 2);
	assert_int_equal(ctl(f, "pool", "list", "--bogus"), 2);
	assert_int_equal(ctl(f, "--bogus", "pool"), 2);
	assert_contains(f->r.err, "Usage: ibvfctl");
	/* help and version go to stdout with exit 0 */
	assert_int_equal(ctl_raw(f, "-h", NULL), 0);
	assert_contains(f->r.out, "Usage: ibvfctl");
	assert_contains(f->r.out, "Exit codes: 0 ok, 1 problems found, 2 usage or config error, "
				  "3 operation failed");
	assert_int_equal(ctl_raw(f, "--help", NULL), 0);
	assert_int_equal(ctl(f, "pool", "-h"), 0);
	assert_contains(f->r.out, "pool: the persistent GUID pool");
	assert_contains(f->r.out, "pool allocate --owner CONTAINER_ID");
	assert_int_equal(ctl(f, "pool", "list", "--help"), 0);
	assert_contains(f->r.out, "Usage: ibvfctl [--json] pool list");
	assert_int_equal(ctl(f, "pool", "show", "-h"), 0);
	assert_int_equal(ctl_raw(f, "-V", NULL), 0);
	assert_contains(f->r.out, "ibvfctl ");
}

static void test_config_errors(void **state)
{
	struct fx *f = *state;
	char *missing = tu_path(f->dir, "absent.json");

	/* an explicit --config that does not exist */
	assert_int_equal(ctl_raw(f, "-c", missing, "pool", "status", NULL), 2);
	assert_contains(f->r.err, missing);
	free(missing);
	/* a config with a typo names the file and key */
	assert_int_equal(tu_write_str(f->cfg, "{\"pool\": {\"quarantine\": 5}}"), 0);
	assert_int_equal(ctl(f, "pool", "status"), 2);
	assert_contains(f->r.err, f->cfg);
	assert_contains(f->r.err, "pool.quarantine: unknown key");
	/* no ranges at all */
	assert_int_equal(tu_write_str(f->cfg, "{\"state_dir\": \"/nonexistent/x\"}"), 0);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "a"), 2);
	assert_contains(f->r.err, "no GUID ranges configured");
	/* bad environment override */
	write_cfg(f, G1, "02:00:00:00:00:00:00:10", 60);
	assert_int_equal(ctl_env(f, (const char *[]){"GUID_POOL_RANGE_START=xyz", NULL}, "pool",
				 "status", NULL),
			 2);
	assert_contains(f->r.err, "GUID_POOL_RANGE_START");
}

/* The ib-kubernetes variables configure ibvfctl too; --state-dir overrides. */
static void test_env_and_state_dir(void **state)
{
	struct fx *f = *state;
	const char *env[] = {"GUID_POOL_RANGE_START=0x0300000000000001",
			     "GUID_POOL_RANGE_END=0x0300000000000004", NULL};
	char *other = tu_path(f->dir, "other");
	json_t *j;

	write_cfg(f, G1, "02:00:00:00:00:00:00:10", 60);
	assert_int_equal(ctl_env(f, env, "--json", "pool", "allocate", "--owner", "e", NULL), 0);
	j = out_json(f);
	assert_string_equal(json_string_value(json_object_get(j, "guid")),
			    "03:00:00:00:00:00:00:01");
	json_decref(j);
	assert_int_equal(ctl_env(f, env, "--json", "pool", "status", NULL), 0);
	j = out_json(f);
	assert_int_equal(json_integer_value(json_object_get(j, "total")), 4);
	json_decref(j);
	/* --state-dir: another (empty) state directory */
	assert_int_equal(ctl(f, "-s", other, "pool", "status"), 3);
	assert_contains(f->r.err, other);
	assert_int_equal(ctl(f, "-s", other, "pool", "allocate", "--owner", "s"), 0);
	assert_contains(f->r.out, G1);
	free(other);
}

/* Run SQL on the store directly, as another tool (or an older ibvf) would. */
static void store_sql(struct fx *f, const char *sql)
{
	sqlite3 *db = NULL;

	assert_int_equal(sqlite3_open_v2(f->db, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
	sqlite3_busy_timeout(db, 5000);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

/*
 * Owner fields that are not text. New ones are refused (usage error,
 * nothing stored). A record that already holds such bytes (another tool, an
 * older ibvf) used to make 'pool list' fail with an empty message ("ibvfctl: ",
 * exit 3) and 'pool show' print every field as '-' with exit 0; control
 * characters went raw to the terminal. Now every command shows the record:
 * bad bytes as U+FFFD, control characters as '?' in tables.
 */
static void test_owner_text(void **state)
{
	struct fx *f = *state;
	json_t *j, *o;

	write_cfg(f, G1, "02:00:00:00:00:00:00:10", 60);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "bad\xff"), 2);
	assert_contains(f->r.err, "container ID has a byte that is not UTF-8");
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "has space"), 2);
	assert_contains(f->r.err, "is not a CNI container ID");
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "-dash"), 2);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "a", "--ifname", "x/y"), 2);
	assert_contains(f->r.err, "interface name 'x/y' is not valid");
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "a", "--ifname", ".."), 2);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "a", "--pod", "ns/p\x1b[31m"), 2);
	assert_contains(f->r.err, "pod name has a control character");
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "a", "--network", "\xc3\x28"), 2);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "a", "--pod", "ns/caf\xc3\xa9"), 0);

	/* a record written by something else */
	store_sql(f, "UPDATE alloc SET container_id = CAST(X'6261640aff' AS TEXT), "
		     "pod_name = 'evil' || char(27) || '[31m', pf = CAST(X'c0af' AS TEXT)");
	assert_int_equal(ctl(f, "pool", "list"), 0);
	assert_null(strchr(f->r.out, 0x1b));
	assert_contains(f->r.out, "bad?\xef\xbf\xbd");
	assert_contains(f->r.out, "ns/evil?[31m");
	assert_int_equal(ctl(f, "--json", "pool", "list"), 0);
	j = out_json(f);
	assert_int_equal(json_array_size(j), 1);
	o = json_array_get(j, 0);
	assert_string_equal(json_string_value(json_object_get(o, "container_id")),
			    "bad\n\xef\xbf\xbd");
	assert_string_equal(json_string_value(json_object_get(o, "pf")),
			    "\xef\xbf\xbd\xef\xbf\xbd");
	assert_string_equal(json_string_value(json_object_get(o, "pod")), "ns/evil\x1b[31m");
	json_decref(j);
	assert_int_equal(ctl(f, "pool", "show", G1), 0);
	assert_contains(f->r.out, "GUID:        " G1);
	assert_contains(f->r.out, "bad?\xef\xbf\xbd");
	assert_null(strchr(f->r.out, 0x1b));
	assert_int_equal(ctl(f, "pool", "audit"), 0);
}

/*
 * Ranges holding more than 2^63 - 1 GUIDs: counts were cast to a signed
 * JSON integer ("Total: -2", "Free: -3"); now they are exact (a decimal
 * string in JSON above INT64_MAX).
 */
static void test_huge_ranges(void **state)
{
	struct fx *f = *state;
	json_t *j, *e;

	write_cfg(f, "00:00:00:00:00:00:00:01", "ff:ff:ff:ff:ff:ff:ff:fe", 60);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "a"), 0);
	assert_int_equal(ctl(f, "pool", "status"), 0);
	assert_contains(f->r.out, "Total:            18446744073709551614\n");
	assert_contains(f->r.out, "Allocated:        1\n");
	assert_contains(f->r.out, "Free:             18446744073709551613\n");
	assert_int_equal(ctl(f, "--json", "pool", "status"), 0);
	j = out_json(f);
	assert_string_equal(json_string_value(json_object_get(j, "total")), "18446744073709551614");
	assert_int_equal(json_integer_value(json_object_get(j, "allocated")), 1);
	json_decref(j);
	/* a free list emptied by hand: every other GUID is lost, and counted exactly */
	store_sql(f, "DELETE FROM free_extent");
	assert_int_equal(ctl(f, "--json", "pool", "audit"), 1);
	j = out_json(f);
	e = json_array_get(j, 0);
	assert_string_equal(json_string_value(json_object_get(e, "kind")), "lost");
	assert_string_equal(json_string_value(json_object_get(e, "count")), "18446744073709551613");
	json_decref(j);
}

static void test_corrupt_store(void **state)
{
	struct fx *f = *state;

	write_cfg(f, G1, "02:00:00:00:00:00:00:10", 60);
	assert_int_equal(mkdir(f->state, 0700), 0);
	assert_int_equal(tu_write_str(f->db, "this is not a database, but it is not empty"), 0);
	assert_int_equal(ctl(f, "pool", "status"), 3);
	assert_contains(f->r.err, f->db);
	assert_contains(f->r.err, "is not a usable ibvf GUID pool");
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "a"), 3);
	assert_contains(f->r.err, "left untouched");
	/* a group-writable state directory is refused */
	unlink(f->db);
	assert_int_equal(chmod(f->state, 0775), 0);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "a"), 3);
	assert_contains(f->r.err, "group/other may write it");
}

/*
 * Issue 14: a deleted store (an operator "moved it aside") is detected by
 * pool.id; nothing is allocated until `pool rebuild`, which then clears it.
 */
static void test_rebuild_after_lost_store(void **state)
{
	struct fx *f = *state;
	char *wal;

	write_cfg(f, G1, "02:00:00:00:00:00:00:10", 60);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "a"), 0);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "b"), 0);
	unlink(f->db);
	wal = tu_path(f->state, "pool.db-wal");
	unlink(wal);
	free(wal);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "c"), 3);
	assert_contains(f->r.err, "lost records");
	assert_contains(f->r.err, "ibvfctl pool rebuild");
	/* still lost on the next run: the mark is kept */
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "c"), 3);
	assert_int_equal(ctl(f, "pool", "rebuild", "extra"), 2);
	assert_int_equal(ctl(f, "pool", "rebuild"), 0);
	assert_contains(f->r.err, "store rebuilt");
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "c"), 0);
	/* a healthy store: rebuild adopts nothing and changes nothing */
	assert_int_equal(ctl(f, "pool", "rebuild"), 0);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "d"), 0);
}

/* ------------------------------------------------- ibvfd not running -- */

/* A socket file nobody listens on (a killed ibvfd leaves one). */
static void stale_socket(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	assert_true(fd >= 0);
	assert_true(strlen(path) < sizeof(sa.sun_path));
	memcpy(sa.sun_path, path, strlen(path) + 1);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
}

/*
 * No ibvfd (no socket, then a stale one): the changes work on the store,
 * say so on stderr, and --json stays clean JSON on stdout.
 */
static void test_offline_path(void **state)
{
	struct fx *f = *state;
	json_t *j;

	write_cfg(f, G1, "02:00:00:00:00:00:00:10", 60);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "a"), 0);
	assert_contains(f->r.err, "ibvfd is not running (nothing answers on ");
	assert_contains(f->r.err, f->sock);
	assert_contains(f->r.err, "working on the store directly");
	stale_socket(f->sock);
	assert_int_equal(ctl(f, "--json", "pool", "allocate", "--owner", "b"), 0);
	assert_contains(f->r.err, "ibvfd is not running");
	j = out_json(f);
	assert_string_equal(json_string_value(json_object_get(j, "guid")), G2);
	json_decref(j);
	assert_int_equal(ctl(f, "--json", "pool", "release", G2), 0);
	assert_contains(f->r.err, "working on the store directly");
	j = out_json(f);
	assert_true(json_is_true(json_object_get(j, "released")));
	json_decref(j);
	assert_int_equal(ctl(f, "--json", "pool", "audit"), 0);
	assert_contains(f->r.err, "ibvfd is not running");
	json_decref(out_json(f));
	/* the offline writer left the state dir's lock file behind, unlocked */
	{
		char *lock = tu_path(f->state, "ibvfd.lock");
		int fd = open(lock, O_RDWR);

		assert_true(fd >= 0);
		assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
		close(fd);
		free(lock);
	}
}

/* The store locked (an ibvfd starting) while nothing answers: refused, nothing written. */
static void test_lock_held_refused(void **state)
{
	struct fx *f = *state;
	char *lock = tu_path(f->state, "ibvfd.lock"), pid[32];
	size_t l0, l1;
	char *before, *after;
	int fd;

	write_cfg(f, G1, "02:00:00:00:00:00:00:10", 60);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "a"), 0);
	fd = open(lock, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
	snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	assert_int_equal(ftruncate(fd, 0), 0);
	assert_int_equal(write(fd, pid, strlen(pid)), (ssize_t)strlen(pid));
	before = tu_read_file(f->db, &l0);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "b"), 3);
	snprintf(pid, sizeof(pid), "locked by pid %d", (int)getpid());
	assert_contains(f->r.err, pid);
	assert_contains(f->r.err, "refusing to work on the store");
	assert_int_equal(ctl(f, "pool", "release", G1), 3);
	assert_int_equal(ctl(f, "pool", "audit"), 3);
	assert_int_equal(ctl(f, "pool", "audit", "--fix"), 3);
	/* reads do not need it */
	assert_int_equal(ctl(f, "pool", "show", G1), 0);
	after = tu_read_file(f->db, &l1);
	assert_int_equal(l0, l1);
	assert_memory_equal(before, after, l0);
	close(fd);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "b"), 0);
	free(before);
	free(after);
	free(lock);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

/* A release request a CNI DEL left while ibvfd was down (issue 15 item 7) is a finding. */
static void test_audit_release_pending(void **state)
{
	struct fx *f = *state;
	char *spool = tu_path(f->dir, "release.d"), *req = tu_path(spool, "c9.net1.json");

	write_cfg(f, G1, "02:00:00:00:00:00:00:10", 1);
	assert_int_equal(ctl(f, "pool", "allocate", "--owner", "a"), 0);
	assert_int_equal(ctl(f, "pool", "audit"), 0);
	assert_int_equal(mkdir(spool, 0700), 0);
	assert_int_equal(tu_write_str(req,
				      "{\"version\":1,\"container_id\":\"c9\",\"ifname\":"
				      "\"net1\",\"network\":\"n\",\"guid\":\"0x0200000000000001\","
				      "\"device_id\":\"0000:03:00.2\",\"created_ms\":1}"),
			 0);
	assert_int_equal(ctl(f, "pool", "audit"), 1);
	assert_contains(f->r.out, "release-pending");
	assert_contains(f->r.out, "container c9 ifname net1 found ibvfd down");
	free(req);
	free(spool);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(test_no_store_yet),
		T(test_allocate_status_list_show),
		T(test_list_filters_and_release),
		T(test_allocate_errors),
		T(test_show_errors),
		T(test_audit),
		T(test_audit_release_pending),
		T(test_rebuild_after_lost_store),
		T(test_read_commands_do_not_write),
		T(test_usage_and_exit_codes),
		T(test_config_errors),
		T(test_env_and_state_dir),
		T(test_corrupt_store),
		T(test_owner_text),
		T(test_huge_ranges),
		T(test_offline_path),
		T(test_lock_held_refused),
	};

	return cmocka_run_group_tests_name("ibvfctl", tests, NULL, NULL);
}
