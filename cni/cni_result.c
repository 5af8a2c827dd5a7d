// SPDX-License-Identifier: MIT
/* ib-sriov CNI plugin: result types and their conversion between spec versions. */
#include "cni_result.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cni_config.h"
#include "err.h"

int cni_ip_family(const char *addr)
{
	char buf[INET6_ADDRSTRLEN + 8];
	unsigned char bin[16];
	const char *slash;
	char *end;
	long pfx;
	int fam;

	if (!addr || strlen(addr) >= sizeof(buf))
		return 0;
	snprintf(buf, sizeof(buf), "%s", addr);
	slash = strchr(addr, '/');
	if (slash)
		buf[slash - addr] = 0;
	fam = inet_pton(AF_INET, buf, bin) == 1 ? 4 : inet_pton(AF_INET6, buf, bin) == 1 ? 6 : 0;
	if (!fam || !slash)
		return fam;
	errno = 0;
	pfx = strtol(slash + 1, &end, 10);
	if (errno || end == slash + 1 || *end || pfx < 0 || pfx > (fam == 4 ? 32 : 128))
		return 0;
	return fam;
}

static bool is_cidr(const char *s)
{
	return s && strchr(s, '/') && cni_ip_family(s);
}

json_t *cni_result_new(void)
{
	return json_pack("{s:[],s:[],s:[]}", "interfaces", "ips", "routes");
}

/* Copy the known keys of a 0.3+/1.x route, checking dst and gw. */
static int copy_route(json_t *r, json_t *routes, const char *where, char *err, size_t errlen)
{
	static const char *const keys[] = {"dst",      "gw",	"mtu",	 "advmss",
					   "priority", "table", "scope", NULL};
	const char *dst = json_string_value(json_object_get(r, "dst"));
	const char *gw = json_string_value(json_object_get(r, "gw"));
	json_t *n;

	if (!json_is_object(r) || !is_cidr(dst))
		return ibvf_errf(err, errlen, -EINVAL,
				 "%s: \"dst\" is not an address in CIDR "
				 "notation",
				 where);
	if (json_object_get(r, "gw") && !json_is_null(json_object_get(r, "gw")) &&
	    (!gw || strchr(gw, '/') || cni_ip_family(gw) != cni_ip_family(dst)))
		return ibvf_errf(err, errlen, -EINVAL,
				 "%s: \"gw\" is not an address of the "
				 "family of %s",
				 where, dst);
	n = json_object();
	if (!n)
		return -ENOMEM;
	for (const char *const *k = keys; *k; k++) {
		json_t *v = json_object_get(r, *k);

		if (v && !json_is_null(v))
			json_object_set(n, *k, v);
	}
	return json_array_append_new(routes, n) ? -ENOMEM : 0;
}

static int copy_ip(json_t *ip, json_t *ips, size_t n_if, const char *where, char *err,
		   size_t errlen)
{
	const char *addr = json_string_value(json_object_get(ip, "address"));
	const char *gw = json_string_value(json_object_get(ip, "gateway"));
	json_t *idx = json_object_get(ip, "interface"), *n;

	if (!json_is_object(ip) || !is_cidr(addr))
		return ibvf_errf(err, errlen, -EINVAL,
				 "%s: \"address\" is not an IP address in "
				 "CIDR notation",
				 where);
	if (gw && (strchr(gw, '/') || cni_ip_family(gw) != cni_ip_family(addr)))
		return ibvf_errf(err, errlen, -EINVAL,
				 "%s: gateway \"%s\" is not an address of "
				 "the family of %s",
				 where, gw, addr);
	if (idx && !json_is_null(idx) &&
	    (!json_is_integer(idx) || json_integer_value(idx) < 0 ||
	     (size_t)json_integer_value(idx) >= n_if))
		return ibvf_errf(err, errlen, -EINVAL,
				 "%s: \"interface\" does not index an "
				 "entry of \"interfaces\"",
				 where);
	n = json_pack("{s:s}", "address", addr);
	if (!n)
		return -ENOMEM;
	if (gw)
		json_object_set_new(n, "gateway", json_string(gw));
	if (idx && !json_is_null(idx))
		json_object_set(n, "interface", idx);
	return json_array_append_new(ips, n) ? -ENOMEM : 0;
}

/* 0.1.0 / 0.2.0: {"ip4": {"ip", "gateway", "routes"}, "ip6": {...}, "dns"} */
static int normalize_old(json_t *in, json_t *out, char *err, size_t errlen)
{
	static const char *const fams[] = {"ip4", "ip6"};

	for (int f = 0; f < 2; f++) {
		json_t *o = json_object_get(in, fams[f]), *routes, *r, *ip;
		size_t i;
		int ret;

		if (!o || json_is_null(o))
			continue;
		ip = json_pack("{s:O}", "address", json_object_get(o, "ip"));
		if (!ip)
			return ibvf_errf(err, errlen, -EINVAL, "result: %s.ip missing", fams[f]);
		if (json_object_get(o, "gateway"))
			json_object_set(ip, "gateway", json_object_get(o, "gateway"));
		ret = copy_ip(ip, json_object_get(out, "ips"), 0, fams[f], err, errlen);
		json_decref(ip);
		if (ret)
			return ret;
		routes = json_object_get(o, "routes");
		json_array_foreach(routes, i, r)
		{
			char where[48];

			snprintf(where, sizeof(where), "%s.routes[%zu]", fams[f], i);
			if ((ret = copy_route(r, json_object_get(out, "routes"), where, err,
					      errlen)))
				return ret;
		}
	}
	return 0;
}

int cni_result_normalize(json_t *in, const char *fallback_version, json_t **out, char *err,
			 size_t errlen)
{
	const char *ver = json_string_value(json_object_get(in, "cniVersion"));
	json_t *res, *a, *e, *dns;
	unsigned v = 0;
	size_t i, n_if;
	int ret = 0;

	*out = NULL;
	if (!json_is_object(in))
		return ibvf_errf(err, errlen, -EINVAL, "result is not a JSON object");
	if (!ver)
		ver = fallback_version;
	if (cni_version_parse(ver, &v) || !cni_version_supported(v))
		return ibvf_errf(err, errlen, -EINVAL, "result has unsupported cniVersion \"%s\"",
				 ver ? ver : "");
	res = cni_result_new();
	if (!res)
		return -ENOMEM;
	if (v < 300) {
		ret = normalize_old(in, res, err, errlen);
		goto dns;
	}
	a = json_object_get(in, "interfaces");
	json_array_foreach(a, i, e)
	{
		static const char *const keys[] = {"name",	 "mac",	  "mtu", "sandbox",
						   "socketPath", "pciID", NULL};
		json_t *n;

		if (!json_is_object(e) || !json_is_string(json_object_get(e, "name"))) {
			ret = ibvf_errf(err, errlen, -EINVAL, "result: interfaces[%zu] has no name",
					i);
			goto out;
		}
		n = json_object();
		for (const char *const *k = keys; n && *k; k++)
			if (json_object_get(e, *k))
				json_object_set(n, *k, json_object_get(e, *k));
		if (!n || json_array_append_new(json_object_get(res, "interfaces"), n)) {
			ret = -ENOMEM;
			goto out;
		}
	}
	n_if = json_array_size(json_object_get(res, "interfaces"));
	a = json_object_get(in, "ips");
	json_array_foreach(a, i, e)
	{
		char where[48];

		snprintf(where, sizeof(where), "result: ips[%zu]", i);
		if ((ret = copy_ip(e, json_object_get(res, "ips"), n_if, where, err, errlen)))
			goto out;
	}
	a = json_object_get(in, "routes");
	json_array_foreach(a, i, e)
	{
		char where[48];

		snprintf(where, sizeof(where), "result: routes[%zu]", i);
		if ((ret = copy_route(e, json_object_get(res, "routes"), where, err, errlen)))
			goto out;
	}
dns:
	dns = json_object_get(in, "dns");
	if (!ret && json_is_object(dns) && json_object_size(dns))
		json_object_set(res, "dns", dns);
out:
	if (ret) {
		json_decref(res);
		return ret;
	}
	*out = res;
	return 0;
}

int cni_result_add_interface(json_t *res, const char *name, const char *mac, unsigned mtu,
			     const char *sandbox, const char *pci_id)
{
	json_t *ifs = json_object_get(res, "interfaces");
	json_t *o = json_pack("{s:s}", "name", name);

	if (!o)
		return -ENOMEM;
	if (mac && *mac)
		json_object_set_new(o, "mac", json_string(mac));
	if (mtu)
		json_object_set_new(o, "mtu", json_integer(mtu));
	if (sandbox && *sandbox)
		json_object_set_new(o, "sandbox", json_string(sandbox));
	if (pci_id && *pci_id)
		json_object_set_new(o, "pciID", json_string(pci_id));
	if (json_array_append_new(ifs, o))
		return -ENOMEM;
	return (int)json_array_size(ifs) - 1;
}

int cni_result_merge_ipam(json_t *res, json_t *ipam, int iface)
{
	json_t *e, *dns = json_object_get(ipam, "dns");
	size_t i;

	json_array_foreach(json_object_get(ipam, "ips"), i, e)
	{
		json_t *c = json_deep_copy(e);

		if (!c)
			return -ENOMEM;
		json_object_set_new(c, "interface", json_integer(iface));
		if (json_array_append_new(json_object_get(res, "ips"), c))
			return -ENOMEM;
	}
	json_array_foreach(
		json_object_get(ipam, "routes"), i,
		e) if (json_array_append(json_object_get(res, "routes"), e)) return -ENOMEM;
	if (json_is_object(dns) && !json_object_get(res, "dns"))
		json_object_set(res, "dns", dns);
	return 0;
}

static void strip_keys(json_t *arr, const char *const *keys)
{
	json_t *e;
	size_t i;

	json_array_foreach(arr, i, e) for (const char *const *k = keys; *k; k++)
		json_object_del(e, *k);
}

/* 0.1.0 / 0.2.0 layout: the first address of each family with its routes. */
static json_t *convert_old(json_t *res)
{
	json_t *out = json_object(), *e;
	size_t i;

	if (!out)
		return NULL;
	json_array_foreach(json_object_get(res, "ips"), i, e)
	{
		const char *addr = json_string_value(json_object_get(e, "address"));
		int fam = cni_ip_family(addr);
		const char *key = fam == 4 ? "ip4" : "ip6";
		json_t *o, *routes, *r;
		size_t j;

		if (json_object_get(out, key))
			continue;
		o = json_pack("{s:s,s:[]}", "ip", addr, "routes");
		if (!o)
			goto nomem;
		if (json_object_get(e, "gateway"))
			json_object_set(o, "gateway", json_object_get(e, "gateway"));
		routes = json_object_get(o, "routes");
		json_array_foreach(json_object_get(res, "routes"), j, r)
		{
			const char *dst = json_string_value(json_object_get(r, "dst"));
			json_t *nr;

			if (cni_ip_family(dst) != fam)
				continue;
			nr = json_pack("{s:s}", "dst", dst);
			if (nr && json_object_get(r, "gw"))
				json_object_set(nr, "gw", json_object_get(r, "gw"));
			if (!nr || json_array_append_new(routes, nr))
				goto nomem;
		}
		if (json_object_set_new(out, key, o))
			goto nomem;
	}
	if (json_object_get(res, "dns"))
		json_object_set(out, "dns", json_object_get(res, "dns"));
	return out;
nomem:
	json_decref(out);
	return NULL;
}

json_t *cni_result_convert(json_t *res, const char *version)
{
	static const char *const if_11[] = {"mtu", "socketPath", "pciID", NULL};
	static const char *const rt_11[] = {"mtu", "advmss", "priority", "table", "scope", NULL};
	unsigned v = 0;
	json_t *out, *e;
	size_t i;

	if (cni_version_parse(version, &v))
		v = 10100;
	if (v < 300) {
		out = convert_old(res);
	} else {
		out = json_deep_copy(res);
		if (out && v < 10100) {
			strip_keys(json_object_get(out, "interfaces"), if_11);
			strip_keys(json_object_get(out, "routes"), rt_11);
		}
		if (out && v < 10000) {
			json_array_foreach(json_object_get(out, "ips"), i, e)
			{
				int fam = cni_ip_family(
					json_string_value(json_object_get(e, "address")));

				json_object_set_new(e, "version",
						    json_string(fam == 6 ? "6" : "4"));
			}
		}
	}
	if (out && json_object_set_new(out, "cniVersion", json_string(version))) {
		json_decref(out);
		out = NULL;
	}
	return out;
}

json_t *cni_error_new(const char *version, int code, const char *msg, const char *details)
{
	json_t *e = json_pack("{s:s,s:i,s:s}", "cniVersion", version ? version : "1.1.0", "code",
			      code, "msg", msg ? msg : "");

	if (e && details && *details)
		json_object_set_new(e, "details", json_string(details));
	return e;
}

json_t *cni_version_result(const char *version)
{
	json_t *list = json_array(), *o;

	for (const char *const *p = cni_supported_versions; list && *p; p++)
		json_array_append_new(list, json_string(*p));
	o = json_pack("{s:s,s:o}", "cniVersion", version ? version : "1.1.0", "supportedVersions",
		      list);
	return o;
}
