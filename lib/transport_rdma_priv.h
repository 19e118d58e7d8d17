/* SPDX-License-Identifier: MIT */
/*
 * Internals of the "rdma" transport (librdmacm + libibverbs), shared by
 * its files (listed at the top of transport_rdma.c).
 */
#ifndef RB_TRANSPORT_RDMA_PRIV_H
#define RB_TRANSPORT_RDMA_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "fifo.h"
#include "latch.h"
#include "transport.h"

/*
 * Private data framing.  IB CM messages carry fixed-size private data
 * fields (REQ 56 bytes after the rdma_cm header, REP 196, REJ 148) and the
 * peer sees the whole field, so the sender's length is carried in a
 * 2-byte header: magic, length.
 */
#define RD_PRIV_MAGIC 0xb5
#define RD_PRIV_HDR 2
#define RD_PRIV_CONNECT_MAX (56 - RD_PRIV_HDR)
#define RD_PRIV_ACCEPT_MAX (196 - RD_PRIV_HDR)
#define RD_PRIV_REJECT_MAX (148 - RD_PRIV_HDR)
#define RD_PRIV_BUF 196

#define RD_DEFAULT_TIMEOUT_MS 5000
#define RD_RESOLVE_STEP_MS 500 /* see resolve_one */
#define RD_DEFAULT_RETRY 7
#define RD_DEFAULT_RNR_RETRY 7 /* 7 = retry forever: RNR means "slow", not "dead" */
#define RD_POLL_BATCH 32
/* cq_arm reads the CM channel at least once per this many wakeups. */
#define RD_CM_EVERY 32
#define RD_LISTEN_BACKLOG 128

/* wr_id = cqe pointer | opcode: flushed completions carry no valid opcode. */
#define RD_WRID_OPMASK 3ull

/*
 * One ibv_context (device) and our PD on it; shared, refcounted.  The
 * context belongs to librdmacm, which closes it once the device is gone
 * and its last reference dropped; devref is our reference (a one-entry
 * rdma_get_devices() list), so the context outlives our PD, regions and
 * CQs on it whatever order cm_ids go in.
 */
struct rd_domain {
	struct rd_domain *next;
	struct ibv_context *verbs;
	struct ibv_context **devref;
	struct ibv_pd *pd;
	struct ibv_device_attr attr;
	unsigned int refs; /* under rd_dom_lock */
	bool lost; /* atomic: the device was removed */
	char name[IBV_SYSFS_NAME_MAX];
};

struct rd_mr {
	struct rb_mr pub; /* first: the engine's handle */
	struct ibv_mr *mr;
};

/* A work request that never reached a QP: a receive posted before the QP
 * existed, or a post on a dead connection; completed by software. */
struct rd_swr {
	struct rd_swr *next;
	struct rd_conn *conn;
	struct rb_cqe *cqe;
	enum rb_wc_opcode opcode;
	int nsge;
	struct ibv_sge sge[RB_MAX_SGE];
};

RB_FIFO_DECLARE(rd_swq, struct rd_swr);

struct rd_qpmap {
	uint32_t qpn;
	struct rd_conn *conn; /* NULL: free slot */
};

struct rd_cq {
	struct rd_domain *dom;
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	struct rdma_event_channel *cm_ch; /* CM events of the conns attached here */
	int epfd; /* cq_fd: comp channel, cm channel, eventfd */
	struct rb_latch wake; /* readable while software completions wait */
	bool armed; /* notification requested, its event not yet consumed */
	uint32_t cm_skipped; /* wakeups since the CM channel was last read */
	bool armed_sol; /* ... for solicited completions only */
	bool quiet; /* cq_prepare_wait: own SEND/WRITE completions need not wake */
	uint32_t reads_out; /* RDMA READs posted and not yet polled */
	uint32_t ndying; /* conns disconnected whose WRs are still flushing */
	/* Completions polled by cq_prepare_wait, handed out by the next cq_poll. */
	struct ibv_wc stash[RD_POLL_BATCH];
	int nstash, stash_at;
	bool corked; /* cq_cork: send-queue WRs are held until uncork */
	struct rd_conn *dirty; /* conns holding WRs */
	int cqe; /* current CQ size */
	uint32_t used; /* QP queue depths attached (sq + rq), must fit in cqe */
	struct rd_swq sw; /* software completions, in order */
	struct rd_qpmap *map;
	uint32_t map_cap, map_n;
	struct rd_conn *last; /* qpn lookup cache */
};

enum rd_state {
	RD_RESOLVED, /* active side: address and route resolved */
	RD_REQUEST, /* passive side: handed out by listener_get */
	RD_ACCEPTED, /* passive side: rdma_accept done, ESTABLISHED pending */
	RD_CONNECTED,
	RD_DEAD, /* disconnected or failed; QP (if any) in error state */
};

struct rd_listener;

struct rd_pend {
	struct ibv_send_wr wr;
	struct ibv_sge s[RB_MAX_SGE];
};

struct rd_conn {
	struct rb_conn pub; /* first: the engine's handle */
	struct rdma_cm_id *id;
	struct rdma_event_channel *own_ch; /* active side until connected */
	struct rd_listener *lst; /* passive side until accept/reject */
	struct rd_domain *dom;
	struct rd_cq *cq;
	struct rb_transport_opts opts;
	enum rd_state state;
	bool disconnected; /* rdma_disconnect / QP to error done */
	bool dying; /* counted in cq->ndying until the QP is torn down */
	bool in_map;
	int lost; /* atomic: CM said the request died before accept */
	uint32_t qpn;
	uint32_t max_sge, max_inline, qp_depth;
	/* Send-queue WRs held while the CQ is corked, posted as one list (one
	 * doorbell) at uncork; sq_out counts WRs the QP holds (all signaled). */
	struct rd_pend *pend;
	uint32_t npend, sq_size, sq_out;
	bool dirty;
	struct rd_conn *dirty_next;
	struct rd_swq early; /* receives posted before the QP exists */
	/* From the CONNECT_REQUEST, in our perspective (the CM swaps them):
	 * READs we may issue, READs the peer will issue to us. */
	uint8_t req_init_depth, req_resp_res;
	uint8_t priv[RD_PRIV_BUF]; /* request's private data (passive side) */
	size_t priv_len;
	char peer[272]; /* "host:port" (a name until resolved) */
};

/*
 * A listener bound to one device's address loses its cm_id when that
 * device is removed; it then retries on a timer (tfd) and listens again
 * once a device has the address.  listener_fd is an epoll set of the
 * event channel and the timer.
 */
struct rd_listener {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id; /* NULL while down */
	int epfd, tfd;
	struct sockaddr_storage addr; /* resolved once */
	bool any6; /* "" or "::": dual stack, IPv4 fallback */
	struct rb_endpoint ep;
	struct rb_transport_opts opts;
	pthread_mutex_t lock;
	unsigned int refs; /* the listener itself + requests not yet accepted/rejected */
	char name[80];
};

extern const struct rb_transport_ops rb_rdma_transport;

static inline struct rd_conn *to_rconn(struct rb_conn *c)
{
	return (struct rd_conn *)c;
}

/* Private data framing helpers (see RD_PRIV_MAGIC). */
static inline size_t rd_priv_frame(uint8_t *buf, const void *priv, size_t len)
{
	buf[0] = RD_PRIV_MAGIC;
	buf[1] = (uint8_t)len;
	if (len)
		memcpy(buf + RD_PRIV_HDR, priv, len);
	return RD_PRIV_HDR + len;
}

/* false: not framed by an rdmablk peer */
static inline bool rd_priv_unframe(const void *data, size_t len, const uint8_t **out,
				   size_t *olen)
{
	const uint8_t *p = data;

	if (!p || len < RD_PRIV_HDR || p[0] != RD_PRIV_MAGIC || p[1] > len - RD_PRIV_HDR)
		return false;
	*out = p + RD_PRIV_HDR;
	*olen = p[1];
	return true;
}

/*
 * The passive side's copy of a request's private data into dst (cap bytes):
 * the framed payload when it fits, else the raw field cut to cap, which the
 * engine refuses as not an rdmablk request.  The length byte is the peer's
 * word and iWARP carries up to 512 bytes: never trust it for the copy.
 */
static inline size_t rd_priv_take(const void *data, size_t len, uint8_t *dst, size_t cap)
{
	const uint8_t *payload;
	size_t n;

	if (rd_priv_unframe(data, len, &payload, &n) && n <= cap) {
		if (n)
			memcpy(dst, payload, n);
		return n;
	}
	n = data ? (len < cap ? len : cap) : 0;
	if (n)
		memcpy(dst, data, n);
	return n;
}

static inline uint8_t rd_min3_u8(int a, int b, int c)
{
	int m = a < b ? a : b;

	m = m < c ? m : c;
	return (uint8_t)(m < 0 ? 0 : m > 255 ? 255 : m);
}

static inline uint8_t rd_retry_val(int v, int def)
{
	return (uint8_t)(v < 0 ? def : v > 7 ? 7 : v);
}

/*
 * The parameters of rdma_connect and rdma_accept, built the same way for
 * both: RDMA READ depths bounded by our caps (none without), the device
 * and what the peer offered (the active side passes 255, no bound), the
 * retry counts from opts, and priv framed into buf (RD_PRIV_BUF bytes).
 */
static inline struct rdma_conn_param rd_conn_param(const struct ibv_device_attr *a,
						    const struct rb_transport_opts *o,
						    const struct rb_conn_caps *caps, int peer_init_depth,
						    int peer_resp_res, uint8_t *buf, const void *priv,
						    size_t priv_len)
{
	struct rdma_conn_param p = { 0 };

	p.initiator_depth = rd_min3_u8(caps ? (int)caps->max_rd_atomic : 0, a->max_qp_init_rd_atom,
				       peer_init_depth);
	p.responder_resources = rd_min3_u8(caps ? (int)caps->max_dest_rd_atomic : 0,
					   a->max_qp_rd_atom, peer_resp_res);
	p.retry_count = rd_retry_val(o->retry_count, RD_DEFAULT_RETRY);
	p.rnr_retry_count = rd_retry_val(o->rnr_retry, RD_DEFAULT_RNR_RETRY);
	p.flow_control = 1;
	p.private_data = buf;
	p.private_data_len = (uint8_t)rd_priv_frame(buf, priv, priv_len);
	return p;
}

/* transport_rdma.c: helpers, the ops table */
void rd_format_addr(const struct sockaddr *sa, char *buf, size_t len);
int rd_set_nonblock(int fd);
const char *rd_op_name(unsigned int op);

/* transport_rdma_mr.c: domains, memory regions */
int rd_dom_get(struct ibv_context *verbs, struct rd_domain **out);
void rd_dom_hold(struct rd_domain *d);
void rd_dom_put(struct rd_domain *d);
void rd_dom_lose(struct rd_domain *d, const char *how);
int rd_domain_open(const struct rb_transport_opts *opts, struct rb_domain **out);
void rd_domain_close(struct rb_domain *d);
bool rd_domain_lost(struct rb_domain *d);
void rd_rescan(void);
int rd_reg_mr(struct rb_domain *d, void *addr, size_t len, unsigned int access,
	      struct rb_mr **out);
void rd_dereg_mr(struct rb_mr *mr);

/* transport_rdma_cq.c */
int rd_cq_create(struct rb_domain *d, uint32_t depth, struct rb_cq **out);
void rd_cq_destroy(struct rb_cq *cq);
int rd_cq_fd(struct rb_cq *cq);
int rd_cq_arm(struct rb_cq *cq);
int rd_cq_prepare_wait(struct rb_cq *cq, bool quiet);
void rd_cq_note_dead(struct rd_conn *c);
int rd_cq_poll(struct rb_cq *cq, struct rb_wc *wc, int n);
int rd_map_add(struct rd_cq *cq, struct rd_conn *c);
void rd_map_del(struct rd_cq *cq, struct rd_conn *c);
void rd_sw_complete(struct rd_cq *cq, struct rd_swr *w);
void rd_sw_purge(struct rd_cq *cq, struct rd_conn *c);
void rd_flush_early(struct rd_conn *c);
void rd_drop_early(struct rd_conn *c);

/* transport_rdma_io.c */
int rd_qp_setup(struct rd_conn *c, struct rd_cq *cq, const struct rb_conn_caps *caps);
void rd_qp_teardown(struct rd_conn *c);
void rd_cq_cork(struct rb_cq *cq, bool on);
int rd_post_recv(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge);
int rd_post_send(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge);
int rd_post_read(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge,
		 uint64_t raddr, uint32_t rkey);
int rd_post_write(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge,
		  uint64_t raddr, uint32_t rkey);

/* transport_rdma_cm.c */
void rd_set_u8_option(struct rdma_cm_id *id, int name, int v, const char *what, const char *who);
struct rd_conn *rd_conn_alloc(const struct rb_transport_opts *opts, enum rd_state st);
int rd_conn_create(const struct rb_endpoint *ep, const struct rb_transport_opts *opts,
		   struct rb_conn **out);
int rd_connect(struct rb_conn *c, struct rb_cq *cq, const struct rb_conn_caps *caps,
	       const void *priv, size_t priv_len, void *rpriv, size_t *rpriv_len);
void rd_disconnect(struct rb_conn *c);
void rd_conn_destroy(struct rb_conn *c);
void rd_cm_event(struct rd_cq *cq, struct rdma_cm_event *ev);

/* transport_rdma_listen.c */
int rd_listen(const struct rb_endpoint *ep, const struct rb_transport_opts *opts,
	      struct rb_listener **out);
void rd_listener_close(struct rb_listener *l);
int rd_listener_fd(struct rb_listener *l);
int rd_listener_get(struct rb_listener *l, struct rb_conn **out, const void **priv,
		    size_t *priv_len);
int rd_accept(struct rb_conn *c, struct rb_cq *cq, const struct rb_conn_caps *caps,
	      const void *priv, size_t priv_len);
int rd_reject(struct rb_conn *c, const void *priv, size_t priv_len);
void rd_lst_put(struct rd_listener *l);

#endif
