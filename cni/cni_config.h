/* SPDX-License-Identifier: MIT */
/*
 * ib-sriov CNI plugin: the runtime's parameters (CNI_* environment variables)
 * and the network configuration it writes on stdin.
 *
 * Rules from the CNI specification 1.1.0 (SPEC.md): section 2 "Parameters"
 * for the environment, section 1 for the configuration format, section 3
 * "Deriving request configuration" for runtimeConfig / args. Keys of
 * ib-sriov-cni keep their meaning (docs/cni.md lists every key); unknown
 * top-level keys are ignored with a debug line, because runtimes and the
 * sriov-network-operator pass keys other plugins use.
 */
#ifndef IBVF_CNI_CONFIG_H
#define IBVF_CNI_CONFIG_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ibvf/types.h>

/** CNI_COMMAND values (CNI spec section 2). */
enum cni_command {
	CNI_CMD_NONE = 0,
	CNI_CMD_ADD,
	CNI_CMD_DEL,
	CNI_CMD_CHECK,
	CNI_CMD_GC,
	CNI_CMD_STATUS,
	CNI_CMD_VERSION,
};

/** Largest Linux interface name plus NUL (IFNAMSIZ). */
#define CNI_IFNAME_LEN 16

/** The runtime's parameters; strings point into the environment (borrowed). */
struct cni_env {
	enum cni_command cmd;
	const char *command;	  /* CNI_COMMAND as given */
	const char *container_id; /* CNI_CONTAINERID */
	const char *netns;	  /* CNI_NETNS; NULL when unset or empty */
	const char *ifname;	  /* CNI_IFNAME */
	const char *args;	  /* CNI_ARGS, raw */
	const char *path;	  /* CNI_PATH */
	char *pod_namespace;	  /* K8S_POD_NAMESPACE from CNI_ARGS (malloc'd) */
	char *pod_name;		  /* K8S_POD_NAME */
	char *pod_uid;		  /* K8S_POD_UID */
};

/**
 * cni_env_load() - read the CNI_* variables from @envp ("KEY=value" strings,
 * NULL-terminated, e.g. environ) and check the ones @cmd requires (spec
 * section 2: ADD and CHECK need CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME; DEL
 * needs CNI_CONTAINERID and CNI_IFNAME; GC, STATUS and VERSION need none of
 * them). CNI_CONTAINERID must match [A-Za-z0-9][A-Za-z0-9_.-]*, CNI_IFNAME is
 * a valid Linux interface name (1..15 bytes, no '/', ':' or white space).
 *
 * Return: 0; -EINVAL with the names of the bad variables in @err (CNI error
 * code 4); -ENOMEM.
 */
int cni_env_load(struct cni_env *env, char *const *envp, char *err, size_t errlen);

/** cni_env_free() - release what cni_env_load() allocated. */
void cni_env_free(struct cni_env *env);

/** cni_command_parse() - "ADD" ... "VERSION" to enum cni_command; CNI_CMD_NONE if unknown. */
enum cni_command cni_command_parse(const char *s);

/**
 * cni_args_get() - the value of @key in a CNI_ARGS string ("K1=V1;K2=V2"),
 * copied into a new malloc'd string. Return: 0 and *@out (NULL when absent),
 * -EINVAL for a pair without '=', -ENOMEM.
 */
int cni_args_get(const char *args, const char *key, char **out, char *err, size_t errlen);

/** cni_ifname_valid() - may @name be given to a Linux netdev (dev_valid_name() rules)? */
bool cni_ifname_valid(const char *name);

/** VF link state (ib-sriov-cni "link_state"; uapi if_link.h IFLA_VF_LINK_STATE_*). */
enum cni_link_state {
	CNI_LINK_STATE_UNSET = -1,
	CNI_LINK_STATE_AUTO = 0,
	CNI_LINK_STATE_ENABLE = 1,
	CNI_LINK_STATE_DISABLE = 2,
};

/** cni_link_state_name() - "auto", "enable", "disable" or "" for UNSET. */
const char *cni_link_state_name(enum cni_link_state s);

/** One partition the VF joins: 15-bit key (host order) and membership. */
struct cni_pkey {
	uint16_t key;
	enum ibvf_membership membership;
};

#define CNI_MAX_PKEYS 16

/** Defaults of the new keys (docs/cni.md). */
#define CNI_DEFAULT_IBVFD_TIMEOUT_MS 90000
#define CNI_DEFAULT_RC_ITERATIONS    200

/** The parsed network configuration. Strings are borrowed from @root. */
struct cni_netconf {
	json_t *root;	      /* the configuration object (owned) */
	char cni_version[16]; /* "1.0.0"; "0.1.0" when the key is absent */
	unsigned version;     /* major*10000 + minor*100 + patch */
	const char *name;     /* network name */
	const char *type;
	const char *device_id; /* VF PCI address; NULL when absent */

	struct cni_pkey pkeys[CNI_MAX_PKEYS]; /* "pkey" first, then "pkeys" */
	size_t n_pkeys;

	enum cni_link_state link_state;
	bool rdma_isolation;
	bool ib_kubernetes_enabled;
	bool vfio_pci_mode; /* "vfioPciMode": true (auto-detection elsewhere) */
	int pkey_index0;    /* "pkeyIndex0": -1 absent (the SM backend's default), 0, 1 */

	uint64_t guid;		  /* requested GUID; valid when guid_source != NULL */
	const char *guid_source;  /* "runtimeConfig.infinibandGUID" or "args.cni.guid" */
	const char *ib_app_state; /* args.cni["mellanox.infiniband.app"] or NULL */

	json_t *ipam;		   /* "ipam" object or NULL */
	const char *ipam_type;	   /* NULL when no IPAM ("ipam": {} means none) */
	json_t *dns;		   /* "dns" object or NULL */
	json_t *prev_result;	   /* "prevResult" or NULL */
	json_t *valid_attachments; /* GC: "cni.dev/valid-attachments" array or NULL */

	const char *ibvfd_socket;  /* "ibvfd.socket"; NULL: default, auto-detected */
	unsigned ibvfd_timeout_ms; /* "ibvfd.timeout" (ms) */

	int rc_check;		/* "rcCheck.enabled": -1 default (when RDMA dev), 0, 1 */
	unsigned rc_iterations; /* "rcCheck.iterations" */
	unsigned rc_p99_max_us; /* "rcCheck.p99MaxUs"; 0 = report only */
	bool rc_roce_default;	/* "rcCheck.roceDefaultPKey": RoCE rule of the check */

	int log_level;	      /* "logLevel" as syslog level; -1 when absent */
	const char *log_file; /* "logFile" or NULL */
};

/**
 * cni_version_parse() - "X.Y.Z" to X*10000 + Y*100 + Z. Return: 0 or -EINVAL.
 */
int cni_version_parse(const char *s, unsigned *out);

/** cni_version_supported() - true for 0.1.0, 0.2.0, 0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0. */
bool cni_version_supported(unsigned v);

/** The versions VERSION reports, NULL-terminated. */
extern const char *const cni_supported_versions[];

/** Outcome classes of cni_netconf_parse(), mapped to CNI error codes by the caller. */
enum cni_conf_error {
	CNI_CONF_OK = 0,
	CNI_CONF_DECODE,  /* not JSON / not an object: code 6 */
	CNI_CONF_VERSION, /* unsupported cniVersion: code 1 */
	CNI_CONF_INVALID, /* a key has a bad value: code 7 */
};

/**
 * cni_netconf_parse() - parse the stdin configuration (@len bytes at @text)
 * for command @cmd. Only ADD needs "deviceID"; GC reads
 * "cni.dev/valid-attachments". Values in args.cni that are not strings are
 * ignored with a warning, except "guid" and "mellanox.infiniband.app", which
 * must be strings.
 *
 * Return: 0; -EINVAL (bad input: *@kind tells which class, @err names the key
 * and value), -ENOMEM. On failure @nc holds nothing to free.
 */
int cni_netconf_parse(struct cni_netconf *nc, const char *text, size_t len, enum cni_command cmd,
		      enum cni_conf_error *kind, char *err, size_t errlen);

/** cni_netconf_free() - release @nc. */
void cni_netconf_free(struct cni_netconf *nc);

/** cni_pci_addr_valid() - the rule of ibvf_pci_addr_parse() (<ibvf/types.h>), as a bool. */
static inline bool cni_pci_addr_valid(const char *s)
{
	return ibvf_pci_addr_valid(s, NULL, 0) == 0;
}

#endif /* IBVF_CNI_CONFIG_H */
