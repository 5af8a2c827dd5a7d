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
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "vf_manager.h"

#define TABLE_SUFFIX ".vfs"

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
	flock(fd, LOCK_SH); /* write_vf() rewrites in place under LOCK_EX */
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

/* The table file of @pci: "<domain>:<bus>.vfs" (vf_fake.h). Return 0 or -EINVAL. */
static int table_name(const char *pci, char *out, size_t len)
{
	const char *c = strrchr(pci, ':');
	size_t n = c ? (size_t)(c - pci) : 0;

	if (!n || n + sizeof(TABLE_SUFFIX) > len)
		return -EINVAL;
	memcpy(out, pci, n);
	memcpy(out + n, TABLE_SUFFIX, sizeof(TABLE_SUFFIX));
	return 0;
}

/* The whole file @dfd/@name in a malloc'ed NUL-terminated buffer. Return 0 or -errno. */
static int slurp_at(int dfd, const char *name, char **out, size_t *len)
{
	struct stat st;
	size_t n = 0, cap;
	char *b;
	int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st)) {
		int e = -errno;

		close(fd);
		return e;
	}
	cap = (size_t)st.st_size + 1; /* replaced by rename only: the size of this inode is final */
	b = malloc(cap);
	if (!b) {
		close(fd);
		return -ENOMEM;
	}
	while (n + 1 < cap) {
		ssize_t r = read(fd, b + n, cap - 1 - n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int e = -errno;

			close(fd);
			free(b);
			return e;
		}
		if (!r)
			break;
		n += (size_t)r;
	}
	close(fd);
	b[n] = 0;
	*out = b;
	*len = n;
	return 0;
}

/*
 * The line of VF @pci in the table text @t: *@start .. *@end (after its
 * '\n'); return the text after "pci=<pci> ", or NULL when @pci has none.
 */
static char *table_find(char *t, const char *pci, char **start, char **end)
{
	size_t pl = strlen(pci);

	for (char *p = t; *p;) {
		char *nl = strchr(p, '\n'), *next = nl ? nl + 1 : p + strlen(p);

		if (!strncmp(p, "pci=", 4) && !strncmp(p + 4, pci, pl) && p[4 + pl] == ' ') {
			*start = p;
			*end = next;
			return p + 4 + pl;
		}
		p = next;
	}
	return NULL;
}

/* Parse the table line text @rest (up to '\n' or NUL) of @pci. */
static int parse_line(const char *rest, const char *pci, struct ibvf_attach_vf *out, unsigned *gen)
{
	char buf[256];
	size_t n = strcspn(rest, "\n");

	if (n >= sizeof(buf))
		return -EIO;
	memcpy(buf, rest, n);
	buf[n] = 0;
	return parse_vf(buf, pci, out, gen);
}

/* Read VF @pci: its own file, else its line in its bus's table. *@in_table tells which. */
static int read_vf_at(struct fake *f, const char *pci, struct ibvf_attach_vf *out, unsigned *gen,
		      bool *in_table, char *err, size_t errlen)
{
	char buf[256], tname[40], *t, *a, *b, *rest;
	size_t len;
	int ret;

	*in_table = false;
	if (strchr(pci, '/') || pci[0] == '.')
		return ibvf_errf(err, errlen, -EINVAL, "bad PCI address %s", pci);
	ret = read_file_at(f->dfd, pci, buf, sizeof(buf));
	if (!ret) {
		if (parse_vf(buf, pci, out, gen))
			return ibvf_errf(err, errlen, -EIO, "fake VF file %s/%s is malformed",
					 f->dir, pci);
		return 0;
	}
	if (ret == -ENOENT && !table_name(pci, tname, sizeof(tname)) &&
	    !slurp_at(f->dfd, tname, &t, &len)) {
		rest = table_find(t, pci, &a, &b);
		ret = rest ? parse_line(rest, pci, out, gen) : -ENOENT;
		free(t);
		if (ret == -EIO)
			return ibvf_errf(err, errlen, -EIO,
					 "fake VF %s: its line in %s/%s is malformed", pci, f->dir,
					 tname);
		if (!ret) {
			*in_table = true;
			return 0;
		}
	}
	return ibvf_errf(err, errlen, ret == -ENOENT ? -ENODEV : ret,
			 "no VF at PCI address %s (%s)", pci, strerror(-ret));
}

static int read_vf(struct fake *f, const char *pci, struct ibvf_attach_vf *out, unsigned *gen,
		   char *err, size_t errlen)
{
	bool in_table;

	return read_vf_at(f, pci, out, gen, &in_table, err, errlen);
}

/* Replace @dfd/@name by @n bytes of @text: temp file + rename (atomic for readers, kill -9). */
static int replace_at(const char *dir, const char *name, const char *text, size_t n, char *err,
		      size_t errlen)
{
	char path[PATH_MAX + 40], tmp[PATH_MAX + 64];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	snprintf(tmp, sizeof(tmp), "%s/.%s.%d.tmp", dir, name, (int)gettid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return ibvf_errf(err, errlen, -errno, "%s: %s", tmp, strerror(errno));
	/* no fsync: a fake VF need not survive a power loss, and fsync would dominate benchmarks */
	if (write(fd, text, n) != (ssize_t)n || close(fd) || rename(tmp, path)) {
		int e = errno;

		unlink(tmp);
		return ibvf_errf(err, errlen, -e, "writing %s: %s", path, strerror(e));
	}
	return 0;
}

/*
 * Rewrite VF @pci's line in its bus table, under an exclusive flock(2) of the
 * directory (program() of two VFs of one table, from any thread or process).
 */
static int write_table_vf(struct fake *f, const char *pci, const char *pf, int idx, uint64_t node,
			  uint64_t port, const char *link, unsigned gen, char *err, size_t errlen)
{
	char tname[40], line[256], *t = NULL, *a, *b, *rest, *nd, *out;
	size_t len, n;
	int lfd, ret;

	if (table_name(pci, tname, sizeof(tname)))
		return ibvf_errf(err, errlen, -EINVAL, "bad PCI address %s", pci);
	lfd = open(f->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lfd < 0 || flock(lfd, LOCK_EX)) {
		ret = -errno;
		if (lfd >= 0)
			close(lfd);
		return ibvf_errf(err, errlen, ret, "locking %s: %s", f->dir, strerror(-ret));
	}
	ret = slurp_at(f->dfd, tname, &t, &len);
	if (ret) {
		ibvf_errf(err, errlen, ret, "%s/%s: %s", f->dir, tname, strerror(-ret));
		goto out;
	}
	rest = table_find(t, pci, &a, &b);
	if (!rest) {
		ret = ibvf_errf(err, errlen, -ENODEV, "no VF at PCI address %s", pci);
		goto out;
	}
	/* keep the optional netdev= of the lab's line */
	nd = strstr(rest, " netdev=");
	if (nd && nd >= b)
		nd = NULL;
	n = (size_t)snprintf(line, sizeof(line),
			     "pci=%s pf=%s vf=%d node=%016llx port=%016llx link=%s gen=%u%.*s\n",
			     pci, pf, idx, (unsigned long long)node, (unsigned long long)port, link,
			     gen, nd ? (int)strcspn(nd, "\n") : 0, nd ? nd : "");
	out = malloc(len - (size_t)(b - a) + n + 1);
	if (!out || n >= sizeof(line)) {
		free(out);
		ret = ibvf_errf(err, errlen, -ENOMEM, "fake VF %s: line too long or no memory",
				pci);
		goto out;
	}
	memcpy(out, t, (size_t)(a - t));
	memcpy(out + (a - t), line, n);
	memcpy(out + (a - t) + n, b, len - (size_t)(b - t));
	ret = replace_at(f->dir, tname, out, len - (size_t)(b - a) + n, err, errlen);
	free(out);
out:
	free(t);
	close(lfd); /* drops the lock */
	return ret;
}

/*
 * The record of one fake VF, padded with spaces to a fixed width: a rewrite
 * of an existing file is one pwrite() of the whole record in place, under
 * flock(LOCK_EX) (readers take LOCK_SH), so readers never see half of it
 * and a kill -9 leaves the old or the new record. Issue 17: the former
 * temp file + rename() per write made every write create an inode and take
 * the directory's lock; under a burst of 1,024 prepares 16 workers spun on
 * that lock (rwsem_spin_on_owner) and in ext4's inode allocation, ~40% of
 * ibvfd's CPU. A new VF file is still created by temp file + rename().
 */
#define FAKE_VF_RECORD 192

/*
 * The padded record of a VF into @line (FAKE_VF_RECORD bytes, '\n' last),
 * keeping the optional netdev= of the file's old text @old (modified).
 * Return 0 or -EOVERFLOW.
 */
static int make_record(char *old, const char *pf, int idx, uint64_t node, uint64_t port,
		       const char *link, unsigned gen, char line[FAKE_VF_RECORD + 1])
{
	char *nd;
	int n;

	old[strcspn(old, "\n")] = 0;
	nd = strstr(old, " netdev=");
	if (nd)
		nd[1 + strcspn(nd + 1, " ")] = 0; /* " netdev=NAME", without the padding */
	n = snprintf(line, FAKE_VF_RECORD + 1,
		     "pf=%s vf=%d node=%016llx port=%016llx link=%s gen=%u%s", pf, idx,
		     (unsigned long long)node, (unsigned long long)port, link, gen, nd ? nd : "");
	if (n < 0 || n >= FAKE_VF_RECORD)
		return -EOVERFLOW;
	memset(line + n, ' ', (size_t)(FAKE_VF_RECORD - 1 - n));
	line[FAKE_VF_RECORD - 1] = '\n';
	return 0;
}

/* Rewrite the open VF file @fd (held LOCK_EX) with @line in place. Return 0 or an errno. */
static int put_record(int fd, const char *line)
{
	struct stat st;

	if (pwrite(fd, line, FAKE_VF_RECORD, 0) != FAKE_VF_RECORD)
		return errno ? errno : EIO;
	/* a longer record another writer left (the labs' own files): cut its tail */
	if (!fstat(fd, &st) && st.st_size > FAKE_VF_RECORD && ftruncate(fd, FAKE_VF_RECORD))
		return errno;
	return 0;
}

static int write_vf(const char *dir, const char *pci, const char *pf, int idx, uint64_t node,
		    uint64_t port, const char *link, unsigned gen, char *err, size_t errlen)
{
	char path[PATH_MAX + 40], tmp[PATH_MAX + 64], line[FAKE_VF_RECORD + 1],
		old[FAKE_VF_RECORD + 64] = "";
	ssize_t r;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, pci);
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		flock(fd, LOCK_EX);
		r = pread(fd, old, sizeof(old) - 1, 0);
		old[r > 0 ? r : 0] = 0;
	}
	if (make_record(old, pf, idx, node, port, link, gen, line)) {
		if (fd >= 0)
			close(fd);
		return ibvf_errf(err, errlen, -EOVERFLOW, "fake VF %s: record too long", pci);
	}
	if (fd >= 0) {
		int e = put_record(fd, line);

		close(fd); /* drops the lock */
		if (e)
			return ibvf_errf(err, errlen, -e, "writing %s: %s", path, strerror(e));
		return 0;
	}
	snprintf(tmp, sizeof(tmp), "%s/.%s.%d.tmp", dir, pci, (int)gettid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return ibvf_errf(err, errlen, -errno, "%s: %s", tmp, strerror(errno));
	/* rename() makes the new file appear whole; no fsync: a fake VF
	 * need not survive a power loss, and fsync would dominate benchmarks */
	if (write(fd, line, FAKE_VF_RECORD) != FAKE_VF_RECORD || close(fd) || rename(tmp, path)) {
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

/*
 * program() of a VF that has its own file, in one open: read the record, write
 * the new one in place and read it back, all under one LOCK_EX (the same
 * reads and write as the general path below, without opening the file three
 * times: the fake driver was ~11% of ibvfd's CPU in a 1,024-prepare burst,
 * issue 17). -ENOENT (nothing done): the VF has no file of its own.
 */
static int program_file(struct fake *f, const char *pci, const struct ibvf_vf_request *req,
			struct ibvf_attach_vf *vf, char *err, size_t errlen)
{
	char old[FAKE_VF_RECORD + 64], line[FAKE_VF_RECORD + 1], back[FAKE_VF_RECORD + 64];
	struct ibvf_attach_vf cur;
	const char *lstate;
	unsigned gen;
	ssize_t r;
	int fd, e;

	fd = openat(f->dfd, pci, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return errno == ENOENT ? -ENOENT
				       : ibvf_errf(err, errlen, -errno, "fake VF %s/%s: %s", f->dir,
						   pci, strerror(errno));
	flock(fd, LOCK_EX);
	r = pread(fd, old, sizeof(old) - 1, 0);
	old[r > 0 ? r : 0] = 0;
	if (parse_vf(old, pci, &cur, &gen)) {
		close(fd);
		return ibvf_errf(err, errlen, -EIO, "fake VF file %s/%s is malformed", f->dir, pci);
	}
	if (f->fail_pci[0] && !strcmp(f->fail_pci, pci)) {
		close(fd);
		return ibvf_errf(err, errlen, -EIO, "fake VF %s: injected failure", pci);
	}
	lstate = req->link_state >= 0 ? ibvf_vf_link_state_name(req->link_state) : cur.link_state;
	if (make_record(old, cur.pf, cur.vf_index, req->node_guid, req->port_guid, lstate, gen + 1,
			line)) {
		close(fd);
		return ibvf_errf(err, errlen, -EOVERFLOW, "fake VF %s: record too long", pci);
	}
	e = put_record(fd, line);
	if (!e) { /* read back what the "device" now has */
		r = pread(fd, back, sizeof(back) - 1, 0);
		e = r < 0 ? errno : 0;
		back[r > 0 ? r : 0] = 0;
	}
	close(fd); /* drops the lock */
	if (e)
		return ibvf_errf(err, errlen, -e, "writing %s/%s: %s", f->dir, pci, strerror(e));
	if (parse_vf(back, pci, vf, &gen))
		return ibvf_errf(err, errlen, -EIO, "fake VF file %s/%s is malformed", f->dir, pci);
	return 0;
}

static int fake_program(void *ctx, struct ibvf_attach_vf *vf, uint64_t node, uint64_t port,
			const char *link, char *err, size_t errlen)
{
	struct fake *f = ctx;
	struct ibvf_attach_vf cur;
	struct ibvf_vf_request req;
	char pci[sizeof(vf->pci)];
	const char *lstate;
	bool reset, in_table;
	unsigned gen;
	int ret;

	/* the request the production seam would send the VF manager (vf_manager.h) */
	ret = ibvf_vf_request_make(node, port, link, &req, &reset, err, errlen);
	if (ret)
		return ret;
	(void)reset; /* GUID 0 is a reset; the link state applies either way */
	memcpy(pci, vf->pci, sizeof(pci)); /* read_vf() below rewrites *vf */
	if (strchr(pci, '/') || pci[0] == '.')
		return ibvf_errf(err, errlen, -EINVAL, "bad PCI address %s", pci);
	/* a delay is slept outside the VF's lock: the general path */
	if (!f->delay_ms) {
		ret = program_file(f, pci, &req, vf, err, errlen);
		if (ret != -ENOENT)
			return ret;
	}
	ret = read_vf_at(f, pci, &cur, &gen, &in_table, err, errlen);
	if (ret)
		return ret;
	if (f->fail_pci[0] && !strcmp(f->fail_pci, vf->pci))
		return ibvf_errf(err, errlen, -EIO, "fake VF %s: injected failure", vf->pci);
	if (f->delay_ms) {
		struct timespec ts = {f->delay_ms / 1000, (long)(f->delay_ms % 1000) * 1000000};

		nanosleep(&ts, NULL);
	}
	lstate = req.link_state >= 0 ? ibvf_vf_link_state_name(req.link_state) : cur.link_state;
	if (in_table)
		ret = write_table_vf(f, pci, cur.pf, cur.vf_index, req.node_guid, req.port_guid,
				     lstate, gen + 1, err, errlen);
	else
		ret = write_vf(f->dir, pci, cur.pf, cur.vf_index, req.node_guid, req.port_guid,
			       lstate, gen + 1, err, errlen);
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
	/*
	 * One directory read; then one read per bus table (the shape of the
	 * netlink driver's one RTM_GETLINK dump per PF) and one open+read+close
	 * per VF file of its own (no stdio).
	 */
	while (!ret && (de = readdir(d))) {
		struct ibvf_attach_vf vf;
		unsigned gen;
		char buf[256], *t;
		size_t nl = strlen(de->d_name), len;

		if (de->d_name[0] == '.' || (de->d_type != DT_REG && de->d_type != DT_UNKNOWN))
			continue;
		if (nl > strlen(TABLE_SUFFIX) &&
		    !strcmp(de->d_name + nl - strlen(TABLE_SUFFIX), TABLE_SUFFIX)) {
			if (slurp_at(dirfd(d), de->d_name, &t, &len))
				continue;
			for (char *p = t; !ret && *p;) {
				char *next = p + strcspn(p, "\n"), pci[sizeof(vf.pci)];
				size_t pl;

				next += *next == '\n';
				if (!strncmp(p, "pci=", 4) && (pl = strcspn(p + 4, " \n")) &&
				    pl < sizeof(pci) && p[4 + pl] == ' ') {
					memcpy(pci, p + 4, pl);
					pci[pl] = 0;
					if (!parse_line(p + 4 + pl, pci, &vf, &gen))
						ret = cb(arg, &vf);
				}
				p = next;
			}
			free(t);
			continue;
		}
		if (nl >= sizeof(vf.pci) || read_file_at(dirfd(d), de->d_name, buf, sizeof(buf)) ||
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
	if (!dir || !*dir) {
		free(f);
		return ibvf_errf(err, errlen, -EINVAL, "no fake VF directory given");
	}
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

int ibvf_vf_fake_create_table(const char *dir, const struct ibvf_vf_fake_entry *v, size_t n,
			      char *err, size_t errlen)
{
	struct fake f = {.dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
	int ret = 0;

	if (f.dfd < 0)
		return ibvf_errf(err, errlen, -errno, "%s: %s", dir, strerror(errno));
	snprintf(f.dir, sizeof(f.dir), "%s", dir);
	for (size_t i = 0; !ret && i < n;) {
		char tname[40], t2[40], *old = NULL, *text;
		size_t j = i, len = 0, cap, off;

		if (table_name(v[i].pci, tname, sizeof(tname))) {
			ret = ibvf_errf(err, errlen, -EINVAL, "bad PCI address %s", v[i].pci);
			break;
		}
		while (j < n && !table_name(v[j].pci, t2, sizeof(t2)) && !strcmp(t2, tname))
			j++;
		if (slurp_at(f.dfd, tname, &old, &len))
			len = 0; /* a new table */
		cap = len + (j - i) * 160 + 1;
		text = malloc(cap);
		if (!text) {
			free(old);
			ret = ibvf_errf(err, errlen, -ENOMEM, "out of memory");
			break;
		}
		if (len)
			memcpy(text, old, len);
		off = len;
		for (; i < j; i++)
			off += (size_t)snprintf(text + off, cap - off,
						"pci=%s pf=%s vf=%d node=%016llx port=%016llx "
						"link=auto gen=0\n",
						v[i].pci, v[i].pf, v[i].vf_index,
						(unsigned long long)v[i].guid,
						(unsigned long long)v[i].guid);
		ret = replace_at(dir, tname, text, off, err, errlen);
		free(text);
		free(old);
	}
	close(f.dfd);
	return ret;
}

int ibvf_vf_fake_create(const char *dir, const char *pci, const char *pf, int vf_index,
			uint64_t guid, char *err, size_t errlen)
{
	return write_vf(dir, pci, pf, vf_index, guid, guid, "auto", 0, err, errlen);
}
