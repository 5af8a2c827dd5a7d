// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the OpenSM partition file parser, the admin/managed split and
 * the renderer (sm-backends/opensm/partition_conf.c).
 *
 * Input: the bytes of a partition file. Its last bytes also drive up to four
 * membership changes (12 bytes each: kind, PKey, GUID, flags), applied the
 * way the opensm backend applies them (sm_opensm.c apply()).
 *
 * Invariants checked (abort() on violation, so libFuzzer reports it):
 *   - pc_parse() and pc_doc_load() agree on files without markers;
 *   - a file that loads renders, for its own section and after each change,
 *     into text that pc_check_rendered() accepts (the install gate: if it
 *     refused ibvf's own rendering, the backend could never change members);
 *   - an error always comes with a message.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "partition_conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void must(int cond, const char *what, const char *err)
{
	if (!cond) {
		fprintf(stderr, "fuzz_partition_conf: invariant broken: %s (%s)\n", what,
			err ? err : "");
		abort();
	}
}

static uint64_t le64(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* Render @m into @d's file and put it through the install gate. */
static void roundtrip(const struct pc_doc *d, const struct pc_managed *m)
{
	char err[IBVF_ERR_LEN] = "";
	char *text = NULL;
	size_t len = 0;
	int ret;

	ret = pc_render(d, m, &text, &len, err, sizeof(err));
	if (ret == -ENOMEM)
		return;
	must(ret == 0, "pc_render failed", err);
	ret = pc_check_rendered(d, m, text, len, "rendered", err, sizeof(err));
	/*
	 * The one refusal by design: a file without a section whose last
	 * definition has no ';' (OpenSM accepts that at the end of the file),
	 * as the appended section would run into it.
	 */
	if (ret == -EINVAL && !d->has_section && !d->file->parts[d->file->n_parts - 1].terminated)
		ret = 0;
	must(ret == 0 || ret == -ENOMEM, "pc_check_rendered refused ibvf's own rendering", err);
	free(text);
}

/* One change as sm_opensm.c apply() makes it; false when the backend would refuse it. */
static bool change(const struct pc_doc *d, struct pc_managed *m, const uint8_t *op)
{
	uint16_t pkey = (uint16_t)((op[1] | op[2] << 8) & 0x7fff);
	uint64_t guid = le64(op + 3);
	struct pc_member mem = {guid, op[11] & 1, op[11] & 2};
	struct pc_props props = {op[11] & 4, (op[11] & 8) ? 4 : -1, -1, (op[11] & 16) ? 3 : -1};
	size_t changed = 0;

	if (!pkey || guid == 0 || guid == UINT64_MAX)
		return false;
	if (op[0] & 1)
		return pc_managed_remove(m, pkey, &guid, 1, &changed) == 0;
	if (pc_admin_find_guid(d, pkey, guid))
		return false;
	if (pc_managed_add(m, pkey, &props, &mem, 1, &changed))
		return false;
	for (size_t i = 0; i < m->n; i++)
		if (pc_admin_defines(d, m->pkeys[i].pkey))
			m->pkeys[i].props = (struct pc_props){false, -1, -1, -1};
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[IBVF_ERR_LEN] = "";
	struct pc_file *f = NULL;
	struct pc_doc *d = NULL;
	struct pc_managed m = {0};
	const char *text = (const char *)data;
	int rp, rd;

	if (size > (1u << 20))
		return 0;
	rp = pc_parse(text, size, "fuzz.conf", &f, err, sizeof(err));
	must(rp == 0 || err[0], "pc_parse failed without a message", NULL);
	must((rp == 0) == (f != NULL), "pc_parse result and output disagree", err);
	err[0] = 0;
	rd = pc_doc_load(text, size, "fuzz.conf", &d, err, sizeof(err));
	must(rd == 0 || err[0], "pc_doc_load failed without a message", NULL);
	must((rd == 0) == (d != NULL), "pc_doc_load result and output disagree", err);
	if (d && !d->has_section)
		must(rp == 0, "pc_doc_load accepted a file pc_parse refuses", NULL);
	if (d) {
		roundtrip(d, &d->managed);
		if (pc_managed_copy(&m, &d->managed) == 0) {
			size_t nops = size / 12 < 4 ? size / 12 : 4;

			for (size_t i = 0; i < nops; i++)
				if (change(d, &m, data + size - 12 * (i + 1)))
					roundtrip(d, &m);
			pc_managed_free(&m);
		}
	}
	pc_doc_free(d);
	pc_file_free(f);
	return 0;
}
