// SPDX-License-Identifier: MIT
/*
 * "file" SM backend: a test-only ibvf SM module (never installed) that keeps
 * partition membership in a text file, one "PKEY GUID full|limited" line per
 * member, rewritten atomically on every change. It survives kill -9 of
 * ibvfd, so crash tests can compare the SM's view with the GUID pool store;
 * tests read the file directly. Config: {"file": PATH, "latency_ms": N,
 * "fail_validate_file": PATH (validate fails while that file exists)}.
 */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <ibvf/sm_backend.h>

struct ibvf_sm_backend {
	char file[512];
	char fail_file[512];
	unsigned latency_ms;
};

struct mem {
	unsigned pkey;
	unsigned long long guid;
	int full;
};

static void nap(struct ibvf_sm_backend *b)
{
	struct timespec ts = {b->latency_ms / 1000, (long)(b->latency_ms % 1000) * 1000000};

	if (b->latency_ms)
		nanosleep(&ts, NULL);
}

static int load(struct ibvf_sm_backend *b, struct mem **out, size_t *n)
{
	FILE *f = fopen(b->file, "re");
	struct mem m, *v = NULL;
	size_t cap = 0;
	char mb[16];

	*n = 0;
	if (!f)
		return errno == ENOENT ? 0 : -errno;
	while (fscanf(f, "%x %llx %15s", &m.pkey, &m.guid, mb) == 3) {
		if (*n == cap) {
			struct mem *p = realloc(v, (cap = cap ? cap * 2 : 64) * sizeof(*v));

			if (!p) {
				free(v);
				fclose(f);
				return -ENOMEM;
			}
			v = p;
		}
		m.full = !strcmp(mb, "full");
		v[(*n)++] = m;
	}
	fclose(f);
	*out = v;
	return 0;
}

static int save(struct ibvf_sm_backend *b, const struct mem *v, size_t n)
{
	char tmp[600];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", b->file);
	f = fopen(tmp, "we");
	if (!f)
		return -errno;
	for (size_t i = 0; i < n; i++)
		fprintf(f, "0x%04x %016llx %s\n", v[i].pkey, v[i].guid,
			v[i].full ? "full" : "limited");
	if (fflush(f) || fsync(fileno(f)) || fclose(f) || rename(tmp, b->file))
		return -errno;
	return 0;
}

static int f_init(const char *json, struct ibvf_sm_backend **out, char *err, size_t errlen)
{
	json_t *c = json_loads(json, 0, NULL), *v;
	struct ibvf_sm_backend *b = calloc(1, sizeof(*b));

	if (!c || !b || !json_is_string(json_object_get(c, "file"))) {
		snprintf(err, errlen, "file backend: config needs {\"file\": PATH}");
		json_decref(c);
		free(b);
		return -EINVAL;
	}
	snprintf(b->file, sizeof(b->file), "%s", json_string_value(json_object_get(c, "file")));
	if ((v = json_object_get(c, "latency_ms")))
		b->latency_ms = (unsigned)json_integer_value(v);
	if ((v = json_object_get(c, "fail_validate_file")))
		snprintf(b->fail_file, sizeof(b->fail_file), "%s", json_string_value(v));
	json_decref(c);
	*out = b;
	return 0;
}

static void f_fini(struct ibvf_sm_backend *b)
{
	free(b);
}

static int f_validate(struct ibvf_sm_backend *b, char *desc, size_t dl, char *err, size_t el)
{
	nap(b);
	if (b->fail_file[0] && access(b->fail_file, F_OK) == 0) {
		snprintf(err, el, "file SM: unreachable (%s exists)", b->fail_file);
		return -ECONNREFUSED;
	}
	snprintf(desc, dl, "file SM %s", b->file);
	return 0;
}

static int f_add(struct ibvf_sm_backend *b, uint16_t pkey, const struct ibvf_sm_member *m, size_t n,
		 const struct ibvf_sm_pkey_flags *fl, char *err, size_t el)
{
	struct mem *v = NULL;
	size_t cnt;
	int ret;

	(void)fl;
	nap(b);
	ret = load(b, &v, &cnt);
	if (ret)
		return ret;
	v = realloc(v, (cnt + n + 1) * sizeof(*v));
	for (size_t i = 0; i < n; i++) {
		size_t k;

		for (k = 0; k < cnt; k++)
			if (v[k].pkey == pkey && v[k].guid == m[i].guid)
				break;
		v[k] = (struct mem){pkey, m[i].guid, m[i].membership == IBVF_MEMBER_FULL};
		if (k == cnt)
			cnt++;
	}
	ret = save(b, v, cnt);
	free(v);
	if (ret)
		snprintf(err, el, "file SM: %s", strerror(-ret));
	return ret;
}

static int f_remove(struct ibvf_sm_backend *b, uint16_t pkey, const uint64_t *g, size_t n,
		    char *err, size_t el)
{
	struct mem *v = NULL;
	size_t cnt, o = 0;
	int ret;

	nap(b);
	ret = load(b, &v, &cnt);
	if (ret)
		return ret;
	for (size_t k = 0; k < cnt; k++) {
		bool gone = false;

		for (size_t i = 0; i < n; i++)
			gone |= v[k].pkey == pkey && v[k].guid == g[i];
		if (!gone)
			v[o++] = v[k];
	}
	ret = save(b, v, o);
	free(v);
	if (ret)
		snprintf(err, el, "file SM: %s", strerror(-ret));
	return ret;
}

static int f_list(struct ibvf_sm_backend *b, int pkey, ibvf_sm_list_cb cb, void *arg, char *err,
		  size_t el)
{
	struct mem *v = NULL;
	size_t cnt;
	int ret;

	nap(b);
	ret = load(b, &v, &cnt);
	if (ret) {
		snprintf(err, el, "file SM: %s", strerror(-ret));
		return ret;
	}
	for (size_t k = 0; k < cnt && !ret; k++) {
		struct ibvf_sm_member m = {v[k].guid,
					   v[k].full ? IBVF_MEMBER_FULL : IBVF_MEMBER_LIMITED};

		if (pkey < 0 || (unsigned)pkey == v[k].pkey)
			ret = cb(arg, (uint16_t)v[k].pkey, &m, true);
	}
	free(v);
	return ret;
}

static const struct ibvf_sm_ops ops = {
	.abi_version = IBVF_SM_ABI_VERSION,
	.struct_size = sizeof(struct ibvf_sm_ops),
	.name = "file",
	.init = f_init,
	.fini = f_fini,
	.validate = f_validate,
	.add_members = f_add,
	.remove_members = f_remove,
	.list_members = f_list,
};

const struct ibvf_sm_ops *ibvf_sm_backend_v2(void);

const struct ibvf_sm_ops *ibvf_sm_backend_v2(void)
{
	return &ops;
}
