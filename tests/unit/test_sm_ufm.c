// SPDX-License-Identifier: MIT
/*
 * ufm SM backend without a network: config validation (every key, every
 * cross-key rule, secrets never in errors), request bodies byte for byte,
 * the PKey list parser, and the built module's export table (dlopen + the
 * ELF dynamic symbol table: only ibvf_sm_backend_v2).
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "sm_ufm.h"
#include "ufm_http.h"

#define SECRET "pw-7f3e-SECRET"
#define TOKEN  "tok9b1c2d3e4f"

static const struct ibvf_sm_ops *ops;
static char dir[] = "/tmp/ibvf-ufm-unit.XXXXXX";
static char pw_file[PATH_MAX], tok_file[PATH_MAX], bad_tok_file[PATH_MAX], ca_file[PATH_MAX],
	nl_pw_file[PATH_MAX], empty_file[PATH_MAX];
static char err[512];

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	snprintf(pw_file, sizeof(pw_file), "%s/pw", dir);
	snprintf(nl_pw_file, sizeof(nl_pw_file), "%s/pw-nl", dir);
	snprintf(tok_file, sizeof(tok_file), "%s/tok", dir);
	snprintf(bad_tok_file, sizeof(bad_tok_file), "%s/tok-bad", dir);
	snprintf(ca_file, sizeof(ca_file), "%s/ca.pem", dir);
	snprintf(empty_file, sizeof(empty_file), "%s/empty", dir);
	write_file(pw_file, SECRET "\r\n");
	write_file(nl_pw_file, SECRET "\nsecond line\n");
	write_file(tok_file, TOKEN "\n");
	write_file(bad_tok_file, "tok " SECRET "\n");
	write_file(ca_file, "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n");
	write_file(empty_file, "\n");
	/* secret files: owner only (a group/other-readable one is refused) */
	chmod(pw_file, 0600);
	chmod(nl_pw_file, 0600);
	chmod(tok_file, 0600);
	chmod(bad_tok_file, 0600);
	chmod(empty_file, 0600);
	return 0;
}

static int teardown(void **state)
{
	const char *files[] = {pw_file, nl_pw_file, tok_file, bad_tok_file, ca_file, empty_file};

	(void)state;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		unlink(files[i]);
	rmdir(dir);
	return 0;
}

/* init() with a config printed from @fmt; the instance is released at once. */
static int try_init(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int try_init(const char *fmt, ...)
{
	struct ibvf_sm_backend *b = NULL;
	char cfg[4096];
	va_list ap;
	int ret;

	va_start(ap, fmt);
	vsnprintf(cfg, sizeof(cfg), fmt, ap);
	va_end(ap);
	err[0] = '\0';
	ret = ops->init(cfg, &b, err, sizeof(err));
	if (ret)
		assert_null(b);
	ops->fini(b);
	/* no error text ever carries a secret */
	assert_null(strstr(err, SECRET));
	assert_null(strstr(err, TOKEN));
	return ret;
}

static void expect_err(int ret, const char *needle)
{
	assert_int_equal(ret, -EINVAL);
	if (!strstr(err, needle))
		fail_msg("error '%s' lacks '%s'", err, needle);
}

/* --------------------------------------------------------------- config -- */

static void test_config_ok(void **state)
{
	(void)state;
	assert_int_equal(try_init("{\"address\":\"ufm.example.com\",\"username\":\"admin\","
				  "\"password_file\":\"%s\"}",
				  pw_file),
			 0);
	/* the keys daemon/config/config.c maps from ib-kubernetes' UFM_* variables */
	assert_int_equal(try_init("{\"username\":\"admin\",\"password\":\"" SECRET "\","
				  "\"address\":\"10.0.0.5\",\"scheme\":\"HTTPS\",\"port\":8443,"
				  "\"ca_pem\":\"-----BEGIN CERTIFICATE-----\\nMIIB\\n"
				  "-----END CERTIFICATE-----\\n\"}"),
			 0);
	assert_int_equal(try_init("{\"address\":\"fd00::5\",\"auth\":\"token\","
				  "\"token_file\":\"%s\",\"ca_file\":\"%s\","
				  "\"connect_timeout_ms\":100,\"timeout_ms\":200,"
				  "\"max_guids_per_request\":512}",
				  tok_file, ca_file),
			 0);
	assert_int_equal(try_init("{\"address\":\"ufm\",\"scheme\":\"http\",\"port\":80,"
				  "\"username\":\"admin\",\"password_file\":\"%s\"}",
				  pw_file),
			 0);
	assert_int_equal(try_init("{\"address\":\"ufm\",\"username\":\"a\",\"password_file\":"
				  "\"%s\",\"insecure_skip_verify\":true,\"client_cert\":\"%s\","
				  "\"client_key\":\"%s\"}",
				  pw_file, ca_file, tok_file),
			 0);
}

static void test_config_errors(void **state)
{
	(void)state;
	expect_err(try_init("{\"address\":\"u\",\"username\":\"a\",\"password_file\":\"%s\","
			    "\"passwrd\":1}",
			    pw_file),
		   "sm.config (ufm): passwrd: unknown key");
	expect_err(try_init("{}"), "address: is required");
	expect_err(try_init("{\"address\":\"https://ufm/x\",\"username\":\"a\","
			    "\"password_file\":\"%s\"}",
			    pw_file),
		   "is a URL");
	expect_err(try_init("{\"address\":\"u fm\"}"), "is not a host name");
	expect_err(try_init("{\"address\":\"ufm:8443\"}"), "looks like host:port");
	expect_err(try_init("{\"address\":\"fe80::1%%eth0\"}"), "is not a host name");
	expect_err(try_init("{\"address\":\"u\",\"scheme\":\"ftp\"}"), "scheme: 'ftp'");
	expect_err(try_init("{\"address\":\"u\",\"port\":0}"), "port: 0 is out of range");
	expect_err(try_init("{\"address\":\"u\",\"port\":65536}"), "port: 65536 is out of range");
	expect_err(try_init("{\"address\":\"u\",\"port\":\"443\"}"), "port: expected an integer");
	expect_err(try_init("{\"address\":\"u\",\"auth\":\"session\"}"), "auth: 'session'");
	/* certificate-only: a client certificate, no password or token (issue 16, item 6) */
	assert_int_equal(try_init("{\"address\":\"u\",\"auth\":\"certificate\","
				  "\"client_cert\":\"%s\",\"client_key\":\"%s\",\"index0\":false,"
				  "\"ip_over_ib\":false,\"change_wait_ms\":0}",
				  ca_file, tok_file),
			 0);
	expect_err(try_init("{\"address\":\"u\",\"auth\":\"certificate\"}"),
		   "client_cert: is required with auth \"certificate\"");
	expect_err(try_init("{\"address\":\"u\",\"auth\":\"certificate\",\"client_cert\":\"%s\","
			    "\"client_key\":\"%s\",\"username\":\"a\"}",
			    ca_file, tok_file),
		   "username: is not used with auth \"certificate\"");
	expect_err(try_init("{\"address\":\"u\",\"scheme\":\"http\",\"auth\":\"certificate\"}"),
		   "auth: is \"certificate\" but scheme is \"http\"");
	expect_err(try_init("{\"address\":\"u\",\"username\":\"a\",\"password_file\":\"%s\","
			    "\"change_wait_ms\":60001}",
			    pw_file),
		   "change_wait_ms: 60001 is out of range");
	expect_err(try_init("{\"address\":\"u\",\"password_file\":\"%s\"}", pw_file),
		   "username: is required");
	expect_err(try_init("{\"address\":\"u\",\"username\":\"a:b\",\"password_file\":\"%s\"}",
			    pw_file),
		   "must not contain ':'");
	expect_err(try_init("{\"address\":\"u\",\"username\":\"a\"}"),
		   "password_file: is required");
	expect_err(try_init("{\"address\":\"u\",\"username\":\"a\",\"password\":\"" SECRET "\","
			    "\"password_file\":\"%s\"}",
			    pw_file),
		   "either password or password_file");
	expect_err(try_init("{\"address\":\"u\",\"username\":\"a\","
			    "\"password_file\":\"%s/nope\"}",
			    dir),
		   "password_file: ");
	assert_non_null(strstr(err, "/nope: No such file or directory"));
	expect_err(try_init("{\"address\":\"u\",\"username\":\"a\",\"password_file\":\"%s\"}",
			    nl_pw_file),
		   "line break");
	expect_err(try_init("{\"address\":\"u\",\"username\":\"a\",\"password_file\":\"%s\"}",
			    empty_file),
		   "is empty");
	expect_err(try_init("{\"address\":\"u\",\"username\":\"a\",\"password_file\":\"%s\"}", dir),
		   "not a regular file");
	expect_err(try_init("{\"address\":\"u\",\"auth\":\"token\"}"), "token_file: is required");
	expect_err(try_init("{\"address\":\"u\",\"auth\":\"token\",\"token_file\":\"%s\"}",
			    bad_tok_file),
		   "white space");
	expect_err(try_init("{\"address\":\"u\",\"auth\":\"token\",\"token_file\":\"%s\","
			    "\"username\":\"a\"}",
			    tok_file),
		   "username: is not used with auth \"token\"");
	expect_err(try_init("{\"address\":\"u\",\"token_file\":\"%s\",\"username\":\"a\","
			    "\"password_file\":\"%s\"}",
			    tok_file, pw_file),
		   "token_file: is only used with auth \"token\"");
	expect_err(try_init("{\"address\":\"u\",\"username\":\"a\",\"password_file\":\"%s\","
			    "\"ca_file\":\"%s\",\"ca_pem\":\"-----BEGIN CERTIFICATE-----\"}",
			    pw_file, ca_file),
		   "either ca_file or ca_pem");
	expect_err(try_init("{\"address\":\"u\",\"username\":\"a\",\"password_file\":\"%s\","
			    "\"ca_pem\":\"junk\"}",
			    pw_file),
		   "ca_pem: holds no PEM certificate");
	expect_err(try_init("{\"address\":\"u\",\"username\":\"a\",\"password_file\":\"%s\","
			    "\"ca_file\":\"%s/none.pem\"}",
			    pw_file, dir),
		   "ca_file: ");
	assert_non_null(strstr(err, "/none.pem: No such file or directory"));
	expect_err(try_init("{\"address\":\"u\",\"username\":\"a\",\"password_file\":\"%s\","
			    "\"ca_file\":\"%s\",\"insecure_skip_verify\":true}",
			    pw_file, ca_file),
		   "insecure_skip_verify: is true but a CA");
	expect_err(try_init("{\"address\":\"u\",\"scheme\":\"http\",\"username\":\"a\","
			    "\"password_file\":\"%s\",\"ca_file\":\"%s\"}",
			    pw_file, ca_file),
		   "scheme: is \"http\" but TLS keys");
	expect_err(try_init("{\"address\":\"u\",\"username\":\"a\",\"password_file\":\"%s\","
			    "\"client_cert\":\"%s\"}",
			    pw_file, ca_file),
		   "client_key: client_cert and client_key go together");
	expect_err(try_init("{\"address\":\"u\",\"username\":\"a\",\"password_file\":\"%s\","
			    "\"connect_timeout_ms\":6000,\"timeout_ms\":5000}",
			    pw_file),
		   "connect_timeout_ms: 6000 is more than timeout_ms 5000");
	expect_err(try_init("{\"address\":\"u\",\"timeout_ms\":0}"),
		   "timeout_ms: 0 is out of range");
	expect_err(try_init("{\"address\":\"u\",\"insecure_skip_verify\":\"yes\"}"),
		   "expected true or false");
	expect_err(try_init("{\"address\":\"u\",\"address\":\"v\"}"), "duplicate");
	/* FIFOs in place of the secret or PEM files: refused at once, never waited on */
	{
		char fifo[PATH_MAX];

		snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
		assert_int_equal(mkfifo(fifo, 0600), 0);
		alarm(20);
		expect_err(try_init("{\"address\":\"u\",\"auth\":\"token\",\"token_file\":\"%s\"}",
				    fifo),
			   "token_file: ");
		assert_non_null(strstr(err, "is not a regular file"));
		expect_err(try_init("{\"address\":\"u\",\"username\":\"a\","
				    "\"password_file\":\"%s\"}",
				    fifo),
			   "is not a regular file");
		expect_err(try_init("{\"address\":\"u\",\"username\":\"a\",\"password_file\":"
				    "\"%s\",\"ca_file\":\"%s\"}",
				    pw_file, fifo),
			   "ca_file: ");
		assert_non_null(strstr(err, "is not a regular file"));
		alarm(0);
		unlink(fifo);
	}
	expect_err(try_init("[1]"), "expected a JSON object");
	expect_err(try_init("{\"address\":"), "sm.config (ufm):1:");
}

/*
 * Secret files (password_file, token_file, client_key) readable by group or
 * others, or owned by another user, are refused with the file, its mode and
 * owner named (issue 14, "Secrets"); a FIFO as client_key is refused at once.
 * Non-secret PEM files (ca_file, client_cert) may be world-readable.
 */
static void test_secret_file_mode_owner(void **state)
{
	char loose[PATH_MAX], key[PATH_MAX], fifo[PATH_MAX], want[PATH_MAX + 64];
	static const mode_t bad_modes[] = {0644, 0640, 0604, 0660, 0606};

	(void)state;
	snprintf(loose, sizeof(loose), "%s/loose", dir);
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	snprintf(fifo, sizeof(fifo), "%s/key-fifo", dir);
	write_file(loose, SECRET "\n");
	write_file(key, "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n");
	for (size_t i = 0; i < sizeof(bad_modes) / sizeof(bad_modes[0]); i++) {
		assert_int_equal(chmod(loose, bad_modes[i]), 0);
		snprintf(want, sizeof(want), "%s holds a secret but is mode %04o owned by uid %u",
			 loose, (unsigned)bad_modes[i], (unsigned)geteuid());
		expect_err(try_init("{\"address\":\"u\",\"username\":\"a\","
				    "\"password_file\":\"%s\"}",
				    loose),
			   "password_file: ");
		if (!strstr(err, want))
			fail_msg("error '%s' lacks '%s'", err, want);
		expect_err(try_init("{\"address\":\"u\",\"auth\":\"token\",\"token_file\":\"%s\"}",
				    loose),
			   "token_file: ");
		if (!strstr(err, want))
			fail_msg("error '%s' lacks '%s'", err, want);
	}
	/* 0400 and 0600 are fine */
	assert_int_equal(chmod(loose, 0400), 0);
	assert_int_equal(try_init("{\"address\":\"u\",\"username\":\"a\","
				  "\"password_file\":\"%s\"}",
				  loose),
			 0);
	/* client_key: the same rule; ca_file and client_cert stay world-readable */
	assert_int_equal(chmod(key, 0644), 0);
	expect_err(try_init("{\"address\":\"u\",\"username\":\"a\",\"password_file\":\"%s\","
			    "\"ca_file\":\"%s\",\"client_cert\":\"%s\",\"client_key\":\"%s\"}",
			    pw_file, ca_file, ca_file, key),
		   "client_key: ");
	assert_non_null(strstr(err, "mode 0644"));
	assert_int_equal(chmod(key, 0600), 0);
	assert_int_equal(try_init("{\"address\":\"u\",\"username\":\"a\",\"password_file\":"
				  "\"%s\",\"ca_file\":\"%s\",\"client_cert\":\"%s\","
				  "\"client_key\":\"%s\"}",
				  pw_file, ca_file, ca_file, key),
			 0);
	/* a FIFO as client_key: refused at once, never waited on */
	assert_int_equal(mkfifo(fifo, 0600), 0);
	alarm(20);
	expect_err(try_init("{\"address\":\"u\",\"username\":\"a\",\"password_file\":\"%s\","
			    "\"client_cert\":\"%s\",\"client_key\":\"%s\"}",
			    pw_file, ca_file, fifo),
		   "client_key: ");
	assert_non_null(strstr(err, "is not a regular file (a FIFO)"));
	alarm(0);
	/* owned by another user (needs root to chown; else that part is skipped) */
	if (geteuid() == 0) {
		assert_int_equal(chmod(loose, 0600), 0);
		assert_int_equal(chown(loose, 65534, 65534), 0);
		expect_err(try_init("{\"address\":\"u\",\"username\":\"a\","
				    "\"password_file\":\"%s\"}",
				    loose),
			   "password_file: ");
		snprintf(want, sizeof(want),
			 "%s holds a secret but is mode 0600 owned by uid 65534", loose);
		if (!strstr(err, want))
			fail_msg("error '%s' lacks '%s'", err, want);
		assert_int_equal(chown(key, 65534, 65534), 0);
		expect_err(try_init("{\"address\":\"u\",\"username\":\"a\",\"password_file\":"
				    "\"%s\",\"client_cert\":\"%s\",\"client_key\":\"%s\"}",
				    pw_file, ca_file, key),
			   "owned by uid 65534");
	} else {
		fprintf(stderr,
			"NOTE: not root: the other-owner case of secret files is not run\n");
	}
	unlink(loose);
	unlink(key);
	unlink(fifo);
}

/* A password given inline (UFM_PASSWORD) must not show up in any error either. */
static void test_config_error_hides_inline_password(void **state)
{
	(void)state;
	expect_err(try_init("{\"address\":\"u\",\"username\":\"a\",\"password\":\"" SECRET "\","
			    "\"bogus\":true}"),
		   "bogus: unknown key");
	expect_err(try_init("{\"address\":\"u\",\"username\":\"a:" SECRET "\","
			    "\"password\":\"x\"}"),
		   "username");
}

/* --------------------------------------------------------------- bodies -- */

static void test_add_body(void **state)
{
	const struct ibvf_sm_member full[] = {
		{0x0002c90300001001ull, IBVF_MEMBER_FULL},
		{0xFEDCBA9876543210ull, IBVF_MEMBER_FULL},
	};
	const struct ibvf_sm_member mixed[] = {
		{0x1ull, IBVF_MEMBER_LIMITED},
		{0x2ull, IBVF_MEMBER_FULL},
	};
	const struct ibvf_sm_pkey_flags f = {.index0 = true, .ipoib = false};
	char *s;

	(void)state;
	assert_int_equal(ufm_add_body(0xa5, full, 2, &f, &s), 0);
	assert_string_equal(s, "{\"pkey\":\"0x00A5\",\"guids\":[\"0002c90300001001\","
			       "\"fedcba9876543210\"],\"membership\":\"full\",\"index0\":true,"
			       "\"ip_over_ib\":false}");
	free(s);
	/* UFM's add ignores "memberships" (issue 16): a mixed body is refused, never built */
	s = (char *)"unset";
	assert_int_equal(ufm_add_body(0x7ffe, mixed, 2, NULL, &s), -EINVAL);
	assert_null(s);
	/* no flags: index0 true (ib-kubernetes, bare-metal-manager), ip_over_ib true */
	assert_int_equal(ufm_add_body(0x1, mixed, 1, NULL, &s), 0);
	assert_string_equal(s, "{\"pkey\":\"0x0001\",\"guids\":[\"0000000000000001\"],"
			       "\"membership\":\"limited\",\"index0\":true,\"ip_over_ib\":true}");
	free(s);
}

static void test_remove_body(void **state)
{
	const uint64_t g[] = {0x0002c90300001001ull, 0xABCDEF0123456789ull};
	char *s;

	(void)state;
	assert_int_equal(ufm_remove_body(0x2fb, g, 2, &s), 0);
	assert_string_equal(s, "{\"pkey\":\"0x02FB\",\"guids\":[\"0002c90300001001\","
			       "\"abcdef0123456789\"]}");
	free(s);
}

/* ---------------------------------------------------------------- parser -- */

struct coll {
	size_t n;
	uint16_t pk[8];
	struct ibvf_sm_member m[8];
};

static int collect(void *arg, uint16_t pkey, const struct ibvf_sm_member *m, bool managed)
{
	struct coll *c = arg;

	assert_true(managed);
	if (c->n < 8) {
		c->pk[c->n] = pkey;
		c->m[c->n] = *m;
	}
	c->n++;
	return 0;
}

static int parse(const char *body, int pkey, struct coll *c)
{
	memset(c, 0, sizeof(*c));
	err[0] = '\0';
	return ufm_parse_pkeys(body, strlen(body), pkey, collect, c, err, sizeof(err));
}

static void test_parse_reference_reply(void **state)
{
	/* the reply shape of the UFM guide / NVIDIA carbide's client */
	const char *body =
		"{\"0x2fb\":{\"guids\":[{\"guid\":\"946dae03005975c8\",\"index0\":true,"
		"\"membership\":\"full\"}],\"ip_over_ib\":true,\"partition\":\"api_pkey_0x2fb\"},"
		"\"0x7fff\":{\"guids\":[],\"index0\":false,\"ip_over_ib\":true,"
		"\"membership\":\"limited\",\"partition\":\"management\"}}";
	struct coll c;

	(void)state;
	assert_int_equal(parse(body, -1, &c), 0);
	assert_int_equal(c.n, 1);
	assert_int_equal(c.pk[0], 0x2fb);
	assert_true(c.m[0].guid == 0x946dae03005975c8ull);
	assert_int_equal(c.m[0].membership, IBVF_MEMBER_FULL);
	assert_int_equal(parse(body, 0x7fff, &c), 0);
	assert_int_equal(c.n, 0);
	assert_int_equal(parse("{}", -1, &c), 0);
	assert_int_equal(c.n, 0);
}

static void test_parse_lenient(void **state)
{
	struct coll c;

	(void)state;
	/* upper case, 0X, colon form, bare strings, null fields, membership bit in the key */
	assert_int_equal(parse("{\"0X00A5\":{\"guids\":[\"0002C90300001001\","
			       "{\"guid\":\"00:02:c9:03:00:00:10:02\",\"membership\":null},"
			       "{\"guid\":\"0X0002c90300001003\",\"membership\":\"Limited\"}],"
			       "\"membership\":\"LIMITED\"},\"0x80a6\":{\"guids\":null},"
			       "\"0xa7\":{}}",
			       -1, &c),
			 0);
	assert_int_equal(c.n, 3);
	assert_int_equal(c.pk[0], 0xa5);
	assert_true(c.m[0].guid == 0x0002c90300001001ull);
	assert_int_equal(c.m[0].membership, IBVF_MEMBER_LIMITED);
	assert_true(c.m[1].guid == 0x0002c90300001002ull);
	assert_int_equal(c.m[1].membership, IBVF_MEMBER_LIMITED);
	assert_true(c.m[2].guid == 0x0002c90300001003ull);
	/* a key with the membership bit set is the same partition */
	assert_int_equal(parse("{\"0x80a6\":{\"guids\":[\"0002c90300001001\"]}}", 0xa6, &c), 0);
	assert_int_equal(c.n, 1);
}

static void test_parse_malformed(void **state)
{
	static const struct {
		const char *body;
		const char *why;
	} t[] = {
		{"", "not JSON"},
		{"{\"0x1\":", "not JSON"},
		{"null", "not JSON"},
		{"\"x\"", "not JSON"},
		{"[]", "keyed by PKey"},
		{"{\"management\":{}}", "key \"management\" is not a PKey"},
		{"{\"0x\":{}}", "is not a PKey"},
		{"{\"0x12345\":{}}", "is not a PKey"},
		{"{\"0x0\":{}}", "is not a PKey"},
		{"{\"0x1\":[]}", "\"0x1\" is not an object"},
		{"{\"0x1\":{\"guids\":{}}}", "\"0x1\".guids is not an array"},
		{"{\"0x1\":{\"guids\":[1]}}", "\"0x1\".guids[0] is not an object"},
		{"{\"0x1\":{\"guids\":[{}]}}", "guids[0].guid is missing"},
		{"{\"0x1\":{\"guids\":[{\"guid\":7}]}}", "guids[0].guid is missing"},
		{"{\"0x1\":{\"guids\":[{\"guid\":\"0002c9030000100\"}]}}", "is not a GUID"},
		{"{\"0x1\":{\"guids\":[{\"guid\":\"0002c90300001001\",\"membership\":\"both\"}]}}",
		 "membership is not \"full\" or \"limited\""},
		{"{\"0x1\":{\"membership\":1}}", "\"0x1\".membership is not"},
		{"{\"0x1\":{},\"0x1\":{}}", "duplicate"},
	};
	struct coll c;

	(void)state;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		assert_int_equal(parse(t[i].body, -1, &c), -EBADMSG);
		if (!strstr(err, t[i].why) || !strstr(err, "malformed PKey list"))
			fail_msg("body %s: error '%s' lacks '%s'", t[i].body, err, t[i].why);
		assert_int_equal(c.n, 0);
	}
	/* a good PKey before a bad one reports nothing */
	assert_int_equal(parse("{\"0x1\":{\"guids\":[\"0002c90300001001\"]},\"0x2\":{\"guids\":"
			       "[\"zz\"]}}",
			       -1, &c),
			 -EBADMSG);
	assert_int_equal(c.n, 0);
}

static void test_error_text(void **state)
{
	char b[32];

	(void)state;
#define TEXT(s) (s), strlen(s)
	ufm_error_text(TEXT("{\"error\":\"pkey\\nbusy\"}"), b, sizeof(b));
	assert_string_equal(b, "pkey busy");
	ufm_error_text(TEXT("{\"message\":\"m\",\"x\":1}"), b, sizeof(b));
	assert_string_equal(b, "m");
	ufm_error_text(TEXT("{\"code\":7}"), b, sizeof(b));
	assert_string_equal(b, "{\"code\":7}");
	ufm_error_text(TEXT("\"quoted\""), b, sizeof(b));
	assert_string_equal(b, "quoted");
	ufm_error_text(TEXT("  <html>\r\n<body>Service Unavailable</body></html>"), b, sizeof(b));
#undef TEXT
	assert_string_equal(b, "<html>  <body>Service Unavailab");
	ufm_error_text("", 0, b, sizeof(b));
	assert_string_equal(b, "");
}

/* ---------------------------------------------------------------- module -- */

/*
 * Names of the defined, global or weak, default-visibility symbols in .dynsym
 * of @path, without the version node markers (IBVF_SM_2).
 */
static size_t exported(const char *path, char names[][64], size_t max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	size_t n = 0;
	const ElfW(Ehdr) * eh;
	const ElfW(Shdr) * sh;
	void *map;

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	assert_true(map != MAP_FAILED);
	eh = map;
	assert_memory_equal(eh->e_ident, ELFMAG, SELFMAG);
	sh = (const ElfW(Shdr) *)((const char *)map + eh->e_shoff);
	for (size_t i = 0; i < eh->e_shnum; i++) {
		const ElfW(Sym) * sym;
		const char *str;

		if (sh[i].sh_type != SHT_DYNSYM)
			continue;
		sym = (const ElfW(Sym) *)((const char *)map + sh[i].sh_offset);
		str = (const char *)map + sh[sh[i].sh_link].sh_offset;
		for (size_t k = 0; k < sh[i].sh_size / sizeof(*sym); k++) {
			int bind = ELF64_ST_BIND(sym[k].st_info);

			/* GNU ld adds an SHN_ABS symbol named after each version node */
			if (sym[k].st_shndx == SHN_UNDEF || sym[k].st_shndx == SHN_ABS ||
			    (bind != STB_GLOBAL && bind != STB_WEAK) ||
			    ELF64_ST_VISIBILITY(sym[k].st_other) != STV_DEFAULT)
				continue;
			if (n < max)
				snprintf(names[n], 64, "%s", str + sym[k].st_name);
			n++;
		}
	}
	munmap(map, (size_t)st.st_size);
	return n;
}

static void test_module_exports(void **state)
{
	const char *path = getenv("IBVF_UFM_MODULE");
	const struct ibvf_sm_ops *mops;
	ibvf_sm_entry_fn entry;
	char names[8][64];
	void *h;
	size_t n;

	(void)state;
	assert_non_null(path);
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		fail_msg("dlopen %s: %s", path, dlerror());
	*(void **)&entry = dlsym(h, IBVF_SM_ENTRY_SYMBOL);
	assert_non_null(entry);
	mops = entry();
	assert_int_equal(mops->abi_version, IBVF_SM_ABI_VERSION);
	assert_int_equal(mops->struct_size, sizeof(struct ibvf_sm_ops));
	assert_string_equal(mops->name, "ufm");
	assert_non_null(mops->init);
	assert_non_null(mops->fini);
	assert_non_null(mops->validate);
	assert_non_null(mops->add_members);
	assert_non_null(mops->remove_members);
	assert_non_null(mops->list_members);
	/* internal functions stay hidden */
	assert_null(dlsym(h, "ufm_http_call"));
	assert_null(dlsym(h, "ufm_parse_pkeys"));
	assert_null(dlsym(h, "ibvf_errf"));
	/* a config error through the loaded module */
	{
		struct ibvf_sm_backend *b = NULL;

		assert_int_equal(mops->init("{\"nope\":1}", &b, err, sizeof(err)), -EINVAL);
		assert_null(b);
	}
	assert_int_equal(dlclose(h), 0);
	n = exported(path, names, 8);
	for (size_t i = 0; i < n && i < 8; i++)
		printf("# exported: %s\n", names[i]);
	assert_int_equal(n, 1);
	assert_string_equal(names[0], IBVF_SM_ENTRY_SYMBOL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_config_ok),
		cmocka_unit_test(test_config_errors),
		cmocka_unit_test(test_secret_file_mode_owner),
		cmocka_unit_test(test_config_error_hides_inline_password),
		cmocka_unit_test(test_add_body),
		cmocka_unit_test(test_remove_body),
		cmocka_unit_test(test_parse_reference_reply),
		cmocka_unit_test(test_parse_lenient),
		cmocka_unit_test(test_parse_malformed),
		cmocka_unit_test(test_error_text),
		cmocka_unit_test(test_module_exports),
	};

	ops = &ufm_ops;
	return cmocka_run_group_tests_name("sm_ufm", tests, setup, teardown);
}
