// SPDX-License-Identifier: MIT
/*
 * ibvfctl doctor: locked memory for containers. Registering memory for
 * RDMA pins it, counted against RLIMIT_MEMLOCK of the process; a container
 * inherits the limit of its runtime (containerd or CRI-O, as its systemd
 * unit's LimitMEMLOCK= set it) unless the runtime's base spec (containerd
 * base_runtime_spec, process.rlimits) or default_ulimits (CRI-O) say
 * otherwise. CAP_IPC_LOCK lifts the limit only for a process that holds it
 * in its effective set, which a non-root container user does not.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor_int.h"
#include "toml_scan.h"

#define SRC_MEMLOCK                                                                                \
	"getrlimit(2) RLIMIT_MEMLOCK; systemd.exec(5) LimitMEMLOCK=; containerd CRI config "       \
	"(base_runtime_spec); crio.conf(5) default_ulimits; capabilities(7) CAP_IPC_LOCK"
#define FIX_MEMLOCK                                                                                  \
	"set LimitMEMLOCK=infinity in a drop-in of the runtime's unit (or memlock=-1:-1 in CRI-O's " \
	"default_ulimits) and restart it; CAP_IPC_LOCK does not help a non-root container user"
#define MIN_MEMLOCK (64ull << 20)

struct limit {
	bool known, unlimited;
	unsigned long long bytes;
	char from[256];
};

static void set_limit(struct limit *l, const char *v, const char *from)
{
	if (!strncmp(v, "infinity", 8) || !strncmp(v, "unlimited", 9) || !strcmp(v, "-1")) {
		l->unlimited = true;
	} else {
		char *end;
		unsigned long long n = strtoull(v, &end, 10);

		switch (*end) {
		case 'K':
			n <<= 10;
			break;
		case 'M':
			n <<= 20;
			break;
		case 'G':
			n <<= 30;
			break;
		}
		l->unlimited = false;
		l->bytes = n;
	}
	l->known = true;
	snprintf(l->from, sizeof(l->from), "%s", from);
}

static void unit_lines(struct dr *d, const char *rel, struct limit *l)
{
	char *text = dr_read_alloc(d, rel), *line, *save = NULL;

	for (line = text ? strtok_r(text, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save))
		if (!strncmp(line, "LimitMEMLOCK=", 13)) {
			char v[64];

			/* soft:hard -> the soft limit counts */
			snprintf(v, sizeof(v), "%s", line + 13);
			set_limit(l, v, rel);
		}
	free(text);
}

static int conf_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* LimitMEMLOCK= of @unit (systemd.unit(5) search path and drop-ins); false: no unit */
static bool unit_limit(struct dr *d, const char *unit, struct limit *l)
{
	static const char *const dirs[] = {"/etc/systemd/system", "/run/systemd/system",
					   "/lib/systemd/system", "/usr/lib/systemd/system"};
	char rel[DR_PATH], path[DR_PATH], *names[32];
	bool found = false;
	size_t n = 0;

	for (size_t i = 0; i < 4 && !found; i++) {
		snprintf(rel, sizeof(rel), "%s/%s", dirs[i], unit);
		if (dr_exists(d, "%s", rel)) {
			unit_lines(d, rel, l);
			found = true;
		}
	}
	for (size_t i = 0; i < 4; i++) {
		struct dirent *e;
		DIR *dir;

		dr_path(d, path, "%s/%s.d", dirs[i], unit);
		dir = opendir(path);
		while (dir && (e = readdir(dir)) && n < 32)
			if (strstr(e->d_name, ".conf") &&
			    (names[n] = malloc(strlen(dirs[i]) + strlen(unit) + strlen(e->d_name) +
					       8)))
				sprintf(names[n++], "%s/%s.d/%s", dirs[i], unit, e->d_name);
		if (dir)
			closedir(dir);
	}
	qsort(names, n, sizeof(names[0]), conf_cmp);
	for (size_t i = 0; i < n; i++) {
		unit_lines(d, names[i], l);
		free(names[i]);
	}
	return found || n;
}

/* The soft RLIMIT_MEMLOCK of the running process named @comm (/proc/PID/limits). */
static bool process_limit(struct dr *d, const char *comm, struct limit *l)
{
	char path[DR_PATH], buf[64], from[320], *limits;
	struct dirent *e;
	bool found = false;
	DIR *dir;

	dr_path(d, path, "/proc");
	dir = opendir(path);
	while (dir && !found && (e = readdir(dir))) {
		char *line;

		if (e->d_name[0] < '1' || e->d_name[0] > '9' ||
		    dr_read(d, buf, sizeof(buf), "/proc/%s/comm", e->d_name) <= 0 ||
		    strcmp(buf, comm))
			continue;
		snprintf(from, sizeof(from), "/proc/%s/limits", e->d_name);
		limits = dr_read_alloc(d, from);
		line = limits ? strstr(limits, "Max locked memory") : NULL;
		if (line) {
			char soft[32] = "";

			sscanf(line + 17, "%31s", soft);
			snprintf(from, sizeof(from), "/proc/%.16s/limits (running %.32s)",
				 e->d_name, comm);
			set_limit(l, soft, from);
			found = true;
		}
		free(limits);
	}
	if (dir)
		closedir(dir);
	return found;
}

struct spec_find {
	char path[DR_PATH];
	bool cri_seen;
};

static int find_base_spec(void *arg, const char *table, const char *key, const char *value)
{
	struct spec_find *s = arg;

	if (strstr(table, "containerd.runtimes.") && !strcmp(key, "base_runtime_spec"))
		snprintf(s->path, sizeof(s->path), "%s", value);
	return 0;
}

/* RLIMIT_MEMLOCK of containerd's base_runtime_spec (an OCI runtime spec), if set. */
static bool spec_limit(struct dr *d, struct limit *l, char *note, size_t len)
{
	struct spec_find s = {""};
	char *toml = dr_read_alloc(d, "/etc/containerd/config.toml"), *spec;
	json_t *j, *r;
	size_t i;
	bool found = false;

	if (toml)
		dr_toml_each(toml, find_base_spec, &s);
	free(toml);
	if (!s.path[0])
		return false;
	spec = dr_read_alloc(d, s.path);
	/* OCI rlimits are uint64 (2^64-1 = RLIM_INFINITY): beyond jansson's integers */
	j = spec ? json_loads(spec, JSON_DECODE_INT_AS_REAL, NULL) : NULL;
	free(spec);
	if (!j) {
		snprintf(note, len, "; base_runtime_spec %s cannot be read", s.path);
		return false;
	}
	json_array_foreach(json_object_get(json_object_get(j, "process"), "rlimits"), i, r)
	{
		const char *type = json_string_value(json_object_get(r, "type"));
		double soft = json_number_value(json_object_get(r, "soft"));
		char v[32], from[DR_PATH + 32];

		if (!type || strcmp(type, "RLIMIT_MEMLOCK"))
			continue;
		if (soft >= 1.8e19 || soft < 0)
			snprintf(v, sizeof(v), "unlimited");
		else
			snprintf(v, sizeof(v), "%.0f", soft);
		snprintf(from, sizeof(from), "%s (base_runtime_spec)", s.path);
		set_limit(l, v, from);
		found = true;
	}
	json_decref(j);
	return found;
}

static int find_ulimits(void *arg, const char *table, const char *key, const char *value)
{
	const char *m;

	(void)table;
	if (strcmp(key, "default_ulimits") || !(m = strstr(value, "memlock=")))
		return 0;
	snprintf(arg, 64, "%.*s", (int)strcspn(m + 8, ":\"'"), m + 8);
	return 1;
}

static bool crio_ulimits(struct dr *d, struct limit *l)
{
	char v[64] = "", *toml = dr_read_alloc(d, "/etc/crio/crio.conf");
	bool found = toml && dr_toml_each(toml, find_ulimits, v) == 1;

	free(toml);
	if (found)
		set_limit(l, v, "/etc/crio/crio.conf default_ulimits");
	return found;
}

static void verdict(struct dr *d, const char *id, const char *rt, const struct limit *eff,
		    const char *ev)
{
	if (!eff->known)
		dr_add(d, id, IBVF_DOCTOR_WARN, FIX_MEMLOCK, SRC_MEMLOCK,
		       "%s: no LimitMEMLOCK= and no running process to read: containers get the "
		       "systemd default (DefaultLimitMEMLOCK=, 8 MiB on recent systemd)%s",
		       rt, ev);
	else if (eff->unlimited)
		dr_add(d, id, IBVF_DOCTOR_OK, NULL, SRC_MEMLOCK, "%s: unlimited, from %s%s", rt,
		       eff->from, ev);
	else
		dr_add(d, id, eff->bytes < MIN_MEMLOCK ? IBVF_DOCTOR_FAIL : IBVF_DOCTOR_WARN,
		       FIX_MEMLOCK, SRC_MEMLOCK,
		       "%s: %llu bytes, from %s%s: ibv_reg_mr() of larger buffers fails with ENOMEM "
		       "in a non-root container",
		       rt, eff->bytes, eff->from, ev);
}

void dr_check_memlock(struct dr *d)
{
	struct limit unit = {0}, proc = {0}, spec = {0}, eff;
	char ev[512] = "", note[DR_PATH + 64] = "";
	bool have_unit, have_proc, have_spec;

	have_unit = unit_limit(d, "containerd.service", &unit);
	have_proc = process_limit(d, "containerd", &proc);
	have_spec = spec_limit(d, &spec, note, sizeof(note));
	if (!have_unit && !have_proc && !dr_exists(d, "/etc/containerd/config.toml")) {
		dr_add(d, "memlock.containerd", IBVF_DOCTOR_NA, NULL, SRC_MEMLOCK,
		       "containerd is not installed here (no unit, no process, no config.toml)");
	} else {
		/* the spec wins, then what the running process has, then the unit file */
		eff = have_spec ? spec : have_proc ? proc : unit;
		if (have_unit && unit.known && have_proc)
			snprintf(ev, sizeof(ev), "; the unit says %s (%s)",
				 unit.unlimited ? "infinity" : "a finite limit", unit.from);
		strncat(ev, note, sizeof(ev) - strlen(ev) - 1);
		verdict(d, "memlock.containerd", "containerd", &eff, ev);
	}

	memset(&unit, 0, sizeof(unit));
	memset(&proc, 0, sizeof(proc));
	memset(&spec, 0, sizeof(spec));
	have_unit = unit_limit(d, "crio.service", &unit);
	have_proc = process_limit(d, "crio", &proc);
	have_spec = crio_ulimits(d, &spec);
	if (!have_unit && !have_proc && !have_spec && !dr_exists(d, "/etc/crio/crio.conf")) {
		dr_add(d, "memlock.crio", IBVF_DOCTOR_NA, NULL, SRC_MEMLOCK,
		       "CRI-O is not installed here (no unit, no process, no crio.conf)");
		return;
	}
	eff = have_spec ? spec : have_proc ? proc : unit;
	verdict(d, "memlock.crio", "CRI-O", &eff, "");
}
