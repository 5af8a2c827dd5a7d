// SPDX-License-Identifier: MIT
/* Verification plan over a pkey_verifier (pkey_verify.h). */
#include "pkey_verify.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "err.h"

#define PV_SHOW_FAILURES       3
#define PV_RESOLVE_INTERVAL_MS 20

void pv_close(struct pkey_verifier *v)
{
	if (v->ops && v->ops->close)
		v->ops->close(v->ctx);
	v->ops = NULL;
	v->ctx = NULL;
}

int pv_policy_parse(const char *s, enum pv_policy *out)
{
	static const char *const names[] = {"off", "fabric", "all"};

	for (unsigned i = 0; i < 3; i++) {
		if (!strcmp(s, names[i])) {
			*out = (enum pv_policy)i;
			return 0;
		}
	}
	return -EINVAL;
}

int pv_prepare(struct pkey_verifier *v, enum pv_policy policy, struct pv_item *items, size_t n,
	       char *err, size_t errlen)
{
	int count = 0;

	for (size_t i = 0; i < n; i++) {
		struct pv_item *it = &items[i];
		int ret;

		it->lid = 0;
		if (it->skip || policy == PV_OFF) {
			it->skip = true;
			continue;
		}
		ret = v->ops->resolve(v->ctx, it->guid, &it->lid, err, errlen);
		if (ret == -ENOENT) {
			it->lid = 0;
			it->skip = it->want == PV_ABSENT || policy == PV_FABRIC;
		} else if (ret) {
			return ibvf_err_prefix(err, errlen, ret,
					       "SMP verification from %s cannot "
					       "ask the SA",
					       v->ops->name(v->ctx));
		}
		count += !it->skip;
	}
	return count;
}

static const char *want_name(enum pv_want w)
{
	return w == PV_FULL ? "full" : w == PV_LIMITED ? "limited" : "absent";
}

/* After the reload, a port that had no LID before must get one (PV_ALL). */
static int resolve_until(struct pkey_verifier *v, struct pv_item *it, int64_t end, char *err,
			 size_t errlen)
{
	for (;;) {
		int ret = v->ops->resolve(v->ctx, it->guid, &it->lid, err, errlen);

		if (ret != -ENOENT)
			return ret;
		if (ibvf_mono_ms() >= end)
			return ibvf_err_prefix(err, errlen, -ETIMEDOUT,
					       "the SA still knows no port with this GUID");
		usleep(PV_RESOLVE_INTERVAL_MS * 1000);
	}
}

/* Append one failure to @shown (the first PV_SHOW_FAILURES are shown). */
static void show_failure(char *shown, size_t len, const struct pv_item *it, const char *why)
{
	size_t l = strlen(shown);

	snprintf(shown + l, len - l, "%sGUID 0x%016llx (LID %u, want %s): %s", l ? "; " : "",
		 (unsigned long long)it->guid, it->lid, want_name(it->want), why);
}

int pv_run(struct pkey_verifier *v, uint16_t pkey, struct pv_item *items, size_t n,
	   uint32_t timeout_ms, char *err, size_t errlen)
{
	int64_t end = ibvf_mono_ms() + timeout_ms;
	char shown[3 * 512] = "", e[512];
	size_t failed = 0, checked = 0;
	int first_ret = 0;

	for (size_t i = 0; i < n; i++) {
		struct pv_item *it = &items[i];
		int64_t left;
		int ret = 0;

		if (it->skip)
			continue;
		checked++;
		e[0] = '\0';
		if (!it->lid)
			ret = resolve_until(v, it, end, e, sizeof(e));
		left = end - ibvf_mono_ms();
		if (!ret)
			ret = v->ops->wait(v->ctx, it->lid, pkey, it->want,
					   (uint32_t)(left > 0 ? left : 0), e, sizeof(e));
		if (!ret)
			continue;
		if (!failed++)
			first_ret = ret;
		if (failed <= PV_SHOW_FAILURES)
			show_failure(shown, sizeof(shown), it, e);
	}
	if (!failed)
		return 0;
	return ibvf_errf(err, errlen, first_ret,
			 "P_Key 0x%04x not confirmed through SMPs on %zu "
			 "of %zu ports within %u ms: %s%s",
			 pkey, failed, checked, timeout_ms, shown,
			 failed > PV_SHOW_FAILURES ? "; ..." : "");
}
