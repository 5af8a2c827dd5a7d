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
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "log.h"
#include "vf_manager.h"

struct fake {
	char dir[PATH_MAX];
	unsigned delay_ms;
	char fail_pci[32];
};

static int read_vf(struct fake *f, const char *pci, struct ibvf_attach_vf *out, unsigned *gen,
		   char *err, size_t errlen)
{
	char path[PATH_MAX + 40], pf[16], netdev[16] = "";
	unsigned long long node, port;
	char link[8];
	int idx, n;
	FILE *fp;

	if (strchr(pci, '/') || pci[0] == '.')
		return ibvf_errf(err, errlen, -EINVAL, "bad PCI address %s", pci);
	snprintf(path, sizeof(path), "%s/%s", f->dir, pci);
	fp = fopen(path, "re");
	if (!fp)
		return ibvf_errf(err, errlen, errno == ENOENT ? -ENODEV : -errno,
				 "no VF at PCI address %s (%s)", pci, strerror(errno));
	flock(fileno(fp), LOCK_SH); /* write_vf() rewrites in place under LOCK_EX */
	n = fscanf(fp, "pf=%15s vf=%d node=%llx port=%llx link=%7s gen=%u", pf, &idx, &node, &port,
		   link, gen);
	/* optional: the real netdev a lab gave this VF (a veth), reported as is */
	if (n == 6 && fscanf(fp, " netdev=%15s", netdev) != 1)
		netdev[0] = 0;
	fclose(fp);
	if (n != 6)
		return ibvf_errf(err, errlen, -EIO, "fake VF file %s is malformed", path);
	memset(out, 0, sizeof(*out));
	snprintf(out->pci, sizeof(out->pci), "%s", pci);
	memcpy(out->pf, pf, sizeof(pf));
	out->vf_index = idx;
	if (netdev[0])
		snprintf(out->netdev, sizeof(out->netdev), "%s", netdev);
	else
		snprintf(out->netdev, sizeof(out->netdev), "%.12sv%ug%u", pf,
			 (unsigned)idx & 0xffff, *gen % 100000);
	snprintf(out->rdma_dev, sizeof(out->rdma_dev), "fake_%.8s_%d", pf, idx);
	out->guids_known = true;
	out->node_guid = node;
	out->port_guid = port;
	memcpy(out->link_state, link, sizeof(link));
	return 0;
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

static int write_vf(const char *dir, const char *pci, const char *pf, int idx, uint64_t node,
		    uint64_t port, const char *link, unsigned gen, char *err, size_t errlen)
{
	char path[PATH_MAX + 40], tmp[PATH_MAX + 64], line[FAKE_VF_RECORD + 1],
		old[FAKE_VF_RECORD + 64] = "", *nd;
	struct stat st;
	ssize_t r;
	int fd, n;

	snprintf(path, sizeof(path), "%s/%s", dir, pci);
	fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
	if (fd >= 0) {
		flock(fd, LOCK_EX);
		r = pread(fd, old, sizeof(old) - 1, 0);
		old[r > 0 ? r : 0] = 0;
	}
	/* keep the optional netdev= of the lab's file */
	old[strcspn(old, "\n")] = 0;
	nd = strstr(old, " netdev=");
	if (nd)
		nd[1 + strcspn(nd + 1, " ")] = 0; /* " netdev=NAME", without the padding */
	n = snprintf(line, sizeof(line), "pf=%s vf=%d node=%016llx port=%016llx link=%s gen=%u%s",
		     pf, idx, (unsigned long long)node, (unsigned long long)port, link, gen,
		     nd ? nd : "");
	if (n < 0 || n >= FAKE_VF_RECORD) {
		if (fd >= 0)
			close(fd);
		return ibvf_errf(err, errlen, -EOVERFLOW, "fake VF %s: record too long", pci);
	}
	memset(line + n, ' ', (size_t)(FAKE_VF_RECORD - 1 - n));
	line[FAKE_VF_RECORD - 1] = '\n';
	if (fd >= 0) {
		int e = 0;

		if (pwrite(fd, line, FAKE_VF_RECORD, 0) != FAKE_VF_RECORD)
			e = errno ? errno : EIO;
		/* a longer record another writer left (the labs' own files): cut its tail */
		else if (!fstat(fd, &st) && st.st_size > FAKE_VF_RECORD &&
			 ftruncate(fd, FAKE_VF_RECORD))
			e = errno;
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
	while (!ret && (de = readdir(d))) {
		struct ibvf_attach_vf vf;
		unsigned gen;

		if (de->d_name[0] == '.')
			continue;
		if (read_vf(f, de->d_name, &vf, &gen, NULL, 0))
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
	free(vf->ctx);
	vf->ctx = NULL;
}

int ibvf_vf_fake_create(const char *dir, const char *pci, const char *pf, int vf_index,
			uint64_t guid, char *err, size_t errlen)
{
	return write_vf(dir, pci, pf, vf_index, guid, guid, "auto", 0, err, errlen);
}
