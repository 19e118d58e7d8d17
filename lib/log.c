/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

static const char *log_prog = "rdmablk";
static enum rb_log_level log_level = RB_LOG_INFO;

void rb_log_init(const char *progname, enum rb_log_level level)
{
	log_prog = progname;
	log_level = level;
}

void rb_log_set_level(enum rb_log_level level)
{
	log_level = level;
}

enum rb_log_level rb_log_get_level(void)
{
	return log_level;
}

int rb_log_parse_level(const char *s, enum rb_log_level *out)
{
	static const struct {
		const char *name;
		enum rb_log_level level;
	} names[] = {
		{ "error", RB_LOG_ERR },
		{ "warning", RB_LOG_WARN },
		{ "info", RB_LOG_INFO },
		{ "debug", RB_LOG_DEBUG },
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcmp(s, names[i].name) == 0) {
			*out = names[i].level;
			return 0;
		}
	}
	return -EINVAL;
}

void rb_vlog(enum rb_log_level level, const char *fmt, va_list ap)
{
	char line[1024];
	int n, m;

	if (level > log_level)
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
