// SPDX-License-Identifier: MIT
/* Unit tests: ib-sriov CNI environment and network configuration parsing (cni/cni_config.c). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include <cmocka.h>

#include "cni_config.h"
#include "err.h"
#include "log.h"
#include "testutil.h"

static char err[IBVF_ERR_LEN];

static void env_add_needs_three(void **state)
{
	const char *envp[] = {"CNI_COMMAND=ADD", "CNI_PATH=/opt/cni/bin", NULL};
	struct cni_env e;

	(void)state;
	assert_int_equal(cni_env_load(&e, tu_strv(envp), err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "CNI_CONTAINERID"));
	assert_non_null(strstr(err, "CNI_IFNAME"));
	assert_non_null(strstr(err, "CNI_NETNS"));
}

static void env_del_without_netns(void **state)
{
	const char *envp[] = {"CNI_COMMAND=DEL", "CNI_CONTAINERID=abc-1.x_y", "CNI_IFNAME=net1",
			      "CNI_NETNS=", NULL};
	struct cni_env e;

	(void)state;
	assert_int_equal(cni_env_load(&e, tu_strv(envp), err, sizeof(err)), 0);
	assert_int_equal(e.cmd, CNI_CMD_DEL);
	assert_null(e.netns);
	cni_env_free(&e);
}

static void env_bad_values(void **state)
{
	const char *bad_id[] = {"CNI_COMMAND=ADD", "CNI_CONTAINERID=-abc", "CNI_IFNAME=net1",
				"CNI_NETNS=/x", NULL};
	const char *bad_if[] = {"CNI_COMMAND=ADD", "CNI_CONTAINERID=abc", "CNI_IFNAME=net/1",
				"CNI_NETNS=/x", NULL};
	const char *long_if[] = {"CNI_COMMAND=ADD", "CNI_CONTAINERID=abc",
				 "CNI_IFNAME=abcdefghijklmnop", "CNI_NETNS=/x", NULL};
	const char *unknown[] = {"CNI_COMMAND=FROB", NULL};
	char *none[] = {NULL};
	struct cni_env e;

	(void)state;
	assert_int_equal(cni_env_load(&e, tu_strv(bad_id), err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "CNI_CONTAINERID"));
	assert_int_equal(cni_env_load(&e, tu_strv(bad_if), err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "CNI_IFNAME"));
	assert_int_equal(cni_env_load(&e, tu_strv(long_if), err, sizeof(err)), -EINVAL);
	assert_int_equal(cni_env_load(&e, tu_strv(unknown), err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "FROB"));
	assert_int_equal(cni_env_load(&e, none, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "CNI_COMMAND"));
}

static void env_pod_identity(void **state)
{
	const char *envp[] = {
		"CNI_COMMAND=GC",
		"CNI_ARGS=IgnoreUnknown=1;K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=trainer-0;"
		"junk;K8S_POD_UID=1234-5678;K8S_POD_INFRA_CONTAINER_ID=ab",
		NULL};
	struct cni_env e;

	(void)state;
	assert_int_equal(cni_env_load(&e, tu_strv(envp), err, sizeof(err)), 0);
	assert_string_equal(e.pod_namespace, "team-a");
	assert_string_equal(e.pod_name, "trainer-0");
	assert_string_equal(e.pod_uid, "1234-5678");
	cni_env_free(&e);
}

static void args_get_values(void **state)
{
	char *v = NULL;

	(void)state;
	assert_int_equal(cni_args_get("A=1;B=x=y;C=", "B", &v, err, sizeof(err)), 0);
	assert_string_equal(v, "x=y");
	free(v);
	assert_int_equal(cni_args_get("A=1;C=", "C", &v, err, sizeof(err)), 0);
	assert_string_equal(v, "");
	free(v);
	assert_int_equal(cni_args_get("AB=1", "A", &v, err, sizeof(err)), 0);
	assert_null(v);
	assert_int_equal(cni_args_get(NULL, "A", &v, err, sizeof(err)), 0);
	assert_null(v);
}

static int parse(struct cni_netconf *nc, const char *text, enum cni_command cmd,
		 enum cni_conf_error *kind)
{
	return cni_netconf_parse(nc, text, strlen(text), cmd, kind, err, sizeof(err));
}

static void full_ib_sriov_cni_config(void **state)
{
	static const char text[] =
		"{\"cniVersion\":\"0.3.1\",\"name\":\"ibnet\",\"type\":\"ib-sriov\","
		"\"deviceID\":\"0000:03:02.0\",\"pkey\":\"0x6\",\"link_state\":\"enable\","
		"\"rdmaIsolation\":true,\"ibKubernetesEnabled\":true,\"vfioPciMode\":false,"
		"\"capabilities\":{\"infinibandGUID\":true},"
		"\"runtimeConfig\":{\"infinibandGUID\":\"02:00:00:00:00:00:00:11\"},"
		"\"args\":{\"cni\":{\"guid\":\"02:00:00:00:00:00:00:22\","
		"\"mellanox.infiniband.app\":\"configured\"}},"
		"\"ipam\":{\"type\":\"host-local\",\"subnet\":\"10.56.217.0/24\"},"
		"\"vf\":0,\"mode\":\"rdma\"}";
	struct cni_netconf nc;
	enum cni_conf_error kind;

	(void)state;
	assert_int_equal(parse(&nc, text, CNI_CMD_ADD, &kind), 0);
	assert_int_equal(nc.version, 301);
	assert_string_equal(nc.name, "ibnet");
	assert_string_equal(nc.device_id, "0000:03:02.0");
	assert_int_equal(nc.n_pkeys, 1);
	assert_int_equal(nc.pkeys[0].key, 6);
	assert_int_equal(nc.pkeys[0].membership, IBVF_MEMBER_FULL);
	assert_int_equal(nc.link_state, CNI_LINK_STATE_ENABLE);
	assert_true(nc.rdma_isolation);
	assert_true(nc.ib_kubernetes_enabled);
	/* runtimeConfig wins over args.cni.guid, as in ib-sriov-cni */
	assert_int_equal(nc.guid, 0x0200000000000011ULL);
	assert_string_equal(nc.guid_source, "runtimeConfig.infinibandGUID");
	assert_string_equal(nc.ib_app_state, "configured");
	assert_string_equal(nc.ipam_type, "host-local");
	assert_int_equal(nc.rc_check, -1);
	assert_false(nc.rc_roce_default);
	assert_int_equal(nc.ibvfd_timeout_ms, CNI_DEFAULT_IBVFD_TIMEOUT_MS);
	assert_null(nc.ibvfd_socket);
	assert_int_equal(nc.pkey_index0, -1); /* absent: the SM backend's default */
	cni_netconf_free(&nc);
}

/* "pkeyIndex0" (issue 16, item 2): absent, true, false, or refused. */
static void pkey_index0_key(void **state)
{
	struct cni_netconf nc;
	enum cni_conf_error kind;

	(void)state;
	assert_int_equal(
		parse(&nc,
		      "{\"cniVersion\":\"1.0.0\",\"deviceID\":\"0000:03:02.0\",\"pkey\":\"0x6\","
		      "\"pkeyIndex0\":true}",
		      CNI_CMD_ADD, &kind),
		0);
	assert_int_equal(nc.pkey_index0, 1);
	cni_netconf_free(&nc);
	assert_int_equal(
		parse(&nc,
		      "{\"cniVersion\":\"1.0.0\",\"deviceID\":\"0000:03:02.0\",\"pkey\":\"0x6\","
		      "\"pkeyIndex0\":false}",
		      CNI_CMD_ADD, &kind),
		0);
	assert_int_equal(nc.pkey_index0, 0);
	cni_netconf_free(&nc);
	assert_int_not_equal(
		parse(&nc,
		      "{\"cniVersion\":\"1.0.0\",\"deviceID\":\"0000:03:02.0\",\"pkeyIndex0\":\"yes\"}",
		      CNI_CMD_ADD, &kind),
		0);
	assert_non_null(strstr(err, "pkeyIndex0"));
	cni_netconf_free(&nc);
}

static void guid_from_args_and_empty_runtime_config(void **state)
{
	static const char text[] =
		"{\"cniVersion\":\"1.0.0\",\"deviceID\":\"0000:03:02.0\","
		"\"runtimeConfig\":{\"infinibandGUID\":\"\"},"
		"\"args\":{\"cni\":{\"guid\":\"0200000000000033\",\"labels\":{\"x\":1},\"n\":2}}}";
	struct cni_netconf nc;
	enum cni_conf_error kind;

	(void)state;
	assert_int_equal(parse(&nc, text, CNI_CMD_ADD, &kind), 0);
	assert_int_equal(nc.guid, 0x0200000000000033ULL);
	assert_string_equal(nc.guid_source, "args.cni.guid");
	cni_netconf_free(&nc);
}

static void new_keys(void **state)
{
	static const char text[] =
		"{\"cniVersion\":\"1.1.0\",\"deviceID\":\"0000:03:02.0\",\"pkey\":\"0x10\","
		"\"membership\":\"limited\",\"pkeys\":[\"0x8020\",{\"pkey\":\"0x30\","
		"\"membership\":\"limited\"},{\"pkey\":\"16\",\"membership\":\"limited\"}],"
		"\"ibvfd\":{\"socket\":\"/run/x.sock\",\"timeout\":2.5},"
		"\"rcCheck\":{\"enabled\":false,\"iterations\":50,\"p99MaxUs\":900,"
		"\"roceDefaultPKey\":true},"
		"\"logLevel\":\"panic\",\"logFile\":\"/var/log/ib.log\",\"ipam\":{}}";
	struct cni_netconf nc;
	enum cni_conf_error kind;

	(void)state;
	assert_int_equal(parse(&nc, text, CNI_CMD_ADD, &kind), 0);
	assert_int_equal(nc.n_pkeys, 3);
	assert_int_equal(nc.pkeys[0].key, 0x10);
	assert_int_equal(nc.pkeys[0].membership, IBVF_MEMBER_LIMITED);
	assert_int_equal(nc.pkeys[1].key, 0x20);
	assert_int_equal(nc.pkeys[1].membership, IBVF_MEMBER_FULL);
	assert_int_equal(nc.pkeys[2].key, 0x30);
	assert_int_equal(nc.pkeys[2].membership, IBVF_MEMBER_LIMITED);
	assert_string_equal(nc.ibvfd_socket, "/run/x.sock");
	assert_int_equal(nc.ibvfd_timeout_ms, 2500);
	assert_int_equal(nc.rc_check, 0);
	assert_int_equal(nc.rc_iterations, 50);
	assert_true(nc.rc_roce_default);
	assert_int_equal(nc.rc_p99_max_us, 900);
	assert_int_equal(nc.log_level, LOG_ERR);
	assert_string_equal(nc.log_file, "/var/log/ib.log");
	assert_null(nc.ipam_type); /* "ipam": {} is no IPAM */
	cni_netconf_free(&nc);
}

static void expect_invalid(const char *text, const char *word)
{
	struct cni_netconf nc;
	enum cni_conf_error kind;

	assert_int_equal(parse(&nc, text, CNI_CMD_ADD, &kind), -EINVAL);
	assert_int_equal(kind, CNI_CONF_INVALID);
	if (!strstr(err, word))
		fail_msg("error \"%s\" does not name \"%s\"", err, word);
}

#define DEV "\"cniVersion\":\"1.0.0\",\"deviceID\":\"0000:03:02.0\","

static void invalid_values(void **state)
{
	(void)state;
	expect_invalid("{\"cniVersion\":\"1.0.0\"}", "deviceID");
	expect_invalid("{\"cniVersion\":\"1.0.0\",\"deviceID\":\"03:02.0\"}", "deviceID");
	expect_invalid("{" DEV "\"link_state\":\"up\"}", "link_state");
	expect_invalid("{" DEV "\"pkey\":\"0x0\"}", "pkey");
	expect_invalid("{" DEV "\"pkey\":\"0x10000\"}", "pkey");
	expect_invalid("{" DEV "\"pkey\":6}", "pkey");
	expect_invalid("{" DEV "\"pkey\":\"0x8006\",\"membership\":\"limited\"}", "0x8000");
	expect_invalid("{" DEV "\"membership\":\"full\"}", "membership");
	expect_invalid("{" DEV "\"pkeys\":[\"0x10\",{\"pkey\":\"0x10\",\"membership\":"
		       "\"limited\"}]}",
		       "twice");
	expect_invalid("{" DEV "\"pkeys\":[{\"key\":\"0x10\"}]}", "pkeys[0]");
	expect_invalid("{" DEV "\"pkeys\":\"0x10\"}", "pkeys");
	expect_invalid("{" DEV "\"rdmaIsolation\":\"yes\"}", "rdmaIsolation");
	expect_invalid("{" DEV "\"runtimeConfig\":{\"infinibandGUID\":\"xyz\"}}", "infinibandGUID");
	expect_invalid("{" DEV
		       "\"runtimeConfig\":{\"infinibandGUID\":\"00:00:00:00:00:00:00:00\"}}",
		       "not assignable");
	expect_invalid("{" DEV "\"args\":{\"cni\":{\"guid\":5}}}", "args.cni.guid");
	expect_invalid("{" DEV "\"ipam\":{\"type\":\"dhcp\"}}", "dhcp");
	expect_invalid("{" DEV "\"ipam\":{\"type\":\"../x\"}}", "ipam.type");
	expect_invalid("{" DEV "\"ibvfd\":{\"socket\":\"run/x\"}}", "ibvfd.socket");
	expect_invalid("{" DEV "\"ibvfd\":{\"timeout\":0}}", "ibvfd.timeout");
	expect_invalid("{" DEV "\"ibvfd\":{\"sock\":\"/x\"}}", "ibvfd.sock");
	expect_invalid("{" DEV "\"rcCheck\":{\"iterations\":0}}", "rcCheck.iterations");
	expect_invalid("{" DEV "\"logLevel\":\"loud\"}", "logLevel");
	expect_invalid("{" DEV "\"cni.dev/valid-attachments\":[{\"containerID\":1}]}",
		       "valid-attachments");
	expect_invalid("{" DEV "\"prevResult\":[]}", "prevResult");
}

static void decode_and_version_errors(void **state)
{
	struct cni_netconf nc;
	enum cni_conf_error kind;

	(void)state;
	assert_int_equal(parse(&nc, "{\"cniVersion\":", CNI_CMD_DEL, &kind), -EINVAL);
	assert_int_equal(kind, CNI_CONF_DECODE);
	assert_int_equal(parse(&nc, "[1]", CNI_CMD_DEL, &kind), -EINVAL);
	assert_int_equal(kind, CNI_CONF_DECODE);
	assert_int_equal(parse(&nc, "{\"cniVersion\":\"0.5.0\"}", CNI_CMD_DEL, &kind), -EINVAL);
	assert_int_equal(kind, CNI_CONF_VERSION);
	/* no cniVersion means 0.1.0 (spec); DEL does not need deviceID */
	assert_int_equal(parse(&nc, "{\"name\":\"n\"}", CNI_CMD_DEL, &kind), 0);
	assert_string_equal(nc.cni_version, "0.1.0");
	assert_null(nc.device_id);
	cni_netconf_free(&nc);
}

static void gc_valid_attachments(void **state)
{
	static const char text[] = "{\"cniVersion\":\"1.1.0\",\"name\":\"n\","
				   "\"cni.dev/valid-attachments\":[{\"containerID\":\"a\","
				   "\"ifname\":\"net1\"}]}";
	struct cni_netconf nc;
	enum cni_conf_error kind;

	(void)state;
	assert_int_equal(parse(&nc, text, CNI_CMD_GC, &kind), 0);
	assert_int_equal(json_array_size(nc.valid_attachments), 1);
	cni_netconf_free(&nc);
}

static void versions_and_pci(void **state)
{
	unsigned v;

	(void)state;
	assert_int_equal(cni_version_parse("1.1.0", &v), 0);
	assert_int_equal(v, 10100);
	assert_int_equal(cni_version_parse("1.1", &v), -EINVAL);
	assert_int_equal(cni_version_parse("1.1.0-rc1", &v), -EINVAL);
	assert_true(cni_version_supported(301));
	assert_true(cni_version_supported(200));
	assert_false(cni_version_supported(500));
	assert_true(cni_pci_addr_valid("0000:03:02.0"));
	assert_true(cni_pci_addr_valid("10000:e1:1f.7"));
	assert_false(cni_pci_addr_valid("0000:03:02.8"));
	assert_false(cni_pci_addr_valid("0000:03:02"));
	assert_false(cni_pci_addr_valid("0000-03:02.0"));
	assert_false(cni_pci_addr_valid("000g:03:02.0"));
	assert_true(cni_ifname_valid("net1"));
	assert_false(cni_ifname_valid(".."));
	assert_false(cni_ifname_valid("a b"));
	assert_false(cni_ifname_valid(""));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(env_add_needs_three),
		cmocka_unit_test(env_del_without_netns),
		cmocka_unit_test(env_bad_values),
		cmocka_unit_test(env_pod_identity),
		cmocka_unit_test(args_get_values),
		cmocka_unit_test(full_ib_sriov_cni_config),
		cmocka_unit_test(pkey_index0_key),
		cmocka_unit_test(guid_from_args_and_empty_runtime_config),
		cmocka_unit_test(new_keys),
		cmocka_unit_test(invalid_values),
		cmocka_unit_test(decode_and_version_errors),
		cmocka_unit_test(gc_valid_attachments),
		cmocka_unit_test(versions_and_pci),
	};

	ibvf_log_init("test", IBVF_LOG_NONE, LOG_ERR);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
