// SPDX-License-Identifier: MIT
/*
 * The port watcher's configuration defaults (docs/config.md "port_watch").
 *
 * Pure data, apart from port_watch.c on purpose: the config layer fills
 * these defaults in every program that reads a config, and the CNI plugin
 * reads one but never watches a port. Kept here, the plugin links neither
 * port_watch.o nor libibumad and libibmad (it starts once per ADD/DEL, and
 * each shared library costs the loader time: docs/hacking.md "Libraries").
 */
#include "port_watch.h"

void ibvf_port_watch_config_defaults(struct ibvf_port_watch_config *pw)
{
	pw->source = 0; /* IBVF_PORT_SRC_LOCAL */
	pw->poll_min_ms = 10;
	pw->poll_max_ms = 500;
	pw->mad_timeout_ms = 200;
	pw->mad_retries = 2;
}
