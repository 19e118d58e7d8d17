/* SPDX-License-Identifier: MIT */
/*
 * "tcp" transport data path, send side: framing out (gathered sendmsg),
 * control frames and NAKs, teardown and posting.  The receive side is in
 * transport_tcp_rx.c; the frame format is described in transport_tcp.c.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "checked.h"
#include "log.h"
#include "log_limit.h"
#include "transport_tcp_priv.h"

#define TCP_IOV_MAX (IOV_MAX < 1024 ? IOV_MAX : 1024)
#define TCP_DEFAULT_WR 128

/* ---- send side -------------------------------------------------------- */

void tcp_set_events(struct tcp_conn *c)
{
	struct epoll_event ev;
	uint32_t want;

	if (c->state != ST_CONNECTED)
		return;
	want = (c->paused || c->rnr_wait ? 0 : EPOLLIN) | (c->want_out ? EPOLLOUT : 0);
	if (want == c->epev)
		return;
	ev.events = want;
	ev.data.ptr = c;
	if (epoll_ctl(c->cq->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0) {
		rb_err("tcp %s: epoll_ctl: %s", c->peer, strerror(errno));
		tcp_conn_fail(c);
		return;
	}
	c->epev = want;
}

static uint64_t wire_payload(const struct tcp_wr *w)
{
	return w->kind == W_READ ? 0 : w->len;
}

static void frame_sent(struct tcp_conn *c, struct tcp_wr *w)
{
	switch (w->kind) {
	case W_SEND:
	case W_WRITE:
		q_push(&c->unacked, w);
		break;
	case W_READ:
		q_push(&c->reads, w);
		break;
	case W_RESP:
		if (--c->nresp <= TCP_RESP_PAUSE / 2 && c->paused) {
			c->paused = false;
			c->rx_kick = true;
		}
		tcp_wr_put(c, w);
		break;
	default:
		tcp_wr_put(c, w);
		break;
	}
}

bool tcp_has_unstarted(const struct tcp_conn *c)
{
	return c->txq.n > 1 || (c->txq.n == 1 && c->tx_off == 0);
}

/* Add the not yet written part of a frame to iov[]; returns entries used. */
static int frame_iov(struct tcp_wr *w, size_t skip, struct iovec *iov)
{
	int cnt = 0;

	if (skip < TCP_HDR_SIZE) {
		iov[cnt].iov_base = (char *)&w->hdr + skip;
		iov[cnt++].iov_len = TCP_HDR_SIZE - skip;
		skip = 0;
	} else {
		skip -= TCP_HDR_SIZE;
	}
	if (!wire_payload(w))
		return cnt;
	for (int i = 0; i < w->nsge; i++) {
		if (skip >= w->iov[i].iov_len) {
			skip -= w->iov[i].iov_len;
			continue;
		}
		iov[cnt].iov_base = (char *)w->iov[i].iov_base + skip;
		iov[cnt++].iov_len = w->iov[i].iov_len - skip;
		skip = 0;
	}
	return cnt;
}

static void tx_advance(struct tcp_conn *c, size_t n)
{
	while (n && c->txq.head) {
		struct tcp_wr *w = c->txq.head;
		size_t rem = TCP_HDR_SIZE + wire_payload(w) - c->tx_off;

		if (n < rem) {
			c->tx_off += n;
			return;
		}
		n -= rem;
		c->tx_off = 0;
		q_pop(&c->txq);
		frame_sent(c, w);
	}
}

void tcp_tx_progress(struct tcp_conn *c)
{
	struct iovec iov[TCP_IOV_MAX];
	struct msghdr msg = { .msg_iov = iov };
	ssize_t n;

	while (c->txq.head && c->state == ST_CONNECTED) {
		size_t skip = c->tx_off;
		int cnt = 0;

		for (struct tcp_wr *w = c->txq.head; w; w = w->next) {
			if (cnt + 1 + w->nsge > TCP_IOV_MAX)
				break;
			if (skip == 0 && w->hdr.type >= F_SEND) {
				/* Not started: carry the freshest ack. */
				w->hdr.ack = htole32(c->rx_count);
				c->ack_sent = c->rx_count;
				c->ack_urgent = false;
			}
			cnt += frame_iov(w, skip, iov + cnt);
			skip = 0;
		}
		msg.msg_iovlen = (size_t)cnt;
		n = sendmsg(c->fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				c->want_out = true;
				break;
			}
			static struct rb_log_limit lim = RB_LOG_LIMIT_INIT("tcp: send errors",
									   RB_LOG_INFO);

			rb_log_limited(&lim, c->peer, RB_LOG_INFO, "tcp %s: send: %s", c->peer,
				       strerror(errno));
			tcp_conn_fail(c);
			return;
		}
		tx_advance(c, (size_t)n);
	}
	if (!c->txq.head)
		c->want_out = false;
	tcp_set_events(c);
}

void tcp_tx_queue(struct tcp_conn *c, struct tcp_wr *w)
{
	q_push(&c->txq, w);
}

/* F_ACK or F_ACK_REQ (payload-free control frames). */
void tcp_queue_ctrl(struct tcp_conn *c, uint8_t type)
{
	struct tcp_wr *w = tcp_wr_get(c);

	if (!w) {
		rb_err("tcp %s: out of memory for a control frame", c->peer);
		tcp_conn_fail(c);
		return;
	}
	w->kind = W_CTRL;
	w->hdr.type = type;
	q_push(&c->txq, w);
}

/* Best effort: the peer learns which WR was refused.  Only at a frame
 * boundary; frames still queued are flushed, never sent. */
void tcp_send_nak(struct tcp_conn *c, uint64_t tag, enum rb_wc_status st)
{
	struct tcp_hdr h = {
		.type = F_NAK,
		.status = (uint8_t)st,
		.ack = htole32(c->rx_count),
		.tag = htole64(tag),
	};

	if (c->tx_off) {
		rb_dbg("tcp %s: NAK not sent, frame half written", c->peer);
		return;
	}
	if (send(c->fd, &h, sizeof(h), MSG_NOSIGNAL | MSG_DONTWAIT) != (ssize_t)sizeof(h))
		rb_dbg("tcp %s: NAK not sent", c->peer);
}

/* ---- teardown ----------------------------------------------------------- */

static void flush_q(struct tcp_conn *c, struct tcp_q *q)
{
	struct tcp_wr *w;

	while ((w = q_pop(q))) {
		if (w->kind == W_RESP || w->kind == W_CTRL)
			tcp_wr_put(c, w);
		else
			tcp_wr_complete(c, w, RB_WC_FLUSH_ERR);
	}
}

/* Connection is dead: every outstanding WR completes with FLUSH_ERR, send
 * queue in posting order (the unacked and read lists merged by tag). */
void tcp_conn_fail(struct tcp_conn *c)
{
	struct tcp_wr *w;

	if (c->state != ST_CONNECTED)
		return;
	c->state = ST_DEAD;
	shutdown(c->fd, SHUT_RDWR);
	if (epoll_ctl(c->cq->epfd, EPOLL_CTL_DEL, c->fd, NULL) < 0)
		rb_err("tcp %s: epoll_ctl del: %s", c->peer, strerror(errno));
	c->in_epoll = false;
	c->epev = 0;
	if (c->rx.in_data && c->rx.wr)
		tcp_wr_complete(c, c->rx.wr, RB_WC_FLUSH_ERR);
	c->rx.in_data = false;
	c->rx.wr = NULL;
	flush_q(c, &c->recvq);
	while (c->unacked.head || c->reads.head) {
		if (!c->reads.head ||
		    (c->unacked.head && c->unacked.head->tag < c->reads.head->tag))
			w = q_pop(&c->unacked);
		else
			w = q_pop(&c->reads);
		tcp_wr_complete(c, w, RB_WC_FLUSH_ERR);
	}
	flush_q(c, &c->txq);
	c->tx_off = 0;
	c->nresp = 0;
	c->want_out = false;
}

void tcp_disconnect(struct rb_conn *rc)
{
	struct tcp_conn *c = to_conn(rc);

	if (c->state == ST_CONNECTED) {
		rb_dbg("tcp %s: disconnect", c->peer);
		tcp_conn_fail(c);
	}
}

int tcp_conn_attach(struct tcp_conn *c, struct tcp_cq *cq, const struct rb_conn_caps *caps)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
	uint32_t sge;
	int ret;

	c->max_send_wr = caps && caps->max_send_wr ? caps->max_send_wr : TCP_DEFAULT_WR;
	c->max_recv_wr = caps && caps->max_recv_wr ? caps->max_recv_wr : TCP_DEFAULT_WR;
	sge = caps && caps->max_sge ? caps->max_sge : RB_MAX_SGE;
	if (sge > RB_MAX_SGE)
		return -EINVAL;
	c->max_sge = sge;
	if (c->rq_used > c->max_recv_wr)
		return -EINVAL; /* more early receives than the caps allow */
	ret = tcp_pool_grow(c, c->max_send_wr + c->max_recv_wr + TCP_CHUNK);
	if (ret)
		return ret;
	tcp_sock_opts(c->fd, &c->opts);
	c->rx.stage = TCP_RX_STAGE_MIN;
	if (epoll_ctl(cq->epfd, EPOLL_CTL_ADD, c->fd, &ev) < 0)
		return -errno;
	c->in_epoll = true;
	c->epev = EPOLLIN;
	c->cq = cq;
	cq->nconns++;
	return 0;
}

void tcp_conn_detach(struct tcp_conn *c)
{
	struct tcp_cq *cq = c->cq;
	struct tcp_conn **pp;
	struct tcp_wr *w, *prev = NULL, *next;

	if (!cq)
		return;
	if (c->in_epoll && epoll_ctl(cq->epfd, EPOLL_CTL_DEL, c->fd, NULL) < 0)
		rb_err("tcp %s: epoll_ctl del: %s", c->peer, strerror(errno));
	for (pp = &cq->dirty; *pp; pp = &(*pp)->dirty_next) {
		if (*pp == c) {
			*pp = c->dirty_next;
			break;
		}
	}
	for (pp = &cq->ackq; c->ack_held && *pp; pp = &(*pp)->ack_next) {
		if (*pp == c) {
			*pp = c->ack_next;
			c->ack_held = false;
			break;
		}
	}
	for (pp = &cq->lazyq; c->lazy_listed && *pp; pp = &(*pp)->lazy_next) {
		if (*pp == c) {
			*pp = c->lazy_next;
			c->lazy_listed = false;
			break;
		}
	}
	if (c->ndone)
		rb_warn("tcp %s: destroyed with %u completions not polled", c->peer, c->ndone);
	for (w = cq->done.head; c->ndone && w; w = next) {
		next = w->next;
		if (w->conn != c) {
			prev = w;
			continue;
		}
		rb_fifo_unlink(&cq->done, prev, w);
		c->ndone--;
	}
	cq->nconns--;
	c->cq = NULL;
}

/* ---- posting ------------------------------------------------------------ */

static int post(struct tcp_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge,
		uint8_t kind, uint64_t raddr, uint32_t rkey)
{
	static const uint8_t ftype[] = { [W_SEND] = F_SEND, [W_WRITE] = F_WRITE,
					 [W_READ] = F_READ_REQ };
	struct tcp_wr *w;
	uint64_t total;

	/* A passive-side request may take receives before accept, so every
	 * credit is covered before the peer can send (transport.h); limits
	 * are checked against the caps at accept. */
	bool early = !c->cq && kind == W_RECV && c->state == ST_REQUEST;

	if (!c->cq && !early)
		return -ENOTCONN;
	if (!cqe || nsge < 0 || (uint32_t)nsge > (early ? RB_MAX_SGE : c->max_sge) ||
	    (nsge && !sg))
		return -EINVAL;
	if (!early &&
	    (kind == W_RECV ? c->rq_used >= c->max_recv_wr : c->sq_used >= c->max_send_wr))
		return -ENOMEM;
	if (!tcp_sges_ok(c->dom, sg, nsge, &total)) {
		rb_dbg("tcp %s: post with sge outside registered memory", c->peer);
		return -EINVAL;
	}
	if (total > TCP_MAX_MSG)
		return -EINVAL;
	w = tcp_wr_get(c);
	if (!w)
		return -ENOMEM;
	w->kind = kind;
	w->cqe = cqe;
	w->len = total;
	for (int i = 0; i < nsge; i++) {
		if (!sg[i].length)
			continue;
		w->iov[w->nsge].iov_base = sg[i].addr;
		w->iov[w->nsge++].iov_len = sg[i].length;
	}
	if (kind == W_RECV)
		c->rq_used++;
	else
		c->sq_used++;
	if (early) {
		q_push(&c->recvq, w);
		return 0;
	}
	if (c->state != ST_CONNECTED) {
		/* Like a QP in error state: accepted, then flushed. */
		tcp_wr_complete(c, w, RB_WC_FLUSH_ERR);
		return 0;
	}
	if (kind == W_RECV) {
		q_push(&c->recvq, w);
		if (c->rnr_wait) {
			c->rnr_wait = false;
			c->rx_kick = true;
			tcp_conn_kick(c);
		}
		return 0;
	}
	w->tag = c->next_tag++;
	w->hdr.type = ftype[kind];
	w->hdr.length = htole32((uint32_t)total);
	w->hdr.tag = htole64(w->tag);
	w->hdr.addr = htole64(raddr);
	w->hdr.rkey = htole32(rkey);
	/* Lazy while the owner sleeps quietly and the send queue has room to
	 * spare: a peer's reply carries the ack anyway. */
	if (kind != W_READ && c->cq->quiet && c->sq_used <= c->max_send_wr / 2) {
		w->hdr.flags = htole16(TCP_F_LAZY);
		if (!c->lazy_listed) {
			c->lazy_listed = true;
			c->lazy_next = c->cq->lazyq;
			c->cq->lazyq = c;
		}
	}
	q_push(&c->txq, w);
	if (c->want_out)
		return 0;
	if (c->cq->batch || c->cq->corked)
		tcp_conn_kick(c); /* written by the next cq_poll or the uncork */
	else
		tcp_tx_progress(c);
	if (c->rx_kick && c->state == ST_CONNECTED)
		tcp_conn_kick(c);
	return 0;
}

int tcp_post_recv(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge)
{
	return post(to_conn(c), cqe, sg, nsge, W_RECV, 0, 0);
}

int tcp_post_send(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge)
{
	return post(to_conn(c), cqe, sg, nsge, W_SEND, 0, 0);
}

int tcp_post_read(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge,
		  uint64_t raddr, uint32_t rkey)
{
	return post(to_conn(c), cqe, sg, nsge, W_READ, raddr, rkey);
}

int tcp_post_write(struct rb_conn *c, struct rb_cqe *cqe, const struct rb_sge *sg, int nsge,
		   uint64_t raddr, uint32_t rkey)
{
	return post(to_conn(c), cqe, sg, nsge, W_WRITE, raddr, rkey);
}

