/* SPDX-License-Identifier: MIT */
/* Names for logs, status <-> errno, the capsule and connection setup checkers. */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "checked.h"
#include "wire.h"

static int rb_opcode_known(unsigned int opcode)
{
	return strcmp(rb_opcode_name(opcode), "UNKNOWN") != 0;
}

const char *rb_opcode_name(unsigned int opcode)
{
	switch (opcode) {
	case RB_OP_READ: return "READ";
	case RB_OP_WRITE: return "WRITE";
	case RB_OP_FLUSH: return "FLUSH";
	case RB_OP_WRITE_ZEROES: return "WRITE_ZEROES";
	case RB_OP_DISCARD: return "DISCARD";
	case RB_OP_QUEUE_AUTH: return "QUEUE_AUTH";
	case RB_OP_CONNECT: return "CONNECT";
	case RB_OP_KEEPALIVE: return "KEEPALIVE";
	case RB_OP_DISCONNECT: return "DISCONNECT";
	case RB_OP_LIST_EXPORTS: return "LIST_EXPORTS";
	case RB_OP_AUTH: return "AUTH";
	}
	return "UNKNOWN";
}

static const char *const status_names[RB_S_MAX] = {
	[RB_S_SUCCESS] = "SUCCESS",
	[RB_S_INVALID_OPCODE] = "INVALID_OPCODE",
	[RB_S_INVALID_FIELD] = "INVALID_FIELD",
	[RB_S_OUT_OF_RANGE] = "OUT_OF_RANGE",
	[RB_S_SGL_INVALID] = "SGL_INVALID",
	[RB_S_READ_ONLY] = "READ_ONLY",
	[RB_S_IO_ERROR] = "IO_ERROR",
	[RB_S_NO_SPACE] = "NO_SPACE",
	[RB_S_NOT_SUPPORTED] = "NOT_SUPPORTED",
	[RB_S_UNKNOWN_EXPORT] = "UNKNOWN_EXPORT",
	[RB_S_ACCESS_DENIED] = "ACCESS_DENIED",
	[RB_S_INVALID_HANDLE] = "INVALID_HANDLE",
	[RB_S_TRANSFER_ERROR] = "TRANSFER_ERROR",
	[RB_S_ABORTED] = "ABORTED",
	[RB_S_INVALID_QUEUE] = "INVALID_QUEUE",
	[RB_S_BAD_VERSION] = "BAD_VERSION",
	[RB_S_BUSY] = "BUSY",
	[RB_S_PREDECESSOR_BUSY] = "PREDECESSOR_BUSY",
	[RB_S_AUTH_REQUIRED] = "AUTH_REQUIRED",
	[RB_S_AUTH_FAILED] = "AUTH_FAILED",
	[RB_S_AUTH_HASH_UNUSABLE] = "AUTH_HASH_UNUSABLE",
	[RB_S_AUTH_DHGROUP_UNUSABLE] = "AUTH_DHGROUP_UNUSABLE",
	[RB_S_AUTH_OUT_OF_STATE] = "AUTH_OUT_OF_STATE",
	[RB_S_AUTH_BIDI_UNAVAILABLE] = "AUTH_BIDI_UNAVAILABLE",
	[RB_S_SESSION_LIMIT] = "SESSION_LIMIT",
	[RB_S_HOST_SESSION_LIMIT] = "HOST_SESSION_LIMIT",
	[RB_S_ADDR_SESSION_LIMIT] = "ADDR_SESSION_LIMIT",
};

const char *rb_status_name(unsigned int status)
{
	if (status < RB_S_MAX && status_names[status])
		return status_names[status];
	return "UNKNOWN";
}

static const char *const reject_names[RB_REJ_MAX] = {
	[RB_REJ_NONE] = "no reason given",
	[RB_REJ_BAD_MAGIC] = "bad magic",
	[RB_REJ_BAD_VERSION] = "unsupported protocol version",
	[RB_REJ_BAD_QID] = "bad queue id",
	[RB_REJ_NO_SESSION] = "unknown session",
	[RB_REJ_BAD_DEPTH] = "bad queue depth",
	[RB_REJ_NO_RESOURCES] = "target out of resources",
	[RB_REJ_SHUTTING_DOWN] = "target shutting down",
	[RB_REJ_CONN_LIMIT] = "target at its connection limit (max-connections)",
	[RB_REJ_ADDR_CONN_LIMIT] = "too many connections from this address "
				   "(max-connections-per-address)",
};

const char *rb_reject_name(unsigned int reason)
{
	if (reason < RB_REJ_MAX && reject_names[reason])
		return reject_names[reason];
	return "unknown reason";
}

const char *rb_auth_msg_name(unsigned int type)
{
	switch (type) {
	case RB_AUTH_NEGOTIATE: return "NEGOTIATE";
	case RB_AUTH_CHALLENGE: return "CHALLENGE";
	case RB_AUTH_REPLY: return "REPLY";
	case RB_AUTH_SUCCESS: return "SUCCESS";
	}
	return "UNKNOWN";
}

const char *rb_auth_hash_name(unsigned int hash)
{
	switch (hash) {
	case RB_AUTH_HASH_SHA256: return "sha256";
	case RB_AUTH_HASH_SHA384: return "sha384";
	case RB_AUTH_HASH_SHA512: return "sha512";
	}
	return "unknown";
}

const char *rb_auth_dhgroup_name(unsigned int group)
{
	switch (group) {
	case RB_AUTH_DH_NULL: return "null";
	case RB_AUTH_DH_FFDHE2048: return "ffdhe2048";
	case RB_AUTH_DH_FFDHE3072: return "ffdhe3072";
	case RB_AUTH_DH_FFDHE4096: return "ffdhe4096";
	case RB_AUTH_DH_FFDHE6144: return "ffdhe6144";
	case RB_AUTH_DH_FFDHE8192: return "ffdhe8192";
	}
	return "unknown";
}

unsigned int rb_auth_hash_len(unsigned int hash)
{
	switch (hash) {
	case RB_AUTH_HASH_SHA256: return 32;
	case RB_AUTH_HASH_SHA384: return 48;
	case RB_AUTH_HASH_SHA512: return 64;
	}
	return 0;
}

int rb_auth_dh_len(unsigned int group)
{
	static const int len[] = { 0, 256, 384, 512, 768, 1024 };

	return group < sizeof(len) / sizeof(len[0]) ? len[group] : -1;
}

struct rb_cm_rej rb_cm_rej_make(enum rb_cm_reject_reason reason)
{
	struct rb_cm_rej rej = { .magic = rb_le32(RB_MAGIC),
				 .version = rb_le16(RB_PROTO_VERSION),
				 .reason = rb_le16((uint16_t)reason) };

	return rej;
}

int rb_status_errno(unsigned int status)
{
	switch (status) {
	case RB_S_SUCCESS: return 0;
	case RB_S_INVALID_OPCODE:
	case RB_S_INVALID_FIELD:
	case RB_S_SGL_INVALID:
	case RB_S_INVALID_HANDLE:
	case RB_S_INVALID_QUEUE:
	case RB_S_BAD_VERSION: return EINVAL;
	case RB_S_OUT_OF_RANGE: return ENOSPC; /* NBD: ENOSPC for beyond end */
	case RB_S_READ_ONLY: return EPERM;
	case RB_S_NO_SPACE: return ENOSPC;
	case RB_S_NOT_SUPPORTED: return EOPNOTSUPP;
	case RB_S_UNKNOWN_EXPORT: return ENOENT;
	case RB_S_ACCESS_DENIED: return EACCES;
	case RB_S_BUSY:
	case RB_S_SESSION_LIMIT:
	case RB_S_HOST_SESSION_LIMIT:
	case RB_S_ADDR_SESSION_LIMIT: return EAGAIN;
	case RB_S_PREDECESSOR_BUSY: return EBUSY;
	case RB_S_ABORTED: return ESHUTDOWN;
	case RB_S_AUTH_REQUIRED:
	case RB_S_AUTH_FAILED:
	case RB_S_AUTH_HASH_UNUSABLE:
	case RB_S_AUTH_DHGROUP_UNUSABLE:
	case RB_S_AUTH_BIDI_UNAVAILABLE: return EACCES;
	case RB_S_AUTH_OUT_OF_STATE: return EPROTO;
	case RB_S_IO_ERROR:
	case RB_S_TRANSFER_ERROR:
	default: return EIO;
	}
}

enum rb_status rb_errno_status(int neg_errno)
{
	switch (-neg_errno) {
	case 0: return RB_S_SUCCESS;
	case ENOSPC:
	case EDQUOT: return RB_S_NO_SPACE;
	case EROFS:
	case EPERM:
	case EACCES: return RB_S_READ_ONLY;
	case EOPNOTSUPP: return RB_S_NOT_SUPPORTED;
	case EINVAL: return RB_S_INVALID_FIELD;
	default: return RB_S_IO_ERROR;
	}
}

/* Names the refused field; returns ret (a status, reject reason or -errno). */
static int fail(struct rb_validate_err *err, const char *field, uint64_t value, int ret)
{
	err->field = field;
	err->value = value;
	return ret;
}

static int all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return 0;
	return 1;
}

/* Checks shared by every opcode: reserved bytes, flags, queue kind, handle. */
static enum rb_status check_common(const struct rb_capsule *c, const struct rb_validate_ctx *ctx,
				   struct rb_validate_err *err)
{
	uint8_t op = c->opcode;
	int is_admin_op = op >= 0x80;

	if (rb_from_le32(c->rsvd0))
		return fail(err, "rsvd0", rb_from_le32(c->rsvd0), RB_S_INVALID_FIELD);
	if (!all_zero(c->rsvd1, sizeof(c->rsvd1)))
		return fail(err, "rsvd1", 0, RB_S_INVALID_FIELD);
	if (!all_zero(c->sgl.rsvd, sizeof(c->sgl.rsvd)))
		return fail(err, "sgl.rsvd", 0, RB_S_INVALID_FIELD);
	if (c->flags & ~RB_CMD_F_ALL)
		return fail(err, "flags", c->flags, RB_S_INVALID_FIELD);
	if (is_admin_op != !!ctx->admin)
		return fail(err, "opcode", op, RB_S_INVALID_QUEUE);
	if (ctx->admin) {
		if (rb_from_le32(c->handle))
			return fail(err, "handle", rb_from_le32(c->handle), RB_S_INVALID_HANDLE);
		if (rb_from_le64(c->offset))
			return fail(err, "offset", rb_from_le64(c->offset), RB_S_INVALID_FIELD);
	} else if (rb_from_le32(c->handle) != ctx->handle) {
		return fail(err, "handle", rb_from_le32(c->handle), RB_S_INVALID_HANDLE);
	}
	return RB_S_SUCCESS;
}

/* The descriptor must be exactly `want`; length must equal the command's. */
static enum rb_status check_sgl(const struct rb_capsule *c, const struct rb_validate_ctx *ctx,
				int allow_keyed, int allow_incapsule, struct rb_validate_err *err)
{
	uint8_t type = c->sgl.type;
	uint32_t len = rb_from_le32(c->length);
	uint32_t slen = rb_from_le32(c->sgl.length);

	if (type == RB_SGL_NONE) {
		if (allow_keyed || allow_incapsule)
			return fail(err, "sgl.type", type, RB_S_SGL_INVALID);
		if (slen || rb_from_le64(c->sgl.addr) || rb_from_le32(c->sgl.key))
			return fail(err, "sgl", slen, RB_S_SGL_INVALID);
		if (ctx->received)
			return fail(err, "in-capsule data", ctx->received, RB_S_SGL_INVALID);
		return RB_S_SUCCESS;
	}
	if (type == RB_SGL_KEYED && allow_keyed) {
		if (slen != len)
			return fail(err, "sgl.length", slen, RB_S_SGL_INVALID);
		if (ctx->received)
			return fail(err, "in-capsule data", ctx->received, RB_S_SGL_INVALID);
		return RB_S_SUCCESS;
	}
	if (type == RB_SGL_INCAPSULE && allow_incapsule) {
		if (slen != len)
			return fail(err, "sgl.length", slen, RB_S_SGL_INVALID);
		if (rb_from_le64(c->sgl.addr) || rb_from_le32(c->sgl.key))
			return fail(err, "sgl.addr", rb_from_le64(c->sgl.addr), RB_S_SGL_INVALID);
		if (slen > ctx->incapsule)
			return fail(err, "sgl.length", slen, RB_S_SGL_INVALID);
		if (ctx->received != slen)
			return fail(err, "in-capsule data", ctx->received, RB_S_SGL_INVALID);
		return RB_S_SUCCESS;
	}
	return fail(err, "sgl.type", type, RB_S_SGL_INVALID);
}

/* Offset/length alignment and range against the export. */
static enum rb_status check_range(const struct rb_capsule *c, const struct rb_validate_ctx *ctx,
				  struct rb_validate_err *err)
{
	uint64_t off = rb_from_le64(c->offset);
	uint32_t len = rb_from_le32(c->length);
	uint32_t bs = ctx->block_size ? ctx->block_size : 1;

	if (len == 0)
		return fail(err, "length", len, RB_S_INVALID_FIELD);
	if (off % bs)
		return fail(err, "offset", off, RB_S_INVALID_FIELD);
	if (len % bs)
		return fail(err, "length", len, RB_S_INVALID_FIELD);
	if (!rb_range_ok(off, len, ctx->size))
		return fail(err, "offset+length", off, RB_S_OUT_OF_RANGE);
	return RB_S_SUCCESS;
}

enum rb_status rb_validate_capsule(const struct rb_capsule *c, const struct rb_validate_ctx *ctx,
				   struct rb_validate_err *err)
{
	enum rb_status st;
	uint32_t len = rb_from_le32(c->length);
	uint32_t eflags = ctx->export_flags;
	int fua = c->flags & RB_CMD_F_FUA;
	int zflags = c->flags & (RB_CMD_F_NO_HOLE | RB_CMD_F_FAST_ZERO);

	err->field = NULL;
	err->value = 0;
	if (!rb_opcode_known(c->opcode))
		return fail(err, "opcode", c->opcode, RB_S_INVALID_OPCODE);
	if ((c->opcode == RB_OP_AUTH || c->opcode == RB_OP_QUEUE_AUTH) && !ctx->auth)
		return fail(err, "opcode", c->opcode, RB_S_INVALID_OPCODE);
	st = check_common(c, ctx, err);
	if (st)
		return st;
	/* Zeroing flags: WRITE_ZEROES only, and only when advertised. */
	if (zflags && c->opcode != RB_OP_WRITE_ZEROES)
		return fail(err, "flags", c->flags, RB_S_INVALID_FIELD);

	switch (c->opcode) {
	case RB_OP_READ:
		if (fua)
			return fail(err, "flags", c->flags, RB_S_INVALID_FIELD);
		if (len > ctx->max_transfer)
			return fail(err, "length", len, RB_S_INVALID_FIELD);
		st = check_sgl(c, ctx, 1, 0, err);
		return st ? st : check_range(c, ctx, err);
	case RB_OP_WRITE:
		if (len > ctx->max_transfer)
			return fail(err, "length", len, RB_S_INVALID_FIELD);
		st = check_sgl(c, ctx, 1, 1, err);
		if (!st)
			st = check_range(c, ctx, err);
		if (!st && (eflags & RB_EXP_READ_ONLY))
			st = fail(err, "opcode", c->opcode, RB_S_READ_ONLY);
		return st;
	case RB_OP_FLUSH:
		if (fua)
			return fail(err, "flags", c->flags, RB_S_INVALID_FIELD);
		if (rb_from_le64(c->offset) || len)
			return fail(err, "offset/length", rb_from_le64(c->offset),
				    RB_S_INVALID_FIELD);
		st = check_sgl(c, ctx, 0, 0, err);
		return st;
	case RB_OP_WRITE_ZEROES:
	case RB_OP_DISCARD: {
		uint32_t need = c->opcode == RB_OP_DISCARD ? RB_EXP_DISCARD : RB_EXP_WRITE_ZEROES;

		if (fua && c->opcode == RB_OP_DISCARD)
			return fail(err, "flags", c->flags, RB_S_INVALID_FIELD);
		if (((c->flags & RB_CMD_F_NO_HOLE) && !(eflags & RB_EXP_NO_HOLE)) ||
		    ((c->flags & RB_CMD_F_FAST_ZERO) && !(eflags & RB_EXP_FAST_ZERO)))
			return fail(err, "flags", c->flags, RB_S_INVALID_FIELD);
		st = check_sgl(c, ctx, 0, 0, err);
		if (!st)
			st = check_range(c, ctx, err);
		if (!st && (eflags & RB_EXP_READ_ONLY))
			st = fail(err, "opcode", c->opcode, RB_S_READ_ONLY);
		if (!st && !(eflags & need))
			st = fail(err, "opcode", c->opcode, RB_S_NOT_SUPPORTED);
		return st;
	}
	case RB_OP_QUEUE_AUTH:
		/* Fixed size, in-capsule whatever incapsule was granted: the
		 * receives of a v2 I/O queue always have room for it. */
		if (fua)
			return fail(err, "flags", c->flags, RB_S_INVALID_FIELD);
		if (rb_from_le64(c->offset))
			return fail(err, "offset", rb_from_le64(c->offset), RB_S_INVALID_FIELD);
		if (len != RB_QUEUE_AUTH_SIZE)
			return fail(err, "length", len, RB_S_INVALID_FIELD);
		if (c->sgl.type != RB_SGL_INCAPSULE)
			return fail(err, "sgl.type", c->sgl.type, RB_S_SGL_INVALID);
		if (rb_from_le32(c->sgl.length) != len)
			return fail(err, "sgl.length", rb_from_le32(c->sgl.length), RB_S_SGL_INVALID);
		if (rb_from_le64(c->sgl.addr) || rb_from_le32(c->sgl.key))
			return fail(err, "sgl.addr", rb_from_le64(c->sgl.addr), RB_S_SGL_INVALID);
		if (ctx->received != len)
			return fail(err, "in-capsule data", ctx->received, RB_S_SGL_INVALID);
		return RB_S_SUCCESS;
	case RB_OP_AUTH:
		if (fua)
			return fail(err, "flags", c->flags, RB_S_INVALID_FIELD);
		if (len != RB_AUTH_BUF_SIZE)
			return fail(err, "length", len, RB_S_INVALID_FIELD);
		return check_sgl(c, ctx, 1, 0, err);
	case RB_OP_CONNECT:
		if (fua)
			return fail(err, "flags", c->flags, RB_S_INVALID_FIELD);
		if (len != RB_CONNECT_BUF_SIZE)
			return fail(err, "length", len, RB_S_INVALID_FIELD);
		return check_sgl(c, ctx, 1, 0, err);
	case RB_OP_LIST_EXPORTS:
		if (fua)
			return fail(err, "flags", c->flags, RB_S_INVALID_FIELD);
		if (len < sizeof(struct rb_export_entry) || len > ctx->max_transfer)
			return fail(err, "length", len, RB_S_INVALID_FIELD);
		return check_sgl(c, ctx, 1, 0, err);
	case RB_OP_KEEPALIVE:
	case RB_OP_DISCONNECT:
		if (fua)
			return fail(err, "flags", c->flags, RB_S_INVALID_FIELD);
		if (len)
			return fail(err, "length", len, RB_S_INVALID_FIELD);
		return check_sgl(c, ctx, 0, 0, err);
	}
	assert(!"rb_opcode_known() and the switch disagree");
	return fail(err, "opcode", c->opcode, RB_S_INVALID_OPCODE);
}

enum rb_cm_reject_reason rb_check_cm_req(const void *priv, size_t len, struct rb_validate_err *err)
{
	const struct rb_cm_req2 *cr = priv;
	uint16_t version;

	err->field = NULL;
	err->value = 0;
	if (len < offsetof(struct rb_cm_req2, qid))
		return fail(err, "cm_req", len, RB_REJ_BAD_MAGIC);
	if (rb_from_le32(cr->magic) != RB_MAGIC)
		return fail(err, "cm_req.magic", rb_from_le32(cr->magic), RB_REJ_BAD_MAGIC);
	/* The version first: a version 1 request is shorter, and must hear why. */
	version = rb_from_le16(cr->version);
	if (version != RB_PROTO_VERSION)
		return fail(err, "cm_req.version", version, RB_REJ_BAD_VERSION);
	if (len < sizeof(*cr))
		return fail(err, "cm_req", len, RB_REJ_BAD_MAGIC);
	/* The admin queue is what creates a session: it cannot join one. */
	if (rb_from_le16(cr->qid) == 0 && rb_from_le64(cr->session))
		return fail(err, "cm_req.session", rb_from_le64(cr->session), RB_REJ_BAD_QID);
	if (rb_from_le16(cr->depth) == 0)
		return fail(err, "cm_req.depth", 0, RB_REJ_BAD_DEPTH);
	return RB_REJ_NONE;
}

int rb_check_cm_rep(const void *priv, size_t len, uint16_t asked_depth, uint32_t asked_incapsule,
		    struct rb_validate_err *err)
{
	const struct rb_cm_rep2 *rep = priv;
	uint16_t depth;

	err->field = NULL;
	err->value = 0;
	if (len >= offsetof(struct rb_cm_rep2, depth) && rb_from_le32(rep->magic) == RB_MAGIC &&
	    rb_from_le16(rep->version) != RB_PROTO_VERSION)
		return fail(err, "cm_rep.version", rb_from_le16(rep->version), -EPROTO);
	if (len < sizeof(*rep))
		return fail(err, "cm_rep", len, -EPROTO);
	if (rb_from_le32(rep->magic) != RB_MAGIC)
		return fail(err, "cm_rep.magic", rb_from_le32(rep->magic), -EPROTO);
	if (rep->rsvd)
		return fail(err, "cm_rep.rsvd", rb_from_le32(rep->rsvd), -EPROTO);
	depth = rb_from_le16(rep->depth);
	if (depth == 0 || depth > asked_depth)
		return fail(err, "cm_rep.depth", depth, -EPROTO);
	return rb_from_le32(rep->incapsule) > asked_incapsule ? RB_GRANT_OVER_INCAPSULE : 0;
}

/* Length of a string field; size when it has no NUL (unterminated). */
static uint64_t field_len(const char *f, size_t size)
{
	const char *nul = memchr(f, '\0', size);

	return nul ? (uint64_t)(nul - f) : size;
}

enum rb_status rb_check_connect_req(const struct rb_connect_req *cr, struct rb_validate_err *err)
{
	uint64_t host_len = field_len(cr->hostid, sizeof(cr->hostid));
	uint64_t name_len = field_len(cr->export_name, sizeof(cr->export_name));

	err->field = NULL;
	err->value = 0;
	if (rb_from_le32(cr->magic) != RB_MAGIC)
		return fail(err, "connect.magic", rb_from_le32(cr->magic), RB_S_BAD_VERSION);
	if (rb_from_le16(cr->version) != RB_PROTO_VERSION)
		return fail(err, "connect.version", rb_from_le16(cr->version), RB_S_BAD_VERSION);
	/* value: the string's length, the field's size if unterminated. */
	if (host_len == 0 || host_len == sizeof(cr->hostid))
		return fail(err, "connect.hostid", host_len, RB_S_INVALID_FIELD);
	if (name_len == sizeof(cr->export_name))
		return fail(err, "connect.export_name", name_len, RB_S_INVALID_FIELD);
	return RB_S_SUCCESS;
}

int rb_check_connect_rsp(const struct rb_connect_rsp *rsp, uint16_t asked_queues,
			 uint16_t asked_depth, struct rb_validate_err *err)
{
	uint32_t bs = rb_from_le32(rsp->block_size);
	uint32_t max_transfer = rb_from_le32(rsp->max_transfer);
	uint16_t nq = rb_from_le16(rsp->nr_io_queues);
	uint16_t depth = rb_from_le16(rsp->queue_depth);
	int over = 0;

	err->field = NULL;
	err->value = 0;
	/* What the initiator supports: a power of two up to 64 KiB. */
	if (!rb_is_pow2(bs) || bs > 65536)
		return fail(err, "connect_rsp.block_size", bs, -EPROTO);
	if (max_transfer < bs)
		return fail(err, "connect_rsp.max_transfer", max_transfer, -EPROTO);
	if (nq == 0)
		return fail(err, "connect_rsp.nr_io_queues", nq, -EPROTO);
	if (depth == 0)
		return fail(err, "connect_rsp.queue_depth", depth, -EPROTO);
	if (nq > asked_queues)
		over |= RB_GRANT_OVER_QUEUES;
	if (depth > asked_depth)
		over |= RB_GRANT_OVER_DEPTH;
	return over;
}

/* The DH public value: exactly the group's size, zero beyond it. */
static int check_dh(unsigned int group, uint16_t dh_len_le, const uint8_t *pub, const char *field,
		    struct rb_validate_err *err)
{
	int want = rb_auth_dh_len(group);
	uint16_t got = rb_from_le16(dh_len_le);

	if (want < 0)
		return fail(err, "auth.dhgroup", group, -1);
	if (got != want)
		return fail(err, field, got, -1);
	if (!all_zero(pub + got, RB_AUTH_DH_MAX - got))
		return fail(err, field, got, -1);
	/* A public value of 0 or 1 would make the shared secret trivial;
	 * OpenSSL checks the range too, this catches the all-zero case early. */
	if (got && all_zero(pub, got))
		return fail(err, field, 0, -1);
	return 0;
}

/* A proof: the hash's digest, zero padded. */
static int check_proof(unsigned int hash, const uint8_t *proof, const char *field,
		       struct rb_validate_err *err)
{
	unsigned int n = rb_auth_hash_len(hash);

	if (!n)
		return fail(err, "auth.hash", hash, -1);
	if (!all_zero(proof + n, RB_AUTH_PROOF_MAX - n))
		return fail(err, field, n, -1);
	return 0;
}

static int check_auth_host(const union rb_auth_host_msg *m, struct rb_validate_err *err)
{
	const struct rb_auth_hdr *h = &m->hdr;

	if (rb_from_le32(h->rsvd))
		return fail(err, "auth.rsvd", rb_from_le32(h->rsvd), -1);
	if (h->flags & ~RB_AUTH_F_BIDI)
		return fail(err, "auth.flags", h->flags, -1);
	switch (h->type) {
	case RB_AUTH_NEGOTIATE: {
		const struct rb_auth_negotiate *n = &m->neg;

		if (h->hash || h->dhgroup)
			return fail(err, "auth.hash", h->hash, -1);
		if (!n->hash_mask || (n->hash_mask & ~RB_AUTH_HASH_MASK_ALL))
			return fail(err, "negotiate.hash_mask", n->hash_mask, -1);
		if (!n->dh_mask || (n->dh_mask & ~RB_AUTH_DH_MASK_ALL))
			return fail(err, "negotiate.dh_mask", n->dh_mask, -1);
		if (!all_zero(n->rsvd, sizeof(n->rsvd)))
			return fail(err, "negotiate.rsvd", 0, -1);
		if (!all_zero(m->raw + sizeof(*n), sizeof(m->raw) - sizeof(*n)))
			return fail(err, "negotiate.padding", 0, -1);
		return 0;
	}
	case RB_AUTH_REPLY: {
		const struct rb_auth_reply *r = &m->reply;

		if (check_proof(h->hash, r->proof, "reply.proof", err) ||
		    check_dh(h->dhgroup, r->dh_len, r->dh_pub, "reply.dh_len", err))
			return -1;
		if (!(h->flags & RB_AUTH_F_BIDI) && !all_zero(r->nonce, sizeof(r->nonce)))
			return fail(err, "reply.nonce", 0, -1);
		if (!all_zero(r->rsvd, sizeof(r->rsvd)))
			return fail(err, "reply.rsvd", 0, -1);
		return 0;
	}
	}
	return fail(err, "auth.type", h->type, -1);
}

enum rb_status rb_check_auth_host_msg(const union rb_auth_host_msg *m, struct rb_validate_err *err)
{
	err->field = NULL;
	err->value = 0;
	return check_auth_host(m, err) ? RB_S_INVALID_FIELD : RB_S_SUCCESS;
}

static int check_auth_tgt(const union rb_auth_tgt_msg *m, unsigned int type,
			  struct rb_validate_err *err)
{
	const struct rb_auth_hdr *h = &m->hdr;

	if (h->type != type)
		return fail(err, "auth.type", h->type, -1);
	if (rb_from_le32(h->rsvd))
		return fail(err, "auth.rsvd", rb_from_le32(h->rsvd), -1);
	if (h->flags & ~RB_AUTH_F_BIDI)
		return fail(err, "auth.flags", h->flags, -1);
	if (type == RB_AUTH_CHALLENGE) {
		const struct rb_auth_challenge *c = &m->chal;

		if (h->flags)
			return fail(err, "auth.flags", h->flags, -1);
		if (!rb_auth_hash_len(h->hash))
			return fail(err, "auth.hash", h->hash, -1);
		if (check_dh(h->dhgroup, c->dh_len, c->dh_pub, "challenge.dh_len", err))
			return -1;
		if (!all_zero(c->rsvd, sizeof(c->rsvd)))
			return fail(err, "challenge.rsvd", 0, -1);
		return 0;
	}
	if (type == RB_AUTH_SUCCESS) {
		const struct rb_auth_success *s = &m->succ;

		if (check_proof(h->hash, s->proof, "success.proof", err))
			return -1;
		if (!(h->flags & RB_AUTH_F_BIDI) && !all_zero(s->proof, sizeof(s->proof)))
			return fail(err, "success.proof", 0, -1);
		if (!all_zero(m->raw + sizeof(*s), sizeof(m->raw) - sizeof(*s)))
			return fail(err, "success.padding", 0, -1);
		return 0;
	}
	return fail(err, "auth.type", h->type, -1);
}

int rb_check_auth_tgt_msg(const union rb_auth_tgt_msg *m, unsigned int type,
			  struct rb_validate_err *err)
{
	err->field = NULL;
	err->value = 0;
	return check_auth_tgt(m, type, err) ? -EPROTO : 0;
}

uint32_t rb_export_list_fix(struct rb_export_entry *ents, uint32_t cap, uint64_t result,
			    uint32_t *total)
{
	/* result: entries written (low 32 bits), entries visible (high 32). */
	uint32_t n = (uint32_t)result;

	if (n > cap)
		n = cap;
	*total = (uint32_t)(result >> 32);
	if (*total < n)
		*total = n;
	for (uint32_t i = 0; i < n; i++)
		ents[i].name[sizeof(ents[i].name) - 1] = '\0';
	return n;
}
