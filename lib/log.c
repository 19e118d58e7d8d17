/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static const char *log_prog = "rdmablk";
/* Atomic: a reload may change it while other threads log. */
static atomic_int log_level = RB_LOG_INFO;

void rb_log_init(const char *progname, enum rb_log_level level)
{
	log_prog = progname;
	rb_log_set_level(level);
}

void rb_log_set_level(enum rb_log_level level)
{
	atomic_store_explicit(&log_level, (int)level, memory_order_relaxed);
}

enum rb_log_level rb_log_get_level(void)
{
	return (enum rb_log_level)atomic_load_explicit(&log_level, memory_order_relaxed);
}

static const struct {
	const char *name;
	enum rb_log_level level;
} level_names[] = {
	{ "error", RB_LOG_ERR },
	{ "warning", RB_LOG_WARN },
	{ "info", RB_LOG_INFO },
	{ "debug", RB_LOG_DEBUG },
};

const char *rb_log_level_name(enum rb_log_level level)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++)
		if (level_names[i].level == level)
			return level_names[i].name;
	return "?";
}

int rb_log_parse_level(const char *s, enum rb_log_level *out)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strcmp(s, level_names[i].name) == 0) {
			*out = level_names[i].level;
			return 0;
		}
	}
	return -EINVAL;
}

static __attribute__((format(printf, 2, 0))) void rb_vlog(enum rb_log_level level,
							   const char *fmt, va_list ap)
{
	char line[1024];
	int n, m;

	if ((int)level > atomic_load_explicit(&log_level, memory_order_relaxed))
		return;
	/* "<N>" is the sd-daemon priority prefix journald understands. */
	n = snprintf(line, sizeof(line), "<%d>%s: ", (int)level, log_prog);
	if (n < 0)
		return;
	m = vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	if (m < 0)
		return;
	n += m;
	if ((size_t)n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	/* One write per line so concurrent threads do not interleave. */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

void rb_log(enum rb_log_level level, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	rb_vlog(level, fmt, ap);
	va_end(ap);
}

void rb_fatal(const char *fmt, ...)
{
	char msg[900];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rb_log(RB_LOG_ERR, "fatal: %s; aborting", msg);
	abort();
}

static int esc_plain(unsigned char ch)
{
	return ch >= 0x20 && ch < 0x7f && ch != '\\';
}

const char *rb_log_escape(char *buf, size_t cap, const char *s, size_t maxlen)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0, total = 0, room;
	size_t i;

	for (i = 0; i < maxlen && s[i]; i++)
		total += esc_plain((unsigned char)s[i]) ? 1 : 4;
	/* Cut: keep room for "..." after the last whole character. */
	room = total + 1 <= cap ? cap - 1 : (cap >= 4 ? cap - 4 : 0);
	for (i = 0; i < maxlen && s[i]; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (o + (esc_plain(ch) ? 1 : 4) > room)
			break;
		if (esc_plain(ch)) {
			buf[o++] = (char)ch;
		} else {
			buf[o++] = '\\';
			buf[o++] = 'x';
			buf[o++] = hex[ch >> 4];
			buf[o++] = hex[ch & 15];
		}
	}
	if (total + 1 > cap && cap >= 4) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = '\0';
	return buf;
}
