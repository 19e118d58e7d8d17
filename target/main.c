/* SPDX-License-Identifier: MIT */
/*
 * rdmablk-target: loads the config, opens the exports, starts the reactors,
 * and runs the acceptor (listeners + signals) on the main thread.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "checked.h"
#include "listen_pause.h"
#include "log.h"
#include "log_limit.h"
#include "target.h"

#define RESCAN_NS 1000000000ull

struct listener {
	const struct rb_transport_ops *ops;
	struct rb_listener *l;
	const struct rb_listen_addr *addr;
	struct rb_listen_pause pause; /* out of descriptors: off the epoll set */
};

static void usage(FILE *f)
{
	fprintf(f, "Usage: rdmablk-target --config FILE [options]\n"
		   "  -c, --config FILE     target configuration (INI)\n"
		   "      --check           validate the configuration and exports, then exit\n"
		   "  -l, --log-level LEVEL error, warning, info, debug\n"
		   "  -p, --pidfile FILE    write the process id to FILE\n"
		   "  -h, --help            this text\n"
		   "  -V, --version         print the version\n"
		   "Transports built in: %s\n",
		rb_transport_names());
}

static int write_pidfile(const char *path)
{
	FILE *f = fopen(path, "w");

	if (!f || fprintf(f, "%ld\n", (long)getpid()) < 0 || fclose(f) != 0) {
		rb_err("pidfile %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * What the configuration lets the target hold (target(8), MEMORY): the
 * reactors' registered buffers and a fixed cost per connection up to
 * max-connections.  Sessions, export tables and logs are small beside it.
 */
static void log_mem_bound(const struct tgt_target *t, const struct listener *ls)
{
	const struct rb_target_conf *c = &t->conf;
	size_t incap = ((size_t)c->incapsule + 4095) / 4096 * 4096, conn = 0, pool, total;

	/* An incapsule of 0 still registers one page (reactor.c). */
	pool = (size_t)c->buffers * c->max_transfer + (c->incapsule ? 4 * c->buffers * incap : 4096);
	pool = (pool + TGT_ZERO_BUF_SIZE) * (size_t)t->nr_reactors;
	for (int i = 0; i < c->nr_listen; i++) {
		size_t m = tgt_conn_mem(c, ls[i].ops);

		conn = m > conn ? m : conn;
	}
	total = pool + conn * c->max_connections;
	rb_info("memory bound: registered buffers %zu KiB + max-connections %u x %zu KiB a "
		"connection = %zu KiB, beyond the process's base",
		pool >> 10, c->max_connections, (conn + 1023) >> 10, (total + 1023) >> 10);
}

static void hand_off(struct tgt_target *t, struct listener *ls, struct rb_conn *conn,
		     const void *priv, size_t priv_len, unsigned int *rr)
{
	static struct rb_log_limit refused = RB_LOG_LIMIT_INIT("refused connection requests",
							       RB_LOG_WARN);
	struct rb_cm_rej rej;
	struct tgt_conn_msg *m;
	const struct rb_cm_req2 *cr = priv;
	struct rb_validate_err err;
	enum rb_cm_reject_reason reason;
	char peer[128];
	uint16_t qid;

	ls->ops->conn_peer(conn, peer, sizeof(peer));
	/* Before a reactor sees it: the session lookup there trusts the rest. */
	reason = rb_check_cm_req(priv, priv_len, &err);
	if (reason == RB_REJ_BAD_VERSION) {
		rb_log_limited(&refused, peer, RB_LOG_WARN,
			       "%s peer %s: protocol version %llu refused: this target requires "
			       "version %u (authentication)",
			       ls->ops->name, peer, (unsigned long long)err.value, RB_PROTO_VERSION);
		rej.reason = rb_le16(reason);
		ls->ops->reject(conn, &rej, sizeof(rej));
		return;
	}
	if (reason != RB_REJ_NONE) {
		rb_log_limited(&refused, peer, RB_LOG_WARN,
			       "%s peer %s: connection request rejected: %s (field %s = %llu)",
			       ls->ops->name, peer, rb_reject_name(reason), err.field,
			       (unsigned long long)err.value);
		rej = rb_cm_rej_make(reason);
		ls->ops->reject(conn, &rej, sizeof(rej));
		return;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		rej = rb_cm_rej_make(RB_REJ_NO_RESOURCES);
		ls->ops->reject(conn, &rej, sizeof(rej));
		return;
	}
	m->ops = ls->ops;
	m->conn = conn;
	memcpy(&m->req, cr, sizeof(m->req));
	qid = rb_from_le16(cr->qid);
	/* Spread a session's I/O queues over reactors; admin queues round robin. */
	if (qid)
		tgt_reactor_post_conn(&t->reactors[(qid - 1) % t->nr_reactors], m);
	else
		tgt_reactor_post_conn(&t->reactors[(*rr)++ % (unsigned int)t->nr_reactors], m);
}

static void accept_all(struct tgt_target *t, struct listener *ls, unsigned int *rr)
{
	for (;;) {
		struct rb_conn *conn;
		const void *priv;
		size_t priv_len;
		int ret = ls->ops->listener_get(ls->l, &conn, &priv, &priv_len);

		if (ret == -EAGAIN)
			return;
		if (ret < 0) {
			/* EMFILE and the like: the connection stays in the backlog
			 * and the listener readable, so trying again at once would
			 * spin.  Leave it alone for a while. */
			rb_warn("%s listener: %s; not accepting for %u ms", ls->ops->name,
				strerror(-ret), RB_LISTEN_PAUSE_MS);
			ret = rb_listen_pause(&ls->pause, rb_clock_ms(), RB_LISTEN_PAUSE_MS);
			if (ret < 0)
				rb_err("listener epoll_ctl del: %s", strerror(-ret));
			return;
		}
		hand_off(t, ls, conn, priv, priv_len, rr);
	}
}

static int open_listeners(struct tgt_target *t, struct listener *ls, int epfd)
{
	for (int i = 0; i < t->conf.nr_listen; i++) {
		const struct rb_listen_addr *a = &t->conf.listen[i];
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = (uint32_t)i + 1 };
		int ret;

		ls[i].addr = a;
		ls[i].ops = rb_transport_find(a->transport);
		if (!ls[i].ops) {
			rb_err("listen %s://%s:%u: transport not built in (have: %s)", a->transport,
			       a->ep.host, a->ep.port, rb_transport_names());
			return -EPROTONOSUPPORT;
		}
		ret = ls[i].ops->listen(&a->ep, &t->conf.topts, &ls[i].l);
		if (ret) {
			rb_err("listen %s://%s:%u: %s", a->transport, a->ep.host, a->ep.port,
			       strerror(-ret));
			return ret;
		}
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, ls[i].ops->listener_fd(ls[i].l), &ev) < 0)
			return -errno;
		rb_listen_pause_init(&ls[i].pause, epfd, ls[i].ops->listener_fd(ls[i].l), &ev);
		rb_info("listening on %s://%s:%u", a->transport, a->ep.host, a->ep.port);
	}
	return 0;
}

static void close_listeners(struct tgt_target *t, struct listener *ls)
{
	for (int i = 0; i < t->conf.nr_listen; i++)
		if (ls[i].l)
			ls[i].ops->listener_close(ls[i].l);
}

static void dump_one(const struct tgt_export *e, void *arg)
{
	(void)arg;
	tgt_export_dump_stats(e);
}

static void notify_ready(struct tgt_target *t)
{
	int n = tgt_exports_count(t);

	sd_notifyf(0, "READY=1\nSTATUS=serving %d export(s) on %d listener(s)", n,
		   t->conf.nr_listen);
}

/* SIGHUP: re-read the configuration, telling systemd while it happens. */
static void reload(struct tgt_target *t, const char *config, bool keep_log_level)
{
	sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu", (unsigned long long)rb_clock_ns() / 1000);
	rb_info("SIGHUP: reloading %s", config);
	tgt_reload(t, config, keep_log_level);
	notify_ready(t);
}

/* Once a second: let each listener's transport notice removed devices, and
 * sum up rate-limited log lines of a flood that stopped. */
static void rescan(struct tgt_target *t, struct listener *ls, uint64_t *next_ns)
{
	uint64_t now = rb_clock_ns();

	if (now < *next_ns)
		return;
	*next_ns = now + RESCAN_NS;
	rb_log_limits_flush();
	for (int i = 0; i < t->conf.nr_listen; i++)
		ls[i].ops->rescan();
	/* A flood of refusals that stopped still gets its summary line. */
	rb_log_limits_flush();
}

/* Watch the listeners whose pause is over again; returns the longest the
 * main loop may sleep so that the next one resumes on time. */
static int resume_listeners(struct tgt_target *t, struct listener *ls)
{
	uint64_t now = rb_clock_ms();
	int wait_ms = (int)(RESCAN_NS / 1000000);

	for (int i = 0; i < t->conf.nr_listen; i++) {
		int ret = rb_listen_resume(&ls[i].pause, now, RB_LISTEN_PAUSE_MS, &wait_ms);

		if (ret < 0)
			rb_err("listener epoll_ctl add: %s", strerror(-ret));
	}
	return wait_ms;
}

/* The main thread's loop: accept connections until SIGTERM/SIGINT. */
static int serve(struct tgt_target *t, int sfd, struct listener *ls, int epfd,
		 const char *config, bool keep_log_level)
{
	struct epoll_event evs[8];
	unsigned int rr = 0;
	uint64_t next_scan = rb_clock_ns() + RESCAN_NS;
	int wait_ms = (int)(RESCAN_NS / 1000000);

	for (;;) {
		int n = epoll_wait(epfd, evs, 8, wait_ms);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		rescan(t, ls, &next_scan);
		wait_ms = resume_listeners(t, ls);
		for (int i = 0; i < n; i++) {
			struct signalfd_siginfo si;

			if (evs[i].data.u32 != 0) {
				accept_all(t, &ls[evs[i].data.u32 - 1], &rr);
				continue;
			}
			if (read(sfd, &si, sizeof(si)) != sizeof(si))
				continue;
			if (si.ssi_signo == SIGUSR1) {
				tgt_exports_foreach(t, dump_one, NULL);
				rb_info("auth: %llu failure(s)",
					(unsigned long long)atomic_load(&t->auth_failures));
				continue;
			}
			if (si.ssi_signo == SIGHUP) {
				reload(t, config, keep_log_level);
				continue;
			}
			rb_info("signal %d: draining in-flight I/O and stopping", si.ssi_signo);
			return 0;
		}
	}
}

static void warn_memlock(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    rl.rlim_cur < 64ull << 20)
		rb_info("memlock limit is %llu KiB; RDMA registration may need more "
			"(ulimit -l unlimited, or LimitMEMLOCK=infinity)",
			(unsigned long long)(rl.rlim_cur >> 10));
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "check", no_argument, NULL, 'C' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "pidfile", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *config = NULL, *pidfile = NULL, *level = NULL;
	static struct tgt_target t;
	struct listener ls[RB_MAX_LISTEN] = { 0 };
	struct epoll_event ev = { .events = EPOLLIN, .data.u32 = 0 };
	char errbuf[512];
	int check = 0, opt, ret, sfd, epfd, started = 0;
	sigset_t mask;

	rb_log_init("rdmablk-target", RB_LOG_INFO);
	while ((opt = getopt_long(argc, argv, "c:l:p:hV", opts, NULL)) != -1) {
		switch (opt) {
		case 'c': config = optarg; break;
		case 'C': check = 1; break;
		case 'l': level = optarg; break;
		case 'p': pidfile = optarg; break;
		case 'h': usage(stdout); return 0;
		case 'V': printf("rdmablk-target %s\n", PACKAGE_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (!config || optind != argc) {
		usage(stderr);
		return 2;
	}
	rb_target_conf_init(&t.conf);
	if (rb_target_conf_load(&t.conf, config, errbuf, sizeof(errbuf)) < 0) {
		fprintf(stderr, "rdmablk-target: %s\n", errbuf);
		return 1;
	}
	rb_log_set_level((enum rb_log_level)t.conf.log_level);
	if (level) {
		enum rb_log_level lv;

		if (rb_log_parse_level(level, &lv) < 0) {
			fprintf(stderr, "rdmablk-target: --log-level: unknown level '%s'\n", level);
			return 2;
		}
		rb_log_set_level(lv);
	}
	if (t.conf.nr_exports == 0)
		rb_warn("%s: no [export NAME] sections: nothing to serve", config);
	{
		struct tgt_auth *auth;

		/* A key file anyone else may read is refused, naming it. */
		if (tgt_auth_load(&t.conf, &auth, errbuf, sizeof(errbuf)) < 0) {
			fprintf(stderr, "rdmablk-target: %s: %s\n", config, errbuf);
			return 1;
		}
		tgt_auth_warn(&t.conf);
		if (tgt_exports_open(&t, &t.conf) < 0) {
			tgt_auth_free(auth);
			return 1;
		}
		tgt_auth_install(&t, auth);
	}
	if (check) {
		printf("%s: configuration OK, %d export(s)\n", config, t.nr_exports);
		tgt_exports_close(&t);
		return 0;
	}
	warn_memlock();

	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGUSR1);
	sigaddset(&mask, SIGHUP);
	/* Block before threads start so only the signalfd sees them. */
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	sfd = signalfd(-1, &mask, SFD_CLOEXEC);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (sfd < 0 || epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, sfd, &ev) < 0) {
		rb_err("signalfd/epoll: %s", strerror(errno));
		return 1;
	}

	t.nr_reactors = t.conf.threads;
	t.reactors = calloc((size_t)t.nr_reactors, sizeof(*t.reactors));
	if (!t.reactors) {
		ret = -ENOMEM;
		goto out_stop;
	}
	for (; started < t.nr_reactors; started++) {
		ret = tgt_reactor_start(&t.reactors[started], &t, started);
		if (ret)
			goto out_stop;
	}
	ret = open_listeners(&t, ls, epfd);
	if (ret)
		goto out_stop;
	if (pidfile && write_pidfile(pidfile) < 0) {
		ret = -EIO;
		goto out_stop;
	}
	notify_ready(&t);
	log_mem_bound(&t, ls);
	rb_info("ready: %d export(s), %d reactor(s)", t.nr_exports, t.nr_reactors);
	ret = serve(&t, sfd, ls, epfd, config, level != NULL);
	sd_notify(0, "STOPPING=1");

out_stop:
	atomic_store(&t.draining, true);
	close_listeners(&t, ls);
	for (int i = 0; i < started; i++)
		tgt_reactor_stop(&t.reactors[i]);
	for (int i = 0; i < started; i++)
		tgt_reactor_join(&t.reactors[i]);
	free(t.reactors);
	tgt_exports_close(&t);
	rb_target_conf_free(&t.conf);
	close(epfd);
	close(sfd);
	if (pidfile)
		unlink(pidfile);
	rb_info("stopped");
	return ret ? 1 : 0;
}
