/* SPDX-License-Identifier: MIT */
/*
 * ib-sriov CNI plugin: the calls it makes to ibvfd (include/ibvf/api.h,
 * through daemon/api/api_client.h), and the choice between daemon-backed
 * and compatibility mode.
 */
#ifndef IBVF_CNI_DAEMON_H
#define IBVF_CNI_DAEMON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api_client.h"
#include "cni_cache.h"
#include "cni_config.h"

/**
 * cni_mode_select() - compatibility mode when "ibKubernetesEnabled" is true
 * (ib-kubernetes owns the GUIDs); else daemon mode when "ibvfd.socket" is
 * configured or a socket exists at the default path ($IBVF_CNI_SOCKET, else
 * IBVF_API_DEFAULT_SOCKET); else compatibility mode. *@socket gets the path.
 */
enum cni_mode cni_mode_select(const struct cni_netconf *nc, const char **socket);

/**
 * cni_daemon_disconnect() - close the connection to ibvfd the calls below
 * keep. Every call of a process goes over one kept connection (for the
 * socket last called; one to another socket replaces it), made at the first
 * call and made again when ibvfd has closed it (api_client.h,
 * ibvf_api_conn_call()); ADD closes it when done, process exit otherwise.
 */
void cni_daemon_disconnect(void);

/** An owner as the API names it: {container_id, ifname, pod_*?, network?}. */
json_t *cni_owner_new(const char *container_id, const char *ifname, const char *pod_namespace,
		      const char *pod_name, const char *pod_uid, const char *network);

/** What prepare returned that the plugin uses. */
struct cni_prepared {
	uint64_t guid;
	char pf[CNI_IFNAME_LEN];
	int vf_index;
	char netdev[CNI_IFNAME_LEN];
	char rdma_dev[64];
	char port_state[32];
	int pkey_index[CNI_MAX_PKEYS]; /* per nc->pkeys[i]; -1 unknown */
};

/** A failed call: negative errno, the daemon's error (code 0 if none), and the CNI code it maps to.
 */
struct cni_daemon_error {
	int ret;
	struct ibvf_rpc_error rpc;
	int cni_code;
};

/**
 * cni_daemon_prepare() - prepare the VF @pci for @owner with the PKeys, GUID,
 * link state and "pkeyIndex0" (sent as "index0" when given) of @nc.
 * Return: 0, or -errno with @de and @err filled.
 */
int cni_daemon_prepare(const char *socket, const struct cni_netconf *nc, json_t *owner,
		       const char *pci, struct cni_prepared *out, struct cni_daemon_error *de,
		       char *err, size_t errlen);

/** cni_daemon_commit() - the VF is in the Pod and checked. */
int cni_daemon_commit(const char *socket, unsigned timeout_ms, json_t *owner,
		      struct cni_daemon_error *de, char *err, size_t errlen);

/**
 * cni_daemon_commit_send() / cni_daemon_commit_recv() - cni_daemon_commit()
 * in two halves over the kept connection (api_client.h,
 * ibvf_api_conn_send()), so ADD writes its cache while ibvfd records the
 * hand-over; @timeout_ms runs from the send. Nothing else may be sent in
 * between. Return: as cni_daemon_commit() (the send's failure: nothing to
 * receive).
 */
int cni_daemon_commit_send(const char *socket, unsigned timeout_ms, json_t *owner,
			   struct cni_daemon_error *de, char *err, size_t errlen);
int cni_daemon_commit_recv(struct cni_daemon_error *de, char *err, size_t errlen);

/**
 * cni_daemon_release_sm_send() / cni_daemon_release_sm_recv() - ibvfd's
 * "release.sm" (docs/api.md) in two halves: DEL sends it before it moves the
 * VF's netdev back from the Pod and reads the answer after the move, so the
 * SM removal runs during the move; the plain release (cni_daemon_release_at())
 * follows either way, and does everything when this failed. *@sm_removed
 * (may be NULL): ibvfd saw the SM without the GUID. An ibvfd that predates
 * it answers -EREMOTEIO with IBVF_RPC_METHOD_NOT_FOUND and changed nothing.
 * Return: 0 or -errno with @de and @err filled.
 */
int cni_daemon_release_sm_send(const char *socket, unsigned timeout_ms, json_t *owner,
			       const char *pci, uint64_t guid, struct cni_daemon_error *de,
			       char *err, size_t errlen);
int cni_daemon_release_sm_recv(bool *sm_removed, struct cni_daemon_error *de, char *err,
			       size_t errlen);

/** cni_daemon_release() - walk @owner back; idempotent. *@released (may be NULL) tells if it held
 * anything. */
int cni_daemon_release(const char *socket, unsigned timeout_ms, json_t *owner, bool *released,
		       struct cni_daemon_error *de, char *err, size_t errlen);

/**
 * cni_daemon_release_at() - cni_daemon_release() that also says where the
 * attachment was: the VF's PCI address @pci and its GUID @guid (host order)
 * from the plugin's cache (NULL / 0: unknown). ibvfd then also releases a
 * record `ibvfctl pool rebuild` adopted from that VF after a store loss,
 * never another owner's (issue 14; docs/api.md, "release").
 */
int cni_daemon_release_at(const char *socket, unsigned timeout_ms, json_t *owner, const char *pci,
			  uint64_t guid, bool *released, struct cni_daemon_error *de, char *err,
			  size_t errlen);

/**
 * cni_daemon_owner() - the daemon's record of @owner from "list": *@guid and
 * @state (32 bytes). Return: 0; -ENOENT when it has none; other -errno.
 */
int cni_daemon_owner(const char *socket, unsigned timeout_ms, const char *network,
		     const char *container_id, const char *ifname, uint64_t *guid, char *state,
		     struct cni_daemon_error *de, char *err, size_t errlen);

/**
 * cni_daemon_gc() - release every owner of @network not in @valid (the
 * "cni.dev/valid-attachments" list: [{containerID, ifname}]).
 * *@n_released (may be NULL) gets how many GUIDs were released.
 */
int cni_daemon_gc(const char *socket, unsigned timeout_ms, const char *network, json_t *valid,
		  size_t *n_released, struct cni_daemon_error *de, char *err, size_t errlen);

/**
 * cni_daemon_status() - 0 when ibvfd answers "status" with ready and its SM
 * backend validated; -EAGAIN with the reason in @err when it is up but not
 * ready; other -errno when it cannot be reached.
 */
int cni_daemon_status(const char *socket, unsigned timeout_ms, struct cni_daemon_error *de,
		      char *err, size_t errlen);

#endif /* IBVF_CNI_DAEMON_H */
