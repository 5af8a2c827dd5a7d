// SPDX-License-Identifier: MIT
/* Unit tests: CNI result layouts and their conversion between spec versions (cni/cni_result.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cni_result.h"
#include "err.h"

static char err[IBVF_ERR_LEN];

static json_t *load(const char *text)
{
	json_t *j = json_loads(text, 0, NULL);

	assert_non_null(j);
	return j;
}

static const char *str(json_t *o, const char *path0, size_t i, const char *key)
{
	return json_string_value(
		json_object_get(json_array_get(json_object_get(o, path0), i), key));
}

static void normalize_031_ipam(void **state)
{
	json_t *in = load("{\"cniVersion\":\"0.3.1\",\"ips\":[{\"version\":\"4\",\"address\":"
			  "\"10.1.0.5/16\",\"gateway\":\"10.1.0.1\"},{\"version\":\"6\","
			  "\"address\":\"fd00::5/64\"}],\"routes\":[{\"dst\":\"0.0.0.0/0\"}],"
			  "\"dns\":{\"nameservers\":[\"10.1.0.1\"]}}");
	json_t *out = NULL;

	(void)state;
	assert_int_equal(cni_result_normalize(in, "1.0.0", &out, err, sizeof(err)), 0);
	assert_null(json_object_get(json_array_get(json_object_get(out, "ips"), 0), "version"));
	assert_string_equal(str(out, "ips", 1, "address"), "fd00::5/64");
	assert_string_equal(str(out, "routes", 0, "dst"), "0.0.0.0/0");
	assert_non_null(json_object_get(out, "dns"));
	json_decref(in);
	json_decref(out);
}

static void normalize_020(void **state)
{
	json_t *in =
		load("{\"cniVersion\":\"0.2.0\",\"ip4\":{\"ip\":\"10.2.0.9/24\",\"gateway\":"
		     "\"10.2.0.1\",\"routes\":[{\"dst\":\"10.9.0.0/16\",\"gw\":\"10.2.0.254\"}]},"
		     "\"ip6\":{\"ip\":\"fd01::9/64\"}}");
	json_t *out = NULL;

	(void)state;
	assert_int_equal(cni_result_normalize(in, "0.2.0", &out, err, sizeof(err)), 0);
	assert_int_equal(json_array_size(json_object_get(out, "ips")), 2);
	assert_string_equal(str(out, "ips", 0, "gateway"), "10.2.0.1");
	assert_string_equal(str(out, "routes", 0, "gw"), "10.2.0.254");
	json_decref(in);
	json_decref(out);
}

static void normalize_rejects(void **state)
{
	static const char *const bad[] = {
		"{\"ips\":[{\"address\":\"10.1.0.5\"}]}",
		"{\"ips\":[{\"address\":\"10.1.0.5/40\"}]}",
		"{\"ips\":[{\"address\":\"10.1.0.5/24\",\"gateway\":\"fd00::1\"}]}",
		"{\"ips\":[{\"address\":\"10.1.0.5/24\",\"interface\":0}]}",
		("{\"interfaces\":[{\"name\":\"a\"}],\"ips\":[{\"address\":\"10.1.0.5/24\","
		 "\"interface\":1}]}"),
		"{\"routes\":[{\"dst\":\"10.0.0.0/8\",\"gw\":\"fd00::1\"}]}",
		"{\"routes\":[{\"gw\":\"10.0.0.1\"}]}",
		"{\"interfaces\":[{\"mac\":\"x\"}]}",
		"{\"cniVersion\":\"7.0.0\"}",
		"[]",
	};
	json_t *out;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *in = load(bad[i]);

		out = NULL;
		if (cni_result_normalize(in, "1.0.0", &out, err, sizeof(err)) != -EINVAL)
			fail_msg("accepted: %s", bad[i]);
		assert_null(out);
		json_decref(in);
	}
}

static json_t *sample(void)
{
	json_t *res = cni_result_new(), *ipam;
	int idx;

	idx = cni_result_add_interface(res, "net1",
				       "80:00:00:48:fe:80:00:00:00:00:00:00:02:00:"
				       "00:00:00:00:00:01",
				       2044, "/var/run/netns/p", "0000:03:00.2");
	assert_int_equal(idx, 0);
	ipam = load("{\"ips\":[{\"address\":\"10.1.0.5/16\",\"gateway\":\"10.1.0.1\"},"
		    "{\"address\":\"fd00::5/64\"}],\"routes\":[{\"dst\":\"10.9.0.0/16\","
		    "\"mtu\":2000,\"priority\":5},{\"dst\":\"fd09::/64\"}]}");
	assert_int_equal(cni_result_merge_ipam(res, ipam, idx), 0);
	json_decref(ipam);
	return res;
}

static void convert_110_and_100(void **state)
{
	json_t *res = sample(), *o;

	(void)state;
	o = cni_result_convert(res, "1.1.0");
	assert_string_equal(json_string_value(json_object_get(o, "cniVersion")), "1.1.0");
	assert_string_equal(str(o, "interfaces", 0, "pciID"), "0000:03:00.2");
	assert_int_equal(json_integer_value(json_object_get(
				 json_array_get(json_object_get(o, "interfaces"), 0), "mtu")),
			 2044);
	assert_int_equal(json_integer_value(json_object_get(
				 json_array_get(json_object_get(o, "ips"), 1), "interface")),
			 0);
	json_decref(o);
	o = cni_result_convert(res, "1.0.0");
	assert_null(str(o, "interfaces", 0, "pciID"));
	assert_null(json_object_get(json_array_get(json_object_get(o, "routes"), 0), "mtu"));
	assert_null(json_object_get(json_array_get(json_object_get(o, "ips"), 0), "version"));
	assert_string_equal(str(o, "interfaces", 0, "sandbox"), "/var/run/netns/p");
	json_decref(o);
	json_decref(res);
}

static void convert_031_and_020(void **state)
{
	json_t *res = sample(), *o;

	(void)state;
	o = cni_result_convert(res, "0.3.1");
	assert_string_equal(str(o, "ips", 0, "version"), "4");
	assert_string_equal(str(o, "ips", 1, "version"), "6");
	assert_null(str(o, "interfaces", 0, "pciID"));
	json_decref(o);
	o = cni_result_convert(res, "0.2.0");
	assert_null(json_object_get(o, "ips"));
	assert_string_equal(json_string_value(json_object_get(json_object_get(o, "ip4"), "ip")),
			    "10.1.0.5/16");
	assert_string_equal(json_string_value(json_object_get(json_object_get(o, "ip6"), "ip")),
			    "fd00::5/64");
	assert_int_equal(json_array_size(json_object_get(json_object_get(o, "ip4"), "routes")), 1);
	assert_string_equal(json_string_value(json_object_get(o, "cniVersion")), "0.2.0");
	json_decref(o);
	json_decref(res);
}

static void error_and_version_objects(void **state)
{
	json_t *e = cni_error_new("0.4.0", 7, "invalid network configuration", "pkey: bad");
	json_t *v = cni_version_result(NULL);

	(void)state;
	assert_string_equal(json_string_value(json_object_get(e, "cniVersion")), "0.4.0");
	assert_int_equal(json_integer_value(json_object_get(e, "code")), 7);
	assert_string_equal(json_string_value(json_object_get(e, "details")), "pkey: bad");
	json_decref(e);
	e = cni_error_new(NULL, 11, "try later", NULL);
	assert_null(json_object_get(e, "details"));
	assert_string_equal(json_string_value(json_object_get(e, "cniVersion")), "1.1.0");
	json_decref(e);
	assert_int_equal(json_array_size(json_object_get(v, "supportedVersions")), 7);
	json_decref(v);
}

static void ip_family(void **state)
{
	(void)state;
	assert_int_equal(cni_ip_family("10.0.0.1"), 4);
	assert_int_equal(cni_ip_family("10.0.0.1/32"), 4);
	assert_int_equal(cni_ip_family("fe80::1/128"), 6);
	assert_int_equal(cni_ip_family("fe80::1/129"), 0);
	assert_int_equal(cni_ip_family("10.0.0.1/"), 0);
	assert_int_equal(cni_ip_family("10.0.0.256"), 0);
	assert_int_equal(cni_ip_family(NULL), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(normalize_031_ipam),  cmocka_unit_test(normalize_020),
		cmocka_unit_test(normalize_rejects),   cmocka_unit_test(convert_110_and_100),
		cmocka_unit_test(convert_031_and_020), cmocka_unit_test(error_and_version_objects),
		cmocka_unit_test(ip_family),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
