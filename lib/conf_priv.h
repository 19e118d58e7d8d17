/* SPDX-License-Identifier: MIT */
/* Config internals shared by lib/config.c (files), lib/config_target.c and
 * lib/config_initiator.c (keys) and lib/conf_values.c (values).  Not for use outside lib/. */
#ifndef RB_CONF_PRIV_H
#define RB_CONF_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Like rb_parse_u32/rb_parse_size, but -EINVAL for syntax and -ERANGE for
 * out of range or overflow, so messages can tell them apart. */
int rb_conf_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out);
int rb_conf_size(const char *s, uint64_t *out);
/* "16K" rather than 16384 in messages. */
const char *rb_conf_human(uint64_t v, char buf[24]);

/* String value checks: 0, or -EINVAL with the reason in reason[len]. */
int rb_conf_check_hostid(const char *v, char *reason, size_t len);
int rb_conf_check_path(const char *v, char *reason, size_t len);
int rb_conf_check_uri(const char *v, char *reason, size_t len);
int rb_conf_check_hostport(const char *v, char *reason, size_t len);
int rb_conf_check_nbd_device(const char *v, char *reason, size_t len);

/* ---- the parser (lib/config.c) and its key tables ---------------------- */

struct rb_target_conf;
struct rb_initiator_conf;

#define MAX_KEYS 40
/* A key table (without its NULL end) fits parse_ctx.seen[]. */
#define RB_CONF_KEYS_FIT(t) _Static_assert(sizeof(t) / sizeof((t)[0]) - 1 <= MAX_KEYS, #t)

enum sec_kind { SEC_NONE, SEC_TARGET, SEC_EXPORT, SEC_HOST, SEC_INITIATOR, SEC_ATTACH, SEC_KINDS };

enum key_type {
	K_U32, /* uint32_t, decimal */
	K_INT, /* int, decimal */
	K_SIZE, /* uint32_t, K/M/G suffixes */
	K_BOOL, /* bool */
	K_BOOL_INT, /* int 0/1 */
	K_LOG_LEVEL, /* int, enum rb_log_level */
	K_STR, /* char[size], checked by ->check */
	K_LISTEN, /* rb_target_conf.listen[], repeatable list */
	K_HOSTS, /* rb_export_conf.allowed[], repeatable list */
	K_AUTH, /* int RB_AUTH_OPTIONAL/REQUIRED from "optional"/"required" */
	K_DHGROUPS, /* unsigned mask of enum rb_auth_dhgroup from group names */
};

struct key_desc {
	const char *name;
	enum key_type type;
	size_t off; /* into the section's struct */
	uint32_t min, max; /* numbers */
	uint32_t align; /* K_SIZE: value must be a multiple */
	size_t size; /* K_STR: buffer size incl. NUL */
	/* K_STR: extra syntax check; fills reason on failure. */
	int (*check)(const char *v, char *reason, size_t len);
};

struct parse_ctx {
	const char *file;
	FILE *fp;
	char *line; /* getline buffer */
	size_t cap;
	int lineno; /* physical line last handed to inih */
	char *long_value; /* value of an overlong key line ... */
	int long_line; /* ... and its line number */

	enum sec_kind kind;
	int sec_line; /* header line of the current section */
	char sec_title[96]; /* "[export foo]" for messages */
	int index; /* current export/attach */
	int seen[SEC_KINDS][MAX_KEYS]; /* line each key was set on, 0 = not set */
	int single_line[SEC_KINDS]; /* header line of [target]/[initiator] */

	struct rb_target_conf *t; /* exactly one of t, i is set */
	struct rb_initiator_conf *i;

	int err_line; /* line of the first error, 0 = none */
	int err; /* -errno of a read error, else 0 (-EINVAL) */
	bool failed;
	char *errbuf;
	size_t errlen;
};


#define NUM(st, k, f, t, lo, hi) { k, t, offsetof(st, f), lo, hi, 0, 0, NULL }
#define STR(st, k, f, chk) { k, K_STR, offsetof(st, f), 0, 0, 0, sizeof(((st *)0)->f), chk }
#define BOOL(st, k, f) { k, K_BOOL, offsetof(st, f), 0, 0, 0, 0, NULL }
/* The transport options every daemon section takes. */
#define TOPTS(st)                                                                                  \
	{ "busy-poll", K_BOOL_INT, offsetof(st, topts.busy_poll), 0, 0, 0, 0, NULL },              \
	NUM(st, "poll-us", topts.poll_us, K_INT, 0, RB_TOPT_POLL_US_MAX),                          \
	NUM(st, "tos", topts.tos, K_INT, 0, RB_TOPT_TOS_MAX),                                      \
	NUM(st, "ack-timeout", topts.ack_timeout, K_INT, 0, RB_TOPT_ACK_TIMEOUT_MAX),              \
	NUM(st, "retry-count", topts.retry_count, K_INT, 0, RB_TOPT_RETRY_MAX),                    \
	NUM(st, "rnr-retry", topts.rnr_retry, K_INT, 0, RB_TOPT_RETRY_MAX),                        \
	NUM(st, "connect-timeout", topts.connect_timeout_ms, K_INT, RB_TOPT_CONNECT_TIMEOUT_MIN,   \
	    RB_TOPT_CONNECT_TIMEOUT_MAX)

/* Key tables, NULL-name terminated (lib/config_target.c, config_initiator.c). */
extern const struct key_desc rb_conf_target_keys[];
extern const struct key_desc rb_conf_export_keys[];
extern const struct key_desc rb_conf_host_keys[];
extern const struct key_desc rb_conf_initiator_keys[];
extern const struct key_desc rb_conf_attach_keys[];

/* The first error stops parsing: "FILE:LINE: reason" into ctx->errbuf. */
void __attribute__((format(printf, 3, 4)))
rb_conf_fail_at(struct parse_ctx *ctx, int line, const char *fmt, ...);
/* Index of key name in the table of kind, -1 if unknown. */
int rb_conf_key_index(enum sec_kind kind, const char *name);
/* Parses ctx->file into ctx->t or ctx->i; 0 or -errno (message in errbuf). */
int rb_conf_parse_file(struct parse_ctx *ctx);

#endif
