/* SPDX-License-Identifier: MIT */
/* Wire format layout and the capsule validator. */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "tap.h"
#include "wire.h"

static struct rb_validate_ctx io_ctx(void)
{
	return (struct rb_validate_ctx){
		.admin = 0,
		.handle = 7,
		.size = 1 << 20,
		.block_size = 512,
		.max_transfer = 128 << 10,
		.incapsule = 8192,
		.received = 0,
		.export_flags = RB_EXP_FLUSH | RB_EXP_FUA | RB_EXP_DISCARD | RB_EXP_WRITE_ZEROES,
	};
}

static struct rb_capsule io_cmd(uint8_t op, uint64_t off, uint32_t len)
{
	struct rb_capsule c = { 0 };

	c.opcode = op;
	c.cid = rb_le16(3);
	c.handle = rb_le32(7);
	c.offset = rb_le64(off);
	c.length = rb_le32(len);
	if (op == RB_OP_READ || op == RB_OP_WRITE) {
		c.sgl.type = RB_SGL_KEYED;
		c.sgl.addr = rb_le64(0x7f0000001000ull);
		c.sgl.length = rb_le32(len);
		c.sgl.key = rb_le32(0x1234);
	}
	return c;
}

static enum rb_status v(const struct rb_capsule *c, const struct rb_validate_ctx *ctx,
			const char **field)
{
	struct rb_validate_err err;
	enum rb_status st = rb_validate_capsule(c, ctx, &err);

	*field = err.field ? err.field : "";
	return st;
}

static void test_layout(void)
{
	struct rb_capsule c = { 0 };
	uint8_t *b = (uint8_t *)&c;

	is_int(sizeof(struct rb_capsule), 64, "capsule is 64 bytes");
	is_int(sizeof(struct rb_response), 16, "response is 16 bytes");
	is_int(offsetof(struct rb_capsule, offset), 8, "offset at byte 8");
	is_int(offsetof(struct rb_capsule, length), 16, "length at byte 16");
	is_int(offsetof(struct rb_capsule, sgl) + offsetof(struct rb_sgl, key), 36,
	       "sgl.key at byte 36");
	is_int(offsetof(struct rb_capsule, sgl) + offsetof(struct rb_sgl, type), 40,
	       "sgl.type at byte 40");
	is_int(offsetof(struct rb_response, result), 8, "result at byte 8");
	is_int(offsetof(struct rb_connect_req, replaces), 16, "replaces at byte 16");
	is_int(offsetof(struct rb_connect_req, hostid), 32, "hostid at byte 32");
	is_int(offsetof(struct rb_connect_req, export_name), 256, "export name at byte 256");
	is_int(RB_CONNECT_BUF_SIZE, 576, "connect buffer is 576 bytes");

	/* Little endian regardless of host order. */
	c.offset = rb_le64(0x0102030405060708ull);
	c.cid = rb_le16(0xabcd);
	ok(b[8] == 0x08 && b[15] == 0x01, "offset encoded little endian");
	ok(b[2] == 0xcd && b[3] == 0xab, "cid encoded little endian");
	is_int(rb_from_le64(c.offset), 0x0102030405060708ull, "offset decodes");
}

static void test_names(void)
{
	is_str(rb_opcode_name(RB_OP_WRITE_ZEROES), "WRITE_ZEROES", "opcode name");
	is_str(rb_opcode_name(0x42), "UNKNOWN", "unknown opcode name");
	is_str(rb_status_name(RB_S_READ_ONLY), "READ_ONLY", "status name");
	is_str(rb_status_name(999), "UNKNOWN", "unknown status name");
	for (unsigned int s = 0; s < RB_S_MAX; s++)
		ok(strcmp(rb_status_name(s), "UNKNOWN") != 0, "status %u has a name", s);
	for (unsigned int r = 0; r < RB_REJ_MAX; r++)
		ok(strcmp(rb_reject_name(r), "unknown reason") != 0, "reject %u has a name", r);
	is_int(rb_status_errno(RB_S_READ_ONLY), EPERM, "read-only -> EPERM");
	is_int(rb_status_errno(RB_S_IO_ERROR), EIO, "io error -> EIO");
	is_int(rb_status_errno(RB_S_SUCCESS), 0, "success -> 0");
	is_int(rb_errno_status(-ENOSPC), RB_S_NO_SPACE, "ENOSPC -> NO_SPACE");
	is_int(rb_errno_status(-EIO), RB_S_IO_ERROR, "EIO -> IO_ERROR");
}

static void test_valid(void)
{
	struct rb_validate_ctx ctx = io_ctx();
	struct rb_capsule c;
	const char *f;

	c = io_cmd(RB_OP_READ, 0, 4096);
	is_int(v(&c, &ctx, &f), RB_S_SUCCESS, "plain read");
	c = io_cmd(RB_OP_READ, (1 << 20) - 512, 512);
	is_int(v(&c, &ctx, &f), RB_S_SUCCESS, "read of the last block");
	c = io_cmd(RB_OP_WRITE, 4096, 128 << 10);
	c.flags = RB_CMD_F_FUA;
	is_int(v(&c, &ctx, &f), RB_S_SUCCESS, "FUA write of max transfer");

	c = io_cmd(RB_OP_WRITE, 0, 4096);
	c.sgl.type = RB_SGL_INCAPSULE;
	c.sgl.addr = 0;
	c.sgl.key = 0;
	ctx.received = 4096;
	is_int(v(&c, &ctx, &f), RB_S_SUCCESS, "in-capsule write");
	ctx.received = 4000;
	is_int(v(&c, &ctx, &f), RB_S_SGL_INVALID, "in-capsule write with short data");
	is_str(f, "in-capsule data", "names the in-capsule data");
	ctx.received = 0;

	c = io_cmd(RB_OP_FLUSH, 0, 0);
	is_int(v(&c, &ctx, &f), RB_S_SUCCESS, "flush");
	c = io_cmd(RB_OP_DISCARD, 0, 1 << 20);
	is_int(v(&c, &ctx, &f), RB_S_SUCCESS, "discard of whole export");
	c = io_cmd(RB_OP_WRITE_ZEROES, 512, 1024);
	c.flags = RB_CMD_F_FUA;
	is_int(v(&c, &ctx, &f), RB_S_SUCCESS, "FUA write zeroes");
}

static void test_invalid(void)
{
	struct rb_validate_ctx ctx = io_ctx();
	struct rb_capsule c;
	const char *f;

	c = io_cmd(0x42, 0, 512);
	is_int(v(&c, &ctx, &f), RB_S_INVALID_OPCODE, "unknown opcode");
	c = io_cmd(RB_OP_CONNECT, 0, RB_CONNECT_BUF_SIZE);
	is_int(v(&c, &ctx, &f), RB_S_INVALID_QUEUE, "admin opcode on I/O queue");

	c = io_cmd(RB_OP_READ, 0, 512);
	c.handle = rb_le32(8);
	is_int(v(&c, &ctx, &f), RB_S_INVALID_HANDLE, "wrong handle");
	c = io_cmd(RB_OP_READ, 0, 512);
	c.rsvd0 = rb_le32(1);
	is_int(v(&c, &ctx, &f), RB_S_INVALID_FIELD, "reserved field set");
	is_str(f, "rsvd0", "names rsvd0");
	c = io_cmd(RB_OP_READ, 0, 512);
	c.rsvd1[15] = 1;
	is_int(v(&c, &ctx, &f), RB_S_INVALID_FIELD, "trailing reserved byte set");
	c = io_cmd(RB_OP_READ, 0, 512);
	c.flags = 0x80;
	is_int(v(&c, &ctx, &f), RB_S_INVALID_FIELD, "unknown flag");
	c = io_cmd(RB_OP_READ, 0, 512);
	c.flags = RB_CMD_F_FUA;
	is_int(v(&c, &ctx, &f), RB_S_INVALID_FIELD, "FUA on read");

	c = io_cmd(RB_OP_READ, 100, 512);
	is_int(v(&c, &ctx, &f), RB_S_INVALID_FIELD, "unaligned offset");
	is_str(f, "offset", "names offset");
	c = io_cmd(RB_OP_READ, 0, 100);
	is_int(v(&c, &ctx, &f), RB_S_INVALID_FIELD, "unaligned length");
	c = io_cmd(RB_OP_READ, 0, 0);
	is_int(v(&c, &ctx, &f), RB_S_INVALID_FIELD, "zero length read");
	c = io_cmd(RB_OP_READ, 1 << 20, 512);
	is_int(v(&c, &ctx, &f), RB_S_OUT_OF_RANGE, "read past the end");
	c = io_cmd(RB_OP_READ, UINT64_MAX - 511, 512);
	is_int(v(&c, &ctx, &f), RB_S_OUT_OF_RANGE, "offset+length overflows");
	c = io_cmd(RB_OP_READ, 0, 256 << 10);
	is_int(v(&c, &ctx, &f), RB_S_INVALID_FIELD, "longer than max transfer");

	c = io_cmd(RB_OP_READ, 0, 4096);
	c.sgl.length = rb_le32(8192);
	is_int(v(&c, &ctx, &f), RB_S_SGL_INVALID, "sgl length differs from length");
	c = io_cmd(RB_OP_READ, 0, 4096);
	c.sgl.type = RB_SGL_INCAPSULE;
	is_int(v(&c, &ctx, &f), RB_S_SGL_INVALID, "read with in-capsule descriptor");
	c = io_cmd(RB_OP_READ, 0, 4096);
	c.sgl.type = 9;
	is_int(v(&c, &ctx, &f), RB_S_SGL_INVALID, "unknown descriptor type");
	c = io_cmd(RB_OP_WRITE, 0, 16384);
	c.sgl.type = RB_SGL_INCAPSULE;
	c.sgl.addr = 0;
	c.sgl.key = 0;
	ctx.received = 16384;
	is_int(v(&c, &ctx, &f), RB_S_SGL_INVALID, "in-capsule write over the limit");
	ctx.received = 64;
	c = io_cmd(RB_OP_READ, 0, 512);
	is_int(v(&c, &ctx, &f), RB_S_SGL_INVALID, "keyed read with stray in-capsule data");
	ctx.received = 0;

	c = io_cmd(RB_OP_FLUSH, 512, 0);
	is_int(v(&c, &ctx, &f), RB_S_INVALID_FIELD, "flush with an offset");
	c = io_cmd(RB_OP_FLUSH, 0, 0);
	c.sgl.type = RB_SGL_KEYED;
	is_int(v(&c, &ctx, &f), RB_S_SGL_INVALID, "flush with a data descriptor");

	ctx.export_flags |= RB_EXP_READ_ONLY;
	c = io_cmd(RB_OP_WRITE, 0, 512);
	is_int(v(&c, &ctx, &f), RB_S_READ_ONLY, "write to read-only export");
	c = io_cmd(RB_OP_DISCARD, 0, 512);
	is_int(v(&c, &ctx, &f), RB_S_READ_ONLY, "discard on read-only export");
	ctx = io_ctx();
	ctx.export_flags &= ~RB_EXP_DISCARD;
	c = io_cmd(RB_OP_DISCARD, 0, 512);
	is_int(v(&c, &ctx, &f), RB_S_NOT_SUPPORTED, "discard unsupported");
}

static void test_admin(void)
{
	struct rb_validate_ctx ctx = { .admin = 1, .max_transfer = 128 << 10 };
	struct rb_capsule c = { 0 };
	const char *f;

	c.opcode = RB_OP_CONNECT;
	c.length = rb_le32(RB_CONNECT_BUF_SIZE);
	c.sgl.type = RB_SGL_KEYED;
	c.sgl.length = c.length;
	c.sgl.key = rb_le32(1);
	is_int(v(&c, &ctx, &f), RB_S_SUCCESS, "connect");
	c.length = rb_le32(100);
	c.sgl.length = c.length;
	is_int(v(&c, &ctx, &f), RB_S_INVALID_FIELD, "connect with short buffer");
	c = (struct rb_capsule){ .opcode = RB_OP_KEEPALIVE };
	is_int(v(&c, &ctx, &f), RB_S_SUCCESS, "keepalive");
	c.handle = rb_le32(1);
	is_int(v(&c, &ctx, &f), RB_S_INVALID_HANDLE, "admin command with a handle");
	c = (struct rb_capsule){ .opcode = RB_OP_READ };
	is_int(v(&c, &ctx, &f), RB_S_INVALID_QUEUE, "I/O opcode on admin queue");
	c = (struct rb_capsule){ .opcode = RB_OP_LIST_EXPORTS, .length = rb_le32(8) };
	c.sgl.type = RB_SGL_KEYED;
	c.sgl.length = c.length;
	is_int(v(&c, &ctx, &f), RB_S_INVALID_FIELD, "list buffer smaller than one entry");
}

/* Every byte value in every position: the validator must never accept a
 * range outside the export (a cheap exhaustive cousin of the fuzzer). */
static void test_single_byte_mutations(void)
{
	struct rb_validate_ctx ctx = io_ctx();
	struct rb_capsule base = io_cmd(RB_OP_WRITE, 4096, 4096), c;
	struct rb_validate_err err;
	int bad = 0;

	for (size_t pos = 0; pos < sizeof(c); pos++) {
		for (int val = 0; val < 256; val++) {
			enum rb_status st;

			c = base;
			((uint8_t *)&c)[pos] = (uint8_t)val;
			st = rb_validate_capsule(&c, &ctx, &err);
			if (st == RB_S_SUCCESS) {
				uint64_t off = rb_from_le64(c.offset);
				uint32_t len = rb_from_le32(c.length);

				if (off + len > ctx.size || len > ctx.max_transfer || off % 512)
					bad++;
			} else if (!err.field) {
				bad++;
			}
		}
	}
	is_int(bad, 0, "no mutated capsule escapes the range checks; every error names a field");
}

int main(void)
{
	test_layout();
	test_names();
	test_valid();
	test_invalid();
	test_admin();
	test_single_byte_mutations();
	return tap_done();
}
