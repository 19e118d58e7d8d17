/* SPDX-License-Identifier: MIT */
/*
 * NBD protocol: constants, wire layouts, and the socket-free parts of the
 * server (handshake option handling, request checking) so they can be unit
 * tested.  Everything on the NBD wire is big endian.  Values follow the
 * NBD protocol document (doc/proto.md in the NetworkBlockDevice/nbd repo).
 */
#ifndef RB_NBD_PROTO_H
#define RB_NBD_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- handshake --------------------------------------------------------- */
#define NBD_MAGIC 0x4e42444d41474943ull /* "NBDMAGIC" */
#define NBD_IHAVEOPT 0x49484156454f5054ull /* "IHAVEOPT" */
#define NBD_REP_MAGIC 0x0003e889045565a9ull /* option reply magic */

/* Handshake flags (server, 16 bits). */
#define NBD_FLAG_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_NO_ZEROES (1u << 1)

/* Client flags (32 bits). */
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_C_NO_ZEROES (1u << 1)
#define NBD_FLAG_C_KNOWN (NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)

/* Transmission flags (16 bits). */
#define NBD_FLAG_HAS_FLAGS (1u << 0)
#define NBD_FLAG_READ_ONLY (1u << 1)
#define NBD_FLAG_SEND_FLUSH (1u << 2)
#define NBD_FLAG_SEND_FUA (1u << 3)
#define NBD_FLAG_ROTATIONAL (1u << 4)
#define NBD_FLAG_SEND_TRIM (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1u << 6)
#define NBD_FLAG_SEND_DF (1u << 7)
#define NBD_FLAG_CAN_MULTI_CONN (1u << 8)
#define NBD_FLAG_SEND_RESIZE (1u << 9)
#define NBD_FLAG_SEND_CACHE (1u << 10)
#define NBD_FLAG_SEND_FAST_ZERO (1u << 11)

/* Options. */
#define NBD_OPT_EXPORT_NAME 1u
#define NBD_OPT_ABORT 2u
#define NBD_OPT_LIST 3u
#define NBD_OPT_PEEK_EXPORT 4u
#define NBD_OPT_STARTTLS 5u
#define NBD_OPT_INFO 6u
#define NBD_OPT_GO 7u
#define NBD_OPT_STRUCTURED_REPLY 8u
#define NBD_OPT_LIST_META_CONTEXT 9u
#define NBD_OPT_SET_META_CONTEXT 10u
#define NBD_OPT_EXTENDED_HEADERS 11u

/* Option reply types. */
#define NBD_REP_ACK 1u
#define NBD_REP_SERVER 2u
#define NBD_REP_INFO 3u
#define NBD_REP_META_CONTEXT 4u
#define NBD_REP_FLAG_ERROR (1u << 31)
#define NBD_REP_ERR_UNSUP (NBD_REP_FLAG_ERROR | 1u)
#define NBD_REP_ERR_POLICY (NBD_REP_FLAG_ERROR | 2u)
#define NBD_REP_ERR_INVALID (NBD_REP_FLAG_ERROR | 3u)
#define NBD_REP_ERR_PLATFORM (NBD_REP_FLAG_ERROR | 4u)
#define NBD_REP_ERR_TLS_REQD (NBD_REP_FLAG_ERROR | 5u)
#define NBD_REP_ERR_UNKNOWN (NBD_REP_FLAG_ERROR | 6u)
#define NBD_REP_ERR_SHUTDOWN (NBD_REP_FLAG_ERROR | 7u)
#define NBD_REP_ERR_BLOCK_SIZE_REQD (NBD_REP_FLAG_ERROR | 8u)
#define NBD_REP_ERR_TOO_BIG (NBD_REP_FLAG_ERROR | 9u)

/* NBD_REP_INFO types. */
#define NBD_INFO_EXPORT 0u
#define NBD_INFO_NAME 1u
#define NBD_INFO_DESCRIPTION 2u
#define NBD_INFO_BLOCK_SIZE 3u

/* ---- transmission ------------------------------------------------------ */
#define NBD_REQUEST_MAGIC 0x25609513u
#define NBD_SIMPLE_REPLY_MAGIC 0x67446698u

#define NBD_CMD_READ 0u
#define NBD_CMD_WRITE 1u
#define NBD_CMD_DISC 2u
#define NBD_CMD_FLUSH 3u
#define NBD_CMD_TRIM 4u
#define NBD_CMD_CACHE 5u
#define NBD_CMD_WRITE_ZEROES 6u
#define NBD_CMD_BLOCK_STATUS 7u

#define NBD_CMD_FLAG_FUA (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE (1u << 1)
#define NBD_CMD_FLAG_DF (1u << 2)
#define NBD_CMD_FLAG_REQ_ONE (1u << 3)
#define NBD_CMD_FLAG_FAST_ZERO (1u << 4)

/* Error values (simple reply error field). */
#define NBD_EPERM 1u
#define NBD_EIO 5u
#define NBD_ENOMEM 12u
#define NBD_EINVAL 22u
#define NBD_ENOSPC 28u
#define NBD_EOVERFLOW 75u
#define NBD_ENOTSUP 95u
#define NBD_ESHUTDOWN 108u

/* Wire layouts (all fields big endian). */
struct nbd_greeting {
	uint64_t magic; /* NBD_MAGIC */
	uint64_t opt_magic; /* NBD_IHAVEOPT */
	uint16_t hs_flags;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_greeting) == 18, "newstyle greeting is 18 bytes");

struct nbd_opt_hdr {
	uint64_t magic; /* NBD_IHAVEOPT */
	uint32_t option;
	uint32_t length;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_opt_hdr) == 16, "option header is 16 bytes");

struct nbd_opt_reply {
	uint64_t magic; /* NBD_REP_MAGIC */
	uint32_t option;
	uint32_t type;
	uint32_t length;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_opt_reply) == 20, "option reply header is 20 bytes");

/* Reply to NBD_OPT_EXPORT_NAME (followed by 124 zeroes unless NO_ZEROES). */
struct nbd_export_name_reply {
	uint64_t size;
	uint16_t tflags;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_export_name_reply) == 10, "export name reply is 10 bytes");
#define NBD_EXPORT_NAME_ZEROES 124

struct nbd_info_export {
	uint16_t type; /* NBD_INFO_EXPORT */
	uint64_t size;
	uint16_t tflags;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_info_export) == 12, "NBD_INFO_EXPORT is 12 bytes");

struct nbd_info_block_size {
	uint16_t type; /* NBD_INFO_BLOCK_SIZE */
	uint32_t minimum;
	uint32_t preferred;
	uint32_t maximum;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_info_block_size) == 14, "NBD_INFO_BLOCK_SIZE is 14 bytes");

struct nbd_request {
	uint32_t magic; /* NBD_REQUEST_MAGIC */
	uint16_t flags;
	uint16_t type;
	uint64_t handle;
	uint64_t offset;
	uint32_t length;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_request) == 28, "request header is 28 bytes");

struct nbd_simple_reply {
	uint32_t magic; /* NBD_SIMPLE_REPLY_MAGIC */
	uint32_t error;
	uint64_t handle;
} __attribute__((packed));
_Static_assert(sizeof(struct nbd_simple_reply) == 16, "simple reply is 16 bytes");

/* Longest option payload we buffer: a 4096-byte name plus INFO requests. */
#define NBD_MAX_OPT_DATA (4096u + 4u + 2u + 2u * 64u)
/* Longest string the spec allows (export names). */
#define NBD_MAX_STRING 4096u

/* ---- socket-free server logic ------------------------------------------ */

/* What the NBD side advertises for the one attached export. */
struct nbd_export_desc {
	const char *name;
	uint64_t size;
	uint16_t tflags; /* NBD_FLAG_* transmission flags */
	uint32_t min_block; /* export block size */
	uint32_t pref_block;
	uint32_t max_payload; /* largest READ/WRITE we take in one request */
};

/*
 * Fill d from the rdmablk export facts (RB_EXP_* flags).  max_payload is
 * the caller's limit (what one request can hold); it is rounded down to
 * a multiple of the block size.  Returns 0 or -EINVAL (block size not a
 * power of two in [1, 65536], or max_payload smaller than a block).
 */
int nbd_export_desc_init(struct nbd_export_desc *d, const char *name, uint64_t size,
			 uint32_t rb_flags, uint32_t block_size, uint32_t max_payload);

/* Growable output buffer for handshake replies. */
struct nbd_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
	bool oom; /* an append failed; the connection must be dropped */
};

void nbd_buf_init(struct nbd_buf *b);
void nbd_buf_free(struct nbd_buf *b);
void nbd_buf_append(struct nbd_buf *b, const void *p, size_t n);
/* Drop the first n bytes (they were written to the socket). */
void nbd_buf_consume(struct nbd_buf *b, size_t n);

/* Server greeting for fixed newstyle. */
void nbd_put_greeting(struct nbd_buf *b);

/* Per-connection negotiation state. */
struct nbd_hs_state {
	bool no_zeroes; /* client set NBD_FLAG_C_NO_ZEROES */
	bool fixed; /* client set NBD_FLAG_C_FIXED_NEWSTYLE */
};

/* Check the client flags word; false: unknown flag, drop the connection. */
bool nbd_client_flags_ok(uint32_t flags, struct nbd_hs_state *st);

enum nbd_opt_result {
	NBD_OPT_R_CONTINUE, /* reply queued; read the next option */
	NBD_OPT_R_TRANSMISSION, /* reply queued; transmission phase begins after it */
	NBD_OPT_R_CLOSE, /* send what is queued (maybe nothing), then close */
};

/*
 * Handle one option with its complete data.  Appends the reply (if any) to
 * out.  len may exceed the bytes in data only when data is NULL (payload
 * was too large to buffer and was skipped).  *why names the reason for
 * NBD_OPT_R_CLOSE or for an error reply (for the log), never NULL.
 */
enum nbd_opt_result nbd_handle_option(const struct nbd_export_desc *d,
				      const struct nbd_hs_state *st, uint32_t opt,
				      const uint8_t *data, uint32_t len, struct nbd_buf *out,
				      const char **why);

/* Request decoded to host order. */
struct nbd_req_hdr {
	uint16_t flags;
	uint16_t type;
	uint64_t handle;
	uint64_t offset;
	uint32_t length;
};

/* false: bad magic (the stream is out of sync; close the connection). */
bool nbd_decode_request(const void *raw, struct nbd_req_hdr *out);

enum nbd_req_class {
	NBD_RC_EXECUTE, /* valid: hand to the session */
	NBD_RC_REPLY, /* reply now with *err (0: empty request, nothing to do) without
		       * touching the target; a WRITE's payload must still be consumed */
	NBD_RC_DISCONNECT, /* NBD_CMD_DISC */
};

/* Validate a request against the export; *err is an NBD_E* value. */
enum nbd_req_class nbd_check_request(const struct nbd_export_desc *d,
				     const struct nbd_req_hdr *r, uint32_t *err);

/* Map a (positive or negative) errno to an NBD error value. */
uint32_t nbd_errno_to_nbd(int err);

const char *nbd_cmd_name(unsigned int type);
const char *nbd_opt_name(unsigned int opt);

#endif
