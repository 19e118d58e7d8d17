/* SPDX-License-Identifier: MIT */
/* Rate-limited log lines per kind and per peer: see log_limit.h. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "log_limit.h"

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct rb_log_limit *registry;

static uint64_t peer_hash(const char *peer)
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */

	for (; *peer; peer++)
		h = (h ^ (unsigned char)*peer) * 0x100000001b3ull;
	return h ? h : 1;
}

/* The slot counting peer in this window, or NULL when all are taken. */
static struct rb_log_limit_peer *peer_slot(struct rb_log_limit *l, const char *peer)
{
	uint64_t h = peer_hash(peer);

	for (int i = 0; i < RB_LOG_LIMIT_PEERS; i++) {
		struct rb_log_limit_peer *p = &l->peers[i];

		if (p->hash == h)
			return p;
		if (!p->hash) {
			p->hash = h;
			snprintf(p->name, sizeof(p->name), "%s", peer);
			return p;
		}
	}
	return NULL;
}

/* Under l->lock: end the window, summing it up in summary if it dropped lines. */
static void window_end(struct rb_log_limit *l, char *summary, size_t cap)
{
	const struct rb_log_limit_peer *top = NULL;

	summary[0] = '\0';
	if (l->suppressed) {
		for (int i = 0; i < RB_LOG_LIMIT_PEERS; i++)
			if (l->peers[i].hash && l->peers[i].suppressed &&
			    (!top || l->peers[i].suppressed > top->suppressed))
				top = &l->peers[i];
		if (top)
			snprintf(
			    summary, cap,
			    "%s: %llu similar messages suppressed in the last %u s (%llu from %s)",
			    l->kind, (unsigned long long)l->suppressed,
			    RB_LOG_LIMIT_WINDOW_MS / 1000, (unsigned long long)top->suppressed,
			    top->name);
		else
			snprintf(summary, cap,
				 "%s: %llu similar messages suppressed in the last %u s", l->kind,
				 (unsigned long long)l->suppressed, RB_LOG_LIMIT_WINDOW_MS / 1000);
	}
	l->window_ns = 0;
	l->lines = 0;
	l->suppressed = 0;
	memset(l->peers, 0, sizeof(l->peers));
}

static void reg(struct rb_log_limit *l)
{
	pthread_mutex_lock(&registry_lock);
	if (!atomic_load_explicit(&l->registered, memory_order_relaxed)) {
		atomic_store_explicit(&l->registered, true, memory_order_release);
		l->next = registry;
		registry = l;
	}
	pthread_mutex_unlock(&registry_lock);
}

bool rb_log_limit_admit(struct rb_log_limit *l, const char *peer, uint64_t now_ns, char *summary,
			size_t cap)
{
	struct rb_log_limit_peer *p;
	bool ok;

	summary[0] = '\0';
	if (!atomic_load_explicit(&l->registered, memory_order_acquire))
		reg(l);
	pthread_mutex_lock(&l->lock);
	if (l->window_ns && now_ns - l->window_ns >= RB_LOG_LIMIT_WINDOW_MS * 1000000ull)
		window_end(l, summary, cap);
	if (!l->window_ns)
		l->window_ns = now_ns ? now_ns : 1;
	/* Unknown peers share one slot; past the table, only the kind's limit holds. */
	p = peer_slot(l, peer && *peer ? peer : "?");
	ok = l->lines < (l->per_kind ? l->per_kind : RB_LOG_LIMIT_PER_KIND) &&
	     (!p || p->lines < (l->per_peer ? l->per_peer : RB_LOG_LIMIT_PER_PEER));
	if (ok) {
		l->lines++;
		if (p)
			p->lines++;
	} else {
		l->suppressed++;
		if (p)
			p->suppressed++;
	}
	pthread_mutex_unlock(&l->lock);
	return ok;
}

void rb_log_limited(struct rb_log_limit *l, const char *peer, enum rb_log_level level,
		    const char *fmt, ...)
{
	char summary[256], line[900];
	va_list ap;
	bool ok;

	if ((int)level > (int)rb_log_get_level())
		return;
	ok = rb_log_limit_admit(l, peer, rb_clock_ns(), summary, sizeof(summary));
	if (summary[0])
		rb_log(l->level, "%s", summary);
	if (!ok)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	rb_log(level, "%s", line);
}

void rb_log_limits_flush(void)
{
	uint64_t now = rb_clock_ns();
	struct rb_log_limit *l;
	char summary[256];

	pthread_mutex_lock(&registry_lock);
	for (l = registry; l; l = l->next) {
		summary[0] = '\0';
		pthread_mutex_lock(&l->lock);
		if (l->window_ns && l->suppressed &&
		    now - l->window_ns >= RB_LOG_LIMIT_WINDOW_MS * 1000000ull)
			window_end(l, summary, sizeof(summary));
		pthread_mutex_unlock(&l->lock);
		if (summary[0])
			rb_log(l->level, "%s", summary);
	}
	pthread_mutex_unlock(&registry_lock);
}
