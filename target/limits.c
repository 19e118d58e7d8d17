/* SPDX-License-Identifier: MIT */
/*
 * Connection limits (issue 31): queues, admin and I/O, in all and per peer
 * address, counted from the transport's connection request until the queue
 * is freed.  Without them only RLIMIT_NOFILE bounds connections, and one
 * peer could take every one the target has.  Control path only (connect and
 * teardown), so one mutex serves every reactor.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "log_limit.h"
#include "target.h"

#define ADDR_BUCKETS 256

struct addr_count {
	char addr[TGT_ADDR_MAX];
	uint32_t n;
	struct addr_count *next;
};

static pthread_mutex_t conns_lock = PTHREAD_MUTEX_INITIALIZER;
static struct addr_count *buckets[ADDR_BUCKETS];
static uint32_t conns_total;

void tgt_peer_addr(const char *peer, char *out, size_t len)
{
	const char *colon = strrchr(peer, ':');
	size_t n = colon ? (size_t)(colon - peer) : strlen(peer);

	/* "[v6]:port" and "v4:port": the port changes with every connection. */
	if (n >= len)
		n = len - 1;
	memcpy(out, peer, n);
	out[n] = '\0';
}

static struct addr_count **find_slot(const char *addr)
{
	uint32_t h = 2166136261u; /* FNV-1a */
	struct addr_count **pp;

	for (const char *p = addr; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	for (pp = &buckets[h % ADDR_BUCKETS]; *pp; pp = &(*pp)->next)
		if (strcmp((*pp)->addr, addr) == 0)
			break;
	return pp;
}

uint16_t tgt_conn_admit(const struct rb_target_conf *c, const char *ops_name, const char *peer)
{
	static struct rb_log_limit lim_total = RB_LOG_LIMIT_INIT("connection limit", RB_LOG_WARN);
	static struct rb_log_limit lim_addr =
		RB_LOG_LIMIT_INIT("per-address connection limit", RB_LOG_WARN);
	char addr[TGT_ADDR_MAX];
	struct addr_count **pp, *a;
	uint32_t have = 0;
	uint16_t reason = RB_REJ_NONE;

	tgt_peer_addr(peer, addr, sizeof(addr));
	pthread_mutex_lock(&conns_lock);
	pp = find_slot(addr);
	if (*pp)
		have = (*pp)->n;
	if (conns_total >= c->max_connections) {
		reason = RB_REJ_CONN_LIMIT;
	} else if (have >= c->max_conns_per_addr) {
		reason = RB_REJ_ADDR_CONN_LIMIT;
	} else if (!*pp) {
		a = calloc(1, sizeof(*a));
		if (!a) {
			reason = RB_REJ_NO_RESOURCES;
		} else {
			snprintf(a->addr, sizeof(a->addr), "%s", addr);
			*pp = a;
		}
	}
	if (reason == RB_REJ_NONE) {
		(*pp)->n++;
		conns_total++;
	}
	pthread_mutex_unlock(&conns_lock);
	if (reason == RB_REJ_CONN_LIMIT)
		rb_log_limited(&lim_total, addr, RB_LOG_WARN,
			       "%s peer %s: connection refused: the target has max-connections = "
			       "%u queues",
			       ops_name, peer, c->max_connections);
	else if (reason == RB_REJ_ADDR_CONN_LIMIT)
		rb_log_limited(&lim_addr, addr, RB_LOG_WARN,
			       "%s peer %s: connection refused: address %s has "
			       "max-connections-per-address = %u queues",
			       ops_name, peer, addr, c->max_conns_per_addr);
	return reason;
}

void tgt_conn_release(const char *peer)
{
	char addr[TGT_ADDR_MAX];
	struct addr_count **pp, *a;

	tgt_peer_addr(peer, addr, sizeof(addr));
	pthread_mutex_lock(&conns_lock);
	pp = find_slot(addr);
	a = *pp;
	if (a && a->n > 0) {
		conns_total--;
		if (--a->n == 0) {
			*pp = a->next;
			free(a);
		}
	}
	pthread_mutex_unlock(&conns_lock);
}
