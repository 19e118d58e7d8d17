/* SPDX-License-Identifier: MIT */
/*
 * Listening sockets for the NBD frontend: a Unix socket and/or TCP on
 * loopback.  NBD has no authentication or encryption, so TCP on anything
 * but loopback needs an explicit opt-in (--nbd-listen-any).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "nbd_server.h"
#include "uri.h"

#define LISTEN_BACKLOG 128

void nbd_listeners_init(struct nbd_listeners *ls)
{
	memset(ls, 0, sizeof(*ls));
	for (int i = 0; i < NBD_MAX_LISTEN; i++)
		ls->fds[i] = -1;
}

bool nbd_addr_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		const uint8_t *b = in6->sin6_addr.s6_addr;

		if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
			return true;
		/* ::ffff:127.x.y.z */
		return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && b[12] == 127;
	}
	return false;
}

void nbd_format_addr(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, len, "?");
	}
}

void nbd_listener_name(int fd, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
		snprintf(buf, len, "fd %d", fd);
	else if (ss.ss_family == AF_UNIX)
		snprintf(buf, len, "unix:%.100s", ((struct sockaddr_un *)&ss)->sun_path);
	else
		nbd_format_addr((struct sockaddr *)&ss, buf, len);
}

static int add_fd(struct nbd_listeners *ls, int fd)
{
	if (ls->nr == NBD_MAX_LISTEN) {
		close(fd);
		rb_err("nbd: too many listening sockets (max %d)", NBD_MAX_LISTEN);
		return -ENOSPC;
	}
	ls->fds[ls->nr++] = fd;
	return 0;
}

/* A socket file nobody accepts on is left over from a crash: replace it. */
static int remove_stale(const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, ret;

	if (lstat(path, &st) < 0)
		return -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	ret = connect(fd, (struct sockaddr *)&sun, sizeof(sun));
	close(fd);
	if (ret == 0)
		return -EADDRINUSE;
	if (errno != ECONNREFUSED)
		return -errno;
	if (unlink(path) < 0)
		return -errno;
	return 0;
}

int nbd_listen_unix(struct nbd_listeners *ls, const char *path)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd, ret;

	if (!path[0] || strlen(path) >= sizeof(sun.sun_path)) {
		rb_err("--nbd-socket '%s': path must be 1..%zu bytes", path,
		       sizeof(sun.sun_path) - 1);
		return -EINVAL;
	}
	memcpy(sun.sun_path, path, strlen(path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ret = -errno;
		rb_err("--nbd-socket %s: socket: %s", path, strerror(errno));
		return ret;
	}
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		if (errno != EADDRINUSE)
			goto out_errno;
		ret = remove_stale(path);
		if (ret) {
			rb_err("--nbd-socket %s: %s", path,
			       ret == -EADDRINUSE ? "in use by another running server" :
			       ret == -EEXIST	  ? "exists and is not a socket" :
						    strerror(-ret));
			close(fd);
			return ret == -EEXIST ? -EADDRINUSE : ret;
		}
		if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0)
			goto out_errno;
	}
	if (listen(fd, LISTEN_BACKLOG) < 0)
		goto out_unlink;
	snprintf(ls->unix_path, sizeof(ls->unix_path), "%s", path);
	rb_info("nbd: listening on unix socket %s", path);
	return add_fd(ls, fd);

out_unlink:
	ret = -errno;
	unlink(path);
	goto out_close;
out_errno:
	ret = -errno;
out_close:
	rb_err("--nbd-socket %s: %s", path, strerror(-ret));
	close(fd);
	return ret;
}

static int listen_one(struct nbd_listeners *ls, const struct addrinfo *ai, const char *what)
{
	char addr[96];
	int fd, one = 1, ret;

	nbd_format_addr(ai->ai_addr, addr, sizeof(addr));
	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
		    ai->ai_protocol);
	if (fd < 0)
		goto out_err;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ai->ai_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, LISTEN_BACKLOG) < 0)
		goto out_close;
	rb_info("nbd: listening on tcp %s", addr);
	return add_fd(ls, fd);

out_close:
	ret = -errno;
	close(fd);
	errno = -ret;
out_err:
	ret = -errno;
	rb_err("--nbd-listen %s: %s: %s", what, addr, strerror(errno));
	return ret;
}

int nbd_listen_tcp(struct nbd_listeners *ls, const char *hostport, bool allow_any)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *res, *ai;
	struct rb_endpoint ep;
	char err[256], port[8];
	int ret, ok = 0;

	ret = rb_parse_hostport(hostport, &ep, err, sizeof(err));
	if (ret) {
		rb_err("--nbd-listen %s: %s (want HOST:PORT, e.g. 127.0.0.1:10809)", hostport, err);
		return ret;
	}
	snprintf(port, sizeof(port), "%u", ep.port);
	ret = getaddrinfo(ep.host, port, &hints, &res);
	if (ret) {
		rb_err("--nbd-listen %s: %s", hostport, gai_strerror(ret));
		return -EINVAL;
	}
	/* Refuse before binding anything: all or nothing. */
	for (ai = res; ai && !allow_any; ai = ai->ai_next) {
		if (!nbd_addr_is_loopback(ai->ai_addr)) {
			char addr[96];

			nbd_format_addr(ai->ai_addr, addr, sizeof(addr));
			rb_err("--nbd-listen %s: %s is not a loopback address; NBD has no "
			       "authentication or encryption, so listening there needs "
			       "--nbd-listen-any",
			       hostport, addr);
			freeaddrinfo(res);
			return -EPERM;
		}
	}
	for (ai = res; ai; ai = ai->ai_next) {
		ret = listen_one(ls, ai, hostport);
		if (ret == 0)
			ok++;
		else if (ret != -EADDRNOTAVAIL && ret != -EAFNOSUPPORT)
			break; /* e.g. port in use: an error, not a missing stack */
	}
	freeaddrinfo(res);
	if (!ok || (ret && ret != -EADDRNOTAVAIL && ret != -EAFNOSUPPORT))
		return ret ? ret : -EADDRNOTAVAIL;
	return 0;
}

void nbd_listeners_close(struct nbd_listeners *ls)
{
	for (int i = 0; i < ls->nr; i++)
		if (ls->fds[i] >= 0)
			close(ls->fds[i]);
	if (ls->unix_path[0] && unlink(ls->unix_path) < 0 && errno != ENOENT)
		rb_warn("nbd: remove %s: %s", ls->unix_path, strerror(errno));
	nbd_listeners_init(ls);
}
