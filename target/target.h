/* SPDX-License-Identifier: MIT */
/* rdmablk-target internals. */
#ifndef RB_TARGET_H
#define RB_TARGET_H

#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "auth.h"
#include "bufpool.h"
#include "clock.h"
#include "conf.h"
#include "fifo.h"
#include "spin.h"
#include "transport.h"
#include "wire.h"

struct tgt_reactor;
struct tgt_queue;
struct tgt_recv;
struct tgt_req;

RB_FIFO_DECLARE(tgt_recv_fifo, struct tgt_recv);
RB_FIFO_DECLARE(tgt_req_fifo, struct tgt_req);

/* Counters a test or operator can read (dumped at exit and on SIGUSR1). */
struct tgt_export_stats {
	atomic_uint_fast64_t reads, writes, flushes, fua_writes, discards, write_zeroes, errors;
	atomic_uint_fast64_t inline_writes; /* of writes: done by the reactor itself */
};

/*
 * Ways to zero a range for WRITE_ZEROES.  A backend lists them in chains,
 * best first (backend_file.c); a request that finds its method unsupported
 * moves on to the next one.
 */
enum tgt_zero_method {
	TGT_ZM_ZERO_RANGE, /* fallocate ZERO_RANGE|KEEP_SIZE */
	TGT_ZM_PUNCH, /* fallocate PUNCH_HOLE|KEEP_SIZE */
	TGT_ZM_PUNCH_ALLOC, /* PUNCH_HOLE|KEEP_SIZE, then fallocate 0: zeroed, allocated */
	TGT_ZM_WRITE, /* write zeroes from the reactor's zero buffer: always works */
};
#define TGT_ZCHAIN_MAX 3

struct tgt_zero_chain {
	uint8_t n;
	enum tgt_zero_method m[TGT_ZCHAIN_MAX]; /* m[n - 1] is TGT_ZM_WRITE */
};

/* Zero chains: may deallocate, or NO_HOLE (must stay allocated). */
enum { TGT_ZC_DEALLOC, TGT_ZC_NO_HOLE, TGT_ZC_NR };

/* Fixed buffers registered with each reactor's ring. */
#define TGT_BUF_POOL 0 /* data buffers (r->pool) */
#define TGT_BUF_INCAP 1 /* in-capsule buffers (r->incap) */
#define TGT_BUF_ZEROES 2 /* r->zeroes: source of written zeroes */
#define TGT_ZERO_BUF_SIZE (256u << 10) /* a multiple of every block size (<= 64 KiB) */

struct tgt_export {
	struct rb_export_conf conf; /* a copy: the loaded config is freed on reload */
	const struct tgt_backend *backend;
	atomic_uint refs; /* the export table's and one per session */
	int fd;
	dev_t dev; /* backing store identity: a reload that finds another */
	ino_t ino; /* file or device at the path replaces the export */
	uint64_t size;
	uint32_t block_size;
	uint32_t phys_block_size;
	uint32_t flags; /* RB_EXP_* */
	uint32_t handle; /* non-zero, new for every export opened */
	bool direct; /* O_DIRECT in effect */
	bool inline_writes; /* buffered and conf->inline_writes: see tgt_io_write_inline */
	uint32_t page_size;
	/* Per zero chain: the first method not known to be unsupported. */
	atomic_uint zero_first[TGT_ZC_NR];
	/* Zeroing short of writing is fast (FAST_ZERO may proceed): a block
	 * device's without native write-zeroes falls back to writes in the kernel. */
	bool zero_fast;
	atomic_bool discard_unsupported; /* DISCARD is a no-op success */
	struct tgt_export_stats stats;
};

/*
 * One backend per kind of backing store (nbdkit's struct backend): how it is
 * sized, how it zeroes, and its I/O.  Files and block devices share their
 * I/O functions (io_uring on the export's fd); a backend that reaches its
 * store another way (an NBD-backed export) fills them with its own.
 */
struct tgt_backend {
	const char *name;
	/* Fill size/block sizes/flags from the open fd. */
	int (*probe)(struct tgt_export *e);
	/* WRITE_ZEROES: chains by TGT_ZC_*. */
	const struct tgt_zero_chain *zero_chains;
	/* Prepare one SQE; buf lies in the reactor's registered buffer
	 * buf_index (TGT_BUF_*). */
	void (*prep_read)(struct tgt_export *e, struct io_uring_sqe *sqe, void *buf, uint32_t len,
			  uint64_t off, int buf_index);
	void (*prep_write)(struct tgt_export *e, struct io_uring_sqe *sqe, const void *buf,
			   uint32_t len, uint64_t off, int buf_index, bool fua);
	void (*prep_flush)(struct tgt_export *e, struct io_uring_sqe *sqe);
	void (*prep_discard)(struct tgt_export *e, struct io_uring_sqe *sqe, uint64_t off,
			     uint64_t len);
	/* A zeroing method of the chain but TGT_ZM_WRITE (step 1: the second
	 * half of TGT_ZM_PUNCH_ALLOC). */
	void (*prep_zero)(struct tgt_export *e, struct io_uring_sqe *sqe, enum tgt_zero_method m,
			  int step, uint64_t off, uint64_t len);
	/* Write now, in the calling thread: bytes written or -errno. */
	int (*write_now)(struct tgt_export *e, const void *buf, uint32_t len, uint64_t off);
};

/* backend_file.c */
extern const struct tgt_backend tgt_backend_file;
extern const struct tgt_backend tgt_backend_blockdev;

/* Whether the reactor writes this itself (the backend's write_now). */
bool tgt_io_write_inline(const struct tgt_export *e, uint64_t off, uint32_t len, bool fua);

/* A peer's address without its port (limits.c: tgt_peer_addr). */
#define TGT_ADDR_MAX 64

/*
 * Lines every connection or session logs at info level (connected, closing,
 * the session granted): an honest host causes a few dozen a minute, a loop
 * that connects and closes thousands a second.  Limited per peer address
 * generously (TGT_CONN_LOG_PER_PEER lines a 10 s window) so tests and
 * operators see every one of an honest host's.
 */
#define TGT_CONN_LOG_PER_PEER 200
#define TGT_CONN_LOG_PER_KIND 1000
#define TGT_CONN_LOG_LIMIT(kind)                                                                   \
	RB_LOG_LIMIT_INIT_N(kind, RB_LOG_INFO, TGT_CONN_LOG_PER_PEER, TGT_CONN_LOG_PER_KIND)

/* A host's association: created by CONNECT on an admin queue (session.c). */
struct tgt_session {
	uint64_t id;
	struct tgt_export *export; /* NULL for a discovery session */
	char hostid[RB_HOSTID_MAX];
	char addr[TGT_ADDR_MAX]; /* of the admin queue's peer */
	uint16_t nr_io_queues;
	uint16_t queue_depth;
	uint32_t kato_ms;
	atomic_bool dead; /* admin queue gone: I/O queues must go too */
	/* Auth: required at CONNECT; authed (with skey) once the admin
	 * exchange is done.  Until then no I/O queue binds it. */
	bool auth_required;
	bool authed; /* under the table lock */
	struct rb_auth_skey skey; /* set before authed, then constant */
	atomic_uint refs;
	uint64_t connected_qids[1024 / 64]; /* bitmap of I/O queues; under the table lock */
	struct tgt_session *next;
};

/* NULL with *status (RB_S_SESSION_LIMIT, RB_S_HOST_SESSION_LIMIT, BUSY)
 * when refused. */
/* What a CONNECT asks for, granted. */
struct tgt_session_req {
	const char *hostid; /* as claimed: proven only once authenticated */
	const char *addr; /* peer address (tgt_peer_addr) */
	bool auth_required;
	uint16_t nr_io_queues, queue_depth;
	uint32_t kato_ms;
};

/*
 * A new session, or NULL with *status the limit it would break
 * (max-sessions, -per-address, -per-host).  A session that must
 * authenticate is counted against its host id's limit only once it has
 * (tgt_session_authenticated): anyone can claim a host id, and claims must
 * not use up the real host's share.
 */
struct tgt_session *tgt_session_create(const struct rb_target_conf *c, struct tgt_export *e,
				       const struct tgt_session_req *r, uint16_t *status);
/* Look up by id and bind qid; NULL with *reason set on failure. */
struct tgt_session *tgt_session_bind(uint64_t id, uint16_t qid, uint16_t *reason);
void tgt_session_unbind(struct tgt_session *s, uint16_t qid);
void tgt_session_put(struct tgt_session *s);
void tgt_session_kill(struct tgt_session *s);
/* The admin exchange succeeded: I/O queues may bind with this key now, if
 * the host id is within max-sessions-per-host (the session `replaces`
 * names not counted); RB_S_SUCCESS or RB_S_HOST_SESSION_LIMIT. */
uint16_t tgt_session_authenticated(const struct rb_target_conf *c, struct tgt_session *s,
				   const struct rb_auth_skey *sk, uint64_t replaces);
/* replaces = id: end that session, if it is this host's on this export and
 * authenticated alike (an unauthenticated host ends no authenticated
 * session), and return it with a reference (NULL: no such predecessor). */
struct tgt_session *tgt_session_take_predecessor(uint64_t id, const char *hostid,
						 const char *export_name, bool authed);

/*
 * Life cycle of one command on the target (SPDK nvmf_rdma_request_process).
 */
enum tgt_req_state {
	REQ_FREE, /* on the queue's free list */
	REQ_NEW, /* capsule copied in, not yet validated */
	REQ_NEED_BUFFER, /* waiting on queue->pool_wait for a data buffer (pool.c) */
	REQ_NEED_READ_SLOT, /* waiting on queue->pending_read (max_rd_atomic) */
	REQ_TRANSFER_FROM_HOST, /* RDMA READ of write data (or CONNECT params) posted */
	REQ_READY_TO_EXECUTE, /* data local; waiting on reactor->pending_exec for SQ space */
	REQ_EXECUTING, /* SQE submitted to io_uring (or an inline write running) */
	/* (WRITE_ZEROES goes back to READY_TO_EXECUTE for each further step:
	 * next method, next chunk, the FUA datasync; see struct tgt_req z.) */
	/* CONNECT replacing a session: until that session's commands finish
	 * (queue->replacing), so none of them can land after a re-issued one. */
	REQ_WAIT_PREDECESSOR,
	REQ_COMPLETING, /* (RDMA WRITE +) response SEND posted; waiting completions */
};

struct tgt_recv {
	struct rb_cqe cqe;
	struct tgt_queue *q;
	struct rb_capsule *capsule; /* slot in queue's capsule region */
	void *incap; /* in-capsule data buffer (reactor's incap pool, or aux) */
	uint32_t byte_len; /* while parked */
	struct tgt_recv *next; /* queue's parked list */
};

struct tgt_req {
	struct rb_cqe send_cqe; /* response SEND */
	struct rb_cqe read_cqe; /* RDMA READ from host */
	struct rb_cqe write_cqe; /* RDMA WRITE to host */
	struct tgt_queue *q;
	enum tgt_req_state state;
	struct rb_capsule cmd; /* copy: the recv slot is reposted early */
	struct tgt_recv *recv; /* held only while its in-capsule data is used */
	struct rb_response *rsp; /* slot in queue's response region */
	void *buf; /* data buffer from reactor pool, or in-capsule data */
	bool buf_from_pool;
	int wr_pending; /* posted WRs not yet completed */
	uint64_t posted_tick; /* reactor tick of the last post to the host */
	uint16_t status;
	uint64_t result;
	bool fua_sync; /* FUA write-zeroes: datasync step issued */
	bool close_after; /* an authentication failure: close once answered */
	/* WRITE_ZEROES progress: it goes READY_TO_EXECUTE -> EXECUTING once per
	 * step (method tried, half of PUNCH_ALLOC, chunk of written zeroes). */
	struct {
		bool started; /* idx taken from the export's zero_first */
		uint8_t idx; /* method in the chain */
		uint8_t step; /* TGT_ZM_PUNCH_ALLOC: 1 = allocating */
		uint64_t done; /* TGT_ZM_WRITE: bytes written */
	} z;
	struct tgt_req *next; /* free list / pending queues */
};

/*
 * Who shares a reactor's data buffers fairly (pool.c): the I/O queues of one
 * session on this reactor, or one admin queue.  Holding and waiting are
 * counted per queue and per group; waiters are served round robin over the
 * groups, and over a group's queues.
 */
struct tgt_pool_grp {
	struct tgt_session *s; /* NULL: an admin queue's own (tgt_queue.own_grp) */
	bool admin; /* served first, may take the reserve */
	bool in_ring; /* on the reactor's ring of groups with waiters */
	uint32_t held; /* pool buffers its requests hold */
	uint32_t waiting; /* its requests waiting for one */
	uint32_t refs; /* queues in it */
	struct tgt_queue *wq_head, *wq_tail; /* its queues with waiters */
	struct tgt_pool_grp *wnext; /* reactor's ring */
	struct tgt_pool_grp *next; /* reactor's list of session groups */
};

/* Per reactor and transport domain: CQ plus the pools' registrations.
 * A free slot has cq == NULL. */
struct tgt_cqctx {
	const struct rb_transport_ops *ops;
	struct rb_domain *domain;
	struct rb_cq *cq;
	struct rb_mr *pool_mr;
	struct rb_mr *incap_mr;
};

struct tgt_queue {
	struct tgt_reactor *r;
	struct tgt_cqctx *cx;
	struct rb_conn *conn;
	struct tgt_session *session; /* NULL until CONNECT on admin */
	char peer[128];
	uint32_t qpn;
	uint16_t qid;
	uint16_t depth;
	uint32_t nr_reqs; /* 2 x depth, see queue_alloc */
	uint32_t nr_active; /* commands received and not yet answered */
	uint32_t incapsule;
	uint32_t recv_data; /* bytes after the capsule a receive takes */
	bool incap_aux; /* recvs' incap are slices of aux (I/O queue, incapsule < 64) */
	uint8_t *aux; /* depth x RB_QUEUE_AUTH_SIZE, in capsule_mr's region */
	uint32_t max_rd; /* RDMA READs we may have outstanding */
	uint32_t reads_inflight;
	int wr_outstanding; /* posted, not completed, all kinds */
	int io_inflight; /* SQEs outstanding */
	bool accepted; /* before: a connection request (reject frees it) */
	bool counted; /* in the connection limits (tgt_conn_admit) */
	bool dead;
	bool disconnect_requested; /* DISCONNECT: close once its answer is delivered */
	uint64_t last_cmd_ns; /* keep-alive accounting (admin) */
	uint64_t last_work_ns; /* admin: last command but KEEPALIVE (discovery-timeout) */
	uint64_t created_ns;
	/* Admin: the exchange while it runs (then freed); the session CONNECT
	 * named to replace, acted on at its end. */
	struct rb_auth_tgt *tauth;
	uint64_t auth_replaces;
	/* I/O queue of an authenticated session: QUEUE_AUTH not yet checked. */
	bool auth_pending;
	uint64_t auth_deadline_ns;
	uint8_t nonce_h[RB_AUTH_NONCE_SIZE], nonce_t[RB_AUTH_NONCE_SIZE];
	/* Admin: the CONNECT in REQ_WAIT_PREDECESSOR, the session it replaces
	 * (a reference held) and when to give up waiting. */
	struct tgt_req *connect_req;
	struct tgt_session *replacing;
	uint64_t replace_deadline_ns;
	struct tgt_recv *recvs;
	struct tgt_req *reqs;
	struct tgt_req *free_reqs;
	struct tgt_req_fifo pending_read;
	/* Pool accounting (pool.c): the group it shares with, buffers held,
	 * requests waiting for one (in arrival order). */
	struct tgt_pool_grp *grp;
	struct tgt_pool_grp own_grp; /* admin queues' group */
	uint32_t pool_held;
	struct tgt_req_fifo pool_wait;
	bool in_grp_ring;
	struct tgt_queue *wnext; /* its group's ring of queues with waiters */
	/* A transfer or response holding a buffer is over a tick old: no
	 * further buffers while others wait (set by the transfer check). */
	bool pool_slow;
	/* Commands that found every request still awaiting its SEND completion. */
	struct tgt_recv_fifo parked;
	struct rb_capsule *capsules; /* depth slots */
	struct rb_response *rsps; /* depth slots */
	struct rb_mr *capsule_mr, *rsp_mr;
	void *region; /* mmap holding capsules, rsps, reqs, recvs (queue.c) */
	size_t region_len;
	struct tgt_queue *next; /* reactor's list */
};

/* A connection request handed from the acceptor to a reactor. */
struct tgt_conn_msg {
	const struct rb_transport_ops *ops;
	struct rb_conn *conn;
	struct rb_cm_req2 req;
	struct tgt_conn_msg *next;
};

struct tgt_reactor {
	int id;
	pthread_t thread;
	struct tgt_target *t;
	int epfd;
	int wake_fd; /* eventfd: inbox / stop */
	int ring_efd; /* eventfd registered with the ring */
	int timer_fd;
	struct io_uring ring;
	unsigned int sq_pending; /* SQEs prepared, not submitted */
	bool submit_failing; /* last io_uring_submit failed (logged once) */
	struct rb_bufpool pool; /* max_transfer buffers: fixed buffer 0 */
	struct rb_bufpool incap; /* in-capsule buffers: fixed buffer 1 */
	void *zeroes; /* TGT_ZERO_BUF_SIZE zero bytes: fixed buffer 2 */
	struct tgt_cqctx cqctx[8];
	int nr_cqctx;
	struct tgt_queue *queues;
	bool queue_gone; /* a queue was destroyed this round */
	bool trim_pending; /* a queue was destroyed this tick: malloc_trim */
	unsigned int nr_replacing; /* admin queues with a CONNECT waiting */
	/* Fair shares of pool (pool.c): buffers only admin commands take,
	 * requests waiting, groups holding or waiting; rings of groups with
	 * waiters ([0] admin, served first; [1] I/O); session groups. */
	uint32_t pool_reserve;
	uint32_t pool_waiting;
	uint32_t pool_users;
	struct tgt_pool_grp *wait_head[2], *wait_tail[2];
	struct tgt_pool_grp *grps;
	struct tgt_req_fifo pending_exec;
	pthread_mutex_t inbox_lock;
	struct tgt_conn_msg *inbox;
	atomic_bool stopping;
	struct rb_spin spin; /* busy-poll / poll-us */
	unsigned int arrivals; /* capsules received this round, for spin */
	uint64_t tick; /* timer ticks (1 s) since start */
	/* A request waited over a tick for the host's acknowledgement: do not
	 * wait quietly (tcp asks for its lazy acks), see on_timer. */
	bool ack_overdue;
};

struct tgt_target {
	struct rb_target_conf conf; /* [target] as started; its exports are not used */
	/* The export table: reactors look names up (CONNECT, LIST_EXPORTS)
	 * under the lock; only the main thread replaces it (reload). */
	pthread_mutex_t exports_lock;
	struct tgt_export **exports;
	int nr_exports;
	uint32_t next_handle;
	struct tgt_reactor *reactors;
	int nr_reactors;
	atomic_bool draining;
	struct tgt_auth *auth; /* secrets and policy; under exports_lock (auth.c) */
	atomic_uint_fast64_t auth_failures;
};

/* auth.c: secrets and policy, replaced whole by a reload. */
struct tgt_auth;
/* Load every key file of c: 0, or -errno with err naming the file. */
int tgt_auth_load(const struct rb_target_conf *c, struct tgt_auth **out, char *err, size_t errlen);
void tgt_auth_free(struct tgt_auth *a);
/* Swap in a (under the table lock) and free the previous set. */
void tgt_auth_install(struct tgt_target *t, struct tgt_auth *a);
/* allowed-hosts entries without a secret: identification only (warned). */
void tgt_auth_warn(const struct rb_target_conf *c);
/* Must hostid authenticate for export e (NULL: discovery)?  Copies its
 * secret and the target's, when there are. */
bool tgt_auth_policy(struct tgt_target *t, const char *hostid, const struct tgt_export *e,
		     struct rb_auth_key *host_key, bool *has_host, struct rb_auth_key *tgt_key,
		     bool *has_tgt);
/* The Diffie-Hellman groups the target accepts now (auth-dhgroups). */
unsigned int tgt_auth_dh_mask(struct tgt_target *t);
/* Under exports_lock: e requires every host to authenticate. */
bool tgt_auth_export_required(const struct tgt_target *t, const struct tgt_export *e);
/* Escaped wire string for a log line. */
#define TGT_ESC(buf, s) rb_log_escape(buf, sizeof(buf), s, RB_EXPORT_NAME_MAX)

/* exports.c: the export objects and their table.  A session holds a
 * reference to its export, so an export a reload removes or replaces serves
 * its sessions until the last one ends. */
int tgt_exports_open(struct tgt_target *t, const struct rb_target_conf *c);
void tgt_exports_close(struct tgt_target *t);
/* The export called name with a reference, or NULL. */
struct tgt_export *tgt_export_get(struct tgt_target *t, const char *name);
void tgt_export_put(struct tgt_export *e);
/* fn on every export in the table, under its lock (keep it short). */
void tgt_exports_foreach(struct tgt_target *t, void (*fn)(const struct tgt_export *e, void *arg),
			 void *arg);
int tgt_exports_count(struct tgt_target *t);
/* Log the export's counters (at its end and on SIGUSR1). */
void tgt_export_dump_stats(const struct tgt_export *e);
/* Re-read path: new exports, removed ones, changed ones (conf or backing
 * store); [target] keys take effect at restart, except log-level.  All or
 * nothing: on any error the running exports stay.  0 or -errno, logged. */
int tgt_reload(struct tgt_target *t, const char *path, bool keep_log_level);

/* limits.c: connections (queues) in all and per peer address. */
/* "addr" of "addr:port" (a transport's peer string). */
void tgt_peer_addr(const char *peer, char *out, size_t len);
/* Count a connection from peer: RB_REJ_NONE, or the reason to reject it
 * with (logged, rate-limited).  tgt_conn_release undoes an admitted one. */
uint16_t tgt_conn_admit(const struct rb_target_conf *c, const char *ops_name, const char *peer);
void tgt_conn_release(const char *peer);

/* reactor.c */
int tgt_reactor_start(struct tgt_reactor *r, struct tgt_target *t, int id);
void tgt_reactor_post_conn(struct tgt_reactor *r, struct tgt_conn_msg *m);
void tgt_reactor_stop(struct tgt_reactor *r);
void tgt_reactor_join(struct tgt_reactor *r);
struct io_uring_sqe *tgt_reactor_get_sqe(struct tgt_reactor *r);

/* queue.c */
/* Accept the connection request m as a queue on cx (its transport domain's
 * CQ context; NULL: none could be set up), or reject it. */
int tgt_queue_create(struct tgt_reactor *r, struct tgt_conn_msg *m, struct tgt_cqctx *cx);
void tgt_queue_fail(struct tgt_queue *q, const char *why);
/* Bytes a queue of this depth allocates (its part of the memory bound). */
size_t tgt_queue_mem(uint16_t depth);
/* The most one connection (queue) of ops holds: the man page's formula. */
size_t tgt_conn_mem(const struct rb_target_conf *c, const struct rb_transport_ops *ops);
void tgt_queue_maybe_destroy(struct tgt_queue *q);
/* Stopping: refuse new commands, close idle queues; force closes all. */
void tgt_queue_drain(struct tgt_reactor *r, bool force);
/* Once a tick: fail the queue if the host left a transfer or response
 * unacknowledged for transfer-timeout; true if one is over a tick old. */
bool tgt_queue_check_transfers(struct tgt_queue *q);
/* Once a tick: close an I/O queue whose QUEUE_AUTH is overdue (may free q). */
void tgt_queue_check_auth(struct tgt_queue *q, uint64_t now_ns);

/* pool.c: fair shares of the reactor's data buffers. */
void tgt_pool_init(struct tgt_reactor *r);
/* A new queue joins its group (its session's on this reactor, or its own):
 * 0 or -ENOMEM. */
int tgt_pool_join(struct tgt_queue *q);
/* The queue is gone: its waiters leave, then it leaves its group (its
 * buffers must have been released). */
void tgt_pool_leave(struct tgt_queue *q);
/* Its waiting requests are dropped (a dead queue's are never answered). */
void tgt_pool_drop_waiters(struct tgt_queue *q);
/* A buffer for req now (true), or req waits in its queue's line (false). */
bool tgt_pool_take(struct tgt_req *req);
void tgt_pool_release(struct tgt_req *req);
/* The next waiting request that may have a buffer, given one; NULL: none. */
struct tgt_req *tgt_pool_grant(struct tgt_reactor *r);
/* Others than q's group wait for a buffer. */
static inline bool tgt_pool_pressure(const struct tgt_queue *q)
{
	return q->r->pool_waiting > q->grp->waiting;
}

/* request.c */
/* Post receive slot rv; its completion starts a command. */
int tgt_req_post_recv(struct tgt_queue *q, struct tgt_recv *rv);
void tgt_req_io_done(struct tgt_req *req, int res);
void tgt_req_complete(struct tgt_req *req, uint16_t status, uint64_t result);
/* Requests waiting for a data buffer or SQ space: go on as far as they can. */
void tgt_req_kick_pending(struct tgt_reactor *r);
/* RDMA WRITE len bytes at buf+buf_off to the host's sgl.addr+buf_off, then respond. */
void tgt_req_reply_data(struct tgt_req *req, uint32_t buf_off, uint32_t len, uint16_t status,
			uint64_t result);

/* admin.c */
/* Handle an admin command whose data (if any) is local; ends in tgt_req_complete. */
void tgt_admin_execute(struct tgt_req *req);
/* CONNECTs waiting for the sessions they replace (r->nr_replacing > 0). */
void tgt_admin_poll_replacing(struct tgt_reactor *r, uint64_t now_ns);
/* Queue teardown: drop the replaced session a waiting CONNECT holds. */
void tgt_admin_release_replacing(struct tgt_queue *q);
void tgt_admin_check_keepalive(struct tgt_queue *q, uint64_t now_ns);
/* Count and log an authentication failure of q once (never a secret). */
void tgt_auth_failed(struct tgt_queue *q, const char *hostid, const char *what, const char *why);

/* io_uring user_data: request pointer with a kind tag in the low bits. */
#define TGT_UD_KIND_BITS 3
#define TGT_UD_KIND_MASK ((1u << TGT_UD_KIND_BITS) - 1)
#define TGT_UD_REQ 1u
_Static_assert(_Alignof(struct tgt_req) >= (1 << TGT_UD_KIND_BITS), "tag bits fit");

#endif
