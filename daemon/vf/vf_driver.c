// SPDX-License-Identifier: MIT
/*
 * The VF driver registry (vf_driver.h): netlink is built in, every other
 * driver is a module loaded from vf.module_dir, so lab drivers never link
 * into an installed binary.
 */
#include "vf_driver.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "log.h"
#include "module_file.h"

int ibvf_vf_module_load(const char *module_dir, const char *name, const struct ibvf_vf_module **out,
			void **handle, char *err, size_t errlen)
{
	const struct ibvf_vf_module *m;
	char path[4096];
	void *sym;
	int ret;

	*out = NULL;
	*handle = NULL;
	ret = ibvf_module_name_check("VF driver", name, "netlink", err, errlen);
	if (ret)
		return ret;
	if (snprintf(path, sizeof(path), "%s/%s.so", module_dir, name) >= (int)sizeof(path))
		return ibvf_errf(err, errlen, -ENAMETOOLONG, "vf.module_dir is too long");
	ret = ibvf_module_open("VF driver", path, "vf.module_dir", module_dir,
			       IBVF_VF_MODULE_SYMBOL, handle, &sym, err, errlen);
	if (ret == -ENOENT)
		return ibvf_err_prefix(err, errlen, ret,
				       "vf.driver \"%s\" is not built in (only "
				       "\"netlink\" is; other VF drivers are lab modules, built "
				       "for tests only)",
				       name);
	if (ret)
		return ret;
	m = sym;
	if (m->abi != IBVF_VF_MODULE_ABI)
		ret = ibvf_errf(err, errlen, -EPROTO,
				"VF driver module %s implements VF module "
				"ABI %u; this build needs %u (rebuild the module)",
				path, m->abi, IBVF_VF_MODULE_ABI);
	else if (!m->name || strcmp(m->name, name))
		ret = ibvf_errf(err, errlen, -EPROTO,
				"VF driver module %s calls itself '%.64s', "
				"expected '%s'",
				path, m->name ? m->name : "(null)", name);
	if (ret) {
		dlclose(*handle);
		*handle = NULL;
		return ret;
	}
	*out = m;
	return 0;
}

void ibvf_vf_module_unload(void *handle)
{
	if (handle)
		dlclose(handle);
}

int ibvf_vf_module_config_check(const char *module_dir, const char *name, const struct ibvf_jctx *c,
				const char *path, json_t *obj)
{
	const struct ibvf_vf_module *m;
	void *h;
	int ret;

	ret = ibvf_vf_module_load(module_dir, name, &m, &h, c->err, c->errlen);
	if (ret)
		return ibvf_err_prefix(c->err, c->errlen, ret, "%s: %s", c->file, path);
	ret = m->config_check ? m->config_check(c, path, obj) : 0;
	ibvf_vf_module_unload(h);
	return ret;
}

int ibvf_vf_driver_open(const struct ibvf_vf_driver_params *p, struct ibvf_vf_driver **out,
			char *err, size_t errlen)
{
	const char *name = p->name ? p->name : "netlink";
	const struct ibvf_vf_module *m;
	void *h;
	int ret;

	*out = NULL;
	if (!strcmp(name, "netlink"))
		return ibvf_vf_driver_netlink_create(p->sysfs_root, out, err, errlen);
	ret = ibvf_vf_module_load(p->module_dir, name, &m, &h, err, errlen);
	if (ret)
		return ret;
	if (!m->create) {
		ibvf_vf_module_unload(h);
		return ibvf_errf(err, errlen, -EOPNOTSUPP,
				 "vf.driver \"%s\" programs no VF: it "
				 "only replaces ibvfd's VF and port seams (tests, benchmarks)",
				 name);
	}
	ret = m->create(p->sysfs_root, p->options_json, out, err, errlen);
	if (ret) {
		ibvf_vf_module_unload(h);
		return ret;
	}
	(*out)->module = h;
	if (m->banner)
		log_warn("*** VF driver is '%s' (%s) on the sysfs tree %s; use vf.driver "
			 "\"netlink\" on real hosts ***",
			 name, m->banner, p->sysfs_root);
	return 0;
}

void ibvf_vf_driver_destroy(struct ibvf_vf_driver *d)
{
	void *h;

	if (!d)
		return;
	h = d->module;
	if (d->ops && d->ops->destroy)
		d->ops->destroy(d);
	free(d->sysfs_root);
	free(d);
	ibvf_vf_module_unload(h);
}
