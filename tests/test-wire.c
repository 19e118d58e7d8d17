/* SPDX-License-Identifier: MIT */
/* Wire format layout, the capsule validator and the connection setup checkers. */
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

/* NO_HOLE and FAST_ZERO: on WRITE_ZEROES, when the export advertises them. */
static void test_zero_flags(void)
{
	struct rb_validate_ctx ctx = io_ctx();
	static const uint8_t ops[] = { RB_OP_READ, RB_OP_WRITE, RB_OP_FLUSH, RB_OP_DISCARD };
	static const uint8_t zf[] = { RB_CMD_F_NO_HOLE, RB_CMD_F_FAST_ZERO };
	struct rb_capsule c;
	const char *f;

	ctx.export_flags |= RB_EXP_NO_HOLE | RB_EXP_FAST_ZERO;
	c = io_cmd(RB_OP_WRITE_ZEROES, 0, 4096);
	c.flags = RB_CMD_F_NO_HOLE;
	is_int(v(&c, &ctx, &f), RB_S_SUCCESS, "NO_HOLE write zeroes");
	c.flags = RB_CMD_F_FAST_ZERO;
	is_int(v(&c, &ctx, &f), RB_S_SUCCESS, "FAST_ZERO write zeroes");
	c.flags = RB_CMD_F_FUA | RB_CMD_F_NO_HOLE | RB_CMD_F_FAST_ZERO;
	is_int(v(&c, &ctx, &f), RB_S_SUCCESS, "FUA|NO_HOLE|FAST_ZERO write zeroes");
	for (size_t i = 0; i < sizeof(ops); i++) {
		for (size_t j = 0; j < sizeof(zf); j++) {
			c = io_cmd(ops[i], 0, ops[i] == RB_OP_FLUSH ? 0 : 4096);
			c.flags = zf[j];
			is_int(v(&c, &ctx, &f), RB_S_INVALID_FIELD, "%s with flag %#x refused",
			       rb_opcode_name(ops[i]), zf[j]);
			is_str(f, "flags", "names flags");
		}
	}
	/* A target that does not advertise them: refused, not ignored. */
	ctx.export_flags &= ~RB_EXP_NO_HOLE;
	c = io_cmd(RB_OP_WRITE_ZEROES, 0, 4096);
	c.flags = RB_CMD_F_NO_HOLE;
	is_int(v(&c, &ctx, &f), RB_S_INVALID_FIELD, "NO_HOLE not advertised");
	c.flags = RB_CMD_F_FAST_ZERO;
	is_int(v(&c, &ctx, &f), RB_S_SUCCESS, "FAST_ZERO still advertised");
	ctx.export_flags &= ~RB_EXP_FAST_ZERO;
	is_int(v(&c, &ctx, &f), RB_S_INVALID_FIELD, "FAST_ZERO not advertised");
	c.flags = 0x08;
	is_int(v(&c, &ctx, &f), RB_S_INVALID_FIELD, "unknown flag on write zeroes");
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

static struct rb_cm_req2 cm_req(uint16_t qid, uint64_t session, uint16_t depth)
{
	return (struct rb_cm_req2){ .magic = rb_le32(RB_MAGIC),
				   .version = rb_le16(RB_PROTO_VERSION),
				   .qid = rb_le16(qid),
				   .depth = rb_le16(depth),
				   .incapsule = rb_le32(8192),
				   .session = rb_le64(session) };
}

static void test_cm_req(void)
{
	struct rb_validate_err err;
	uint8_t big[56] = { 0 };
	struct rb_cm_req2 r = cm_req(0, 0, 4);
	struct rb_cm_req v1 = { .magic = rb_le32(RB_MAGIC), .version = rb_le16(1), .depth = 4 };

	is_int(rb_check_cm_req(&r, sizeof(r), &err), RB_REJ_NONE, "cm_req: admin queue");
	ok(err.field == NULL, "cm_req: success names no field");
	r = cm_req(3, 0x1234, 128);
	is_int(rb_check_cm_req(&r, sizeof(r), &err), RB_REJ_NONE,
	       "cm_req: I/O queue (the session lookup is the target's)");
	memcpy(big, &r, sizeof(r));
	is_int(rb_check_cm_req(big, sizeof(big), &err), RB_REJ_NONE,
	       "cm_req: longer private data (RDMA CM pads it)");

	is_int(rb_check_cm_req(&r, sizeof(r) - 1, &err), RB_REJ_BAD_MAGIC,
	       "cm_req: one byte short");
	is_str(err.field, "cm_req", "cm_req: short names the message");
	is_int(err.value, sizeof(r) - 1, "cm_req: short reports the length");
	is_int(rb_check_cm_req(NULL, 0, &err), RB_REJ_BAD_MAGIC, "cm_req: no private data");
	is_int(rb_check_cm_req(&v1, sizeof(v1), &err), RB_REJ_BAD_VERSION,
	       "cm_req: a version 1 request is refused as such, though shorter");
	is_int(err.value, 1, "cm_req: reports version 1");

	r = cm_req(0, 0, 4);
	r.magic = rb_le32(0xdeadbeef);
	is_int(rb_check_cm_req(&r, sizeof(r), &err), RB_REJ_BAD_MAGIC, "cm_req: bad magic");
	is_str(err.field, "cm_req.magic", "cm_req: names magic");
	is_int(err.value, 0xdeadbeef, "cm_req: reports the magic");
	r = cm_req(0, 0, 4);
	r.version = rb_le16(RB_PROTO_VERSION + 1);
	is_int(rb_check_cm_req(&r, sizeof(r), &err), RB_REJ_BAD_VERSION, "cm_req: bad version");
	is_str(err.field, "cm_req.version", "cm_req: names version");
	r = cm_req(0, 0x1234, 4);
	is_int(rb_check_cm_req(&r, sizeof(r), &err), RB_REJ_BAD_QID,
	       "cm_req: admin queue naming a session");
	is_str(err.field, "cm_req.session", "cm_req: names session");
	r = cm_req(0, 0, 0);
	is_int(rb_check_cm_req(&r, sizeof(r), &err), RB_REJ_BAD_DEPTH, "cm_req: admin depth 0");
	is_str(err.field, "cm_req.depth", "cm_req: names depth");
	r = cm_req(1, 0x1234, 0);
	is_int(rb_check_cm_req(&r, sizeof(r), &err), RB_REJ_BAD_DEPTH, "cm_req: I/O depth 0");
}

static struct rb_cm_rep2 cm_rep(uint16_t depth, uint32_t incapsule)
{
	return (struct rb_cm_rep2){ .magic = rb_le32(RB_MAGIC),
				   .version = rb_le16(RB_PROTO_VERSION),
				   .depth = rb_le16(depth),
				   .incapsule = rb_le32(incapsule) };
}

/* What the target sends back when it turns a connection down: the bytes. */
static void test_cm_rej(void)
{
	static const uint8_t want[8] = { 0x52, 0x42, 0x4c, 0x4b, 0x02, 0x00, 0x07, 0x00 };
	struct rb_cm_rej rej = rb_cm_rej_make(RB_REJ_SHUTTING_DOWN);
	uint8_t got[8];

	memcpy(got, &rej, sizeof(got));
	is_int(rb_from_le32(rej.magic), RB_MAGIC, "cm rej: magic");
	is_int(rb_from_le16(rej.version), RB_PROTO_VERSION, "cm rej: version");
	is_int(rb_from_le16(rej.reason), RB_REJ_SHUTTING_DOWN, "cm rej: reason");
	ok(memcmp(got, want, sizeof(got)) == 0, "cm rej: \"RBLK\", version 2, reason 7, little endian");
}

static void test_cm_rep(void)
{
	struct rb_validate_err err;
	uint8_t big[256] = { 0 };
	struct rb_cm_rep2 r = cm_rep(8, 4096);

	is_int(rb_check_cm_rep(&r, sizeof(r), 8, 8192, &err), 0,
	       "cm_rep: depth and in-capsule as asked");
	ok(err.field == NULL, "cm_rep: success names no field");
	r = cm_rep(1, 0);
	is_int(rb_check_cm_rep(&r, sizeof(r), 8, 8192, &err), 0, "cm_rep: less than asked");
	memcpy(big, &r, sizeof(r));
	is_int(rb_check_cm_rep(big, sizeof(big), 8, 8192, &err), 0, "cm_rep: longer private data");
	r = cm_rep(8, 8193);
	is_int(rb_check_cm_rep(&r, sizeof(r), 8, 8192, &err), RB_GRANT_OVER_INCAPSULE,
	       "cm_rep: more in-capsule than asked is reported, not refused");

	is_int(rb_check_cm_rep(&r, sizeof(r) - 1, 8, 8192, &err), -EPROTO,
	       "cm_rep: one byte short");
	is_str(err.field, "cm_rep", "cm_rep: short names the message");
	is_int(err.value, sizeof(r) - 1, "cm_rep: short reports the length");
	is_int(rb_check_cm_rep(NULL, 0, 8, 8192, &err), -EPROTO, "cm_rep: no private data");
	r = cm_rep(8, 0);
	r.magic = rb_le32(0x50545448); /* "HTTP" */
	is_int(rb_check_cm_rep(&r, sizeof(r), 8, 8192, &err), -EPROTO, "cm_rep: bad magic");
	is_str(err.field, "cm_rep.magic", "cm_rep: names magic");
	r = cm_rep(8, 0);
	r.version = rb_le16(0);
	is_int(rb_check_cm_rep(&r, sizeof(r), 8, 8192, &err), -EPROTO, "cm_rep: bad version");
	is_str(err.field, "cm_rep.version", "cm_rep: names version");
	r = cm_rep(0, 0);
	is_int(rb_check_cm_rep(&r, sizeof(r), 8, 8192, &err), -EPROTO, "cm_rep: depth 0");
	is_str(err.field, "cm_rep.depth", "cm_rep: names depth");
	r = cm_rep(9, 0);
	is_int(rb_check_cm_rep(&r, sizeof(r), 8, 8192, &err), -EPROTO,
	       "cm_rep: more depth than receives posted");
	is_str(err.field, "cm_rep.depth", "cm_rep: names depth");
	is_int(err.value, 9, "cm_rep: reports the depth");
}

static struct rb_connect_req connect_req(const char *host, const char *export_name)
{
	struct rb_connect_req cr = { 0 };

	cr.magic = rb_le32(RB_MAGIC);
	cr.version = rb_le16(RB_PROTO_VERSION);
	cr.nr_io_queues = rb_le16(4);
	cr.queue_depth = rb_le16(128);
	snprintf(cr.hostid, sizeof(cr.hostid), "%s", host);
	snprintf(cr.export_name, sizeof(cr.export_name), "%s", export_name);
	return cr;
}

static void test_connect_req(void)
{
	struct rb_validate_err err;
	struct rb_connect_req cr = connect_req("host-a", "disk0");

	is_int(rb_check_connect_req(&cr, &err), RB_S_SUCCESS, "connect: to an export");
	ok(err.field == NULL, "connect: success names no field");
	cr = connect_req("host-a", "");
	is_int(rb_check_connect_req(&cr, &err), RB_S_SUCCESS,
	       "connect: discovery (no export name)");
	memset(cr.hostid, 'h', sizeof(cr.hostid) - 1);
	memset(cr.export_name, 'e', sizeof(cr.export_name) - 1);
	is_int(rb_check_connect_req(&cr, &err), RB_S_SUCCESS,
	       "connect: strings filling their fields");

	cr = connect_req("host-a", "disk0");
	cr.magic = rb_le32(0);
	is_int(rb_check_connect_req(&cr, &err), RB_S_BAD_VERSION, "connect: bad magic");
	is_str(err.field, "connect.magic", "connect: names magic");
	cr = connect_req("host-a", "disk0");
	cr.version = rb_le16(7);
	is_int(rb_check_connect_req(&cr, &err), RB_S_BAD_VERSION, "connect: bad version");
	is_str(err.field, "connect.version", "connect: names version");
	is_int(err.value, 7, "connect: reports the version");
	cr = connect_req("", "disk0");
	is_int(rb_check_connect_req(&cr, &err), RB_S_INVALID_FIELD, "connect: empty host id");
	is_str(err.field, "connect.hostid", "connect: names hostid");
	is_int(err.value, 0, "connect: reports its length");
	cr = connect_req("host-a", "disk0");
	memset(cr.hostid, 'h', sizeof(cr.hostid));
	is_int(rb_check_connect_req(&cr, &err), RB_S_INVALID_FIELD,
	       "connect: unterminated host id");
	is_str(err.field, "connect.hostid", "connect: names hostid");
	is_int(err.value, RB_HOSTID_MAX, "connect: reports the field size");
	cr = connect_req("host-a", "disk0");
	memset(cr.export_name, 'e', sizeof(cr.export_name));
	is_int(rb_check_connect_req(&cr, &err), RB_S_INVALID_FIELD,
	       "connect: unterminated export name");
	is_str(err.field, "connect.export_name", "connect: names export_name");
}

static struct rb_connect_rsp connect_rsp(uint32_t bs, uint32_t max_transfer, uint16_t nq,
					 uint16_t depth)
{
	return (struct rb_connect_rsp){ .session = rb_le64(0x1234),
					.size = rb_le64(1 << 20),
					.block_size = rb_le32(bs),
					.max_transfer = rb_le32(max_transfer),
					.handle = rb_le32(1),
					.nr_io_queues = rb_le16(nq),
					.queue_depth = rb_le16(depth),
					.phys_block_size = rb_le32(bs) };
}

static int rsp_check(uint32_t bs, uint32_t max_transfer, uint16_t nq, uint16_t depth,
		     const char **field)
{
	struct rb_connect_rsp rsp = connect_rsp(bs, max_transfer, nq, depth);
	struct rb_validate_err err;
	int ret = rb_check_connect_rsp(&rsp, 4, 128, &err);

	*field = err.field ? err.field : "";
	return ret;
}

static void test_connect_rsp(void)
{
	const char *f;

	is_int(rsp_check(512, 128 << 10, 4, 128, &f), 0, "connect_rsp: as asked");
	is_str(f, "", "connect_rsp: success names no field");
	is_int(rsp_check(65536, 65536, 1, 1, &f), 0,
	       "connect_rsp: 64 KiB blocks, one of them per command");
	is_int(rsp_check(0, 128 << 10, 4, 128, &f), -EPROTO, "connect_rsp: block size 0");
	is_str(f, "connect_rsp.block_size", "connect_rsp: names block_size");
	is_int(rsp_check(3000, 128 << 10, 4, 128, &f), -EPROTO,
	       "connect_rsp: block size not a power of two");
	is_int(rsp_check(131072, 1 << 20, 4, 128, &f), -EPROTO,
	       "connect_rsp: block size over 64 KiB");
	is_int(rsp_check(4096, 2048, 4, 128, &f), -EPROTO,
	       "connect_rsp: max transfer below a block");
	is_str(f, "connect_rsp.max_transfer", "connect_rsp: names max_transfer");
	is_int(rsp_check(512, 128 << 10, 0, 128, &f), -EPROTO, "connect_rsp: no I/O queues");
	is_str(f, "connect_rsp.nr_io_queues", "connect_rsp: names nr_io_queues");
	is_int(rsp_check(512, 128 << 10, 4, 0, &f), -EPROTO, "connect_rsp: depth 0");
	is_str(f, "connect_rsp.queue_depth", "connect_rsp: names queue_depth");

	is_int(rsp_check(512, 128 << 10, 5, 128, &f), RB_GRANT_OVER_QUEUES,
	       "connect_rsp: more queues than asked is reported, not refused");
	is_int(rsp_check(512, 128 << 10, 4, 129, &f), RB_GRANT_OVER_DEPTH,
	       "connect_rsp: more depth than asked is reported, not refused");
	is_int(rsp_check(512, 128 << 10, 65535, 65535, &f),
	       RB_GRANT_OVER_QUEUES | RB_GRANT_OVER_DEPTH, "connect_rsp: both above the ask");
}

static void test_export_list(void)
{
	struct rb_export_entry ents[3];
	uint32_t total, n;

	memset(ents, 'x', sizeof(ents));
	n = rb_export_list_fix(ents, 3, (5ull << 32) | 2, &total);
	is_int(n, 2, "export list: entries written");
	is_int(total, 5, "export list: entries visible");
	ok(ents[0].name[RB_EXPORT_NAME_MAX - 1] == '\0' &&
	       ents[1].name[RB_EXPORT_NAME_MAX - 1] == '\0',
	   "export list: names of the entries used are terminated");
	ok(ents[2].name[RB_EXPORT_NAME_MAX - 1] == 'x', "export list: the rest is not touched");
	n = rb_export_list_fix(ents, 3, 1000, &total);
	is_int(n, 3, "export list: a count beyond the buffer is clamped");
	is_int(total, 3, "export list: visible is at least what was written");
	n = rb_export_list_fix(ents, 3, 0, &total);
	is_int(n, 0, "export list: empty");
	is_int(total, 0, "export list: none visible");
}

int main(void)
{
	test_layout();
	test_names();
	test_valid();
	test_invalid();
	test_zero_flags();
	test_admin();
	test_single_byte_mutations();
	test_cm_req();
	test_cm_rej();
	test_cm_rep();
	test_connect_req();
	test_connect_rsp();
	test_export_list();
	return tap_done();
}
