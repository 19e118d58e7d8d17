/* SPDX-License-Identifier: MIT */
/*
 * Transport flow over loopback: an engine-like echo that reposts from its
 * completion handlers, both directions at once, corked posts, a peer
 * process that exits without disconnecting, a SEND that waits for its
 * receive (tcp), the ACKs a corked round spares (tcp), quiet waits, a
 * disconnect seen while another connection keeps its CQ busy.  Same
 * transport and address selection as test-tcp-transport.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checked.h"
#include "log.h"
#include "tap.h"
#include "transport.h"
#include "transport-harness.h"

static const char *self_argv0;

/* Engine-like echo: completion handlers repost and answer, so posts happen
 * between cq_poll calls of a batch. */
enum { ECHO_SLOTS = 32, ECHO_PINGS = 2000, ECHO_WINDOW = 16, ECHO_SZ = 64 };

struct echo_ctx;

struct echo_wr {
	struct rb_cqe cqe;
	struct echo_ctx *x;
	bool passive, recv, busy;
	int slot;
};

struct echo_ctx {
	struct pair *pp;
	struct buf arb, asb, prb, psb; /* a recv/send, p recv/send */
	struct echo_wr arecv[ECHO_SLOTS], asend[ECHO_SLOTS * 2];
	struct echo_wr precv[ECHO_SLOTS], psend[ECHO_SLOTS];
	int sent, pongs, inflight, errors, flushed;
	int outstanding; /* posted, not completed: all must complete */
	uint32_t expect;
};

static int echo_post_recv(struct echo_ctx *x, struct echo_wr *w)
{
	struct buf *b = w->passive ? &x->prb : &x->arb;
	struct rb_sge s = sge(b, (size_t)w->slot * ECHO_SZ, ECHO_SZ);

	x->outstanding++;
	return T->post_recv(w->passive ? x->pp->p.c : x->pp->a.c, &w->cqe, &s, 1);
}

static void echo_ping(struct echo_ctx *x)
{
	while (x->sent < ECHO_PINGS && x->inflight < ECHO_WINDOW) {
		int slot = x->sent % (ECHO_SLOTS * 2);
		struct echo_wr *w = &x->asend[slot];
		struct rb_sge s = sge(&x->asb, (size_t)slot * ECHO_SZ, 4 + (uint32_t)x->sent % 60);
		uint32_t seq = (uint32_t)x->sent;

		if (w->busy) {
			x->errors++;
			return;
		}
		memcpy(x->asb.p + slot * ECHO_SZ, &seq, 4);
		w->busy = true;
		x->outstanding++;
		if (T->post_send(x->pp->a.c, &w->cqe, &s, 1))
			x->errors++;
		x->sent++;
		x->inflight++;
	}
}

static void echo_done(struct rb_cq *cq, struct rb_wc *wc)
{
	struct echo_wr *w = rb_container_of(wc->cqe, struct echo_wr, cqe);
	struct echo_ctx *x = w->x;
	uint32_t seq;

	x->outstanding--;
	if (wc->status == RB_WC_FLUSH_ERR && x->pongs == ECHO_PINGS) {
		x->flushed++; /* teardown at the end */
		return;
	}
	if (wc->status) {
		x->errors++;
		return;
	}
	if (!w->recv) {
		w->busy = false;
		return;
	}
	if (w->passive) {
		struct echo_wr *s = &x->psend[w->slot];
		struct rb_sge g = sge(&x->psb, (size_t)w->slot * ECHO_SZ, wc->byte_len);

		if (s->busy)
			x->errors++;
		memcpy(x->psb.p + w->slot * ECHO_SZ, x->prb.p + w->slot * ECHO_SZ, wc->byte_len);
		s->busy = true;
		x->outstanding++;
		if (T->post_send(x->pp->p.c, &s->cqe, &g, 1))
			x->errors++;
	} else {
		memcpy(&seq, x->arb.p + w->slot * ECHO_SZ, 4);
		if (seq != x->expect++ || wc->byte_len != 4 + seq % 60)
			x->errors++;
		x->pongs++;
		x->inflight--;
	}
	if (echo_post_recv(x, w))
		x->errors++;
	if (!w->passive)
		echo_ping(x);
}

static bool echo_finished(void *arg)
{
	struct echo_ctx *x = arg;

	return x->pongs == ECHO_PINGS || x->errors;
}

static bool echo_all_completed(void *arg)
{
	struct echo_ctx *x = arg;

	return x->outstanding == 0;
}

static void test_echo(struct rb_listener *l)
{
	static struct echo_ctx x;
	struct pair pp;
	int rc = 0;
	uint64_t t0;

	memset(&x, 0, sizeof(x));
	if (pair_open(l, &pp)) {
		ok(0, "connect for echo");
		pair_close(&pp, NULL, 0);
		return;
	}
	x.pp = &pp;
	rc |= buf_reg(pp.a.d, &x.arb, ECHO_SLOTS * ECHO_SZ, 0);
	rc |= buf_reg(pp.a.d, &x.asb, ECHO_SLOTS * 2 * ECHO_SZ, 0);
	rc |= buf_reg(pp.p.d, &x.prb, ECHO_SLOTS * ECHO_SZ, 0);
	rc |= buf_reg(pp.p.d, &x.psb, ECHO_SLOTS * ECHO_SZ, 0);
	for (int i = 0; i < ECHO_SLOTS * 2; i++) {
		x.asend[i] = (struct echo_wr){ .cqe.done = echo_done, .x = &x, .slot = i };
		if (i >= ECHO_SLOTS)
			continue;
		x.psend[i] = (struct echo_wr){ .cqe.done = echo_done, .x = &x, .slot = i,
					       .passive = true };
		x.arecv[i] = (struct echo_wr){ .cqe.done = echo_done, .x = &x, .slot = i,
					       .recv = true };
		x.precv[i] = (struct echo_wr){ .cqe.done = echo_done, .x = &x, .slot = i,
					       .recv = true, .passive = true };
		rc |= echo_post_recv(&x, &x.arecv[i]);
		rc |= echo_post_recv(&x, &x.precv[i]);
	}
	is_int(rc, 0, "echo: setup");
	t0 = rb_clock_ms();
	echo_ping(&x);
	ok(wait_until(&pp, echo_finished, &x, 20000), "echo: finished");
	is_int(x.pongs, ECHO_PINGS, "echo: %d round trips answered in order (%llu ms)",
	       ECHO_PINGS, (unsigned long long)(rb_clock_ms() - t0));
	is_int(x.errors, 0, "echo: no errors, no busy slot reused");
	T->disconnect(pp.a.c);
	ok(wait_until(&pp, echo_all_completed, &x, WAIT_MS), "echo: every WR completed once");
	ok(x.flushed >= 2 * ECHO_SLOTS, "echo: posted receives flushed (%d)", x.flushed);
	pair_close(&pp, NULL, 0);
	buf_free(&x.arb);
	buf_free(&x.asb);
	buf_free(&x.prb);
	buf_free(&x.psb);
}

/* The connected socket of this process whose peer is port (the active
 * side of a pair: the transport does not expose its fd). */
static int socket_to_port(uint16_t port)
{
	for (int fd = 3; fd < 1024; fd++) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct stat st;

		if (fstat(fd, &st) || !S_ISSOCK(st.st_mode) ||
		    getpeername(fd, (struct sockaddr *)&ss, &sl))
			continue;
		if ((ss.ss_family == AF_INET &&
		     ntohs(((struct sockaddr_in *)&ss)->sin_port) == port) ||
		    (ss.ss_family == AF_INET6 &&
		     ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) == port))
			return fd;
	}
	return -1;
}

/* Bytes that arrived on fd and wait to be read, once they stop growing. */
static int settled_inq(int fd)
{
	int n = -1, last = -2;

	for (int i = 0; i < 100 && n != last; i++) {
		last = n;
		usleep(20000);
		if (ioctl(fd, FIONREAD, &n) < 0)
			return -1;
	}
	return n;
}

/*
 * A request answered within one corked round: the answer carries the ack,
 * so exactly one frame crosses back (no stand-alone ACK).  Uncorked, the
 * receiver acks at once and the answer follows as a second frame.  The
 * active side is not polled until its bytes are counted.
 */
static void ack_round(struct rb_listener *l, bool corked)
{
	const char *how = corked ? "corked" : "uncorked";
	enum { REQ = 64, ANS = 16, HDR = 32 };
	struct buf ab = { 0 }, pb = { 0 };
	struct rb_sge s;
	struct twr t[4]; /* a recv, a send, p recv, p send */
	struct pair pp;
	int fd, inq;

	if (pair_open(l, &pp)) {
		ok(0, "connect for ack round (%s)", how);
		pair_close(&pp, NULL, 0);
		return;
	}
	fd = socket_to_port(lep.port);
	ok(fd >= 0, "%s: found the active side's socket", how);
	if (buf_reg(pp.a.d, &ab, 4096, RB_ACCESS_LOCAL) || buf_reg(pp.p.d, &pb, 4096, 0) ||
	    fd < 0) {
		ok(0, "%s: setup", how);
		pair_close(&pp, NULL, 0);
		return;
	}
	twr_init(t, 4);
	s = sge(&ab, 2048, ANS);
	T->post_recv(pp.a.c, &t[0].cqe, &s, 1);
	s = sge(&pb, 0, REQ);
	T->post_recv(pp.p.c, &t[2].cqe, &s, 1);
	s = sge(&ab, 0, REQ);
	is_int(T->post_send(pp.a.c, &t[1].cqe, &s, 1), 0, "%s: request posted", how);

	/* The passive side's round: cork, take the request, answer, uncork. */
	ok(fd_readable(T->cq_fd(pp.p.cq), WAIT_MS), "%s: request arrives", how);
	T->cq_cork(pp.p.cq, corked);
	T->cq_arm(pp.p.cq);
	for (uint64_t t0 = rb_clock_ms(); !t[2].done && rb_clock_ms() - t0 < WAIT_MS;)
		drain(pp.p.cq);
	ok(t[2].done && t[2].wc.status == RB_WC_SUCCESS, "%s: request received", how);
	s = sge(&pb, 1024, ANS);
	is_int(T->post_send(pp.p.c, &t[3].cqe, &s, 1), 0, "%s: answer posted", how);
	drain(pp.p.cq);
	T->cq_cork(pp.p.cq, false);

	inq = settled_inq(fd);
	if (corked)
		is_int(inq, HDR + ANS, "corked: one frame back, the answer carries the ack");
	else
		is_int(inq, HDR + HDR + ANS, "uncorked: an ACK frame, then the answer");
	ok(wait_done(&pp, t, 4, WAIT_MS), "%s: all four complete", how);
	ok(t[1].wc.status == RB_WC_SUCCESS && t[0].wc.byte_len == ANS,
	   "%s: request acked, answer received", how);
	pair_close(&pp, NULL, 0);
	buf_free(&ab);
	buf_free(&pb);
}

static void test_ack_in_round(struct rb_listener *l)
{
	ack_round(l, false);
	ack_round(l, true);
}

/*
 * Corked posts are held: the peer sees none of them until uncork, then all
 * in posting order (one doorbell over rdma, one write over tcp); a WRITE
 * held before a SEND is in place when the SEND lands.  The sender does not
 * poll while corked, as a reactor handling a round does not sleep.
 */
static void test_cork(struct rb_listener *l)
{
	enum { N = 8, SZ = 64 };
	static struct twr t[2 * N + 1];
	struct buf sb = { 0 }, rb = { 0 }, wb = { 0 };
	struct pair pp;
	struct rb_sge s;
	int rc = 0, early = 0;
	bool order = true;

	if (pair_open(l, &pp)) {
		ok(0, "connect for cork");
		pair_close(&pp, NULL, 0);
		return;
	}
	rc |= buf_reg(pp.a.d, &sb, N * SZ + 4096, RB_ACCESS_LOCAL);
	rc |= buf_reg(pp.p.d, &rb, N * SZ, 0);
	rc |= buf_reg(pp.p.d, &wb, 4096, RB_ACCESS_REMOTE_WRITE);
	is_int(rc, 0, "cork: buffers");
	twr_init(t, 2 * N + 1);
	for (int i = 0; i < N; i++) {
		s = sge(&rb, (size_t)i * SZ, SZ);
		rc |= T->post_recv(pp.p.c, &t[i].cqe, &s, 1);
		fill(sb.p + (size_t)i * SZ, SZ, (uint32_t)i + 1);
	}
	fill(sb.p + N * SZ, 4096, 99);
	T->cq_cork(pp.a.cq, true);
	s = sge(&sb, N * SZ, 4096);
	rc |= T->post_write(pp.a.c, &t[2 * N].cqe, &s, 1, (uint64_t)(uintptr_t)wb.p,
			    wb.mr->rkey);
	for (int i = 0; i < N; i++) {
		s = sge(&sb, (size_t)i * SZ, SZ);
		rc |= T->post_send(pp.a.c, &t[N + i].cqe, &s, 1);
	}
	is_int(rc, 0, "cork: %d receives, a WRITE and %d SENDs posted (corked)", N, N);
	for (uint64_t t0 = rb_clock_ms(); rb_clock_ms() - t0 < 200;) {
		drain(pp.p.cq);
		usleep(10000);
	}
	for (int i = 0; i < N; i++)
		early += t[i].done;
	is_int(early, 0, "cork: nothing reached the peer before uncork");
	T->cq_cork(pp.a.cq, false);
	ok(wait_done(&pp, t, 2 * N + 1, WAIT_MS), "cork: all complete after uncork");
	for (int i = 0; i < N; i++) {
		order &= t[i].wc.status == RB_WC_SUCCESS && t[i].wc.byte_len == SZ &&
			 memcmp(rb.p + (size_t)i * SZ, sb.p + (size_t)i * SZ, SZ) == 0;
		order &= t[N + i].wc.status == RB_WC_SUCCESS;
	}
	ok(order, "cork: every SEND landed in its own receive, in posting order");
	ok(t[2 * N].wc.status == RB_WC_SUCCESS && memcmp(wb.p, sb.p + N * SZ, 4096) == 0,
	   "cork: the held WRITE placed its data");
	ok(t[2 * N].order < t[N].order, "cork: the WRITE completed before the first SEND");
	pair_close(&pp, NULL, 0);
	buf_free(&sb);
	buf_free(&rb);
	buf_free(&wb);
}

/*
 * Quiet waits (cq_prepare_wait): like a reactor, the active side drains,
 * prepares, then waits on cq_fd.  Incoming messages, READ completions and
 * a peer's disconnect must wake a quiet waiter on every transport.  Over
 * rdma, its own SEND completions must not (that wakeup is what quiet
 * saves), and widening the wait must hand over what landed meanwhile.
 */
static bool quiet_wait(struct side *s, bool quiet, int ms)
{
	int r = T->cq_prepare_wait(s->cq, quiet);

	return r > 0 || (r == 0 && fd_readable(T->cq_fd(s->cq), ms));
}

static void test_quiet(struct rb_listener *l)
{
	enum { SZ = 64 };
	static struct twr t[10];
	struct buf ab = { 0 }, pb = { 0 }, rr = { 0 };
	struct pair pp;
	struct rb_sge s;
	int rc = 0;

	if (pair_open(l, &pp)) {
		ok(0, "connect for quiet waits");
		pair_close(&pp, NULL, 0);
		return;
	}
	rc |= buf_reg(pp.a.d, &ab, 4096, RB_ACCESS_LOCAL);
	rc |= buf_reg(pp.p.d, &pb, 4096, RB_ACCESS_LOCAL);
	rc |= buf_reg(pp.p.d, &rr, 4096, RB_ACCESS_REMOTE_READ);
	twr_init(t, 10);
	fill(rr.p, 4096, 7);
	/* t0, t1, t8: p's receives; t2, t7: a's; t3, t4, t9: a's SENDs; t5: a's
	 * READ; t6: p's SEND */
	for (int i = 0; i < 2; i++) {
		s = sge(&pb, (size_t)i * SZ, SZ);
		rc |= T->post_recv(pp.p.c, &t[i].cqe, &s, 1);
	}
	s = sge(&ab, 0, SZ);
	rc |= T->post_recv(pp.a.c, &t[2].cqe, &s, 1);
	s = sge(&pb, 3 * SZ, SZ);
	rc |= T->post_recv(pp.p.c, &t[8].cqe, &s, 1);
	is_int(rc, 0, "quiet: buffers and receives");
	drain(pp.a.cq);

	/* An arm from before the caller went quiet may still fire once. */
	s = sge(&ab, SZ, SZ);
	quiet_wait(&pp.a, true, 0);
	rc = T->post_send(pp.a.c, &t[3].cqe, &s, 1);
	for (uint64_t end = rb_clock_ms() + WAIT_MS; !(t[0].done && (is_tcp || t[3].done)) &&
						rb_clock_ms() < end;) {
		drain(pp.p.cq);
		if (quiet_wait(&pp.a, true, 10))
			drain(pp.a.cq);
	}
	ok(t[0].done && t[0].wc.status == RB_WC_SUCCESS &&
		   (is_tcp || (t[3].done && t[3].wc.status == RB_WC_SUCCESS)),
	   "quiet: SEND received and completed");
	if (is_tcp) {
		/* A quiet sender's frame is lazy: the peer, with nothing to send
		 * back, sends no ACK for it... */
		bool woke = quiet_wait(&pp.a, true, 100);

		drain(pp.a.cq);
		ok(!woke && !t[3].done, "quiet: a lazy SEND gets no ACK of its own");
		/* ...until the sender stops being quiet and asks for it. */
		is_int(T->cq_prepare_wait(pp.a.cq, false), 0, "quiet: widening asks for the ack");
		for (uint64_t end = rb_clock_ms() + WAIT_MS; !t[3].done && rb_clock_ms() < end;) {
			drain(pp.p.cq);
			if (quiet_wait(&pp.a, false, 10))
				drain(pp.a.cq);
		}
		ok(t[3].done && t[3].wc.status == RB_WC_SUCCESS,
		   "quiet: ... and the peer's ACK completes it");
	}
	/* Now armed for incoming messages only. */
	rc |= T->post_send(pp.a.c, &t[4].cqe, &s, 1);
	for (uint64_t end = rb_clock_ms() + WAIT_MS; !t[1].done && rb_clock_ms() < end; usleep(1000))
		drain(pp.p.cq);
	usleep(100000); /* its completion has landed by now */
	if (!is_tcp) {
		ok(!quiet_wait(&pp.a, true, 200), "quiet: own SEND completion does not wake");
		is_int(T->cq_prepare_wait(pp.a.cq, false), 1,
		       "quiet: widening finds the completion that raised no event");
	}
	drain(pp.a.cq);
	ok(t[4].done && t[4].wc.status == RB_WC_SUCCESS, "quiet: the next poll returns it");

	/* An incoming message wakes a quiet waiter: first spend the arm the
	 * widening left (it fires for anything), so only a solicited one is left. */
	quiet_wait(&pp.a, true, 0);
	s = sge(&ab, SZ, SZ);
	rc |= T->post_send(pp.a.c, &t[9].cqe, &s, 1);
	for (uint64_t end = rb_clock_ms() + WAIT_MS; !(t[8].done && (is_tcp || t[9].done)) &&
						rb_clock_ms() < end;) {
		drain(pp.p.cq);
		if (quiet_wait(&pp.a, true, 10))
			drain(pp.a.cq);
	}
	ok(t[8].done && (is_tcp || t[9].done), "quiet: one more SEND");
	s = sge(&pb, 2 * SZ, SZ);
	rc |= T->post_send(pp.p.c, &t[6].cqe, &s, 1);
	ok(quiet_wait(&pp.a, true, WAIT_MS), "quiet: an incoming message wakes");
	drain(pp.a.cq);
	ok(t[2].done && t[2].wc.status == RB_WC_SUCCESS, "quiet: ... and is received");
	if (is_tcp)
		ok(t[9].done && t[9].wc.status == RB_WC_SUCCESS,
		   "quiet: the peer's next frame carries the lazy SEND's ack");

	/* A READ's completion wakes a quiet waiter: its data is awaited. */
	drain(pp.a.cq);
	s = sge(&ab, 2 * SZ, 1024);
	rc |= T->post_read(pp.a.c, &t[5].cqe, &s, 1, (uint64_t)(uintptr_t)rr.p, rr.mr->rkey);
	for (uint64_t end = rb_clock_ms() + WAIT_MS; !t[5].done && rb_clock_ms() < end;) {
		/* The peer side just keeps its CQ moving. */
		drain(pp.p.cq);
		if (quiet_wait(&pp.a, true, 50))
			drain(pp.a.cq);
	}
	ok(t[5].done && t[5].wc.status == RB_WC_SUCCESS && memcmp(ab.p + 2 * SZ, rr.p, 1024) == 0,
	   "quiet: a READ completes and wakes the waiter");
	is_int(rc, 0, "quiet: all posts accepted");

	/* The peer disconnects: a quiet waiter still sees its receive flush. */
	s = sge(&ab, 0, SZ);
	twr_init(&t[7], 1);
	rc = T->post_recv(pp.a.c, &t[7].cqe, &s, 1);
	drain(pp.a.cq);
	T->disconnect(pp.p.c);
	for (uint64_t end = rb_clock_ms() + WAIT_MS; !t[7].done && rb_clock_ms() < end;) {
		drain(pp.p.cq);
		if (quiet_wait(&pp.a, true, 1000))
			drain(pp.a.cq);
	}
	ok(!rc && t[7].done && t[7].wc.status == RB_WC_FLUSH_ERR,
	   "quiet: a peer's disconnect flushes a quiet waiter's receive");
	pair_close(&pp, t, 10);
	buf_free(&ab);
	buf_free(&pb);
	buf_free(&rr);
}

/* Bulk both ways at once: WRITE+SEND one way, READs the other. */
static void test_bidir(struct rb_listener *l)
{
	enum { N = 16, CH = 256 << 10 };
	static struct twr t[4 * N];
	struct pair pp;
	struct buf src = { 0 }, ar = { 0 }, w = { 0 }, dst = { 0 }, am = { 0 }, pm = { 0 };
	struct rb_sge s;
	int rc = 0;
	bool st = true;

	if (pair_open(l, &pp)) {
		ok(0, "connect for bidirectional bulk");
		pair_close(&pp, NULL, 0);
		return;
	}
	rc |= buf_reg(pp.a.d, &src, N * CH, 0);
	rc |= buf_reg(pp.a.d, &ar, N * CH, RB_ACCESS_REMOTE_READ);
	rc |= buf_reg(pp.a.d, &am, 64, 0);
	rc |= buf_reg(pp.p.d, &w, N * CH, RB_ACCESS_REMOTE_WRITE | RB_ACCESS_REMOTE_READ);
	rc |= buf_reg(pp.p.d, &dst, N * CH, 0);
	rc |= buf_reg(pp.p.d, &pm, N * 64, 0);
	fill(src.p, N * CH, 11);
	fill(ar.p, N * CH, 12);
	twr_init(t, 4 * N);
	for (int i = 0; i < N; i++) {
		s = sge(&pm, (size_t)i * 64, 64);
		rc |= T->post_recv(pp.p.c, &t[3 * N + i].cqe, &s, 1);
	}
	for (int i = 0; i < N; i++) {
		s = sge(&src, (size_t)i * CH, CH);
		rc |= T->post_write(pp.a.c, &t[i].cqe, &s, 1, (uintptr_t)w.p + (size_t)i * CH,
				    w.mr->rkey);
		s = sge(&am, 0, 8);
		rc |= T->post_send(pp.a.c, &t[N + i].cqe, &s, 1);
		s = sge(&dst, (size_t)i * CH, CH);
		rc |= T->post_read(pp.p.c, &t[2 * N + i].cqe, &s, 1,
				   (uintptr_t)ar.p + (size_t)i * CH, ar.mr->rkey);
	}
	is_int(rc, 0, "bidir: posted %d writes+sends one way, %d reads the other", N, N);
	ok(wait_done(&pp, t, 4 * N, 20000), "bidir: all complete");
	for (int i = 0; i < 4 * N; i++)
		st &= t[i].wc.status == RB_WC_SUCCESS;
	ok(st, "bidir: all succeeded");
	ok(memcmp(w.p, src.p, N * CH) == 0, "bidir: written bytes match");
	ok(memcmp(dst.p, ar.p, N * CH) == 0, "bidir: read bytes match");
	pair_close(&pp, NULL, 0);
	buf_free(&src);
	buf_free(&ar);
	buf_free(&w);
	buf_free(&dst);
	buf_free(&am);
	buf_free(&pm);
}

/* rnr_retry 7 means "retry forever": a SEND waits for a receive. */
static void test_rnr_wait(struct rb_listener *l)
{
	struct pair pp;
	struct buf ab = { 0 }, pb = { 0 };
	struct twr t[2];
	struct rb_sge s;
	int rc = 0, save = opts.rnr_retry;

	opts.rnr_retry = 7; /* the connecting (receiving) side */
	rc = pair_open(l, &pp);
	opts.rnr_retry = save;
	if (rc) {
		ok(0, "connect for rnr wait");
		pair_close(&pp, NULL, 0);
		return;
	}
	rc |= buf_reg(pp.a.d, &ab, 64, 0);
	rc |= buf_reg(pp.p.d, &pb, 64, 0);
	memcpy(pb.p, "late", 4);
	twr_init(t, 2);
	s = sge(&pb, 0, 4);
	rc |= T->post_send(pp.p.c, &t[0].cqe, &s, 1);
	wait_done(&pp, NULL, 0, 200);
	ok(!rc && !t[0].done, "rnr wait: send stays outstanding without a receive");
	s = sge(&ab, 0, 64);
	rc |= T->post_recv(pp.a.c, &t[1].cqe, &s, 1);
	ok(fd_readable(T->cq_fd(pp.a.cq), 1000), "rnr wait: posting the receive wakes cq_fd");
	ok(!rc && wait_done(&pp, t, 2, WAIT_MS), "rnr wait: both complete once posted");
	ok(t[0].wc.status == RB_WC_SUCCESS && t[1].wc.status == RB_WC_SUCCESS &&
	   t[1].wc.byte_len == 4 && memcmp(ab.p, "late", 4) == 0, "rnr wait: delivered");
	pair_close(&pp, NULL, 0);
	buf_free(&ab);
	buf_free(&pb);
}

/* Child process connects, sends one message, exits without disconnecting. */
static void child_run(void)
{
	struct side s = { 0 };
	struct buf b = { 0 };
	struct twr t;
	struct rb_sge g;
	uint64_t end;

	alarm(10);
	if (T->conn_create(&lep, &opts, &s.c) || T->cq_create(T->conn_domain(s.c), 64, &s.cq) ||
	    T->connect(s.c, s.cq, &caps, "child", 5, NULL, NULL))
		_exit(2);
	if (buf_reg(T->conn_domain(s.c), &b, 64, 0))
		_exit(3);
	memcpy(b.p, "from-child", 10);
	twr_init(&t, 1);
	g = sge(&b, 0, 10);
	if (T->post_send(s.c, &t.cqe, &g, 1))
		_exit(4);
	end = rb_clock_ms() + WAIT_MS;
	while (!t.done && rb_clock_ms() < end) {
		struct pollfd pf = { .fd = T->cq_fd(s.cq), .events = POLLIN };

		drain(s.cq);
		if (!t.done)
			poll(&pf, 1, 20);
	}
	_exit(t.done && t.wc.status == RB_WC_SUCCESS ? 0 : 5);
}

static void test_peer_exit(struct rb_listener *l)
{
	struct pair pp = { 0 };
	struct buf b = { 0 };
	struct twr t[3];
	struct rb_sge s;
	const void *priv;
	size_t plen;
	int status = -1, rc = 0;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		/* A fresh image: verbs contexts inherited over fork are unusable
		 * (the kernel refuses uverbs writes from another process). */
		char port[8];

		snprintf(port, sizeof(port), "%u", lep.port);
		execl("/proc/self/exe", self_argv0, T->name, "--peer-exit-child", port,
		      (char *)NULL);
		_exit(6);
	}
	ok(pid > 0, "fork peer process");
	if (pid < 0)
		return;
	pp.p.c = get_request(l, &priv, &plen, NULL);
	ok(pp.p.c && plen == 5 && memcmp(priv, "child", 5) == 0, "request from the child");
	if (!pp.p.c) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		return;
	}
	pp.p.d = T->conn_domain(pp.p.c);
	rc |= T->cq_create(pp.p.d, 64, &pp.p.cq);
	rc |= T->accept(pp.p.c, pp.p.cq, &caps, NULL, 0);
	rc |= buf_reg(pp.p.d, &b, 3 * 64, 0);
	twr_init(t, 3);
	for (int i = 0; i < 3; i++) {
		s = sge(&b, (size_t)i * 64, 64);
		rc |= T->post_recv(pp.p.c, &t[i].cqe, &s, 1);
	}
	is_int(rc, 0, "accept the child and post receives");
	ok(wait_done(&pp, t, 3, WAIT_MS), "receives complete after the child exits");
	ok(t[0].wc.status == RB_WC_SUCCESS && t[0].wc.byte_len == 10 &&
	   memcmp(b.p, "from-child", 10) == 0, "child's message arrived");
	ok(t[1].wc.status == RB_WC_FLUSH_ERR && t[2].wc.status == RB_WC_FLUSH_ERR,
	   "remaining receives flush when the peer process is gone");
	waitpid(pid, &status, 0);
	ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child saw its send complete (%d)",
	   WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	pair_close(&pp, NULL, 0);
	buf_free(&b);
}

/*
 * A CM event reaches a CQ's owner while completion events keep coming: the
 * rdma cq_arm reads the CM channel only when no completion event woke it,
 * or once every so many wakeups.  Two connections share one passive CQ;
 * every round a message lands on the first (so each cq_arm finds a
 * completion event) while the second one's peer has disconnected.
 */
static void test_cm_under_load(struct rb_listener *l)
{
	enum { ROUNDS = 400, SZ = 64 };
	struct pair p1 = { 0 }, p2 = { 0 };
	struct buf sb = { 0 }, rb1 = { 0 }, rb2 = { 0 };
	struct twr snd, rcv, gone;
	struct rb_sge s;
	int rc = 0, round, lost = 0;

	if (pair_open(l, &p1) || pair_open_on(l, &p2, p1.p.cq)) {
		ok(0, "cm under load: two connections on one passive CQ");
		goto out;
	}
	rc |= buf_reg(p1.a.d, &sb, SZ, 0);
	rc |= buf_reg(p1.p.d, &rb1, SZ, 0);
	rc |= buf_reg(p2.p.d, &rb2, SZ, 0);
	twr_init(&gone, 1);
	s = sge(&rb2, 0, SZ);
	rc |= T->post_recv(p2.p.c, &gone.cqe, &s, 1);
	is_int(rc, 0, "cm under load: setup");
	/* A few rounds first, so the passive CQ is armed when the CM event
	 * comes and every cq_arm after it finds a completion event. */
	for (round = -4; round < ROUNDS && !gone.done && !rc; round++) {
		uint64_t end = rb_clock_ms() + WAIT_MS;
		struct pollfd pf = { .fd = T->cq_fd(p1.a.cq), .events = POLLIN };

		if (round == 0)
			T->disconnect(p2.a.c);
		twr_init(&snd, 1);
		twr_init(&rcv, 1);
		s = sge(&rb1, 0, SZ);
		rc |= T->post_recv(p1.p.c, &rcv.cqe, &s, 1);
		s = sge(&sb, 0, SZ);
		rc |= T->post_send(p1.a.c, &snd.cqe, &s, 1);
		/* Over rdma the SEND completes once the message is in the passive
		 * CQ, so the cq_arm below finds its event; tcp acks only what the
		 * passive side has read. */
		while (!rc && !snd.done && rb_clock_ms() < end) {
			drain(p1.a.cq);
			if (is_tcp)
				drain(p1.p.cq);
			if (!snd.done)
				poll(&pf, 1, 20);
		}
		while (!rc && !rcv.done && rb_clock_ms() < end)
			drain(p1.p.cq);
		lost += !snd.done || !rcv.done;
		if (lost)
			break;
	}
	is_int(lost, 0, "cm under load: every round's message arrived");
	ok(round > 0 && gone.done && gone.wc.status == RB_WC_FLUSH_ERR,
	   "cm under load: the peer's disconnect is seen while messages keep coming (round %d)",
	   round);
out:
	pair_close(&p2, NULL, 0);
	pair_close(&p1, NULL, 0);
	buf_free(&sb);
	buf_free(&rb1);
	buf_free(&rb2);
}

/* ---- main ------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	struct rb_listener *l = NULL;
	int ret = harness_init(argc, argv, "test-transport-flow");

	if (ret)
		return ret;
	self_argv0 = argv[0];
	if (argc == 4 && strcmp(argv[2], "--peer-exit-child") == 0) {
		lep.port = (uint16_t)atoi(argv[3]);
		child_run();
	}
	ret = harness_listen(&l);
	if (ret)
		return ret;
	test_echo(l);
	test_bidir(l);
	test_cork(l);
	test_quiet(l);
	test_peer_exit(l);
	test_cm_under_load(l);
	if (is_tcp) {
		test_rnr_wait(l);
		test_ack_in_round(l);
	}
	T->listener_close(l);
	return tap_done();
}
