/* SPDX-License-Identifier: MIT */
/*
 * Transport registry.  Tables are const; optional ops a transport leaves
 * NULL get defaults here once, so engines never test for NULL.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "transport.h"

static void default_conn_peer(struct rb_conn *c, char *buf, size_t len)
{
	snprintf(buf, len, "?");
}

static uint32_t default_conn_qpn(struct rb_conn *c)
{
	return 0;
}

/* Verbs post straight to the device: nothing to batch. */
static void default_cq_cork(struct rb_cq *cq, bool on)
{
}

/* Every completion wakes the caller: nothing to prepare. */
static int default_cq_prepare_wait(struct rb_cq *cq, bool quiet)
{
	return 0;
}

/* A domain without a device to lose. */
static bool default_domain_lost(struct rb_domain *d)
{
	return false;
}

static void default_rescan(void)
{
}

static size_t default_conn_mem(const struct rb_conn_caps *caps)
{
	/* A send WQE with a few SGEs and its completion state: well under 512. */
	return 16384 + ((size_t)caps->max_send_wr + caps->max_recv_wr) * 512;
}

static const struct rb_transport_ops *const builtin[] = {
	&rb_tcp_transport,
#ifdef HAVE_RDMA
	&rb_rdma_transport,
#endif
};

#define NR_BUILTIN (sizeof(builtin) / sizeof(builtin[0]))

/* Completed copies of the tables, filled once. */
static struct rb_transport_ops filled[NR_BUILTIN];
static pthread_once_t fill_once = PTHREAD_ONCE_INIT;

static void fill_defaults(void)
{
	for (size_t i = 0; i < NR_BUILTIN; i++) {
		filled[i] = *builtin[i];
		if (!filled[i].conn_peer)
			filled[i].conn_peer = default_conn_peer;
		if (!filled[i].conn_qpn)
			filled[i].conn_qpn = default_conn_qpn;
		if (!filled[i].cq_cork)
			filled[i].cq_cork = default_cq_cork;
		if (!filled[i].cq_prepare_wait)
			filled[i].cq_prepare_wait = default_cq_prepare_wait;
		if (!filled[i].domain_lost)
			filled[i].domain_lost = default_domain_lost;
		if (!filled[i].rescan)
			filled[i].rescan = default_rescan;
		if (!filled[i].conn_mem)
			filled[i].conn_mem = default_conn_mem;
	}
}

const struct rb_transport_ops *rb_transport_find(const char *name)
{
	pthread_once(&fill_once, fill_defaults);
	for (size_t i = 0; i < NR_BUILTIN; i++)
		if (strcmp(filled[i].name, name) == 0)
			return &filled[i];
	return NULL;
}

const char *rb_transport_names(void)
{
#ifdef HAVE_RDMA
	return "tcp, rdma";
#else
	return "tcp";
#endif
}

const char *rb_wc_status_name(enum rb_wc_status st)
{
	switch (st) {
	case RB_WC_SUCCESS: return "success";
	case RB_WC_FLUSH_ERR: return "connection closed (flushed)";
	case RB_WC_LOC_LEN_ERR: return "message longer than the posted receive";
	case RB_WC_REM_ACCESS_ERR: return "remote access error";
	case RB_WC_REM_OP_ERR: return "remote operation error";
	case RB_WC_RETRY_EXC_ERR: return "peer unreachable (retries exceeded)";
	case RB_WC_RNR_RETRY_EXC_ERR: return "peer had no receive posted (RNR retries exceeded)";
	case RB_WC_GENERAL_ERR: return "general error";
	}
	return "unknown completion status";
}

/* What one cq_poll asks for; a full batch means there may be more. */
#define DRAIN_BATCH 32

int rb_cq_drain(const struct rb_transport_ops *ops, struct rb_cq *cq)
{
	struct rb_wc wc[DRAIN_BATCH];
	int n, total = 0;

	do {
		n = ops->cq_poll(cq, wc, DRAIN_BATCH);
		if (n < 0)
			return n;
		for (int i = 0; i < n; i++)
			wc[i].cqe->done(cq, &wc[i]);
		total += n;
	} while (n == DRAIN_BATCH);
	return total;
}

void rb_transport_opts_init(struct rb_transport_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->tos = -1;
	o->ack_timeout = -1;
	o->retry_count = -1;
	o->rnr_retry = -1;
	o->busy_poll = 0;
	o->poll_us = RB_POLL_US_DEFAULT;
	o->connect_timeout_ms = 5000;
	o->max_half_open = RB_MAX_HALF_OPEN_DEFAULT;
}
