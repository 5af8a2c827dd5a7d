// SPDX-License-Identifier: MIT
/* File-backed fake VF driver and port seam (tests, benchmarks, crash tests). */
#include "vf_fake.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "vf_manager.h"

struct fake {
	char dir[PATH_MAX];
	int dfd; /* @dir, for openat(2) of the VF files */
	unsigned delay_ms;
	char fail_pci[32];
};

/* Copy one whitespace-free token of at most @max characters; NULL when longer or empty. */
static const char *token(const char *p, const char *key, char *out, size_t max)
{
	size_t n = 0, klen = strlen(key);

	while (*p == ' ' || *p == '\t' || *p == '\n')
		p++;
	if (strncmp(p, key, klen))
		return NULL;
	p += klen;
	while (p[n] && p[n] != ' ' && p[n] != '\t' && p[n] != '\n')
		n++;
	if (!n || n > max)
		return NULL;
	memcpy(out, p, n);
	out[n] = 0;
	return p + n;
}

/* Append the decimal @v to @p (no snprintf: a listing formats two names per VF). */
static char *put_uint(char *p, unsigned v)
{
	char d[12];
	int n = 0;

	do
		d[n++] = (char)('0' + v % 10);
	while (v /= 10);
	while (n)
		*p++ = d[--n];
	return p;
}

/*
 * Parse the VF file's text @buf (NUL-terminated) for @pci: the format of
 * vf_fake.h, as fscanf("pf=%15s vf=%d node=%llx port=%llx link=%7s gen=%u")
 * read it, plus the optional " netdev=<name>". Return 0 or -EIO.
 */
static int parse_vf(const char *buf, const char *pci, struct ibvf_attach_vf *out, unsigned *gen)
{
	char pf[16], netdev[16] = "", link[8], num[24], *end;
	unsigned long long node, port;
	const char *p = buf;
	long idx;
	unsigned long g;

	if (!(p = token(p, "pf=", pf, 15)) || !(p = token(p, "vf=", num, 11)))
		return -EIO;
	idx = strtol(num, &end, 10);
	if (*end || !(p = token(p, "node=", num, 18)))
		return -EIO;
	node = strtoull(num, &end, 16);
	if (*end || !(p = token(p, "port=", num, 18)))
		return -EIO;
	port = strtoull(num, &end, 16);
	if (*end || !(p = token(p, "link=", link, 7)) || !(p = token(p, "gen=", num, 11)))
		return -EIO;
	g = strtoul(num, &end, 10);
	if (*end)
		return -EIO;
	/* optional: the real netdev a lab gave this VF (a veth), reported as is */
	if (!token(p, "netdev=", netdev, 15))
		netdev[0] = 0;
	*gen = (unsigned)g;
	memset(out, 0, sizeof(*out));
	snprintf(out->pci, sizeof(out->pci), "%s", pci);
	memcpy(out->pf, pf, sizeof(pf));
	out->vf_index = (int)idx;
	if (netdev[0]) {
		memcpy(out->netdev, netdev, sizeof(netdev));
	} else { /* "%.12sv%ug%u" of pf, index & 0xffff, gen % 100000: at most 24 characters */
		size_t l = strnlen(pf, 12);
		char *q = out->netdev;

		memcpy(q, pf, l);
		q += l;
		*q++ = 'v';
		q = put_uint(q, (unsigned)idx & 0xffff);
		*q++ = 'g';
		*put_uint(q, *gen % 100000) = 0;
	}
	{ /* "fake_%.8s_%d" of pf, index */
		size_t l = strnlen(pf, 8);
		char *q = out->rdma_dev;

		memcpy(q, "fake_", 5);
		memcpy(q + 5, pf, l);
		q += 5 + l;
		*q++ = '_';
		if (idx < 0) {
			*q++ = '-';
			idx = -idx;
		}
		*put_uint(q, (unsigned)idx) = 0;
	}
	out->guids_known = true;
	out->node_guid = node;
	out->port_guid = port;
	memcpy(out->link_state, link, sizeof(link));
	return 0;
}

/* Read VF file @name of the directory @dfd into @buf: one open, one read, one close. */
static int read_file_at(int dfd, const char *name, char *buf, size_t size)
{
	ssize_t n;
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	n = read(fd, buf, size - 1);
	if (n < 0) {
		int e = -errno;

		close(fd);
		return e;
	}
	close(fd);
	buf[n] = 0;
	return 0;
}

static int read_vf(struct fake *f, const char *pci, struct ibvf_attach_vf *out, unsigned *gen,
		   char *err, size_t errlen)
{
	char buf[256];
	int ret;

	if (strchr(pci, '/') || pci[0] == '.')
		return ibvf_errf(err, errlen, -EINVAL, "bad PCI address %s", pci);
	ret = read_file_at(f->dfd, pci, buf, sizeof(buf));
	if (ret)
		return ibvf_errf(err, errlen, ret == -ENOENT ? -ENODEV : ret,
				 "no VF at PCI address %s (%s)", pci, strerror(-ret));
	if (parse_vf(buf, pci, out, gen))
		return ibvf_errf(err, errlen, -EIO, "fake VF file %s/%s is malformed", f->dir, pci);
	return 0;
}

static int write_vf(const char *dir, const char *pci, const char *pf, int idx, uint64_t node,
		    uint64_t port, const char *link, unsigned gen, char *err, size_t errlen)
{
	char path[PATH_MAX + 40], tmp[PATH_MAX + 64], line[192], old[192] = "", *nd;
	int fd, n;
	FILE *fp;

	snprintf(path, sizeof(path), "%s/%s", dir, pci);
	snprintf(tmp, sizeof(tmp), "%s/.%s.%d.tmp", dir, pci, (int)gettid());
	/* keep the optional netdev= of the lab's file */
	fp = fopen(path, "re");
	if (fp) {
		if (!fgets(old, sizeof(old), fp))
			old[0] = 0;
		fclose(fp);
	}
	nd = strstr(old, " netdev=");
	if (nd)
		nd[strcspn(nd, "\n")] = 0;
	n = snprintf(line, sizeof(line), "pf=%s vf=%d node=%016llx port=%016llx link=%s gen=%u%s\n",
		     pf, idx, (unsigned long long)node, (unsigned long long)port, link, gen,
		     nd ? nd : "");
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return ibvf_errf(err, errlen, -errno, "%s: %s", tmp, strerror(errno));
	/* rename() makes the change atomic for readers and kill -9; no fsync: a fake VF
	 * need not survive a power loss, and fsync would dominate benchmarks */
	if (write(fd, line, (size_t)n) != n || close(fd) || rename(tmp, path)) {
		int e = errno;

		unlink(tmp);
		return ibvf_errf(err, errlen, -e, "writing %s: %s", path, strerror(e));
	}
	return 0;
}

static int fake_lookup(void *ctx, const char *pci, struct ibvf_attach_vf *out, char *err,
		       size_t errlen)
{
	unsigned gen;

	return read_vf(ctx, pci, out, &gen, err, errlen);
}

static int fake_program(void *ctx, struct ibvf_attach_vf *vf, uint64_t node, uint64_t port,
			const char *link, char *err, size_t errlen)
{
	struct fake *f = ctx;
	struct ibvf_attach_vf cur;
	struct ibvf_vf_request req;
	char pci[sizeof(vf->pci)];
	bool reset;
	unsigned gen;
	int ret;

	/* the request the production seam would send the VF manager (vf_manager.h) */
	ret = ibvf_vf_request_make(node, port, link, &req, &reset, err, errlen);
	if (ret)
		return ret;
	(void)reset; /* GUID 0 is a reset; the link state applies either way */
	memcpy(pci, vf->pci, sizeof(pci)); /* read_vf() below rewrites *vf */
	ret = read_vf(f, pci, &cur, &gen, err, errlen);
	if (ret)
		return ret;
	if (f->fail_pci[0] && !strcmp(f->fail_pci, vf->pci))
		return ibvf_errf(err, errlen, -EIO, "fake VF %s: injected failure", vf->pci);
	if (f->delay_ms) {
		struct timespec ts = {f->delay_ms / 1000, (long)(f->delay_ms % 1000) * 1000000};

		nanosleep(&ts, NULL);
	}
	ret = write_vf(f->dir, pci, cur.pf, cur.vf_index, req.node_guid, req.port_guid,
		       req.link_state >= 0 ? ibvf_vf_link_state_name(req.link_state)
					   : cur.link_state,
		       gen + 1, err, errlen);
	if (ret)
		return ret;
	return read_vf(f, pci, vf, &gen, err, errlen);
}

static int fake_list(void *ctx, int (*cb)(void *arg, const struct ibvf_attach_vf *vf), void *arg,
		     char *err, size_t errlen)
{
	struct fake *f = ctx;
	struct dirent *de;
	DIR *d = opendir(f->dir);
	int ret = 0;

	if (!d)
		return ibvf_errf(err, errlen, -errno, "%s: %s", f->dir, strerror(errno));
	/* one directory read, then one open+read+close per VF file (no stdio) */
	while (!ret && (de = readdir(d))) {
		struct ibvf_attach_vf vf;
		unsigned gen;
		char buf[256];

		if (de->d_name[0] == '.' || strlen(de->d_name) >= sizeof(vf.pci) ||
		    (de->d_type != DT_REG && de->d_type != DT_UNKNOWN))
			continue;
		if (read_file_at(dirfd(d), de->d_name, buf, sizeof(buf)) ||
		    parse_vf(buf, de->d_name, &vf, &gen))
			continue;
		ret = cb(arg, &vf);
	}
	closedir(d);
	return ret;
}

static int fake_port_wait(void *ctx, const struct ibvf_attach_vf *vf, uint64_t port_guid,
			  const uint16_t *pkeys, size_t n, int64_t deadline_ms,
			  struct ibvf_port_result *out, char *err, size_t errlen)
{
	struct ibvf_attach_vf cur;
	unsigned gen;
	int ret = read_vf(ctx, vf->pci, &cur, &gen, err, errlen);

	(void)pkeys;
	(void)deadline_ms;
	if (ret)
		return ret;
	if (cur.port_guid != port_guid)
		return ibvf_errf(err, errlen, -EIO,
				 "fake VF %s port GUID %016llx, expected %016llx", vf->pci,
				 (unsigned long long)cur.port_guid, (unsigned long long)port_guid);
	out->lid = (uint16_t)(0x100 + cur.vf_index);
	out->sm_lid = 1;
	snprintf(out->state, sizeof(out->state), "ACTIVE");
	for (size_t i = 0; i < n && i < IBVF_POOL_MAX_PKEYS; i++)
		out->pkey_index[i] = (int)i + 1;
	return 0;
}

int ibvf_vf_fake_init(const char *dir, struct ibvf_vf_ops *vf, struct ibvf_port_ops *port,
		      char *err, size_t errlen)
{
	struct fake *f = calloc(1, sizeof(*f));
	const char *s;

	if (!f)
		return ibvf_errf(err, errlen, -ENOMEM, "out of memory");
	if (access(dir, R_OK | W_OK | X_OK)) {
		free(f);
		return ibvf_errf(err, errlen, -errno, "fake VF directory %s: %s", dir,
				 strerror(errno));
	}
	snprintf(f->dir, sizeof(f->dir), "%s", dir);
	f->dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (f->dfd < 0) {
		int e = -errno;

		free(f);
		return ibvf_errf(err, errlen, e, "fake VF directory %s: %s", dir, strerror(-e));
	}
	if ((s = getenv("IBVF_FAKE_VF_DELAY_MS")))
		f->delay_ms = (unsigned)strtoul(s, NULL, 10);
	if ((s = getenv("IBVF_FAKE_VF_FAIL")))
		snprintf(f->fail_pci, sizeof(f->fail_pci), "%s", s);
	*vf = (struct ibvf_vf_ops){fake_lookup, fake_program, fake_list, f};
	*port = (struct ibvf_port_ops){fake_port_wait, f};
	return 0;
}

void ibvf_vf_fake_fini(struct ibvf_vf_ops *vf)
{
	struct fake *f = vf->ctx;

	if (f)
		close(f->dfd);
	free(f);
	vf->ctx = NULL;
}

int ibvf_vf_fake_create(const char *dir, const char *pci, const char *pf, int vf_index,
			uint64_t guid, char *err, size_t errlen)
{
	return write_vf(dir, pci, pf, vf_index, guid, guid, "auto", 0, err, errlen);
}
