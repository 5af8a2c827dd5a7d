// SPDX-License-Identifier: MIT
/*
 * ibvf_file_open_netns() and ibvf_file_open_append() (daemon/common/file_read.c):
 * a FIFO, a regular file or a device in the place of a netns path or of the
 * CNI plugin's logFile is refused at once, never waited on (issue 14). A
 * blocking open(2) would hang here: SIGALRM ends the test as a failure.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "file_read.h"

static char dir[64];

static void on_alarm(int sig)
{
	(void)sig;
	static const char m[] = "open blocked: not O_NONBLOCK (issue 14)\n";

	(void)!write(2, m, sizeof(m) - 1);
	_exit(1);
}

static const char *tpath(const char *name)
{
	static char p[128];

	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return p;
}

static void test_netns_fifo(void **s)
{
	char err[512] = "";
	int fd;

	(void)s;
	assert_int_equal(mkfifo(tpath("ns.fifo"), 0600), 0);
	alarm(5);
	fd = ibvf_file_open_netns(tpath("ns.fifo"), err, sizeof(err));
	alarm(0);
	assert_int_equal(fd, -EINVAL);
	assert_non_null(strstr(err, "not a network namespace"));
	assert_non_null(strstr(err, "FIFO"));
}

static void test_netns_regular_and_other_ns(void **s)
{
	char err[512] = "";
	int fd = open(tpath("ns.file"), O_CREAT | O_WRONLY, 0600);

	(void)s;
	close(fd);
	assert_int_equal(ibvf_file_open_netns(tpath("ns.file"), err, sizeof(err)), -EINVAL);
	/* another kind of namespace: not a netns */
	assert_int_equal(ibvf_file_open_netns("/proc/self/ns/mnt", err, sizeof(err)), -EINVAL);
	assert_int_equal(ibvf_file_open_netns(tpath("none"), err, sizeof(err)), -ENOENT);
	assert_int_equal(ibvf_file_open_netns("/dev/null", err, sizeof(err)), -EINVAL);
}

static void test_netns_ok(void **s)
{
	char err[512] = "";
	int fd = ibvf_file_open_netns("/proc/self/ns/net", err, sizeof(err));

	(void)s;
	assert_true(fd >= 0);
	assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
}

static void test_append_fifo(void **s)
{
	char err[512] = "";
	int fd, rd;

	(void)s;
	assert_int_equal(mkfifo(tpath("log.fifo"), 0600), 0);
	alarm(5);
	/* no reader: a blocking open(2) would wait for one */
	fd = ibvf_file_open_append(tpath("log.fifo"), 0600, err, sizeof(err));
	assert_int_equal(fd, -ENXIO);
	/* with a reader: opened, then refused by the type check */
	rd = open(tpath("log.fifo"), O_RDONLY | O_NONBLOCK);
	assert_true(rd >= 0);
	fd = ibvf_file_open_append(tpath("log.fifo"), 0600, err, sizeof(err));
	alarm(0);
	close(rd);
	assert_int_equal(fd, -EINVAL);
	assert_non_null(strstr(err, "not a regular file (a FIFO)"));
	assert_int_equal(ibvf_file_open_append("/dev/null", 0600, err, sizeof(err)), -EINVAL);
}

static void test_append_regular(void **s)
{
	char err[512] = "", buf[16] = "";
	struct stat st;
	int fd;

	(void)s;
	fd = ibvf_file_open_append(tpath("log"), 0600, err, sizeof(err));
	assert_true(fd >= 0);
	assert_false(fcntl(fd, F_GETFL) & O_NONBLOCK);
	assert_int_equal(write(fd, "a\n", 2), 2);
	close(fd);
	fd = ibvf_file_open_append(tpath("log"), 0600, err, sizeof(err));
	assert_int_equal(write(fd, "b\n", 2), 2);
	close(fd);
	assert_int_equal(stat(tpath("log"), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	fd = open(tpath("log"), O_RDONLY);
	assert_int_equal(read(fd, buf, sizeof(buf) - 1), 4);
	close(fd);
	assert_string_equal(buf, "a\nb\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_netns_fifo),
		cmocka_unit_test(test_netns_regular_and_other_ns),
		cmocka_unit_test(test_netns_ok),
		cmocka_unit_test(test_append_fifo),
		cmocka_unit_test(test_append_regular),
	};
	char cmd[128];
	int ret;

	signal(SIGALRM, on_alarm);
	snprintf(dir, sizeof(dir), "/tmp/ibvf-file-open-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	ret = cmocka_run_group_tests(tests, NULL, NULL);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		ret = ret ? ret : 1;
	return ret;
}
