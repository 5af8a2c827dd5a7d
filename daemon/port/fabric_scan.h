/* SPDX-License-Identifier: MIT */
/*
 * Fabric scan: every CA port of the subnet and its P_Key table, read with
 * SMPs (what the hardware enforces, not what an SM or a store says).
 *
 * Discovery is a directed-route walk from the source's local port (IBTA
 * vol. 1, 14.2.2: DR SMPs need no LIDs and no SM, so ports in INIT and a
 * fabric without an SA are covered): NodeInfo of each node, PortInfo of
 * each switch port to find the links that are up, then NodeInfo,
 * NodeDescription, PortInfo and all P_KeyTable blocks up to
 * NodeInfo:PartitionCap of every CA port (attributes 0x11, 0x10, 0x15,
 * 0x16; IBTA 14.2.5). Switches are visited once
 * (by node GUID); CA ports are recorded once per link, never merged by GUID,
 * so two ports carrying the same port GUID both appear (an SA NodeRecord
 * table would hide the second one: the SM keys it by GUID).
 *
 * Rate: SMPs are paced to at most @smp_rate per second (a production SM
 * shares the fabric's SMP budget, IBTA 14.2.1 VL15). Threads: as
 * port_watch.h (the source's thread only). Byte order: host-order integers.
 */
#ifndef IBVF_FABRIC_SCAN_H
#define IBVF_FABRIC_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "port_watch.h"

/** Default SMP rate of a scan, SMPs per second (`ibvfctl fabric audit --smp-rate`). */
#define IBVF_FABRIC_SMP_RATE_DEFAULT 300
/** Longest NodeDescription kept (IBTA 14.2.5.2: 64 bytes). */
#define IBVF_NODE_DESC_LEN 65

/** One CA port as the walk found it. */
struct ibvf_fabric_port {
	uint64_t node_guid;
	uint64_t port_guid; /* NodeInfo:PortGUID; 0 = a VF no one gave a GUID */
	uint8_t port_num;   /* NodeInfo:LocalPortNum */
	uint8_t state;	    /* PortInfo:PortState (enum ibvf_port_state) */
	uint8_t phys_state;
	uint16_t lid; /* base LID, 0 = none */
	uint16_t sm_lid;
	char desc[IBVF_NODE_DESC_LEN]; /* NodeDescription, printable ASCII */
	char dr[4 * (IBVF_DR_MAX_HOPS + 1)];
	uint64_t peer_guid; /* switch the port is cabled to (0: the local port's) */
	uint8_t peer_port;
	bool local;	   /* the scan's own port */
	bool read_ok;	   /* PortInfo and the P_Key table were read */
	char error[160];   /* why not, when !read_ok */
	uint16_t pkey_cap; /* NodeInfo:PartitionCap */
	uint16_t n_pkeys;  /* entries in @pkeys */
	uint16_t *pkeys;   /* the table, with membership bit; empty slots kept */
};

/** What a scan found, and what it cost. */
struct ibvf_fabric {
	struct ibvf_fabric_port *ports;
	size_t n_ports;
	size_t n_switches;
	uint64_t smps;	     /* SMPs sent (each attempt counts once per call) */
	uint64_t smp_errors; /* of those, calls that failed */
	int64_t elapsed_ms;
};

/**
 * struct ibvf_fabric_scan_opts - scan options.
 * @smp_rate:  most SMPs per second (0 = IBVF_FABRIC_SMP_RATE_DEFAULT);
 *             UINT32_MAX = unpaced.
 * @max_hops:  deepest directed route walked (0 = IBVF_DR_MAX_HOPS).
 */
struct ibvf_fabric_scan_opts {
	uint32_t smp_rate;
	unsigned max_hops;
};

/**
 * ibvf_fabric_scan() - walk the subnet from @src's port (fabric source) and
 * read every CA port's PortInfo and P_Key table into @out (free with
 * ibvf_fabric_free()). A port that does not answer is kept with
 * read_ok = false and its error; only a local port that does not answer
 * fails the scan.
 * Return: 0; -EOPNOTSUPP (local source), -ETIMEDOUT/-EIO (the local port
 * did not answer), -ENOMEM.
 */
int ibvf_fabric_scan(struct ibvf_port_src *src, const struct ibvf_fabric_scan_opts *o,
		     struct ibvf_fabric *out, char *err, size_t errlen);

/** ibvf_fabric_free() - free what ibvf_fabric_scan() filled (not @f itself). */
void ibvf_fabric_free(struct ibvf_fabric *f);

#endif /* IBVF_FABRIC_SCAN_H */
