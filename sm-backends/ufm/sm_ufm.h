/* SPDX-License-Identifier: MIT */
/*
 * ufm SM backend: partition (PKey) membership through NVIDIA UFM Enterprise's
 * REST API (UFM Enterprise REST API guide, "PKey GUIDs REST API" and
 * "REST API Complementary Information"; docs/ufm.md).
 *
 *   add     POST {prefix}/resources/pkeys, one request per membership
 *           {"pkey":"0x00A5","guids":["0002c90300001001",...],
 *            "membership":"full"|"limited","index0":bool,"ip_over_ib":bool}
 *           (never "memberships": UFM's add ignores it, issue 16)
 *   remove  DELETE {prefix}/resources/pkeys/0xa5/guids/{g,...} (UFM >= 6.10),
 *           else POST {prefix}/actions/remove_guids_from_pkey {"pkey","guids"}
 *   read    GET  {prefix}/resources/pkeys/0xa5?guids_data=true (before changes,
 *           beside the wait's read; a fresh list stands for it before an add)
 *   wait    GET  {prefix}/resources/pkeys/last_updated (between changes)
 *   list    GET  {prefix}/resources/pkeys?guids_data=true
 *   version GET  {prefix}/app/ufm_version (+ GET .../pkeys/0x7fff in validate)
 *
 * {prefix} is /ufmRest (Basic auth, client certificate) or /ufmRestV3
 * (access token). Bodies are compact JSON with the keys in the order shown.
 * The module exports only
 * ibvf_sm_backend_v2 (module.c, sm-backends/sm_backend.map); the
 * declarations below are for the module's own tests.
 */
#ifndef IBVF_SM_UFM_H
#define IBVF_SM_UFM_H

#include <ibvf/sm_backend.h>

/** The ops table (also what the entry point ibvf_sm_backend_v2() returns). */
extern const struct ibvf_sm_ops ufm_ops;

/**
 * ufm_add_body() - the JSON body of an add call for members [0, @n) of
 * @pkey (15-bit key, 0x0001..0x7ffe), all of one membership. @flags NULL:
 * index0 true, ip_over_ib true. *@out is malloc'd (NULL on error).
 * Return: 0, -EINVAL (members of different memberships), -ENOMEM.
 */
int ufm_add_body(uint16_t pkey, const struct ibvf_sm_member *m, size_t n,
		 const struct ibvf_sm_pkey_flags *flags, char **out);

/** ufm_remove_body() - the JSON body of a remove call. Return: 0, -ENOMEM. */
int ufm_remove_body(uint16_t pkey, const uint64_t *guids, size_t n, char **out);

/**
 * ufm_parse_pkeys() - parse the reply of GET .../resources/pkeys?guids_data=true
 * (an object keyed by PKey, each {"guids":[{"guid","membership","index0"}],
 * ...}) and call @cb for every member of @pkey (or of every PKey when @pkey
 * is -1). Hex is accepted in any case; "guids" and "membership" may be
 * missing (membership then comes from the PKey's own "membership", else
 * "full", UFM's default); "{}" is an empty fabric.
 * Return: 0, the non-zero value @cb returned, or -EBADMSG for a malformed
 * body with the reason (and where) in @err.
 */
int ufm_parse_pkeys(const char *body, size_t len, int pkey, ibvf_sm_list_cb cb, void *arg,
		    char *err, size_t errlen);

#endif /* IBVF_SM_UFM_H */
