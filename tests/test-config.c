/* SPDX-License-Identifier: MIT */
/*
 * Config loader: every rejected file gives exactly its "FILE:LINE: reason",
 * good files give the expected values, and the shipped conf/ files parse
 * (as shipped, and with every commented-out setting enabled, which must
 * reproduce the built-in defaults they document).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conf.h"
#include "log.h"
#include "tap.h"

static char tmpdir[256];
static int nfiles;

static const char *write_conf_len(const char *text, size_t len)
{
	static char path[300];
	FILE *f;

	snprintf(path, sizeof(path), "%s/c%d.conf", tmpdir, ++nfiles);
	f = fopen(path, "w");
	if (!f || fwrite(text, 1, len, f) != len || fclose(f) != 0) {
		perror(path);
		exit(99);
	}
	return path;
}

static const char *write_conf(const char *text)
{
	return write_conf_len(text, strlen(text));
}

/* want is "LINE: reason"; the file name is prepended here. */
static void bad_target_len(const char *text, size_t len, const char *want)
{
	struct rb_target_conf c;
	char err[1024], exp[1400];
	const char *path = write_conf_len(text, len);

	snprintf(exp, sizeof(exp), "%s:%s", path, want);
	memset(err, 0, sizeof(err));
	ok(rb_target_conf_load(&c, path, err, sizeof(err)) == -EINVAL, "target rejects: %.60s",
	   want);
	is_str(err, exp, "  message");
	ok(c.exports == NULL && c.nr_exports == 0, "  nothing left allocated");
	rb_target_conf_free(&c);
}

static void bad_target(const char *text, const char *want)
{
	bad_target_len(text, strlen(text), want);
}

static void bad_initiator(const char *text, const char *want)
{
	struct rb_initiator_conf c;
	char err[1024], exp[1400];
	const char *path = write_conf(text);

	snprintf(exp, sizeof(exp), "%s:%s", path, want);
	ok(rb_initiator_conf_load(&c, path, err, sizeof(err)) == -EINVAL,
	   "initiator rejects: %.60s", want);
	is_str(err, exp, "  message");
	ok(c.attach == NULL && c.nr_attach == 0, "  nothing left allocated");
	rb_initiator_conf_free(&c);
}

static int load_target(const char *text, struct rb_target_conf *c)
{
	char err[1024];
	int ret = rb_target_conf_load(c, write_conf(text), err, sizeof(err));

	if (ret)
		printf("#   unexpected error: %s\n", err);
	return ret;
}

static int load_initiator(const char *text, struct rb_initiator_conf *c)
{
	char err[1024];
	int ret = rb_initiator_conf_load(c, write_conf(text), err, sizeof(err));

	if (ret)
		printf("#   unexpected error: %s\n", err);
	return ret;
}

static void test_target_bad(void)
{
	char buf[8192], want[512];
	int n;

	bad_target("[target]\n[foo]\n",
		   "2: unknown section [foo] (want [target] or [export NAME])");
	bad_target("[attach x]\nuri = tcp://h/x\n",
		   "1: unknown section [attach x] (want [target] or [export NAME])");
	bad_target("[target foo]\n",
		   "1: unknown section [target foo] (want [target] or [export NAME])");
	bad_target("[target]\nthread = 4\n", "2: unknown key 'thread' in [target]");
	bad_target("[export a]\npath = /x\nsize = 1\n", "3: unknown key 'size' in [export a]");
	bad_target("[export a]\npath = /x\n\n[export a]\npath = /y\n",
		   "4: duplicate export 'a' (first on line 1)");
	bad_target("threads = 1\n", "1: key 'threads' outside of any section");
	bad_target("[target]\nthreads = 1\nthreads = 2\n",
		   "3: duplicate key 'threads' (first set on line 2)");
	bad_target("[target]\n[export a]\npath=/x\n[target]\n",
		   "4: duplicate section [target] (first on line 1)");
	bad_target("[target]\nthreads =\n", "2: threads: empty value");
	bad_target("[target]\nthreads\n",
		   "2: syntax error (expected 'key = value' or '[section]')");
	bad_target("; comment\n[target\n", "2: missing ']' in section header");
	bad_target("[target] junk\n", "1: junk after section header: 'junk'");
	bad_target("[export]\n", "1: section [export] needs a name: [export NAME]");
	bad_target("[export a b]\n", "1: export name 'a b': invalid character ' '");

	/* Numbers and ranges. */
	bad_target("[target]\nthreads = four\n", "2: threads 'four': not a number");
	bad_target("[target]\nthreads = -1\n", "2: threads '-1': not a number");
	bad_target("[target]\nthreads = 0x10\n", "2: threads '0x10': not a number");
	bad_target("[target]\nthreads = 1.5\n", "2: threads '1.5': not a number");
	bad_target("[target]\nthreads = 0\n", "2: threads '0': out of range (1..64)");
	bad_target("[target]\nthreads = 65\n", "2: threads '65': out of range (1..64)");
	bad_target("[target]\nthreads = 99999999999999999999999\n",
		   "2: threads '99999999999999999999999': out of range (1..64)");
	bad_target("[target]\nmax-queue-depth = 0\n",
		   "2: max-queue-depth '0': out of range (1..1024)");
	bad_target("[target]\nmax-queue-depth = 1025\n",
		   "2: max-queue-depth '1025': out of range (1..1024)");
	bad_target("[target]\nmax-io-queues = 129\n",
		   "2: max-io-queues '129': out of range (1..128)");
	bad_target("[target]\nbuffers = 0\n", "2: buffers '0': out of range (1..65536)");
	bad_target("[target]\nkeepalive-timeout = 999\n",
		   "2: keepalive-timeout '999': out of range (1000..3600000)");
	bad_target("[target]\nmax-connections = 0\n",
		   "2: max-connections '0': out of range (1..1048576)");
	bad_target("[target]\nmax-sessions-per-host = 0\n",
		   "2: max-sessions-per-host '0': out of range (1..1048576)");
	bad_target("[target]\ndiscovery-timeout = 999\n",
		   "2: discovery-timeout '999': out of range (1000..600000)");
	bad_target("[target]\nkeepalive-timeout = 5000\nmin-keepalive = 6000\n",
		   "3: min-keepalive (6000 ms) exceeds keepalive-timeout (5000 ms)");
	bad_target("[target]\ntransfer-timeout = 0\n",
		   "2: transfer-timeout '0': out of range (1000..3600000)");
	bad_target("[target]\npressure-timeout = 999\n",
		   "2: pressure-timeout '999': out of range (1000..3600000)");
	bad_target("[target]\nmax-transfer = 6000\n",
		   "2: max-transfer '6000': not a multiple of 4096");
	bad_target("[target]\nmax-transfer = 2K\n", "2: max-transfer '2K': out of range (4K..16M)");
	bad_target("[target]\nmax-transfer = 32M\n",
		   "2: max-transfer '32M': out of range (4K..16M)");
	bad_target("[target]\nmax-transfer = 99999999999G\n",
		   "2: max-transfer '99999999999G': out of range (4K..16M)");
	bad_target("[target]\nmax-transfer = 128KB\n",
		   "2: max-transfer '128KB': not a size (bytes, or with suffix K, M or G)");
	bad_target("[target]\nmax-transfer = K\n",
		   "2: max-transfer 'K': not a size (bytes, or with suffix K, M or G)");
	bad_target("[target]\nincapsule = 17M\n", "2: incapsule '17M': out of range (0..16M)");
	/* Semantic: in-capsule data never exceeds a transfer. */
	bad_target("[target]\nmax-transfer = 8K\nincapsule = 16K\n",
		   "3: incapsule (16K) exceeds max-transfer (8K)");
	bad_target("[target]\n\nmax-transfer = 4K\n",
		   "3: incapsule (8K) exceeds max-transfer (4K)");
	bad_target("[target]\nlog-level = loud\n",
		   "2: log-level 'loud': unknown log level (error, warning, info, debug)");
	bad_target("[target]\nbusy-poll = sometimes\n",
		   "2: busy-poll 'sometimes': not a boolean (yes/no, true/false, on/off, 1/0)");
	bad_target("[target]\npoll-us = -1\n", "2: poll-us '-1': not a number");
	bad_target("[target]\npoll-us = 1000001\n",
		   "2: poll-us '1000001': out of range (0..1000000)");
	bad_target("[target]\ntos = 256\n", "2: tos '256': out of range (0..255)");
	bad_target("[target]\nack-timeout = 32\n", "2: ack-timeout '32': out of range (0..31)");
	bad_target("[target]\nretry-count = 8\n", "2: retry-count '8': out of range (0..7)");
	bad_target("[target]\nrnr-retry = 8\n", "2: rnr-retry '8': out of range (0..7)");
	bad_target("[target]\nconnect-timeout = 99\n",
		   "2: connect-timeout '99': out of range (100..600000)");
	bad_target("[target]\nmax-half-open = 0\n",
		   "2: max-half-open '0': out of range (1..65536)");

	/* Listen addresses. */
	bad_target("[target]\nlisten = udp://0.0.0.0\n",
		   "2: listen 'udp://0.0.0.0': unknown scheme 'udp' (want tcp:// or rdma://)");
	bad_target("[target]\nlisten = tcp://0.0.0.0/x\n",
		   "2: listen 'tcp://0.0.0.0/x': a listen address takes no /EXPORT");
	bad_target("[target]\nlisten = tcp://0.0.0.0:0\n",
		   "2: listen 'tcp://0.0.0.0:0': port 0 out of range (1..65535)");
	bad_target("[target]\nlisten = tcp://[::1\n",
		   "2: listen 'tcp://[::1': missing ']' after IPv6 address");
	bad_target("[target]\nlisten = tcp://127.0.0.1, tcp://127.0.0.1:4520\n",
		   "2: listen 'tcp://127.0.0.1:4520': duplicate listen address");
	bad_target("[target]\nlisten = ,\n", "2: listen ',': no entries");
	n = snprintf(buf, sizeof(buf), "[target]\nlisten = ");
	for (int i = 0; i <= RB_MAX_LISTEN; i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%stcp://127.0.0.1:%d",
			      i ? "," : "", 4520 + i);
	snprintf(buf + n, sizeof(buf) - (size_t)n, "\n");
	snprintf(want, sizeof(want), "2: listen 'tcp://127.0.0.1:%d': too many listen addresses "
		 "(max %d)", 4520 + RB_MAX_LISTEN, RB_MAX_LISTEN);
	bad_target(buf, want);
	/* The same spread over repeated keys: the 9th line is the culprit. */
	n = snprintf(buf, sizeof(buf), "[target]\n");
	for (int i = 0; i <= RB_MAX_LISTEN; i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "listen = rdma://192.0.2.%d\n",
			      i + 1);
	snprintf(want, sizeof(want), "%d: listen 'rdma://192.0.2.%d': too many listen addresses "
		 "(max %d)", RB_MAX_LISTEN + 2, RB_MAX_LISTEN + 1, RB_MAX_LISTEN);
	bad_target(buf, want);

	/* Exports. */
	bad_target("[export a]\nread-only = yes\n", "1: [export a]: missing path");
	bad_target("[target]\n\n[export a]\nread-only = yes\n[export b]\npath = /x\n",
		   "3: [export a]: missing path");
	bad_target("[export a]\npath = /x\nread-only = maybe\n",
		   "3: read-only 'maybe': not a boolean (yes/no, true/false, on/off, 1/0)");
	bad_target("[export a]\npath = /x\ndirect = 2\n",
		   "3: direct '2': not a boolean (yes/no, true/false, on/off, 1/0)");
	bad_target("[export a]\npath = disk.img\n", "2: path 'disk.img': path must be absolute");
	bad_target("[export a]\npath = /x\npath = /y\n",
		   "3: duplicate key 'path' (first set on line 2)");
	bad_target("[export a]\npath = /x\nallowed-hosts = h1, h1\n",
		   "3: allowed-hosts 'h1': duplicate host");
	bad_target(
	    "[export a]\npath = /x\nallowed-hosts = h\xc3\xa9\n",
	    "3: allowed-hosts 'h\xc3\xa9': host id must be printable ASCII without spaces or "
	    "commas");
	n = snprintf(buf, sizeof(buf), "[export a]\npath = /x\nallowed-hosts = h0");
	for (int i = 1; i <= RB_MAX_ALLOWED_HOSTS; i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%sh%d", i % 2 ? " " : ",", i);
	snprintf(buf + n, sizeof(buf) - (size_t)n, "\n");
	snprintf(want, sizeof(want), "3: allowed-hosts 'h%d': too many hosts (max %d)",
		 RB_MAX_ALLOWED_HOSTS, RB_MAX_ALLOWED_HOSTS);
	bad_target(buf, want);
	/* Host id of 224 bytes: one more than fits. */
	n = snprintf(buf, sizeof(buf), "[export a]\npath = /x\nallowed-hosts = ");
	memset(buf + n, 'h', RB_HOSTID_MAX);
	snprintf(buf + n + RB_HOSTID_MAX, sizeof(buf) - (size_t)n - RB_HOSTID_MAX, "\n");
	snprintf(want, sizeof(want),
		 "3: allowed-hosts '%.64s...': host id too long (%d bytes, max %d)", buf + n,
		 RB_HOSTID_MAX, RB_HOSTID_MAX - 1);
	bad_target(buf, want);

	/* Names and values longer than their buffers (and than inih's lines). */
	n = snprintf(buf, sizeof(buf), "[export ");
	memset(buf + n, 'e', RB_EXPORT_NAME_MAX);
	snprintf(buf + n + RB_EXPORT_NAME_MAX, sizeof(buf) - (size_t)n - RB_EXPORT_NAME_MAX,
		 "]\npath = /x\n");
	snprintf(want, sizeof(want), "1: export name too long (%d bytes, max %d)",
		 RB_EXPORT_NAME_MAX, RB_EXPORT_NAME_MAX - 1);
	bad_target(buf, want);
	n = snprintf(buf, sizeof(buf), "[export a]\npath = /");
	memset(buf + n, 'p', 4095);
	snprintf(buf + n + 4095, sizeof(buf) - (size_t)n - 4095, "\n");
	snprintf(want, sizeof(want), "2: path '/%.63s...': value too long (4096 bytes, max 4095)",
		 buf + n);
	bad_target(buf, want);

	/* Bytes no config file has a use for. */
	bad_target("[target]\nthreads = 1\x01\n", "2: control character 0x01 in line");
	bad_target("[target]\nthreads = 1\x7f\n", "2: control character 0x7f in line");
	bad_target("[target]\nthreads = 1\rbuffers = 2\n", "2: control character 0x0d in line");
	bad_target_len("[target]\n\nthreads = 1\0\n", 23, "3: NUL byte in line");
}

static void test_target_good(void)
{
	struct rb_target_conf c, d;
	const struct rb_export_conf *e;
	char buf[8192], path[4097];
	int n;

	/* Empty file: every default, and the default listen address. */
	rb_target_conf_init(&d);
	is_int(load_target("", &c), 0, "empty target file");
	is_int(c.nr_listen, 1, "default: one listen address");
	is_str(c.listen[0].transport, "tcp", "default listen transport");
	is_str(c.listen[0].ep.host, "0.0.0.0", "default listen host");
	is_int(c.listen[0].ep.port, RB_DEFAULT_PORT, "default listen port");
	is_int(c.threads, 1, "default threads");
	is_int(c.max_queue_depth, 128, "default max-queue-depth");
	is_int(c.max_io_queues, 8, "default max-io-queues");
	is_int(c.max_transfer, 128 * 1024, "default max-transfer");
	is_int(c.incapsule, 8 * 1024, "default incapsule");
	is_int(c.buffers, 256, "default buffers");
	is_int(c.keepalive_ms, 120000, "default keepalive");
	is_int(c.transfer_timeout_ms, 15000, "default transfer timeout");
	is_int(c.pressure_timeout_ms, 3000, "default pressure timeout");
	is_int(c.log_level, RB_LOG_INFO, "default log level");
	is_int(c.topts.tos, d.topts.tos, "default tos");
	is_int(c.topts.busy_poll, 0, "default busy-poll");
	is_int(c.topts.poll_us, RB_POLL_US_DEFAULT, "default poll-us");
	is_int(c.max_connections, 1024, "default max-connections");
	is_int(c.max_conns_per_addr, 256, "default max-connections-per-address");
	is_int(c.max_sessions, 256, "default max-sessions");
	is_int(c.max_sessions_per_host, 32, "default max-sessions-per-host");
	is_int(c.min_keepalive_ms, 10000, "default min-keepalive");
	is_int(c.discovery_timeout_ms, 5000, "default discovery-timeout");
	is_int(c.topts.connect_timeout_ms, d.topts.connect_timeout_ms, "default connect-timeout");
	is_int(c.topts.max_half_open, RB_MAX_HALF_OPEN_DEFAULT, "default max-half-open");
	is_int(c.nr_exports, 0, "no exports");
	rb_target_conf_free(&c);
	is_int(load_target("[target]\nmax-half-open = 16\n", &c), 0, "max-half-open set");
	is_int(c.topts.max_half_open, 16, "max-half-open");
	rb_target_conf_free(&c);

	is_int(load_target("\xef\xbb\xbf# all keys\r\n"
			   "[target]\r\n"
			   "listen = tcp://0.0.0.0:4520, rdma://192.0.2.1\r\n"
			   "listen = tcp://[::1]:4521\n"
			   "threads = 4 ; inline comment\n"
			   "  max-queue-depth = 1024\n"
			   "max-io-queues: 16\n"
			   "max-transfer = 1M\n"
			   "incapsule = 16k\n"
			   "buffers = 1024\n"
			   "keepalive-timeout = 5000\n"
			   "transfer-timeout = 4000\n"
			   "pressure-timeout = 2000\n"
			   "log-level = debug\n"
			   "busy-poll = on\n"
			   "poll-us = 75\n"
			   "tos = 184\n"
			   "ack-timeout = 14\n"
			   "retry-count = 7\n"
			   "rnr-retry = 0\n"
			   "connect-timeout = 2000\n"
			   "max-connections = 64\n"
			   "max-connections-per-address = 9\n"
			   "max-sessions = 8\n"
			   "max-sessions-per-host = 2\n"
			   "min-keepalive = 0\n"
			   "discovery-timeout = 2000\n"
			   "\n"
			   "[export disk0]\n"
			   "path = /dev/disk/by-id/x;y\n"
			   "read-only = yes\n"
			   "direct = no\n"
			   "inline-writes = on\n"
			   "allowed-hosts = rdmablk:uuid:1, host2 host3\n"
			   "allowed-hosts = host4\n"
			   "[ export  vol.b ]   ; second\n"
			   "path = /srv/b.img\n",
			   &c),
	       0, "full target file");
	is_int(c.nr_listen, 3, "three listen addresses");
	is_str(c.listen[1].transport, "rdma", "listen[1] transport");
	is_str(c.listen[1].ep.host, "192.0.2.1", "listen[1] host");
	is_int(c.listen[1].ep.port, RB_DEFAULT_PORT, "listen[1] default port");
	is_str(c.listen[2].ep.host, "::1", "listen[2] v6 host");
	is_int(c.listen[2].ep.port, 4521, "listen[2] port");
	is_int(c.threads, 4, "threads (inline comment stripped)");
	is_int(c.max_queue_depth, 1024, "indented key is a key, not a continuation");
	is_int(c.max_io_queues, 16, "key: value syntax");
	is_int(c.max_connections, 64, "max-connections");
	is_int(c.max_conns_per_addr, 9, "max-connections-per-address");
	is_int(c.max_sessions, 8, "max-sessions");
	is_int(c.max_sessions_per_host, 2, "max-sessions-per-host");
	is_int(c.min_keepalive_ms, 0, "min-keepalive 0 allows none");
	is_int(c.discovery_timeout_ms, 2000, "discovery-timeout");
	is_int(c.max_transfer, 1 << 20, "max-transfer 1M");
	is_int(c.incapsule, 16 * 1024, "incapsule 16k");
	is_int(c.buffers, 1024, "buffers");
	is_int(c.keepalive_ms, 5000, "keepalive");
	is_int(c.transfer_timeout_ms, 4000, "transfer timeout");
	is_int(c.pressure_timeout_ms, 2000, "pressure timeout");
	is_int(c.log_level, RB_LOG_DEBUG, "log level");
	is_int(c.topts.busy_poll, 1, "busy-poll");
	is_int(c.topts.poll_us, 75, "poll-us");
	is_int(c.topts.tos, 184, "tos");
	is_int(c.topts.ack_timeout, 14, "ack-timeout");
	is_int(c.topts.retry_count, 7, "retry-count");
	is_int(c.topts.rnr_retry, 0, "rnr-retry");
	is_int(c.topts.connect_timeout_ms, 2000, "connect-timeout");
	is_int(c.nr_exports, 2, "two exports");
	e = rb_target_conf_export(&c, "disk0");
	ok(e != NULL, "lookup disk0");
	if (e) {
		is_str(e->path, "/dev/disk/by-id/x;y", "';' without a blank is not a comment");
		ok(e->read_only && !e->direct && e->inline_writes,
		   "read-only, not direct, inline writes");
		is_int(e->nr_allowed, 4, "four allowed hosts");
		is_str(e->allowed[0], "rdmablk:uuid:1", "allowed[0]");
		is_str(e->allowed[2], "host3", "allowed[2] space separated");
		is_str(e->allowed[3], "host4", "allowed[3] repeated key");
		is_int(e->line, 29, "export header line");
	}
	e = rb_target_conf_export(&c, "vol.b");
	ok(e != NULL, "lookup vol.b (blanks in the header trimmed)");
	if (e)
		ok(!e->read_only && e->direct && !e->inline_writes && e->nr_allowed == 0,
		   "export defaults");
	ok(rb_target_conf_export(&c, "nope") == NULL, "lookup of a missing export");
	rb_target_conf_free(&c);
	is_int(load_target("[target]\nkeepalive-timeout = 5000\n", &c), 0, "keepalive-timeout only");
	is_int(c.min_keepalive_ms, 5000, "the default min-keepalive yields to keepalive-timeout");
	rb_target_conf_free(&c);
	ok(c.exports == NULL && c.nr_exports == 0, "free resets");

	/* Exactly the limits. */
	n = snprintf(buf, sizeof(buf), "[target]\nthreads = 64\nmax-transfer = 16M\n"
		     "incapsule = 16M\n[export ");
	memset(buf + n, 'e', RB_EXPORT_NAME_MAX - 1);
	n += RB_EXPORT_NAME_MAX - 1;
	n += snprintf(buf + n, sizeof(buf) - (size_t)n, "]\npath = /");
	memset(path, 0, sizeof(path));
	path[0] = '/';
	memset(path + 1, 'p', 4094);
	memcpy(buf + n, path + 1, 4094);
	n += 4094;
	n += snprintf(buf + n, sizeof(buf) - (size_t)n, "   ; a comment after a long value\n");
	is_int(load_target(buf, &c), 0, "limits: 255-byte name, 4095-byte path, 16M transfer");
	is_int(c.nr_exports, 1, "  one export");
	if (c.nr_exports == 1) {
		is_int((int)strlen(c.exports[0].name), RB_EXPORT_NAME_MAX - 1, "  long name kept");
		is_str(c.exports[0].path, path, "  long path kept, comment stripped");
	}
	is_int(c.max_transfer, 16u << 20, "  16M max-transfer");
	rb_target_conf_free(&c);

	n = snprintf(buf, sizeof(buf), "[export a]\npath = /x\n");
	for (int i = 0; i < RB_MAX_ALLOWED_HOSTS; i++)
		n += snprintf(buf + n, sizeof(buf) - (size_t)n, "allowed-hosts = h%d\n", i);
	is_int(load_target(buf, &c), 0, "32 allowed hosts on 32 lines");
	is_int(c.nr_exports == 1 ? c.exports[0].nr_allowed : -1, RB_MAX_ALLOWED_HOSTS,
	       "  all 32 kept");
	rb_target_conf_free(&c);

	/* Boolean spellings. */
	static const char *const yes[] = { "yes", "true", "on", "1", "YES", "True" };
	static const char *const no[] = { "no", "false", "off", "0", "No", "OFF" };
	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		bool b = false;

		snprintf(buf, sizeof(buf), "[export a]\npath = /x\nread-only = %s\ndirect = %s\n",
			 yes[i], no[i]);
		is_int(load_target(buf, &c), 0, "booleans %s/%s", yes[i], no[i]);
		ok(c.nr_exports == 1 && c.exports[0].read_only && !c.exports[0].direct,
		   "  parsed as true/false");
		rb_target_conf_free(&c);
		ok(rb_parse_bool(yes[i], &b) == 0 && b, "rb_parse_bool(%s)", yes[i]);
		ok(rb_parse_bool(no[i], &b) == 0 && !b, "rb_parse_bool(%s)", no[i]);
	}
	{
		bool b;
		uint64_t sz;
		uint32_t u;
		struct rb_listen_addr la;

		is_int(rb_parse_bool("y", &b), -EINVAL, "rb_parse_bool(y)");
		is_int(rb_parse_bool("", &b), -EINVAL, "rb_parse_bool('')");
		ok(rb_parse_size("4G", &sz) == 0 && sz == 4ull << 30, "rb_parse_size(4G)");
		ok(rb_parse_size("512", &sz) == 0 && sz == 512, "rb_parse_size(512)");
		is_int(rb_parse_size("18446744073709551615G", &sz), -EINVAL, "size overflow");
		is_int(rb_parse_size(" 1", &sz), -EINVAL, "size leading blank");
		ok(rb_parse_u32("7", 1, 7, &u) == 0 && u == 7, "rb_parse_u32 at max");
		is_int(rb_parse_u32("8", 1, 7, &u), -EINVAL, "rb_parse_u32 above max");
		is_int(rb_parse_u32("4294967296", 0, UINT32_MAX, &u), -EINVAL, "u32 overflow");
		ok(rb_parse_listen("rdma://[::]:9", &la) == 0 && la.ep.port == 9 &&
			   strcmp(la.transport, "rdma") == 0 && strcmp(la.ep.host, "::") == 0,
		   "rb_parse_listen");
		is_int(rb_parse_listen("rdma://", &la), -EINVAL, "rb_parse_listen empty host");
	}
}

static void test_initiator(void)
{
	struct rb_initiator_conf c;
	const struct rb_attach_conf *a;
	char buf[1024], want[512];
	int n;

	bad_initiator("[target]\n",
		      "1: unknown section [target] (want [initiator] or [attach NAME])");
	bad_initiator("[export x]\n",
		      "1: unknown section [export x] (want [initiator] or [attach NAME])");
	bad_initiator("[initiator]\nhost = x\n", "2: unknown key 'host' in [initiator]");
	bad_initiator("[attach a]\nqueues = 2\n", "1: [attach a]: missing uri");
	bad_initiator("[attach a]\nuri = tcp://h/x\n[attach b]\n", "3: [attach b]: missing uri");
	bad_initiator("[attach a]\nuri = tcp://h/x\n[attach a]\nuri = tcp://h/y\n",
		      "3: duplicate attach 'a' (first on line 1)");
	bad_initiator("[attach a/b]\n",
		      "1: attach name 'a/b': invalid character '/' (use letters, digits, '.', '_', "
		      "':', '-')");
	bad_initiator("[attach]\n", "1: section [attach] needs a name: [attach NAME]");
	bad_initiator("[attach a]\nuri = tcp://h\n", "2: uri 'tcp://h': missing /EXPORT");
	bad_initiator("[attach a]\nuri = nbd://h/x\n",
		      "2: uri 'nbd://h/x': unknown scheme 'nbd' (want tcp:// or rdma://)");
	bad_initiator("[attach a]\nuri = tcp://h/a%zz\n",
		      "2: uri 'tcp://h/a%zz': bad percent escape '%zz' in export");
	bad_initiator("[attach a]\nuri = tcp://h/x\nqueues = 0\n",
		      "3: queues '0': out of range (1..128)");
	bad_initiator("[attach a]\nuri = tcp://h/x\nqueue-depth = 1025\n",
		      "3: queue-depth '1025': out of range (1..1024)");
	bad_initiator("[attach a]\nuri = tcp://h/x\ntimeout = 99\n",
		      "3: timeout '99': out of range (100..3600000)");
	bad_initiator("[attach a]\nuri = tcp://h/x\nctrl-loss-tmo = 3600001\n",
		      "3: ctrl-loss-tmo '3600001': out of range (0..3600000)");
	bad_initiator("[attach a]\nuri = tcp://h/x\nreconnect-delay = 50\n",
		      "3: reconnect-delay '50': out of range (100..600000)");
	bad_initiator("[attach a]\nuri = tcp://h/x\nnbd-device = /dev/sda\n",
		      "3: nbd-device '/dev/sda': want /dev/nbdN or auto");
	bad_initiator("[attach a]\nuri = tcp://h/x\nnbd-device = /dev/nbd01\n",
		      "3: nbd-device '/dev/nbd01': want /dev/nbdN or auto");
	bad_initiator("[attach a]\nuri = tcp://h/x\nnbd-device = /dev/nbd\n",
		      "3: nbd-device '/dev/nbd': want /dev/nbdN or auto");
	bad_initiator("[attach a]\nuri = tcp://h/x\nnbd-max-clients = 0\n",
		      "3: nbd-max-clients '0': out of range (1..65536)");
	bad_initiator("[attach a]\nuri = tcp://h/x\nnbd-max-clients = many\n",
		      "3: nbd-max-clients 'many': not a number");
	bad_initiator("[attach a]\nuri = tcp://h/x\nnbd-listen = localhost\n",
		      "3: nbd-listen 'localhost': missing port");
	bad_initiator("[attach a]\nuri = tcp://h/x\nnbd-listen = [::1]:99999\n",
		      "3: nbd-listen '[::1]:99999': port 99999 out of range (1..65535)");
	bad_initiator("[attach a]\nuri = tcp://h/x\nublk = please\n",
		      "3: ublk 'please': not a boolean (yes/no, true/false, on/off, 1/0)");
	bad_initiator("[attach a]\nuri = tcp://h/x\nublk = yes\nublk-id = 1048576\n",
		      "4: ublk-id '1048576': out of range (0..1048575)");
	bad_initiator("[initiator]\nhost-id = my host\n",
		      "2: host-id 'my host': host id must be printable ASCII without spaces or "
		      "commas");
	bad_initiator("[initiator]\nretry-count = 9\n", "2: retry-count '9': out of range (0..7)");
	bad_initiator("[initiator]\nlog-level = Info\n",
		      "2: log-level 'Info': unknown log level (error, warning, info, debug)");
	n = snprintf(buf, sizeof(buf), "[attach a]\nuri = tcp://h/x\nnbd-socket = /");
	memset(buf + n, 's', 108);
	snprintf(buf + n + 108, sizeof(buf) - (size_t)n - 108, "\n");
	snprintf(want, sizeof(want),
		 "3: nbd-socket '/%.63s...': value too long (109 bytes, max 107)", buf + n);
	bad_initiator(buf, want);
	n = snprintf(buf, sizeof(buf), "[initiator]\nhost-id = ");
	memset(buf + n, 'h', RB_HOSTID_MAX);
	snprintf(buf + n + RB_HOSTID_MAX, sizeof(buf) - (size_t)n - RB_HOSTID_MAX, "\n");
	snprintf(want, sizeof(want), "2: host-id '%.64s...': value too long (%d bytes, max %d)",
		 buf + n, RB_HOSTID_MAX, RB_HOSTID_MAX - 1);
	bad_initiator(buf, want);

	is_int(load_initiator("", &c), 0, "empty initiator file");
	is_str(c.hostid, "", "default host id: derive later");
	is_int(c.log_level, RB_LOG_INFO, "default log level");
	is_int(c.nr_attach, 0, "no attach sections");
	rb_initiator_conf_free(&c);

	is_int(load_initiator("[initiator]\n"
			      "host-id = rdmablk:uuid:0123\n"
			      "log-level = warning\n"
			      "tos = 0\n"
			      "ack-timeout = 31\n"
			      "retry-count = 0\n"
			      "rnr-retry = 7\n"
			      "connect-timeout = 600000\n"
			      "[attach disk0]\n"
			      "uri = rdma://[fe80::1]:4600/vol%2F1\n"
			      "queues = 4\n"
			      "queue-depth = 64\n"
			      "timeout = 1000\n"
			      "ctrl-loss-tmo = 60000\n"
			      "reconnect-delay = 500\n"
			      "nbd-socket = /run/rdmablk/disk0.sock\n"
			      "nbd-listen = 127.0.0.1:10809\n"
			      "nbd-device = /dev/nbd10\n"
			      "nbd-max-clients = 65536\n"
			      "ublk = yes\n"
			      "ublk-id = 7\n"
			      "[attach second:1]\n"
			      "uri = tcp://127.0.0.1/b\n"
			      "nbd-device = auto\n",
			      &c),
	       0, "full initiator file");
	is_str(c.hostid, "rdmablk:uuid:0123", "host id");
	is_int(c.log_level, RB_LOG_WARN, "log level");
	ok(c.topts.tos == 0 && c.topts.ack_timeout == 31 && c.topts.retry_count == 0 &&
		   c.topts.rnr_retry == 7 && c.topts.connect_timeout_ms == 600000,
	   "rdma options");
	is_int(c.nr_attach, 2, "two attach sections");
	a = rb_initiator_conf_attach(&c, "disk0");
	ok(a != NULL, "lookup disk0");
	if (a) {
		is_str(a->uri, "rdma://[fe80::1]:4600/vol%2F1", "uri kept verbatim");
		ok(a->queues == 4 && a->queue_depth == 64 && a->timeout_ms == 1000, "numbers");
		ok(a->ctrl_loss_tmo_ms == 60000 && a->reconnect_delay_ms == 500, "reconnect");
		is_str(a->nbd_socket, "/run/rdmablk/disk0.sock", "nbd-socket");
		is_str(a->nbd_listen, "127.0.0.1:10809", "nbd-listen");
		is_str(a->nbd_device, "/dev/nbd10", "nbd-device");
		is_int((int)a->nbd_max_clients, 65536, "nbd-max-clients");
		ok(a->ublk, "ublk");
		is_int((int)a->ublk_id, 7, "ublk-id");
		is_int(a->line, 9, "attach header line");
	}
	a = rb_initiator_conf_attach(&c, "second:1");
	ok(a != NULL, "lookup second:1");
	if (a) {
		ok(a->queues == 2 && a->queue_depth == 128 && a->timeout_ms == 30000 && !a->ublk,
		   "attach defaults");
		ok(a->nbd_socket[0] == '\0' && a->nbd_listen[0] == '\0', "no socket frontends");
		is_str(a->nbd_device, "auto", "nbd-device auto");
		is_int((int)a->nbd_max_clients, 256, "nbd-max-clients default");
		ok(a->ublk_id == RB_UBLK_ID_ANY, "ublk-id default: the first free one");
		ok(a->ctrl_loss_tmo_ms == 0 && a->reconnect_delay_ms == 2000,
		   "reconnect defaults: off, 2000 ms apart");
	}
	ok(rb_initiator_conf_attach(&c, "disk") == NULL, "lookup of a missing attach");
	rb_initiator_conf_free(&c);
}

static void test_files(void)
{
	struct rb_target_conf c;
	char err[512], want[600], id[RB_HOSTID_MAX];
	const char *path = "/nonexistent/rdmablk-test.conf";

	ok(rb_target_conf_load(&c, path, err, sizeof(err)) == -ENOENT, "missing file: -ENOENT");
	snprintf(want, sizeof(want), "%s: No such file or directory", path);
	is_str(err, want, "  message");
	ok(rb_target_conf_load(&c, tmpdir, err, sizeof(err)) == -EISDIR, "directory: -EISDIR");
	snprintf(want, sizeof(want), "%s: Is a directory", tmpdir);
	is_str(err, want, "  message");
	rb_target_conf_free(&c);
	/* A NULL error buffer is allowed. */
	ok(rb_target_conf_load(&c, write_conf("[x]\n"), NULL, 0) == -EINVAL, "NULL errbuf");

	ok(rb_hostid_from_file(write_conf("0123456789ABCDEF0123456789abcdef\n"), id,
			       sizeof(id)) == 0,
	   "machine id");
	is_str(id, "rdmablk:uuid:01234567-89ab-cdef-0123-456789abcdef", "  host id format");
	is_int(rb_hostid_from_file(write_conf("0123456789abcdef0123456789abcde\n"), id, sizeof(id)),
	       -EINVAL, "31 hex digits");
	is_int(rb_hostid_from_file(write_conf("0123456789abcdef0123456789abcdefa\n"), id,
				   sizeof(id)),
	       -EINVAL, "33 hex digits");
	is_int(
	    rb_hostid_from_file(write_conf("0123456789abcdef0123456789abcdeg\n"), id, sizeof(id)),
	    -EINVAL, "non-hex digit");
	is_int(rb_hostid_from_file(write_conf("uninitialized\n"), id, sizeof(id)), -EINVAL,
	       "uninitialized");
	is_int(rb_hostid_from_file(write_conf(""), id, sizeof(id)), -EINVAL, "empty machine id");
	is_int(rb_hostid_from_file(write_conf("00000000000000000000000000000000\n"), id,
				   sizeof(id)),
	       -EINVAL, "all-zero machine id");
	is_int(rb_hostid_from_file("/nonexistent/machine-id", id, sizeof(id)), -ENOENT,
	       "missing machine id");
	is_int(rb_hostid_from_file(write_conf("0123456789abcdef0123456789abcdef"), id, 20),
	       -ENOSPC, "small buffer");
	if (access("/etc/machine-id", R_OK) == 0) {
		int ret = rb_default_hostid(id, sizeof(id));

		/* This host's own file may be malformed; then the error must say so. */
		ok(ret == 0 ? strncmp(id, "rdmablk:uuid:", 13) == 0 && strlen(id) == 49
			    : ret == -EINVAL,
		   "rb_default_hostid: %s", ret ? "malformed /etc/machine-id" : id);
	}
}

/* Turns "#key = value" and "#[section]" lines (settings shown with their
 * defaults) into live lines; "# prose" stays a comment. */
static const char *uncomment(const char *src)
{
	static char out[300];
	char line[4096];
	FILE *in = fopen(src, "r"), *o;

	snprintf(out, sizeof(out), "%s/uncommented-%d.conf", tmpdir, ++nfiles);
	o = fopen(out, "w");
	if (!in || !o) {
		perror(src);
		exit(99);
	}
	while (fgets(line, sizeof(line), in)) {
		if (line[0] == '#' && (line[1] == '[' || (line[1] >= 'a' && line[1] <= 'z')))
			fputs(line + 1, o);
		else
			fputs(line, o);
	}
	fclose(in);
	fclose(o);
	return out;
}

static void test_shipped(void)
{
	const char *srcdir = getenv("top_srcdir");
	struct rb_target_conf t, td;
	struct rb_initiator_conf i, id;
	char path[1024], err[1024];
	int ret;

	if (!srcdir) {
		printf("# top_srcdir not set (run under make check): shipped files not checked\n");
		return;
	}
	rb_target_conf_init(&td);
	rb_initiator_conf_init(&id);

	snprintf(path, sizeof(path), "%s/conf/target.conf", srcdir);
	ret = rb_target_conf_load(&t, path, err, sizeof(err));
	is_int(ret, 0, "shipped target.conf");
	if (ret)
		printf("#   %s\n", err);
	rb_target_conf_free(&t);
	ret = rb_target_conf_load(&t, uncomment(path), err, sizeof(err));
	is_int(ret, 0, "target.conf with every setting enabled");
	if (ret)
		printf("#   %s\n", err);
	ok(t.threads == td.threads && t.max_queue_depth == td.max_queue_depth &&
		   t.max_io_queues == td.max_io_queues && t.max_transfer == td.max_transfer &&
		   t.incapsule == td.incapsule && t.buffers == td.buffers &&
		   t.keepalive_ms == td.keepalive_ms &&
		   t.transfer_timeout_ms == td.transfer_timeout_ms && t.log_level == td.log_level,
	   "  target.conf documents the real defaults");
	ok(memcmp(&t.topts, &td.topts, sizeof(t.topts)) == 0,
	   "  target.conf documents the transport defaults");
	ok(t.nr_listen == 1 && strcmp(t.listen[0].transport, "tcp") == 0 &&
		   strcmp(t.listen[0].ep.host, "0.0.0.0") == 0 &&
		   t.listen[0].ep.port == RB_DEFAULT_PORT,
	   "  target.conf documents the listen default");
	ok(t.nr_exports >= 1 && !t.exports[0].read_only && t.exports[0].direct &&
		   t.exports[0].nr_allowed == 0,
	   "  target.conf export example uses the export defaults");
	rb_target_conf_free(&t);

	snprintf(path, sizeof(path), "%s/conf/initiator.conf", srcdir);
	ret = rb_initiator_conf_load(&i, path, err, sizeof(err));
	is_int(ret, 0, "shipped initiator.conf");
	if (ret)
		printf("#   %s\n", err);
	rb_initiator_conf_free(&i);
	ret = rb_initiator_conf_load(&i, uncomment(path), err, sizeof(err));
	is_int(ret, 0, "initiator.conf with every setting enabled");
	if (ret)
		printf("#   %s\n", err);
	ok(i.log_level == id.log_level && i.hostid[0] == '\0' &&
		   memcmp(&i.topts, &id.topts, sizeof(i.topts)) == 0,
	   "  initiator.conf documents the real defaults");
	if (i.nr_attach >= 1) {
		struct rb_attach_conf ad;

		rb_attach_conf_init(&ad);
		ok(i.attach[0].queues == ad.queues && i.attach[0].queue_depth == ad.queue_depth &&
			   i.attach[0].timeout_ms == ad.timeout_ms && i.attach[0].ublk == ad.ublk,
		   "  initiator.conf attach example uses the attach defaults");
	} else {
		ok(0, "  initiator.conf has an [attach NAME] example");
	}
	rb_initiator_conf_free(&i);
}

/* rb_target_conf_diff: what a reload reports as needing a restart. */
static void test_target_diff(void)
{
	struct rb_target_conf a, b;
	const char *keys[4];
	int n;

	if (load_target("[target]\nlisten = tcp://127.0.0.1:4520\nthreads = 2\n", &a) < 0 ||
	    load_target("[target]\nlisten = tcp://127.0.0.1:4520\nthreads = 2\n\n[export x]\n"
			"path = /dev/null\n",
			&b) < 0) {
		ok(0, "diff: configs load");
		return;
	}
	is_int(rb_target_conf_diff(&a, &b, keys, 4), 0, "diff: exports alone are no [target] change");
	rb_target_conf_free(&b);
	if (load_target("[target]\nlisten = tcp://127.0.0.1:4521\nthreads = 3\nmax-transfer = 64K\n"
			"log-level = debug\npoll-us = 0\n",
			&b) < 0) {
		ok(0, "diff: second config loads");
		rb_target_conf_free(&a);
		return;
	}
	n = rb_target_conf_diff(&a, &b, keys, 4);
	is_int(n, 5, "diff: five [target] keys differ");
	ok(n >= 4 && strcmp(keys[0], "listen") == 0 && strcmp(keys[1], "threads") == 0 &&
		   strcmp(keys[2], "max-transfer") == 0 && strcmp(keys[3], "log-level") == 0,
	   "diff: named in key order, up to max");
	is_int(rb_target_conf_diff(&b, &b, keys, 4), 0, "diff: a config equals itself");
	rb_target_conf_free(&a);
	rb_target_conf_free(&b);
}

/* auth-dhgroups: a default that keeps attach cheap, a list that replaces it. */
static void test_dhgroups(void)
{
	struct rb_target_conf c;

	is_int(load_target("", &c), 0, "dhgroups: empty file");
	is_int(c.auth_dhgroups, RB_AUTH_DHGROUPS_DEFAULT, "dhgroups: default");
	ok(c.auth_dhgroups == (1u << RB_AUTH_DH_NULL | 1u << RB_AUTH_DH_FFDHE2048 |
			       1u << RB_AUTH_DH_FFDHE3072),
	   "dhgroups: default is null, ffdhe2048, ffdhe3072");
	rb_target_conf_free(&c);
	is_int(load_target("[target]\nauth-dhgroups = ffdhe4096, ffdhe8192\n", &c), 0,
	       "dhgroups: a list");
	is_int(c.auth_dhgroups, 1u << RB_AUTH_DH_FFDHE4096 | 1u << RB_AUTH_DH_FFDHE8192,
	       "dhgroups: the list replaces the default (DH required)");
	rb_target_conf_free(&c);
	bad_target("[target]\nauth-dhgroups = ffdhe1024\n",
		   "2: auth-dhgroups 'ffdhe1024': want null, ffdhe2048, ffdhe3072, ffdhe4096, "
		   "ffdhe6144 or ffdhe8192");
	bad_target("[target]\nauth-dhgroups = ,\n", "2: auth-dhgroups ',': no entries");
}

static void rm_tmpdir(void)
{
	char path[400];

	for (int n = 1; n <= nfiles; n++) {
		snprintf(path, sizeof(path), "%s/c%d.conf", tmpdir, n);
		unlink(path);
		snprintf(path, sizeof(path), "%s/uncommented-%d.conf", tmpdir, n);
		unlink(path);
	}
	rmdir(tmpdir);
}

int main(void)
{
	const char *t = getenv("TMPDIR");

	snprintf(tmpdir, sizeof(tmpdir), "%s/rdmablk-test-config.XXXXXX", t && *t ? t : "/tmp");
	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 99;
	}
	rb_log_init("test-config", RB_LOG_ERR);
	test_target_bad();
	test_target_good();
	test_target_diff();
	test_dhgroups();
	test_initiator();
	test_files();
	test_shipped();
	rm_tmpdir();
	return tap_done();
}
