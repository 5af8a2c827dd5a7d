// SPDX-License-Identifier: MIT
/* Release requests the CNI plugin leaves for ibvfd (release_spool.h). */
#include "release_spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "file_read.h"
#include "log.h"
#include "statedir.h"

int ibvf_spool_dir(const char *socket, char *buf, size_t len)
{
	const char *slash = strrchr(socket, '/');
	int n;

	if (!slash)
		n = snprintf(buf, len, "%s", IBVF_SPOOL_DIR_NAME);
	else
		n = snprintf(buf, len, "%.*s/%s", (int)(slash - socket), socket,
			     IBVF_SPOOL_DIR_NAME);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* A CNI container ID or ifname that can be part of a file name. */
static bool name_safe(const char *s)
{
	return s[0] && strcmp(s, ".") && strcmp(s, "..") && !strpbrk(s, "/ \t\n");
}

static int file_path(const char *dir, const char *cid, const char *ifname, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/%s.%s.json", dir, cid, ifname);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int ibvf_spool_write(const char *dir, const struct ibvf_release_req *r, char *err, size_t errlen)
{
	char path[PATH_MAX], g[32];
	json_t *o;
	char *text;
	int ret;

	if (!name_safe(r->container_id) || !name_safe(r->ifname))
		return ibvf_errf(err, errlen, -EINVAL,
				 "release request: container ID '%.64s' or ifname '%s' cannot "
				 "name a file",
				 r->container_id, r->ifname);
	if (mkdir(dir, 0700) && errno != EEXIST)
		return ibvf_errf(err, errlen, -errno, "creating release spool %s: %s", dir,
				 strerror(errno));
	ret = file_path(dir, r->container_id, r->ifname, path, sizeof(path));
	if (ret)
		return ibvf_errf(err, errlen, ret, "release spool path in %s too long", dir);
	snprintf(g, sizeof(g), "0x%016" PRIx64, r->guid);
	o = json_pack("{s:i,s:s,s:s,s:s,s:s,s:s,s:I}", "version", 1, "container_id",
		      r->container_id, "ifname", r->ifname, "network", r->network, "guid", g,
		      "device_id", r->device_id, "created_ms", (json_int_t)r->created_ms);
	text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!text)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	ret = ibvf_write_file_atomic(path, text, strlen(text), 0600, err, errlen);
	free(text);
	return ret;
}

static int parse(const char *text, struct ibvf_release_req *r)
{
	const char *cid = NULL, *ifname = NULL, *net = "", *g = "", *dev = "";
	json_int_t ver = 0, created = 0;
	json_error_t je;
	json_t *o = json_loads(text, 0, &je);
	int ret = -EINVAL;

	memset(r, 0, sizeof(*r));
	if (o &&
	    !json_unpack(o, "{s:I,s:s,s:s,s?s,s?s,s?s,s?I}", "version", &ver, "container_id", &cid,
			 "ifname", &ifname, "network", &net, "guid", &g, "device_id", &dev,
			 "created_ms", &created) &&
	    ver == 1 && name_safe(cid) && name_safe(ifname) &&
	    strlen(cid) < sizeof(r->container_id) && strlen(ifname) < sizeof(r->ifname)) {
		snprintf(r->container_id, sizeof(r->container_id), "%s", cid);
		snprintf(r->ifname, sizeof(r->ifname), "%s", ifname);
		snprintf(r->network, sizeof(r->network), "%s", net);
		snprintf(r->device_id, sizeof(r->device_id), "%s", dev);
		r->guid = strtoull(g, NULL, 0);
		r->created_ms = created;
		ret = 0;
	}
	json_decref(o);
	return ret;
}

int ibvf_spool_scan(const char *dir,
		    int (*cb)(void *arg, const char *name, const struct ibvf_release_req *r),
		    void *arg, char *err, size_t errlen)
{
	struct dirent *de;
	DIR *d = opendir(dir);
	int n = 0, stop = 0;

	if (!d && errno == ENOENT)
		return 0;
	if (!d)
		return ibvf_errf(err, errlen, -errno, "release spool %s: %s", dir, strerror(errno));
	while (!stop && (de = readdir(d))) {
		char path[PATH_MAX], e2[IBVF_ERR_LEN];
		struct ibvf_release_req r;
		size_t len = strlen(de->d_name), flen;
		struct stat st;
		char *text;
		int ret;

		if (len < 6 || de->d_name[0] == '.' || strcmp(de->d_name + len - 5, ".json"))
			continue; /* temp files of a write in progress, and foreign names */
		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		ret = ibvf_file_read_regular(path, IBVF_SPOOL_MAX_FILE, 0, &text, &flen, &st, e2,
					     sizeof(e2));
		if (!ret && st.st_uid != 0 && st.st_uid != geteuid()) {
			snprintf(e2, sizeof(e2), "owned by uid %u, not by root or ibvfd",
				 (unsigned)st.st_uid);
			free(text);
			ret = -EPERM;
		}
		if (ret) {
			log_warn("release spool: %s skipped: %s", path, e2);
			continue;
		}
		n++;
		ret = parse(text, &r);
		free(text);
		stop = cb(arg, de->d_name, ret ? NULL : &r);
	}
	closedir(d);
	return n;
}

int ibvf_spool_remove(const char *dir, const char *name)
{
	char path[PATH_MAX];

	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	return unlink(path) && errno != ENOENT ? -errno : 0;
}
