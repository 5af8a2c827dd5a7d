// SPDX-License-Identifier: MIT
/*
 * Unit tests of daemon/port/fabric_audit.c: each finding from a built
 * fabric (no SMPs), the causes a breach names, the SM port's exemption, the
 * --pkey filter, and the per-PKey matrix (IBTA vol. 1, 10.9.1.2: full talks
 * to all members, limited only to full ones).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fabric_audit.h"

#define MAXP 16

struct fx {
	struct ibvf_fabric fab;
	struct ibvf_fabric_port ports[MAXP];
	uint16_t tables[MAXP][8];
	struct ibvf_fa_want wants[16];
	struct ibvf_fa_known known[16];
	struct ibvf_fa_sm sm[16];
	struct ibvf_fa_range managed[1];
	struct ibvf_fa_input in;
	struct ibvf_fa_result res;
};

#define POOL_FIRST 0x0002c90300100000ull
#define POOL_LAST  0x0002c903001000ffull

/* A port with @guid holding the P_Keys given (0-terminated, with membership bit). */
static size_t port(struct fx *f, uint64_t guid, const char *desc, ...)
{
	size_t i = f->fab.n_ports++;
	struct ibvf_fabric_port *p = &f->ports[i];
	va_list ap;
	int k, n = 0;

	memset(p, 0, sizeof(*p));
	p->port_guid = guid;
	p->node_guid = guid ? guid - 1 : ~0ull;
	p->state = 4;
	p->lid = (uint16_t)(i + 2);
	p->sm_lid = 1;
	p->read_ok = true;
	snprintf(p->desc, sizeof(p->desc), "%s", desc);
	snprintf(p->dr, sizeof(p->dr), "0,1,%zu", i + 1);
	p->pkeys = f->tables[i];
	p->pkey_cap = 8;
	p->n_pkeys = 8;
	f->tables[i][n++] = 0xffff;
	va_start(ap, desc);
	while ((k = va_arg(ap, int)) != 0)
		f->tables[i][n++] = (uint16_t)k;
	va_end(ap);
	return i;
}

static void want(struct fx *f, uint64_t guid, uint16_t pkey, const char *owner, bool expect)
{
	struct ibvf_fa_want *w = &f->wants[f->in.n_wants++];

	memset(w, 0, sizeof(*w));
	w->guid = guid;
	w->pkey = pkey;
	w->source = "store";
	w->expect_on_fabric = expect;
	snprintf(w->owner, sizeof(w->owner), "%s", owner);
	f->known[f->in.n_known] = (struct ibvf_fa_known){guid, guid, ""};
	snprintf(f->known[f->in.n_known].owner, sizeof(f->known[0].owner), "%s", owner);
	f->in.n_known++;
}

static void sm(struct fx *f, uint64_t guid, uint16_t key, bool full, bool managed)
{
	f->sm[f->in.n_sm++] = (struct ibvf_fa_sm){guid, key, full, managed};
}

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	f->fab.ports = f->ports;
	f->managed[0] = (struct ibvf_fa_range){POOL_FIRST, POOL_LAST};
	f->in = (struct ibvf_fa_input){.fabric = &f->fab,
				       .wants = f->wants,
				       .known = f->known,
				       .managed = f->managed,
				       .n_managed = 1,
				       .sm = f->sm,
				       .pkey = -1};
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	ibvf_fa_result_free(&f->res);
	free(f);
	return 0;
}

static void run(struct fx *f)
{
	char err[256];

	f->fab.ports = f->ports;
	assert_int_equal(ibvf_fabric_audit(&f->in, &f->res, err, sizeof(err)), 0);
}

static size_t count(const struct fx *f, enum ibvf_fa_kind k)
{
	size_t n = 0;

	for (size_t i = 0; i < f->res.n_findings; i++)
		n += f->res.findings[i].kind == k;
	return n;
}

static const struct ibvf_fa_finding *find(const struct fx *f, enum ibvf_fa_kind k, uint64_t guid)
{
	for (size_t i = 0; i < f->res.n_findings; i++)
		if (f->res.findings[i].kind == k && f->res.findings[i].guid == guid)
			return &f->res.findings[i];
	return NULL;
}

static const struct ibvf_fa_pkey *key(const struct fx *f, uint16_t k)
{
	for (size_t i = 0; i < f->res.n_pkeys; i++)
		if (f->res.pkeys[i].pkey == k)
			return &f->res.pkeys[i];
	return NULL;
}

#define G(n) (POOL_FIRST + 1 + 2 * (n))

static void test_clean(void **state)
{
	struct fx *f = *state;

	port(f, G(0), "vf0", 0x8a01, 0);
	port(f, G(1), "vf1", 0x8a01, 0);
	port(f, G(2), "vf2", 0x0a01, 0);
	port(f, 0x0002c90300002001ull, "pf0", 0);
	want(f, G(0), 0x8a01, "lab/a", true);
	want(f, G(1), 0x8a01, "lab/a2", true);
	want(f, G(2), 0x0a01, "lab/a3", true);
	run(f);
	assert_int_equal(f->res.n_findings, 0);
	assert_int_equal(f->res.n_problems, 0);
	assert_int_equal(f->res.n_pkeys, 1); /* 0x7fff is never in the matrix */
	assert_int_equal(key(f, 0x0a01)->n_full, 2);
	assert_int_equal(key(f, 0x0a01)->n_limited, 1);
	assert_int_equal(key(f, 0x0a01)->full_full, 1);
	assert_int_equal(key(f, 0x0a01)->full_limited, 2);
	assert_true(key(f, 0x0a01)->tenant);
}

static void test_foreign_member_and_sm_port(void **state)
{
	struct fx *f = *state;
	size_t smp;

	port(f, G(0), "vf0", 0x8a01, 0);
	port(f, 0x0002c90300002001ull, "pf0", 0x8a01, 0);      /* ALL=full */
	port(f, 0x0002c90300010101ull, "h1", 0x0a01, 0);       /* limited */
	port(f, 0x0002c90300aa0001ull, "old", 0x8a01, 0);      /* a GUID of a range since dropped */
	smp = port(f, 0x0002c90300001001ull, "sm", 0x8a01, 0); /* the SM's own port */
	f->ports[smp].sm_lid = f->ports[smp].lid;
	want(f, G(0), 0x8a01, "lab/a", true);
	sm(f, 0x0002c90300010101ull, 0x0a01, false, false); /* the admin lists h1 */
	sm(f, 0x0002c90300aa0001ull, 0x0a01, true, true);   /* ibvf's section still does */
	run(f);
	assert_int_equal(count(f, IBVF_FA_FOREIGN_MEMBER), 3);
	assert_non_null(strstr(find(f, IBVF_FA_FOREIGN_MEMBER, 0x0002c90300aa0001ull)->detail,
			       "stale membership"));
	assert_non_null(strstr(find(f, IBVF_FA_FOREIGN_MEMBER, 0x0002c90300002001ull)->detail,
			       "does not list it by GUID"));
	assert_non_null(strstr(find(f, IBVF_FA_FOREIGN_MEMBER, 0x0002c90300010101ull)->detail,
			       "administrator's part"));
	assert_int_equal(find(f, IBVF_FA_FOREIGN_MEMBER, 0x0002c90300010101ull)->pkey, 0x0a01);
	assert_null(find(f, IBVF_FA_FOREIGN_MEMBER, 0x0002c90300001001ull));
	assert_int_equal(f->res.n_problems, 3);
	assert_int_equal(key(f, 0x0a01)->n_full, 4);
	assert_int_equal(key(f, 0x0a01)->n_limited, 1);
	for (size_t i = 0; i < key(f, 0x0a01)->n_members; i++)
		if (key(f, 0x0a01)->members[i].port == smp)
			assert_int_equal(key(f, 0x0a01)->members[i].role, IBVF_FA_ROLE_SM);
}

static void test_isolation_breach_causes(void **state)
{
	struct fx *f = *state;

	port(f, G(0), "vf0", 0x8a01, 0);
	port(f, G(1), "vf1", 0x8a02, 0x8a01, 0); /* tenant b holding a's key: ALL */
	port(f, G(2), "vf2", 0x8a02, 0x0a01, 0); /* stale: ibvf's section lists it */
	port(f, G(3), "vf3", 0x8a02, 0x8a01, 0); /* the admin lists it */
	want(f, G(0), 0x8a01, "lab/a", true);
	want(f, G(1), 0x8a02, "lab/b", true);
	want(f, G(2), 0x8a02, "lab/b2", true);
	want(f, G(3), 0x8a02, "lab/b3", true);
	sm(f, G(2), 0x0a01, false, true);
	sm(f, G(3), 0x0a01, true, false);
	run(f);
	assert_int_equal(count(f, IBVF_FA_ISOLATION_BREACH), 3);
	assert_non_null(
		strstr(find(f, IBVF_FA_ISOLATION_BREACH, G(1))->detail, "does not list it"));
	assert_non_null(
		strstr(find(f, IBVF_FA_ISOLATION_BREACH, G(2))->detail, "stale membership"));
	assert_int_equal(find(f, IBVF_FA_ISOLATION_BREACH, G(2))->pkey, 0x0a01);
	assert_non_null(strstr(find(f, IBVF_FA_ISOLATION_BREACH, G(3))->detail, "administrator's"));
	assert_string_equal(find(f, IBVF_FA_ISOLATION_BREACH, G(3))->owner, "lab/b3");
	assert_null(find(f, IBVF_FA_ISOLATION_BREACH, G(0)));
	assert_int_equal(count(f, IBVF_FA_FOREIGN_MEMBER), 0);
}

static void test_missing_and_wrong_membership(void **state)
{
	struct fx *f = *state;

	port(f, G(0), "vf0", 0x8a01, 0);
	port(f, G(1), "vf1", 0x8a01, 0);
	port(f, G(2), "vf2", 0);
	want(f, G(0), 0x8a01, "lab/a", true);
	want(f, G(0), 0x8a03, "lab/a", true);  /* missing */
	want(f, G(1), 0x0a01, "lab/a2", true); /* limited asked, full held */
	want(f, G(2), 0x8a05, "lab/c", false); /* attach not done: not expected yet */
	run(f);
	assert_int_equal(count(f, IBVF_FA_MISSING_PKEY), 1);
	assert_int_equal(find(f, IBVF_FA_MISSING_PKEY, G(0))->pkey, 0x8a03);
	assert_int_equal(count(f, IBVF_FA_WRONG_MEMBERSHIP), 1);
	assert_int_equal(find(f, IBVF_FA_WRONG_MEMBERSHIP, G(1))->pkey, 0x8a01);
	assert_non_null(strstr(find(f, IBVF_FA_WRONG_MEMBERSHIP, G(1))->detail, "(limited)"));
	assert_int_equal(f->res.n_problems, 2);
	/* a key asked for that no port holds still has a matrix entry */
	assert_non_null(key(f, 0x0a03));
	assert_int_equal(key(f, 0x0a03)->n_members, 0);
}

static void test_ports_zero_dup_unknown(void **state)
{
	struct fx *f = *state;

	port(f, G(0), "vf0", 0);
	port(f, G(0), "h1", 0); /* the same port GUID again */
	port(f, 0, "vf4", 0);
	f->ports[2].state = 2;		      /* INIT */
	port(f, G(7), "vf7", 0);	      /* pool GUID, no store */
	port(f, POOL_FIRST + 0x81, "vf9", 0); /* another node's block knows it */
	want(f, G(0), 0x8a01, "lab/a", false);
	f->known[f->in.n_known] = (struct ibvf_fa_known){POOL_FIRST + 0x80, POOL_LAST, ""};
	snprintf(f->known[f->in.n_known++].owner, IBVF_FA_OWNER_LEN, "node b (cluster block)");
	run(f);
	assert_int_equal(count(f, IBVF_FA_DUPLICATE_GUID), 1);
	assert_int_equal(find(f, IBVF_FA_DUPLICATE_GUID, G(0))->port, 0);
	assert_int_equal(find(f, IBVF_FA_DUPLICATE_GUID, G(0))->port2, 1);
	assert_int_equal(count(f, IBVF_FA_VF_GUID_ZERO), 1);
	assert_non_null(strstr(find(f, IBVF_FA_VF_GUID_ZERO, 0)->detail, "INIT"));
	assert_int_equal(count(f, IBVF_FA_UNKNOWN_POOL_GUID), 1);
	assert_non_null(find(f, IBVF_FA_UNKNOWN_POOL_GUID, G(7)));
	assert_int_equal(count(f, IBVF_FA_DUPLICATE_GUID) + count(f, IBVF_FA_VF_GUID_ZERO) +
				 count(f, IBVF_FA_UNKNOWN_POOL_GUID),
			 f->res.n_problems);
}

static void test_not_on_fabric_and_unreadable(void **state)
{
	struct fx *f = *state;

	port(f, G(0), "vf0", 0x8a01, 0);
	f->ports[0].read_ok = false;
	snprintf(f->ports[0].error, sizeof(f->ports[0].error), "no SMP reply");
	want(f, G(0), 0x8a01, "lab/a", true);
	want(f, G(5), 0x8a01, "lab/gone", true);
	want(f, G(6), 0x8a01, "lab/starting", false);
	run(f);
	assert_int_equal(count(f, IBVF_FA_UNREADABLE), 1);
	assert_non_null(strstr(find(f, IBVF_FA_UNREADABLE, G(0))->detail, "no SMP reply"));
	assert_true(find(f, IBVF_FA_NOT_ON_FABRIC, G(5))->problem);
	assert_false(find(f, IBVF_FA_NOT_ON_FABRIC, G(6))->problem); /* a notice */
	assert_int_equal(count(f, IBVF_FA_MISSING_PKEY), 0);	     /* unread: not judged */
	assert_int_equal(f->res.n_problems, 2);
}

static void test_pkey_filter(void **state)
{
	struct fx *f = *state;

	port(f, G(0), "vf0", 0x8a01, 0);
	port(f, G(1), "vf1", 0x8a02, 0x8a01, 0);
	port(f, G(1), "dup", 0x8a02, 0);
	port(f, 0x0002c90300002001ull, "pf0", 0x8a02, 0);
	want(f, G(0), 0x8a01, "lab/a", true);
	want(f, G(1), 0x8a02, "lab/b", true);
	f->in.pkey = 0x0a02;
	run(f);
	/* only 0x0a02's findings: pf0 foreign; vf1's breach of 0x0a01 and the duplicate are not */
	assert_int_equal(f->res.n_findings, 1);
	assert_int_equal(f->res.findings[0].kind, IBVF_FA_FOREIGN_MEMBER);
	assert_int_equal(f->res.n_pkeys, 1);
	assert_int_equal(f->res.pkeys[0].pkey, 0x0a02);
}

static void test_one_member_per_port(void **state)
{
	struct fx *f = *state;

	/* a table with the key twice (limited and full): one member, full */
	port(f, G(0), "vf0", 0x0a01, 0x8a01, 0);
	port(f, G(1), "vf1", 0x0a01, 0);
	want(f, G(0), 0x8a01, "lab/a", true);
	want(f, G(1), 0x0a01, "lab/a2", true);
	run(f);
	assert_int_equal(f->res.n_findings, 0);
	assert_int_equal(key(f, 0x0a01)->n_members, 2);
	assert_int_equal(key(f, 0x0a01)->n_full, 1);
	assert_int_equal(key(f, 0x0a01)->full_limited, 1);
	assert_string_equal(ibvf_fa_kind_name(IBVF_FA_ISOLATION_BREACH), "isolation-breach");
	assert_string_equal(ibvf_fa_kind_name(IBVF_FA_KIND_COUNT), "?");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_clean, setup, teardown),
		cmocka_unit_test_setup_teardown(test_foreign_member_and_sm_port, setup, teardown),
		cmocka_unit_test_setup_teardown(test_isolation_breach_causes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_and_wrong_membership, setup, teardown),
		cmocka_unit_test_setup_teardown(test_ports_zero_dup_unknown, setup, teardown),
		cmocka_unit_test_setup_teardown(test_not_on_fabric_and_unreadable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pkey_filter, setup, teardown),
		cmocka_unit_test_setup_teardown(test_one_member_per_port, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
