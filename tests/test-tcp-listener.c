/* SPDX-License-Identifier: MIT */
/*
 * The tcp transport's listener against silent, slow and garbage peers and
 * connect floods, and listening on the any address.  Transport selection as test-tcp-transport;
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

/* ---- connect floods (max_half_open 8: a quarter, 2, per source) ---------- */

#define FLOOD_MAX 8
#define FLOOD_SHARE 2

static const uint8_t hello_hdr[32] = { 1, [24] = 0x01, 0, 0, 0x50, 0x43, 0x54, 0x42, 0x52 };

/*
 * A connection from 127.0.0.src (loopback holds all of 127/8).  It closes
 * with a reset: a TIME_WAIT left on 127.0.0.src:port would make a later
 * bind of the any address to that port fail (free_port only checks
 * 127.0.0.1).
 */
static int raw_connect_from(int src)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(lep.port) };
	struct sockaddr_in me = { .sin_family = AF_INET };
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	me.sin_addr.s_addr = htonl(0x7f000000u | (uint32_t)src);
	inet_pton(AF_INET, lep.host, &sa.sin_addr);
	if (bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0 ||
	    connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Run the listener (rejecting what it yields) until it closed one of fds. */
static bool pump_until_closed(struct rb_listener *l, const int *fds, int n)
{
	struct rb_conn *req;
	const void *priv;
	size_t plen;

	for (uint64_t end = rb_clock_ms() + WAIT_MS; rb_clock_ms() < end;) {
		struct pollfd pf = { .fd = T->listener_fd(l), .events = POLLIN };

		while (T->listener_get(l, &req, &priv, &plen) == 0)
			T->reject(req, NULL, 0);
		for (int i = 0; i < n; i++)
			if (raw_closed(fds[i]))
				return true;
		poll(&pf, 1, 10);
	}
	return false;
}

enum { F_PASS, F_FAIL, F_SLOW };

/*
 * Each scenario opens a witness connection first, then makes the listener
 * drop a younger one.  The HELLO timeout would close the witness first, so
 * a witness still open proves the drop was the flood policy's choice -- as
 * long as the whole scenario took less than that timeout (else F_SLOW:
 * retried).
 */
static int flood_scenario(struct rb_listener *l, int kind, const char *what)
{
	uint64_t t0 = rb_clock_ms();
	int fds[16], n = 0, witness, victims[3], nv = 1, res = F_FAIL;
	bool gone, alive;

	/* The witness sent part of a valid HELLO (kinds 1, 3) or nothing. */
	witness = raw_connect_from(kind == 2 ? 5 : 1);
	if (witness < 0)
		goto out;
	if ((kind & 1) && send(witness, hello_hdr, 10, MSG_NOSIGNAL) != 10)
		goto out;
	switch (kind) {
	case 0: /* one source over its share loses its own oldest */
	case 1:
		for (int i = 0; i < 3; i++)
			fds[n++] = raw_connect_from(2);
		victims[0] = fds[0];
		break;
	case 2: /* bytes that cannot start a HELLO close the socket at once */
		fds[n++] = raw_connect_from(4);
		if (fds[0] >= 0 && send(fds[0], "X", 1, MSG_NOSIGNAL) != 1)
			goto out;
		victims[0] = fds[0];
		break;
	case 3: /* a full table drops from the source holding the most */
		for (int s = 10; s < 13; s++)
			for (int i = 0; i < FLOOD_SHARE; i++)
				fds[n++] = raw_connect_from(s);
		fds[n++] = raw_connect_from(13); /* the table is full now */
		fds[n++] = raw_connect_from(14);
		/* Which of the three is "the most" is the listener's choice. */
		nv = 3;
		for (int i = 0; i < nv; i++)
			victims[i] = fds[i * FLOOD_SHARE];
		break;
	}
	for (int i = 0; i < n; i++)
		if (fds[i] < 0)
			goto out;
	gone = pump_until_closed(l, victims, nv);
	alive = !raw_closed(witness);
	if (rb_clock_ms() - t0 >= 800) {
		res = F_SLOW;
		goto out;
	}
	res = gone && alive ? F_PASS : F_FAIL;
	if (res == F_PASS && kind == 1) {
		/* and its HELLO, completed, makes a request */
		struct rb_conn *req = NULL;
		const void *priv;
		size_t plen = 1;

		if (send(witness, hello_hdr + 10, sizeof(hello_hdr) - 10, MSG_NOSIGNAL) ==
		    sizeof(hello_hdr) - 10)
			req = get_request(l, &priv, &plen, NULL);
		if (!req || plen)
			res = F_FAIL;
		if (req)
			T->reject(req, NULL, 0);
	}
	if (res == F_FAIL)
		printf("# %s: victim %s, witness %s\n", what, gone ? "closed" : "open",
		       alive ? "open" : "closed");
out:
	if (witness >= 0)
		close(witness);
	for (int i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return res;
}

/*
 * 6 of 8 places taken, by 3 sources at their share (2): their deadline
 * drops from 1 s to 250 ms, while a witness from a source holding one
 * keeps its second.  Closed less than 1 s after connecting proves the
 * shorter one (the 1 s deadline runs from accept, which comes later);
 * later is F_SLOW (or the old listener).
 */
static int pressure_scenario(struct rb_listener *l)
{
	uint64_t t0 = rb_clock_ms();
	int fds[7], n = 0, res = F_FAIL;
	bool gone;

	for (; n < 7; n++) {
		fds[n] = raw_connect_from(n < 6 ? 20 + n / FLOOD_SHARE : 30);
		if (fds[n] < 0)
			goto out;
	}
	gone = pump_until_closed(l, fds, 1);
	res = gone && rb_clock_ms() - t0 < 1000 ? F_PASS : F_SLOW;
	if (res == F_PASS && raw_closed(fds[6])) {
		printf("# the witness holding one was closed at the short deadline too\n");
		res = F_FAIL;
	}
out:
	while (n--)
		close(fds[n]);
	return res;
}

static void test_flood_policy(void)
{
	static const char *const what[] = {
		"a source over its share loses its own oldest, not another's",
		"a partial valid HELLO outlives the flood's silent sockets and completes",
		"a first byte that cannot start a HELLO closes the socket at once",
		"a full table drops from the source holding the most",
	};
	struct rb_endpoint save = lep;
	struct rb_transport_opts save_opts = opts;

	if (strcmp(lep.host, "127.0.0.1") != 0) {
		printf("# flood policy cases need a listener on 127.0.0.1\n");
		return;
	}
	opts.max_half_open = FLOOD_MAX;
	for (int kind = 0; kind < 4; kind++) {
		int res = F_SLOW;

		for (int try = 0; try < 5 && res == F_SLOW; try++) {
			struct rb_listener *l = NULL;

			if (harness_listen(&l)) {
				res = F_FAIL;
				break;
			}
			res = flood_scenario(l, kind, what[kind]);
			T->listener_close(l);
		}
		ok(res == F_PASS, "%s%s", what[kind], res == F_SLOW ? " (too slow 5 times)" : "");
	}
	{
		int res = F_SLOW;

		for (int try = 0; try < 5 && res == F_SLOW; try++) {
			struct rb_listener *l = NULL;

			if (harness_listen(&l)) {
				res = F_FAIL;
				break;
			}
			res = pressure_scenario(l);
			T->listener_close(l);
		}
		ok(res == F_PASS, "a 3/4 full table gives sources holding several 250 ms, others 1 s%s",
		   res == F_SLOW ? " (not closed within 1 s in 5 tries)" : "");
	}
	opts = save_opts;
	lep = save;
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
	test_flood_policy();
	T->listener_close(l);
	return tap_done();
}
