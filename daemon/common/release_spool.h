/* SPDX-License-Identifier: MIT */
/*
 * Release requests the CNI plugin leaves for ibvfd when a DEL cannot reach it
 * (issue 15 item 7: a runtime such as Podman never retries a failed DEL).
 *
 * One file per attachment, <spool>/<container_id>.<ifname>.json, written
 * atomically (temp file + rename, fsync'ed), mode 0600, in a directory of mode
 * 0700: {"version":1, "container_id", "ifname", "network", "guid",
 * "device_id", "created_ms"}. It names the owner only: no config, no secret.
 * The spool directory is "release.d" next to ibvfd's API socket, so a plugin
 * that knows the socket knows the spool (docs/cni.md, "ibvfd down at DEL").
 */
#ifndef IBVF_RELEASE_SPOOL_H
#define IBVF_RELEASE_SPOOL_H

#include <stddef.h>
#include <stdint.h>

#define IBVF_SPOOL_DIR_NAME "release.d"
#define IBVF_SPOOL_MAX_FILE 4096

/** One release request. */
struct ibvf_release_req {
	char container_id[256]; /* CNI_CONTAINERID */
	char ifname[16];	/* CNI_IFNAME */
	char network[256];	/* network name, "" unknown */
	uint64_t guid;		/* the GUID the plugin's cache named, 0 unknown (host order) */
	char device_id[32];	/* VF PCI address, "" unknown */
	int64_t created_ms;	/* wall clock, ms since the epoch */
};

/**
 * ibvf_spool_dir() - the spool directory for the API socket @socket:
 * dirname(@socket)/release.d, into @buf of @len bytes.
 * Return: 0, -ENAMETOOLONG.
 */
int ibvf_spool_dir(const char *socket, char *buf, size_t len);

/**
 * ibvf_spool_write() - write @r into @dir (created 0700 when absent, its
 * parent must exist), replacing an older request of the same attachment.
 * The container ID and ifname must be file-name safe (the CNI rules: no '/',
 * not "." or ".."). Return: 0, -EINVAL, or the errno of mkdir/open/write/
 * fsync/rename.
 */
int ibvf_spool_write(const char *dir, const struct ibvf_release_req *r, char *err, size_t errlen);

/**
 * ibvf_spool_scan() - call @cb for every request file in @dir ("*.json", a
 * regular file owned by the effective uid or root, at most
 * IBVF_SPOOL_MAX_FILE bytes; others are logged and skipped). @name is the
 * file name for ibvf_spool_remove(). A file that does not parse is given to
 * @cb with @r NULL (so the caller can log and drop it). @cb's non-zero
 * return stops the scan. Return: how many files were seen, 0 when @dir is
 * absent, or a negative errno (opendir).
 */
int ibvf_spool_scan(const char *dir,
		    int (*cb)(void *arg, const char *name, const struct ibvf_release_req *r),
		    void *arg, char *err, size_t errlen);

/** ibvf_spool_remove() - unlink @dir/@name. Return: 0 (also when absent) or -errno. */
int ibvf_spool_remove(const char *dir, const char *name);

#endif /* IBVF_RELEASE_SPOOL_H */
