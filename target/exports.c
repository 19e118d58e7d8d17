/* SPDX-License-Identifier: MIT */
/*
 * Exports: the export object (its backing store opened and probed, its
 * counters), the export table, and configuration reload (SIGHUP).
 *
 * The table is an array of referenced exports.  Reactors look names up
 * only on the control path (CONNECT, LIST_EXPORTS) and take the table's
 * lock to do so; the I/O path reaches its export through its session,
 * which holds a reference.  A reload builds a whole new table and swaps
 * it in: an export whose configuration and backing store are unchanged is
 * carried over as it is, anything else is opened anew, and what the new
 * table no longer holds lives on for the sessions still using it (as
 * nbd-server does; no host loses a connection to a reload).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checked.h"
#include "log.h"
#include "target.h"

/* ---- the export object ------------------------------------------------------- */

static int open_backing(const struct rb_export_conf *c, bool direct)
{
	int flags = (c->read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC;

	if (direct)
		flags |= O_DIRECT;
	return open(c->path, flags);
}

static int export_open(struct tgt_export *e, const struct rb_export_conf *conf, uint32_t handle)
{
	struct stat st;
	int ret;

	memset(e, 0, sizeof(*e));
	e->conf = *conf;
	e->handle = handle;
	e->direct = conf->direct;
	e->fd = open_backing(conf, e->direct);
	if (e->fd < 0 && e->direct && errno == EINVAL) {
		rb_warn("export %s: %s: file system refuses O_DIRECT; using buffered I/O",
			conf->name, conf->path);
		e->direct = false;
		e->fd = open_backing(conf, false);
	}
	if (e->fd < 0) {
		ret = -errno;
		rb_err("export %s: cannot open %s: %s", conf->name, conf->path, strerror(-ret));
		return ret;
	}
	if (fstat(e->fd, &st) < 0) {
		ret = -errno;
		rb_err("export %s: cannot stat %s: %s", conf->name, conf->path, strerror(-ret));
		goto out_close;
	}
	e->dev = S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
	e->ino = S_ISBLK(st.st_mode) ? 0 : st.st_ino;
	if (S_ISREG(st.st_mode)) {
		e->backend = &tgt_backend_file;
	} else if (S_ISBLK(st.st_mode)) {
		e->backend = &tgt_backend_blockdev;
	} else {
		rb_err("export %s: %s is neither a regular file nor a block device", conf->name,
		       conf->path);
		ret = -EINVAL;
		goto out_close;
	}
	ret = e->backend->probe(e);
	if (ret < 0) {
		rb_err("export %s: cannot size %s: %s", conf->name, conf->path, strerror(-ret));
		goto out_close;
	}
	e->page_size = (uint32_t)sysconf(_SC_PAGESIZE);
	e->inline_writes = !e->direct && conf->inline_writes && !conf->read_only;
	if (conf->read_only) {
		e->flags |= RB_EXP_READ_ONLY;
		e->flags &= ~(RB_EXP_DISCARD | RB_EXP_WRITE_ZEROES | RB_EXP_NO_HOLE |
			      RB_EXP_FAST_ZERO | RB_EXP_FUA);
	}
	if (e->size % e->block_size)
		rb_warn("export %s: size %llu is not a multiple of block size %u; the tail is not "
			"accessible",
			conf->name, (unsigned long long)e->size, e->block_size);
	e->size -= e->size % e->block_size;
	return 0;

out_close:
	close(e->fd);
	e->fd = -1;
	return ret;
}

static void export_log(const struct tgt_export *e)
{
	rb_info("export %s: %s (%s), %llu bytes, block size %u%s%s%s%s", e->conf.name, e->conf.path,
		e->backend->name, (unsigned long long)e->size, e->block_size,
		e->conf.read_only ? ", read-only" : "", e->direct ? ", O_DIRECT" : "",
		e->inline_writes ? ", inline writes" : "",
		e->zero_fast ? "" : ", no native write-zeroes (FAST_ZERO refused)");
}

static void export_close(struct tgt_export *e)
{
	if (e->fd >= 0)
		close(e->fd);
	e->fd = -1;
}

void tgt_export_dump_stats(const struct tgt_export *e)
{
	const struct tgt_export_stats *s = &e->stats;

	rb_info("export %s stats: reads=%llu writes=%llu flushes=%llu fua_writes=%llu "
		"discards=%llu write_zeroes=%llu errors=%llu inline_writes=%llu",
		e->conf.name, (unsigned long long)atomic_load(&s->reads),
		(unsigned long long)atomic_load(&s->writes),
		(unsigned long long)atomic_load(&s->flushes),
		(unsigned long long)atomic_load(&s->fua_writes),
		(unsigned long long)atomic_load(&s->discards),
		(unsigned long long)atomic_load(&s->write_zeroes),
		(unsigned long long)atomic_load(&s->errors),
		(unsigned long long)atomic_load(&s->inline_writes));
}

/* ---- the table --------------------------------------------------------------- */

static struct tgt_export *export_new(struct tgt_target *t, const struct rb_export_conf *c)
{
	struct tgt_export *e = malloc(sizeof(*e));
	int ret;

	if (!e) {
		rb_err("export %s: out of memory", c->name);
		errno = ENOMEM;
		return NULL;
	}
	ret = export_open(e, c, ++t->next_handle);
	if (ret < 0) {
		free(e);
		errno = -ret;
		return NULL;
	}
	atomic_init(&e->refs, 1); /* the table's */
	return e;
}

/* An export opened but never in the table: nothing to report. */
static void export_discard(struct tgt_export *e)
{
	export_close(e);
	free(e);
}

void tgt_export_put(struct tgt_export *e)
{
	if (atomic_fetch_sub(&e->refs, 1) != 1)
		return;
	tgt_export_dump_stats(e);
	export_close(e);
	free(e);
}

/* Drop the table's references to n exports, then the array. */
static void put_all(struct tgt_export **v, int n)
{
	for (int i = 0; i < n; i++)
		if (v[i])
			tgt_export_put(v[i]);
	free(v);
}

/* A new table for c: every export opened, or NULL and -errno in *err. */
static struct tgt_export **table_open(struct tgt_target *t, const struct rb_target_conf *c,
				      int *err)
{
	struct tgt_export **v = calloc((size_t)c->nr_exports + 1, sizeof(*v));

	if (!v) {
		*err = -ENOMEM;
		return NULL;
	}
	for (int i = 0; i < c->nr_exports; i++) {
		v[i] = export_new(t, &c->exports[i]);
		if (!v[i]) {
			*err = -errno;
			while (i--)
				export_discard(v[i]);
			free(v);
			return NULL;
		}
	}
	return v;
}

int tgt_exports_open(struct tgt_target *t, const struct rb_target_conf *c)
{
	int ret = 0;

	pthread_mutex_init(&t->exports_lock, NULL);
	t->exports = table_open(t, c, &ret);
	if (!t->exports)
		return ret;
	t->nr_exports = c->nr_exports;
	for (int i = 0; i < t->nr_exports; i++)
		export_log(t->exports[i]);
	return 0;
}

void tgt_exports_close(struct tgt_target *t)
{
	tgt_auth_free(t->auth);
	t->auth = NULL;
	put_all(t->exports, t->nr_exports);
	t->exports = NULL;
	t->nr_exports = 0;
	pthread_mutex_destroy(&t->exports_lock);
}

struct tgt_export *tgt_export_get(struct tgt_target *t, const char *name)
{
	struct tgt_export *e = NULL;

	pthread_mutex_lock(&t->exports_lock);
	for (int i = 0; i < t->nr_exports; i++)
		if (strcmp(t->exports[i]->conf.name, name) == 0) {
			e = t->exports[i];
			atomic_fetch_add(&e->refs, 1);
			break;
		}
	pthread_mutex_unlock(&t->exports_lock);
	return e;
}

void tgt_exports_foreach(struct tgt_target *t, void (*fn)(const struct tgt_export *e, void *arg),
			 void *arg)
{
	pthread_mutex_lock(&t->exports_lock);
	for (int i = 0; i < t->nr_exports; i++)
		fn(t->exports[i], arg);
	pthread_mutex_unlock(&t->exports_lock);
}

int tgt_exports_count(struct tgt_target *t)
{
	int n;

	pthread_mutex_lock(&t->exports_lock);
	n = t->nr_exports;
	pthread_mutex_unlock(&t->exports_lock);
	return n;
}

/* ---- reload ------------------------------------------------------------------ */

static bool same_hosts(const struct rb_export_conf *a, const struct rb_export_conf *b)
{
	if (a->nr_allowed != b->nr_allowed)
		return false;
	for (int i = 0; i < a->nr_allowed; i++)
		if (strcmp(a->allowed[i], b->allowed[i]) != 0)
			return false;
	return true;
}

/* Would a host see any difference between the two?  Then new sessions get
 * the new one. */
static bool same_export(const struct tgt_export *a, const struct tgt_export *b)
{
	return strcmp(a->conf.path, b->conf.path) == 0 && a->conf.read_only == b->conf.read_only &&
	       a->conf.direct == b->conf.direct && a->conf.inline_writes == b->conf.inline_writes &&
	       same_hosts(&a->conf, &b->conf) && a->dev == b->dev && a->ino == b->ino &&
	       a->backend == b->backend && a->size == b->size && a->block_size == b->block_size &&
	       a->phys_block_size == b->phys_block_size && a->flags == b->flags &&
	       a->direct == b->direct;
}

static struct tgt_export *find_in(struct tgt_export **v, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (v[i] && strcmp(v[i]->conf.name, name) == 0)
			return v[i];
	return NULL;
}

/* Sessions still on an export the table let go of (the table's reference
 * is dropped right after). */
static unsigned int sessions_on(const struct tgt_export *e)
{
	return atomic_load(&e->refs) - 1;
}

/* [target] keys cannot change under running reactors and listeners. */
static void warn_target_keys(struct tgt_target *t, const struct rb_target_conf *nc,
			     const char *path, bool keep_log_level)
{
	const char *keys[32];
	int n = rb_target_conf_diff(&t->conf, nc, keys, (int)RB_ARRAY_SIZE(keys));

	for (int i = 0; i < n && i < (int)RB_ARRAY_SIZE(keys); i++) {
		if (strcmp(keys[i], "log-level") == 0) {
			t->conf.log_level = nc->log_level;
			if (keep_log_level) {
				rb_info("reload: %s: log-level changed; --log-level keeps the "
					"running one",
					path);
				continue;
			}
			rb_log_set_level((enum rb_log_level)nc->log_level);
			rb_info("reload: %s: log-level is now %s", path,
				rb_log_level_name((enum rb_log_level)nc->log_level));
			continue;
		}
		rb_warn("reload: %s: [target] %s changed; it takes effect when the target "
			"restarts",
			path, keys[i]);
	}
}

int tgt_reload(struct tgt_target *t, const char *path, bool keep_log_level)
{
	struct rb_target_conf nc;
	struct tgt_export **fresh, **old;
	struct tgt_auth *auth;
	char errbuf[512];
	int ret = 0, nr_old, added = 0, changed = 0, removed = 0;

	rb_target_conf_init(&nc);
	ret = rb_target_conf_load(&nc, path, errbuf, sizeof(errbuf));
	if (ret < 0) {
		rb_err("reload: %s; keeping the running configuration", errbuf);
		return ret;
	}
	ret = tgt_auth_load(&nc, &auth, errbuf, sizeof(errbuf));
	if (ret) {
		rb_err("reload: %s; keeping the running configuration", errbuf);
		rb_target_conf_free(&nc);
		return ret;
	}
	fresh = table_open(t, &nc, &ret);
	if (!fresh) {
		rb_err("reload: %s: an export cannot be opened (above); keeping the running "
		       "configuration",
		       path);
		rb_target_conf_free(&nc);
		tgt_auth_free(auth);
		return ret;
	}
	warn_target_keys(t, &nc, path, keep_log_level);
	tgt_auth_warn(&nc);
	/* Unchanged exports stay the very same object: their sessions and
	 * counters go on, and the copy just opened is dropped. */
	for (int i = 0; i < nc.nr_exports; i++) {
		struct tgt_export *cur = find_in(t->exports, t->nr_exports, fresh[i]->conf.name);

		if (cur && same_export(cur, fresh[i])) {
			export_discard(fresh[i]);
			atomic_fetch_add(&cur->refs, 1);
			fresh[i] = cur;
		} else if (cur) {
			changed++;
			rb_info("reload: export %s changed; new sessions use:", cur->conf.name);
			export_log(fresh[i]);
		} else {
			added++;
			rb_info("reload: export %s added:", fresh[i]->conf.name);
			export_log(fresh[i]);
		}
	}
	pthread_mutex_lock(&t->exports_lock);
	old = t->exports;
	nr_old = t->nr_exports;
	t->exports = fresh;
	t->nr_exports = nc.nr_exports;
	pthread_mutex_unlock(&t->exports_lock);
	/* New sessions and queues use the new secrets; authenticated ones
	 * keep their session keys. */
	tgt_auth_install(t, auth);

	for (int i = 0; i < nr_old; i++) {
		struct tgt_export *e = old[i];
		struct tgt_export *now = find_in(fresh, nc.nr_exports, e->conf.name);

		if (now == e)
			continue;
		if (!now) {
			removed++;
			rb_info("reload: export %s removed; %u session(s) keep it until they end",
				e->conf.name, sessions_on(e));
		} else if (sessions_on(e)) {
			rb_info("reload: export %s: %u session(s) keep the previous settings until "
				"they end",
				e->conf.name, sessions_on(e));
		}
	}
	put_all(old, nr_old);
	rb_info("reload: %s: %d export(s): %d added, %d changed, %d removed; %d host secret(s)%s",
		path, nc.nr_exports, added, changed, removed, nc.nr_hosts,
		nc.target_secret_file[0] ? ", target secret" : "");
	rb_target_conf_free(&nc);
	return 0;
}
