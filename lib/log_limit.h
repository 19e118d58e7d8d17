/* SPDX-License-Identifier: MIT */
/*
 * Rate-limited log lines for events a peer can cause at will (rejected
 * capsules, refused connections, dropped handshakes): a flood of them must
 * not grow the journal without bound or drown other peers' messages.
 *
 * One struct rb_log_limit per kind of event, usually static at the call
 * site.  Within each window (RB_LOG_LIMIT_WINDOW_MS) a kind prints at most
 * RB_LOG_LIMIT_PER_PEER lines per peer and RB_LOG_LIMIT_PER_KIND lines in
 * all; the rest are counted, and one line says so once the window is over:
 * "KIND: N similar messages suppressed in the last 10 s (M from PEER)".
 * That summary comes with the kind's next line, or from
 * rb_log_limits_flush(), which daemons call from a timer so a flood that
 * stops is still summed up.  Error paths only: it takes a mutex.
 */
#ifndef RB_LOG_LIMIT_H
#define RB_LOG_LIMIT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"

#define RB_LOG_LIMIT_WINDOW_MS 10000u
#define RB_LOG_LIMIT_PER_PEER 5u
#define RB_LOG_LIMIT_PER_KIND 50u
/* Peers counted apart in one window; more share the kind's limit only. */
#define RB_LOG_LIMIT_PEERS 16
#define RB_LOG_LIMIT_PEER_NAME 64

struct rb_log_limit_peer {
	uint64_t hash; /* 0: free slot */
	uint32_t lines;
	uint64_t suppressed;
	char name[RB_LOG_LIMIT_PEER_NAME];
};

struct rb_log_limit {
	const char *kind;	 /* names the event in the summary */
	enum rb_log_level level; /* of the summary */
	/* Lines a window allows (0: RB_LOG_LIMIT_PER_PEER / _PER_KIND); more
	 * for lines every connection logs, which honest peers cause by the
	 * dozen but a connect loop by the thousand. */
	uint32_t per_peer, per_kind;
	pthread_mutex_t lock;
	atomic_bool registered; /* on the list rb_log_limits_flush() walks */
	struct rb_log_limit *next;
	uint64_t window_ns;  /* start of the current window; 0: none yet */
	uint32_t lines;	     /* printed in this window */
	uint64_t suppressed; /* dropped in this window */
	struct rb_log_limit_peer peers[RB_LOG_LIMIT_PEERS];
};

#define RB_LOG_LIMIT_INIT(kind_, level_)                                                           \
	{                                                                                          \
		.kind = (kind_), .level = (level_), .lock = PTHREAD_MUTEX_INITIALIZER              \
	}
#define RB_LOG_LIMIT_INIT_N(kind_, level_, per_peer_, per_kind_)                                   \
	{                                                                                          \
		.kind = (kind_), .level = (level_), .per_peer = (per_peer_),                       \
		.per_kind = (per_kind_), .lock = PTHREAD_MUTEX_INITIALIZER                         \
	}

/*
 * Log one line of kind l caused by peer (any string naming it: address,
 * "host X"; NULL or "" when unknown), unless the kind or the peer used up
 * its lines for this window.
 */
void rb_log_limited(struct rb_log_limit *l, const char *peer, enum rb_log_level level,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Print the summaries of every kind whose window ended with lines
 * suppressed (a daemon's periodic timer). */
void rb_log_limits_flush(void);

/*
 * The decision itself, for tests: true if a line from peer may be printed
 * at now_ns.  When a window ended with lines suppressed, its summary is
 * written to summary (else summary[0] = '\0').
 */
bool rb_log_limit_admit(struct rb_log_limit *l, const char *peer, uint64_t now_ns, char *summary,
			size_t cap);

#endif
