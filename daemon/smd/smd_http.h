/* SPDX-License-Identifier: MIT */
/*
 * ibvf-smd's HTTP endpoint (issue 20: "ibvfd (and the SM agent) serve
 * Prometheus metrics ... /healthz, /readyz"): the agent's pass counters as
 * metrics, its main loop's heartbeat as liveness, its last pass as
 * readiness, on daemon/http/http_server.c. docs/metrics.md lists the
 * ibvf_smd_* families; ibvf-smd(8) the port (http.port, default 9480 for
 * the agent so that it can share a host with ibvfd's 9479).
 */
#ifndef IBVF_SMD_HTTP_H
#define IBVF_SMD_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smd_agent.h"

struct smd_http;

/**
 * smd_http_new() - register the agent's metric families in the process's
 * registry and try to listen on @address:@port (a port that cannot be bound
 * is logged and tried again by smd_http_tick(); the agent runs on).
 * @sm_backend names the backend in ibvf_smd_build_info.
 * Return: 0 or -ENOMEM.
 */
int smd_http_new(const char *address, uint16_t port, const char *sm_backend, struct smd_http **out);

/**
 * smd_http_tick() - after each step of the main loop: @st the agent's
 * counters, @pass_ret the step's return (0 ok), @started whether the agent
 * registered in etcd. Updates the metrics, the liveness heartbeat and
 * readiness; retries a failed listen every 2 s.
 */
void smd_http_tick(struct smd_http *h, const struct smd_agent_stats *st, int pass_ret,
		   bool started);

/** smd_http_stop() - stop serving and free. NULL is a no-op. */
void smd_http_free(struct smd_http *h);

#endif /* IBVF_SMD_HTTP_H */
