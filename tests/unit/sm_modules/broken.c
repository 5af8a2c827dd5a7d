// SPDX-License-Identifier: MIT
/*
 * Broken SM backend modules for the loader's tests, one per -DBROKEN_*
 * variant: each gets one thing wrong that ibvf_sm_module_load() must catch.
 * BROKEN_OLD_ABI is a module as SM ABI version 1 built them (entry point
 * ibvf_sm_backend_v1, abi_version 1); BROKEN_NEW_ABI one of a future version 3.
 * BROKEN_V2_BASE is not broken: a version 2 module built before the optional
 * entries (struct_size IBVF_SM_OPS_V2_BASE_SIZE) must still load; "fine" has
 * the optional add_members_owned().
 */
#include <stddef.h>

#include <ibvf/sm_backend.h>

static int b_init(const char *json, struct ibvf_sm_backend **out, char *err, size_t errlen)
{
	(void)json;
	(void)err;
	(void)errlen;
	*out = NULL;
	return 0;
}

static void b_fini(struct ibvf_sm_backend *b)
{
	(void)b;
}

__attribute__((unused)) static int b_validate(struct ibvf_sm_backend *b, char *desc, size_t desclen,
					      char *err, size_t errlen)
{
	(void)b, (void)desc, (void)desclen, (void)err, (void)errlen;
	return 0;
}

static int b_add(struct ibvf_sm_backend *b, uint16_t pkey, const struct ibvf_sm_member *m, size_t n,
		 const struct ibvf_sm_pkey_flags *f, char *err, size_t errlen)
{
	(void)b, (void)pkey, (void)m, (void)n, (void)f, (void)err, (void)errlen;
	return 0;
}

__attribute__((unused)) static int b_add_owned(struct ibvf_sm_backend *b, uint16_t pkey,
					       const struct ibvf_sm_member *m,
					       const char *const *owners, size_t n,
					       const struct ibvf_sm_pkey_flags *f, char *err,
					       size_t errlen)
{
	(void)owners;
	return b_add(b, pkey, m, n, f, err, errlen);
}

static int b_remove(struct ibvf_sm_backend *b, uint16_t pkey, const uint64_t *g, size_t n,
		    char *err, size_t errlen)
{
	(void)b, (void)pkey, (void)g, (void)n, (void)err, (void)errlen;
	return 0;
}

static int b_list(struct ibvf_sm_backend *b, int pkey, ibvf_sm_list_cb cb, void *arg, char *err,
		  size_t errlen)
{
	(void)b, (void)pkey, (void)cb, (void)arg, (void)err, (void)errlen;
	return 0;
}

__attribute__((unused)) static const struct ibvf_sm_ops ops = {
#if defined(BROKEN_ABI)
	.abi_version = IBVF_SM_ABI_VERSION + 98,
#elif defined(BROKEN_OLD_ABI)
	.abi_version = 1,
#elif defined(BROKEN_NEW_ABI)
	.abi_version = 3,
#else
	.abi_version = IBVF_SM_ABI_VERSION,
#endif
#if defined(BROKEN_SIZE)
	.struct_size = 16,
#elif defined(BROKEN_V2_BASE)
	/* a module built before the optional entries: it ends at list_members */
	.struct_size = IBVF_SM_OPS_V2_BASE_SIZE,
#else
	.struct_size = sizeof(struct ibvf_sm_ops),
#endif
#if defined(BROKEN_NAME)
	.name = "somebodyelse",
#else
	.name = MODULE_NAME,
#endif
	.init = b_init,
	.fini = b_fini,
#if !defined(BROKEN_MISSING_OP)
	.validate = b_validate,
#endif
	.add_members = b_add,
	.remove_members = b_remove,
	.list_members = b_list,
#if defined(BROKEN_NOTHING)
	.add_members_owned = b_add_owned,
#endif
};

#if defined(BROKEN_NO_SYMBOL)
const struct ibvf_sm_ops *ibvf_sm_backend_v0(void);

const struct ibvf_sm_ops *ibvf_sm_backend_v0(void)
{
	return &ops;
}
#elif defined(BROKEN_OLD_ABI)
const struct ibvf_sm_ops *ibvf_sm_backend_v1(void);

const struct ibvf_sm_ops *ibvf_sm_backend_v1(void)
{
	return &ops;
}
#elif defined(BROKEN_NEW_ABI)
const struct ibvf_sm_ops *ibvf_sm_backend_v3(void);

const struct ibvf_sm_ops *ibvf_sm_backend_v3(void)
{
	return &ops;
}
#else
const struct ibvf_sm_ops *ibvf_sm_backend_v2(void);

const struct ibvf_sm_ops *ibvf_sm_backend_v2(void)
{
#if defined(BROKEN_NULL)
	return NULL;
#else
	return &ops;
#endif
}
#endif
