/* SPDX-License-Identifier: MIT */
/*
 * The tcp transport's listener against silent, slow and garbage peers, and
 * listening on the any address.  Transport selection as test-tcp-transport;
 * other transports skip (their connection manager is the kernel's).
 */
#include "config.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "log.h"
#include "tap.h"
#include "transport.h"
#include "transport-harness.h"

static int raw_connect(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(lep.port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	inet_pton(AF_INET, lep.host, &sa.sin_addr);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* true once the listener closed our raw socket */
static bool raw_closed(int fd)
{
	char c;
	ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);

	return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

static void test_listener_robust(struct rb_listener *l)
{
	/* Same layout as the transport's header: a HELLO with 4 bytes of data. */
	uint8_t hello[36] = { 1, 0, 0, 0, 4, 0, 0, 0 };
	uint64_t magic = 0x5242544350000001ull, t0, t1;
	struct rb_conn *req;
	const void *priv;
	size_t plen;
	int silent, bad, slow, ret;
	bool closed = false, got = false;

	silent = raw_connect();
	ok(silent >= 0, "raw connect");
	if (silent < 0)
		return;
	t0 = rb_clock_ms();
	ret = T->listener_get(l, &req, &priv, &plen);
	while (ret == -EAGAIN && rb_clock_ms() - t0 < 100)
		ret = T->listener_get(l, &req, &priv, &plen);
	t1 = rb_clock_ms();
	is_int(ret, -EAGAIN, "silent peer: listener_get returns -EAGAIN");
	/* A blocking call would never return (the peer stays silent): any
	 * bound a loaded machine keeps proves it. */
	ok(t1 - t0 < 30000, "silent peer: listener_get does not block");

	/* A HELLO that arrives in two pieces still makes a request. */
	memcpy(hello + 24, &magic, 8);
	memcpy(hello + 32, "slow", 4);
	slow = raw_connect();
	ok(slow >= 0 && send(slow, hello, 10, MSG_NOSIGNAL) == 10, "slow peer sends part");
	for (int i = 0; i < 5; i++) {
		struct pollfd pf = { .fd = T->listener_fd(l), .events = POLLIN };

		poll(&pf, 1, 20);
		ret = T->listener_get(l, &req, &priv, &plen);
		ok(ret == -EAGAIN || i, "partial HELLO: no request yet");
		if (ret == 0)
			T->reject(req, NULL, 0);
	}
	ok(send(slow, hello + 10, sizeof(hello) - 10, MSG_NOSIGNAL) == sizeof(hello) - 10,
	   "slow peer sends the rest");
	req = get_request(l, &priv, &plen, NULL);
	got = req && plen == 4 && memcmp(priv, "slow", 4) == 0;
	ok(got, "request once the HELLO is complete");
	if (req)
		T->reject(req, NULL, 0);
	close(slow);

	bad = raw_connect();
	ok(bad >= 0 && send(bad, "GET / HTTP/1.0\r\n\r\n0123456789abcdef", 34, MSG_NOSIGNAL) == 34,
	   "garbage peer connects");
	for (uint64_t end = rb_clock_ms() + 60000; rb_clock_ms() < end && !raw_closed(bad);) {
		struct pollfd pf = { .fd = T->listener_fd(l), .events = POLLIN };

		poll(&pf, 1, 20);
		if (T->listener_get(l, &req, &priv, &plen) == 0)
			T->reject(req, NULL, 0);
	}
	ok(raw_closed(bad), "garbage peer is closed");
	close(bad);

	for (uint64_t end = t0 + 60000; rb_clock_ms() < end && !closed;) {
		struct pollfd pf = { .fd = T->listener_fd(l), .events = POLLIN };

		poll(&pf, 1, 50);
		if (T->listener_get(l, &req, &priv, &plen) == 0)
			T->reject(req, NULL, 0);
		closed = raw_closed(silent);
	}
	t1 = rb_clock_ms();
	ok(closed, "silent peer is closed by the listener");
	/* Not before its 1 s; how late depends on the machine's load. */
	ok(t1 - t0 >= 900, "after its 1 s HELLO deadline (%llu ms)",
	   (unsigned long long)(t1 - t0));
	close(silent);
	{
		struct pollfd pf = { .fd = T->listener_fd(l), .events = POLLIN };

		while (T->listener_get(l, &req, &priv, &plen) == 0)
			T->reject(req, NULL, 0);
		ok(poll(&pf, 1, 0) == 0, "idle listener fd is not readable");
	}
}

static void test_listen_any(void)
{
	struct rb_listener *l2 = NULL;
	struct rb_endpoint save = lep;
	struct pair pp;
	uint16_t port;
	int ret;

	if (free_port("127.0.0.1", &port)) {
		ok(0, "free port for any-address listener");
		return;
	}
	lep.host[0] = '\0';
	lep.port = port;
	/* The port was free on 127.0.0.1 a moment ago; another process may
	 * take it (on any address) before we listen: try a few. */
	for (int i = 0; i < 10; i++) {
		ret = T->listen(&lep, &opts, &l2);
		if (ret != -EADDRINUSE || free_port("127.0.0.1", &port))
			break;
		lep.port = port;
	}
	is_int(ret, 0, "listen on the any address");
	snprintf(lep.host, sizeof(lep.host), "127.0.0.1");
	if (l2) {
		is_int(pair_open(l2, &pp), 0, "IPv4 connect to the any-address listener");
		pair_close(&pp, NULL, 0);
		T->listener_close(l2);
	}
	lep = save;
}

int main(int argc, char **argv)
{
	struct rb_listener *l = NULL;
	int ret = harness_init(argc, argv, "test-tcp-listener");

	if (ret)
		return ret;
	if (!is_tcp) {
		printf("# SKIP the listener tests are for the tcp transport\n");
		return 77;
	}
	ret = harness_listen(&l);
	if (ret)
		return ret;
	test_listener_robust(l);
	test_listen_any();
	T->listener_close(l);
	return tap_done();
}
