// SPDX-License-Identifier: MIT
/* Finding the running OpenSM and sending it SIGHUP (opensm_reload.h). */
#include "opensm_reload.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "file_read.h"

#define OPENSM_DEFAULT_CONF	  "/etc/opensm/opensm.conf"
#define OPENSM_DEFAULT_PARTITIONS "/etc/opensm/partitions.conf"

/*
 * Read a small regular file (a pid file, /proc/PID/comm or cmdline) of at
 * most @len - 1 bytes into @buf, NUL-terminated, through
 * ibvf_file_read_regular(): a FIFO in its place is refused at once, never
 * waited on. Returns the bytes read or -errno (-EINVAL: not a regular file,
 * -EFBIG: longer).
 */
static ssize_t read_small(const char *path, char *buf, size_t len)
{
	char *text;
	size_t n;
	int ret = ibvf_file_read_regular(path, len - 1, 0, &text, &n, NULL, NULL, 0);

	if (ret)
		return ret;
	memcpy(buf, text, n + 1);
	free(text);
	return (ssize_t)n;
}

/*
 * Is /proc/@pid a live opensm? Its state (the field after the last ')' of
 * /proc/PID/stat: a zombie 'Z' or dead 'X' process exited, whatever its
 * parent does) and its name: comm, or the file name of its exe.
 */
static int check_process(unsigned long pid, const char *pid_file, char *err, size_t errlen)
{
	char path[64], stat[1024], exe[4096], comm[64], *open_p, *close_p, state;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%lu/stat", pid);
	n = read_small(path, stat, sizeof(stat));
	open_p = n > 0 ? strchr(stat, '(') : NULL;
	close_p = n > 0 ? strrchr(stat, ')') : NULL;
	if (!open_p || !close_p || close_p < open_p || close_p[1] != ' ' || !close_p[2])
		return ibvf_errf(err, errlen, -ESRCH,
				 "OpenSM is not running: no process %lu "
				 "(from %s)",
				 pid, pid_file);
	state = close_p[2];
	snprintf(comm, sizeof(comm), "%.*s", (int)(close_p - open_p - 1), open_p + 1);
	if (state == 'Z' || state == 'X')
		return ibvf_errf(err, errlen, -ESRCH,
				 "OpenSM is not running: process %lu (from %s, '%s') has exited "
				 "(state %c, %s)",
				 pid, pid_file, comm, state,
				 state == 'Z' ? "a zombie its parent has not reaped" : "dead");
	if (!strcmp(comm, "opensm"))
		return 0;
	snprintf(path, sizeof(path), "/proc/%lu/exe", pid);
	n = readlink(path, exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		if (!strcmp(strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe, "opensm"))
			return 0;
	}
	return ibvf_errf(err, errlen, -ESRCH,
			 "process %lu (from %s) is '%s', not "
			 "opensm; refusing to signal it",
			 pid, pid_file, comm);
}

int opensm_find(const char *pid_file, pid_t *pid, char *err, size_t errlen)
{
	char buf[64], *end;
	unsigned long v;
	ssize_t n;
	int ret;

	n = read_small(pid_file, buf, sizeof(buf));
	/* -ESRCH, not -ENOENT: the SM is not running (e.g. restarting), retried */
	if (n == -ENOENT)
		return ibvf_errf(err, errlen, -ESRCH,
				 "OpenSM pid file %s does not exist (is "
				 "OpenSM running?)",
				 pid_file);
	if (n == -EINVAL)
		return ibvf_errf(err, errlen, -EINVAL, "OpenSM pid file %s is not a regular file",
				 pid_file);
	if (n < 0)
		return ibvf_errf(err, errlen, (int)n, "OpenSM pid file %s: %s", pid_file,
				 strerror((int)-n));
	errno = 0;
	v = strtoul(buf, &end, 10);
	while (isspace((unsigned char)*end))
		end++;
	if (errno || end == buf || *end || v < 2 || v > 0x3fffffff)
		return ibvf_errf(err, errlen, -EINVAL,
				 "OpenSM pid file %s does not hold a "
				 "process id",
				 pid_file);
	ret = check_process(v, pid_file, err, errlen);
	if (ret)
		return ret;
	*pid = (pid_t)v;
	return 0;
}

int opensm_reload(const char *pid_file, pid_t *pid, char *err, size_t errlen)
{
	int ret = opensm_find(pid_file, pid, err, errlen);

	if (ret)
		return ret;
	if (kill(*pid, SIGHUP))
		return ibvf_errf(err, errlen, -errno, "SIGHUP to opensm pid %d: %s", (int)*pid,
				 strerror(errno));
	return 0;
}

/*
 * The value of option @lng (or its short form -@s) at argv[*i], as OpenSM's
 * getopt_long_only() takes it: "-P x", "-Px", "-Pconfig x", "--Pconfig x",
 * "--Pconfig=x". NULL when argv[*i] is another option.
 */
static const char *opt_value(int argc, char **argv, int *i, char s, const char *lng)
{
	const char *a = argv[*i], *n = a + 1 + (a[1] == '-');
	size_t l = strlen(lng);

	if (!strcmp(n, lng) || (a[1] == s && !a[2]))
		return *i + 1 < argc ? argv[++*i] : NULL;
	if (!strncmp(n, lng, l) && n[l] == '=')
		return n + l + 1;
	if (a[1] == s && a[2])
		return a + 2;
	return NULL;
}

/* partition_config_file of an opensm.conf into @buf: 1 found, 0 not. */
static int conf_partition_file(const char *conf, char *buf, size_t len)
{
	int fd = ibvf_file_open_regular(conf, 0, NULL, NULL, 0);
	FILE *f = fd >= 0 ? fdopen(fd, "re") : NULL;
	char line[1024];
	int found = 0;

	if (!f) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while (fgets(line, sizeof(line), f)) {
		char key[64], val[960];

		if (sscanf(line, " %63s %959s", key, val) == 2 &&
		    !strcmp(key, "partition_config_file")) {
			snprintf(buf, len, "%s", val);
			found = 1;
		}
	}
	fclose(f);
	return found;
}

int opensm_partition_path(pid_t pid, char *buf, size_t len, char *err, size_t errlen)
{
	char path[64], cmd[8192], *argv[256];
	const char *pconf = NULL, *conf = NULL;
	ssize_t n;
	int argc = 0;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	n = read_small(path, cmd, sizeof(cmd));
	if (n < 0)
		return ibvf_errf(err, errlen, (int)n, "%s: %s", path, strerror((int)-n));
	for (ssize_t o = 0; o < n && argc < 256; o += (ssize_t)strlen(cmd + o) + 1)
		argv[argc++] = cmd + o;
	for (int i = 1; i < argc; i++) {
		const char *v;

		if (argv[i][0] != '-')
			continue;
		if ((v = opt_value(argc, argv, &i, 'P', "Pconfig")))
			pconf = v;
		else if ((v = opt_value(argc, argv, &i, 'F', "config")))
			conf = v;
	}
	if (pconf) {
		snprintf(buf, len, "%s", pconf);
		return 0;
	}
	if (!conf_partition_file(conf ? conf : OPENSM_DEFAULT_CONF, buf, len))
		snprintf(buf, len, "%s", OPENSM_DEFAULT_PARTITIONS);
	return 0;
}
