/* SPDX-License-Identifier: MIT */
/* Names for logs, status <-> errno, and the capsule validator. */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

#include "checked.h"
#include "wire.h"

int rb_opcode_known(unsigned int opcode)
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
	case RB_OP_CONNECT: return "CONNECT";
	case RB_OP_KEEPALIVE: return "KEEPALIVE";
	case RB_OP_DISCONNECT: return "DISCONNECT";
	case RB_OP_LIST_EXPORTS: return "LIST_EXPORTS";
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
};

const char *rb_reject_name(unsigned int reason)
{
	if (reason < RB_REJ_MAX && reject_names[reason])
		return reject_names[reason];
	return "unknown reason";
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
	case RB_S_BUSY: return EAGAIN;
	case RB_S_PREDECESSOR_BUSY: return EBUSY;
	case RB_S_ABORTED: return ESHUTDOWN;
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

static enum rb_status fail(struct rb_validate_err *err, const char *field, uint64_t value,
			   enum rb_status st)
{
	err->field = field;
	err->value = value;
	return st;
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

	err->field = NULL;
	err->value = 0;
	if (!rb_opcode_known(c->opcode))
		return fail(err, "opcode", c->opcode, RB_S_INVALID_OPCODE);
	st = check_common(c, ctx, err);
	if (st)
		return st;

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
		st = check_sgl(c, ctx, 0, 0, err);
		if (!st)
			st = check_range(c, ctx, err);
		if (!st && (eflags & RB_EXP_READ_ONLY))
			st = fail(err, "opcode", c->opcode, RB_S_READ_ONLY);
		if (!st && !(eflags & need))
			st = fail(err, "opcode", c->opcode, RB_S_NOT_SUPPORTED);
		return st;
	}
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
