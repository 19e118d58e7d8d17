/* SPDX-License-Identifier: MIT */
/*
 * rdmablk wire protocol: the only place the on-the-wire layout is defined.
 * Every field is fixed width and little endian; every struct size is
 * asserted.  docs/protocol.md describes the same layout byte by byte.
 */
#ifndef RB_WIRE_H
#define RB_WIRE_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>

#define RB_MAGIC 0x4b4c4252u /* "RBLK" read as little-endian u32 */
/* Version 2 authenticates every queue (docs/protocol.md, "Authentication").
 * Version 1 peers are refused, never served. */
#define RB_PROTO_VERSION 2
#define RB_PROTO_VERSION_AUTH 2

#define RB_DEFAULT_PORT 4520 /* tcp and rdma (RDMA CM port space TCP) */

#define RB_CAPSULE_SIZE 64
#define RB_RESPONSE_SIZE 16
#define RB_HOSTID_MAX 224 /* bytes incl. NUL, like an NVMe NQN */
#define RB_EXPORT_NAME_MAX 256 /* bytes incl. NUL */

/* Command opcodes.  I/O opcodes < 0x80, admin opcodes >= 0x80. */
enum rb_opcode {
	RB_OP_READ = 0x01,
	RB_OP_WRITE = 0x02,
	RB_OP_FLUSH = 0x03,
	RB_OP_WRITE_ZEROES = 0x04,
	RB_OP_DISCARD = 0x05,
	RB_OP_QUEUE_AUTH = 0x06, /* v2: first command of an I/O queue */

	RB_OP_CONNECT = 0x80,
	RB_OP_KEEPALIVE = 0x81,
	RB_OP_DISCONNECT = 0x82,
	RB_OP_LIST_EXPORTS = 0x83,
	RB_OP_AUTH = 0x84, /* v2: one step of the admin queue's exchange */
};

/* Command flags (rb_capsule.flags). */
#define RB_CMD_F_FUA 0x01u
/* WRITE_ZEROES only, each if the export advertises the RB_EXP_ flag of the
 * same name: do not deallocate the range (it stays allocated); fail with
 * NOT_SUPPORTED at once rather than write the zeroes out. */
#define RB_CMD_F_NO_HOLE 0x02u
#define RB_CMD_F_FAST_ZERO 0x04u
#define RB_CMD_F_ALL (RB_CMD_F_FUA | RB_CMD_F_NO_HOLE | RB_CMD_F_FAST_ZERO)

/* SGL descriptor types (rb_sgl.type). */
enum rb_sgl_type {
	RB_SGL_NONE = 0, /* no data (FLUSH, DISCARD, WRITE_ZEROES, KEEPALIVE) */
	RB_SGL_KEYED = 1, /* addr/length/key name initiator memory */
	RB_SGL_INCAPSULE = 2, /* data follows the capsule in the same message */
};

/* Response status codes.  0 is success; rb_status_errno() maps to errno. */
enum rb_status {
	RB_S_SUCCESS = 0,
	RB_S_INVALID_OPCODE = 1,
	RB_S_INVALID_FIELD = 2,
	RB_S_OUT_OF_RANGE = 3, /* offset/length beyond export */
	RB_S_SGL_INVALID = 4, /* descriptor type/length wrong for opcode */
	RB_S_READ_ONLY = 5,
	RB_S_IO_ERROR = 6,
	RB_S_NO_SPACE = 7,
	RB_S_NOT_SUPPORTED = 8,
	RB_S_UNKNOWN_EXPORT = 9,
	RB_S_ACCESS_DENIED = 10, /* host not in export's allowed list */
	RB_S_INVALID_HANDLE = 11,
	RB_S_TRANSFER_ERROR = 12, /* one-sided READ/WRITE against host failed */
	RB_S_ABORTED = 13, /* target shutting down / queue torn down */
	RB_S_INVALID_QUEUE = 14, /* admin opcode on I/O queue or vice versa */
	RB_S_BAD_VERSION = 15,
	RB_S_BUSY = 16,
	RB_S_PREDECESSOR_BUSY = 17, /* replaced session still has commands in flight */
	RB_S_AUTH_REQUIRED = 18, /* queue not authenticated: only the exchange allowed */
	RB_S_AUTH_FAILED = 19, /* host proof wrong (or no secret for this host) */
	RB_S_AUTH_HASH_UNUSABLE = 20, /* no offered hash the target accepts */
	RB_S_AUTH_DHGROUP_UNUSABLE = 21, /* no offered DH group the target accepts */
	RB_S_AUTH_OUT_OF_STATE = 22, /* auth message not expected now */
	RB_S_AUTH_BIDI_UNAVAILABLE = 23, /* host asked for a target proof; no target secret */
	RB_S_SESSION_LIMIT = 24, /* the target has max-sessions sessions */
	RB_S_HOST_SESSION_LIMIT = 25, /* this host id has max-sessions-per-host sessions */
	RB_S_ADDR_SESSION_LIMIT = 26, /* this address has max-sessions-per-address sessions */
	RB_S_MAX
};

/* Export flags (rb_connect_rsp.export_flags). */
#define RB_EXP_READ_ONLY 0x01u
#define RB_EXP_FLUSH 0x02u
#define RB_EXP_FUA 0x04u
#define RB_EXP_DISCARD 0x08u
#define RB_EXP_WRITE_ZEROES 0x10u
#define RB_EXP_ROTATIONAL 0x20u
/* WRITE_ZEROES takes RB_CMD_F_NO_HOLE / RB_CMD_F_FAST_ZERO (a target that
 * does not set these predates them and may deallocate zeroed ranges). */
#define RB_EXP_NO_HOLE 0x40u
#define RB_EXP_FAST_ZERO 0x80u

struct rb_sgl {
	uint64_t addr; /* initiator virtual address (keyed) or 0 */
	uint32_t length; /* bytes described */
	uint32_t key; /* remote key (keyed) or 0 */
	uint8_t type; /* enum rb_sgl_type */
	uint8_t rsvd[7];
} __attribute__((packed));
_Static_assert(sizeof(struct rb_sgl) == 24, "rb_sgl is 24 bytes");

struct rb_capsule {
	uint8_t opcode; /* 0: enum rb_opcode */
	uint8_t flags; /* 1: RB_CMD_F_* */
	uint16_t cid; /* 2: command id, unique among outstanding on a queue */
	uint32_t handle; /* 4: export handle from CONNECT (0 on admin) */
	uint64_t offset; /* 8: byte offset into the export */
	uint32_t length; /* 16: byte length of the operation */
	uint32_t rsvd0; /* 20: must be zero */
	struct rb_sgl sgl; /* 24: data descriptor */
	uint8_t rsvd1[16]; /* 48: must be zero */
} __attribute__((packed));
_Static_assert(sizeof(struct rb_capsule) == RB_CAPSULE_SIZE, "capsule is 64 bytes");
_Static_assert(offsetof(struct rb_capsule, sgl) == 24, "sgl at 24");

struct rb_response {
	uint16_t cid; /* 0 */
	uint16_t status; /* 2: enum rb_status */
	uint32_t rsvd; /* 4 */
	uint64_t result; /* 8: opcode specific */
} __attribute__((packed));
_Static_assert(sizeof(struct rb_response) == RB_RESPONSE_SIZE, "response is 16 bytes");

/*
 * Connection private data, exchanged by the transport's connection manager
 * (RDMA CM private data; the tcp transport's hello frame).  Fits in the
 * 56 bytes RDMA CM allows for an RC connect request.
 */
struct rb_cm_req {
	uint32_t magic; /* RB_MAGIC */
	uint16_t version; /* RB_PROTO_VERSION */
	uint16_t qid; /* 0 = admin queue, 1..n = I/O queues */
	uint16_t depth; /* requested queue depth (outstanding commands) */
	uint16_t rsvd0;
	uint32_t incapsule; /* requested max in-capsule data bytes */
	uint64_t session; /* session id from CONNECT; 0 for the admin queue */
	uint8_t rsvd1[8];
} __attribute__((packed));
_Static_assert(sizeof(struct rb_cm_req) == 32, "cm req is 32 bytes");

struct rb_cm_rep {
	uint32_t magic;
	uint16_t version;
	uint16_t depth; /* granted: min(target limit, requested) */
	uint32_t incapsule; /* granted max in-capsule data bytes */
	uint32_t rsvd;
} __attribute__((packed));
_Static_assert(sizeof(struct rb_cm_rep) == 16, "cm rep is 16 bytes");

/* Reasons carried in a connection reject. */
enum rb_cm_reject_reason {
	RB_REJ_NONE = 0,
	RB_REJ_BAD_MAGIC = 1,
	RB_REJ_BAD_VERSION = 2,
	RB_REJ_BAD_QID = 3,
	RB_REJ_NO_SESSION = 4,
	RB_REJ_BAD_DEPTH = 5,
	RB_REJ_NO_RESOURCES = 6,
	RB_REJ_SHUTTING_DOWN = 7,
	RB_REJ_CONN_LIMIT = 8, /* the target has max-connections queues */
	RB_REJ_ADDR_CONN_LIMIT = 9, /* this address has max-connections-per-address */
	RB_REJ_MAX
};

struct rb_cm_rej {
	uint32_t magic;
	uint16_t version;
	uint16_t reason; /* enum rb_cm_reject_reason */
} __attribute__((packed));
_Static_assert(sizeof(struct rb_cm_rej) == 8, "cm rej is 8 bytes");

/*
 * CONNECT: keyed SGL naming one initiator buffer of RB_CONNECT_BUF_SIZE.
 * The target RDMA-READs the request half, validates it, RDMA-WRITEs the
 * response half back, then sends the response capsule.
 */
struct rb_connect_req {
	uint32_t magic; /* 0 */
	uint16_t version; /* 4 */
	uint16_t nr_io_queues; /* 6: requested */
	uint16_t queue_depth; /* 8: requested per I/O queue */
	uint16_t rsvd0; /* 10 */
	uint32_t kato_ms; /* 12: keep-alive timeout, 0 = none */
	uint64_t replaces; /* 16: session this one replaces (reconnect), 0 = none */
	uint8_t rsvd1[8]; /* 24 */
	char hostid[RB_HOSTID_MAX]; /* 32: NUL-terminated */
	char export_name[RB_EXPORT_NAME_MAX]; /* 256: NUL-terminated */
} __attribute__((packed));
_Static_assert(sizeof(struct rb_connect_req) == 512, "connect req is 512 bytes");

struct rb_connect_rsp {
	uint64_t session; /* 0: id for I/O queue CM requests */
	uint64_t size; /* 8: export size in bytes */
	uint32_t block_size; /* 16: logical block size */
	uint32_t max_transfer; /* 20: max bytes per command */
	uint32_t export_flags; /* 24: RB_EXP_* */
	uint32_t handle; /* 28: export handle for I/O capsules */
	uint16_t nr_io_queues; /* 32: granted */
	uint16_t queue_depth; /* 34: max per I/O queue */
	uint32_t phys_block_size; /* 36 */
	uint32_t auth_flags; /* 40: v2: RB_CONNECT_AUTH_*; v1: 0 */
	uint32_t kato_ms; /* 44: keep-alive timeout granted; 0 = none (or an older target) */
	uint8_t rsvd[16]; /* 48 */
} __attribute__((packed));
_Static_assert(offsetof(struct rb_connect_rsp, auth_flags) == 40, "auth_flags at 40");
_Static_assert(offsetof(struct rb_connect_rsp, kato_ms) == 44, "kato_ms at 44");
_Static_assert(sizeof(struct rb_connect_rsp) == 64, "connect rsp is 64 bytes");

#define RB_CONNECT_RSP_OFFSET 512
#define RB_CONNECT_BUF_SIZE (RB_CONNECT_RSP_OFFSET + 64)

/* LIST_EXPORTS: the target RDMA-WRITEs an array of these; result is
 * (visible count << 32) | entries written (docs/protocol.md). */
struct rb_export_entry {
	uint64_t size;
	uint32_t block_size;
	uint32_t export_flags;
	char name[RB_EXPORT_NAME_MAX];
} __attribute__((packed));
_Static_assert(sizeof(struct rb_export_entry) == 272, "export entry is 272 bytes");

/*
 * Authentication (protocol version 2, docs/protocol.md "Authentication").
 * Hash and DH group identifiers are those of NVMe DH-HMAC-CHAP; a mask has
 * bit (1 << id) set for each identifier offered or accepted.
 */
enum rb_auth_hash {
	RB_AUTH_HASH_SHA256 = 1,
	RB_AUTH_HASH_SHA384 = 2,
	RB_AUTH_HASH_SHA512 = 3,
};
#define RB_AUTH_HASH_MASK_ALL 0x0eu
enum rb_auth_dhgroup {
	RB_AUTH_DH_NULL = 0, /* no Diffie-Hellman */
	RB_AUTH_DH_FFDHE2048 = 1,
	RB_AUTH_DH_FFDHE3072 = 2,
	RB_AUTH_DH_FFDHE4096 = 3,
	RB_AUTH_DH_FFDHE6144 = 4,
	RB_AUTH_DH_FFDHE8192 = 5,
};
#define RB_AUTH_DH_MASK_ALL 0x3fu

enum rb_auth_msg_type {
	RB_AUTH_NEGOTIATE = 1, /* host -> target */
	RB_AUTH_CHALLENGE = 2, /* target -> host */
	RB_AUTH_REPLY = 3, /* host -> target */
	RB_AUTH_SUCCESS = 4, /* target -> host */
};
#define RB_AUTH_F_BIDI 0x01u /* host verifies the target (rb_auth_hdr.flags) */

#define RB_AUTH_NONCE_SIZE 32
#define RB_AUTH_PROOF_MAX 64 /* SHA-512; shorter digests are zero padded */
#define RB_AUTH_DH_MAX 1024 /* ffdhe8192 public value */

struct rb_auth_hdr {
	uint8_t type; /* 0: enum rb_auth_msg_type */
	uint8_t hash; /* 1: enum rb_auth_hash chosen (0 in NEGOTIATE) */
	uint8_t dhgroup; /* 2: enum rb_auth_dhgroup chosen (0 in NEGOTIATE) */
	uint8_t flags; /* 3: RB_AUTH_F_* */
	uint32_t rsvd; /* 4 */
} __attribute__((packed));
_Static_assert(sizeof(struct rb_auth_hdr) == 8, "auth hdr is 8 bytes");

struct rb_auth_negotiate {
	struct rb_auth_hdr hdr; /* 0: flags: BIDI if the host has a target secret */
	uint8_t hash_mask; /* 8: hashes the host accepts */
	uint8_t dh_mask; /* 9: DH groups the host accepts (bit 0: none) */
	uint8_t rsvd[6]; /* 10 */
} __attribute__((packed));
_Static_assert(sizeof(struct rb_auth_negotiate) == 16, "auth negotiate is 16 bytes");

struct rb_auth_challenge {
	struct rb_auth_hdr hdr; /* 0 */
	uint8_t nonce[RB_AUTH_NONCE_SIZE]; /* 8: target nonce */
	uint16_t dh_len; /* 40: bytes of dh_pub used, the group's size or 0 */
	uint8_t rsvd[6]; /* 42 */
	uint8_t dh_pub[RB_AUTH_DH_MAX]; /* 48: target's public value, big endian */
} __attribute__((packed));
_Static_assert(sizeof(struct rb_auth_challenge) == 1072, "auth challenge is 1072 bytes");

struct rb_auth_reply {
	struct rb_auth_hdr hdr; /* 0: hash, dhgroup as challenged; BIDI */
	uint8_t nonce[RB_AUTH_NONCE_SIZE]; /* 8: host nonce (zero without BIDI) */
	uint8_t proof[RB_AUTH_PROOF_MAX]; /* 40: host proof */
	uint16_t dh_len; /* 104 */
	uint8_t rsvd[6]; /* 106 */
	uint8_t dh_pub[RB_AUTH_DH_MAX]; /* 112: host's public value */
} __attribute__((packed));
_Static_assert(sizeof(struct rb_auth_reply) == 1136, "auth reply is 1136 bytes");

struct rb_auth_success {
	struct rb_auth_hdr hdr; /* 0: hash, dhgroup; BIDI: proof present */
	uint8_t proof[RB_AUTH_PROOF_MAX]; /* 8: target proof, zero without BIDI */
	struct rb_connect_rsp connect; /* 72: the grant CONNECT withheld */
} __attribute__((packed));
_Static_assert(sizeof(struct rb_auth_success) == 136, "auth success is 136 bytes");

/* AUTH: keyed SGL naming one buffer: host half, then target half. */
#define RB_AUTH_HOST_HALF 1136
#define RB_AUTH_RSP_OFFSET RB_AUTH_HOST_HALF
#define RB_AUTH_TGT_HALF 1072
#define RB_AUTH_BUF_SIZE (RB_AUTH_HOST_HALF + RB_AUTH_TGT_HALF)

union rb_auth_host_msg {
	struct rb_auth_hdr hdr;
	struct rb_auth_negotiate neg;
	struct rb_auth_reply reply;
	uint8_t raw[RB_AUTH_HOST_HALF];
};
_Static_assert(sizeof(union rb_auth_host_msg) == RB_AUTH_HOST_HALF, "host half");

union rb_auth_tgt_msg {
	struct rb_auth_hdr hdr;
	struct rb_auth_challenge chal;
	struct rb_auth_success succ;
	uint8_t raw[RB_AUTH_TGT_HALF];
};
_Static_assert(sizeof(union rb_auth_tgt_msg) == RB_AUTH_TGT_HALF, "target half");

/* CONNECT response, v2: the grant is withheld until AUTH succeeds. */
#define RB_CONNECT_AUTH_REQUIRED 0x01u /* rb_connect_rsp.auth_flags */

/*
 * Version 2 connection private data of an I/O queue: the host's nonce rides
 * in the request (54 bytes: what RDMA CM leaves after the transport's 2-byte
 * framing of its 56), the target's nonce and proof in the accept.
 */
struct rb_cm_req2 {
	uint32_t magic; /* 0: RB_MAGIC */
	uint16_t version; /* 4: RB_PROTO_VERSION_AUTH */
	uint16_t qid; /* 6 */
	uint16_t depth; /* 8 */
	uint32_t incapsule; /* 10 */
	uint64_t session; /* 14 */
	uint8_t nonce[RB_AUTH_NONCE_SIZE]; /* 22: host nonce (I/O queues), else 0 */
} __attribute__((packed));
_Static_assert(sizeof(struct rb_cm_req2) == 54, "cm req v2 is 54 bytes");

struct rb_cm_rep2 {
	uint32_t magic; /* 0 */
	uint16_t version; /* 4 */
	uint16_t depth; /* 6 */
	uint32_t incapsule; /* 8 */
	uint32_t rsvd; /* 12 */
	uint8_t nonce[RB_AUTH_NONCE_SIZE]; /* 16: target nonce (I/O queues), else 0 */
	uint8_t proof[RB_AUTH_PROOF_MAX]; /* 48: target queue proof, else 0 */
} __attribute__((packed));
_Static_assert(sizeof(struct rb_cm_rep2) == 112, "cm rep v2 is 112 bytes");

/* QUEUE_AUTH: in-capsule data of exactly this, whatever incapsule was granted. */
struct rb_queue_auth {
	uint8_t proof[RB_AUTH_PROOF_MAX]; /* host queue proof, zero padded */
} __attribute__((packed));
_Static_assert(sizeof(struct rb_queue_auth) == 64, "queue auth is 64 bytes");
#define RB_QUEUE_AUTH_SIZE 64

/* Little-endian accessors; the only way code reads or writes wire fields. */
#define rb_le16(x) htole16(x)
#define rb_le32(x) htole32(x)
#define rb_le64(x) htole64(x)
#define rb_from_le16(x) le16toh(x)
#define rb_from_le32(x) le32toh(x)
#define rb_from_le64(x) le64toh(x)

const char *rb_opcode_name(unsigned int opcode);
const char *rb_status_name(unsigned int status);
const char *rb_reject_name(unsigned int reason);
const char *rb_auth_msg_name(unsigned int type);
const char *rb_auth_hash_name(unsigned int hash);
const char *rb_auth_dhgroup_name(unsigned int group);
/* Digest bytes of an rb_auth_hash, 0 if unknown. */
unsigned int rb_auth_hash_len(unsigned int hash);
/* Public value bytes of an rb_auth_dhgroup (0 for none), -1 if unknown. */
int rb_auth_dh_len(unsigned int group);
/* The private data of a connection reject: our magic and version, reason. */
struct rb_cm_rej rb_cm_rej_make(enum rb_cm_reject_reason reason);
/* Map a status to a positive errno value for frontends (NBD, ublk). */
int rb_status_errno(unsigned int status);
/* Map a negative errno from the backend to a status. */
enum rb_status rb_errno_status(int neg_errno);

/*
 * Limits and export facts the validator checks a capsule against.
 */
struct rb_validate_ctx {
	int admin; /* capsule arrived on the admin queue */
	uint32_t handle; /* expected export handle (I/O queues) */
	uint64_t size; /* export size */
	uint32_t block_size; /* offset/length alignment */
	uint32_t max_transfer; /* max length with data */
	uint32_t incapsule; /* negotiated in-capsule limit */
	uint32_t received; /* bytes of in-capsule data actually received */
	uint32_t export_flags; /* RB_EXP_* */
	int auth; /* a version 2 queue: AUTH and QUEUE_AUTH exist (else INVALID_OPCODE) */
};

/* Field named by a validation failure, for the log line. */
struct rb_validate_err {
	const char *field;
	uint64_t value;
};

/*
 * The one choke point for incoming command capsules.  Returns RB_S_SUCCESS
 * or a status to send back; on failure fills err with the offending field.
 * Arithmetic is overflow checked; after success offset+length <= size.
 */
enum rb_status rb_validate_capsule(const struct rb_capsule *c, const struct rb_validate_ctx *ctx,
				   struct rb_validate_err *err);

/*
 * Connection setup messages, one choke point each: the checks that need
 * nothing but the message (and what the receiver asked for).  Lookups
 * against target state stay with the callers.  On a refusal err names the
 * field ("cm_req.magic", "connect.hostid", ...; a bare "cm_req"/"cm_rep"
 * is private data shorter than the struct, value = bytes received).
 */

/* Target: RB_REJ_NONE, or the reason to reject the connection with.  The
 * private data is an rb_cm_req2; a version 1 rb_cm_req (32 bytes) is
 * RB_REJ_BAD_VERSION with err->value its version. */
enum rb_cm_reject_reason rb_check_cm_req(const void *priv, size_t len, struct rb_validate_err *err);

/*
 * Grants above the ask that rb_check_cm_rep() and rb_check_connect_rsp()
 * return (or'ed, >= 0): harmless, the receiver clamps them to its ask.
 */
#define RB_GRANT_OVER_INCAPSULE 0x1
#define RB_GRANT_OVER_QUEUES 0x2
#define RB_GRANT_OVER_DEPTH 0x4

/*
 * Initiator, on a connection accept (an rb_cm_rep2): -EPROTO, or
 * RB_GRANT_OVER_INCAPSULE.
 * A depth above asked_depth is refused: only that many receives are posted.
 */
int rb_check_cm_rep(const void *priv, size_t len, uint16_t asked_depth, uint32_t asked_incapsule,
		    struct rb_validate_err *err);

/* Target, on the request half of a CONNECT buffer: RB_S_SUCCESS or the status. */
enum rb_status rb_check_connect_req(const struct rb_connect_req *cr, struct rb_validate_err *err);

/*
 * Initiator, on a CONNECT to an export (not discovery): -EPROTO, or
 * RB_GRANT_OVER_QUEUES / RB_GRANT_OVER_DEPTH.
 */
int rb_check_connect_rsp(const struct rb_connect_rsp *rsp, uint16_t asked_queues,
			 uint16_t asked_depth, struct rb_validate_err *err);

/*
 * LIST_EXPORTS reply received into ents (room for cap entries), result as
 * in its response: returns the entries usable (at most cap) and NUL-
 * terminates their names; *total is the visible count, never below that.
 */
/*
 * Authentication messages, one choke point each side.  Target: the host
 * half of an AUTH buffer, RB_S_SUCCESS or INVALID_FIELD (err names the
 * field); whether the type fits the exchange's state is the state
 * machine's business (lib/auth.c).  Host: the target half, expecting
 * `type`: 0 or -EPROTO.  Unused bytes of a half must be zero.
 */
enum rb_status rb_check_auth_host_msg(const union rb_auth_host_msg *m, struct rb_validate_err *err);
int rb_check_auth_tgt_msg(const union rb_auth_tgt_msg *m, unsigned int type,
			  struct rb_validate_err *err);

uint32_t rb_export_list_fix(struct rb_export_entry *ents, uint32_t cap, uint64_t result,
			    uint32_t *total);

#endif
