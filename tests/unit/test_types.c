// SPDX-License-Identifier: MIT
/* Unit tests of include/ibvf/types.h: GUID and P_Key parsing, formatting, checks. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <ibvf/types.h>

#include "err.h"
#include "testutil.h"

/* ------------------------------------------------------------- GUIDs -- */

static const struct {
	const char *in;
	uint64_t want;
} guid_ok[] = {
	{"00:02:c9:03:00:00:10:01", 0x0002c90300001001ull},
	{"00:02:C9:03:00:00:10:01", 0x0002c90300001001ull},
	{"0x0002c90300001001", 0x0002c90300001001ull},
	{"0X0002C90300001001", 0x0002c90300001001ull},
	{"0002c90300001001", 0x0002c90300001001ull},
	{"0002C90300001001", 0x0002c90300001001ull},
	{"0002c903000010Ab", 0x0002c903000010abull},
	{"Fe:dC:bA:98:76:54:32:10", 0xfedcba9876543210ull},
	{"00:11:22:33:44:55:66:77", 0x0011223344556677ull},
	/* zero and all-ones parse; assignability is a separate check */
	{"00:00:00:00:00:00:00:00", 0},
	{"0x0000000000000000", 0},
	{"ff:ff:ff:ff:ff:ff:ff:ff", UINT64_MAX},
	{"FFFFFFFFFFFFFFFF", UINT64_MAX},
	{"0x0000000000000001", 1},
	{"7fffffffffffffff", 0x7fffffffffffffffull},
	{"8000000000000000", 0x8000000000000000ull},
};

static void test_guid_parse_accepts(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(guid_ok) / sizeof(guid_ok[0]); i++) {
		char err[IBVF_ERR_LEN] = "";
		uint64_t g = 0xdeadbeefull;
		int ret = ibvf_guid_parse(guid_ok[i].in, &g, err, sizeof(err));

		if (ret || g != guid_ok[i].want)
			print_error("input '%s': ret %d value %016llx err '%s'\n", guid_ok[i].in,
				    ret, (unsigned long long)g, err);
		assert_int_equal(ret, 0);
		assert_true(g == guid_ok[i].want);
	}
}

/* Rejected inputs with the fragment their error must hold ('%s' = the input). */
static const struct {
	const char *in;
	const char *frag;
} guid_bad[] = {
	{"", "empty GUID"},
	{"00:02:c9:03:00:00:10", "invalid GUID '00:02:c9:03:00:00:10'"},
	{"00:02:c9:03:00:00:10:01:02", "invalid GUID '00:02:c9:03:00:00:10:01:02'"},
	{"00:02:c9:03:00:00:10:1", "invalid GUID '00:02:c9:03:00:00:10:1'"},
	{"0:2:c9:3:0:0:10:1", "invalid GUID '0:2:c9:3:0:0:10:1'"},
	{"00:02:c9:03:00:00:10:0g", "invalid GUID '00:02:c9:03:00:00:10:0g'"},
	{"00:02:c9:03:00:00:10:01:", "invalid GUID '00:02:c9:03:00:00:10:01:'"},
	{"00-02-c9-03-00-00-10-01", "invalid GUID '00-02-c9-03-00-00-10-01'"},
	{"00.02.c9.03.00.00.10.01", "invalid GUID '00.02.c9.03.00.00.10.01'"},
	{"0002:c903:0000:1001", "invalid GUID '0002:c903:0000:1001'"},
	{"00:02:c9:03:00:00:1001", "invalid GUID '00:02:c9:03:00:00:1001'"},
	{"000:2:c9:03:00:00:10:01", "invalid GUID '000:2:c9:03:00:00:10:01'"},
	{"0x", "invalid GUID '0x'"},
	{"0x0002c9030000100", "invalid GUID '0x0002c9030000100'"},
	{"0x0002c903000010011", "invalid GUID '0x0002c903000010011'"},
	{"0002c9030000100", "invalid GUID '0002c9030000100'"},
	{"0002c90300001001ff", "invalid GUID '0002c90300001001ff'"},
	{"0002c9030000100g", "invalid GUID '0002c9030000100g'"},
	{"0x0x02c90300001001", "invalid GUID '0x0x02c90300001001'"},
	{" 0002c90300001001", "invalid GUID ' 0002c90300001001'"},
	{"0002c90300001001 ", "invalid GUID '0002c90300001001 '"},
	{"+002c90300001001", "invalid GUID '+002c90300001001'"},
	{"-002c90300001001", "invalid GUID '-002c90300001001'"},
	{"1", "invalid GUID '1'"},
	{"12345", "invalid GUID '12345'"},
	{"guid", "invalid GUID 'guid'"},
	{"0x000000000000000z", "invalid GUID '0x000000000000000z'"},
	{"00:02:c9:03:00:00:10:01\n", "invalid GUID '00:02:c9:03:00:00:10:01\n'"},
	{"x0002c90300001001", "invalid GUID 'x0002c90300001001'"},
};

static void test_guid_parse_rejects(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(guid_bad) / sizeof(guid_bad[0]); i++) {
		char err[IBVF_ERR_LEN] = "";
		uint64_t g = 0x1234;
		int ret = ibvf_guid_parse(guid_bad[i].in, &g, err, sizeof(err));

		if (ret != -EINVAL)
			print_error("input '%s' was accepted as %016llx\n", guid_bad[i].in,
				    (unsigned long long)g);
		assert_int_equal(ret, -EINVAL);
		assert_true(g == 0x1234); /* output untouched on error */
		assert_contains(err, guid_bad[i].frag);
	}
}

static void test_guid_parse_null_and_long(void **state)
{
	char err[IBVF_ERR_LEN] = "", long_in[300], small[8];
	uint64_t g;

	(void)state;
	assert_int_equal(ibvf_guid_parse(NULL, &g, err, sizeof(err)), -EINVAL);
	assert_contains(err, "empty GUID");
	/* a very long input is quoted (truncated), never overflows the buffer */
	memset(long_in, 'a', sizeof(long_in) - 1);
	long_in[sizeof(long_in) - 1] = 0;
	assert_int_equal(ibvf_guid_parse(long_in, &g, err, sizeof(err)), -EINVAL);
	assert_contains(err, "invalid GUID 'aaaaaaaaaaaaaaaa");
	assert_true(strlen(err) < sizeof(err));
	/* no error buffer: still the error code */
	assert_int_equal(ibvf_guid_parse("zz", &g, NULL, 0), -EINVAL);
	/* a tiny buffer is truncated and NUL-terminated */
	assert_int_equal(ibvf_guid_parse("zz", &g, small, sizeof(small)), -EINVAL);
	assert_int_equal(strlen(small), sizeof(small) - 1);
}

static void test_guid_format(void **state)
{
	char s[IBVF_GUID_STR_LEN], h[IBVF_GUID_HEX_LEN];

	(void)state;
	assert_string_equal(ibvf_guid_format(0x0002c90300001001ull, s), "00:02:c9:03:00:00:10:01");
	assert_string_equal(ibvf_guid_format_hex(0x0002c90300001001ull, h), "0002c90300001001");
	assert_string_equal(ibvf_guid_format(0xfedcba9876543210ull, s), "fe:dc:ba:98:76:54:32:10");
	assert_string_equal(ibvf_guid_format_hex(0xFEDCBA9876543210ull, h), "fedcba9876543210");
	assert_string_equal(ibvf_guid_format(0, s), "00:00:00:00:00:00:00:00");
	assert_string_equal(ibvf_guid_format(UINT64_MAX, s), "ff:ff:ff:ff:ff:ff:ff:ff");
	assert_string_equal(ibvf_guid_format_hex(1, h), "0000000000000001");
	assert_int_equal(strlen(s), IBVF_GUID_STR_LEN - 1);
	assert_int_equal(strlen(h), IBVF_GUID_HEX_LEN - 1);
}

static void test_guid_roundtrip(void **state)
{
	uint64_t v = 0x9e3779b97f4a7c15ull;

	(void)state;
	for (int i = 0; i < 1000; i++) {
		char s[IBVF_GUID_STR_LEN], h[IBVF_GUID_HEX_LEN], x[24];
		uint64_t a = 0, b = 0, c = 0;

		v = v * 6364136223846793005ull + 1442695040888963407ull;
		assert_int_equal(ibvf_guid_parse(ibvf_guid_format(v, s), &a, NULL, 0), 0);
		assert_int_equal(ibvf_guid_parse(ibvf_guid_format_hex(v, h), &b, NULL, 0), 0);
		snprintf(x, sizeof(x), "0x%016llX", (unsigned long long)v);
		assert_int_equal(ibvf_guid_parse(x, &c, NULL, 0), 0);
		assert_true(a == v && b == v && c == v);
		/* the table formatting is snprintf's, byte for byte */
		snprintf(x, sizeof(x), "%016llx", (unsigned long long)v);
		assert_string_equal(h, x);
		snprintf(x, sizeof(x), "%02x:%02x:%02x:%02x:%02x:%02x:%02x:%02x",
			 (unsigned)(v >> 56) & 0xff, (unsigned)(v >> 48) & 0xff,
			 (unsigned)(v >> 40) & 0xff, (unsigned)(v >> 32) & 0xff,
			 (unsigned)(v >> 24) & 0xff, (unsigned)(v >> 16) & 0xff,
			 (unsigned)(v >> 8) & 0xff, (unsigned)v & 0xff);
		assert_string_equal(s, x);
	}
}

static void test_guid_assignable(void **state)
{
	(void)state;
	assert_false(ibvf_guid_is_assignable(0));
	assert_false(ibvf_guid_is_assignable(IBVF_GUID_ALL_ONES));
	assert_false(ibvf_guid_is_assignable(UINT64_MAX));
	assert_true(ibvf_guid_is_assignable(1));
	assert_true(ibvf_guid_is_assignable(UINT64_MAX - 1));
	assert_true(ibvf_guid_is_assignable(0x0002c90300001001ull));
	assert_true(ibvf_guid_is_assignable(0x8000000000000000ull));
}

/* ------------------------------------------------------------- PKeys -- */

static const struct {
	const char *in;
	uint16_t want;
} pkey_ok[] = {
	{"0x8001", 0x8001}, {"0X8001", 0x8001}, {"0x0001", 0x0001}, {"0x1", 0x0001},
	{"0xffff", 0xffff}, {"0xFFFF", 0xffff}, {"0x7fff", 0x7fff}, {"0x0", 0},
	{"0x0000", 0},	    {"32769", 0x8001},	{"1", 1},	    {"0", 0},
	{"65535", 0xffff},  {"00001", 1},	{"32767", 0x7fff},  {"0xAbC", 0x0abc},
};

static void test_pkey_parse_accepts(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(pkey_ok) / sizeof(pkey_ok[0]); i++) {
		char err[IBVF_ERR_LEN] = "";
		uint16_t pk = 0x1234;
		int ret = ibvf_pkey_parse(pkey_ok[i].in, &pk, err, sizeof(err));

		if (ret || pk != pkey_ok[i].want)
			print_error("input '%s': ret %d value 0x%04x err '%s'\n", pkey_ok[i].in,
				    ret, pk, err);
		assert_int_equal(ret, 0);
		assert_int_equal(pk, pkey_ok[i].want);
	}
}

static const struct {
	const char *in;
	const char *frag;
} pkey_bad[] = {
	{"", "empty PKey"},
	{"0x", "invalid PKey '0x'"},
	{"0x10000", "invalid PKey '0x10000'"},
	{"0x00001", "invalid PKey '0x00001'"},
	{"65536", "invalid PKey '65536'"},
	{"99999", "invalid PKey '99999'"},
	{"123456", "invalid PKey '123456'"},
	{"-1", "invalid PKey '-1'"},
	{"+1", "invalid PKey '+1'"},
	{"abc", "invalid PKey 'abc'"},
	{"0x800g", "invalid PKey '0x800g'"},
	{"0x-1", "invalid PKey '0x-1'"},
	{" 1", "invalid PKey ' 1'"},
	{"1 ", "invalid PKey '1 '"},
	{"0x8001 ", "invalid PKey '0x8001 '"},
	{"1.0", "invalid PKey '1.0'"},
	{"1e3", "invalid PKey '1e3'"},
	{"x8001", "invalid PKey 'x8001'"},
	{"0b1", "invalid PKey '0b1'"},
	{"full", "invalid PKey 'full'"},
};

static void test_pkey_parse_rejects(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(pkey_bad) / sizeof(pkey_bad[0]); i++) {
		char err[IBVF_ERR_LEN] = "";
		uint16_t pk = 0x1234;
		int ret = ibvf_pkey_parse(pkey_bad[i].in, &pk, err, sizeof(err));
		if (ret != -EINVAL)
			print_error("input '%s' was accepted as 0x%04x\n", pkey_bad[i].in, pk);
		assert_int_equal(ret, -EINVAL);
		assert_int_equal(pk, 0x1234);
		assert_contains(err, pkey_bad[i].frag);
	}
}

static void test_pkey_parse_decimal_is_decimal(void **state)
{
	uint16_t pk = 0;

	(void)state;
	/* "8001" without 0x is decimal 8001 (0x1f41), not the full-member key 0x8001 */
	assert_int_equal(ibvf_pkey_parse("8001", &pk, NULL, 0), 0);
	assert_int_equal(pk, 8001);
	assert_int_equal(ibvf_pkey_parse(NULL, &pk, NULL, 0), -EINVAL);
}

static void test_pkey_bits(void **state)
{
	(void)state;
	assert_int_equal(ibvf_pkey_key(0x8001), 0x0001);
	assert_int_equal(ibvf_pkey_key(0x0001), 0x0001);
	assert_int_equal(ibvf_pkey_key(0xffff), 0x7fff);
	assert_true(ibvf_pkey_is_full(0x8001));
	assert_false(ibvf_pkey_is_full(0x0001));
	assert_true(ibvf_pkey_is_full(0xffff));
	assert_false(ibvf_pkey_is_full(0x7fff));
	assert_int_equal(IBVF_PKEY_FULL_BIT, 0x8000);
}

static const struct {
	uint16_t pkey;
	bool allow_default;
	int want;
	const char *frag;
} tenant[] = {
	{0x0001, false, 0, NULL},
	{0x8001, false, 0, NULL},
	{0x7ffe, false, 0, NULL},
	{0xfffe, false, 0, NULL},
	{0x1234, true, 0, NULL},
	/* key 0 is reserved whatever the membership bit */
	{0x0000, false, -EINVAL, "PKey 0x0000: partition key 0x0000 is reserved"},
	{0x8000, false, -EINVAL, "PKey 0x8000: partition key 0x0000 is reserved"},
	{0x0000, true, -EINVAL, "reserved"},
	{0x8000, true, -EINVAL, "reserved"},
	/* default partition refused unless allowed, limited or full */
	{0x7fff, false, -EINVAL, "PKey 0x7fff is the default partition"},
	{0xffff, false, -EINVAL, "PKey 0xffff is the default partition"},
	{0x7fff, true, 0, NULL},
	{0xffff, true, 0, NULL},
};

static void test_pkey_check_tenant(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(tenant) / sizeof(tenant[0]); i++) {
		char err[IBVF_ERR_LEN] = "";
		int ret = ibvf_pkey_check_tenant(tenant[i].pkey, tenant[i].allow_default, err,
						 sizeof(err));

		if (ret != tenant[i].want)
			print_error("PKey 0x%04x allow_default %d: ret %d '%s'\n", tenant[i].pkey,
				    tenant[i].allow_default, ret, err);
		assert_int_equal(ret, tenant[i].want);
		if (tenant[i].frag)
			assert_contains(err, tenant[i].frag);
	}
	{
		char err[IBVF_ERR_LEN];

		assert_int_equal(ibvf_pkey_check_tenant(0x7fff, false, err, sizeof(err)), -EINVAL);
		assert_contains(err, "allow_default_pkey");
	}
}

static void test_membership(void **state)
{
	enum ibvf_membership m = IBVF_MEMBER_LIMITED;
	char err[IBVF_ERR_LEN];

	(void)state;
	assert_int_equal(ibvf_membership_parse("full", &m, err, sizeof(err)), 0);
	assert_int_equal(m, IBVF_MEMBER_FULL);
	assert_int_equal(ibvf_membership_parse("LIMITED", &m, err, sizeof(err)), 0);
	assert_int_equal(m, IBVF_MEMBER_LIMITED);
	assert_int_equal(ibvf_membership_parse("Full", &m, err, sizeof(err)), 0);
	assert_int_equal(m, IBVF_MEMBER_FULL);
	assert_int_equal(ibvf_membership_parse("both", &m, err, sizeof(err)), -EINVAL);
	assert_contains(err, "invalid membership 'both'");
	assert_int_equal(ibvf_membership_parse("", &m, err, sizeof(err)), -EINVAL);
	assert_int_equal(ibvf_membership_parse(NULL, &m, err, sizeof(err)), -EINVAL);
	assert_string_equal(ibvf_membership_name(IBVF_MEMBER_FULL), "full");
	assert_string_equal(ibvf_membership_name(IBVF_MEMBER_LIMITED), "limited");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_guid_parse_accepts),
		cmocka_unit_test(test_guid_parse_rejects),
		cmocka_unit_test(test_guid_parse_null_and_long),
		cmocka_unit_test(test_guid_format),
		cmocka_unit_test(test_guid_roundtrip),
		cmocka_unit_test(test_guid_assignable),
		cmocka_unit_test(test_pkey_parse_accepts),
		cmocka_unit_test(test_pkey_parse_rejects),
		cmocka_unit_test(test_pkey_parse_decimal_is_decimal),
		cmocka_unit_test(test_pkey_bits),
		cmocka_unit_test(test_pkey_check_tenant),
		cmocka_unit_test(test_membership),
	};

	return cmocka_run_group_tests_name("types", tests, NULL, NULL);
}
