/* SPDX-License-Identifier: MIT */
/*
 * Transport semantics over loopback: handshake with private data, reject,
 * SEND/RECV scatter and ordering, one-sided WRITE/READ, remote access
 * violations, length errors, flush on disconnect, cq_fd readiness.  The
 * flow tests (echo under load, peer exit, listener robustness) are in
 * test-transport-flow.c.  Runs the "tcp" transport by default; argv[1] or
 * RB_TEST_TRANSPORT names another (e.g. rdma in the VM), RB_TEST_ADDR the
 * address to listen on and connect to (default 127.0.0.1).
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
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "checked.h"
#include "log.h"
#include "tap.h"
#include "transport.h"
#include "transport-harness.h"

/* ---- tests ------------------------------------------------------------------ */

static void test_handshake(struct rb_listener *l)
{
	static const char priv[32] = "connect-private-data-0123456789";
	static const char acc[16] = "accept-data-abc";
	struct conn_args a;
	struct pair pp;
	char got[64];
	size_t glen = sizeof(got);
	char peer[128];
	int ret;

	ret = pair_open_ex(l, &pp, &a, priv, sizeof(priv), acc, sizeof(acc), NULL, 0, got, &glen);
	is_int(ret, 0, "connect with private data succeeds");
	ok(pp.p.c != NULL, "listener produced the request");
	is_int(glen, sizeof(priv), "passive side sees private data length");
	ok(memcmp(got, priv, sizeof(priv)) == 0, "passive side sees private data bytes");
	is_int(a.rlen, sizeof(acc), "accept data length comes back");
	ok(memcmp(a.rpriv, acc, sizeof(acc)) == 0, "accept data bytes come back");
	if (pp.a.c && pp.p.c) {
		T->conn_peer(pp.a.c, peer, sizeof(peer));
		ok(strstr(peer, lep.host) != NULL, "active conn_peer names the listener (%s)",
		   peer);
		T->conn_peer(pp.p.c, peer, sizeof(peer));
		ok(peer[0] && strcmp(peer, "?") != 0, "passive conn_peer is set (%s)", peer);
		ok(T->conn_qpn(pp.a.c) && T->conn_qpn(pp.p.c), "qpns are set");
		/* Verbs QP numbers are per device: two rxe devices may both say 17. */
		if (strcmp(T->name, "tcp") == 0)
			ok(T->conn_qpn(pp.a.c) != T->conn_qpn(pp.p.c), "qpns differ");
		ok(pp.a.c->ops == T && pp.p.c->ops == T, "conn ops point at the transport");
	}
	pair_close(&pp, NULL, 0);
	ok(!drain(NULL), "closed cleanly");
}

static void test_reject(struct rb_listener *l)
{
	static const char priv[8] = "req";
	static const char rej[8] = "nope-42";
	struct conn_args a;
	struct pair pp;
	int ret;

	ret = pair_open_ex(l, &pp, &a, priv, sizeof(priv), NULL, 0, rej, sizeof(rej), NULL, NULL);
	is_int(ret, -ECONNREFUSED, "rejected connect returns -ECONNREFUSED");
	is_int(a.rlen, sizeof(rej), "reject data length comes back");
	ok(memcmp(a.rpriv, rej, sizeof(rej)) == 0, "reject data bytes come back");
	side_close(&pp.a);

	/* Nobody listening at all. */
	memset(&a, 0, sizeof(a));
	a.ep = lep;
	a.priv = priv;
	a.plen = sizeof(priv);
	if (free_port(lep.host, &a.ep.port) == 0) {
		connect_thread(&a);
		if (is_tcp)
			ok(a.ret == -ECONNREFUSED && a.rlen == 0,
			   "no listener: -ECONNREFUSED without data (%d)", a.ret);
		else
			ok(a.ret < 0, "no listener: connect fails (%d)", a.ret);
		side_close(&a.s);
	}
}

static void test_send_recv(struct rb_listener *l)
{
	struct pair pp;
	struct buf sb = { 0 }, rb = { 0 };
	struct twr t[2];
	struct rb_sge rs[2], ss[2];
	int rc;

	if (pair_open(l, &pp)) {
		ok(0, "connect for send/recv");
		pair_close(&pp, NULL, 0);
		return;
	}
	rc = buf_reg(pp.a.d, &sb, 4096, RB_ACCESS_LOCAL) | buf_reg(pp.p.d, &rb, 8192, 0);
	is_int(rc, 0, "register send and receive buffers");
	fill(sb.p, 100, 7);
	twr_init(t, 2);
	rs[0] = sge(&rb, 0, 16);
	rs[1] = sge(&rb, 4096, 4096);
	is_int(T->post_recv(pp.p.c, &t[0].cqe, rs, 2), 0, "post 2-sge receive");
	ss[0] = sge(&sb, 0, 30);
	ss[1] = sge(&sb, 30, 70);

	/* Idle: nothing pending, cq_fd must not be readable. */
	wait_done(&pp, NULL, 0, 50);
	ok(!fd_readable(T->cq_fd(pp.a.cq), 0) && !fd_readable(T->cq_fd(pp.p.cq), 0),
	   "idle cq fds are not readable");

	T->cq_arm(pp.p.cq); /* armed before the event, as an engine does */
	is_int(T->post_send(pp.a.c, &t[1].cqe, ss, 2), 0, "post 2-sge send");
	ok(fd_readable(T->cq_fd(pp.p.cq), 2000), "receiver cq_fd becomes readable");
	ok(wait_done(&pp, t, 2, WAIT_MS), "send and receive complete");
	is_int(t[0].wc.status, RB_WC_SUCCESS, "recv status");
	is_int(t[0].wc.opcode, RB_WC_RECV, "recv opcode");
	is_int(t[0].wc.byte_len, 100, "recv byte_len is the message length");
	ok(t[0].wc.conn == pp.p.c, "recv wc names its connection");
	is_int(t[1].wc.status, RB_WC_SUCCESS, "send status");
	is_int(t[1].wc.opcode, RB_WC_SEND, "send opcode");
	ok(memcmp(rb.p, sb.p, 16) == 0 && memcmp(rb.p + 4096, sb.p + 16, 84) == 0,
	   "payload scattered over both receive sges");
	ok(rb.p[16] == 0 && rb.p[4096 + 84] == 0, "nothing written past the message");

	wait_done(&pp, NULL, 0, 50);
	ok(!fd_readable(T->cq_fd(pp.a.cq), 0) && !fd_readable(T->cq_fd(pp.p.cq), 0),
	   "drained cq fds are not readable again");

	if (is_tcp) {
		struct rb_sge bad = ss[0];

		bad.lkey ^= 0x5a5a5a5a;
		is_int(T->post_send(pp.a.c, &t[1].cqe, &bad, 1), -EINVAL, "send with bad lkey");
		bad = sge(&sb, 4000, 200);
		is_int(T->post_send(pp.a.c, &t[1].cqe, &bad, 1), -EINVAL, "send beyond region");
		is_int(T->post_recv(pp.p.c, &t[0].cqe, rs, RB_MAX_SGE + 1), -EINVAL,
		       "too many sges");
	}
	pair_close(&pp, NULL, 0);
	buf_free(&sb);
	buf_free(&rb);
}

/* tcp: a CQ whose epoll set is unusable reports it from cq_poll (the
 * engine gives up the process) instead of looking empty forever. */
static void test_cq_poll_error(void)
{
	struct rb_domain *d = NULL;
	struct rb_cq *cq = NULL;
	struct rb_wc wc[4];
	int fd, saved, other;

	if (T->domain_open(&opts, &d) || T->cq_create(d, 64, &cq)) {
		ok(0, "domain and cq for the poll error test");
		goto out;
	}
	fd = T->cq_fd(cq);
	saved = dup(fd);
	other = eventfd(0, EFD_CLOEXEC);
	if (saved < 0 || other < 0 || dup2(other, fd) < 0) {
		ok(0, "swap the cq's epoll fd: %s", strerror(errno));
		goto out;
	}
	is_int(T->cq_poll(cq, wc, 4), -EINVAL, "cq_poll on a non-epoll fd returns -EINVAL");
	dup2(saved, fd);
	is_int(T->cq_poll(cq, wc, 4), 0, "cq_poll works again with its own fd");
	close(saved);
	close(other);
out:
	if (cq)
		T->cq_destroy(cq);
	if (d)
		T->domain_close(d);
}

static void test_ordering(struct rb_listener *l)
{
	enum { N = 200, SZ = 64 };
	static struct twr rt[N], st[N];
	struct pair pp;
	struct buf sb = { 0 }, rb = { 0 };
	bool order_ok = true, data_ok = true, status_ok = true;
	int rc = 0;

	if (pair_open(l, &pp)) {
		ok(0, "connect for ordering");
		pair_close(&pp, NULL, 0);
		return;
	}
	rc |= buf_reg(pp.a.d, &sb, N * SZ, 0);
	rc |= buf_reg(pp.p.d, &rb, N * SZ, 0);
	is_int(rc, 0, "register buffers");
	twr_init(rt, N);
	twr_init(st, N);
	for (int i = 0; i < N; i++) {
		struct rb_sge s = sge(&rb, (size_t)i * SZ, SZ);

		rc |= T->post_recv(pp.p.c, &rt[i].cqe, &s, 1);
	}
	for (int i = 0; i < N; i++) {
		struct rb_sge s = sge(&sb, (size_t)i * SZ, 8 + (uint32_t)i % 50);

		memcpy(sb.p + i * SZ, &i, sizeof(i));
		fill(sb.p + i * SZ + 4, 50, (uint32_t)i);
		rc |= T->post_send(pp.a.c, &st[i].cqe, &s, 1);
	}
	is_int(rc, 0, "post %d receives and %d sends", N, N);
	ok(wait_done(&pp, rt, N, WAIT_MS) && wait_done(&pp, st, N, WAIT_MS), "all complete");
	for (int i = 0; i < N; i++) {
		int seq;

		memcpy(&seq, rb.p + i * SZ, sizeof(seq));
		if (i && (rt[i].order < rt[i - 1].order || st[i].order < st[i - 1].order))
			order_ok = false;
		if (seq != i || rt[i].wc.byte_len != 8 + (uint32_t)i % 50 ||
		    memcmp(rb.p + i * SZ, sb.p + i * SZ, 8 + (size_t)i % 50))
			data_ok = false;
		if (rt[i].wc.status || st[i].wc.status)
			status_ok = false;
	}
	ok(status_ok, "all succeeded");
	ok(order_ok, "completions in posting order");
	ok(data_ok, "receive i holds message i with its length");
	pair_close(&pp, NULL, 0);
	buf_free(&sb);
	buf_free(&rb);
}

/*
 * Runs of small messages with data-carrying WRITEs and SENDs in between,
 * all posted before the receiver looks: they arrive in large reads, so a
 * data frame's header and the first part of its payload often share a read
 * with the small frames before it (tcp stages up to 4 KiB after a run of
 * small frames and copies the staged payload out).  Every byte must land.
 */
static void test_mixed_sizes(struct rb_listener *l)
{
	enum { N = 240, SMALL = 64, MAXLEN = 20000 };
	static struct twr rt[N], st[N];
	struct pair pp;
	struct buf sb = { 0 }, rb = { 0 }, wb = { 0 };
	bool data_ok = true, status_ok = true;
	uint64_t woff = 0;
	int rc = 0, nrecv = 0;

	if (pair_open(l, &pp)) {
		ok(0, "connect for mixed sizes");
		pair_close(&pp, NULL, 0);
		return;
	}
	rc |= buf_reg(pp.a.d, &sb, (size_t)N * MAXLEN, 0);
	rc |= buf_reg(pp.p.d, &rb, (size_t)N * MAXLEN, 0);
	rc |= buf_reg(pp.p.d, &wb, (size_t)N * MAXLEN, RB_ACCESS_REMOTE_WRITE);
	is_int(rc, 0, "mixed: register buffers");
	twr_init(rt, N);
	twr_init(st, N);
	fill(sb.p, (size_t)N * MAXLEN, 99);
	for (int i = 0; i < N; i++) {
		struct rb_sge s = sge(&rb, (size_t)i * MAXLEN, MAXLEN);

		rc |= T->post_recv(pp.p.c, &rt[i].cqe, &s, 1);
	}
	for (int i = 0; i < N; i++) {
		/* runs of ten small SENDs, each followed by a big SEND and a WRITE */
		uint32_t len = i % 12 >= 10 ? 1 + (uint32_t)(i * 977) % MAXLEN :
							    8 + (uint32_t)i % (SMALL - 8);
		struct rb_sge s = sge(&sb, (size_t)i * MAXLEN, len);

		if (i % 12 == 11) {
			rc |= T->post_write(pp.a.c, &st[i].cqe, &s, 1,
					    (uint64_t)(uintptr_t)wb.p + woff, wb.mr->rkey);
			woff += len;
		} else {
			rc |= T->post_send(pp.a.c, &st[i].cqe, &s, 1);
			nrecv++;
		}
	}
	is_int(rc, 0, "mixed: post %d small and large SENDs and WRITEs", N);
	ok(wait_done(&pp, rt, nrecv, WAIT_MS) && wait_done(&pp, st, N, WAIT_MS),
	   "mixed: all complete");
	woff = 0;
	for (int i = 0, r = 0; i < N; i++) {
		uint32_t len = i % 12 >= 10 ? 1 + (uint32_t)(i * 977) % MAXLEN :
							    8 + (uint32_t)i % (SMALL - 8);

		if (st[i].wc.status)
			status_ok = false;
		if (i % 12 == 11) {
			if (memcmp(wb.p + woff, sb.p + (size_t)i * MAXLEN, len))
				data_ok = false;
			woff += len;
			continue;
		}
		if (rt[r].wc.status)
			status_ok = false;
		if (rt[r].wc.byte_len != len || memcmp(rb.p + (size_t)r * MAXLEN, sb.p + (size_t)i * MAXLEN, len))
			data_ok = false;
		r++;
	}
	ok(status_ok, "mixed: all succeeded");
	ok(data_ok, "mixed: every message and every written byte arrived intact");
	pair_close(&pp, NULL, 0);
	buf_free(&sb);
	buf_free(&rb);
	buf_free(&wb);
}

static void test_rdma_ops(struct rb_listener *l)
{
	struct pair pp;
	struct buf src = { 0 }, dst = { 0 }, w = { 0 }, r = { 0 }, mb = { 0 }, ab = { 0 };
	struct twr t[4];
	struct rb_sge s[2], m;
	int rc = 0;

	if (pair_open(l, &pp)) {
		ok(0, "connect for one-sided ops");
		pair_close(&pp, NULL, 0);
		return;
	}
	rc |= buf_reg(pp.a.d, &src, BIG, 0);
	rc |= buf_reg(pp.a.d, &dst, BIG, 0);
	rc |= buf_reg(pp.a.d, &mb, 64, 0);
	rc |= buf_reg(pp.p.d, &w, BIG, RB_ACCESS_REMOTE_WRITE);
	rc |= buf_reg(pp.p.d, &r, BIG, RB_ACCESS_REMOTE_READ);
	rc |= buf_reg(pp.p.d, &ab, 64, 0);
	is_int(rc, 0, "register %u MiB regions", BIG >> 20);
	ok(w.mr->rkey != 0 && r.mr->rkey != 0, "remote regions have rkeys");
	fill(src.p, BIG, 1);
	fill(r.p, BIG, 2);
	twr_init(t, 4);
	m = sge(&ab, 0, 64);
	rc = T->post_recv(pp.p.c, &t[3].cqe, &m, 1);
	s[0] = sge(&src, 0, BIG / 2);
	s[1] = sge(&src, BIG / 2, BIG / 2);
	rc |= T->post_write(pp.a.c, &t[0].cqe, s, 2, (uintptr_t)w.p, w.mr->rkey);
	m = sge(&mb, 0, 8);
	rc |= T->post_send(pp.a.c, &t[1].cqe, &m, 1);
	s[0] = sge(&dst, 0, BIG);
	rc |= T->post_read(pp.a.c, &t[2].cqe, s, 1, (uintptr_t)r.p, r.mr->rkey);
	is_int(rc, 0, "post recv, write, send, read");
	/* RC ordering: when the SEND after the WRITE arrived, the data is there. */
	ok(wait_done(&pp, &t[3], 1, WAIT_MS), "send after write arrives");
	ok(memcmp(w.p, src.p, BIG) == 0, "WRITE data in place when the following SEND lands");
	ok(wait_done(&pp, t, 4, WAIT_MS), "all complete");
	is_int(t[0].wc.status, RB_WC_SUCCESS, "write status");
	is_int(t[0].wc.opcode, RB_WC_WRITE, "write opcode");
	is_int(t[2].wc.status, RB_WC_SUCCESS, "read status");
	is_int(t[2].wc.opcode, RB_WC_READ, "read opcode");
	ok(memcmp(dst.p, r.p, BIG) == 0, "READ brought the remote region's bytes");
	ok(t[0].order < t[1].order && t[1].order < t[2].order,
	   "send queue completions in posting order");

	/* Sub-range write at an offset. */
	twr_init(t, 1);
	memset(src.p, 0xab, 1000);
	s[0] = sge(&src, 0, 1000);
	rc = T->post_write(pp.a.c, &t[0].cqe, s, 1, (uintptr_t)w.p + 12345, w.mr->rkey);
	ok(!rc && wait_done(&pp, t, 1, WAIT_MS) && t[0].wc.status == RB_WC_SUCCESS,
	   "write at an offset");
	ok(w.p[12344] != 0xab && w.p[12345] == 0xab && w.p[13344] == 0xab,
	   "offset write landed where asked");

	pair_close(&pp, NULL, 0);
	buf_free(&src);
	buf_free(&dst);
	buf_free(&w);
	buf_free(&r);
	buf_free(&mb);
	buf_free(&ab);
}

enum bad_kind {
	BAD_KEY,
	BAD_KEY_BIG,
	BAD_SEND_BIG,
	BAD_BOUNDS,
	BAD_LOCAL_RKEY,
	BAD_LOCAL_LKEY,
	BAD_NOACCESS,
	BAD_OVERFLOW,
};

/* One refused one-sided op: requester gets REM_ACCESS_ERR, rest flushes. */
static void test_refused(struct rb_listener *l, enum bad_kind k, const char *what)
{
	struct pair pp;
	struct buf lb = { 0 }, w = { 0 }, loc = { 0 }, ar = { 0 }, pr = { 0 };
	uint32_t len = k == BAD_KEY_BIG || k == BAD_SEND_BIG ? BIG : 100;
	struct twr t[5];
	struct rb_sge s, q;
	uint64_t raddr;
	uint32_t rkey;
	bool is_read = k == BAD_LOCAL_RKEY || k == BAD_LOCAL_LKEY || k == BAD_NOACCESS;
	int rc = 0;

	if (pair_open(l, &pp)) {
		ok(0, "connect for %s", what);
		pair_close(&pp, NULL, 0);
		return;
	}
	rc |= buf_reg(pp.a.d, &lb, BIG, 0);
	rc |= buf_reg(pp.a.d, &ar, 256, 0);
	rc |= buf_reg(pp.p.d, &pr, 256, 0);
	rc |= buf_reg(pp.p.d, &w, 4096, RB_ACCESS_REMOTE_WRITE);
	rc |= buf_reg(pp.p.d, &loc, 4096, RB_ACCESS_LOCAL);
	raddr = (uintptr_t)w.p;
	rkey = w.mr->rkey;
	switch (k) {
	case BAD_KEY:
	case BAD_KEY_BIG: rkey = w.mr->rkey + 1; break;
	case BAD_SEND_BIG: break;
	case BAD_BOUNDS: raddr += 4096 - 10; break;
	case BAD_LOCAL_RKEY: raddr = (uintptr_t)loc.p; rkey = loc.mr->rkey; break;
	case BAD_LOCAL_LKEY: raddr = (uintptr_t)loc.p; rkey = loc.mr->lkey; break;
	case BAD_NOACCESS: break; /* READ from a write-only region */
	case BAD_OVERFLOW: raddr = UINT64_MAX - 10; break;
	}
	ok(!rc && loc.mr->rkey == 0, "%s: setup (local region has rkey 0)", what);
	fill(lb.p, BIG, 3);
	twr_init(t, 5);
	q = sge(&ar, 0, 128);
	rc |= T->post_recv(pp.a.c, &t[1].cqe, &q, 1);
	rc |= T->post_recv(pp.a.c, &t[2].cqe, &q, 1);
	q = sge(&pr, 0, 128);
	rc |= T->post_recv(pp.p.c, &t[3].cqe, &q, 1);
	rc |= T->post_recv(pp.p.c, &t[4].cqe, &q, 1);
	s = sge(&lb, 0, len);
	if (is_read)
		rc |= T->post_read(pp.a.c, &t[0].cqe, &s, 1, raddr, rkey);
	else if (k == BAD_SEND_BIG)
		rc |= T->post_send(pp.a.c, &t[0].cqe, &s, 1);
	else
		rc |= T->post_write(pp.a.c, &t[0].cqe, &s, 1, raddr, rkey);
	is_int(rc, 0, "%s: posts accepted", what);
	ok(wait_done(&pp, t, 5, WAIT_MS), "%s: everything completes", what);
	if (k == BAD_SEND_BIG) {
		ok(t[0].wc.status != RB_WC_SUCCESS && t[0].wc.status != RB_WC_FLUSH_ERR,
		   "%s: sender gets a remote error (%d)", what, t[0].wc.status);
		is_int(t[3].wc.status, RB_WC_LOC_LEN_ERR, "%s: receiver gets LOC_LEN_ERR", what);
	} else {
		is_int(t[0].wc.status, RB_WC_REM_ACCESS_ERR, "%s: requester gets REM_ACCESS_ERR",
		       what);
		is_int(t[3].wc.status, RB_WC_FLUSH_ERR, "%s: responder's receive flushes", what);
	}
	ok(t[1].wc.status == RB_WC_FLUSH_ERR && t[2].wc.status == RB_WC_FLUSH_ERR,
	   "%s: requester's receives flush", what);
	is_int(t[4].wc.status, RB_WC_FLUSH_ERR, "%s: responder's other receive flushes", what);
	ok(t[0].order < t[1].order, "%s: error completes before the flushes", what);
	if (!is_read) {
		bool untouched = true;

		for (size_t i = 0; i < w.len; i++)
			untouched &= w.p[i] == 0;
		ok(untouched, "%s: target region untouched", what);
	}
	/* Posting to a dead connection: accepted, flushed. */
	twr_init(t, 1);
	rc = T->post_send(pp.a.c, &t[0].cqe, &s, 1);
	ok(rc == 0 && wait_done(&pp, t, 1, WAIT_MS) && t[0].wc.status == RB_WC_FLUSH_ERR,
	   "%s: post after error flushes", what);
	pair_close(&pp, NULL, 0);
	buf_free(&lb);
	buf_free(&w);
	buf_free(&loc);
	buf_free(&ar);
	buf_free(&pr);
}

static void test_len_err(struct rb_listener *l, bool no_recv)
{
	const char *what = no_recv ? "send without receive" : "send larger than receive";
	struct pair pp;
	struct buf sb = { 0 }, rb = { 0 };
	struct twr t[3];
	struct rb_sge s;
	int rc = 0, n = no_recv ? 2 : 3;

	if (pair_open(l, &pp)) {
		ok(0, "connect for %s", what);
		pair_close(&pp, NULL, 0);
		return;
	}
	rc |= buf_reg(pp.a.d, &sb, 4096, 0);
	rc |= buf_reg(pp.p.d, &rb, 4096, 0);
	twr_init(t, 3);
	s = sge(&rb, 0, 64);
	rc |= T->post_recv(pp.a.c, &t[1].cqe, &s, 1);
	if (!no_recv)
		rc |= T->post_recv(pp.p.c, &t[2].cqe, &s, 1);
	s = sge(&sb, 0, 65);
	rc |= T->post_send(pp.a.c, &t[0].cqe, &s, 1);
	is_int(rc, 0, "%s: posts accepted", what);
	ok(wait_done(&pp, t, n, WAIT_MS), "%s: completions arrive", what);
	if (no_recv) {
		is_int(t[0].wc.status, RB_WC_RNR_RETRY_EXC_ERR, "%s: sender gets RNR error", what);
	} else {
		is_int(t[2].wc.status, RB_WC_LOC_LEN_ERR, "%s: receiver gets LOC_LEN_ERR", what);
		is_int(t[2].wc.opcode, RB_WC_RECV, "%s: on the receive", what);
		ok(t[0].wc.status != RB_WC_SUCCESS, "%s: send fails too (status %d)", what,
		   t[0].wc.status);
	}
	is_int(t[1].wc.status, RB_WC_FLUSH_ERR, "%s: sender's receive flushes", what);
	pair_close(&pp, NULL, 0);
	buf_free(&sb);
	buf_free(&rb);
}

static void test_disconnect(struct rb_listener *l)
{
	struct pair pp;
	struct buf ab = { 0 }, pb = { 0 }, rr = { 0 };
	struct twr t[9];
	struct rb_sge s;
	int rc = 0;
	bool sq_ok = true;

	if (pair_open(l, &pp)) {
		ok(0, "connect for disconnect");
		pair_close(&pp, NULL, 0);
		return;
	}
	rc |= buf_reg(pp.a.d, &ab, 4096, 0);
	rc |= buf_reg(pp.p.d, &pb, 4096, 0);
	rc |= buf_reg(pp.p.d, &rr, 1 << 20, RB_ACCESS_REMOTE_READ | RB_ACCESS_REMOTE_WRITE);
	twr_init(t, 9);
	for (int i = 0; i < 3; i++) {
		s = sge(&ab, (size_t)i * 128, 128);
		rc |= T->post_recv(pp.a.c, &t[i].cqe, &s, 1);
		s = sge(&pb, (size_t)i * 128, 128);
		rc |= T->post_recv(pp.p.c, &t[3 + i].cqe, &s, 1);
	}
	is_int(rc, 0, "post receives on both sides");
	wait_done(&pp, NULL, 0, 50);
	ok(!fd_readable(T->cq_fd(pp.a.cq), 0), "idle before disconnect");
	/* Send queue work in flight when the connection goes: write, read, write. */
	s = sge(&ab, 1024, 2048);
	rc |= T->post_write(pp.a.c, &t[6].cqe, &s, 1, (uintptr_t)rr.p, rr.mr->rkey);
	rc |= T->post_read(pp.a.c, &t[7].cqe, &s, 1, (uintptr_t)rr.p + 4096, rr.mr->rkey);
	rc |= T->post_write(pp.a.c, &t[8].cqe, &s, 1, (uintptr_t)rr.p + 8192, rr.mr->rkey);
	is_int(rc, 0, "post write, read, write");
	T->cq_arm(pp.a.cq);
	T->disconnect(pp.a.c);
	ok(fd_readable(T->cq_fd(pp.a.cq), 2000), "flush makes cq_fd readable without traffic");
	ok(wait_done(&pp, t, 9, WAIT_MS), "all receives and send queue work complete");
	for (int i = 6; i < 9; i++)
		sq_ok &= t[i].wc.status == RB_WC_FLUSH_ERR ||
			 (!is_tcp && t[i].wc.status == RB_WC_SUCCESS);
	ok(sq_ok, "send queue work flushes");
	ok(t[6].order < t[7].order && t[7].order < t[8].order,
	   "send queue completions in posting order");
	ok(t[0].wc.status == RB_WC_FLUSH_ERR && t[1].wc.status == RB_WC_FLUSH_ERR &&
	   t[2].wc.status == RB_WC_FLUSH_ERR, "disconnecting side's receives flush");
	ok(t[3].wc.status == RB_WC_FLUSH_ERR && t[4].wc.status == RB_WC_FLUSH_ERR &&
	   t[5].wc.status == RB_WC_FLUSH_ERR, "peer's receives flush");
	ok(t[0].order < t[1].order && t[1].order < t[2].order, "flushes in posting order");
	ok(t[0].wc.opcode == RB_WC_RECV, "flushed wc keeps the receive opcode");
	wait_done(&pp, NULL, 0, 50);
	ok(!fd_readable(T->cq_fd(pp.a.cq), 0) && !fd_readable(T->cq_fd(pp.p.cq), 0),
	   "cq fds quiet after the flush is drained");
	pair_close(&pp, NULL, 0);
	buf_free(&ab);
	buf_free(&pb);
	buf_free(&rr);
}

/* ---- main ------------------------------------------------------------------- */

int main(int argc, char **argv)
{
	struct rb_listener *l = NULL;
	int ret = harness_init(argc, argv, "test-tcp-transport");

	if (ret || (ret = harness_listen(&l)))
		return ret;
	test_handshake(l);
	test_reject(l);
	test_send_recv(l);
	test_ordering(l);
	test_mixed_sizes(l);
	test_rdma_ops(l);
	test_refused(l, BAD_KEY, "write with wrong rkey");
	test_refused(l, BAD_KEY_BIG, "4 MiB write with wrong rkey");
	test_refused(l, BAD_SEND_BIG, "4 MiB send into a 128-byte receive");
	test_refused(l, BAD_BOUNDS, "write beyond region");
	test_refused(l, BAD_LOCAL_RKEY, "read of local-only region (rkey 0)");
	test_refused(l, BAD_LOCAL_LKEY, "read with the lkey as rkey");
	test_refused(l, BAD_NOACCESS, "read of write-only region");
	test_refused(l, BAD_OVERFLOW, "write at UINT64_MAX-10");
	test_len_err(l, false);
	if (is_tcp)
		test_len_err(l, true); /* rdma would retry RNR instead */
	test_disconnect(l);
	if (is_tcp)
		test_cq_poll_error();
	T->listener_close(l);
	return tap_done();
}
