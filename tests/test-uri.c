/* SPDX-License-Identifier: MIT */
/* rb_uri_parse and friends: tables of good and bad input. */
#include "config.h"

#include <errno.h>
#include <string.h>

#include "tap.h"
#include "uri.h"

static const struct {
	const char *uri;
	const char *transport, *host;
	unsigned int port;
	const char *export_name;
} good[] = {
	{ "tcp://127.0.0.1/disk0", "tcp", "127.0.0.1", RB_DEFAULT_PORT, "disk0" },
	{ "tcp://127.0.0.1:4521/disk0", "tcp", "127.0.0.1", 4521, "disk0" },
	{ "rdma://192.0.2.1/vol", "rdma", "192.0.2.1", RB_DEFAULT_PORT, "vol" },
	{ "rdma://192.0.2.1:1/vol", "rdma", "192.0.2.1", 1, "vol" },
	{ "tcp://[::1]:65535/x", "tcp", "::1", 65535, "x" },
	{ "tcp://[::1]/x", "tcp", "::1", RB_DEFAULT_PORT, "x" },
	{ "rdma://[fe80::1:2]/x", "rdma", "fe80::1:2", RB_DEFAULT_PORT, "x" },
	{ "tcp://[::ffff:192.0.2.1]:9/x", "tcp", "::ffff:192.0.2.1", 9, "x" },
	{ "tcp://storage-01.example.com/data", "tcp", "storage-01.example.com", RB_DEFAULT_PORT,
	  "data" },
	{ "tcp://localhost:4520/a_b", "tcp", "localhost", 4520, "a_b" },
	{ "TCP://host/x", "tcp", "host", RB_DEFAULT_PORT, "x" },
	{ "Rdma://host/x", "rdma", "host", RB_DEFAULT_PORT, "x" },
	{ "tcp://host/a%2Fb", "tcp", "host", RB_DEFAULT_PORT, "a/b" },
	{ "tcp://host/a%2fb", "tcp", "host", RB_DEFAULT_PORT, "a/b" },
	{ "tcp://host/a/b", "tcp", "host", RB_DEFAULT_PORT, "a/b" },
	{ "tcp://host/my%20disk", "tcp", "host", RB_DEFAULT_PORT, "my disk" },
	{ "tcp://host/%41%42c", "tcp", "host", RB_DEFAULT_PORT, "ABc" },
	{ "tcp://host/caf%C3%A9", "tcp", "host", RB_DEFAULT_PORT, "caf\xc3\xa9" },
	{ "tcp://host/~x-y.z:@!$&'()*+,;=", "tcp", "host", RB_DEFAULT_PORT, "~x-y.z:@!$&'()*+,;=" },
	{ "tcp://host//lead", "tcp", "host", RB_DEFAULT_PORT, "/lead" },
	{ "tcp://host:04520/x", "tcp", "host", 4520, "x" },
	{ "tcp://a/x", "tcp", "a", RB_DEFAULT_PORT, "x" },
};

static const struct {
	const char *uri;
	const char *err;
} bad[] = {
	{ "", "uri: missing scheme (want tcp:// or rdma://)" },
	{ "127.0.0.1/disk", "uri: missing scheme (want tcp:// or rdma://)" },
	{ "nbd://host/x", "uri: unknown scheme 'nbd' (want tcp:// or rdma://)" },
	{ "tcp:/host/x", "uri: missing scheme (want tcp:// or rdma://)" },
	{ "tcps://host/x", "uri: unknown scheme 'tcps' (want tcp:// or rdma://)" },
	{ "://host/x", "uri: unknown scheme '' (want tcp:// or rdma://)" },
	{ "tcp:///x", "uri: empty host" },
	{ "tcp://:4520/x", "uri: empty host" },
	{ "tcp://[]/x", "uri: empty host" },
	{ "tcp://host", "uri: missing /EXPORT" },
	{ "tcp://host:4520", "uri: missing /EXPORT" },
	{ "tcp://host/", "uri: empty export name" },
	{ "tcp://host:/x", "uri: empty port" },
	{ "tcp://host:0/x", "uri: port 0 out of range (1..65535)" },
	{ "tcp://host:65536/x", "uri: port 65536 out of range (1..65535)" },
	{ "tcp://host:999999999999999999999/x",
	  "uri: port 999999999999999999999 out of range (1..65535)" },
	{ "tcp://host:-1/x", "uri: bad port '-1'" },
	{ "tcp://host:+1/x", "uri: bad port '+1'" },
	{ "tcp://host:45x/x", "uri: bad port '45x'" },
	{ "tcp://host:4520:1/x", "uri: IPv6 address must be in brackets" },
	{ "tcp://::1/x", "uri: IPv6 address must be in brackets" },
	{ "tcp://[::1/x", "uri: missing ']' after IPv6 address" },
	{ "tcp://[::g]/x", "uri: bad IPv6 address '::g'" },
	{ "tcp://[192.0.2.1]/x", "uri: bad IPv6 address '192.0.2.1'" },
	{ "tcp://[::1]junk/x", "uri: junk after IPv6 address: 'junk'" },
	/* Overlong literals are quoted cut at 48 bytes. */
	{ "tcp://[0000:0000:0000:0000:0000:0000:0000:0000:0000:0000]/x",
	  "uri: bad IPv6 address '0000:0000:0000:0000:0000:0000:0000:0000:0000:000'" },
	{ "tcp://[fe80::1%25eth0]/x", "uri: bad IPv6 address 'fe80::1%25eth0'" },
	{ "tcp://[::1]:/x", "uri: empty port" },
	{ "tcp://1.2.3.256/x", "uri: bad IPv4 address '1.2.3.256'" },
	{ "tcp://1.2.3/x", "uri: bad IPv4 address '1.2.3'" },
	{ "tcp://user@host/x", "uri: invalid character '@' in host" },
	{ "tcp://ho st/x", "uri: invalid character 0x20 in host" },
	{ "tcp://ho\tst/x", "uri: invalid character 0x09 in host" },
	{ "tcp://-host/x", "uri: bad host name '-host'" },
	{ "tcp://host-/x", "uri: bad host name 'host-'" },
	{ "tcp://a..b/x", "uri: bad host name 'a..b'" },
	{ "tcp://.a/x", "uri: bad host name '.a'" },
	{ "tcp://host/a%2", "uri: bad percent escape '%2' in export" },
	{ "tcp://host/a%", "uri: bad percent escape '%' in export" },
	{ "tcp://host/a%zz", "uri: bad percent escape '%zz' in export" },
	{ "tcp://host/a%g1", "uri: bad percent escape '%g1' in export" },
	{ "tcp://host/a%00b", "uri: control character 0x00 in export" },
	{ "tcp://host/a%0Ab", "uri: control character 0x0a in export" },
	{ "tcp://host/a%7f", "uri: control character 0x7f in export" },
	{ "tcp://host/a\nb", "uri: control character 0x0a in export" },
	{ "tcp://host/a\x01", "uri: control character 0x01 in export" },
	{ "tcp://host/a b", "uri: character 0x20 in export must be percent-encoded" },
	{ "tcp://host/a\"b", "uri: character '\"' in export must be percent-encoded" },
	{ "tcp://host/caf\xc3\xa9", "uri: character 0xc3 in export must be percent-encoded" },
	{ "tcp://host/x?y=1", "uri: query or fragment ('?') not supported" },
	{ "tcp://host/x#frag", "uri: query or fragment ('#') not supported" },
	{ "tcp://host?x", "uri: query or fragment ('?') not supported" },
};

static void test_long(void)
{
	char uri[1024], want[RB_EXPORT_NAME_MAX + 1], err[256];
	struct rb_uri u;
	char host[300];
	int n;

	/* 255 bytes: the longest name that fits, also when spelled %41. */
	memset(want, 'a', RB_EXPORT_NAME_MAX - 1);
	want[RB_EXPORT_NAME_MAX - 1] = '\0';
	snprintf(uri, sizeof(uri), "tcp://h/%s", want);
	is_int(rb_uri_parse(uri, &u, err, sizeof(err)), 0, "255-byte export name");
	is_str(u.export_name, want, "255-byte export name kept");
	n = snprintf(uri, sizeof(uri), "tcp://h/");
	for (int i = 0; i < RB_EXPORT_NAME_MAX - 1; i++)
		n += snprintf(uri + n, sizeof(uri) - (size_t)n, "%%41");
	is_int(rb_uri_parse(uri, &u, err, sizeof(err)), 0, "255 escaped bytes");
	is_int((int)strlen(u.export_name), RB_EXPORT_NAME_MAX - 1, "255 escaped bytes decoded");

	snprintf(uri, sizeof(uri), "tcp://h/%sa", want);
	is_int(rb_uri_parse(uri, &u, err, sizeof(err)), -EINVAL, "256-byte export name");
	is_str(err, "uri: export name too long (max 255 bytes)", "256-byte name message");

	/* Host names: 253 bytes in labels of at most 63. */
	memset(host, 0, sizeof(host));
	for (int i = 0; i < 4; i++) {
		memset(host + i * 64, 'h', 63);
		host[i * 64 + 63] = '.';
	}
	host[253] = '\0'; /* 63+1+63+1+63+1+61 */
	snprintf(uri, sizeof(uri), "tcp://%s/x", host);
	is_int(rb_uri_parse(uri, &u, err, sizeof(err)), 0, "253-byte host name");
	is_str(u.ep.host, host, "253-byte host name kept");
	host[253] = 'h';
	host[254] = '\0';
	snprintf(uri, sizeof(uri), "tcp://%s/x", host);
	is_int(rb_uri_parse(uri, &u, err, sizeof(err)), -EINVAL, "254-byte host name");
	is_str(err, "uri: host name too long (254 bytes, max 253)", "254-byte host message");
	memset(host, 'h', 64);
	strcpy(host + 64, ".com");
	snprintf(uri, sizeof(uri), "tcp://%s/x", host);
	is_int(rb_uri_parse(uri, &u, err, sizeof(err)), -EINVAL, "64-byte label");
}

static void test_listen(void)
{
	struct rb_endpoint ep;
	char tr[16], err[256];

	is_int(rb_uri_parse_listen("tcp://0.0.0.0", tr, sizeof(tr), &ep, err, sizeof(err)), 0,
	       "listen without port");
	is_str(tr, "tcp", "listen transport");
	is_str(ep.host, "0.0.0.0", "listen host");
	is_int(ep.port, RB_DEFAULT_PORT, "listen default port");
	is_int(rb_uri_parse_listen("rdma://[::]:4600", tr, sizeof(tr), &ep, err, sizeof(err)), 0,
	       "listen v6 with port");
	is_str(tr, "rdma", "listen rdma");
	is_str(ep.host, "::", "listen v6 host without brackets");
	is_int(ep.port, 4600, "listen port");
	is_int(rb_uri_parse_listen("tcp://h/x", tr, sizeof(tr), &ep, err, sizeof(err)), -EINVAL,
	       "listen with export");
	is_str(err, "a listen address takes no /EXPORT", "listen with export message");
	is_int(rb_uri_parse_listen("udp://h", tr, sizeof(tr), &ep, err, sizeof(err)), -EINVAL,
	       "listen udp");
	is_int(rb_uri_parse_listen("tcp://", tr, sizeof(tr), &ep, err, sizeof(err)), -EINVAL,
	       "listen empty host");
	is_str(err, "empty host", "listen empty host message");

	is_int(rb_parse_hostport("127.0.0.1:10809", &ep, err, sizeof(err)), 0, "hostport");
	is_str(ep.host, "127.0.0.1", "hostport host");
	is_int(ep.port, 10809, "hostport port");
	is_int(rb_parse_hostport("[::1]:10809", &ep, err, sizeof(err)), 0, "hostport v6");
	is_str(ep.host, "::1", "hostport v6 host");
	is_int(rb_parse_hostport("localhost", &ep, err, sizeof(err)), -EINVAL, "hostport no port");
	is_str(err, "missing port", "hostport no port message");
	is_int(rb_parse_hostport("[::1]", &ep, err, sizeof(err)), -EINVAL, "hostport v6 no port");
	is_int(rb_parse_hostport("h:0", &ep, err, sizeof(err)), -EINVAL, "hostport port 0");
}

int main(void)
{
	char err[256];
	struct rb_uri u;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		memset(&u, 0x55, sizeof(u));
		err[0] = '\0';
		int ret = rb_uri_parse(good[i].uri, &u, err, sizeof(err));

		is_int(ret, 0, "good %s", good[i].uri);
		if (ret) {
			printf("#   error: %s\n", err);
			continue;
		}
		is_str(u.transport, good[i].transport, "  transport");
		is_str(u.ep.host, good[i].host, "  host");
		is_int(u.ep.port, good[i].port, "  port");
		is_str(u.export_name, good[i].export_name, "  export");
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&u, 0, sizeof(u));
		strcpy(u.export_name, "untouched");
		is_int(rb_uri_parse(bad[i].uri, &u, err, sizeof(err)), -EINVAL, "bad [%zu]", i);
		is_str(err, bad[i].err, "  message");
		is_str(u.export_name, "untouched", "  output untouched on error");
	}
	/* A NULL or tiny errbuf must not crash or overflow. */
	is_int(rb_uri_parse("bogus", &u, NULL, 0), -EINVAL, "NULL errbuf");
	is_int(rb_uri_parse("bogus", &u, err, 4), -EINVAL, "tiny errbuf");
	is_str(err, "uri", "tiny errbuf truncated");
	test_long();
	test_listen();
	return tap_done();
}
