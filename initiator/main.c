/* SPDX-License-Identifier: MIT */
/*
 * rdmablk-initiator: attach one export of an rdmablk target and serve it
 * as an NBD export (Unix socket and/or loopback TCP) and/or as a kernel
 * block device /dev/nbdN (NBD netlink).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "checked.h"
#include "conf.h"
#include "session.h"
#include "log.h"
#include "nbd_device.h"
#include "nbd_server.h"
#include "auth.h"
#include "ublk.h"
#include "uri.h"

#define PROG "rdmablk-initiator"
#define DEFAULT_KATO_MS 15000u

/* Command-line values; *_set says the flag was given (it beats the file). */
struct cli {
	const char *config, *attach, *uri, *hostid, *log_level;
	const char *secret, *target_secret;
	const char *nbd_socket, *nbd_listen, *nbd_device;
	bool nbd_listen_any, list, busy_poll;
	bool ublk; /* --ublk */
	int ublk_id; /* --ublk-id; -1: not given */
	uint32_t queues, depth, timeout, kato, threads, connect_timeout, ctrl_loss, rc_delay;
	uint32_t nbd_max_clients;
	bool queues_set, depth_set, timeout_set, kato_set, threads_set, connect_timeout_set;
	bool ctrl_loss_set, rc_delay_set, nbd_max_clients_set;
	int tos, ack_timeout, retry_count, rnr_retry, poll_us; /* -1: not given */
};

enum {
	OPT_HOSTID = 256,
	OPT_TIMEOUT,
	OPT_KATO,
	OPT_THREADS,
	OPT_LISTEN_ANY,
	OPT_LOG_LEVEL,
	OPT_BUSY_POLL,
	OPT_POLL_US,
	OPT_TOS,
	OPT_ACK_TIMEOUT,
	OPT_RETRY_COUNT,
	OPT_RNR_RETRY,
	OPT_CONNECT_TIMEOUT,
	OPT_CTRL_LOSS,
	OPT_RECONNECT_DELAY,
	OPT_LIST,
	OPT_NBD_DEVICE,
	OPT_NBD_MAX_CLIENTS,
	OPT_UBLK,
	OPT_UBLK_ID,
	OPT_SECRET,
	OPT_TARGET_SECRET,
};

static const struct option long_opts[] = {
	{ "config", required_argument, NULL, 'c' },
	{ "attach", required_argument, NULL, 'a' },
	{ "host-id", required_argument, NULL, OPT_HOSTID },
	{ "secret", required_argument, NULL, OPT_SECRET },
	{ "target-secret", required_argument, NULL, OPT_TARGET_SECRET },
	{ "queues", required_argument, NULL, 'q' },
	{ "queue-depth", required_argument, NULL, 'd' },
	{ "timeout", required_argument, NULL, OPT_TIMEOUT },
	{ "keepalive", required_argument, NULL, OPT_KATO },
	{ "threads", required_argument, NULL, OPT_THREADS },
	{ "nbd-socket", required_argument, NULL, 's' },
	{ "nbd-listen", required_argument, NULL, 'l' },
	{ "nbd-listen-any", no_argument, NULL, OPT_LISTEN_ANY },
	{ "nbd-device", required_argument, NULL, OPT_NBD_DEVICE },
	{ "nbd-max-clients", required_argument, NULL, OPT_NBD_MAX_CLIENTS },
	{ "ublk", no_argument, NULL, OPT_UBLK },
	{ "ublk-id", required_argument, NULL, OPT_UBLK_ID },
	{ "log-level", required_argument, NULL, OPT_LOG_LEVEL },
	{ "busy-poll", no_argument, NULL, OPT_BUSY_POLL },
	{ "poll-us", required_argument, NULL, OPT_POLL_US },
	{ "tos", required_argument, NULL, OPT_TOS },
	{ "ack-timeout", required_argument, NULL, OPT_ACK_TIMEOUT },
	{ "retry-count", required_argument, NULL, OPT_RETRY_COUNT },
	{ "rnr-retry", required_argument, NULL, OPT_RNR_RETRY },
	{ "connect-timeout", required_argument, NULL, OPT_CONNECT_TIMEOUT },
	{ "ctrl-loss-tmo", required_argument, NULL, OPT_CTRL_LOSS },
	{ "reconnect-delay", required_argument, NULL, OPT_RECONNECT_DELAY },
	{ "list", no_argument, NULL, OPT_LIST },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, 'V' },
	{ NULL, 0, NULL, 0 },
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: " PROG " URI [OPTIONS]\n"
		"       " PROG " --config FILE --attach NAME [OPTIONS]\n"
		"       " PROG " --list URI\n"
		"\n"
		"Attach an export of an rdmablk target and serve it over NBD or as a\n"
		"kernel block device.\n"
		"URI is tcp://HOST[:PORT]/EXPORT or rdma://HOST[:PORT]/EXPORT (port %u;\n"
		"IPv6 as [ADDR]).  Flags override the config file.\n"
		"\n"
		"  -c, --config FILE        initiator config file\n"
		"  -a, --attach NAME        use the [attach NAME] section of the config\n"
		"      --host-id ID         host identity sent to the target\n"
		"                           (default rdmablk:uuid:<machine-id>)\n"
		"      --secret FILE        this host's secret (DHHC-1 key file, mode 0600):\n"
		"                           authenticate to the target\n"
		"      --target-secret FILE the target's secret: verify the target before any\n"
		"                           I/O (needs --secret)\n"
		"  -q, --queues N           I/O queues (1..128, default 2)\n"
		"  -d, --queue-depth N      commands per I/O queue (1..1024, default 128)\n"
		"      --timeout MS         per-command timeout; late commands fail with EIO\n"
		"                           (default 30000)\n"
		"      --keepalive MS       keep-alive timeout, KEEPALIVE every MS/2\n"
		"                           (default %u, 0 = off)\n"
		"      --threads N          reactor threads (default min(queues, CPUs))\n"
		"      --connect-timeout MS transport connect timeout (default 5000)\n"
		"      --ctrl-loss-tmo MS   when the target is lost, reconnect and re-issue\n"
		"                           the unanswered commands for up to MS (I/O waits\n"
		"                           meanwhile); 0 = fail I/O at once (default)\n"
		"      --reconnect-delay MS between reconnect attempts (default 2000)\n"
		"  -s, --nbd-socket PATH    serve NBD on a Unix socket (access: file mode)\n"
		"  -l, --nbd-listen HOST:PORT\n"
		"                           serve NBD on TCP; HOST must be loopback\n"
		"      --nbd-listen-any     allow a non-loopback --nbd-listen address (NBD has\n"
		"                           no authentication or encryption: trusted nets only)\n"
		"      --nbd-max-clients N  NBD clients served at once from the sockets above\n"
		"                           (1..65536, default 256); more are closed at once\n"
		"      --nbd-device DEV     attach as kernel block device DEV (/dev/nbdN, or\n"
		"                           auto for the first free one; needs root and the\n"
		"                           nbd module); prints \"attached /dev/nbdN\"\n"
		"      --ublk               attach as ublk block device /dev/ublkbN (needs root\n"
		"                           and the ublk_drv module; not with the nbd options);\n"
		"                           prints \"attached /dev/ublkbN\"\n"
		"      --ublk-id N          with --ublk: device /dev/ublkbN, N = 0..1048575\n"
		"                           (default: the first free one)\n"
		"      --log-level LEVEL    error, warning, info (default), debug\n"
		"      --busy-poll          reactors spin on their completion queue\n"
		"      --poll-us N          keep polling N microseconds after work before\n"
		"                           sleeping (0..1000000; lower latency at low depth)\n"
		"      --tos N              rdma: IP ToS / traffic class (0..255)\n"
		"      --ack-timeout N      rdma: ack timeout, 4.096us * 2^N (0..31)\n"
		"      --retry-count N      rdma: transport retries (0..7)\n"
		"      --rnr-retry N        rdma: RNR retries (0..7, 7 = infinite)\n"
		"      --list               list the target's exports and exit\n"
		"  -h, --help               this text\n"
		"  -V, --version            version and built-in transports\n",
		RB_DEFAULT_PORT, DEFAULT_KATO_MS);
}

static void die_usage(const char *msg, const char *arg)
{
	fprintf(stderr, PROG ": %s %s\nTry '" PROG " --help'.\n", msg, arg);
	exit(EXIT_FAILURE);
}

static uint32_t parse_num(const char *flag, const char *s, uint32_t min, uint32_t max)
{
	uint32_t v;

	if (rb_parse_u32(s, min, max, &v)) {
		fprintf(stderr, PROG ": %s: '%s' is not a number in %u..%u\n", flag, s, min, max);
		exit(EXIT_FAILURE);
	}
	return v;
}

static void parse_cli(int argc, char **argv, struct cli *c)
{
	int opt;

	memset(c, 0, sizeof(*c));
	c->tos = c->ack_timeout = c->retry_count = c->rnr_retry = c->poll_us = -1;
	c->ublk_id = -1;
	while ((opt = getopt_long(argc, argv, "c:a:q:d:s:l:hV", long_opts, NULL)) != -1) {
		switch (opt) {
		case 'c': c->config = optarg; break;
		case 'a': c->attach = optarg; break;
		case OPT_HOSTID: c->hostid = optarg; break;
		case OPT_SECRET: c->secret = optarg; break;
		case OPT_TARGET_SECRET: c->target_secret = optarg; break;
		case 'q':
			c->queues = parse_num("--queues", optarg, 1, RB_ATTACH_QUEUES_MAX);
			c->queues_set = true;
			break;
		case 'd':
			c->depth = parse_num("--queue-depth", optarg, 1, RB_ATTACH_DEPTH_MAX);
			c->depth_set = true;
			break;
		case OPT_TIMEOUT:
			c->timeout = parse_num("--timeout", optarg, RB_ATTACH_TIMEOUT_MIN,
					       RB_ATTACH_TIMEOUT_MAX);
			c->timeout_set = true;
			break;
		case OPT_KATO:
			c->kato = parse_num("--keepalive", optarg, 0, 3600000);
			if (c->kato && c->kato < 200)
				die_usage("--keepalive: use 0 (off) or at least 200 ms, not", optarg);
			c->kato_set = true;
			break;
		case OPT_THREADS:
			c->threads = parse_num("--threads", optarg, 1, 256);
			c->threads_set = true;
			break;
		case OPT_CONNECT_TIMEOUT:
			c->connect_timeout =
			    parse_num("--connect-timeout", optarg, RB_TOPT_CONNECT_TIMEOUT_MIN,
				      RB_TOPT_CONNECT_TIMEOUT_MAX);
			c->connect_timeout_set = true;
			break;
		case OPT_CTRL_LOSS:
			c->ctrl_loss =
			    parse_num("--ctrl-loss-tmo", optarg, 0, RB_ATTACH_CTRL_LOSS_MAX);
			c->ctrl_loss_set = true;
			break;
		case OPT_RECONNECT_DELAY:
			c->rc_delay = parse_num("--reconnect-delay", optarg, RB_ATTACH_RC_DELAY_MIN,
						RB_ATTACH_RC_DELAY_MAX);
			c->rc_delay_set = true;
			break;
		case 's': c->nbd_socket = optarg; break;
		case 'l': c->nbd_listen = optarg; break;
		case OPT_LISTEN_ANY: c->nbd_listen_any = true; break;
		case OPT_NBD_DEVICE: c->nbd_device = optarg; break;
		case OPT_NBD_MAX_CLIENTS:
			c->nbd_max_clients =
			    parse_num("--nbd-max-clients", optarg, 1, RB_ATTACH_NBD_CLIENTS_MAX);
			c->nbd_max_clients_set = true;
			break;
		case OPT_UBLK: c->ublk = true; break;
		case OPT_UBLK_ID:
			c->ublk_id = (int)parse_num("--ublk-id", optarg, 0, RB_UBLK_ID_MAX);
			break;
		case OPT_LOG_LEVEL: c->log_level = optarg; break;
		case OPT_BUSY_POLL: c->busy_poll = true; break;
		case OPT_POLL_US:
			c->poll_us = (int)parse_num("--poll-us", optarg, 0, RB_TOPT_POLL_US_MAX);
			break;
		case OPT_TOS: c->tos = (int)parse_num("--tos", optarg, 0, RB_TOPT_TOS_MAX); break;
		case OPT_ACK_TIMEOUT:
			c->ack_timeout =
			    (int)parse_num("--ack-timeout", optarg, 0, RB_TOPT_ACK_TIMEOUT_MAX);
			break;
		case OPT_RETRY_COUNT:
			c->retry_count =
			    (int)parse_num("--retry-count", optarg, 0, RB_TOPT_RETRY_MAX);
			break;
		case OPT_RNR_RETRY:
			c->rnr_retry = (int)parse_num("--rnr-retry", optarg, 0, RB_TOPT_RETRY_MAX);
			break;
		case OPT_LIST: c->list = true; break;
		case 'h': usage(stdout); exit(EXIT_SUCCESS);
		case 'V':
			printf(PROG " %s (transports: %s)\n", PACKAGE_VERSION, rb_transport_names());
			exit(EXIT_SUCCESS);
		default: fprintf(stderr, "Try '" PROG " --help'.\n"); exit(EXIT_FAILURE);
		}
	}
	if (optind < argc)
		c->uri = argv[optind++];
	if (optind < argc)
		die_usage("unexpected argument:", argv[optind]);
}

/* Everything the run needs, merged from file and flags. */
struct run {
	struct rb_initiator_conf conf;
	struct rb_attach_conf attach;
	struct rb_session_params p;
	struct rb_uri uri;
	bool has_export;
	struct nbd_serve_cfg nbd;
	bool ublk; /* serve on a ublk device instead */
	int ublk_id; /* its device id, -1: the first free one */
};

/* --list takes a URI with or without /EXPORT. */
static int parse_uri(const char *s, bool list, struct rb_uri *u, bool *has_export)
{
	char err[320], tmp[4096];
	size_t n = strlen(s);
	const char *auth = strstr(s, "://");

	if (list && auth && !strchr(auth + 3, '/')) {
		*has_export = false;
		memset(u, 0, sizeof(*u));
		if (rb_uri_parse_listen(s, u->transport, sizeof(u->transport), &u->ep, err,
					sizeof(err))) {
			fprintf(stderr, PROG ": %s: uri: %s\n", s, err);
			return -EINVAL;
		}
		return 0;
	}
	if (list && n && s[n - 1] == '/' && n < sizeof(tmp)) {
		memcpy(tmp, s, n - 1);
		tmp[n - 1] = '\0';
		return parse_uri(tmp, list, u, has_export);
	}
	*has_export = true;
	if (rb_uri_parse(s, u, err, sizeof(err))) {
		fprintf(stderr, PROG ": %s: %s\n", s, err);
		return -EINVAL;
	}
	return 0;
}

static int build_run(const struct cli *c, struct run *r)
{
	const char *uri;
	char err[512];
	enum rb_log_level lvl;
	int ret;

	memset(r, 0, sizeof(*r));
	rb_initiator_conf_init(&r->conf);
	rb_attach_conf_init(&r->attach);
	if (c->config) {
		ret = rb_initiator_conf_load(&r->conf, c->config, err, sizeof(err));
		if (ret) {
			fprintf(stderr, PROG ": %s\n", err);
			return ret;
		}
		if (c->attach) {
			const struct rb_attach_conf *a = rb_initiator_conf_attach(&r->conf, c->attach);

			if (!a) {
				fprintf(stderr, PROG ": %s: no [attach %s] section\n", c->config,
					c->attach);
				return -ENOENT;
			}
			r->attach = *a;
		} else if (!c->uri && r->conf.nr_attach == 1) {
			r->attach = r->conf.attach[0];
		} else if (!c->uri) {
			fprintf(stderr, PROG ": %s: %d [attach] sections; pick one with --attach NAME\n",
				c->config, r->conf.nr_attach);
			return -EINVAL;
		}
	} else if (c->attach) {
		fprintf(stderr, PROG ": --attach needs --config FILE\n");
		return -EINVAL;
	}

	rb_log_set_level((enum rb_log_level)r->conf.log_level);
	if (c->log_level) {
		if (rb_log_parse_level(c->log_level, &lvl)) {
			fprintf(stderr, PROG ": --log-level '%s': want error, warning, info or debug\n",
				c->log_level);
			return -EINVAL;
		}
		rb_log_set_level(lvl);
	}

	/* --list output is the point: keep connection chatter out of it. */
	if (c->list && !c->log_level && rb_log_get_level() == RB_LOG_INFO)
		rb_log_set_level(RB_LOG_WARN);

	uri = c->uri ? c->uri : (r->attach.uri[0] ? r->attach.uri : NULL);
	if (!uri) {
		fprintf(stderr, PROG ": no target URI (give one, or --config FILE --attach NAME)\n"
				"Try '" PROG " --help'.\n");
		return -EINVAL;
	}
	ret = parse_uri(uri, c->list, &r->uri, &r->has_export);
	if (ret)
		return ret;

	r->p.ops = rb_transport_find(r->uri.transport);
	if (!r->p.ops) {
		fprintf(stderr, PROG ": %s: transport '%s' is not built in (available: %s)\n", uri,
			r->uri.transport, rb_transport_names());
		return -EPROTONOSUPPORT;
	}
	r->p.topts = r->conf.topts;
	if (c->tos >= 0)
		r->p.topts.tos = c->tos;
	if (c->ack_timeout >= 0)
		r->p.topts.ack_timeout = c->ack_timeout;
	if (c->retry_count >= 0)
		r->p.topts.retry_count = c->retry_count;
	if (c->rnr_retry >= 0)
		r->p.topts.rnr_retry = c->rnr_retry;
	if (c->busy_poll)
		r->p.topts.busy_poll = 1;
	if (c->poll_us >= 0)
		r->p.topts.poll_us = c->poll_us;
	if (c->connect_timeout_set)
		r->p.topts.connect_timeout_ms = (int)c->connect_timeout;
	r->p.ep = r->uri.ep;

	if (c->hostid) {
		if (!c->hostid[0] || strlen(c->hostid) >= RB_HOSTID_MAX) {
			fprintf(stderr, PROG ": --host-id: must be 1..%d bytes\n", RB_HOSTID_MAX - 1);
			return -EINVAL;
		}
		snprintf(r->p.hostid, sizeof(r->p.hostid), "%s", c->hostid);
	} else if (r->conf.hostid[0]) {
		snprintf(r->p.hostid, sizeof(r->p.hostid), "%s", r->conf.hostid);
	} else if (rb_default_hostid(r->p.hostid, sizeof(r->p.hostid))) {
		fprintf(stderr, PROG ": cannot derive a host id from /etc/machine-id; "
				"give --host-id\n");
		return -EINVAL;
	}
	{
		const char *sf = c->secret ? c->secret :
				 r->attach.secret_file[0] ? r->attach.secret_file : NULL;
		const char *tf = c->target_secret ? c->target_secret :
				 r->attach.target_secret_file[0] ? r->attach.target_secret_file :
								   NULL;

		if (tf && !sf) {
			fprintf(stderr, PROG ": --target-secret needs --secret (the exchange that "
					"proves the target starts with the host's proof)\n");
			return -EINVAL;
		}
		if (sf && rb_auth_key_load(sf, &r->p.secret, err, sizeof(err))) {
			fprintf(stderr, PROG ": --secret: %s\n", err);
			return -EINVAL;
		}
		r->p.has_secret = sf != NULL;
		if (tf && rb_auth_key_load(tf, &r->p.target_secret, err, sizeof(err))) {
			fprintf(stderr, PROG ": --target-secret: %s\n", err);
			return -EINVAL;
		}
		r->p.has_target_secret = tf != NULL;
	}
	snprintf(r->p.export_name, sizeof(r->p.export_name), "%s", r->uri.export_name);
	r->p.nr_io_queues = c->queues_set ? c->queues : r->attach.queues;
	r->p.queue_depth = c->depth_set ? c->depth : r->attach.queue_depth;
	r->p.timeout_ms = c->timeout_set ? c->timeout : r->attach.timeout_ms;
	r->p.kato_ms = c->kato_set ? c->kato : DEFAULT_KATO_MS;
	r->p.ctrl_loss_tmo_ms = c->ctrl_loss_set ? c->ctrl_loss : r->attach.ctrl_loss_tmo_ms;
	r->p.reconnect_delay_ms = c->rc_delay_set ? c->rc_delay : r->attach.reconnect_delay_ms;
	r->p.nr_reactors = c->threads_set ? c->threads : 0;

	r->nbd.socket = c->nbd_socket ? c->nbd_socket :
			r->attach.nbd_socket[0] ? r->attach.nbd_socket : NULL;
	r->nbd.listen = c->nbd_listen ? c->nbd_listen :
			r->attach.nbd_listen[0] ? r->attach.nbd_listen : NULL;
	r->nbd.device = c->nbd_device ? c->nbd_device :
			r->attach.nbd_device[0] ? r->attach.nbd_device : NULL;
	r->nbd.max_clients = c->nbd_max_clients_set ? c->nbd_max_clients :
						      r->attach.nbd_max_clients;
	r->nbd.listen_any = c->nbd_listen_any;
	if (c->list)
		return 0;
	r->ublk = c->ublk || r->attach.ublk;
	if (r->ublk && (r->nbd.socket || r->nbd.listen || r->nbd.device)) {
		/* The ublk tags take every slot of every queue. */
		fprintf(stderr, PROG ": ublk cannot be combined with nbd-device, nbd-socket or "
				"nbd-listen\n");
		return -EINVAL;
	}
	r->ublk_id = c->ublk_id >= 0 ? c->ublk_id :
		     r->attach.ublk_id != RB_UBLK_ID_ANY ? (int)r->attach.ublk_id : -1;
	if (r->ublk_id >= 0 && !r->ublk) {
		fprintf(stderr, PROG ": a ublk device id (--ublk-id, ublk-id) needs --ublk "
				"(ublk = yes)\n");
		return -EINVAL;
	}
	if (r->ublk)
		return 0;
	if (r->nbd.device && !nbd_kdev_name_ok(r->nbd.device)) {
		fprintf(stderr, PROG ": nbd device '%s': want /dev/nbdN or auto\n", r->nbd.device);
		return -EINVAL;
	}
	if (!r->nbd.socket && !r->nbd.listen && !r->nbd.device) {
		fprintf(stderr, PROG ": nothing to serve the export on: give --nbd-device DEV, "
				"--nbd-socket PATH and/or --nbd-listen HOST:PORT\n");
		return -EINVAL;
	}
	return 0;
}

static void flag_names(uint32_t f, char *buf, size_t len)
{
	static const struct {
		uint32_t bit;
		const char *name;
	} names[] = {
		{ RB_EXP_FLUSH, "flush" },     { RB_EXP_FUA, "fua" },
		{ RB_EXP_DISCARD, "discard" }, { RB_EXP_WRITE_ZEROES, "write-zeroes" },
		{ RB_EXP_ROTATIONAL, "rotational" }, { RB_EXP_NO_HOLE, "no-hole" },
		{ RB_EXP_FAST_ZERO, "fast-zero" },
	};
	size_t n = (size_t)snprintf(buf, len, "%s", f & RB_EXP_READ_ONLY ? "ro" : "rw");

	for (size_t i = 0; i < RB_ARRAY_SIZE(names) && n < len; i++)
		if (f & names[i].bit)
			n += (size_t)snprintf(buf + n, len - n, ",%s", names[i].name);
}

static int do_list(struct run *r)
{
	struct rb_export_entry *e;
	uint32_t nr, total;
	int ret;

	ret = rb_list_exports(&r->p, &e, &nr, &total);
	if (ret)
		return ret;
	printf("%-32s %20s %10s  %s\n", "NAME", "SIZE", "BLOCK", "FLAGS");
	for (uint32_t i = 0; i < nr; i++) {
		char flags[128];

		flag_names(rb_from_le32(e[i].export_flags), flags, sizeof(flags));
		printf("%-32s %20" PRIu64 " %10u  %s\n", e[i].name, rb_from_le64(e[i].size),
		       rb_from_le32(e[i].block_size), flags);
	}
	if (total > nr)
		printf("(%u more exports not shown)\n", total - nr);
	free(e);
	/* The list is the whole output (logs go to stderr): a short one is a failure. */
	if (fflush(stdout) == EOF || ferror(stdout)) {
		fprintf(stderr, PROG ": --list: writing the list: %s\n", strerror(errno));
		return -EIO;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct cli c;
	struct run r;
	sigset_t mask;
	int sfd, ret;

	rb_log_init(PROG, RB_LOG_INFO);
	parse_cli(argc, argv, &c);
	ret = build_run(&c, &r);
	if (ret) {
		rb_initiator_conf_free(&r.conf);
		return EXIT_FAILURE;
	}
	if (c.list) {
		ret = do_list(&r);
		rb_initiator_conf_free(&r.conf);
		return ret ? EXIT_FAILURE : EXIT_SUCCESS;
	}
	if (!r.has_export) {
		fprintf(stderr, PROG ": the URI needs an /EXPORT\n");
		return EXIT_FAILURE;
	}

	/* Signals arrive on a signalfd in the main loop; threads inherit the mask. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	if (pthread_sigmask(SIG_BLOCK, &mask, NULL)) {
		rb_err("pthread_sigmask failed");
		return EXIT_FAILURE;
	}
	sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
	if (sfd < 0) {
		rb_err("signalfd: %s", strerror(errno));
		return EXIT_FAILURE;
	}
	ret = r.ublk ? ublk_serve(&r.p, r.ublk_id, sfd) : nbd_serve(&r.p, &r.nbd, sfd);
	close(sfd);
	rb_initiator_conf_free(&r.conf);
	return ret ? EXIT_FAILURE : EXIT_SUCCESS;
}
