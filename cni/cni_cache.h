/* SPDX-License-Identifier: MIT */
/*
 * ib-sriov CNI plugin: the per-attachment cache that ADD writes and DEL,
 * CHECK and GC read, at <dir>/<containerID>-<ifname> (default dir
 * /var/lib/cni/ib-sriov, mode 0700; files 0600, replaced atomically).
 *
 * The file is a superset of what ib-sriov-cni writes there (its NetConf:
 * the network configuration plus "Master", "VFID", "HostIFNames",
 * "HostIFGUID", "ContIFNames" and "RdmaNetState"), so DEL cleans up Pods
 * that ib-sriov-cni attached, and ib-sriov-cni can still clean up ours.
 * This plugin adds an "ibvf" object with a "version" field (docs/cni.md,
 * "Cache format"). A file without "ibvf" is read as ib-sriov-cni's format.
 */
#ifndef IBVF_CNI_CACHE_H
#define IBVF_CNI_CACHE_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cni_config.h"

#define CNI_DEFAULT_CACHE_DIR "/var/lib/cni/ib-sriov"
/** Version of the "ibvf" object this plugin writes. */
#define CNI_CACHE_VERSION 1

enum cni_mode {
	CNI_MODE_COMPAT = 0, /* ib-sriov-cni behaviour: GUID from the runtime */
	CNI_MODE_DAEMON = 1, /* ibvfd prepares and releases the VF */
};

/** One attachment's state. Strings are empty when unknown. */
struct cni_cache {
	int format; /* 0: written by ib-sriov-cni; else CNI_CACHE_VERSION */
	enum cni_mode mode;
	char container_id[256];
	char ifname[CNI_IFNAME_LEN];	  /* CNI_IFNAME (ib-sriov-cni "ContIFNames") */
	char netns[PATH_MAX];		  /* CNI_NETNS at ADD */
	char network[256];		  /* network name */
	char device_id[32];		  /* VF PCI address */
	char pf[CNI_IFNAME_LEN];	  /* PF netdev ("Master") */
	int vf_index;			  /* "VFID"; -1 unknown */
	char host_ifname[CNI_IFNAME_LEN]; /* VF netdev name in the host ("HostIFNames") */
	char temp_ifname[CNI_IFNAME_LEN]; /* temporary name used while moving */
	char prev_guid[24];		  /* GUID before ADD ("HostIFGUID"), compat mode */
	uint64_t guid;			  /* GUID of the attachment; 0 unknown */
	char mac[64];			  /* netdev hardware address after ADD */
	bool rdma_isolation;
	char rdma_dev[64];		/* RDMA device moved to the Pod netns ("RdmaNetState") */
	bool vfio;			/* vfio-pci: no netdev was moved */
	enum cni_link_state link_state; /* "link_state" of the configuration */
	bool ib_kubernetes_enabled;
	bool ipam;    /* an IPAM plugin was run */
	json_t *conf; /* the cached network configuration (owned) */
};

/**
 * cni_cache_dir() - the cache directory: $IBVF_CNI_CACHE_DIR when set (tests),
 * else CNI_DEFAULT_CACHE_DIR.
 */
const char *cni_cache_dir(void);

/** cni_cache_init() - an empty record (vf_index -1, link_state UNSET, conf NULL). */
void cni_cache_init(struct cni_cache *c);

/** cni_cache_free() - drop c->conf. */
void cni_cache_free(struct cni_cache *c);

/**
 * cni_cache_write() - write @c, with @conf (the network configuration as
 * received; "prevResult" and "cni.dev/..." keys are left out) as its base,
 * to <@dir>/<container_id>-<ifname>. Creates @dir (0700) when missing.
 * Return: 0 or a negative errno with the path in @err.
 */
int cni_cache_write(const char *dir, const struct cni_cache *c, json_t *conf, char *err,
		    size_t errlen);

/**
 * cni_cache_read() - read <@dir>/<@container_id>-<@ifname> in either format.
 * Return: 0 (c->conf set); -ENOENT when there is no file; -EINVAL for a file
 * that is not a cache object (@err says why); other negative errno.
 */
int cni_cache_read(const char *dir, const char *container_id, const char *ifname,
		   struct cni_cache *c, char *err, size_t errlen);

/**
 * cni_cache_parse() - fill @c from a cache object @root (a new reference is
 * taken into c->conf). @file_name is the entry's name, used to recover the
 * container ID from ib-sriov-cni files, which do not store it.
 */
int cni_cache_parse(json_t *root, const char *file_name, struct cni_cache *c, char *err,
		    size_t errlen);

/** cni_cache_remove() - delete the file; a missing file is success. */
int cni_cache_remove(const char *dir, const char *container_id, const char *ifname, char *err,
		     size_t errlen);

/**
 * cni_cache_foreach() - call @fn for every readable cache file in @dir
 * (temporary files skipped; unreadable files logged and skipped). @fn's
 * record is freed after it returns. A missing @dir is an empty cache.
 * Return: 0, or the first negative errno from opening @dir.
 */
int cni_cache_foreach(const char *dir, int (*fn)(struct cni_cache *c, void *arg), void *arg,
		      char *err, size_t errlen);

#endif /* IBVF_CNI_CACHE_H */
