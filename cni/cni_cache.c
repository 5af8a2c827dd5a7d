// SPDX-License-Identifier: MIT
/* ib-sriov CNI plugin: per-attachment cache, compatible with ib-sriov-cni's. */
#include "cni_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "file_read.h"
#include "json_util.h"
#include "log.h"
#include "statedir.h"

const char *cni_cache_dir(void)
{
	const char *d = getenv("IBVF_CNI_CACHE_DIR");

	return d && *d ? d : CNI_DEFAULT_CACHE_DIR;
}

void cni_cache_init(struct cni_cache *c)
{
	memset(c, 0, sizeof(*c));
	c->vf_index = -1;
	c->link_state = CNI_LINK_STATE_UNSET;
	c->format = CNI_CACHE_VERSION;
}

void cni_cache_free(struct cni_cache *c)
{
	json_decref(c->conf);
	c->conf = NULL;
}

static int cache_path(char *buf, size_t len, const char *dir, const char *cid, const char *ifname,
		      char *err, size_t errlen)
{
	if (strchr(cid, '/') || strchr(ifname, '/'))
		return ibvf_errf(err, errlen, -EINVAL, "container ID or ifname contains '/'");
	if (snprintf(buf, len, "%s/%s-%s", dir, cid, ifname) >= (int)len)
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "cache path for %s-%s too long", cid,
				 ifname);
	return 0;
}

static json_t *str(const char *s)
{
	return json_string(s ? s : "");
}

/*
 * The entry: @conf's keys (a shallow copy: only top-level keys are added and
 * removed here, the nested values are shared with @conf and only dumped) with
 * ib-sriov-cni's runtime keys and ours.
 */
static json_t *build(const struct cni_cache *c, json_t *conf)
{
	json_t *o = conf ? json_copy(conf) : json_object(), *ibvf, *rdma;
	char guid[IBVF_GUID_STR_LEN] = "";
	const char *key;
	json_t *v;
	void *tmp;

	if (!o)
		return NULL;
	json_object_foreach_safe(o, tmp, key, v)
	{
		(void)v;
		if (!strcmp(key, "prevResult") || !strncmp(key, "cni.dev/", 8))
			json_object_del(o, key);
	}
	if (c->guid)
		ibvf_guid_format(c->guid, guid);
	rdma = json_pack("{s:s,s:o,s:o,s:o}", "version", c->rdma_dev[0] ? "1.0" : "", "deviceID",
			 str(c->rdma_dev[0] ? c->device_id : ""), "sandboxRdmaDevName",
			 str(c->rdma_dev), "containerRdmaDevName", str(c->rdma_dev));
	ibvf = json_pack("{s:i,s:s,s:o,s:o,s:o,s:o,s:o,s:o,s:b,s:b}", "version", CNI_CACHE_VERSION,
			 "mode", c->mode == CNI_MODE_DAEMON ? "daemon" : "compat", "containerID",
			 str(c->container_id), "ifname", str(c->ifname), "netns", str(c->netns),
			 "guid", str(guid), "mac", str(c->mac), "tempName", str(c->temp_ifname),
			 "vfio", c->vfio, "ipam", c->ipam);
	if (!rdma || !ibvf) {
		json_decref(rdma);
		json_decref(ibvf);
		json_decref(o);
		return NULL;
	}
	/* ib-sriov-cni's runtime keys (its pkg/types NetConf field names) */
	json_object_set_new(o, "deviceID", str(c->device_id));
	json_object_set_new(o, "Master", str(c->pf));
	json_object_set_new(o, "VFID", json_integer(c->vf_index < 0 ? 0 : c->vf_index));
	json_object_set_new(o, "HostIFNames", str(c->host_ifname));
	json_object_set_new(o, "HostIFGUID", str(c->prev_guid));
	json_object_set_new(o, "ContIFNames", str(c->ifname));
	json_object_set_new(o, "RdmaNetState", rdma);
	if (!json_is_object(json_object_get(o, "runtimeConfig")))
		json_object_set_new(o, "runtimeConfig", json_pack("{s:s}", "infinibandGUID", ""));
	if (!json_is_object(json_object_get(o, "args")))
		json_object_set_new(o, "args", json_pack("{s:{}}", "cni"));
	json_object_set_new(o, "ibvf", ibvf);
	return o;
}

/*
 * Write-temp + rename, without fsync: a reader never sees a half-written
 * entry, and the entry is advisory (DEL also works from the configuration
 * and the ifalias mark) while a crash that loses it also loses every netns it
 * describes. ib-sriov-cni does not fsync either. Saves 2-5 ms per ADD.
 */
static int write_replace(const char *path, const char *text, char *err, size_t errlen)
{
	return ibvf_file_replace(path, text, strlen(text), 0600, 0, err, errlen);
}

int cni_cache_write(const char *dir, const struct cni_cache *c, json_t *conf, char *err,
		    size_t errlen)
{
	char path[PATH_MAX];
	json_t *o;
	char *text;
	int ret;

	ret = cache_path(path, sizeof(path), dir, c->container_id, c->ifname, err, errlen);
	if (ret)
		return ret;
	ret = ibvf_dir_prepare(dir, 0700, true, err, errlen);
	if (ret)
		return ret;
	o = build(c, conf);
	text = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!text)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	ret = write_replace(path, text, err, errlen);
	free(text);
	return ret;
}

static void copy_str(char *dst, size_t len, json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));

	snprintf(dst, len, "%s", s ? s : "");
}

static void parse_link_state(struct cni_cache *c, json_t *root)
{
	const char *s = json_string_value(json_object_get(root, "link_state"));
	enum ibvf_vf_link_state ls;

	c->link_state = CNI_LINK_STATE_UNSET;
	if (s && !ibvf_vf_link_state_parse(s, &ls, NULL, 0))
		c->link_state = (enum cni_link_state)ls;
}

int cni_cache_parse(json_t *root, const char *file_name, struct cni_cache *c, char *err,
		    size_t errlen)
{
	json_t *ibvf, *rdma, *v;
	const char *s;

	cni_cache_init(c);
	if (!json_is_object(root))
		return ibvf_errf(err, errlen, -EINVAL, "cache entry %s is not a JSON object",
				 file_name);
	copy_str(c->network, sizeof(c->network), root, "name");
	copy_str(c->device_id, sizeof(c->device_id), root, "deviceID");
	copy_str(c->pf, sizeof(c->pf), root, "Master");
	copy_str(c->host_ifname, sizeof(c->host_ifname), root, "HostIFNames");
	copy_str(c->prev_guid, sizeof(c->prev_guid), root, "HostIFGUID");
	copy_str(c->ifname, sizeof(c->ifname), root, "ContIFNames");
	v = json_object_get(root, "VFID");
	c->vf_index = json_is_integer(v) ? (int)json_integer_value(v) : -1;
	c->rdma_isolation = json_is_true(json_object_get(root, "rdmaIsolation"));
	c->vfio = json_is_true(json_object_get(root, "vfioPciMode"));
	c->ib_kubernetes_enabled = json_is_true(json_object_get(root, "ibKubernetesEnabled"));
	parse_link_state(c, root);
	rdma = json_object_get(root, "RdmaNetState");
	copy_str(c->rdma_dev, sizeof(c->rdma_dev), rdma, "containerRdmaDevName");
	s = json_string_value(json_object_get(json_object_get(root, "ipam"), "type"));
	c->ipam = s && *s;

	ibvf = json_object_get(root, "ibvf");
	if (!json_is_object(ibvf)) {
		/* ib-sriov-cni: the file name is "<containerID>-<ContIFNames>" */
		size_t n = strlen(file_name), k = strlen(c->ifname);

		c->format = 0;
		c->mode = CNI_MODE_COMPAT;
		if (k && n > k + 1 && file_name[n - k - 1] == '-' &&
		    !strcmp(file_name + n - k, c->ifname))
			snprintf(c->container_id, sizeof(c->container_id), "%.*s", (int)(n - k - 1),
				 file_name);
		c->conf = json_incref(root);
		return 0;
	}
	v = json_object_get(ibvf, "version");
	if (!json_is_integer(v) || json_integer_value(v) < 1)
		return ibvf_errf(err, errlen, -EINVAL, "cache entry %s: ibvf.version missing",
				 file_name);
	c->format = (int)json_integer_value(v);
	if (c->format > CNI_CACHE_VERSION)
		log_warn("cache entry %s has version %d, newer than %d; reading what is known",
			 file_name, c->format, CNI_CACHE_VERSION);
	s = json_string_value(json_object_get(ibvf, "mode"));
	c->mode = s && !strcmp(s, "daemon") ? CNI_MODE_DAEMON : CNI_MODE_COMPAT;
	copy_str(c->container_id, sizeof(c->container_id), ibvf, "containerID");
	copy_str(c->ifname, sizeof(c->ifname), ibvf, "ifname");
	copy_str(c->netns, sizeof(c->netns), ibvf, "netns");
	copy_str(c->mac, sizeof(c->mac), ibvf, "mac");
	copy_str(c->temp_ifname, sizeof(c->temp_ifname), ibvf, "tempName");
	c->vfio = json_is_true(json_object_get(ibvf, "vfio"));
	c->ipam = json_is_true(json_object_get(ibvf, "ipam"));
	s = json_string_value(json_object_get(ibvf, "guid"));
	if (s && *s && ibvf_guid_parse(s, &c->guid, NULL, 0))
		c->guid = 0;
	c->conf = json_incref(root);
	return 0;
}

/*
 * A cache entry as JSON, read through ibvf_file_read_regular() (never
 * json_load_file(): a FIFO in the cache directory would block the plugin
 * in open(2)); the reason goes to @je->text.
 */
static json_t *cache_load(const char *path, json_error_t *je)
{
	json_t *root;
	size_t len;
	char *buf;

	if (ibvf_file_read_regular(path, IBVF_JSON_FILE_MAX, 0, &buf, &len, NULL, je->text,
				   sizeof(je->text)))
		return NULL;
	root = json_loadb(buf, len, 0, je);
	free(buf);
	return root;
}

int cni_cache_read(const char *dir, const char *container_id, const char *ifname,
		   struct cni_cache *c, char *err, size_t errlen)
{
	char path[PATH_MAX];
	json_error_t je;
	json_t *root;
	int ret;

	cni_cache_init(c);
	ret = cache_path(path, sizeof(path), dir, container_id, ifname, err, errlen);
	if (ret)
		return ret;
	if (access(path, F_OK))
		return ibvf_errf(err, errlen, -errno, "cache %s: %s", path, strerror(errno));
	root = cache_load(path, &je);
	if (!root)
		return ibvf_errf(err, errlen, -EINVAL, "cache %s: %s", path, je.text);
	ret = cni_cache_parse(root, strrchr(path, '/') + 1, c, err, errlen);
	json_decref(root);
	if (!ret && !c->container_id[0])
		snprintf(c->container_id, sizeof(c->container_id), "%s", container_id);
	if (!ret && !c->ifname[0])
		snprintf(c->ifname, sizeof(c->ifname), "%s", ifname);
	return ret;
}

int cni_cache_remove(const char *dir, const char *container_id, const char *ifname, char *err,
		     size_t errlen)
{
	char path[PATH_MAX];
	int ret = cache_path(path, sizeof(path), dir, container_id, ifname, err, errlen);

	if (ret)
		return ret;
	if (unlink(path) && errno != ENOENT)
		return ibvf_errf(err, errlen, -errno, "removing %s: %s", path, strerror(errno));
	return 0;
}

int cni_cache_foreach(const char *dir, int (*fn)(struct cni_cache *c, void *arg), void *arg,
		      char *err, size_t errlen)
{
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d) {
		if (errno == ENOENT)
			return 0;
		return ibvf_errf(err, errlen, -errno, "opening %s: %s", dir, strerror(errno));
	}
	while ((de = readdir(d))) {
		char path[PATH_MAX], e[IBVF_ERR_LEN];
		struct cni_cache c;
		json_error_t je;
		json_t *root;

		if (de->d_name[0] == '.' || strstr(de->d_name, ".tmp."))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= (int)sizeof(path))
			continue;
		root = cache_load(path, &je);
		if (!root) {
			log_warn("cache %s: not readable JSON (%s); skipped", path, je.text);
			continue;
		}
		if (cni_cache_parse(root, de->d_name, &c, e, sizeof(e))) {
			log_warn("%s; skipped", e);
			json_decref(root);
			continue;
		}
		json_decref(root);
		fn(&c, arg);
		cni_cache_free(&c);
	}
	closedir(d);
	return 0;
}
