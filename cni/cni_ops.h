/* SPDX-License-Identifier: MIT */
/*
 * ib-sriov CNI plugin: the two seams of the commands (cni_add.c, cni_del.c,
 * cni_check.c, cni_gc.c, cni_cmd.c). Every call they make to ibvfd goes
 * through cni_ibvfd, every call that touches the host (netns, rtnetlink,
 * RDMA netlink, sysfs, the IPAM plugin, the RC QP check) through cni_host.
 * Both point at the production implementations (cni_ibvfd_real,
 * cni_host_real); only the unit tests (tests/unit/test_cni_cmds.c) point
 * them elsewhere, so the commands run unprivileged against fakes.
 */
#ifndef IBVF_CNI_OPS_H
#define IBVF_CNI_OPS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cni_config.h"
#include "cni_daemon.h"
#include "cni_ipam.h"
#include "cni_netns.h"
#include "cni_vf.h"

struct ibvf_rc_opts; /* rc_check.h, kept out: it includes <net/if.h> */
struct ibvf_rc_result;

/** The ibvfd client calls (cni_daemon.h); same contracts as the functions named. */
struct cni_ibvfd_ops {
	int (*prepare)(const char *socket, const struct cni_netconf *nc, json_t *owner,
		       const char *pci, struct cni_prepared *out, struct cni_daemon_error *de,
		       char *err, size_t errlen);
	int (*commit)(const char *socket, unsigned timeout_ms, json_t *owner,
		      struct cni_daemon_error *de, char *err, size_t errlen);
	int (*release)(const char *socket, unsigned timeout_ms, json_t *owner, bool *released,
		       struct cni_daemon_error *de, char *err, size_t errlen);
	int (*owner)(const char *socket, unsigned timeout_ms, const char *network,
		     const char *container_id, const char *ifname, uint64_t *guid, char *state,
		     struct cni_daemon_error *de, char *err, size_t errlen);
	int (*gc)(const char *socket, unsigned timeout_ms, const char *network, json_t *valid,
		  size_t *n_released, struct cni_daemon_error *de, char *err, size_t errlen);
	int (*status)(const char *socket, unsigned timeout_ms, struct cni_daemon_error *de,
		      char *err, size_t errlen);
	/* release with the cache's PCI address and GUID; NULL: .release is used */
	int (*release_at)(const char *socket, unsigned timeout_ms, json_t *owner, const char *pci,
			  uint64_t guid, bool *released, struct cni_daemon_error *de, char *err,
			  size_t errlen);
	/* release.sm in two halves around DEL's netdev move; NULL: not sent */
	int (*release_sm_send)(const char *socket, unsigned timeout_ms, json_t *owner,
			       const char *pci, uint64_t guid, struct cni_daemon_error *de,
			       char *err, size_t errlen);
	int (*release_sm_recv)(bool *sm_removed, struct cni_daemon_error *de, char *err,
			       size_t errlen);
	/* commit in two halves around ADD's cache write; NULL: .commit is used */
	int (*commit_send)(const char *socket, unsigned timeout_ms, json_t *owner,
			   struct cni_daemon_error *de, char *err, size_t errlen);
	int (*commit_recv)(struct cni_daemon_error *de, char *err, size_t errlen);
};

/** The host-side operations (cni_netns.h, cni_rdma.h, cni_vf.h, cni_ipam.h, rc_check.h). */
struct cni_host_ops {
	int (*ns_open)(struct cni_ns *ns, const char *path, char *err, size_t errlen);
	void (*ns_close)(struct cni_ns *ns);
	int (*link_get)(struct cni_ns *ns, const char *name, int ifindex, struct cni_link *l,
			char *err, size_t errlen);
	int (*netdev_to_pod)(struct cni_ns *host, struct cni_ns *pod, const char *host_name,
			     const char *pod_name, const char *alias, struct cni_moved *out,
			     char *err, size_t errlen);
	int (*netdev_to_host)(struct cni_ns *pod, struct cni_ns *host, const char *pod_name,
			      const char *host_name, char *final_name, char *err, size_t errlen);
	int (*rdma_netns_exclusive)(bool *exclusive, char *err, size_t errlen);
	int (*rdma_dev_move)(struct cni_ns *from, const char *dev, struct cni_ns *to, char *err,
			     size_t errlen);
	int (*rdma_dev_visible)(struct cni_ns *ns, const char *dev, char *err, size_t errlen);
	int (*vf_lookup)(const char *pci, struct cni_vf *vf, char *err, size_t errlen);
	int (*vf_netdev)(const char *pci, char *name, char *err, size_t errlen);
	int (*vf_rdma_dev)(const char *pci, char *name, size_t len, char *err, size_t errlen);
	int (*vf_port_check)(const char *rdma_dev, int netns_fd, const struct cni_pkey *pkeys,
			     size_t n_pkeys, char *err, size_t errlen);
	int (*vf_compat_apply)(const struct cni_vf *vf, enum cni_link_state ls, bool set_guid,
			       uint64_t guid, uint64_t present_guid, char prev_guid[24], char *err,
			       size_t errlen);
	int (*vf_restore)(const struct cni_cache *c, char *err, size_t errlen);
	int (*vf_guid)(const struct cni_vf *vf, uint64_t *guid, bool *known, char *err,
		       size_t errlen);
	int (*ipam_exec)(struct cni_ipam_call *c, json_t **out, char *err, size_t errlen);
	int (*ipam_max_version)(const char *type, const char *cni_path, unsigned *version,
				char *err, size_t errlen);
	int (*ipam_apply)(struct cni_ns *ns, int ifindex, json_t *res, char *err, size_t errlen);
	int (*ipam_check)(struct cni_ns *ns, int ifindex, json_t *res, int iface, char *err,
			  size_t errlen);
	int (*rc_check)(const struct ibvf_rc_opts *o, struct ibvf_rc_result *res, char *err,
			size_t errlen);
};

/** The production tables: cni_daemon.c's calls and the real host operations. */
extern const struct cni_ibvfd_ops cni_ibvfd_real;
extern const struct cni_host_ops cni_host_real;

/** What the commands call; &cni_ibvfd_real and &cni_host_real unless a test swaps them. */
extern const struct cni_ibvfd_ops *cni_ibvfd;
extern const struct cni_host_ops *cni_host;

#endif /* IBVF_CNI_OPS_H */
