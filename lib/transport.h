/* SPDX-License-Identifier: MIT */
/*
 * Verbs-shaped transport interface.  The protocol engines (target/ and
 * initiator/) use only this; they never know whether rdma or tcp runs.
 *
 * Objects:
 *   rb_domain   protection domain: memory is registered here (ibv_pd)
 *   rb_mr       registered region: addr, length, lkey, rkey (ibv_mr)
 *   rb_cq       completion queue with one pollable fd (ibv_cq + channel)
 *   rb_conn     a reliable connected queue pair (rdma_cm_id + ibv_qp)
 *   rb_listener passive side, yields connection requests
 *
 * Work requests carry a struct rb_cqe pointer; the completion hands it
 * back, and the owner recovers its request with container_of (kernel
 * ib_cqe style).  Every posted work request produces exactly one
 * completion, success or error; after any error completion on a
 * connection, all of its other outstanding work requests complete with
 * RB_WC_FLUSH_ERR and the connection is dead (RDMA RC semantics).
 *
 * Functions return 0 or -errno.
 */
#ifndef RB_TRANSPORT_H
#define RB_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define RB_MAX_SGE 4

/* Access flags for ops->reg_mr, like IBV_ACCESS_*. */
#define RB_ACCESS_LOCAL 0x0u
#define RB_ACCESS_REMOTE_READ 0x1u /* peer may RDMA READ from it */
#define RB_ACCESS_REMOTE_WRITE 0x2u /* peer may RDMA WRITE into it */

struct rb_domain;
struct rb_cq;
struct rb_listener;
struct rb_transport_ops;

/*
 * Public head of every transport's connection object (embedded first).
 * ops is the completed table from rb_transport_find() (defaults filled),
 * so callers may use c->ops->X for every op.  ctx belongs to the owner
 * (engine); the transport never touches it.
 */
struct rb_conn {
	const struct rb_transport_ops *ops;
	void *ctx;
};

struct rb_mr {
	void *addr;
	size_t length;
	uint32_t lkey;
	uint32_t rkey; /* 0 when registered without remote access */
	unsigned int access;
	struct rb_domain *domain;
};

struct rb_sge {
	void *addr;
	uint32_t length;
	uint32_t lkey;
};

enum rb_wc_opcode {
	RB_WC_SEND,
	RB_WC_RECV,
	RB_WC_READ, /* one-sided READ we posted completed */
	RB_WC_WRITE, /* one-sided WRITE we posted completed */
};

enum rb_wc_status {
	RB_WC_SUCCESS = 0,
	RB_WC_FLUSH_ERR, /* connection went down with this WR outstanding */
	RB_WC_LOC_LEN_ERR, /* incoming message larger than posted receive */
	RB_WC_REM_ACCESS_ERR, /* peer refused key/bounds of a READ/WRITE */
	RB_WC_REM_OP_ERR,
	RB_WC_RETRY_EXC_ERR, /* peer unreachable */
	RB_WC_RNR_RETRY_EXC_ERR, /* peer had no receive posted */
	RB_WC_GENERAL_ERR,
};

struct rb_wc;

struct rb_cqe {
	void (*done)(struct rb_cq *cq, struct rb_wc *wc);
};

struct rb_wc {
	struct rb_cqe *cqe;
	struct rb_conn *conn;
	enum rb_wc_opcode opcode;
	enum rb_wc_status status;
	uint32_t byte_len; /* RECV: bytes received */
	uint32_t vendor_err;
};

/* Queue pair sizing for connect/accept. */
struct rb_conn_caps {
	uint32_t max_send_wr; /* sends + one-sided ops outstanding */
	uint32_t max_recv_wr;
	uint32_t max_sge;
	uint32_t max_inline; /* inline send bytes wanted (hint) */
	uint32_t max_rd_atomic; /* RDMA READs we issue concurrently */
	uint32_t max_dest_rd_atomic; /* READs we let the peer issue; 0 = none */
};

/* Transport options from config/flags (rdma uses them; tcp ignores most). */
struct rb_transport_opts {
	int tos; /* IP ToS / traffic class, -1 = default */
	int ack_timeout; /* rdma: 4.096us * 2^n, -1 = default */
	int retry_count; /* rdma: 0..7, -1 = default */
	int rnr_retry; /* rdma: 0..7, -1 = default */
	int busy_poll; /* reactor spins instead of waiting */
	int poll_us; /* reactor polls this long after work before sleeping */
#define RB_POLL_US_DEFAULT 50 /* at low depth only: lib/spin.h */
	int connect_timeout_ms;
	/* Passive side: connections accepted whose handshake has not arrived
	 * yet (tcp HELLO); a quarter of it per source address. */
	int max_half_open;
#define RB_MAX_HALF_OPEN_DEFAULT 128
};

/* A transport endpoint: host and port as text, resolved by the transport. */
struct rb_endpoint {
	char host[256];
	uint16_t port;
};

struct rb_transport_ops {
	const char *name;

	int (*domain_open)(const struct rb_transport_opts *opts, struct rb_domain **out);
	void (*domain_close)(struct rb_domain *d);

	/* A registered region keeps its domain alive until dereg_mr (like an
	 * MR keeps its PD busy), so a domain got from conn_domain() stays
	 * valid for as long as the engine holds regions on it. */
	int (*reg_mr)(struct rb_domain *d, void *addr, size_t len, unsigned int access,
		      struct rb_mr **out);
	void (*dereg_mr)(struct rb_mr *mr);

	/* One CQ per reactor thread; its fd becomes readable when armed and a
	 * completion (or connection event) is pending. */
	int (*cq_create)(struct rb_domain *d, uint32_t depth, struct rb_cq **out);
	void (*cq_destroy)(struct rb_cq *cq);
	int (*cq_fd)(struct rb_cq *cq);
	/* Event-driven use: get event -> cq_arm -> cq_poll until empty. */
	int (*cq_arm)(struct rb_cq *cq);
	/* Returns number of completions written to wc (0..n) or -errno: the
	 * CQ itself is broken (callers give up the process). */
	int (*cq_poll)(struct rb_cq *cq, struct rb_wc *wc, int n);
	/* Optional: while corked, posts on this CQ's connections may be held
	 * and sent together at uncork (doorbell batching).  A reactor corks
	 * while it handles a round of events and uncorks before it waits. */
	void (*cq_cork)(struct rb_cq *cq, bool on);
	/*
	 * Optional: called right before waiting on cq_fd (after uncorking).
	 * quiet = true says nothing the caller waits for depends on the
	 * completions of its own SENDs and WRITEs: they need not wake it and
	 * are returned by a later cq_poll, possibly only once a message came
	 * in on that connection or cq_prepare_wait(quiet = false) was called
	 * (tcp defers the peer's acks that long).  Incoming messages, READ
	 * completions and connection teardown still wake it, but an error
	 * completion may wait for the next wakeup (the caller's timers bound
	 * that).  Returns 1 when completions are ready (poll instead of
	 * waiting), 0 when waiting is safe, or -errno.
	 */
	int (*cq_prepare_wait)(struct rb_cq *cq, bool quiet);

	/* Passive side. */
	int (*listen)(const struct rb_endpoint *ep, const struct rb_transport_opts *opts,
		      struct rb_listener **out);
	void (*listener_close)(struct rb_listener *l);
	int (*listener_fd)(struct rb_listener *l);
	/* Next pending connection request, or -EAGAIN.  priv and priv_len point
	 * at the peer's private data, valid until accept/reject. */
	int (*listener_get)(struct rb_listener *l, struct rb_conn **out, const void **priv,
			    size_t *priv_len);
	/* Domain the request arrived on (register buffers there before accept). */
	struct rb_domain *(*conn_domain)(struct rb_conn *c);
	/* On failure the connection is still a request: the caller rejects it
	 * (which frees it); receives posted on it go without completions. */
	int (*accept)(struct rb_conn *c, struct rb_cq *cq, const struct rb_conn_caps *caps,
		      const void *priv, size_t priv_len);
	/* Reject and free the request. */
	int (*reject)(struct rb_conn *c, const void *priv, size_t priv_len);

	/* Active side: resolve, so conn_domain() is known before connect. */
	int (*conn_create)(const struct rb_endpoint *ep, const struct rb_transport_opts *opts,
			   struct rb_conn **out);
	/* Blocking connect with opts->connect_timeout_ms.  On reject returns
	 * -ECONNREFUSED and copies the peer's reject private data to rpriv. */
	int (*connect)(struct rb_conn *c, struct rb_cq *cq, const struct rb_conn_caps *caps,
		       const void *priv, size_t priv_len, void *rpriv, size_t *rpriv_len);

	/* Start teardown: outstanding WRs flush with RB_WC_FLUSH_ERR. */
	void (*disconnect)(struct rb_conn *c);
	/* Free; only once all its WRs have completed (or it never connected). */
	void (*conn_destroy)(struct rb_conn *c);

	/* Receives may also be posted on a passive-side request before accept
	 * (so every credit has one before the peer can send: no RNR); if the
	 * request is rejected instead, they are dropped without completions. */
	int (*post_recv)(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge);
	int (*post_send)(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge);
	/* One-sided: copy peer (raddr, rkey) into local sg / local sg to peer. */
	int (*post_read)(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge,
			 uint64_t raddr, uint32_t rkey);
	int (*post_write)(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge,
			  uint64_t raddr, uint32_t rkey);

	/* Optional (defaults fill in): peer address text, queue pair number. */
	void (*conn_peer)(struct rb_conn *c, char *buf, size_t len);
	uint32_t (*conn_qpn)(struct rb_conn *c);

	/*
	 * Device removal (optional; defaults: never lost, nothing to scan).
	 * domain_lost: the device under d is gone.  Its connections see
	 * errors and flushes; the owner must then free everything it holds
	 * on d (CQs, regions) promptly: the kernel's removal of the device
	 * waits until the process has let go of it.
	 * rescan: a control thread calls it about once a second while the
	 * transport is in use; it notices devices that went away (marking
	 * their domains lost) and releases what the transport's libraries
	 * still hold on them.
	 */
	bool (*domain_lost)(struct rb_domain *d);
	void (*rescan)(void);

	/* Optional: the most process memory one connection with caps holds
	 * (the target's memory bound).  Default: a generous estimate of
	 * work request state and provider rings. */
	size_t (*conn_mem)(const struct rb_conn_caps *caps);
};

/* Registry: look a transport up by name ("tcp", "rdma"); NULL if absent.
 * Optional ops left NULL in a table are filled with defaults here, so
 * callers never check for NULL. */
const struct rb_transport_ops *rb_transport_find(const char *name);
/* Comma-separated names of the transports built in. */
const char *rb_transport_names(void);

extern const struct rb_transport_ops rb_tcp_transport;
#ifdef HAVE_RDMA
extern const struct rb_transport_ops rb_rdma_transport;
#endif

void rb_transport_opts_init(struct rb_transport_opts *o);

/* For logs: what a completion status means. */
const char *rb_wc_status_name(enum rb_wc_status st);

/*
 * Poll cq until it is empty, calling each completion's done(); the number
 * handled, or the -errno of a failed poll (completions polled before it
 * were handled).  A reactor that cannot poll its CQ strands every queue on
 * it, so callers treat that as fatal, with their context.
 */
int rb_cq_drain(const struct rb_transport_ops *ops, struct rb_cq *cq);

#endif
