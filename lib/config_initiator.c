/* SPDX-License-Identifier: MIT */
/* The initiator's config: the keys of [initiator] and [attach NAME] and their
 * defaults (lib/config.c parses). */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conf.h"
#include "conf_priv.h"
#include "log.h"

const struct key_desc rb_conf_initiator_keys[] = {
	STR(struct rb_initiator_conf, "host-id", hostid, rb_conf_check_hostid),
	{ "log-level", K_LOG_LEVEL, offsetof(struct rb_initiator_conf, log_level), 0, 0, 0, 0,
	  NULL },
	TOPTS(struct rb_initiator_conf),
	{ .name = NULL },
};

const struct key_desc rb_conf_attach_keys[] = {
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

RB_CONF_KEYS_FIT(rb_conf_initiator_keys);
RB_CONF_KEYS_FIT(rb_conf_attach_keys);

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
	ret = rb_conf_parse_file(&ctx);
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
