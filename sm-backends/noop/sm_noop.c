// SPDX-License-Identifier: MIT
/*
 * The noop SM backend: accepts every valid request and remembers the
 * membership in memory, so that ibvfd runs where an administrator manages
 * PKeys by hand (or in labs). Nothing reaches any SM; validate() says so.
 * Config: an empty object (no keys).
 */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include <ibvf/sm_backend.h>

#include "err.h"
#include "json_util.h"

struct noop_pkey {
	uint16_t pkey;
	struct ibvf_sm_member *m; /* sorted by GUID */
	size_t n, cap;
};

struct ibvf_sm_backend {
	struct noop_pkey *pk; /* sorted by PKey */
	size_t n, cap;
};

static int noop_init(const char *json_config, struct ibvf_sm_backend **out, char *err,
		     size_t errlen)
{
	static const char *const keys[] = {NULL};
	struct ibvf_jctx c = {"sm.config (noop backend)", err, errlen};
	json_t *root;
	int ret;

	*out = NULL;
	root = ibvf_json_load(c.file, json_config ? json_config : "{}", err, errlen);
	if (!root)
		return -EINVAL;
	ret = ibvf_json_check_keys(&c, root, "", keys);
	json_decref(root);
	if (ret)
		return ret;
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : ibvf_errf(err, errlen, -ENOMEM, "out of memory");
}

static void noop_fini(struct ibvf_sm_backend *b)
{
	if (!b)
		return;
	for (size_t i = 0; i < b->n; i++)
		free(b->pk[i].m);
	free(b->pk);
	free(b);
}

static int noop_validate(struct ibvf_sm_backend *b, char *desc, size_t desclen, char *err,
			 size_t errlen)
{
	size_t members = 0;

	(void)err;
	(void)errlen;
	for (size_t i = 0; i < b->n; i++)
		members += b->pk[i].n;
	snprintf(desc, desclen,
		 "noop: no SM is changed; %zu PKeys with %zu members held in "
		 "memory",
		 b->n, members);
	return 0;
}

/* Index of @pkey in the sorted PKeys, or where it would go. */
static size_t pkey_pos(const struct ibvf_sm_backend *b, uint16_t pkey)
{
	size_t lo = 0, hi = b->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (b->pk[mid].pkey < pkey)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Index of @guid in the sorted members of @p, or where it would go. */
static size_t guid_pos(const struct noop_pkey *p, uint64_t guid)
{
	size_t lo = 0, hi = p->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (p->m[mid].guid < guid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int check_pkey(uint16_t pkey, char *err, size_t errlen)
{
	if (pkey == 0 || pkey > 0x7fff)
		return ibvf_errf(err, errlen, -EINVAL,
				 "PKey 0x%04x: expected a 15-bit partition "
				 "key 0x0001..0x7fff",
				 pkey);
	return 0;
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
	void *p;
	size_t c;

	if (need <= *cap)
		return 0;
	c = *cap ? *cap : 4;
	while (c < need)
		c *= 2;
	p = realloc(*arr, c * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = c;
	return 0;
}

static int add_one(struct noop_pkey *p, const struct ibvf_sm_member *m)
{
	size_t i = guid_pos(p, m->guid);

	if (i < p->n && p->m[i].guid == m->guid) {
		p->m[i].membership = m->membership;
		return 0;
	}
	if (grow((void **)&p->m, &p->cap, p->n + 1, sizeof(*p->m)))
		return -ENOMEM;
	memmove(&p->m[i + 1], &p->m[i], (p->n - i) * sizeof(*p->m));
	p->m[i] = *m;
	p->n++;
	return 0;
}

static int noop_add(struct ibvf_sm_backend *b, uint16_t pkey, const struct ibvf_sm_member *m,
		    size_t n, const struct ibvf_sm_pkey_flags *flags, char *err, size_t errlen)
{
	size_t i;
	int ret;

	(void)flags;
	ret = check_pkey(pkey, err, errlen);
	if (ret || !n)
		return ret;
	if (!m)
		return ibvf_errf(err, errlen, -EINVAL, "no member array");
	for (size_t k = 0; k < n; k++) {
		if (!ibvf_guid_is_assignable(m[k].guid))
			return ibvf_errf(err, errlen, -EINVAL,
					 "GUID 0x%016llx cannot be a "
					 "partition member",
					 (unsigned long long)m[k].guid);
		if (m[k].membership != IBVF_MEMBER_FULL && m[k].membership != IBVF_MEMBER_LIMITED)
			return ibvf_errf(err, errlen, -EINVAL,
					 "GUID 0x%016llx: invalid "
					 "membership %d",
					 (unsigned long long)m[k].guid, (int)m[k].membership);
	}
	i = pkey_pos(b, pkey);
	if (i == b->n || b->pk[i].pkey != pkey) {
		if (grow((void **)&b->pk, &b->cap, b->n + 1, sizeof(*b->pk)))
			return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
		memmove(&b->pk[i + 1], &b->pk[i], (b->n - i) * sizeof(*b->pk));
		b->pk[i] = (struct noop_pkey){.pkey = pkey};
		b->n++;
	}
	for (size_t k = 0; k < n; k++)
		if (add_one(&b->pk[i], &m[k]))
			return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	return 0;
}

static int noop_remove(struct ibvf_sm_backend *b, uint16_t pkey, const uint64_t *guids, size_t n,
		       char *err, size_t errlen)
{
	size_t i;
	struct noop_pkey *p;
	int ret = check_pkey(pkey, err, errlen);

	if (ret || !n)
		return ret;
	if (!guids)
		return ibvf_errf(err, errlen, -EINVAL, "no GUID array");
	i = pkey_pos(b, pkey);
	if (i == b->n || b->pk[i].pkey != pkey)
		return 0;
	p = &b->pk[i];
	for (size_t k = 0; k < n; k++) {
		size_t j = guid_pos(p, guids[k]);

		if (j < p->n && p->m[j].guid == guids[k]) {
			memmove(&p->m[j], &p->m[j + 1], (p->n - j - 1) * sizeof(*p->m));
			p->n--;
		}
	}
	if (!p->n) {
		free(p->m);
		memmove(p, p + 1, (b->n - i - 1) * sizeof(*p));
		b->n--;
	}
	return 0;
}

static int noop_list(struct ibvf_sm_backend *b, int pkey, ibvf_sm_list_cb cb, void *arg, char *err,
		     size_t errlen)
{
	if (pkey < -1 || pkey > 0x7fff || !cb)
		return ibvf_errf(err, errlen, -EINVAL,
				 "list_members: PKey %d: expected -1 (all) "
				 "or 0x0000..0x7fff, and a callback",
				 pkey);
	for (size_t i = 0; i < b->n; i++) {
		if (pkey >= 0 && b->pk[i].pkey != pkey)
			continue;
		for (size_t k = 0; k < b->pk[i].n; k++) {
			int ret = cb(arg, b->pk[i].pkey, &b->pk[i].m[k], true);

			if (ret)
				return ret;
		}
	}
	return 0;
}

static const struct ibvf_sm_ops noop_ops = {
	.abi_version = IBVF_SM_ABI_VERSION,
	.struct_size = sizeof(struct ibvf_sm_ops),
	.name = "noop",
	.init = noop_init,
	.fini = noop_fini,
	.validate = noop_validate,
	.add_members = noop_add,
	.remove_members = noop_remove,
	.list_members = noop_list,
};

const struct ibvf_sm_ops *ibvf_sm_backend_v2(void);

const struct ibvf_sm_ops *ibvf_sm_backend_v2(void)
{
	return &noop_ops;
}
