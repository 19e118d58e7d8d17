/* SPDX-License-Identifier: MIT */
/*
 * Internals of the software "tcp" transport, shared by its files (listed
 * at the top of transport_tcp.c, which also describes the framing).
 */
#ifndef RB_TRANSPORT_TCP_PRIV_H
#define RB_TRANSPORT_TCP_PRIV_H

#include <endian.h>
#include <netdb.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "fifo.h"
#include "latch.h"
#include "transport.h"

#define TCP_HDR_SIZE 32
#define TCP_HELLO_MAGIC 0x5242544350000001ull /* "RBTCP", framing version 1 */
/*
 * Headers are read through a per-connection staging buffer; payload bytes
 * that land there are copied out, the rest is read in place.  A connection
 * that receives only small frames (commands, responses: no data) stages up
 * to TCP_RX_STAGE_MAX bytes per read, so one read picks up a whole batch of
 * them; any frame with a real payload drops it back to TCP_RX_STAGE_MIN,
 * which bounds what is copied of data frames.
 */
#define TCP_RX_STAGE_MIN 512
#define TCP_RX_STAGE_MAX 4096
#define TCP_RX_SMALL 256 /* payload bytes of a "small" frame */
#define TCP_RX_SMALL_RUN 8 /* small frames in a row that grow the stage */
#define TCP_MAX_MSG (1u << 31) /* like a typical RDMA max_msg_sz */
/* Private data limits of RDMA CM over IB (connect/accept/reject). */
#define TCP_PRIV_CONNECT_MAX 56
#define TCP_PRIV_ACCEPT_MAX 196
#define TCP_PRIV_REJECT_MAX 148
#define TCP_PRIV_MAX TCP_PRIV_ACCEPT_MAX
#define TCP_HELLO_TIMEOUT_MS 1000
/* HELLO deadline while the half-open table is 3/4 full, for sources that
 * hold at least TCP_HELLO_SHORT_FROM of them: an honest peer sends its HELLO
 * with the connection, a flood's sockets never do. */
#define TCP_HELLO_TIMEOUT_SHORT_MS 250
#define TCP_HELLO_SHORT_FROM 4
#define TCP_RESP_PAUSE 1024 /* queued READ_RESP frames that pause receiving */
#define TCP_CHUNK 32 /* work requests added to a pool at a time */

enum tcp_ftype {
	F_HELLO = 1,
	F_HELLO_ACCEPT = 2,
	F_HELLO_REJECT = 3,
	F_SEND = 4,
	F_WRITE = 5,
	F_READ_REQ = 6,
	F_READ_RESP = 7,
	F_NAK = 8,
	F_ACK = 9,
	F_ACK_REQ = 10,
};

/* tcp_hdr.flags */
#define TCP_F_LAZY 0x0001u /* SEND/WRITE: ack it with your next frame, no ACK of its own */
#define TCP_F_KNOWN TCP_F_LAZY

/* Little endian on the wire; stored encoded in frames. */
struct tcp_hdr {
	uint8_t type; /* enum tcp_ftype */
	uint8_t status; /* NAK: enum rb_wc_status for the requester's WR */
	uint16_t flags; /* TCP_F_* */
	uint32_t length; /* payload bytes; READ_REQ: bytes requested, no payload */
	uint32_t ack; /* SEND+WRITE frames received and placed so far */
	uint32_t rkey; /* WRITE, READ_REQ */
	uint64_t tag; /* requester WR tag (SEND, WRITE, READ_*, NAK) */
	uint64_t addr; /* WRITE, READ_REQ: remote address; HELLO*: magic */
} __attribute__((packed));
_Static_assert(sizeof(struct tcp_hdr) == TCP_HDR_SIZE, "tcp header is 32 bytes");

enum tcp_wr_kind {
	W_RECV,
	W_SEND,
	W_WRITE,
	W_READ,
	W_RESP, /* internal: READ_RESP we send as responder */
	W_CTRL, /* internal: ACK, HELLO_ACCEPT */
};

/* One work request or internal frame; in exactly one queue at a time. */
struct tcp_wr {
	struct tcp_wr *next;
	struct tcp_conn *conn;
	struct rb_cqe *cqe;
	uint8_t kind; /* enum tcp_wr_kind */
	uint8_t nsge;
	uint32_t byte_len;
	enum rb_wc_status status;
	uint64_t tag;
	uint64_t len; /* payload (SEND/WRITE/RESP/CTRL), destination size (RECV/READ) */
	struct tcp_hdr hdr;
	struct iovec iov[RB_MAX_SGE];
};

RB_FIFO_DECLARE(tcp_q, struct tcp_wr);

struct tcp_chunk {
	struct tcp_chunk *next;
	unsigned int n;
	struct tcp_wr wr[];
};

/* The region table (transport_tcp_mr.c): lookups take no lock. */
#define TCP_MR_CHUNKS 255u
struct tcp_slot;
struct tcp_domain {
	pthread_mutex_t lock; /* registrations */
	struct tcp_slot *chunks[TCP_MR_CHUNKS]; /* set once, freed with the domain */
	uint32_t nslots; /* slots in the chunks so far */
	uint32_t free_head; /* first free slot + 1, 0 = none */
	unsigned int refs; /* under the global domain mutex */
};

struct tcp_cq {
	int epfd;
	struct rb_latch wake; /* readable while completions wait (see cq_arm) */
	bool in_poll; /* inside cq_poll/cq_arm: completions need no wakeup */
	bool batch; /* last cq_poll filled wc[]: caller polls again, defer writes */
	bool corked; /* cq_cork: posts are held until uncork (one sendmsg per batch) */
	struct tcp_q done;
	struct tcp_conn *dirty; /* conns with deferred writes/acks */
	struct tcp_conn *ackq; /* conns holding an ACK until uncork */
	/* Last cq_prepare_wait said quiet: SEND/WRITE frames go out lazy. */
	bool quiet;
	struct tcp_conn *lazyq; /* conns that sent lazy frames since then */
	unsigned int nconns;
};

enum tcp_state {
	ST_RESOLVED, /* active side, before connect */
	ST_HELLO, /* passive side, reading HELLO inside the listener */
	ST_REQUEST, /* passive side, handed out by listener_get */
	ST_CONNECTED,
	ST_DEAD,
};

struct tcp_rx {
	uint32_t head, tail; /* staged bytes [head, tail) of buf */
	bool in_data;
	bool lazy; /* the frame being placed had TCP_F_LAZY */
	uint8_t type;
	uint8_t iovidx, iovcnt;
	uint32_t total;
	uint64_t left;
	struct tcp_wr *wr; /* RECV or READ being filled, NULL for WRITE */
	struct iovec iov[RB_MAX_SGE];
	uint32_t stage; /* bytes staged per read: TCP_RX_STAGE_MIN or _MAX */
	uint32_t small_run; /* small frames in a row, up to TCP_RX_SMALL_RUN */
	uint8_t buf[TCP_RX_STAGE_MAX];
};

struct tcp_conn {
	struct rb_conn pub; /* first: the engine's handle */
	int fd;
	enum tcp_state state;
	struct tcp_domain *dom;
	struct tcp_cq *cq;
	struct rb_transport_opts opts;
	struct addrinfo *ai; /* active side */
	uint32_t qpn;
	char peer[80];

	uint32_t max_send_wr, max_recv_wr, max_sge;
	unsigned int sq_used, rq_used;
	uint64_t next_tag;

	/* send side */
	struct tcp_q txq; /* frames not fully written; head may be partial */
	size_t tx_off; /* bytes of txq.head already written */
	bool want_out;
	unsigned int nresp; /* queued READ_RESP frames */
	struct tcp_q unacked; /* SEND/WRITE written, waiting for the peer's ack */
	struct tcp_q reads; /* READ_REQ written, waiting for READ_RESP */
	uint32_t acked; /* peer's ack counter as last seen */

	/* receive side */
	struct tcp_q recvq;
	uint32_t rx_count; /* SEND/WRITE frames placed; sent back as ack */
	uint32_t ack_sent; /* rx_count value last stamped into a header */
	bool ack_urgent; /* a frame placed since then wants its ack now */
	bool paused; /* too many READ_RESPs queued: stop reading */
	bool rnr_wait; /* SEND waits for a receive (rnr_retry 7) */
	bool rx_kick; /* staged input to process from the next cq call */
	bool in_epoll;
	uint32_t epev; /* events registered in the cq's epoll set */
	struct tcp_rx rx;

	/* cq bookkeeping */
	bool dirty;
	struct tcp_conn *dirty_next;
	bool ack_held; /* on cq->ackq */
	struct tcp_conn *ack_next;
	bool lazy_listed; /* on cq->lazyq */
	struct tcp_conn *lazy_next;
	unsigned int ndone; /* completions of this conn still in cq->done */

	struct tcp_wr *free;
	struct tcp_chunk *chunks;

	/* connection setup */
	struct tcp_conn *next; /* listener's half-open list (rb_fifo) */
	uint64_t accepted_ns; /* listener: its HELLO deadline runs from here */
	uint64_t src; /* listener: source address key (IPv6: its /64), never 0 */
	size_t cm_got;
	size_t cm_len;
	uint8_t cm_buf[TCP_HDR_SIZE + TCP_PRIV_MAX];
};

extern const struct rb_transport_ops rb_tcp_transport;

static inline void q_push(struct tcp_q *q, struct tcp_wr *w)
{
	rb_fifo_push(q, w);
}

static inline struct tcp_wr *q_pop(struct tcp_q *q)
{
	return rb_fifo_pop(q);
}

static inline struct tcp_wr *q_take_tag(struct tcp_q *q, uint64_t tag)
{
	struct tcp_wr *w, *prev = NULL;

	for (w = q->head; w; prev = w, w = w->next) {
		if (w->tag == tag) {
			rb_fifo_unlink(q, prev, w);
			return w;
		}
	}
	return NULL;
}

enum rkey_res { RK_OK, RK_NOKEY, RK_ACCESS, RK_BOUNDS };

static inline struct tcp_conn *to_conn(struct rb_conn *c)
{
	return (struct tcp_conn *)c;
}

/* transport_tcp_mr.c: domain and regions */
int tcp_dom_get(const struct rb_transport_opts *opts, struct tcp_domain **out);
void tcp_dom_put(struct tcp_domain *d);
int tcp_domain_open(const struct rb_transport_opts *opts, struct rb_domain **out);
void tcp_domain_close(struct rb_domain *d);
int tcp_reg_mr(struct rb_domain *dom, void *addr, size_t len, unsigned int access,
	       struct rb_mr **out);
void tcp_dereg_mr(struct rb_mr *mr);
bool tcp_sges_ok(struct tcp_domain *d, const struct rb_sge *sg, int nsge, uint64_t *total);
enum rkey_res tcp_rkey_check(struct tcp_domain *d, uint32_t rkey, unsigned int need,
			     uint64_t addr, uint64_t len);

/* transport_tcp.c: work request pool, helpers, the ops table */
struct tcp_wr *tcp_wr_get(struct tcp_conn *c);
void tcp_wr_put(struct tcp_conn *c, struct tcp_wr *w);
int tcp_pool_grow(struct tcp_conn *c, unsigned int n);
void tcp_conn_free_pool(struct tcp_conn *c);
uint32_t tcp_next_qpn(void);
void tcp_format_addr(const struct sockaddr *sa, char *buf, size_t len);
void tcp_sock_opts(int fd, const struct rb_transport_opts *opts);

/* transport_tcp_cq.c: completion queue */
void tcp_wr_complete(struct tcp_conn *c, struct tcp_wr *w, enum rb_wc_status st);
void tcp_conn_kick(struct tcp_conn *c);
int tcp_cq_create(struct rb_domain *d, uint32_t depth, struct rb_cq **out);
void tcp_cq_destroy(struct rb_cq *cq);
int tcp_cq_fd(struct rb_cq *cq);
int tcp_cq_poll(struct rb_cq *cq, struct rb_wc *wc, int n);
int tcp_cq_arm(struct rb_cq *cq);
void tcp_cq_cork(struct rb_cq *cq, bool on);
int tcp_cq_prepare_wait(struct rb_cq *cq, bool quiet);

/* transport_tcp_io.c: data path, send side */
int tcp_conn_attach(struct tcp_conn *c, struct tcp_cq *cq, const struct rb_conn_caps *caps);
void tcp_conn_detach(struct tcp_conn *c);
void tcp_set_events(struct tcp_conn *c); /* epoll interest from paused/want_out */
bool tcp_has_unstarted(const struct tcp_conn *c); /* frames not yet begun on the wire */
void tcp_tx_queue(struct tcp_conn *c, struct tcp_wr *w);
void tcp_queue_ctrl(struct tcp_conn *c, uint8_t type);
void tcp_send_nak(struct tcp_conn *c, uint64_t tag, enum rb_wc_status st);
void tcp_tx_progress(struct tcp_conn *c);
void tcp_conn_fail(struct tcp_conn *c);
void tcp_disconnect(struct rb_conn *c);
int tcp_post_recv(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge);
int tcp_post_send(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge);
int tcp_post_read(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge,
		  uint64_t raddr, uint32_t rkey);
int tcp_post_write(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge,
		   uint64_t raddr, uint32_t rkey);

/* transport_tcp_rx.c: data path, receive side */
void tcp_conn_event(struct tcp_conn *c, uint32_t events);
void tcp_conn_service(struct tcp_conn *c);
void tcp_cq_release_acks(struct tcp_cq *cq);
void tcp_cq_request_acks(struct tcp_cq *cq);

/* transport_tcp_cm.c: both sides' helpers, active side, destroy */
int tcp_gai_errno(int rc);
void tcp_hdr_cm(struct tcp_hdr *h, uint8_t type, size_t len);
struct tcp_conn *tcp_conn_alloc(struct tcp_domain *d, const struct rb_transport_opts *opts,
			       enum tcp_state st);
int tcp_conn_create(const struct rb_endpoint *ep, const struct rb_transport_opts *opts,
		    struct rb_conn **out);
int tcp_connect(struct rb_conn *c, struct rb_cq *cq, const struct rb_conn_caps *caps,
		const void *priv, size_t priv_len, void *rpriv, size_t *rpriv_len);
void tcp_conn_destroy(struct rb_conn *c);

/* transport_tcp_listen.c: passive side */
int tcp_listen(const struct rb_endpoint *ep, const struct rb_transport_opts *opts,
	       struct rb_listener **out);
void tcp_listener_close(struct rb_listener *l);
int tcp_listener_fd(struct rb_listener *l);
int tcp_listener_get(struct rb_listener *l, struct rb_conn **out, const void **priv,
		     size_t *priv_len);
int tcp_accept(struct rb_conn *c, struct rb_cq *cq, const struct rb_conn_caps *caps,
	       const void *priv, size_t priv_len);
int tcp_reject(struct rb_conn *c, const void *priv, size_t priv_len);

#endif
