/* SPDX-License-Identifier: MIT */
/*
 * Helpers for transport tests: engine-style CQ draining, a connected pair
 * made through a real listener (connect runs in a thread because it
 * blocks), registered buffers.  No TAP output here: tap.h counters are
 * per translation unit.
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "checked.h"
#include "log.h"
#include "transport-harness.h"
const struct rb_transport_ops *T;
struct rb_transport_opts opts;
struct rb_endpoint lep;
bool is_tcp;
int g_order;

static void twr_done(struct rb_cq *cq, struct rb_wc *wc)
{
	struct twr *t = rb_container_of(wc->cqe, struct twr, cqe);

	t->done++;
	t->wc = *wc;
	t->order = ++g_order;
}

void twr_init(struct twr *t, int n)
{
	memset(t, 0, sizeof(*t) * (size_t)n);
	for (int i = 0; i < n; i++)
		t[i].cqe.done = twr_done;
}

/* Engine-style loop on one cq: arm, then poll until empty. */
int drain(struct rb_cq *cq)
{
	struct rb_wc wc[16];
	int n, total = 0;

	if (!cq)
		return 0;
	T->cq_arm(cq);
	while ((n = T->cq_poll(cq, wc, 16)) > 0) {
		for (int i = 0; i < n; i++)
			wc[i].cqe->done(cq, &wc[i]);
		total += n;
	}
	return total;
}

static bool all_done(struct twr *t, int n)
{
	for (int i = 0; i < n; i++)
		if (!t[i].done)
			return false;
	return true;
}

/* Drive both sides until pred(arg); false on timeout (true if !pred). */
bool wait_until(struct pair *pp, bool (*pred)(void *), void *arg, int ms)
{
	uint64_t end = rb_clock_ms() + (uint64_t)ms;

	for (;;) {
		struct pollfd pf[2];
		int k = 0;

		drain(pp->a.cq);
		drain(pp->p.cq);
		if (pred && pred(arg))
			return true;
		if (rb_clock_ms() >= end)
			return !pred;
		if (pp->a.cq)
			pf[k++] = (struct pollfd){ .fd = T->cq_fd(pp->a.cq), .events = POLLIN };
		if (pp->p.cq)
			pf[k++] = (struct pollfd){ .fd = T->cq_fd(pp->p.cq), .events = POLLIN };
		poll(pf, (nfds_t)k, 20);
	}
}

struct twr_set {
	struct twr *t;
	int n;
};

static bool set_done(void *arg)
{
	struct twr_set *s = arg;

	return all_done(s->t, s->n);
}

/* Drive both sides until every WR in t[0..n) completed; false on timeout. */
bool wait_done(struct pair *pp, struct twr *t, int n, int ms)
{
	struct twr_set s = { t, n };

	return wait_until(pp, t ? set_done : NULL, &s, ms);
}

int free_port(const char *host, uint16_t *port)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	int fd, ret = -1;
	bool v6 = strchr(host, ':') != NULL;

	fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
	if (fd < 0)
		return -1;
	if (v6 ? inet_pton(AF_INET6, host, &s6.sin6_addr) != 1
	       : inet_pton(AF_INET, host, &s4.sin_addr) != 1)
		s4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((v6 ? bind(fd, (struct sockaddr *)&s6, sizeof(s6))
		: bind(fd, (struct sockaddr *)&s4, sizeof(s4))) == 0 &&
	    getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
		*port = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
				 : ((struct sockaddr_in *)&ss)->sin_port);
		ret = 0;
	}
	close(fd);
	return ret;
}

/* ---- connection setup ----------------------------------------------------- */

const struct rb_conn_caps caps = {
	.max_send_wr = 256,
	.max_recv_wr = 256,
	.max_sge = RB_MAX_SGE,
	.max_inline = 64,
	.max_rd_atomic = 16,
	.max_dest_rd_atomic = 16,
};

void *connect_thread(void *arg)
{
	struct conn_args *a = arg;

	a->ret = T->conn_create(&a->ep, &opts, &a->s.c);
	if (!a->ret) {
		a->s.d = T->conn_domain(a->s.c);
		a->ret = T->cq_create(a->s.d, 1024, &a->s.cq);
	}
	if (!a->ret) {
		a->rlen = sizeof(a->rpriv);
		a->ret = T->connect(a->s.c, a->s.cq, &caps, a->priv, a->plen, a->rpriv, &a->rlen);
	}
	__atomic_store_n(&a->finished, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Waits for the next request on l; NULL on timeout. */
struct rb_conn *get_request(struct rb_listener *l, const void **priv, size_t *plen,
			    volatile int *finished)
{
	uint64_t end = rb_clock_ms() + WAIT_MS;
	struct rb_conn *req;

	while (rb_clock_ms() < end) {
		struct pollfd pf = { .fd = T->listener_fd(l), .events = POLLIN };

		if (T->listener_get(l, &req, priv, plen) == 0)
			return req;
		if (finished && __atomic_load_n(finished, __ATOMIC_ACQUIRE))
			return NULL;
		poll(&pf, 1, 20);
	}
	return NULL;
}

/* Connect a pair; accept (reject_data == NULL) or reject.  Returns
 * connect()'s result; args keeps what came back. */
/* pcq: accept onto this CQ instead of a new one (pp->p.cq stays NULL). */
static int open_pair(struct rb_listener *l, struct pair *pp, struct conn_args *a, const void *priv,
		     size_t plen, const void *acc, size_t acclen, const void *rej, size_t rejlen,
		     void *got_priv, size_t *got_plen, struct rb_cq *pcq)
{
	pthread_t th;
	struct rb_conn *req;
	const void *rp = NULL;
	size_t rpl = 0;

	memset(pp, 0, sizeof(*pp));
	memset(a, 0, sizeof(*a));
	a->ep = lep;
	a->priv = priv;
	a->plen = plen;
	a->ret = -EINPROGRESS;
	if (pthread_create(&th, NULL, connect_thread, a))
		return -EAGAIN;
	req = get_request(l, &rp, &rpl, &a->finished);
	if (req) {
		if (got_priv && got_plen) {
			*got_plen = rpl < *got_plen ? rpl : *got_plen;
			memcpy(got_priv, rp, *got_plen);
		}
		if (rej) {
			T->reject(req, rej, rejlen);
		} else {
			pp->p.c = req;
			pp->p.d = T->conn_domain(req);
			if ((!pcq && T->cq_create(pp->p.d, 1024, &pp->p.cq)) ||
			    T->accept(req, pcq ? pcq : pp->p.cq, &caps, acc, acclen)) {
				T->reject(req, NULL, 0);
				pp->p.c = NULL;
			}
		}
	}
	pthread_join(th, NULL);
	pp->a = a->s;
	return a->ret;
}

int pair_open_ex(struct rb_listener *l, struct pair *pp, struct conn_args *a, const void *priv,
		 size_t plen, const void *acc, size_t acclen, const void *rej, size_t rejlen,
		 void *got_priv, size_t *got_plen)
{
	return open_pair(l, pp, a, priv, plen, acc, acclen, rej, rejlen, got_priv, got_plen, NULL);
}

int pair_open_on(struct rb_listener *l, struct pair *pp, struct rb_cq *cq)
{
	struct conn_args a;
	int ret = open_pair(l, pp, &a, "x", 1, NULL, 0, NULL, 0, NULL, NULL, cq);

	return ret ? ret : (pp->p.c ? 0 : -EIO);
}

int pair_open(struct rb_listener *l, struct pair *pp)
{
	struct conn_args a;
	int ret = pair_open_ex(l, pp, &a, "x", 1, NULL, 0, NULL, 0, NULL, NULL);

	return ret ? ret : (pp->p.c ? 0 : -EIO);
}

void side_close(struct side *s)
{
	if (s->c)
		T->conn_destroy(s->c);
	if (s->cq)
		T->cq_destroy(s->cq);
	memset(s, 0, sizeof(*s));
}

/* Disconnect both, let outstanding WRs (listed in t) flush, free. */
void pair_close(struct pair *pp, struct twr *t, int n)
{
	if (pp->a.c)
		T->disconnect(pp->a.c);
	if (pp->p.c)
		T->disconnect(pp->p.c);
	if (t)
		wait_done(pp, t, n, WAIT_MS);
	side_close(&pp->a);
	side_close(&pp->p);
}

int buf_reg(struct rb_domain *d, struct buf *b, size_t len, unsigned int access)
{
	b->len = len;
	b->p = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
	if (!b->p)
		return -ENOMEM;
	memset(b->p, 0, len);
	return T->reg_mr(d, b->p, len, access, &b->mr);
}

void buf_free(struct buf *b)
{
	if (b->mr)
		T->dereg_mr(b->mr);
	free(b->p);
	memset(b, 0, sizeof(*b));
}

struct rb_sge sge(const struct buf *b, size_t off, uint32_t len)
{
	return (struct rb_sge){ .addr = b->p + off, .length = len, .lkey = b->mr->lkey };
}

void fill(uint8_t *p, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = (uint8_t)(seed >> 16);
	}
}

bool fd_readable(int fd, int ms)
{
	struct pollfd pf = { .fd = fd, .events = POLLIN };

	return poll(&pf, 1, ms) == 1;
}

int harness_init(int argc, char **argv, const char *prog)
{
	const char *name = argc > 1 ? argv[1] : getenv("RB_TEST_TRANSPORT");
	const char *addr = getenv("RB_TEST_ADDR");

	if (!name || !*name)
		name = "tcp";
	if (!addr || !*addr)
		addr = "127.0.0.1";
	rb_log_init(prog, RB_LOG_WARN);
	T = rb_transport_find(name);
	if (!T) {
		printf("# SKIP transport \"%s\" is not built in (have: %s)\n", name,
		       rb_transport_names());
		return 77;
	}
	is_tcp = strcmp(name, "tcp") == 0;
	rb_transport_opts_init(&opts);
	opts.connect_timeout_ms = 3000;
	snprintf(lep.host, sizeof(lep.host), "%s", addr);
	return 0;
}

int harness_listen(struct rb_listener **l)
{
	int ret = -1;

	printf("# transport %s, address %s\n", T->name, lep.host);
	/* Another process may grab the port between probe and listen: retry. */
	for (int i = 0; i < 5 && (ret == -1 || ret == -EADDRINUSE); i++) {
		if (free_port(lep.host, &lep.port))
			continue;
		ret = T->listen(&lep, &opts, l);
	}
	if (ret) {
		printf("# SKIP cannot listen on %s with %s: %s\n", lep.host, T->name,
		       strerror(-ret));
		return 77;
	}
	return 0;
}
