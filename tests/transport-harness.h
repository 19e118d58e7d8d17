/* SPDX-License-Identifier: MIT */
/* Helpers shared by transport tests (see transport-harness.c). */
#ifndef RB_TEST_TRANSPORT_HARNESS_H
#define RB_TEST_TRANSPORT_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "transport.h"

#define WAIT_MS 5000
#define BIG (4u << 20)

extern const struct rb_transport_ops *T; /* transport under test */
extern struct rb_transport_opts opts;
extern struct rb_endpoint lep; /* where the listener is */
extern bool is_tcp;
extern int g_order; /* completion counter, for ordering checks */
extern const struct rb_conn_caps caps;

/* A work request whose completion is recorded. */
struct twr {
	struct rb_cqe cqe;
	int done;
	int order;
	struct rb_wc wc;
};

struct side {
	struct rb_conn *c;
	struct rb_cq *cq;
	struct rb_domain *d;
};

struct pair {
	struct side a, p; /* active, passive */
};

struct conn_args {
	struct rb_endpoint ep;
	const void *priv;
	size_t plen;
	char rpriv[256];
	size_t rlen;
	int ret;
	volatile int finished;
	struct side s;
};

struct buf {
	uint8_t *p;
	size_t len;
	struct rb_mr *mr;
};

/* Transport from argv[1] or RB_TEST_TRANSPORT (default tcp), address from
 * RB_TEST_ADDR (default 127.0.0.1): sets T, is_tcp, opts, lep.host.  0, or
 * 77 (automake skip) with the reason printed when it is not built. */
int harness_init(int argc, char **argv, const char *prog);
/* Listen on a free port of lep.host (sets lep.port); 0 or 77. */
int harness_listen(struct rb_listener **l);
void twr_init(struct twr *t, int n);
/* Engine-style: cq_arm, then cq_poll until empty, calling each cqe->done. */
int drain(struct rb_cq *cq);
/* Drive both sides until pred(arg); false on timeout (true if !pred). */
bool wait_until(struct pair *pp, bool (*pred)(void *), void *arg, int ms);
bool wait_done(struct pair *pp, struct twr *t, int n, int ms);
/* A TCP port that was free on host a moment ago. */
int free_port(const char *host, uint16_t *port);
/* Next connection request on l (polling listener_fd); NULL on timeout or
 * once *finished is set. */
struct rb_conn *get_request(struct rb_listener *l, const void **priv, size_t *plen,
			    volatile int *finished);
/* Body of the connecting thread: conn_create, cq_create, connect to a->ep. */
void *connect_thread(void *arg);
/* Connect to lep and accept (rej == NULL) or reject; returns connect()'s
 * result, *a keeps what came back, got_priv the request's private data. */
int pair_open_ex(struct rb_listener *l, struct pair *pp, struct conn_args *a, const void *priv,
		 size_t plen, const void *acc, size_t acclen, const void *rej, size_t rejlen,
		 void *got_priv, size_t *got_plen);
int pair_open(struct rb_listener *l, struct pair *pp);
/* pair_open with the passive side accepted onto cq, which it shares with
 * another connection; pp->p.cq stays NULL (pair_close leaves cq alone). */
int pair_open_on(struct rb_listener *l, struct pair *pp, struct rb_cq *cq);
void side_close(struct side *s);
/* Disconnect both, wait for t[0..n) to complete, free everything. */
void pair_close(struct pair *pp, struct twr *t, int n);
int buf_reg(struct rb_domain *d, struct buf *b, size_t len, unsigned int access);
void buf_free(struct buf *b);
struct rb_sge sge(const struct buf *b, size_t off, uint32_t len);
void fill(uint8_t *p, size_t len, uint32_t seed);
bool fd_readable(int fd, int ms);

#endif
