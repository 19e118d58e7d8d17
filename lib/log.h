/* SPDX-License-Identifier: MIT */
/* Logging: one line per event, to stderr (journald picks it up). */
#ifndef RB_LOG_H
#define RB_LOG_H

#include <stdarg.h>

enum rb_log_level { RB_LOG_ERR = 3, RB_LOG_WARN = 4, RB_LOG_INFO = 6, RB_LOG_DEBUG = 7 };

/* Program name prefix and threshold; set once at startup. */
void rb_log_init(const char *progname, enum rb_log_level level);
void rb_log_set_level(enum rb_log_level level);
enum rb_log_level rb_log_get_level(void);
/* Parse "error", "warning", "info", "debug"; returns -EINVAL if unknown. */
int rb_log_parse_level(const char *s, enum rb_log_level *out);
const char *rb_log_level_name(enum rb_log_level level);

/*
 * A wire-supplied string (host id, export name) made safe for one log line:
 * at most maxlen bytes of s are read (s need not be terminated), anything
 * but printable ASCII and backslash becomes \xNN, and the result always
 * fits in cap bytes (cap >= 1), ending in "..." when cut.  Returns buf.
 */
const char *rb_log_escape(char *buf, size_t cap, const char *s, size_t maxlen);
/* Enough for a host id or export name escaped in full. */
#define RB_LOG_ESCAPE_MAX (4 * 256 + 4)

void rb_log(enum rb_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A broken invariant the process cannot go on from: log why, then abort()
 * (a core for the bug; systemd restarts the unit) rather than hang. */
void rb_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#define rb_err(...) rb_log(RB_LOG_ERR, __VA_ARGS__)
#define rb_warn(...) rb_log(RB_LOG_WARN, __VA_ARGS__)
#define rb_info(...) rb_log(RB_LOG_INFO, __VA_ARGS__)
#define rb_dbg(...)                                                                                \
	do {                                                                                       \
		if (rb_log_get_level() >= RB_LOG_DEBUG)                                            \
			rb_log(RB_LOG_DEBUG, __VA_ARGS__);                                         \
	} while (0)

#endif
