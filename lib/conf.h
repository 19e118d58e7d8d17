/* SPDX-License-Identifier: MIT */
/*
 * Configuration files (INI, parsed with inih).  Errors are reported as
 * "FILE:LINE: reason" into the caller's buffer; parsing never exits.
 */
#ifndef RB_CONF_H
#define RB_CONF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport.h"
#include "wire.h"

#define RB_MAX_LISTEN 8
#define RB_MAX_ALLOWED_HOSTS 32

/* `auth` of an export: as [target] says, or its own. */
#define RB_AUTH_INHERIT (-1)
/* auth-dhgroups default: null, ffdhe2048, ffdhe3072 (bits of enum
 * rb_auth_dhgroup).  Larger groups cost much more per exchange (ffdhe8192:
 * ~125 ms a derive on each side) and are there to be chosen. */
#define RB_AUTH_DHGROUPS_DEFAULT 0x07u
#define RB_AUTH_OPTIONAL 0
#define RB_AUTH_REQUIRED 1

struct rb_listen_addr {
	char transport[16]; /* "tcp" or "rdma" */
	struct rb_endpoint ep;
};

struct rb_export_conf {
	char name[RB_EXPORT_NAME_MAX];
	char path[4096];
	bool read_only;
	bool direct; /* O_DIRECT, default true */
	bool inline_writes; /* buffered page-aligned writes by the reactor, default false */
	int auth; /* RB_AUTH_*: default RB_AUTH_INHERIT */
	int nr_allowed; /* 0 = any host (identification only: see [host]) */
	char allowed[RB_MAX_ALLOWED_HOSTS][RB_HOSTID_MAX];
	int line; /* line of the [export NAME] header, for messages */
};

/* [host NAME]: a host's secret (DHHC-1 key file); it must authenticate. */
struct rb_host_conf {
	char name[RB_EXPORT_NAME_MAX];
	char hostid[RB_HOSTID_MAX]; /* default: NAME */
	char secret_file[4096];
	int line;
};

struct rb_target_conf {
	int nr_listen;
	struct rb_listen_addr listen[RB_MAX_LISTEN];
	int threads; /* reactor threads; default 1 */
	uint32_t max_queue_depth; /* per queue; default 128 */
	uint32_t max_io_queues; /* per session; default 8 */
	uint32_t max_transfer; /* bytes per command; default 128 KiB */
	uint32_t incapsule; /* in-capsule data limit; default 8 KiB */
	uint32_t buffers; /* I/O buffers per reactor; default 256 */
	uint32_t keepalive_ms; /* max accepted KATO; default 120000 */
	uint32_t transfer_timeout_ms; /* host must complete a transfer; default 15000 */
	uint32_t pressure_timeout_ms; /* the same while others wait for buffers; default 3000 */
	/* Limits (issue 31): what one peer may hold, refused with a reason. */
	uint32_t max_connections; /* queues (admin + I/O) at once; default 1024 */
	uint32_t max_conns_per_addr; /* queues from one peer address; default 256 */
	uint32_t max_sessions; /* sessions incl. discovery; default 256 */
	uint32_t max_sessions_per_host; /* per host id; default 32 */
	uint32_t max_sessions_per_addr; /* per peer address; default 64 */
	uint32_t min_keepalive_ms; /* least KATO granted; 0 allows none; default 10000 */
	uint32_t discovery_timeout_ms; /* idle discovery session ends; default 5000 */
	int log_level; /* enum rb_log_level */
	struct rb_transport_opts topts;
	int auth; /* RB_AUTH_OPTIONAL (default) or RB_AUTH_REQUIRED: every export */
	/* Diffie-Hellman groups the target accepts (1 << enum rb_auth_dhgroup);
	 * it chooses the strongest the host offers; without "null" DH is required. */
	unsigned int auth_dhgroups;
	char target_secret_file[4096]; /* "" = the target does not prove itself */
	int nr_exports;
	struct rb_export_conf *exports; /* malloc'd array */
	int nr_hosts;
	struct rb_host_conf *hosts; /* malloc'd array */
};

/* ublk device ids are minor numbers: 0..RB_UBLK_ID_MAX. */
#define RB_UBLK_ID_MAX 1048575u
#define RB_UBLK_ID_ANY UINT32_MAX

/*
 * Limits of the initiator's settings, shared by the config keys and the
 * command-line flags of the same names.  Queues and depth stop where the
 * target's max-io-queues and max-queue-depth do: more is never granted.
 */
#define RB_ATTACH_QUEUES_MAX 128u
#define RB_ATTACH_DEPTH_MAX 1024u
#define RB_ATTACH_TIMEOUT_MIN 100u
#define RB_ATTACH_TIMEOUT_MAX 3600000u
#define RB_ATTACH_CTRL_LOSS_MAX 3600000u
#define RB_ATTACH_RC_DELAY_MIN 100u
#define RB_ATTACH_RC_DELAY_MAX 600000u
#define RB_ATTACH_NBD_CLIENTS_MAX 65536u
/* Transport options: every daemon section and the initiator's flags. */
#define RB_TOPT_POLL_US_MAX 1000000
#define RB_TOPT_TOS_MAX 255
#define RB_TOPT_ACK_TIMEOUT_MAX 31
#define RB_TOPT_RETRY_MAX 7
#define RB_TOPT_CONNECT_TIMEOUT_MIN 100
#define RB_TOPT_CONNECT_TIMEOUT_MAX 600000
/* max-connections and the other connection/session limits. */
#define RB_MAX_CONNECTIONS 1048576u
#define RB_TOPT_MAX_HALF_OPEN_MAX 65536

/* One [attach NAME] section, equivalent to the initiator's flags. */
struct rb_attach_conf {
	char name[RB_EXPORT_NAME_MAX];
	char uri[4096];
	uint32_t queues; /* I/O queues; default 2 */
	uint32_t queue_depth; /* requested per queue; default 128 */
	uint32_t timeout_ms; /* per-command timeout; default 30000 */
	uint32_t ctrl_loss_tmo_ms; /* reconnect for this long; default 0 = off */
	uint32_t reconnect_delay_ms; /* between attempts; default 2000 */
	char nbd_socket[108]; /* Unix socket path; "" = none */
	char nbd_listen[280]; /* HOST:PORT loopback TCP; "" = none */
	char nbd_device[64]; /* "/dev/nbdN", "auto" or "" (none) */
	uint32_t nbd_max_clients; /* NBD socket clients at once; default 256 */
	bool ublk;
	uint32_t ublk_id; /* ublk device id; RB_UBLK_ID_ANY = the first free one */
	char secret_file[4096]; /* this host's DHHC-1 secret; "" = none */
	char target_secret_file[4096]; /* verify the target with it; "" = do not */
	int line;
};

struct rb_initiator_conf {
	char hostid[RB_HOSTID_MAX]; /* "" = derive from /etc/machine-id */
	int log_level;
	struct rb_transport_opts topts;
	int nr_attach;
	struct rb_attach_conf *attach; /* malloc'd array */
};

/*
 * Without any listen key the target listens on tcp://0.0.0.0:RB_DEFAULT_PORT.
 * The loaders initialize *c themselves (previous contents are not freed) and
 * on error leave it freed and initialized; free it after a successful load.
 */
void rb_target_conf_init(struct rb_target_conf *c);
void rb_target_conf_free(struct rb_target_conf *c);
/* 0 or -errno; on error errbuf holds "FILE:LINE: reason". */
int rb_target_conf_load(struct rb_target_conf *c, const char *path, char *errbuf, size_t errlen);
const struct rb_export_conf *rb_target_conf_export(const struct rb_target_conf *c,
						   const char *name);
/* The [target] keys whose values differ between a and b: their names in
 * keys[0..max), the count returned (may exceed max). */
int rb_target_conf_diff(const struct rb_target_conf *a, const struct rb_target_conf *b,
			const char **keys, int max);

void rb_initiator_conf_init(struct rb_initiator_conf *c);
void rb_initiator_conf_free(struct rb_initiator_conf *c);
int rb_initiator_conf_load(struct rb_initiator_conf *c, const char *path, char *errbuf,
			   size_t errlen);
void rb_attach_conf_init(struct rb_attach_conf *a);
const struct rb_attach_conf *rb_initiator_conf_attach(const struct rb_initiator_conf *c,
						      const char *name);

/* Shared value parsers (also used for command-line flags); 0 or -EINVAL. */
int rb_parse_bool(const char *s, bool *out);
/* Accepts K/M/G suffixes (powers of 1024). */
int rb_parse_size(const char *s, uint64_t *out);
int rb_parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out);
/* "tcp://HOST:PORT" or "rdma://[v6]:PORT" listen address. */
int rb_parse_listen(const char *s, struct rb_listen_addr *out);

/* Host id default: "rdmablk:uuid:<machine-id as 8-4-4-4-12>".  0 or -errno,
 * logged (missing file, not 32 hex digits, buffer too small). */
int rb_default_hostid(char *buf, size_t len);
/* The same from another machine-id file (tests). */
int rb_hostid_from_file(const char *path, char *buf, size_t len);

#endif
