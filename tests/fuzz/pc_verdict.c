// SPDX-License-Identifier: MIT
/*
 * pc_verdict FILE... - what ibvf's OpenSM partition parser says of each file:
 * "accept FILE" or "reject FILE: reason", one line each. Used by
 * opensm-differential.sh to compare with the real OpenSM.
 */
#include <stdio.h>
#include <stdlib.h>

#include "err.h"
#include "partition_conf.h"

int main(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		char err[IBVF_ERR_LEN] = "", *buf = NULL;
		struct pc_file *f = NULL;
		size_t len = 0, cap = 0, n;
		FILE *in = fopen(argv[i], "rb");

		if (!in) {
			perror(argv[i]);
			return 2;
		}
		do {
			if (len == cap && !(buf = realloc(buf, cap = cap ? 2 * cap : 65536)))
				return 2;
			n = fread(buf + len, 1, cap - len, in);
			len += n;
		} while (n);
		fclose(in);
		if (pc_parse(buf, len, argv[i], &f, err, sizeof(err)))
			printf("reject %s: %s\n", argv[i], err);
		else
			printf("accept %s\n", argv[i]);
		pc_file_free(f);
		free(buf);
	}
	return 0;
}
