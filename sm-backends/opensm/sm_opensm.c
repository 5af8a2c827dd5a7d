// SPDX-License-Identifier: MIT
/*
 * The opensm SM backend: membership is kept in ibvf's section of OpenSM's
 * partition file. Every change is: lock, read and parse the whole file
 * (refuse if it does not parse: nothing is touched), compute the new
 * section, render the new file, parse it back and compare (refuse if the
 * admin part changed), check that OpenSM runs, back up + install
 * atomically, SIGHUP, then verify the P_Key tables through SMPs.
 */
#include "sm_opensm.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "err.h"
#include "sort.h"
#include "json_util.h"
#include "opensm_reload.h"
#include "partition_file.h"

#define CFG_FILE "sm.config (opensm backend)"

struct ibvf_sm_backend {
	struct opensm_cfg cfg;
	struct pkey_verifier v;
};

/* ---------------------------------------------------------------- config -- */

void opensm_cfg_free(struct opensm_cfg *cfg)
{
	free(cfg->partition_file);
	free(cfg->backup_file);
	free(cfg->lock_file);
	free(cfg->pid_file);
	free(cfg->umad_ca);
	free(cfg->admin_pkeys);
	memset(cfg, 0, sizeof(*cfg));
}

static int parse_defaults(const struct ibvf_jctx *c, json_t *o, struct opensm_cfg *cfg)
{
	static const char *const keys[] = {"ipoib", "indx0", "mtu", "rate", "sl", NULL};
	static const struct {
		const char *key;
		uint64_t min, max;
	} nums[] = {{"mtu", 1, 5}, {"rate", 2, 63}, {"sl", 0, 15}};
	int *dst[] = {&cfg->props.mtu, &cfg->props.rate, &cfg->props.sl};
	int ret;

	ret = ibvf_json_check_keys(c, o, "defaults", keys);
	if (!ret)
		ret = ibvf_json_bool(c, o, "defaults", "ipoib", &cfg->props.ipoib);
	if (!ret)
		ret = ibvf_json_bool(c, o, "defaults", "indx0", &cfg->index0);
	for (unsigned i = 0; !ret && i < 3; i++) {
		uint64_t v = UINT64_MAX;

		ret = ibvf_json_uint(c, o, "defaults", nums[i].key, nums[i].min, nums[i].max, &v);
		if (!ret && v != UINT64_MAX)
			*dst[i] = (int)v;
	}
	return ret;
}

/*
 * "admin_pkeys": {"0x0a30": "defmember", "0x0a01": "full", ...}: the
 * administrator's partitions ibvf may join, and with which membership.
 */
static int parse_admin_pkeys(const struct ibvf_jctx *c, json_t *o, struct opensm_cfg *cfg)
{
	static const char *const names[] = {"defmember", "full", "limited", "request"};
	const char *key;
	json_t *v;

	cfg->admin_pkeys = calloc(json_object_size(o) + 1, sizeof(*cfg->admin_pkeys));
	if (!cfg->admin_pkeys)
		return -ENOMEM;
	json_object_foreach(o, key, v)
	{
		struct opensm_admin_pkey *a = &cfg->admin_pkeys[cfg->n_admin_pkeys];
		char e[IBVF_ERR_LEN];
		uint16_t pk;
		size_t i;

		if (ibvf_pkey_parse(key, &pk, e, sizeof(e)) || !ibvf_pkey_key(pk) ||
		    ibvf_pkey_key(pk) == 0x7fff)
			return ibvf_json_err(c, "admin_pkeys", key,
					     "expected a PKey 0x0001..0x7ffe as the key");
		for (i = 0;
		     i < 4 && !(json_is_string(v) && !strcmp(json_string_value(v), names[i])); i++)
			;
		if (i == 4)
			return ibvf_json_err(c, "admin_pkeys", key,
					     "expected \"defmember\", \"full\", \"limited\" or "
					     "\"request\"");
		for (size_t k = 0; k < cfg->n_admin_pkeys; k++)
			if (cfg->admin_pkeys[k].pkey == ibvf_pkey_key(pk))
				return ibvf_json_err(c, "admin_pkeys", key,
						     "PKey 0x%04x is given twice",
						     ibvf_pkey_key(pk));
		a->pkey = ibvf_pkey_key(pk);
		a->join = (enum opensm_admin_join)i;
		cfg->n_admin_pkeys++;
	}
	return 0;
}

static int derive_path(char **dst, const char *base, const char *suffix)
{
	if (*dst)
		return 0;
	return asprintf(dst, "%s%s", base, suffix) < 0 ? (*dst = NULL, -ENOMEM) : 0;
}

static int parse_top(const struct ibvf_jctx *c, json_t *o, struct opensm_cfg *cfg)
{
	static const char *const keys[] = {
		"partition_file",  "backup_file", "lock_file",	 "pid_file",  "reload_timeout_ms",
		"lock_timeout_ms", "verify",	  "umad_ca",	 "umad_port", "poll_min_ms",
		"poll_max_ms",	   "defaults",	  "admin_pkeys", NULL};
	uint64_t rt = cfg->reload_timeout_ms, lt = cfg->lock_timeout_ms, port = 0;
	uint64_t pmin = cfg->poll_min_ms, pmax = cfg->poll_max_ms;
	char *verify = NULL;
	json_t *d;
	int ret;

	ret = ibvf_json_check_keys(c, o, "", keys);
	if (!ret)
		ret = ibvf_json_string(c, o, "", "partition_file", &cfg->partition_file);
	if (!ret)
		ret = ibvf_json_string(c, o, "", "backup_file", &cfg->backup_file);
	if (!ret)
		ret = ibvf_json_string(c, o, "", "lock_file", &cfg->lock_file);
	if (!ret)
		ret = ibvf_json_string(c, o, "", "pid_file", &cfg->pid_file);
	if (!ret)
		ret = ibvf_json_uint(c, o, "", "reload_timeout_ms", 0, 600000, &rt);
	if (!ret)
		ret = ibvf_json_uint(c, o, "", "lock_timeout_ms", 0, 600000, &lt);
	if (!ret)
		ret = ibvf_json_string(c, o, "", "verify", &verify);
	if (!ret)
		ret = ibvf_json_string(c, o, "", "umad_ca", &cfg->umad_ca);
	if (!ret)
		ret = ibvf_json_uint(c, o, "", "umad_port", 0, 254, &port);
	if (!ret)
		ret = ibvf_json_uint(c, o, "", "poll_min_ms", 1, 10000, &pmin);
	if (!ret)
		ret = ibvf_json_uint(c, o, "", "poll_max_ms", 1, 60000, &pmax);
	if (!ret && pmax < pmin)
		ret = ibvf_json_err(c, "", "poll_max_ms", "must not be below poll_min_ms");
	if (!ret && verify && pv_policy_parse(verify, &cfg->verify))
		ret = ibvf_json_err(c, "", "verify", "expected \"fabric\", \"all\" or \"off\"");
	free(verify);
	if (!ret && !(ret = ibvf_json_object(c, o, "", "defaults", &d)) && d)
		ret = parse_defaults(c, d, cfg);
	if (!ret && !(ret = ibvf_json_object(c, o, "", "admin_pkeys", &d)) && d)
		ret = parse_admin_pkeys(c, d, cfg);
	if (!ret && !cfg->pid_file)
		ret = ibvf_json_err(c, "", "pid_file",
				    "required: the file holding the pid of "
				    "the OpenSM to signal (OpenSM writes none itself)");
	if (!ret && (!*cfg->partition_file || !*cfg->pid_file))
		ret = ibvf_json_err(c, "", *cfg->pid_file ? "partition_file" : "pid_file",
				    "must not be empty");
	/* ibvfd and ibvfctl run in different directories: no relative paths */
	for (size_t i = 0; !ret && i < 4; i++) {
		static const char *const names[] = {"partition_file", "backup_file", "lock_file",
						    "pid_file"};
		const char *v[] = {cfg->partition_file, cfg->backup_file, cfg->lock_file,
				   cfg->pid_file};

		if (v[i] && v[i][0] != '/')
			ret = ibvf_json_err(c, "", names[i], "'%.64s' is not an absolute path",
					    v[i]);
	}
	cfg->reload_timeout_ms = (uint32_t)rt;
	cfg->lock_timeout_ms = (uint32_t)lt;
	cfg->umad_port = (int)port;
	cfg->poll_min_ms = (uint32_t)pmin;
	cfg->poll_max_ms = (uint32_t)pmax;
	return ret;
}

int opensm_cfg_parse(const char *json, struct opensm_cfg *cfg, char *err, size_t errlen)
{
	struct ibvf_jctx c = {CFG_FILE, err, errlen};
	json_t *root;
	int ret;

	memset(cfg, 0, sizeof(*cfg));
	cfg->reload_timeout_ms = 10000;
	cfg->lock_timeout_ms = 5000;
	cfg->poll_min_ms = 5;
	cfg->poll_max_ms = 50;
	cfg->verify = PV_FABRIC;
	cfg->props = (struct pc_props){.ipoib = true, .mtu = -1, .rate = -1, .sl = -1};
	root = ibvf_json_load(CFG_FILE, json ? json : "{}", err, errlen);
	if (!root)
		return -EINVAL;
	cfg->partition_file = strdup("/etc/opensm/partitions.conf");
	ret = cfg->partition_file ? parse_top(&c, root, cfg) : -ENOMEM;
	json_decref(root);
	if (!ret)
		ret = derive_path(&cfg->backup_file, cfg->partition_file, ".ibvf-prev");
	if (!ret)
		ret = derive_path(&cfg->lock_file, cfg->partition_file, ".ibvf-lock");
	if (ret == -ENOMEM)
		ibvf_errf(err, errlen, ret, "out of memory");
	if (ret)
		opensm_cfg_free(cfg);
	return ret;
}

/* ------------------------------------------------------------- lifecycle -- */

static int opensm_init(const char *json_config, struct ibvf_sm_backend **out, char *err,
		       size_t errlen)
{
	struct ibvf_sm_backend *b = calloc(1, sizeof(*b));
	int ret;

	*out = NULL;
	if (!b)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	ret = opensm_cfg_parse(json_config, &b->cfg, err, errlen);
	if (ret) {
		free(b);
		return ret;
	}
	*out = b;
	return 0;
}

static void opensm_fini(struct ibvf_sm_backend *b)
{
	if (!b)
		return;
	pv_close(&b->v);
	opensm_cfg_free(&b->cfg);
	free(b);
}

void opensm_set_verifier(struct ibvf_sm_backend *b, const struct pkey_verifier *v)
{
	pv_close(&b->v);
	b->v = *v;
}

/* The SMP verifier, opened on first use and kept. */
static int verifier(struct ibvf_sm_backend *b, char *err, size_t errlen)
{
	if (b->v.ops)
		return 0;
	return pv_open_smp(b->cfg.umad_ca, b->cfg.umad_port, b->cfg.poll_min_ms, b->cfg.poll_max_ms,
			   &b->v, err, errlen);
}

/* ------------------------------------------------------------- the file -- */

/* The current file, parsed; *@st for pf_install(). */
static int load(struct ibvf_sm_backend *b, struct pc_doc **doc, struct stat *st, char *err,
		size_t errlen)
{
	char *text;
	size_t len;
	int ret;

	ret = pf_read(b->cfg.partition_file, &text, &len, st, err, errlen);
	if (ret)
		return ret;
	ret = pc_doc_load(text, len, b->cfg.partition_file, doc, err, errlen);
	free(text);
	/*
	 * The file, not a member, is at fault: permanent until someone edits
	 * it, and not worth splitting a batch over (-EINVAL would be).
	 */
	return ret == -EINVAL ? -EBADMSG : ret;
}

/*
 * Install @want as the new section of @doc's file and make OpenSM read it.
 * On any error the file on disk is the old one again.
 */
static int commit(struct ibvf_sm_backend *b, const struct pc_doc *doc, const struct stat *st,
		  const struct pc_managed *want, char *err, size_t errlen)
{
	const char *path = b->cfg.partition_file;
	char *text, e2[IBVF_ERR_LEN];
	size_t len;
	pid_t pid;
	int ret;

	ret = pc_render(doc, want, &text, &len, err, errlen);
	if (ret)
		return ret;
	ret = pc_check_rendered(doc, want, text, len, path, err, errlen);
	if (!ret)
		ret = pf_install(path, b->cfg.backup_file, doc->text, doc->len, st, text, len, err,
				 errlen);
	if (ret) {
		free(text);
		return ret;
	}
	ret = opensm_reload(b->cfg.pid_file, &pid, err, errlen);
	if (ret) {
		/* nothing reached OpenSM: put the old file back */
		if (pf_install(path, NULL, text, len, st, doc->text, doc->len, e2, sizeof(e2)))
			ibvf_err_prefix(err, errlen, ret, "restoring %s failed too (%s)", path, e2);
		else
			ibvf_err_prefix(err, errlen, ret, "%s was restored", path);
	}
	free(text);
	return ret;
}

/* Props of partitions the admin defines are the admin's: ibvf writes none. */
static void drop_admin_props(const struct pc_doc *doc, struct pc_managed *m)
{
	for (size_t i = 0; i < m->n; i++)
		if (pc_admin_defines(doc, m->pkeys[i].pkey))
			m->pkeys[i].props = (struct pc_props){false, -1, -1, -1};
}

/* --------------------------------------------------------------- changes -- */

static int check_pkey(uint16_t pkey, char *err, size_t errlen)
{
	if (pkey == 0 || pkey > 0x7fff)
		return ibvf_errf(err, errlen, -EINVAL,
				 "PKey 0x%04x: expected a 15-bit partition "
				 "key 0x0001..0x7fff",
				 pkey);
	return 0;
}

static int check_guid(uint64_t guid, char *err, size_t errlen)
{
	if (!ibvf_guid_is_assignable(guid))
		return ibvf_errf(err, errlen, -EINVAL,
				 "GUID 0x%016llx cannot be a partition "
				 "member (0 and all-ones are invalid port GUIDs)",
				 (unsigned long long)guid);
	return 0;
}

static int check_members(const struct ibvf_sm_member *m, size_t n, char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		int ret = check_guid(m[i].guid, err, errlen);

		if (ret)
			return ret;
		if (m[i].membership != IBVF_MEMBER_FULL && m[i].membership != IBVF_MEMBER_LIMITED)
			return ibvf_errf(err, errlen, -EINVAL,
					 "GUID 0x%016llx: invalid "
					 "membership %d",
					 (unsigned long long)m[i].guid, (int)m[i].membership);
	}
	return 0;
}

/* A GUID the admin lists in @pkey is the admin's: never overridden. */
static int check_admin(const struct pc_doc *doc, uint16_t pkey, const struct ibvf_sm_member *m,
		       size_t n, char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		const struct pc_port *adm = pc_admin_find_guid(doc, pkey, m[i].guid);

		if (adm)
			return ibvf_errf(err, errlen, -EEXIST,
					 "GUID 0x%016llx is already a %s "
					 "member of PKey 0x%04x by the administrator's definition "
					 "at line %u of the partition file; ibvf does not override "
					 "the administrator's members",
					 (unsigned long long)m[i].guid,
					 pc_membership_name(adm->membership), pkey, adm->pos.line);
	}
	return 0;
}

/* The administrator's first definition of @pkey (its name and defmember count). */
static const struct pc_partition *admin_part(const struct pc_doc *doc, uint16_t pkey)
{
	for (size_t i = 0; i < doc->n_admin; i++) {
		const struct pc_partition *p = &doc->file->parts[doc->admin[i]];

		if (p->has_pkey && p->pkey == pkey)
			return p;
	}
	return NULL;
}

/*
 * Joining a partition the administrator defines is an explicit opt-in
 * (admin_pkeys), and the membership is the opt-in's: by default the
 * defmember of the administrator's (first) definition, "both" read as full
 * (ibvf writes no both). A request for another membership is refused rather
 * than silently changed: the daemon then waits for the P_Key it asked for.
 */
static int check_admin_join(const struct ibvf_sm_backend *b, const struct pc_doc *doc,
			    uint16_t pkey, const struct ibvf_sm_member *m, size_t n, char *err,
			    size_t errlen)
{
	const struct pc_partition *p = admin_part(doc, pkey);
	const struct opensm_admin_pkey *opt = NULL;
	bool full;

	if (!p)
		return 0;
	for (size_t i = 0; i < b->cfg.n_admin_pkeys; i++)
		if (b->cfg.admin_pkeys[i].pkey == pkey)
			opt = &b->cfg.admin_pkeys[i];
	if (!opt)
		return ibvf_errf(err, errlen, -EPERM,
				 "PKey 0x%04x is the administrator's partition '%s' (line %u of "
				 "%s, defmember=%s); ibvf joins an administrator's partition "
				 "only when its PKey is listed in admin_pkeys of the opensm "
				 "backend's config",
				 pkey, p->name, p->pos.line, b->cfg.partition_file,
				 pc_membership_name(p->defmember));
	if (opt->join == OJ_REQUEST)
		return 0;
	full = opt->join == OJ_FULL || (opt->join == OJ_DEFMEMBER && p->defmember != PC_LIMITED);
	for (size_t i = 0; i < n; i++)
		if ((m[i].membership == IBVF_MEMBER_FULL) != full)
			return ibvf_errf(
				err, errlen, -EINVAL, /* this member's request: a batch splits */
				"GUID 0x%016llx: %s membership of the administrator's partition "
				"'%s' (PKey 0x%04x, line %u, defmember=%s) asked for; admin_pkeys "
				"allows only %s members (\"%s\")",
				(unsigned long long)m[i].guid,
				m[i].membership == IBVF_MEMBER_FULL ? "full" : "limited", p->name,
				pkey, p->pos.line, pc_membership_name(p->defmember),
				full ? "full" : "limited",
				opt->join == OJ_DEFMEMBER ? "defmember"
				: full			  ? "full"
							  : "limited");
	return 0;
}

/* After the reload: wait for the prepared ports to show the change. */
static int verify_after(struct ibvf_sm_backend *b, uint16_t pkey, struct pv_item *items, size_t n,
			int planned, char *err, size_t errlen)
{
	int ret;

	if (b->cfg.verify == PV_OFF || planned <= 0)
		return 0;
	ret = pv_run(&b->v, pkey, items, n, b->cfg.reload_timeout_ms, err, errlen);
	if (ret)
		ibvf_err_prefix(err, errlen, ret, "OpenSM reloaded %s but", b->cfg.partition_file);
	return ret;
}

/* One add_members() or remove_members() request. */
struct change {
	uint16_t pkey;
	const struct ibvf_sm_member *add;
	const uint64_t *remove;
	size_t n;
	const struct ibvf_sm_pkey_flags *flags;
	struct pv_item *items;
};

static int apply(struct ibvf_sm_backend *b, const struct pc_doc *doc, const struct change *c,
		 struct pc_managed *want, size_t *changed, char *err, size_t errlen)
{
	struct pc_member *mem;
	struct pc_props props = b->cfg.props;
	bool index0 = c->flags ? c->flags->index0 : b->cfg.index0;
	int ret;

	if (pc_managed_copy(want, &doc->managed))
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	if (c->remove) {
		ret = pc_managed_remove(want, c->pkey, c->remove, c->n, changed);
		return ret ? ibvf_errf(err, errlen, ret, "out of memory") : 0;
	}
	ret = check_admin(doc, c->pkey, c->add, c->n, err, errlen);
	if (!ret)
		ret = check_admin_join(b, doc, c->pkey, c->add, c->n, err, errlen);
	if (ret)
		return ret;
	mem = calloc(c->n, sizeof(*mem));
	if (!mem)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	for (size_t i = 0; i < c->n; i++)
		mem[i] = (struct pc_member){c->add[i].guid,
					    c->add[i].membership == IBVF_MEMBER_FULL, index0};
	if (c->flags)
		props.ipoib = c->flags->ipoib;
	ret = pc_managed_add(want, c->pkey, &props, mem, c->n, changed);
	free(mem);
	if (ret)
		return ibvf_errf(err, errlen, ret, "out of memory");
	drop_admin_props(doc, want);
	return 0;
}

/*
 * What to verify: each added GUID's port must show the P_Key with its
 * membership; each removed one must lose it, unless the admin's own
 * definitions keep it a member (its explicit entry, or a keyword such as
 * ALL whose ports ibvf cannot predict).
 */
static void plan_items(const struct pc_doc *doc, const struct change *c)
{
	bool keywords = c->remove && pc_admin_has_keywords(doc, c->pkey);

	for (size_t i = 0; i < c->n; i++) {
		struct pv_item *it = &c->items[i];

		if (c->add) {
			it->guid = c->add[i].guid;
			it->want = c->add[i].membership == IBVF_MEMBER_FULL ? PV_FULL : PV_LIMITED;
		} else {
			it->guid = c->remove[i];
			it->want = PV_ABSENT;
			it->skip = keywords || pc_admin_find_guid(doc, c->pkey, it->guid);
		}
	}
}

static int prepare_verify(struct ibvf_sm_backend *b, const struct pc_doc *doc,
			  const struct change *c, size_t changed, int *planned, char *err,
			  size_t errlen)
{
	pid_t pid;
	int ret;

	ret = verifier(b, err, errlen);
	if (ret)
		return ret;
	plan_items(doc, c);
	ret = pv_prepare(&b->v, b->cfg.verify, c->items, c->n, err, errlen);
	if (ret < 0)
		return ret;
	*planned = ret;
	/* a retry that changes nothing: signal again only if a port lacks the change */
	if (!changed && *planned && pv_run(&b->v, c->pkey, c->items, c->n, 0, NULL, 0))
		return opensm_reload(b->cfg.pid_file, &pid, err, errlen);
	return 0;
}

/*
 * The shared part of add and remove: lock, load, apply the change to a copy
 * of the section, check that OpenSM runs, prepare the SMP check, commit
 * (only when something changed), unlock, verify. When nothing changed but a
 * verified port does not show the change yet (a retry after a failed
 * verification), OpenSM is signalled again.
 */
static int change(struct ibvf_sm_backend *b, const struct change *c, char *err, size_t errlen)
{
	struct pc_managed want = {0};
	struct pc_doc *doc = NULL;
	size_t changed = 0;
	int lock = -1, planned = 0, ret;
	struct stat st;

	ret = pf_lock(b->cfg.lock_file, b->cfg.lock_timeout_ms, &lock, err, errlen);
	if (ret)
		return ret;
	ret = load(b, &doc, &st, err, errlen);
	if (ret)
		ibvf_err_prefix(err, errlen, ret, "nothing was changed");
	if (!ret)
		ret = apply(b, doc, c, &want, &changed, err, errlen);
	/* an OpenSM that is not there is the clearest error: before any SMP */
	if (!ret && (changed || b->cfg.verify != PV_OFF))
		ret = opensm_find(b->cfg.pid_file, &(pid_t){0}, err, errlen);
	if (!ret && b->cfg.verify != PV_OFF)
		ret = prepare_verify(b, doc, c, changed, &planned, err, errlen);
	if (!ret && changed)
		ret = commit(b, doc, &st, &want, err, errlen);
	pf_unlock(lock);
	pc_managed_free(&want);
	pc_doc_free(doc);
	if (!ret)
		ret = verify_after(b, c->pkey, c->items, c->n, planned, err, errlen);
	return ret;
}

static int run_change(struct ibvf_sm_backend *b, struct change *c, char *err, size_t errlen)
{
	int ret;

	ret = check_pkey(c->pkey, err, errlen);
	if (ret || !c->n)
		return ret;
	c->items = calloc(c->n, sizeof(*c->items));
	if (!c->items)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	ret = change(b, c, err, errlen);
	free(c->items);
	return ret;
}

static int member_cmp(const void *a, const void *b)
{
	const struct ibvf_sm_member *x = a, *y = b;

	if (x->guid != y->guid)
		return x->guid < y->guid ? -1 : 1;
	return (int)x->membership - (int)y->membership;
}

/* The same GUID twice with different memberships is a caller's mistake. */
static int check_duplicates(const struct ibvf_sm_member *m, size_t n, char *err, size_t errlen)
{
	struct ibvf_sm_member *s;
	int ret = 0;

	if (n < 2)
		return 0;
	s = malloc(n * sizeof(*s));
	if (!s)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	memcpy(s, m, n * sizeof(*s));
	ibvf_sort(s, n, sizeof(*s), member_cmp);
	for (size_t i = 1; i < n && !ret; i++)
		if (s[i].guid == s[i - 1].guid && s[i].membership != s[i - 1].membership)
			ret = ibvf_errf(err, errlen, -EINVAL,
					"GUID 0x%016llx is given twice with "
					"different memberships",
					(unsigned long long)s[i].guid);
	free(s);
	return ret;
}

static int opensm_add(struct ibvf_sm_backend *b, uint16_t pkey,
		      const struct ibvf_sm_member *members, size_t n,
		      const struct ibvf_sm_pkey_flags *flags, char *err, size_t errlen)
{
	struct change c = {.pkey = pkey, .add = members, .n = n, .flags = flags};
	int ret;

	if (n && !members)
		return ibvf_errf(err, errlen, -EINVAL, "no member array");
	ret = check_members(members, n, err, errlen);
	if (!ret)
		ret = check_duplicates(members, n, err, errlen);
	return ret ? ret : run_change(b, &c, err, errlen);
}

static int opensm_remove(struct ibvf_sm_backend *b, uint16_t pkey, const uint64_t *guids, size_t n,
			 char *err, size_t errlen)
{
	struct change c = {.pkey = pkey, .remove = guids, .n = n};

	if (n && !guids)
		return ibvf_errf(err, errlen, -EINVAL, "no GUID array");
	for (size_t i = 0; i < n; i++) {
		int ret = check_guid(guids[i], err, errlen);

		if (ret)
			return ret;
	}
	return run_change(b, &c, err, errlen);
}

/* ----------------------------------------------------------------- list -- */

static int list_admin(const struct pc_doc *doc, int pkey, ibvf_sm_list_cb cb, void *arg)
{
	for (size_t i = 0; i < doc->n_admin; i++) {
		const struct pc_partition *pt = &doc->file->parts[doc->admin[i]];

		if (!pt->has_pkey || (pkey >= 0 && pt->pkey != pkey))
			continue;
		for (size_t k = 0; k < pt->n_ports; k++) {
			const struct pc_port *po = &pt->ports[k];
			struct ibvf_sm_member m = {
				po->guid,
				po->membership == PC_LIMITED ? IBVF_MEMBER_LIMITED
							     : IBVF_MEMBER_FULL,
			};
			int ret;

			if (po->kind != PC_PORT_GUID)
				continue; /* ALL, SELF...: not a GUID */
			ret = cb(arg, pt->pkey, &m, false);
			if (ret)
				return ret;
		}
	}
	return 0;
}

static int opensm_list(struct ibvf_sm_backend *b, int pkey, ibvf_sm_list_cb cb, void *arg,
		       char *err, size_t errlen)
{
	struct pc_doc *doc;
	struct stat st;
	int ret;

	if (pkey < -1 || pkey > 0x7fff || !cb)
		return ibvf_errf(err, errlen, -EINVAL,
				 "list_members: PKey %d: expected -1 (all) "
				 "or 0x0000..0x7fff, and a callback",
				 pkey);
	ret = load(b, &doc, &st, err, errlen);
	if (ret)
		return ret;
	for (size_t i = 0; !ret && i < doc->managed.n; i++) {
		const struct pc_mpkey *p = &doc->managed.pkeys[i];

		if (pkey >= 0 && p->pkey != pkey)
			continue;
		for (size_t k = 0; !ret && k < p->n; k++) {
			struct ibvf_sm_member m = {
				p->members[k].guid,
				p->members[k].full ? IBVF_MEMBER_FULL : IBVF_MEMBER_LIMITED,
			};

			ret = cb(arg, p->pkey, &m, true);
		}
	}
	if (!ret)
		ret = list_admin(doc, pkey, cb, arg);
	pc_doc_free(doc);
	return ret;
}

/* ------------------------------------------------------------- validate -- */

/* Does the running OpenSM read our file? Best effort: unknown is fine. */
static int check_same_file(const struct opensm_cfg *cfg, pid_t pid, char *err, size_t errlen)
{
	char theirs[4096], a[4096], b[4096];

	if (opensm_partition_path(pid, theirs, sizeof(theirs), NULL, 0))
		return 0;
	if (!realpath(theirs, a) || !realpath(cfg->partition_file, b) || !strcmp(a, b))
		return 0;
	return ibvf_errf(err, errlen, -EINVAL,
			 "opensm pid %d reads its partitions from %s, "
			 "not from %s (partition_file)",
			 (int)pid, theirs, cfg->partition_file);
}

static int opensm_validate(struct ibvf_sm_backend *b, char *desc, size_t desclen, char *err,
			   size_t errlen)
{
	char via[128] = "off";
	struct pc_doc *doc;
	struct stat st;
	pid_t pid;
	int ret;

	ret = load(b, &doc, &st, err, errlen);
	if (ret)
		return ret;
	ret = opensm_find(b->cfg.pid_file, &pid, err, errlen);
	if (!ret)
		ret = check_same_file(&b->cfg, pid, err, errlen);
	/* a file ibvf cannot replace fails every add and remove */
	if (!ret)
		ret = pf_check_writable(b->cfg.partition_file, b->cfg.backup_file, b->cfg.lock_file,
					err, errlen);
	if (!ret && b->cfg.verify != PV_OFF) {
		ret = verifier(b, err, errlen);
		if (!ret)
			snprintf(via, sizeof(via), "SMPs from %s", b->v.ops->name(b->v.ctx));
	}
	if (!ret)
		snprintf(desc, desclen,
			 "OpenSM pid %d; %s: %zu admin partitions (%zu warnings), "
			 "%zu managed PKeys with %zu members; verification %s",
			 (int)pid, b->cfg.partition_file, doc->n_admin, doc->file->n_warnings,
			 doc->managed.n, pc_managed_count(&doc->managed), via);
	pc_doc_free(doc);
	return ret;
}

/* ------------------------------------------------------------------ ABI -- */

const struct ibvf_sm_ops opensm_ops = {
	.abi_version = IBVF_SM_ABI_VERSION,
	.struct_size = sizeof(struct ibvf_sm_ops),
	.name = "opensm",
	.init = opensm_init,
	.fini = opensm_fini,
	.validate = opensm_validate,
	.add_members = opensm_add,
	.remove_members = opensm_remove,
	.list_members = opensm_list,
};
