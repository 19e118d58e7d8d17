/* SPDX-License-Identifier: MIT */
/*
 * Config files.  inih splits "key = value" lines; everything around it is
 * ours: a reader callback feeds inih one physical line at a time so we know
 * the line number of every key (the packaged inih has no lineno handler),
 * parses [section] headers itself (inih truncates long section names and
 * never reports empty sections), rejects control characters, strips leading
 * blanks (so inih's multi-line continuation never joins an indented line to
 * the previous key) and stashes values too long for inih's line buffer.
 *
 * The first error stops parsing and is reported as "FILE:LINE: reason".
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "conf_priv.h"
#include "log.h"
#include "uri.h"

#define MAX_KEYS 24

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

static void __attribute__((format(printf, 3, 4)))
fail_at(struct parse_ctx *ctx, int line, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (ctx->failed)
		return;
	ctx->failed = true;
	ctx->err_line = line;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line > 0)
		snprintf(ctx->errbuf, ctx->errlen, "%s:%d: %s", ctx->file, line, msg);
	else
		snprintf(ctx->errbuf, ctx->errlen, "%s: %s", ctx->file, msg);
}

/* Values in messages: shortened so one bad 4 KiB path stays readable. */
static const char *shorten(const char *v, char buf[72])
{
	size_t n = strlen(v);

	if (n < 72)
		return v;
	snprintf(buf, 72, "%.64s...", v);
	return buf;
}

static void fail_value(struct parse_ctx *ctx, const char *key, const char *value,
		       const char *reason)
{
	char sb[72];

	fail_at(ctx, ctx->lineno, "%s '%s': %s", key, shorten(value, sb), reason);
}

/* ---- key tables -------------------------------------------------------- */

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

static const struct key_desc target_keys[] = {
	{ "listen", K_LISTEN, 0, 0, 0, 0, 0, NULL },
	NUM(struct rb_target_conf, "threads", threads, K_INT, 1, 64),
	NUM(struct rb_target_conf, "max-queue-depth", max_queue_depth, K_U32, 1, 1024),
	NUM(struct rb_target_conf, "max-io-queues", max_io_queues, K_U32, 1, 128),
	{ "max-transfer", K_SIZE, offsetof(struct rb_target_conf, max_transfer), 4096, 16u << 20,
	  4096, 0, NULL },
	NUM(struct rb_target_conf, "incapsule", incapsule, K_SIZE, 0, 16u << 20),
	NUM(struct rb_target_conf, "buffers", buffers, K_U32, 1, 65536),
	NUM(struct rb_target_conf, "keepalive-timeout", keepalive_ms, K_U32, 1000, 3600000),
	NUM(struct rb_target_conf, "transfer-timeout", transfer_timeout_ms, K_U32, 1000, 3600000),
	{ "log-level", K_LOG_LEVEL, offsetof(struct rb_target_conf, log_level), 0, 0, 0, 0, NULL },
	TOPTS(struct rb_target_conf),
	NUM(struct rb_target_conf, "max-half-open", topts.max_half_open, K_INT, 1,
	    RB_TOPT_MAX_HALF_OPEN_MAX),
	{ .name = "auth", .type = K_AUTH, .off = offsetof(struct rb_target_conf, auth) },
	{ .name = "auth-dhgroups", .type = K_DHGROUPS,
	  .off = offsetof(struct rb_target_conf, auth_dhgroups) },
	{ .name = "target-secret-file", .type = K_STR,
	  .off = offsetof(struct rb_target_conf, target_secret_file),
	  .size = sizeof(((struct rb_target_conf *)0)->target_secret_file),
	  .check = rb_conf_check_path },
	{ .name = NULL },
};

static const struct key_desc host_keys[] = {
	STR(struct rb_host_conf, "hostid", hostid, rb_conf_check_hostid),
	STR(struct rb_host_conf, "secret-file", secret_file, rb_conf_check_path),
	{ .name = NULL },
};

static const struct key_desc export_keys[] = {
	STR(struct rb_export_conf, "path", path, rb_conf_check_path),
	BOOL(struct rb_export_conf, "read-only", read_only),
	BOOL(struct rb_export_conf, "direct", direct),
	BOOL(struct rb_export_conf, "inline-writes", inline_writes),
	{ "allowed-hosts", K_HOSTS, 0, 0, 0, 0, 0, NULL },
	{ "auth", K_AUTH, offsetof(struct rb_export_conf, auth), 0, 0, 0, 0, NULL },
	{ .name = NULL },
};

static const struct key_desc initiator_keys[] = {
	STR(struct rb_initiator_conf, "host-id", hostid, rb_conf_check_hostid),
	{ "log-level", K_LOG_LEVEL, offsetof(struct rb_initiator_conf, log_level), 0, 0, 0, 0,
	  NULL },
	TOPTS(struct rb_initiator_conf),
	{ .name = NULL },
};

static const struct key_desc attach_keys[] = {
	STR(struct rb_attach_conf, "uri", uri, rb_conf_check_uri),
	NUM(struct rb_attach_conf, "queues", queues, K_U32, 1, RB_ATTACH_QUEUES_MAX),
	NUM(struct rb_attach_conf, "queue-depth", queue_depth, K_U32, 1, RB_ATTACH_DEPTH_MAX),
	NUM(struct rb_attach_conf, "timeout", timeout_ms, K_U32, RB_ATTACH_TIMEOUT_MIN,
	    RB_ATTACH_TIMEOUT_MAX),
	NUM(struct rb_attach_conf, "ctrl-loss-tmo", ctrl_loss_tmo_ms, K_U32, 0,
	    RB_ATTACH_CTRL_LOSS_MAX),
	NUM(struct rb_attach_conf, "reconnect-delay", reconnect_delay_ms, K_U32,
	    RB_ATTACH_RC_DELAY_MIN, RB_ATTACH_RC_DELAY_MAX),
	STR(struct rb_attach_conf, "nbd-socket", nbd_socket, NULL),
	STR(struct rb_attach_conf, "nbd-listen", nbd_listen, rb_conf_check_hostport),
	STR(struct rb_attach_conf, "nbd-device", nbd_device, rb_conf_check_nbd_device),
	NUM(struct rb_attach_conf, "nbd-max-clients", nbd_max_clients, K_U32, 1,
	    RB_ATTACH_NBD_CLIENTS_MAX),
	BOOL(struct rb_attach_conf, "ublk", ublk),
	STR(struct rb_attach_conf, "secret-file", secret_file, rb_conf_check_path),
	STR(struct rb_attach_conf, "target-secret-file", target_secret_file, rb_conf_check_path),
	NUM(struct rb_attach_conf, "ublk-id", ublk_id, K_U32, 0, RB_UBLK_ID_MAX),
	{ .name = NULL },
};

static const struct key_desc *const sec_keys[SEC_KINDS] = {
	[SEC_TARGET] = target_keys,
	[SEC_EXPORT] = export_keys,
	[SEC_HOST] = host_keys,
	[SEC_INITIATOR] = initiator_keys,
	[SEC_ATTACH] = attach_keys,
};

static void *sec_base(struct parse_ctx *ctx)
{
	switch (ctx->kind) {
	case SEC_TARGET: return ctx->t;
	case SEC_EXPORT: return &ctx->t->exports[ctx->index];
	case SEC_HOST: return &ctx->t->hosts[ctx->index];
	case SEC_INITIATOR: return ctx->i;
	case SEC_ATTACH: return &ctx->i->attach[ctx->index];
	default: return NULL;
	}
}

static int key_index(enum sec_kind kind, const char *name)
{
	const struct key_desc *k = sec_keys[kind];

	for (int n = 0; k && k[n].name; n++)
		if (strcmp(k[n].name, name) == 0)
			return n;
	return -1;
}

_Static_assert(sizeof(target_keys) / sizeof(target_keys[0]) - 1 <= MAX_KEYS, "MAX_KEYS");
_Static_assert(sizeof(export_keys) / sizeof(export_keys[0]) - 1 <= MAX_KEYS, "MAX_KEYS");
_Static_assert(sizeof(initiator_keys) / sizeof(initiator_keys[0]) - 1 <= MAX_KEYS, "MAX_KEYS");
_Static_assert(sizeof(attach_keys) / sizeof(attach_keys[0]) - 1 <= MAX_KEYS, "MAX_KEYS");

/* ---- lists ------------------------------------------------------------- */

/* Splits v on commas and blanks; calls fn for each non-empty token. */
static int for_each_token(struct parse_ctx *ctx, const char *key, const char *v,
			  int (*fn)(struct parse_ctx *ctx, const char *key, const char *tok))
{
	char tok[4096];
	int count = 0;

	for (const char *p = v; *p;) {
		size_t n;

		p += strspn(p, ", \t");
		n = strcspn(p, ", \t");
		if (n == 0)
			break;
		if (n >= sizeof(tok)) {
			fail_value(ctx, key, v, "entry too long");
			return -EINVAL;
		}
		memcpy(tok, p, n);
		tok[n] = '\0';
		if (fn(ctx, key, tok))
			return -EINVAL;
		count++;
		p += n;
	}
	if (count == 0) {
		fail_value(ctx, key, v, "no entries");
		return -EINVAL;
	}
	return 0;
}

static int add_listen(struct parse_ctx *ctx, const char *key, const char *tok)
{
	struct rb_target_conf *t = ctx->t;
	struct rb_listen_addr a;
	char reason[256];

	if (rb_uri_parse_listen(tok, a.transport, sizeof(a.transport), &a.ep, reason,
				sizeof(reason))) {
		fail_value(ctx, key, tok, reason);
		return -EINVAL;
	}
	for (int n = 0; n < t->nr_listen; n++) {
		if (strcmp(t->listen[n].transport, a.transport) == 0 &&
		    strcmp(t->listen[n].ep.host, a.ep.host) == 0 &&
		    t->listen[n].ep.port == a.ep.port) {
			fail_value(ctx, key, tok, "duplicate listen address");
			return -EINVAL;
		}
	}
	if (t->nr_listen >= RB_MAX_LISTEN) {
		snprintf(reason, sizeof(reason), "too many listen addresses (max %d)",
			 RB_MAX_LISTEN);
		fail_value(ctx, key, tok, reason);
		return -EINVAL;
	}
	t->listen[t->nr_listen++] = a;
	return 0;
}

/* One Diffie-Hellman group name of auth-dhgroups into the target's mask. */
static int add_dhgroup(struct parse_ctx *ctx, const char *key, const char *tok)
{
	for (unsigned int g = RB_AUTH_DH_NULL; g <= RB_AUTH_DH_FFDHE8192; g++) {
		if (strcmp(tok, rb_auth_dhgroup_name(g)) == 0) {
			ctx->t->auth_dhgroups |= 1u << g;
			return 0;
		}
	}
	fail_value(ctx, key, tok, "want null, ffdhe2048, ffdhe3072, ffdhe4096, ffdhe6144 or ffdhe8192");
	return -EINVAL;
}

static int add_host(struct parse_ctx *ctx, const char *key, const char *tok)
{
	struct rb_export_conf *e = &ctx->t->exports[ctx->index];
	char reason[128];

	if (rb_conf_check_hostid(tok, reason, sizeof(reason))) {
		fail_value(ctx, key, tok, reason);
		return -EINVAL;
	}
	for (int n = 0; n < e->nr_allowed; n++) {
		if (strcmp(e->allowed[n], tok) == 0) {
			fail_value(ctx, key, tok, "duplicate host");
			return -EINVAL;
		}
	}
	if (e->nr_allowed >= RB_MAX_ALLOWED_HOSTS) {
		snprintf(reason, sizeof(reason), "too many hosts (max %d)", RB_MAX_ALLOWED_HOSTS);
		fail_value(ctx, key, tok, reason);
		return -EINVAL;
	}
	strcpy(e->allowed[e->nr_allowed++], tok);
	return 0;
}

/* ---- one key ----------------------------------------------------------- */

static int store(struct parse_ctx *ctx, const struct key_desc *k, const char *v)
{
	char *field = (char *)sec_base(ctx) + k->off;
	char reason[256], b1[24], b2[24];
	uint64_t size;
	uint32_t u;
	bool b;
	int ret;

	switch (k->type) {
	case K_U32:
	case K_INT:
		ret = rb_conf_u32(v, k->min, k->max, &u);
		if (ret == -EINVAL) {
			fail_value(ctx, k->name, v, "not a number");
			return ret;
		}
		if (ret) {
			snprintf(reason, sizeof(reason), "out of range (%u..%u)", k->min, k->max);
			fail_value(ctx, k->name, v, reason);
			return ret;
		}
		if (k->type == K_INT)
			*(int *)field = (int)u;
		else
			*(uint32_t *)field = u;
		return 0;
	case K_SIZE:
		ret = rb_conf_size(v, &size);
		if (ret == -EINVAL) {
			fail_value(ctx, k->name, v, "not a size (bytes, or with suffix K, M or G)");
			return ret;
		}
		if (ret || size < k->min || size > k->max) {
			snprintf(reason, sizeof(reason), "out of range (%s..%s)",
				 rb_conf_human(k->min, b1), rb_conf_human(k->max, b2));
			fail_value(ctx, k->name, v, reason);
			return -ERANGE;
		}
		if (k->align && size % k->align) {
			snprintf(reason, sizeof(reason), "not a multiple of %u", k->align);
			fail_value(ctx, k->name, v, reason);
			return -EINVAL;
		}
		*(uint32_t *)field = (uint32_t)size;
		return 0;
	case K_BOOL:
	case K_BOOL_INT:
		if (rb_parse_bool(v, &b)) {
			fail_value(ctx, k->name, v,
				   "not a boolean (yes/no, true/false, on/off, 1/0)");
			return -EINVAL;
		}
		if (k->type == K_BOOL)
			*(bool *)field = b;
		else
			*(int *)field = b;
		return 0;
	case K_LOG_LEVEL: {
		enum rb_log_level lvl;

		if (rb_log_parse_level(v, &lvl)) {
			fail_value(ctx, k->name, v,
				   "unknown log level (error, warning, info, debug)");
			return -EINVAL;
		}
		*(int *)field = (int)lvl;
		return 0;
	}
	case K_STR:
		if (strlen(v) >= k->size) {
			snprintf(reason, sizeof(reason), "value too long (%zu bytes, max %zu)",
				 strlen(v), k->size - 1);
			fail_value(ctx, k->name, v, reason);
			return -EINVAL;
		}
		if (k->check && k->check(v, reason, sizeof(reason))) {
			fail_value(ctx, k->name, v, reason);
			return -EINVAL;
		}
		strcpy(field, v);
		return 0;
	case K_AUTH:
		if (strcmp(v, "required") == 0) {
			*(int *)field = RB_AUTH_REQUIRED;
		} else if (strcmp(v, "optional") == 0) {
			*(int *)field = RB_AUTH_OPTIONAL;
		} else {
			fail_value(ctx, k->name, v, "want 'required' or 'optional'");
			return -EINVAL;
		}
		return 0;
	case K_LISTEN:
		return for_each_token(ctx, k->name, v, add_listen);
	case K_HOSTS:
		return for_each_token(ctx, k->name, v, add_host);
	case K_DHGROUPS:
		ctx->t->auth_dhgroups = 0; /* the list replaces the default */
		return for_each_token(ctx, k->name, v, add_dhgroup);
	}
	return -EINVAL;
}

/* inih callback; section is ignored, ctx->kind is authoritative. */
static int on_key(void *user, const char *section, const char *name, const char *value)
{
	struct parse_ctx *ctx = user;
	const struct key_desc *keys = sec_keys[ctx->kind];
	int idx, *seen;

	if (ctx->failed)
		return 0;
	if (ctx->long_line == ctx->lineno && ctx->long_value)
		value = ctx->long_value;
	if (ctx->kind == SEC_NONE) {
		fail_at(ctx, ctx->lineno, "key '%s' outside of any section", name);
		return 0;
	}
	idx = key_index(ctx->kind, name);
	if (idx < 0) {
		fail_at(ctx, ctx->lineno, "unknown key '%s' in %s", name, ctx->sec_title);
		return 0;
	}
	seen = &ctx->seen[ctx->kind][idx];
	if (*seen && keys[idx].type != K_LISTEN && keys[idx].type != K_HOSTS) {
		fail_at(ctx, ctx->lineno, "duplicate key '%s' (first set on line %d)", name, *seen);
		return 0;
	}
	*seen = ctx->lineno;
	if (!*value) {
		fail_at(ctx, ctx->lineno, "%s: empty value", name);
		return 0;
	}
	return store(ctx, &keys[idx], value) == 0;
}

/* ---- sections ---------------------------------------------------------- */

/* Checks the section that just ended. */
static void end_section(struct parse_ctx *ctx)
{
	if (ctx->kind == SEC_EXPORT && !ctx->seen[SEC_EXPORT][key_index(SEC_EXPORT, "path")])
		fail_at(ctx, ctx->sec_line, "%s: missing path", ctx->sec_title);
	if (ctx->kind == SEC_HOST &&
	    !ctx->seen[SEC_HOST][key_index(SEC_HOST, "secret-file")])
		fail_at(ctx, ctx->sec_line, "%s: missing secret-file", ctx->sec_title);
	if (ctx->kind == SEC_ATTACH && !ctx->seen[SEC_ATTACH][key_index(SEC_ATTACH, "uri")])
		fail_at(ctx, ctx->sec_line, "%s: missing uri", ctx->sec_title);
	ctx->kind = SEC_NONE;
}

static int check_name(struct parse_ctx *ctx, const char *what, const char *name, bool unit_safe)
{
	size_t n = strlen(name);
	char sb[72];

	if (n >= RB_EXPORT_NAME_MAX) {
		fail_at(ctx, ctx->lineno, "%s name too long (%zu bytes, max %d)", what, n,
			RB_EXPORT_NAME_MAX - 1);
		return -EINVAL;
	}
	for (const char *p = name; *p; p++) {
		unsigned char c = (unsigned char)*p;
		/* Attach names become systemd instance names: keep them unescaped. */
		bool ok = unit_safe ? ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
					(c >= '0' && c <= '9') || strchr("._:-", c))
				     : (c > ' ' && c != 0x7f);

		if (!ok || c == '[' || c == ']') {
			fail_at(ctx, ctx->lineno, "%s name '%s': invalid character '%c'%s", what,
				shorten(name, sb), c == '\t' ? ' ' : c,
				unit_safe ? " (use letters, digits, '.', '_', ':', '-')" : "");
			return -EINVAL;
		}
	}
	return 0;
}

/* Grows the export or attach array by one default-initialized entry. */
static int add_named(struct parse_ctx *ctx, const char *name)
{
	if (ctx->t) {
		struct rb_target_conf *t = ctx->t;
		struct rb_export_conf *e;

		for (int n = 0; n < t->nr_exports; n++) {
			if (strcmp(t->exports[n].name, name) == 0) {
				fail_at(ctx, ctx->lineno,
					"duplicate export '%s' (first on line %d)", name,
					t->exports[n].line);
				return -EEXIST;
			}
		}
		e = realloc(t->exports, sizeof(*e) * (size_t)(t->nr_exports + 1));
		if (!e)
			goto out_nomem;
		t->exports = e;
		e = &e[t->nr_exports];
		memset(e, 0, sizeof(*e));
		e->direct = true;
		e->auth = RB_AUTH_INHERIT;
		strcpy(e->name, name);
		e->line = ctx->lineno;
		ctx->index = t->nr_exports++;
	} else {
		struct rb_initiator_conf *c = ctx->i;
		struct rb_attach_conf *a;

		for (int n = 0; n < c->nr_attach; n++) {
			if (strcmp(c->attach[n].name, name) == 0) {
				fail_at(ctx, ctx->lineno,
					"duplicate attach '%s' (first on line %d)", name,
					c->attach[n].line);
				return -EEXIST;
			}
		}
		a = realloc(c->attach, sizeof(*a) * (size_t)(c->nr_attach + 1));
		if (!a)
			goto out_nomem;
		c->attach = a;
		a = &a[c->nr_attach];
		rb_attach_conf_init(a);
		strcpy(a->name, name);
		a->line = ctx->lineno;
		ctx->index = c->nr_attach++;
	}
	return 0;

out_nomem:
	fail_at(ctx, ctx->lineno, "out of memory");
	return -ENOMEM;
}

/* A [host NAME] section: its host id defaults to NAME. */
static int add_host_section(struct parse_ctx *ctx, const char *name)
{
	struct rb_target_conf *t = ctx->t;
	struct rb_host_conf *h;
	char reason[128];

	if (rb_conf_check_hostid(name, reason, sizeof(reason))) {
		fail_at(ctx, ctx->lineno, "host name '%s': %s", name, reason);
		return -EINVAL;
	}
	for (int n = 0; n < t->nr_hosts; n++) {
		if (strcmp(t->hosts[n].name, name) == 0) {
			fail_at(ctx, ctx->lineno, "duplicate host '%s' (first on line %d)", name,
				t->hosts[n].line);
			return -EEXIST;
		}
	}
	h = realloc(t->hosts, sizeof(*h) * (size_t)(t->nr_hosts + 1));
	if (!h) {
		fail_at(ctx, ctx->lineno, "out of memory");
		return -ENOMEM;
	}
	t->hosts = h;
	h = &h[t->nr_hosts];
	memset(h, 0, sizeof(*h));
	snprintf(h->name, sizeof(h->name), "%s", name);
	snprintf(h->hostid, sizeof(h->hostid), "%s", name);
	h->line = ctx->lineno;
	ctx->index = t->nr_hosts++;
	return 0;
}

/* "[ target ]", "[export NAME]": s is the stripped line starting with '['. */
static int begin_section(struct parse_ctx *ctx, char *s)
{
	const char *single = ctx->t ? "target" : "initiator";
	const char *named = ctx->t ? "export" : "attach";
	char *close = strchr(s, ']'), *name, *after;
	size_t kwlen;
	char sb[72];

	end_section(ctx);
	if (ctx->failed)
		return -EINVAL;
	if (!close) {
		fail_at(ctx, ctx->lineno, "missing ']' in section header");
		return -EINVAL;
	}
	after = close + 1 + strspn(close + 1, " \t");
	if (*after && *after != ';' && *after != '#') {
		fail_at(ctx, ctx->lineno, "junk after section header: '%s'", shorten(after, sb));
		return -EINVAL;
	}
	*close = '\0';
	s++;
	s += strspn(s, " \t");
	for (char *e = close; e > s && (e[-1] == ' ' || e[-1] == '\t');)
		*--e = '\0';
	kwlen = strcspn(s, " \t");
	name = s + kwlen + strspn(s + kwlen, " \t");

	if (strcmp(s, single) == 0) {
		enum sec_kind kind = ctx->t ? SEC_TARGET : SEC_INITIATOR;

		if (ctx->single_line[kind]) {
			fail_at(ctx, ctx->lineno, "duplicate section [%s] (first on line %d)",
				single, ctx->single_line[kind]);
			return -EINVAL;
		}
		ctx->single_line[kind] = ctx->lineno;
		ctx->kind = kind;
		snprintf(ctx->sec_title, sizeof(ctx->sec_title), "[%s]", single);
	} else if (ctx->t && kwlen == 4 && strncmp(s, "host", 4) == 0) {
		if (!*name) {
			fail_at(ctx, ctx->lineno, "section [host] needs a name: [host NAME]");
			return -EINVAL;
		}
		if (add_host_section(ctx, name))
			return -EINVAL;
		memset(ctx->seen[SEC_HOST], 0, sizeof(ctx->seen[SEC_HOST]));
		ctx->kind = SEC_HOST;
		snprintf(ctx->sec_title, sizeof(ctx->sec_title), "[host %s]", shorten(name, sb));
	} else if (kwlen == strlen(named) && strncmp(s, named, kwlen) == 0) {
		bool is_attach = ctx->i != NULL;
		enum sec_kind kind = is_attach ? SEC_ATTACH : SEC_EXPORT;

		if (!*name) {
			fail_at(ctx, ctx->lineno, "section [%s] needs a name: [%s NAME]", named,
				named);
			return -EINVAL;
		}
		if (check_name(ctx, named, name, is_attach) || add_named(ctx, name))
			return -EINVAL;
		memset(ctx->seen[kind], 0, sizeof(ctx->seen[kind]));
		ctx->kind = kind;
		snprintf(ctx->sec_title, sizeof(ctx->sec_title), "[%s %s]", named,
			 shorten(name, sb));
	} else {
		fail_at(ctx, ctx->lineno, "unknown section [%s] (want [%s] or [%s NAME])",
			shorten(s, sb), single, named);
		return -EINVAL;
	}
	ctx->sec_line = ctx->lineno;
	return 0;
}

/* ---- the line reader handed to inih ------------------------------------ */

/* Splits an overlong "key = value" line the way inih would: the key ends at
 * the first '=' or ':', an inline comment is a ';' after a blank. */
static int stash_long_line(struct parse_ctx *ctx, char *str, int num, const char *p)
{
	const char *end = p, *v;
	bool was_space = false;
	size_t klen, vlen;

	while (*end && *end != '=' && *end != ':' && !(was_space && *end == ';')) {
		was_space = isspace((unsigned char)*end);
		end++;
	}
	if (*end != '=' && *end != ':') {
		fail_at(ctx, ctx->lineno, "syntax error (expected 'key = value' or '[section]')");
		return -EINVAL;
	}
	for (klen = (size_t)(end - p); klen && isspace((unsigned char)p[klen - 1]);)
		klen--;
	if (klen + 3 > (size_t)num) {
		fail_at(ctx, ctx->lineno, "key too long");
		return -EINVAL;
	}
	v = end + 1 + strspn(end + 1, " \t");
	was_space = false;
	for (vlen = 0; v[vlen] && !(was_space && v[vlen] == ';'); vlen++)
		was_space = isspace((unsigned char)v[vlen]);
	while (vlen && isspace((unsigned char)v[vlen - 1]))
		vlen--;
	free(ctx->long_value);
	ctx->long_value = strndup(v, vlen);
	if (!ctx->long_value) {
		fail_at(ctx, ctx->lineno, "out of memory");
		return -ENOMEM;
	}
	ctx->long_line = ctx->lineno;
	/* inih sees "key=" and on_key() substitutes the stashed value. */
	snprintf(str, (size_t)num, "%.*s=\n", (int)klen, p);
	return 0;
}

static char *reader(char *str, int num, void *stream)
{
	struct parse_ctx *ctx = stream;
	ssize_t n;
	char *p;

	if (ctx->failed || num < 8)
		return NULL;
	errno = 0;
	n = getline(&ctx->line, &ctx->cap, ctx->fp);
	if (n < 0) {
		if (ferror(ctx->fp)) {
			ctx->err = errno ? -errno : -EIO;
			fail_at(ctx, 0, "%s", strerror(-ctx->err));
		}
		return NULL;
	}
	ctx->lineno++;
	p = ctx->line;
	if ((size_t)n != strlen(p)) {
		fail_at(ctx, ctx->lineno, "NUL byte in line");
		return NULL;
	}
	while (n > 0 && (p[n - 1] == '\n' || p[n - 1] == '\r'))
		p[--n] = '\0';
	if (ctx->lineno == 1 && strncmp(p, "\xef\xbb\xbf", 3) == 0)
		p += 3; /* UTF-8 byte order mark */
	for (const char *q = p; *q; q++) {
		unsigned char c = (unsigned char)*q;

		if ((c < 0x20 && c != '\t') || c == 0x7f) {
			fail_at(ctx, ctx->lineno, "control character 0x%02x in line", c);
			return NULL;
		}
	}
	p += strspn(p, " \t");
	if (*p == '[') {
		if (begin_section(ctx, p))
			return NULL;
		p = ""; /* inih's section bookkeeping is not used */
	} else if (*p == ';' || *p == '#') {
		p = "";
	}
	if (strlen(p) + 2 > (size_t)num) {
		if (stash_long_line(ctx, str, num, p))
			return NULL;
		return str;
	}
	snprintf(str, (size_t)num, "%s\n", p);
	return str;
}

static int parse_file(struct parse_ctx *ctx)
{
	int ret;

	ctx->fp = fopen(ctx->file, "re");
	if (!ctx->fp) {
		ret = -errno;
		snprintf(ctx->errbuf, ctx->errlen, "%s: %s", ctx->file, strerror(-ret));
		return ret;
	}
	ret = ini_parse_stream(reader, ctx, on_key, ctx);
	if (ret == -2) {
		ctx->failed = false;
		ctx->err = -ENOMEM;
		fail_at(ctx, 0, "out of memory");
	} else if (ret > 0 && (!ctx->failed || (ctx->err_line > 0 && ret < ctx->err_line))) {
		/* inih's own complaint: a line that is neither key=value nor a header. */
		ctx->failed = false;
		fail_at(ctx, ret, "syntax error (expected 'key = value' or '[section]')");
	}
	if (!ctx->failed)
		end_section(ctx);
	fclose(ctx->fp);
	free(ctx->line);
	free(ctx->long_value);
	if (!ctx->failed)
		return 0;
	return ctx->err ? ctx->err : -EINVAL;
}

/* ---- target ------------------------------------------------------------ */

void rb_target_conf_init(struct rb_target_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->threads = 1;
	c->max_queue_depth = 128;
	c->max_io_queues = 8;
	c->max_transfer = 128 * 1024;
	c->incapsule = 8 * 1024;
	c->buffers = 256;
	c->keepalive_ms = 120000;
	c->transfer_timeout_ms = 15000;
	c->auth_dhgroups = RB_AUTH_DHGROUPS_DEFAULT;
	c->log_level = RB_LOG_INFO;
	rb_transport_opts_init(&c->topts);
}

void rb_target_conf_free(struct rb_target_conf *c)
{
	free(c->exports);
	free(c->hosts);
	rb_target_conf_init(c);
}

static bool same_listen(const struct rb_target_conf *a, const struct rb_target_conf *b)
{
	if (a->nr_listen != b->nr_listen)
		return false;
	for (int i = 0; i < a->nr_listen; i++)
		if (strcmp(a->listen[i].transport, b->listen[i].transport) != 0 ||
		    strcmp(a->listen[i].ep.host, b->listen[i].ep.host) != 0 ||
		    a->listen[i].ep.port != b->listen[i].ep.port)
			return false;
	return true;
}

int rb_target_conf_diff(const struct rb_target_conf *a, const struct rb_target_conf *b,
			const char **keys, int max)
{
	int n = 0;

	for (const struct key_desc *k = target_keys; k->name; k++) {
		const char *pa = (const char *)a + k->off, *pb = (const char *)b + k->off;
		bool same;

		/* Secrets and policy: a reload applies them (target/auth.c). */
		if (strcmp(k->name, "auth") == 0 || strcmp(k->name, "target-secret-file") == 0 ||
		    strcmp(k->name, "auth-dhgroups") == 0)
			continue;
		switch (k->type) {
		case K_LISTEN: same = same_listen(a, b); break;
		case K_U32:
		case K_SIZE: same = *(const uint32_t *)pa == *(const uint32_t *)pb; break;
		case K_BOOL: same = *(const bool *)pa == *(const bool *)pb; break;
		case K_STR: same = strcmp(pa, pb) == 0; break;
		case K_INT:
		case K_BOOL_INT:
		case K_LOG_LEVEL: same = *(const int *)pa == *(const int *)pb; break;
		default: abort(); /* K_HOSTS: export sections only */
		}
		if (!same && n++ < max)
			keys[n - 1] = k->name;
	}
	return n;
}

static int target_finish(struct parse_ctx *ctx)
{
	struct rb_target_conf *t = ctx->t;
	char b1[24], b2[24];

	/* No listen key: serve tcp on every address, the documented default. */
	if (t->nr_listen == 0) {
		strcpy(t->listen[0].transport, "tcp");
		strcpy(t->listen[0].ep.host, "0.0.0.0");
		t->listen[0].ep.port = RB_DEFAULT_PORT;
		t->nr_listen = 1;
	}
	/* Two sections for one host id would make its secret ambiguous. */
	for (int i = 0; i < t->nr_hosts; i++)
		for (int j = 0; j < i; j++)
			if (strcmp(t->hosts[i].hostid, t->hosts[j].hostid) == 0) {
				fail_at(ctx, t->hosts[i].line,
					"[host %s]: host id '%s' already has a secret ([host %s], "
					"line %d)",
					t->hosts[i].name, t->hosts[i].hostid, t->hosts[j].name,
					t->hosts[j].line);
				return -EINVAL;
			}
	if (t->incapsule > t->max_transfer) {
		int line = ctx->seen[SEC_TARGET][key_index(SEC_TARGET, "incapsule")];

		if (!line)
			line = ctx->seen[SEC_TARGET][key_index(SEC_TARGET, "max-transfer")];
		fail_at(ctx, line, "incapsule (%s) exceeds max-transfer (%s)",
			rb_conf_human(t->incapsule, b1), rb_conf_human(t->max_transfer, b2));
		return -EINVAL;
	}
	return 0;
}

int rb_target_conf_load(struct rb_target_conf *c, const char *path, char *errbuf, size_t errlen)
{
	struct parse_ctx ctx = { .file = path, .t = c, .errbuf = errbuf, .errlen = errlen };
	int ret;

	rb_target_conf_init(c);
	ret = parse_file(&ctx);
	if (!ret)
		ret = target_finish(&ctx);
	if (ret)
		rb_target_conf_free(c);
	return ret;
}

const struct rb_export_conf *rb_target_conf_export(const struct rb_target_conf *c,
						   const char *name)
{
	for (int n = 0; n < c->nr_exports; n++)
		if (strcmp(c->exports[n].name, name) == 0)
			return &c->exports[n];
	return NULL;
}

/* ---- initiator --------------------------------------------------------- */

void rb_initiator_conf_init(struct rb_initiator_conf *c)
{
	memset(c, 0, sizeof(*c));
	c->log_level = RB_LOG_INFO;
	rb_transport_opts_init(&c->topts);
}

void rb_initiator_conf_free(struct rb_initiator_conf *c)
{
	free(c->attach);
	rb_initiator_conf_init(c);
}

void rb_attach_conf_init(struct rb_attach_conf *a)
{
	memset(a, 0, sizeof(*a));
	a->queues = 2;
	a->queue_depth = 128;
	a->timeout_ms = 30000;
	a->reconnect_delay_ms = 2000;
	a->nbd_max_clients = 256;
	a->ublk_id = RB_UBLK_ID_ANY;
}

int rb_initiator_conf_load(struct rb_initiator_conf *c, const char *path, char *errbuf,
			   size_t errlen)
{
	struct parse_ctx ctx = { .file = path, .i = c, .errbuf = errbuf, .errlen = errlen };
	int ret;

	rb_initiator_conf_init(c);
	ret = parse_file(&ctx);
	if (ret)
		rb_initiator_conf_free(c);
	return ret;
}

const struct rb_attach_conf *rb_initiator_conf_attach(const struct rb_initiator_conf *c,
						      const char *name)
{
	for (int n = 0; n < c->nr_attach; n++)
		if (strcmp(c->attach[n].name, name) == 0)
			return &c->attach[n];
	return NULL;
}
