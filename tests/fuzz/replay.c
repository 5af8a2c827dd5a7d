// SPDX-License-Identifier: MIT
/*
 * Replays fuzz corpus files through a fuzz target's LLVMFuzzerTestOneInput()
 * without libFuzzer, so the normal test suite runs every committed input of
 * every target (and any crash input added as a regression test).
 *
 *   replay FILE|DIR...      each file, or each file of each directory
 *
 * Exit status: 0, or 2 for a file that cannot be read; a broken invariant
 * aborts (the test fails with the target's message).
 */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;

	if (!f) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return 2;
	}
	for (;;) {
		size_t n;

		if (len == cap) {
			uint8_t *nb = realloc(buf, cap ? 2 * cap : 4096);

			if (!nb) {
				fclose(f);
				free(buf);
				return 2;
			}
			buf = nb;
			cap = cap ? 2 * cap : 4096;
		}
		n = fread(buf + len, 1, cap - len, f);
		if (!n)
			break;
		len += n;
	}
	fclose(f);
	/* a copy of exactly @len bytes, so ASan sees reads past the end */
	{
		uint8_t *exact = malloc(len ? len : 1);

		if (!exact) {
			free(buf);
			return 2;
		}
		memcpy(exact, buf, len);
		free(buf);
		LLVMFuzzerTestOneInput(exact, len);
		free(exact);
	}
	return 0;
}

static int cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int run_dir(const char *dir, size_t *count)
{
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int ret = 0;
	DIR *d = opendir(dir);

	if (!d) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return 2;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? 2 * cap : 64) * sizeof(*nn));

			if (!nn)
				break;
			names = nn;
		}
		if (asprintf(&names[n], "%s/%s", dir, de->d_name) < 0)
			break;
		n++;
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp);
	for (size_t i = 0; i < n; i++) {
		ret |= run_file(names[i]);
		free(names[i]);
	}
	free(names);
	*count += n;
	return ret;
}

int main(int argc, char **argv)
{
	size_t count = 0;
	int ret = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (!stat(argv[i], &st) && S_ISDIR(st.st_mode)) {
			ret |= run_dir(argv[i], &count);
		} else {
			ret |= run_file(argv[i]);
			count++;
		}
	}
	printf("replayed %zu inputs\n", count);
	return ret;
}
