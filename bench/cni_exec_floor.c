// SPDX-License-Identifier: MIT
/*
 * cni_exec_floor - the least an exec'd CNI plugin does: read its network
 * config from stdin to the end, write a one-line result to stdout, exit 0.
 * bench_cni.py runs it as it runs a plugin (stdin config, CNI_* environment)
 * to time what any plugin pays to be started and to exit (exec to exit).
 * Built -static when the C library's static archive is there (bench/meson.build).
 * Lab code: never installed.
 */
#include <unistd.h>

int main(void)
{
	static const char result[] = "{\"cniVersion\":\"1.0.0\"}\n";
	char buf[4096];
	ssize_t n;

	while ((n = read(0, buf, sizeof(buf))) > 0)
		;
	if (n < 0 || write(1, result, sizeof(result) - 1) != (ssize_t)(sizeof(result) - 1))
		return 1;
	return 0;
}
