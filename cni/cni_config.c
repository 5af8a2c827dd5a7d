// SPDX-License-Identifier: MIT
/* ib-sriov CNI plugin: runtime parameters and network configuration. */
#include "cni_config.h"

#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "err.h"
#include "log.h"

const char *const cni_supported_versions[] = {
	"0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0", NULL,
};

static const struct {
	const char *name;
	enum cni_command cmd;
} commands[] = {
	{"ADD", CNI_CMD_ADD}, {"DEL", CNI_CMD_DEL},	  {"CHECK", CNI_CMD_CHECK},
	{"GC", CNI_CMD_GC},   {"STATUS", CNI_CMD_STATUS}, {"VERSION", CNI_CMD_VERSION},
};

enum cni_command cni_command_parse(const char *s)
{
	for (size_t i = 0; s && i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(s, commands[i].name))
			return commands[i].cmd;
	return CNI_CMD_NONE;
}

/* The value of "@name=" in @envp, or NULL; an empty value counts as unset. */
static const char *env_get(char *const *envp, const char *name)
{
	size_t n = strlen(name);

	for (; envp && *envp; envp++)
		if (!strncmp(*envp, name, n) && (*envp)[n] == '=')
			return (*envp)[n + 1] ? *envp + n + 1 : NULL;
	return NULL;
}

bool cni_ifname_valid(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (!n || n >= CNI_IFNAME_LEN || !strcmp(name, ".") || !strcmp(name, ".."))
		return false;
	for (; *name; name++)
		if (*name == '/' || *name == ':' || isspace((unsigned char)*name))
			return false;
	return true;
}

/* CNI spec section 2: "[A-Za-z0-9][A-Za-z0-9_.-]*". */
static bool container_id_valid(const char *id)
{
	if (!id || !isalnum((unsigned char)*id))
		return false;
	for (id++; *id; id++)
		if (!isalnum((unsigned char)*id) && !strchr("_.-", *id))
			return false;
	return true;
}

int cni_args_get(const char *args, const char *key, char **out, char *err, size_t errlen)
{
	size_t klen = strlen(key);
	const char *p = args;

	*out = NULL;
	while (p && *p) {
		const char *end = strchr(p, ';');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', len);

		if (eq && (size_t)(eq - p) == klen && !strncmp(p, key, klen)) {
			size_t vlen = len - klen - 1;

			*out = strndup(eq + 1, vlen);
			if (!*out)
				return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
			return 0;
		}
		p = end ? end + 1 : NULL;
	}
	return 0;
}

int cni_env_load(struct cni_env *env, char *const *envp, char *err, size_t errlen)
{
	char bad[256] = "";
	int ret;

	memset(env, 0, sizeof(*env));
	env->command = env_get(envp, "CNI_COMMAND");
	env->container_id = env_get(envp, "CNI_CONTAINERID");
	env->netns = env_get(envp, "CNI_NETNS");
	env->ifname = env_get(envp, "CNI_IFNAME");
	env->args = env_get(envp, "CNI_ARGS");
	env->path = env_get(envp, "CNI_PATH");
	env->cmd = cni_command_parse(env->command);
	if (!env->command)
		return ibvf_errf(err, errlen, -EINVAL, "CNI_COMMAND is not set");
	if (env->cmd == CNI_CMD_NONE)
		return ibvf_errf(
			err, errlen, -EINVAL,
			"CNI_COMMAND=%s is not one of ADD, DEL, CHECK, GC, STATUS, VERSION",
			env->command);

	if (env->cmd == CNI_CMD_ADD || env->cmd == CNI_CMD_DEL || env->cmd == CNI_CMD_CHECK) {
		if (!env->container_id)
			strcat(bad, " CNI_CONTAINERID (not set)");
		else if (!container_id_valid(env->container_id))
			strcat(bad, " CNI_CONTAINERID (must match [A-Za-z0-9][A-Za-z0-9_.-]*)");
		if (!env->ifname)
			strcat(bad, " CNI_IFNAME (not set)");
		else if (!cni_ifname_valid(env->ifname))
			strcat(bad, " CNI_IFNAME (not a valid interface name)");
		if (env->cmd != CNI_CMD_DEL && !env->netns)
			strcat(bad, " CNI_NETNS (not set)");
	}
	if (bad[0])
		return ibvf_errf(err, errlen, -EINVAL, "invalid environment variables:%s", bad);

	ret = cni_args_get(env->args, "K8S_POD_NAMESPACE", &env->pod_namespace, err, errlen);
	if (!ret)
		ret = cni_args_get(env->args, "K8S_POD_NAME", &env->pod_name, err, errlen);
	if (!ret)
		ret = cni_args_get(env->args, "K8S_POD_UID", &env->pod_uid, err, errlen);
	if (ret)
		cni_env_free(env);
	return ret;
}

void cni_env_free(struct cni_env *env)
{
	free(env->pod_namespace);
	free(env->pod_name);
	free(env->pod_uid);
	env->pod_namespace = env->pod_name = env->pod_uid = NULL;
}

_Static_assert(CNI_LINK_STATE_AUTO == (int)IBVF_VF_LINK_AUTO &&
		       CNI_LINK_STATE_ENABLE == (int)IBVF_VF_LINK_ENABLE &&
		       CNI_LINK_STATE_DISABLE == (int)IBVF_VF_LINK_DISABLE,
	       "cni_link_state carries enum ibvf_vf_link_state values");

const char *cni_link_state_name(enum cni_link_state s)
{
	if (s < CNI_LINK_STATE_AUTO || s > CNI_LINK_STATE_DISABLE)
		return "";
	return ibvf_vf_link_state_name((enum ibvf_vf_link_state)s);
}

int cni_version_parse(const char *s, unsigned *out)
{
	unsigned a, b, c;
	int n = -1;

	if (!s || sscanf(s, "%3u.%3u.%3u%n", &a, &b, &c, &n) != 3 || n < 0 || s[n] || a > 99 ||
	    b > 99 || c > 99)
		return -EINVAL;
	*out = a * 10000 + b * 100 + c;
	return 0;
}

bool cni_version_supported(unsigned v)
{
	for (const char *const *p = cni_supported_versions; *p; p++) {
		unsigned s;

		if (!cni_version_parse(*p, &s) && s == v)
			return true;
	}
	return false;
}

/* ------------------------------------------------------------ netconf -- */

struct pctx {
	struct cni_netconf *nc;
	enum cni_conf_error *kind;
	char *err;
	size_t errlen;
};

__attribute__((format(printf, 2, 3))) static int bad(struct pctx *p, const char *fmt, ...)
{
	va_list ap;
	char msg[IBVF_ERR_LEN];

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	*p->kind = CNI_CONF_INVALID;
	return ibvf_errf(p->err, p->errlen, -EINVAL, "network configuration: %s", msg);
}

/* @obj[key] must be a string (or absent: *out unchanged). */
static int get_str(struct pctx *p, json_t *obj, const char *path, const char *key, const char **out)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return 0;
	if (!json_is_string(v))
		return bad(p, "%s%s: expected a string", path, key);
	if (strlen(json_string_value(v)) != json_string_length(v))
		return bad(p, "%s%s: string contains a NUL byte", path, key);
	*out = json_string_value(v);
	return 0;
}

static int get_bool(struct pctx *p, json_t *obj, const char *path, const char *key, bool *out)
{
	json_t *v = json_object_get(obj, key);

	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return bad(p, "%s%s: expected true or false, got %s", path, key,
			   json_is_string(v) ? json_string_value(v) : "a non-boolean");
	*out = json_is_true(v);
	return 0;
}

static int get_uint(struct pctx *p, json_t *obj, const char *path, const char *key, unsigned min,
		    unsigned max, unsigned *out)
{
	json_t *v = json_object_get(obj, key);
	json_int_t i;

	if (!v)
		return 0;
	if (!json_is_integer(v))
		return bad(p, "%s%s: expected an integer in %u..%u", path, key, min, max);
	i = json_integer_value(v);
	if (i < (json_int_t)min || i > (json_int_t)max)
		return bad(p, "%s%s: %lld is out of range %u..%u", path, key, (long long)i, min,
			   max);
	*out = (unsigned)i;
	return 0;
}

static int get_obj(struct pctx *p, json_t *obj, const char *path, const char *key, json_t **out)
{
	json_t *v = json_object_get(obj, key);

	*out = NULL;
	if (!v || json_is_null(v))
		return 0;
	if (!json_is_object(v))
		return bad(p, "%s%s: expected an object", path, key);
	*out = v;
	return 0;
}

static int check_keys(struct pctx *p, json_t *obj, const char *path, const char *const *allowed)
{
	const char *key;
	json_t *v;

	json_object_foreach(obj, key, v)
	{
		const char *const *a;

		(void)v;
		for (a = allowed; *a; a++)
			if (!strcmp(*a, key))
				break;
		if (!*a)
			return bad(p, "%s%s: unknown key (a typo?)", path, key);
	}
	return 0;
}

static int add_pkey(struct pctx *p, const char *what, const char *s, const char *membership)
{
	struct cni_netconf *nc = p->nc;
	enum ibvf_membership m;
	char e[IBVF_ERR_LEN];
	uint16_t v;

	/* the default partition is allowed here: ibvfd applies its allow_default_pkey */
	if (ibvf_pkey_member_parse(s, membership, true, &v, e, sizeof(e)))
		return bad(p, "%s: %s", what, e);
	m = ibvf_pkey_is_full(v) ? IBVF_MEMBER_FULL : IBVF_MEMBER_LIMITED;
	v = ibvf_pkey_key(v);
	for (size_t i = 0; i < nc->n_pkeys; i++) {
		if (nc->pkeys[i].key != v)
			continue;
		if (nc->pkeys[i].membership != m)
			return bad(p, "%s: PKey 0x%04x is listed twice with different membership",
				   what, v);
		return 0;
	}
	if (nc->n_pkeys >= CNI_MAX_PKEYS)
		return bad(p, "%s: more than %d PKeys", what, CNI_MAX_PKEYS);
	nc->pkeys[nc->n_pkeys].key = v;
	nc->pkeys[nc->n_pkeys].membership = m;
	nc->n_pkeys++;
	return 0;
}

static int parse_pkeys(struct pctx *p, json_t *root)
{
	const char *pkey = NULL, *membership = NULL;
	json_t *list, *e;
	size_t i;
	int ret;

	if ((ret = get_str(p, root, "", "pkey", &pkey)) ||
	    (ret = get_str(p, root, "", "membership", &membership)))
		return ret;
	if (membership && (!pkey || !*pkey))
		return bad(p, "membership: \"%s\" given without \"pkey\"", membership);
	if (pkey && *pkey && (ret = add_pkey(p, "pkey", pkey, membership)))
		return ret;
	list = json_object_get(root, "pkeys");
	if (!list || json_is_null(list))
		return 0;
	if (!json_is_array(list))
		return bad(p, "pkeys: expected a list of \"0x..\" strings or {pkey, membership}");
	json_array_foreach(list, i, e)
	{
		static const char *const keys[] = {"pkey", "membership", NULL};
		const char *k = NULL, *m = NULL;
		char what[32];

		snprintf(what, sizeof(what), "pkeys[%zu]", i);
		if (json_is_string(e)) {
			ret = add_pkey(p, what, json_string_value(e), NULL);
		} else if (json_is_object(e)) {
			char path[40];

			snprintf(path, sizeof(path), "%s.", what);
			if ((ret = check_keys(p, e, path, keys)) ||
			    (ret = get_str(p, e, path, "pkey", &k)) ||
			    (ret = get_str(p, e, path, "membership", &m)))
				return ret;
			if (!k)
				return bad(p, "%s.pkey: missing", what);
			ret = add_pkey(p, what, k, m);
		} else {
			ret = bad(p, "%s: expected \"0x..\" or {pkey, membership}", what);
		}
		if (ret)
			return ret;
	}
	return 0;
}

static int parse_guid(struct pctx *p, json_t *root)
{
	struct cni_netconf *nc = p->nc;
	const char *s = NULL, *src = NULL;
	json_t *rc, *args, *cni;
	char e[IBVF_ERR_LEN];
	int ret;

	if ((ret = get_obj(p, root, "", "runtimeConfig", &rc)))
		return ret;
	if (rc && (ret = get_str(p, rc, "runtimeConfig.", "infinibandGUID", &s)))
		return ret;
	if (s && *s)
		src = "runtimeConfig.infinibandGUID";

	if ((ret = get_obj(p, root, "", "args", &args)))
		return ret;
	if (args && (ret = get_obj(p, args, "args.", "cni", &cni)))
		return ret;
	if (args && cni) {
		const char *key, *g = NULL;
		json_t *v;

		json_object_foreach(cni, key, v)
		{
			if (json_is_string(v) || !strcmp(key, "guid") ||
			    !strcmp(key, "mellanox.infiniband.app"))
				continue;
			log_warn("network configuration: args.cni[\"%s\"] is not a string; ignored",
				 key);
		}
		if ((ret = get_str(p, cni, "args.cni.", "guid", &g)) ||
		    (ret = get_str(p, cni, "args.cni.", "mellanox.infiniband.app",
				   &nc->ib_app_state)))
			return ret;
		if (!src && g && *g) {
			s = g;
			src = "args.cni.guid";
		}
	}
	if (!src)
		return 0;
	if (ibvf_guid_parse(s, &nc->guid, e, sizeof(e)))
		return bad(p, "%s: %s", src, e);
	if (!ibvf_guid_is_assignable(nc->guid))
		return bad(p, "%s: GUID %s is not assignable (zero or all-ones)", src, s);
	nc->guid_source = src;
	return 0;
}

static int parse_link_state(struct pctx *p, json_t *root)
{
	const char *s = NULL;
	enum ibvf_vf_link_state ls;
	char e[IBVF_ERR_LEN];
	int ret = get_str(p, root, "", "link_state", &s);

	p->nc->link_state = CNI_LINK_STATE_UNSET;
	if (ret || !s || !*s)
		return ret;
	if (ibvf_vf_link_state_parse(s, &ls, e, sizeof(e)))
		return bad(p, "link_state: %s", e);
	p->nc->link_state = (enum cni_link_state)ls;
	return 0;
}

static int parse_ibvfd(struct pctx *p, json_t *root)
{
	static const char *const keys[] = {"socket", "timeout", NULL};
	struct cni_netconf *nc = p->nc;
	json_t *o, *t;
	int ret;

	nc->ibvfd_timeout_ms = CNI_DEFAULT_IBVFD_TIMEOUT_MS;
	if ((ret = get_obj(p, root, "", "ibvfd", &o)) || !o)
		return ret;
	if ((ret = check_keys(p, o, "ibvfd.", keys)) ||
	    (ret = get_str(p, o, "ibvfd.", "socket", &nc->ibvfd_socket)))
		return ret;
	if (nc->ibvfd_socket && nc->ibvfd_socket[0] != '/')
		return bad(p, "ibvfd.socket: \"%s\" is not an absolute path", nc->ibvfd_socket);
	t = json_object_get(o, "timeout");
	if (t) {
		double s = json_is_number(t) ? json_number_value(t) : -1;

		if (s < 0.001 || s > 3600)
			return bad(p, "ibvfd.timeout: expected seconds in 0.001..3600");
		nc->ibvfd_timeout_ms = (unsigned)(s * 1000 + 0.5);
	}
	return 0;
}

static int parse_rc_check(struct pctx *p, json_t *root)
{
	static const char *const keys[] = {"enabled", "iterations", "p99MaxUs", "roceDefaultPKey",
					   NULL};
	struct cni_netconf *nc = p->nc;
	json_t *o;
	bool en = false; /* get_bool() writes it only when the key is present */
	int ret;

	nc->rc_check = -1;
	nc->rc_iterations = CNI_DEFAULT_RC_ITERATIONS;
	if ((ret = get_obj(p, root, "", "rcCheck", &o)) || !o)
		return ret;
	if ((ret = check_keys(p, o, "rcCheck.", keys)))
		return ret;
	if (json_object_get(o, "enabled")) {
		if ((ret = get_bool(p, o, "rcCheck.", "enabled", &en)))
			return ret;
		nc->rc_check = en;
	}
	if (json_object_get(o, "roceDefaultPKey")) {
		if ((ret = get_bool(p, o, "rcCheck.", "roceDefaultPKey", &en)))
			return ret;
		nc->rc_roce_default = en;
	}
	if ((ret = get_uint(p, o, "rcCheck.", "iterations", 1, 1000000, &nc->rc_iterations)) ||
	    (ret = get_uint(p, o, "rcCheck.", "p99MaxUs", 0, 60000000, &nc->rc_p99_max_us)))
		return ret;
	return 0;
}

static int parse_logging(struct pctx *p, json_t *root)
{
	struct cni_netconf *nc = p->nc;
	const char *lvl = NULL;
	int ret;

	nc->log_level = -1;
	if ((ret = get_str(p, root, "", "logLevel", &lvl)) ||
	    (ret = get_str(p, root, "", "logFile", &nc->log_file)))
		return ret;
	if (lvl && *lvl) {
		/* sriov-cni's names (panic, error, warning, info, debug) and ours */
		nc->log_level = !strcmp(lvl, "panic") ? LOG_ERR : ibvf_log_level_parse(lvl);
		if (nc->log_level < 0)
			return bad(p, "logLevel: \"%s\" is not one of error, warning, info, debug",
				   lvl);
	}
	if (nc->log_file && !*nc->log_file)
		nc->log_file = NULL;
	if (nc->log_file && nc->log_file[0] != '/')
		return bad(p, "logFile: \"%s\" is not an absolute path", nc->log_file);
	return 0;
}

static int parse_ipam(struct pctx *p, json_t *root)
{
	struct cni_netconf *nc = p->nc;
	const char *t = NULL;
	int ret;

	if ((ret = get_obj(p, root, "", "ipam", &nc->ipam)) || !nc->ipam)
		return ret;
	if ((ret = get_str(p, nc->ipam, "ipam.", "type", &t)))
		return ret;
	if (!t || !*t)
		return 0; /* "ipam": {} is what the operator renders for "no IPAM" */
	if (strchr(t, '/') || !strcmp(t, ".") || !strcmp(t, ".."))
		return bad(p, "ipam.type: \"%s\" is not a plugin name", t);
	if (!strcmp(t, "dhcp"))
		return bad(p, "ipam.type: \"dhcp\" is not supported (an IPoIB VF in a Pod has "
			      "no DHCP client daemon)");
	nc->ipam_type = t;
	return 0;
}

static int parse_valid_attachments(struct pctx *p, json_t *root)
{
	json_t *a = json_object_get(root, "cni.dev/valid-attachments"), *e;
	size_t i;

	if (!a || json_is_null(a))
		return 0;
	if (!json_is_array(a))
		return bad(p, "cni.dev/valid-attachments: expected a list");
	json_array_foreach(a, i, e)
	{
		if (!json_is_object(e) || !json_is_string(json_object_get(e, "containerID")) ||
		    !json_is_string(json_object_get(e, "ifname")))
			return bad(p,
				   "cni.dev/valid-attachments[%zu]: expected {containerID, "
				   "ifname} strings",
				   i);
	}
	p->nc->valid_attachments = a;
	return 0;
}

static int parse_device(struct pctx *p, json_t *root, enum cni_command cmd)
{
	struct cni_netconf *nc = p->nc;
	char pci[IBVF_PCI_ADDR_LEN], e[IBVF_ERR_LEN];
	int ret;

	if ((ret = get_str(p, root, "", "deviceID", &nc->device_id)))
		return ret;
	if (nc->device_id && !*nc->device_id)
		nc->device_id = NULL;
	if (!nc->device_id) {
		if (cmd == CNI_CMD_ADD)
			return bad(p, "deviceID: missing (the VF PCI address the device plugin "
				      "allocated; is the NetworkAttachmentDefinition's "
				      "resourceName annotation set?)");
		return 0;
	}
	if (ibvf_pci_addr_parse(nc->device_id, pci, e, sizeof(e)))
		return bad(p, "deviceID: %s", e);
	/* hand on the sysfs spelling (lower case) of the address */
	if (json_object_set_new(root, "deviceID", json_string(pci)))
		return ibvf_errf(p->err, p->errlen, -ENOMEM, "out of memory");
	nc->device_id = json_string_value(json_object_get(root, "deviceID"));
	return 0;
}

/*
 * "pkeyIndex0": put the (first) PKey at P_Key table index 0 (UFM index0,
 * OpenSM indx0), and check it there in the port wait; absent: the SM
 * backend's default. ibvf's own key: neither ib-sriov-cni nor ib-kubernetes
 * has one per network (ib-kubernetes: ENABLE_INDEX0_FOR_PRIMARY_PKEY).
 */
static int parse_pkey_index0(struct pctx *p, json_t *root)
{
	bool v = false;
	int ret;

	p->nc->pkey_index0 = -1;
	if (!json_object_get(root, "pkeyIndex0"))
		return 0;
	ret = get_bool(p, root, "", "pkeyIndex0", &v);
	if (!ret)
		p->nc->pkey_index0 = v;
	return ret;
}
static int parse_root(struct pctx *p, json_t *root, enum cni_command cmd)
{
	struct cni_netconf *nc = p->nc;
	const char *ver = NULL;
	json_t *pr;
	int ret;

	if ((ret = get_str(p, root, "", "cniVersion", &ver)))
		return ret;
	snprintf(nc->cni_version, sizeof(nc->cni_version), "%s", ver ? ver : "0.1.0");
	if (cni_version_parse(nc->cni_version, &nc->version) ||
	    !cni_version_supported(nc->version)) {
		*p->kind = CNI_CONF_VERSION;
		return ibvf_errf(p->err, p->errlen, -EINVAL,
				 "cniVersion \"%s\" is not supported (0.1.0 .. 1.1.0)", ver);
	}
	if ((ret = get_str(p, root, "", "name", &nc->name)) ||
	    (ret = get_str(p, root, "", "type", &nc->type)) || (ret = parse_device(p, root, cmd)) ||
	    (ret = parse_pkeys(p, root)) || (ret = parse_link_state(p, root)) ||
	    (ret = get_bool(p, root, "", "rdmaIsolation", &nc->rdma_isolation)) ||
	    (ret = get_bool(p, root, "", "ibKubernetesEnabled", &nc->ib_kubernetes_enabled)) ||
	    (ret = get_bool(p, root, "", "vfioPciMode", &nc->vfio_pci_mode)) ||
	    (ret = parse_pkey_index0(p, root)) || (ret = parse_guid(p, root)) ||
	    (ret = parse_ipam(p, root)) || (ret = get_obj(p, root, "", "dns", &nc->dns)) ||
	    (ret = parse_ibvfd(p, root)) || (ret = parse_rc_check(p, root)) ||
	    (ret = parse_logging(p, root)) || (ret = parse_valid_attachments(p, root)))
		return ret;
	if (!nc->name)
		nc->name = "";
	pr = json_object_get(root, "prevResult");
	if (pr && !json_is_null(pr)) {
		if (!json_is_object(pr))
			return bad(p, "prevResult: expected an object");
		nc->prev_result = pr;
	}
	return 0;
}

int cni_netconf_parse(struct cni_netconf *nc, const char *text, size_t len, enum cni_command cmd,
		      enum cni_conf_error *kind, char *err, size_t errlen)
{
	struct pctx p = {.nc = nc, .kind = kind, .err = err, .errlen = errlen};
	json_error_t je;
	int ret;

	memset(nc, 0, sizeof(*nc));
	*kind = CNI_CONF_OK;
	nc->root = json_loadb(text, len, 0, &je);
	if (!nc->root || !json_is_object(nc->root)) {
		*kind = CNI_CONF_DECODE;
		ret = nc->root ? ibvf_errf(err, errlen, -EINVAL,
					   "network configuration is not a JSON object")
			       : ibvf_errf(err, errlen, -EINVAL,
					   "network configuration: JSON error at line %d column "
					   "%d: %s",
					   je.line, je.column, je.text);
		json_decref(nc->root);
		nc->root = NULL;
		return ret;
	}
	ret = parse_root(&p, nc->root, cmd);
	if (ret)
		cni_netconf_free(nc);
	return ret;
}

void cni_netconf_free(struct cni_netconf *nc)
{
	json_decref(nc->root);
	memset(nc, 0, sizeof(*nc));
}
