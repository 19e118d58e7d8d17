/* SPDX-License-Identifier: MIT */
/* The target's config: the keys of [target], [export NAME] and [host NAME],
 * their defaults and the checks across keys (lib/config.c parses). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "conf_priv.h"
#include "log.h"

const struct key_desc rb_conf_target_keys[] = {
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
	NUM(struct rb_target_conf, "pressure-timeout", pressure_timeout_ms, K_U32, 1000, 3600000),
	NUM(struct rb_target_conf, "max-connections", max_connections, K_U32, 1,
	    RB_MAX_CONNECTIONS),
	NUM(struct rb_target_conf, "max-connections-per-address", max_conns_per_addr, K_U32, 1,
	    RB_MAX_CONNECTIONS),
	NUM(struct rb_target_conf, "max-sessions", max_sessions, K_U32, 1, RB_MAX_CONNECTIONS),
	NUM(struct rb_target_conf, "max-sessions-per-host", max_sessions_per_host, K_U32, 1,
	    RB_MAX_CONNECTIONS),
	NUM(struct rb_target_conf, "max-sessions-per-address", max_sessions_per_addr, K_U32, 1,
	    RB_MAX_CONNECTIONS),
	NUM(struct rb_target_conf, "min-keepalive", min_keepalive_ms, K_U32, 0, 3600000),
	NUM(struct rb_target_conf, "discovery-timeout", discovery_timeout_ms, K_U32, 1000, 600000),
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

const struct key_desc rb_conf_host_keys[] = {
	STR(struct rb_host_conf, "hostid", hostid, rb_conf_check_hostid),
	STR(struct rb_host_conf, "secret-file", secret_file, rb_conf_check_path),
	{ .name = NULL },
};

const struct key_desc rb_conf_export_keys[] = {
	STR(struct rb_export_conf, "path", path, rb_conf_check_path),
	BOOL(struct rb_export_conf, "read-only", read_only),
	BOOL(struct rb_export_conf, "direct", direct),
	BOOL(struct rb_export_conf, "inline-writes", inline_writes),
	{ "allowed-hosts", K_HOSTS, 0, 0, 0, 0, 0, NULL },
	{ "auth", K_AUTH, offsetof(struct rb_export_conf, auth), 0, 0, 0, 0, NULL },
	{ .name = NULL },
};

RB_CONF_KEYS_FIT(rb_conf_target_keys);
RB_CONF_KEYS_FIT(rb_conf_export_keys);

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
	c->pressure_timeout_ms = 3000;
	c->max_connections = 1024;
	c->max_conns_per_addr = 256;
	c->max_sessions = 256;
	c->max_sessions_per_host = 32;
	c->max_sessions_per_addr = 64;
	c->min_keepalive_ms = 10000;
	c->discovery_timeout_ms = 5000;
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

	for (const struct key_desc *k = rb_conf_target_keys; k->name; k++) {
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
				rb_conf_fail_at(ctx, t->hosts[i].line,
					"[host %s]: host id '%s' already has a secret ([host %s], "
					"line %d)",
					t->hosts[i].name, t->hosts[i].hostid, t->hosts[j].name,
					t->hosts[j].line);
				return -EINVAL;
			}
	/* The default minimum yields to a lower keepalive-timeout; a minimum
	 * set above the maximum is a mistake. */
	if (t->min_keepalive_ms > t->keepalive_ms) {
		int line = ctx->seen[SEC_TARGET][rb_conf_key_index(SEC_TARGET, "min-keepalive")];

		if (line) {
			rb_conf_fail_at(ctx, line,
					"min-keepalive (%u ms) exceeds keepalive-timeout (%u ms)",
					t->min_keepalive_ms, t->keepalive_ms);
			return -EINVAL;
		}
		t->min_keepalive_ms = t->keepalive_ms;
	}
	if (t->incapsule > t->max_transfer) {
		int line = ctx->seen[SEC_TARGET][rb_conf_key_index(SEC_TARGET, "incapsule")];

		if (!line)
			line = ctx->seen[SEC_TARGET][rb_conf_key_index(SEC_TARGET, "max-transfer")];
		rb_conf_fail_at(ctx, line, "incapsule (%s) exceeds max-transfer (%s)",
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
	ret = rb_conf_parse_file(&ctx);
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
