/* SPDX-License-Identifier: MIT */
/*
 * rc_verbs - libibverbs, loaded at run time for the RC QP check.
 *
 * The CNI plugin runs once per ADD/DEL and a container runtime pays the
 * dynamic loader at each start; linking libibverbs (and, through it, its
 * provider list) made every plugin start load it, although only an ADD with
 * rcCheck on a VF with an RDMA device uses it. So rc_check.c calls verbs
 * through this table, filled by dlopen("libibverbs.so.1", RTLD_NOW |
 * RTLD_LOCAL) and dlsym() on the first check (docs/hacking.md "Libraries").
 *
 * Only exported functions are in the table: ibv_post_send(), ibv_post_recv(),
 * ibv_poll_cq() and ibv_req_notify_cq() are static inline wrappers in
 * <infiniband/verbs.h> over the ops in struct ibv_context and need no
 * symbol. ibv_query_port() and ibv_query_gid_table() are inline wrappers
 * over exported functions: ibvf_verbs_query_port() and the _query_gid_table
 * entry do what those wrappers do.
 */
#ifndef IBVF_RC_VERBS_H
#define IBVF_RC_VERBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <infiniband/verbs.h>

/** The soname loaded (Debian package libibverbs1, rdma-core's ABI 1). */
#define IBVF_VERBS_LIB "libibverbs.so.1"

/** The exported libibverbs entry points the RC check uses (names: ibv_<member>). */
struct ibvf_verbs {
	struct ibv_device **(*get_device_list)(int *num_devices);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *device);
	struct ibv_context *(*open_device)(struct ibv_device *device);
	int (*close_device)(struct ibv_context *context);
	int (*query_device)(struct ibv_context *context, struct ibv_device_attr *attr);
	/* the compat entry (IBVERBS_1.1); call ibvf_verbs_query_port() */
	int (*query_port)(struct ibv_context *context, uint8_t port_num,
			  struct _compat_ibv_port_attr *port_attr);
	int (*query_pkey)(struct ibv_context *context, uint8_t port_num, int index, __be16 *pkey);
	ssize_t (*_query_gid_table)(struct ibv_context *context, struct ibv_gid_entry *entries,
				    size_t max_entries, uint32_t flags, size_t entry_size);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length, int access);
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_comp_channel *(*create_comp_channel)(struct ibv_context *context);
	int (*destroy_comp_channel)(struct ibv_comp_channel *channel);
	struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe, void *cq_context,
				    struct ibv_comp_channel *channel, int comp_vector);
	int (*destroy_cq)(struct ibv_cq *cq);
	int (*get_cq_event)(struct ibv_comp_channel *channel, struct ibv_cq **cq,
			    void **cq_context);
	void (*ack_cq_events)(struct ibv_cq *cq, unsigned int nevents);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*get_async_event)(struct ibv_context *context, struct ibv_async_event *event);
	void (*ack_async_event)(struct ibv_async_event *event);
	const char *(*port_state_str)(enum ibv_port_state port_state);
	const char *(*event_type_str)(enum ibv_event_type event);
	const char *(*wc_status_str)(enum ibv_wc_status status);
};

/**
 * ibvf_verbs_load() - the verbs table, loading the library on first use.
 * @lib:    the library to dlopen(); NULL means IBVF_VERBS_LIB. Tests pass a
 *          path that does not exist, or a library without the symbols.
 * @out:    the table on success (process lifetime: never unloaded).
 * @err:    on failure, one line naming the library, the Debian package and
 *          dlerror()'s text: "rcCheck needs libibverbs.so.1 (Debian:
 *          libibverbs1): <dlerror>" (IBVF_ERR_LEN bytes suffice).
 *
 * Thread-safe; the first successful load is kept for the process (a forked
 * child inherits it) and later calls return it whatever @lib says. A failed
 * load is not kept: the next call tries again.
 *
 * Return: 0, or -ELIBACC (the library cannot be loaded, or lacks a symbol;
 * nothing stays loaded).
 */
int ibvf_verbs_load(const char *lib, const struct ibvf_verbs **out, char *err, size_t errlen);

/**
 * ibvf_verbs_query_port() - ibv_query_port() of <infiniband/verbs.h>: the
 * context's extended query_port op when the provider has one (it fills the
 * whole struct ibv_port_attr), else the exported compat entry on a zeroed
 * @attr. Return: 0 or a positive errno, as ibv_query_port().
 */
int ibvf_verbs_query_port(const struct ibvf_verbs *v, struct ibv_context *ctx, uint8_t port,
			  struct ibv_port_attr *attr);

#endif /* IBVF_RC_VERBS_H */
