// SPDX-License-Identifier: MIT
/* Per-step timestamps of one API operation (attach_timing.h, issue 17). */
#include "attach_timing.h"

#include <string.h>

#include "clock.h"

static _Thread_local struct ibvf_attach_timing *current;

void ibvf_timing_start(struct ibvf_attach_timing *t)
{
	memset(t, 0, sizeof(*t));
	t->t0_ns = t->last_ns = ibvf_mono_ns();
	if (!t->t0_ns)
		t->t0_ns = t->last_ns = 1; /* 0 means "not timed" */
}

static struct ibvf_timing_step *slot(struct ibvf_attach_timing *t, const char *name)
{
	for (size_t i = 0; i < t->n; i++)
		if (!strcmp(t->s[i].name, name))
			return &t->s[i];
	/* the last slot is "other"'s: once it is taken (n == MAX) every new name is
	 * "other" too; never past s[] (a failed prepare's undo marks many steps) */
	if (t->n >= IBVF_TIMING_MAX_STEPS - 1 && strcmp(name, "other"))
		return slot(t, "other");
	if (t->n >= IBVF_TIMING_MAX_STEPS)
		return &t->s[IBVF_TIMING_MAX_STEPS - 1];
	t->s[t->n].name = name;
	t->s[t->n].ns = 0;
	return &t->s[t->n++];
}

void ibvf_timing_mark(struct ibvf_attach_timing *t, const char *name)
{
	uint64_t now;

	if (!t || !t->t0_ns)
		return;
	now = ibvf_mono_ns();
	slot(t, name)->ns += now > t->last_ns ? now - t->last_ns : 0;
	t->last_ns = now;
}

void ibvf_timing_mark_split(struct ibvf_attach_timing *t, const char *head, const char *tail,
			    uint64_t tail_ns)
{
	uint64_t now, all;

	if (!t || !t->t0_ns)
		return;
	now = ibvf_mono_ns();
	all = now > t->last_ns ? now - t->last_ns : 0;
	if (tail_ns > all)
		tail_ns = all;
	slot(t, head)->ns += all - tail_ns;
	slot(t, tail)->ns += tail_ns;
	t->last_ns = now;
}

struct ibvf_attach_timing *ibvf_timing_set_current(struct ibvf_attach_timing *t)
{
	struct ibvf_attach_timing *was = current;

	current = t;
	return was;
}

void ibvf_timing_mark_current(const char *name)
{
	ibvf_timing_mark(current, name);
}

/* @ns in milliseconds, rounded to the microsecond. */
static json_t *ms_json(uint64_t ns)
{
	return json_real((double)((ns + 500) / 1000) / 1000.0);
}

json_t *ibvf_timing_json(const struct ibvf_attach_timing *t)
{
	uint64_t now = ibvf_mono_ns();
	json_t *o;

	if (!t->t0_ns)
		return NULL;
	o = json_object();
	for (size_t i = 0; o && i < t->n; i++) {
		if (json_object_set_new(o, t->s[i].name, ms_json(t->s[i].ns))) {
			json_decref(o);
			return NULL;
		}
	}
	if (o && json_object_set_new(o, "total", ms_json(now > t->t0_ns ? now - t->t0_ns : 0))) {
		json_decref(o);
		return NULL;
	}
	return o;
}
