/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the capsule validator: the first bytes choose the
 * validation context, the next 64 are the capsule.  Whatever the input,
 * an accepted capsule must describe a range inside the export.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rb_validate_ctx ctx = { 0 };
	struct rb_validate_err err;
	struct rb_capsule c;
	uint32_t shift;

	if (size < 8 + sizeof(c))
		return 0;
	ctx.admin = data[0] & 1;
	ctx.auth = !!(data[0] & 2); /* a version 2 queue: AUTH, QUEUE_AUTH exist */
	ctx.export_flags = data[1];
	shift = 9 + (data[2] % 4); /* 512 .. 4096 */
	ctx.block_size = 1u << shift;
	ctx.size = ((uint64_t)data[3] << 20) + ((uint64_t)data[4] << shift);
	ctx.max_transfer = 4096u << (data[5] % 8);
	ctx.incapsule = (uint32_t)data[6] << 6;
	ctx.received = (uint32_t)data[7] << 6;
	ctx.handle = 1;
	memcpy(&c, data + 8, sizeof(c));

	if (rb_validate_capsule(&c, &ctx, &err) != RB_S_SUCCESS) {
		if (!err.field)
			abort(); /* every refusal must name the field for the log */
		return 0;
	}
	if (!ctx.admin && (c.opcode == RB_OP_READ || c.opcode == RB_OP_WRITE ||
			   c.opcode == RB_OP_DISCARD || c.opcode == RB_OP_WRITE_ZEROES)) {
		uint64_t off = rb_from_le64(c.offset);
		uint32_t len = rb_from_le32(c.length);

		if (!rb_range_ok(off, len, ctx.size) || off % ctx.block_size || len % ctx.block_size)
			abort();
		if ((c.opcode == RB_OP_READ || c.opcode == RB_OP_WRITE) && len > ctx.max_transfer)
			abort();
		if (c.opcode != RB_OP_READ && (ctx.export_flags & RB_EXP_READ_ONLY))
			abort();
	}
	/* The auth opcodes exist only on a version 2 queue. */
	if ((c.opcode == RB_OP_AUTH || c.opcode == RB_OP_QUEUE_AUTH) && !ctx.auth)
		abort();
	/* QUEUE_AUTH: exactly its 64 bytes, in-capsule whatever was granted
	 * (v2 receives have room for them); anything else within the grant. */
	if (c.opcode == RB_OP_QUEUE_AUTH &&
	    (ctx.admin || c.sgl.type != RB_SGL_INCAPSULE ||
	     rb_from_le32(c.sgl.length) != RB_QUEUE_AUTH_SIZE || ctx.received != RB_QUEUE_AUTH_SIZE))
		abort();
	if (c.opcode != RB_OP_QUEUE_AUTH && c.sgl.type == RB_SGL_INCAPSULE &&
	    rb_from_le32(c.sgl.length) > ctx.incapsule)
		abort();
	if (c.opcode == RB_OP_AUTH && (!ctx.admin || rb_from_le32(c.length) != RB_AUTH_BUF_SIZE))
		abort();
	/* Zeroing flags: WRITE_ZEROES only, and only as advertised. */
	if ((c.flags & (RB_CMD_F_NO_HOLE | RB_CMD_F_FAST_ZERO)) && c.opcode != RB_OP_WRITE_ZEROES)
		abort();
	if (((c.flags & RB_CMD_F_NO_HOLE) && !(ctx.export_flags & RB_EXP_NO_HOLE)) ||
	    ((c.flags & RB_CMD_F_FAST_ZERO) && !(ctx.export_flags & RB_EXP_FAST_ZERO)))
		abort();
	return 0;
}
