/* SPDX-License-Identifier: MIT */
/*
 * The NBD frontend's run (ublk_serve's counterpart): open the listeners,
 * the kernel device and the session, then the main thread's loop --
 * signals, accepting clients (paused while out of descriptors), the
 * handshake limit, transport rescans, a kernel device disconnected behind
 * our back -- and the shutdown in the order the kernel needs.
 */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "listen_pause.h"
#include "log.h"
#include "nbd_device.h"
#include "nbd_server.h"

#define DRAIN_MAX_MS 10000u
#define DETACH_WAIT_MS 5000u /* for the kernel to drop /dev/nbdN */
#define KDEV_CHECK_MS 2000u /* how often to look whether /dev/nbdN is still ours */
#define RESCAN_MS 1000u /* how often the transport looks for removed devices */

/*
 * Out of descriptors (or memory) the connection stays in the backlog and
 * the listener readable: watched, it would wake the loop straight away.
 * Take it off the epoll set for a while; one log line per pause.
 */
static void pause_listener(const struct nbd_listeners *ls, int fd, int err,
			   struct rb_listen_pause *pause)
{
	char name[128];
	int i = 0, ret;

	while (i < ls->nr && ls->fds[i] != fd)
		i++;
	if (i == ls->nr)
		return; /* not a listener */
	nbd_listener_name(fd, name, sizeof(name));
	ret = rb_listen_pause(&pause[i], rb_now_ms(), RB_LISTEN_PAUSE_MS);
	if (ret < 0) {
		rb_err("nbd listener %s: cannot pause it (epoll_ctl del: %s) after accept: %s",
		       name, strerror(-ret), strerror(-err));
		return;
	}
	rb_warn("nbd listener %s: accept: %s; accepting again in %u ms", name, strerror(-err),
		RB_LISTEN_PAUSE_MS);
}

/* Watch the listeners whose pause is over again; returns the longest the
 * main loop may sleep so that the next one resumes on time. */
static int resume_listeners(const struct nbd_listeners *ls, struct rb_listen_pause *pause)
{
	uint64_t now = rb_now_ms();
	int wait_ms = (int)RESCAN_MS;

	for (int i = 0; i < ls->nr; i++) {
		int ret = rb_listen_resume(&pause[i], now, RB_LISTEN_PAUSE_MS, &wait_ms);

		if (ret < 0) {
			char name[128];

			nbd_listener_name(ls->fds[i], name, sizeof(name));
			rb_err("nbd listener %s: cannot resume it (epoll_ctl add: %s); trying "
			       "again in %u ms",
			       name, strerror(-ret), RB_LISTEN_PAUSE_MS);
		}
	}
	return wait_ms;
}

int nbd_serve(const struct rb_session_params *p, const struct nbd_serve_cfg *cfg, int sfd)
{
	struct nbd_listeners ls;
	struct nbd_server *srv = NULL;
	struct nbd_kdev *kdev = NULL;
	struct ini_session *s = NULL;
	struct epoll_event ev;
	uint32_t drain_ms;
	uint64_t next_scan, next_kdev;
	struct rb_listen_pause pause[NBD_MAX_LISTEN]; /* per listener */
	int epfd = -1, wait_ms = (int)RESCAN_MS, ret;

	/* Sockets first: a bad or busy address fails before we touch the
	 * target; clients that connect early wait in the backlog. */
	nbd_listeners_init(&ls);
	if (cfg->socket && (ret = nbd_listen_unix(&ls, cfg->socket)))
		return ret;
	if (cfg->listen && (ret = nbd_listen_tcp(&ls, cfg->listen, cfg->listen_any)))
		goto out_close_listeners;
	/* Likewise a missing nbd module, no permission or a busy device. */
	if (cfg->device && (ret = nbd_kdev_open(cfg->device, &kdev)))
		goto out_close_listeners;
	ret = rb_session_open(p, &s);
	if (ret)
		goto out_close_listeners;
	ret = nbd_server_create(s, cfg->max_clients, &srv);
	if (ret)
		goto out_close_session;
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0) {
		ret = -errno;
		rb_err("epoll_create1: %s", strerror(errno));
		goto out_close_session;
	}
	ev = (struct epoll_event){ .events = EPOLLIN, .data.fd = sfd };
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, sfd, &ev) < 0)
		goto out_errno;
	for (int i = 0; i < ls.nr; i++) {
		ev = (struct epoll_event){ .events = EPOLLIN, .data.fd = ls.fds[i] };
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, ls.fds[i], &ev) < 0)
			goto out_errno;
		rb_listen_pause_init(&pause[i], epfd, ls.fds[i], &ev);
	}
	ret = rb_session_start(s);
	if (ret)
		goto out_close_epoll;
	/* Drain time: in-flight commands end within the command timeout. */
	drain_ms = p->timeout_ms + 1000 < DRAIN_MAX_MS ? p->timeout_ms + 1000 : DRAIN_MAX_MS;
	if (kdev) {
		ret = nbd_kdev_attach(kdev, srv, s, p->timeout_ms, p->ctrl_loss_tmo_ms);
		if (ret)
			goto out_stop_session;
		/* Scripts wait for this line: the device is live now. */
		printf("attached %s\n", nbd_kdev_name(kdev));
		fflush(stdout);
	}
	sd_notifyf(0, "READY=1\nSTATUS=serving %s from %s%s%s", rb_session_info(s)->name,
		   rb_session_target(s), kdev ? " as " : "", kdev ? nbd_kdev_name(kdev) : "");
	rb_info("ready: export '%s' from %s%s%s%s%s%s%s", rb_session_info(s)->name,
		rb_session_target(s), cfg->socket ? " on nbd unix socket " : "",
		cfg->socket ? cfg->socket : "", cfg->listen ? " on nbd tcp " : "",
		cfg->listen ? cfg->listen : "", kdev ? " as " : "",
		kdev ? nbd_kdev_name(kdev) : "");

	next_scan = rb_now_ms() + RESCAN_MS;
	next_kdev = rb_now_ms() + KDEV_CHECK_MS;
	for (;;) {
		struct epoll_event evs[8];
		int n = epoll_wait(epfd, evs, 8, wait_ms);
		bool stop = false;
		uint64_t now = rb_now_ms();
		int err;

		if (n < 0 && errno != EINTR) {
			rb_err("epoll_wait: %s", strerror(errno));
			break;
		}
		if (now >= next_scan) {
			next_scan = now + RESCAN_MS;
			p->ops->rescan();
			nbd_server_tick(srv);
		}
		wait_ms = resume_listeners(&ls, pause);
		/* With a kernel device, look now and then whether someone else
		 * disconnected it: then there is nothing left to serve. */
		if (kdev && now >= next_kdev) {
			next_kdev = now + KDEV_CHECK_MS;
			if (nbd_kdev_gone(kdev)) {
				rb_warn("%s was disconnected by someone else: shutting down",
					nbd_kdev_name(kdev));
				break;
			}
		}
		for (int i = 0; i < n; i++) {
			if (evs[i].data.fd == sfd) {
				struct signalfd_siginfo si;

				if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
					rb_info("signal %u: shutting down", si.ssi_signo);
					stop = true;
				}
			} else if ((err = nbd_server_accept(srv, evs[i].data.fd))) {
				pause_listener(&ls, evs[i].data.fd, err, pause);
			}
		}
		if (stop)
			break;
	}

	sd_notify(0, "STOPPING=1");
	/* A reconnect in progress parks the reactors the drain below needs. */
	rb_session_cancel_recovery(s);
	nbd_listeners_close(&ls);
	/* The kernel first: it sends NBD_CMD_DISC and closes its sockets,
	 * which the drain below then sees. */
	nbd_kdev_disconnect(kdev);
	nbd_server_shutdown(srv, drain_ms);
	nbd_kdev_wait_gone(kdev, DETACH_WAIT_MS);
	rb_session_stop(s);
	rb_session_close(s);
	nbd_server_free(srv);
	nbd_kdev_free(kdev);
	close(epfd);
	return 0;

out_stop_session:
	nbd_listeners_close(&ls);
	nbd_server_shutdown(srv, 1000);
	rb_session_stop(s);
	close(epfd);
	rb_session_close(s);
	nbd_server_free(srv);
	nbd_kdev_free(kdev);
	return ret;
out_errno:
	ret = -errno;
	rb_err("epoll_ctl: %s", strerror(errno));
out_close_epoll:
	close(epfd);
out_close_session:
	rb_session_close(s);
	nbd_server_free(srv);
out_close_listeners:
	nbd_kdev_free(kdev);
	nbd_listeners_close(&ls);
	return ret;
}
