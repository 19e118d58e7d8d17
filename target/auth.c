/* SPDX-License-Identifier: MIT */
/*
 * The target's secrets and policy (docs/protocol.md "Authentication"):
 * loaded from the [host NAME] sections, target-secret-file and the auth
 * keys at start and on every reload, and looked up by the reactors at
 * CONNECT under the export table's lock, so a reload rotates them for new
 * sessions and queues while sessions already authenticated go on.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "target.h"

struct tgt_host_key {
	char hostid[RB_HOSTID_MAX];
	struct rb_auth_key key;
};

struct tgt_auth {
	int auth; /* [target] auth: RB_AUTH_OPTIONAL or RB_AUTH_REQUIRED */
	unsigned int dh_mask; /* [target] auth-dhgroups */
	bool have_target_key;
	struct rb_auth_key target_key;
	int nr_hosts;
	struct tgt_host_key *hosts;
};

void tgt_auth_free(struct tgt_auth *a)
{
	if (!a)
		return;
	for (int i = 0; i < a->nr_hosts; i++)
		rb_auth_key_clear(&a->hosts[i].key);
	rb_auth_key_clear(&a->target_key);
	free(a->hosts);
	free(a);
}

static bool has_secret(const struct rb_target_conf *c, const char *hostid)
{
	for (int i = 0; i < c->nr_hosts; i++)
		if (strcmp(c->hosts[i].hostid, hostid) == 0)
			return true;
	return false;
}

int tgt_auth_load(const struct rb_target_conf *c, struct tgt_auth **out, char *err, size_t errlen)
{
	struct tgt_auth *a = calloc(1, sizeof(*a));
	int ret;

	*out = NULL;
	if (!a || !(a->hosts = calloc((size_t)c->nr_hosts + 1, sizeof(*a->hosts)))) {
		free(a);
		snprintf(err, errlen, "out of memory");
		return -ENOMEM;
	}
	a->auth = c->auth;
	a->dh_mask = c->auth_dhgroups;
	for (int i = 0; i < c->nr_hosts; i++) {
		struct tgt_host_key *h = &a->hosts[i];

		snprintf(h->hostid, sizeof(h->hostid), "%s", c->hosts[i].hostid);
		ret = rb_auth_key_load(c->hosts[i].secret_file, &h->key, err, errlen);
		if (ret) {
			tgt_auth_free(a);
			return ret;
		}
		a->nr_hosts++;
	}
	if (c->target_secret_file[0]) {
		ret = rb_auth_key_load(c->target_secret_file, &a->target_key, err, errlen);
		if (ret) {
			tgt_auth_free(a);
			return ret;
		}
		a->have_target_key = true;
	}
	*out = a;
	return 0;
}

void tgt_auth_warn(const struct rb_target_conf *c)
{
	for (int i = 0; i < c->nr_exports; i++) {
		const struct rb_export_conf *e = &c->exports[i];

		for (int j = 0; j < e->nr_allowed; j++) {
			if (has_secret(c, e->allowed[j]))
				continue;
			rb_warn("export %s: allowed-hosts names host id '%s', which has no [host] "
				"secret: host ids are only claimed by the host, so this identifies "
				"hosts but does not authenticate them",
				e->name, e->allowed[j]);
		}
	}
}

void tgt_auth_install(struct tgt_target *t, struct tgt_auth *a)
{
	struct tgt_auth *old;

	pthread_mutex_lock(&t->exports_lock);
	old = t->auth;
	t->auth = a;
	pthread_mutex_unlock(&t->exports_lock);
	tgt_auth_free(old);
}

unsigned int tgt_auth_dh_mask(struct tgt_target *t)
{
	unsigned int m;

	pthread_mutex_lock(&t->exports_lock);
	m = t->auth ? t->auth->dh_mask : RB_AUTH_DHGROUPS_DEFAULT;
	pthread_mutex_unlock(&t->exports_lock);
	return m;
}

/* Under exports_lock. */
bool tgt_auth_export_required(const struct tgt_target *t, const struct tgt_export *e)
{
	int v = e->conf.auth;

	if (v == RB_AUTH_INHERIT)
		v = t->auth ? t->auth->auth : RB_AUTH_OPTIONAL;
	return v == RB_AUTH_REQUIRED;
}

bool tgt_auth_policy(struct tgt_target *t, const char *hostid, const struct tgt_export *e,
		     struct rb_auth_key *host_key, bool *has_host, struct rb_auth_key *tgt_key,
		     bool *has_tgt)
{
	bool need;

	*has_host = *has_tgt = false;
	pthread_mutex_lock(&t->exports_lock);
	for (int i = 0; t->auth && i < t->auth->nr_hosts; i++) {
		if (strcmp(t->auth->hosts[i].hostid, hostid) == 0) {
			*host_key = t->auth->hosts[i].key;
			*has_host = true;
			break;
		}
	}
	if (t->auth && t->auth->have_target_key) {
		*tgt_key = t->auth->target_key;
		*has_tgt = true;
	}
	/* A host with a secret always proves itself; others where required. */
	need = *has_host || (e && tgt_auth_export_required(t, e));
	pthread_mutex_unlock(&t->exports_lock);
	return need;
}
