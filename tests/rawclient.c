/* SPDX-License-Identifier: MIT */
/*
 * A deliberately misbehaving host: speaks the rdmablk protocol directly over
 * a transport and sends malformed, truncated and oversized capsules.  Each
 * error must come back as the right status, or as a closed connection for
 * protocol violations; and the target must still serve afterwards.
 *
 * usage: rawclient TRANSPORT HOST PORT EXPORT
 */
#include "config.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "checked.h"
#include "tap.h"
#include "transport.h"
#include "wire.h"

#define DEPTH 8
#define RECVS (3 * DEPTH) /* receive slots: lazy_host keeps them all posted */
#define BUF_SIZE (1 << 20)

static const struct rb_transport_ops *ops;
static struct rb_transport_opts topts;
static struct rb_endpoint ep;
static struct rb_domain *domain;
static struct rb_cq *cq;

struct waiter {
	struct rb_cqe cqe;
	int done;
	struct rb_wc wc;
};

static void waiter_done(struct rb_cq *c, struct rb_wc *wc)
{
	struct waiter *w = rb_container_of(wc->cqe, struct waiter, cqe);

	w->done = 1;
	w->wc = *wc;
}

/* Drive the CQ until w completes or timeout_ms passes; 0 or -ETIMEDOUT. */
static int wait_for(struct waiter *w, int timeout_ms)
{
	struct pollfd pfd = { .fd = ops->cq_fd(cq), .events = POLLIN };

	for (int waited = 0; !w->done && waited < timeout_ms; waited += 10) {
		struct rb_wc wc[16];
		int n;

		ops->cq_arm(cq);
		while ((n = ops->cq_poll(cq, wc, 16)) > 0)
			for (int i = 0; i < n; i++)
				wc[i].cqe->done(cq, &wc[i]);
		if (w->done)
			break;
		poll(&pfd, 1, 10);
	}
	return w->done ? 0 : -ETIMEDOUT;
}

struct queue {
	struct rb_conn *conn;
	struct rb_mr *mr; /* capsules, responses and data: remote r/w */
	char *mem;
	struct waiter recv[RECVS];
	int nrecv; /* slots posted so far */
	struct rb_response *rsp; /* RECVS slots in mem */
	struct rb_capsule *cap; /* DEPTH slots in mem, each followed by 16 KiB */
	char *data; /* BUF_SIZE in mem */
	uint16_t depth;
	uint32_t incapsule;
};

#define CAP_STRIDE (64 + 16384)

static int post_recv(struct queue *q, int i)
{
	struct rb_sge sg = { .addr = &q->rsp[i], .length = sizeof(q->rsp[i]), .lkey = q->mr->lkey };

	q->recv[i].done = 0;
	q->recv[i].cqe.done = waiter_done;
	return ops->post_recv(q->conn, &q->recv[i].cqe, &sg, 1);
}

/* Connect a queue; returns 0, or -ECONNREFUSED with *reason set. */
static int queue_connect(struct queue *q, uint16_t qid, uint64_t session, uint32_t magic,
			 uint16_t *reason)
{
	struct rb_cm_req2 req = { .magic = rb_le32(magic), .version = rb_le16(RB_PROTO_VERSION),
				 .qid = rb_le16(qid), .depth = rb_le16(DEPTH),
				 .incapsule = rb_le32(8192), .session = rb_le64(session) };
	struct rb_conn_caps caps = { .max_send_wr = RECVS, .max_recv_wr = RECVS,
				     .max_sge = 2, .max_inline = 64, .max_rd_atomic = 0,
				     .max_dest_rd_atomic = 16 };
	union {
		struct rb_cm_rep2 rep;
		struct rb_cm_rej rej;
	} back;
	size_t back_len = sizeof(back);
	size_t size = RECVS * sizeof(struct rb_response) + DEPTH * CAP_STRIDE + BUF_SIZE;
	int ret;

	memset(q, 0, sizeof(*q));
	ret = ops->conn_create(&ep, &topts, &q->conn);
	if (ret)
		return ret;
	if (!domain) {
		static char anchor_buf[64];
		static struct rb_mr *anchor;

		domain = ops->conn_domain(q->conn);
		/* A region keeps the domain alive across this host's connections. */
		ret = ops->reg_mr(domain, anchor_buf, sizeof(anchor_buf), RB_ACCESS_LOCAL, &anchor);
		if (ret)
			return ret;
		ret = ops->cq_create(domain, 256, &cq);
		if (ret)
			return ret;
	}
	q->mem = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (q->mem == MAP_FAILED)
		return -ENOMEM;
	ret = ops->reg_mr(domain, q->mem, size, RB_ACCESS_REMOTE_READ | RB_ACCESS_REMOTE_WRITE,
			  &q->mr);
	if (ret)
		return ret;
	q->rsp = (struct rb_response *)q->mem;
	q->cap = (struct rb_capsule *)(q->mem + RECVS * sizeof(struct rb_response));
	q->data = q->mem + RECVS * sizeof(struct rb_response) + DEPTH * CAP_STRIDE;
	ret = ops->connect(q->conn, cq, &caps, &req, sizeof(req), &back, &back_len);
	if (ret == -ECONNREFUSED && reason)
		*reason = back_len >= sizeof(back.rej) ? rb_from_le16(back.rej.reason) : 0xffff;
	if (ret) {
		ops->conn_destroy(q->conn);
		ops->dereg_mr(q->mr);
		munmap(q->mem, size);
		return ret;
	}
	/* The target sends nothing unsolicited: posting now is in time. */
	for (int i = 0; i < DEPTH; i++)
		if ((ret = post_recv(q, i)))
			return ret;
	q->nrecv = DEPTH;
	q->depth = rb_from_le16(back.rep.depth);
	q->incapsule = rb_from_le32(back.rep.incapsule);
	return 0;
}

/*
 * Connect qid again after the target closed it: the qid stays bound until
 * the target has torn the old queue down (its flushes polled), so a
 * refusal as "bad queue id" within 2 s is that race, not an answer.
 */
static int queue_reconnect(struct queue *q, uint16_t qid, uint64_t session)
{
	uint16_t reason = 0;
	int ret;

	for (int tries = 0; tries < 100; tries++) {
		ret = queue_connect(q, qid, session, RB_MAGIC, &reason);
		if (ret != -ECONNREFUSED || reason != RB_REJ_BAD_QID)
			break;
		usleep(20 * 1000);
	}
	return ret;
}

/* Send len bytes starting at the capsule slot 0 (capsule + data). */
static int send_raw(struct queue *q, uint32_t len)
{
	struct waiter w = { .cqe.done = waiter_done };
	struct rb_sge sg = { .addr = &q->cap[0], .length = len, .lkey = q->mr->lkey };
	int ret = ops->post_send(q->conn, &w.cqe, &sg, 1);

	if (ret)
		return ret;
	ret = wait_for(&w, 5000);
	if (ret) {
		/* Its completion would land in this dead stack frame later. */
		printf("not ok - SEND of %u bytes not completed in 5 s; giving up\n", len);
		exit(EXIT_FAILURE);
	}
	return w.wc.status == RB_WC_SUCCESS ? 0 : -EIO;
}

/* Send capsule slot 0 (+extra bytes) and return the response status (or -errno). */
static int command(struct queue *q, uint32_t extra, uint64_t *result)
{
	int ret = send_raw(q, RB_CAPSULE_SIZE + extra);

	if (ret)
		return ret;
	/* Responses land in any posted slot; find the completed one. */
	for (int waited = 0; waited < 5000; waited += 10) {
		bool flushed = false;

		for (int i = 0; i < q->nrecv; i++) {
			if (!q->recv[i].done)
				continue;
			/* A response may be followed by the close it announced:
			 * take the response before reporting the flush. */
			if (q->recv[i].wc.status != RB_WC_SUCCESS) {
				flushed = true;
				continue;
			}
			if (result)
				*result = rb_from_le64(q->rsp[i].result);
			ret = rb_from_le16(q->rsp[i].status);
			/* The answer stands when the connection is already
			 * closing (DISCONNECT; over rdma the repost may then
			 * fail): that slot is just not used again. */
			if (post_recv(q, i))
				printf("# receive slot %d not reposted: connection closing\n", i);
			return ret;
		}
		if (flushed)
			return -ECONNRESET;
		struct waiter dummy = { 0 };

		wait_for(&dummy, 10);
	}
	return -ETIMEDOUT;
}

/* A protocol violation: the target must close the connection. */
static int closed_by_peer(struct queue *q)
{
	for (int waited = 0; waited < 5000; waited += 10) {
		for (int i = 0; i < q->nrecv; i++)
			if (q->recv[i].done && q->recv[i].wc.status != RB_WC_SUCCESS)
				return 1;
		struct waiter dummy = { 0 };

		wait_for(&dummy, 10);
	}
	return 0;
}

/* A key the target cannot have been given: any other value than ours. */
static uint32_t q_bad_key(uint32_t k)
{
	return (k ^ 0x5a5a5a5au) | 1u;
}

static void queue_close(struct queue *q)
{
	ops->disconnect(q->conn);
	/* Let the flushes arrive, then free. */
	for (int i = 0; i < q->nrecv; i++)
		if (!q->recv[i].done)
			wait_for(&q->recv[i], 2000);
	ops->conn_destroy(q->conn);
	ops->dereg_mr(q->mr);
}

static struct rb_capsule *io(struct queue *q, uint8_t op, uint32_t handle, uint64_t off,
			     uint32_t len)
{
	struct rb_capsule *c = &q->cap[0];

	memset(c, 0, sizeof(*c));
	c->opcode = op;
	c->cid = rb_le16(1);
	c->handle = rb_le32(handle);
	c->offset = rb_le64(off);
	c->length = rb_le32(len);
	if (op == RB_OP_READ || op == RB_OP_WRITE || op >= 0x80) {
		c->sgl.type = RB_SGL_KEYED;
		c->sgl.addr = rb_le64((uint64_t)(uintptr_t)q->data);
		c->sgl.length = rb_le32(len);
		c->sgl.key = rb_le32(q->mr->rkey);
	}
	return c;
}

/*
 * A host that reads its answers late.  Over tcp it then acknowledges
 * nothing, so on the target every answered command keeps its request until
 * that SEND completes.  Three rounds of DEPTH commands (each answered
 * before the next is sent) leave the third round with all 2 x DEPTH
 * requests waiting: it must wait for them, not be called a violation.
 * Over rdma the device acknowledges at once and this is a plain batch.
 */
static void lazy_host(struct queue *q, uint32_t handle)
{
	static struct waiter sends[RECVS];
	bool seen[RECVS] = { false };
	int answered = 0, good = 0, posted = 0;

	for (int i = q->nrecv; i < RECVS; i++)
		if (post_recv(q, i) == 0)
			q->nrecv++;
	is_int(q->nrecv, RECVS, "lazy host: %d receives posted", RECVS);
	for (int k = 0; k < RECVS; k++) {
		struct rb_capsule *c = (struct rb_capsule *)(q->data + (size_t)k * 64);
		struct rb_sge sg = { .addr = c, .length = RB_CAPSULE_SIZE, .lkey = q->mr->lkey };

		/* Answered at the choke point: no disk I/O, no data moved. */
		memset(c, 0, sizeof(*c));
		c->opcode = RB_OP_FLUSH;
		c->cid = rb_le16((uint16_t)k);
		c->handle = rb_le32(handle);
		c->rsvd0 = 1;
		sends[k].cqe.done = waiter_done;
		posted += ops->post_send(q->conn, &sends[k].cqe, &sg, 1) == 0;
		/* Not polling lets nothing out of the transport but these sends. */
		if (k % DEPTH == DEPTH - 1)
			usleep(300 * 1000);
	}
	is_int(posted, RECVS, "lazy host: %d commands sent in rounds of %d", RECVS, DEPTH);
	for (int waited = 0; waited < 10000 && answered < RECVS; waited += 10) {
		struct waiter dummy = { 0 };

		wait_for(&dummy, 10);
		answered = 0;
		for (int i = 0; i < RECVS; i++)
			answered += q->recv[i].done;
	}
	for (int i = 0; i < RECVS; i++) {
		uint16_t cid = rb_from_le16(q->rsp[i].cid);

		if (!q->recv[i].done || q->recv[i].wc.status != RB_WC_SUCCESS || cid >= RECVS ||
		    seen[cid] || rb_from_le16(q->rsp[i].status) != RB_S_INVALID_FIELD)
			continue;
		seen[cid] = true;
		good++;
	}
	is_int(good, RECVS, "lazy host: every command answered exactly once");
}

int main(int argc, char **argv)
{
	struct queue admin, ioq, bad;
	struct rb_connect_req *cr;
	struct rb_connect_rsp *rsp;
	uint64_t session, result;
	uint32_t handle, max_xfer;
	uint16_t reason = 0;
	struct rb_capsule *c;
	int st;

	if (argc != 5) {
		fprintf(stderr, "usage: rawclient TRANSPORT HOST PORT EXPORT\n");
		return 2;
	}
	ops = rb_transport_find(argv[1]);
	if (!ops) {
		printf("SKIP: transport %s not built in\n", argv[1]);
		return 77;
	}
	rb_transport_opts_init(&topts);
	snprintf(ep.host, sizeof(ep.host), "%s", argv[2]);
	ep.port = (uint16_t)atoi(argv[3]);

	/* Connection level: bad private data and unknown session are refused. */
	st = queue_connect(&bad, 0, 0, 0xdeadbeef, &reason);
	is_int(st, -ECONNREFUSED, "bad magic in connect private data is refused");
	is_int(reason, RB_REJ_BAD_MAGIC, "reject reason is bad magic");
	st = queue_connect(&bad, 1, 0x1234, RB_MAGIC, &reason);
	is_int(st, -ECONNREFUSED, "I/O queue for an unknown session is refused");
	is_int(reason, RB_REJ_NO_SESSION, "reject reason is unknown session");

	if (queue_connect(&admin, 0, 0, RB_MAGIC, NULL)) {
		printf("Bail out! admin queue connect failed\n");
		return 1;
	}
	c = io(&admin, RB_OP_CONNECT, 0, 0, RB_CONNECT_BUF_SIZE);
	cr = (struct rb_connect_req *)admin.data;
	memset(cr, 0, RB_CONNECT_BUF_SIZE);
	cr->magic = rb_le32(RB_MAGIC);
	cr->version = rb_le16(RB_PROTO_VERSION);
	cr->nr_io_queues = rb_le16(2);
	cr->queue_depth = rb_le16(DEPTH);
	snprintf(cr->hostid, sizeof(cr->hostid), "rawclient");
	memset(cr->export_name, 'x', sizeof(cr->export_name)); /* unterminated */
	is_int(command(&admin, 0, NULL), RB_S_INVALID_FIELD, "unterminated export name refused");
	snprintf(cr->export_name, sizeof(cr->export_name), "%s", argv[4]);
	c->length = rb_le32(100);
	c->sgl.length = rb_le32(100);
	is_int(command(&admin, 0, NULL), RB_S_INVALID_FIELD, "CONNECT with short buffer refused");
	c = io(&admin, RB_OP_CONNECT, 0, 0, RB_CONNECT_BUF_SIZE);
	is_int(command(&admin, 0, &session), RB_S_SUCCESS, "CONNECT succeeds");
	rsp = (struct rb_connect_rsp *)(admin.data + RB_CONNECT_RSP_OFFSET);
	handle = rb_from_le32(rsp->handle);
	max_xfer = rb_from_le32(rsp->max_transfer);
	ok(rb_from_le64(rsp->size) >= (1 << 20), "export is at least 1 MiB");
	is_int(command(&admin, 0, NULL), RB_S_INVALID_FIELD, "second CONNECT refused");

	if (queue_connect(&ioq, 1, session, RB_MAGIC, NULL)) {
		printf("Bail out! I/O queue connect failed\n");
		return 1;
	}
	st = queue_connect(&bad, 1, session, RB_MAGIC, &reason);
	is_int(st, -ECONNREFUSED, "the same qid twice is refused");
	is_int(reason, RB_REJ_BAD_QID, "reject reason is bad qid");

	/* Malformed capsules: error statuses, the queue stays usable. */
	io(&ioq, 0x42, handle, 0, 512);
	is_int(command(&ioq, 0, NULL), RB_S_INVALID_OPCODE, "unknown opcode");
	io(&ioq, RB_OP_READ, handle, 1ull << 40, 512);
	is_int(command(&ioq, 0, NULL), RB_S_OUT_OF_RANGE, "read beyond the end");
	io(&ioq, RB_OP_READ, handle, UINT64_MAX - 511, 512);
	is_int(command(&ioq, 0, NULL), RB_S_OUT_OF_RANGE, "offset overflow");
	io(&ioq, RB_OP_READ, handle, 0, max_xfer * 2);
	is_int(command(&ioq, 0, NULL), RB_S_INVALID_FIELD, "read over max transfer");
	io(&ioq, RB_OP_READ, handle, 0, 512)->rsvd0 = 1;
	is_int(command(&ioq, 0, NULL), RB_S_INVALID_FIELD, "reserved bits set");
	io(&ioq, RB_OP_READ, handle + 1, 0, 512);
	is_int(command(&ioq, 0, NULL), RB_S_INVALID_HANDLE, "wrong export handle");
	io(&ioq, RB_OP_READ, handle, 0, 4096)->sgl.length = rb_le32(8192);
	is_int(command(&ioq, 0, NULL), RB_S_SGL_INVALID, "descriptor length mismatch");
	io(&ioq, RB_OP_CONNECT, 0, 0, RB_CONNECT_BUF_SIZE);
	is_int(command(&ioq, 0, NULL), RB_S_INVALID_QUEUE, "admin opcode on I/O queue");
	c = io(&ioq, RB_OP_WRITE, handle, 0, 4096);
	c->sgl.type = RB_SGL_INCAPSULE;
	c->sgl.addr = 0;
	c->sgl.key = 0;
	is_int(command(&ioq, 100, NULL), RB_S_SGL_INVALID, "in-capsule write with short data");

	/* Still serving: a write and read back through this very queue. */
	c = io(&ioq, RB_OP_WRITE, handle, 8192, 4096);
	memset(ioq.data, 0x5a, 4096);
	is_int(command(&ioq, 0, NULL), RB_S_SUCCESS, "keyed write after errors");
	memset(ioq.data, 0, 4096);
	io(&ioq, RB_OP_READ, handle, 8192, 4096);
	is_int(command(&ioq, 0, NULL), RB_S_SUCCESS, "read after errors");
	ok(ioq.data[0] == 0x5a && ioq.data[4095] == 0x5a, "read returns the written data");
	c = io(&ioq, RB_OP_WRITE, handle, 0, 512);
	c->sgl.type = RB_SGL_INCAPSULE;
	c->sgl.addr = 0;
	c->sgl.key = 0;
	memset((char *)c + 64, 0x3c, 512);
	is_int(command(&ioq, 512, NULL), RB_S_SUCCESS, "in-capsule write");

	/* Protocol violations: only that connection is closed. */
	io(&ioq, RB_OP_READ, handle, 0, 512);
	send_raw(&ioq, 10);
	ok(closed_by_peer(&ioq), "truncated capsule closes the connection");
	queue_close(&ioq);

	if (queue_reconnect(&ioq, 1, session) == 0) {
		c = io(&ioq, RB_OP_WRITE, handle, 0, 4096);
		c->sgl.key = rb_le32(q_bad_key(ioq.mr->rkey));
		send_raw(&ioq, RB_CAPSULE_SIZE);
		ok(closed_by_peer(&ioq), "write naming a bad key closes the connection");
		queue_close(&ioq);
	} else {
		ok(0, "reconnect of queue 1 after a violation");
	}

	if (queue_reconnect(&ioq, 2, session) == 0) {
		io(&ioq, RB_OP_READ, handle, 0, 512);
		send_raw(&ioq, RB_CAPSULE_SIZE + ioq.incapsule + 4096);
		ok(closed_by_peer(&ioq), "oversized message closes the connection");
		queue_close(&ioq);
	} else {
		ok(0, "connect queue 2");
	}

	/* The session and the target survive: a fresh queue still works. */
	if (queue_reconnect(&ioq, 1, session) == 0) {
		memset(ioq.data, 0, 4096);
		io(&ioq, RB_OP_READ, handle, 8192, 4096);
		is_int(command(&ioq, 0, NULL), RB_S_SUCCESS, "new queue reads after violations");
		ok(ioq.data[0] == 0x5a, "and sees the earlier write");
		queue_close(&ioq);
	} else {
		ok(0, "reconnect after violations");
	}

	if (queue_reconnect(&ioq, 2, session) == 0) {
		lazy_host(&ioq, handle);
		queue_close(&ioq);
	} else {
		ok(0, "connect queue 2 for the lazy host");
	}

	io(&admin, RB_OP_KEEPALIVE, 0, 0, 0)->sgl.type = RB_SGL_NONE;
	memset(&admin.cap[0].sgl, 0, sizeof(admin.cap[0].sgl));
	is_int(command(&admin, 0, NULL), RB_S_SUCCESS, "keepalive on the admin queue");
	io(&admin, RB_OP_DISCONNECT, 0, 0, 0);
	memset(&admin.cap[0].sgl, 0, sizeof(admin.cap[0].sgl));
	is_int(command(&admin, 0, &result), RB_S_SUCCESS, "disconnect");
	queue_close(&admin);
	return tap_done();
}
