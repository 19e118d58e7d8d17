/* SPDX-License-Identifier: MIT */
/* Unit tests of the NBD server logic (initiator/nbd_proto.c) and the
 * listener address policy (initiator/nbd_listen.c). */
#include "config.h"

#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"
#include "nbd_proto.h"
#include "nbd_server.h"
#include "tap.h"
#include "wire.h"

#define SIZE (64ull << 20)
#define ALL_FLAGS                                                                         \
	(RB_EXP_FLUSH | RB_EXP_FUA | RB_EXP_DISCARD | RB_EXP_WRITE_ZEROES | RB_EXP_NO_HOLE |   \
	 RB_EXP_FAST_ZERO)

static uint16_t get16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return be16toh(v);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return be32toh(v);
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return be64toh(v);
}

/* Walk option replies in b: returns the number parsed, fills types/lengths. */
struct rep {
	uint32_t opt, type, len;
	const uint8_t *data;
};

static int parse_replies(const struct nbd_buf *b, struct rep *r, int max)
{
	size_t pos = 0;
	int n = 0;

	while (pos + 20 <= b->len && n < max) {
		if (get64(b->data + pos) != NBD_REP_MAGIC)
			return -1;
		r[n].opt = get32(b->data + pos + 8);
		r[n].type = get32(b->data + pos + 12);
		r[n].len = get32(b->data + pos + 16);
		r[n].data = b->data + pos + 20;
		pos += 20 + r[n].len;
		if (pos > b->len)
			return -1;
		n++;
	}
	return pos == b->len ? n : -1;
}

/* INFO/GO payload: name, then the info request list. */
static size_t info_req(uint8_t *buf, const char *name, const uint16_t *infos, uint16_t n)
{
	uint32_t nl = htobe32((uint32_t)strlen(name));
	uint16_t cnt = htobe16(n);
	size_t pos = 0;

	memcpy(buf, &nl, 4);
	pos += 4;
	memcpy(buf + pos, name, strlen(name));
	pos += strlen(name);
	memcpy(buf + pos, &cnt, 2);
	pos += 2;
	for (uint16_t i = 0; i < n; i++) {
		uint16_t t = htobe16(infos[i]);

		memcpy(buf + pos, &t, 2);
		pos += 2;
	}
	return pos;
}

static void test_desc(void)
{
	struct nbd_export_desc d;

	is_int(nbd_export_desc_init(&d, "disk0", SIZE, ALL_FLAGS, 512, 8u << 20), 0,
	       "desc: rw export");
	ok(d.tflags & NBD_FLAG_HAS_FLAGS, "desc: HAS_FLAGS");
	ok(!(d.tflags & NBD_FLAG_READ_ONLY), "desc: not read-only");
	ok((d.tflags & (NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA | NBD_FLAG_SEND_TRIM |
			NBD_FLAG_SEND_WRITE_ZEROES | NBD_FLAG_CAN_MULTI_CONN)) ==
		   (NBD_FLAG_SEND_FLUSH | NBD_FLAG_SEND_FUA | NBD_FLAG_SEND_TRIM |
		    NBD_FLAG_SEND_WRITE_ZEROES | NBD_FLAG_CAN_MULTI_CONN),
	   "desc: flush/fua/trim/write-zeroes/multi-conn advertised");
	ok(d.tflags & NBD_FLAG_SEND_FAST_ZERO, "desc: FAST_ZERO advertised");
	is_int(d.min_block, 512, "desc: minimum = export block size");
	is_int(d.pref_block, 4096, "desc: preferred 4096");
	is_int(d.max_payload, 8u << 20, "desc: maximum as given");

	is_int(nbd_export_desc_init(&d, "ro", SIZE, RB_EXP_READ_ONLY | ALL_FLAGS, 4096, 1000000),
	       0, "desc: ro export");
	ok(d.tflags & NBD_FLAG_READ_ONLY, "desc: READ_ONLY");
	ok(!(d.tflags & (NBD_FLAG_SEND_TRIM | NBD_FLAG_SEND_WRITE_ZEROES)),
	   "desc: no trim/write-zeroes on a read-only export");
	is_int(d.max_payload, 1000000 / 4096 * 4096, "desc: maximum rounded to blocks");

	/* A target without NO_HOLE could deallocate what NO_HOLE zeroes. */
	is_int(nbd_export_desc_init(&d, "old", SIZE, ALL_FLAGS & ~RB_EXP_NO_HOLE, 512, 1u << 20),
	       0, "desc: target without NO_HOLE");
	ok(!(d.tflags & (NBD_FLAG_SEND_WRITE_ZEROES | NBD_FLAG_SEND_FAST_ZERO)),
	   "desc: no write-zeroes or FAST_ZERO without the target's NO_HOLE");
	ok(d.tflags & NBD_FLAG_SEND_TRIM, "desc: trim still advertised");
	is_int(nbd_export_desc_init(&d, "nf", SIZE, ALL_FLAGS & ~RB_EXP_FAST_ZERO, 512, 1u << 20),
	       0, "desc: target without FAST_ZERO");
	ok((d.tflags & NBD_FLAG_SEND_WRITE_ZEROES) && !(d.tflags & NBD_FLAG_SEND_FAST_ZERO),
	   "desc: write-zeroes without FAST_ZERO");

	is_int(nbd_export_desc_init(&d, "x", SIZE, 0, 8192, 1u << 20), 0, "desc: 8K blocks");
	is_int(d.pref_block, 8192, "desc: preferred = block size when above 4096");
	ok(!(d.tflags & NBD_FLAG_SEND_FLUSH), "desc: no flush unless the export has it");
	is_int(nbd_export_desc_init(&d, "x", SIZE, 0, 512, 2048), 0, "desc: small max");
	is_int(d.pref_block, 2048, "desc: preferred never above the maximum");
	is_int(nbd_export_desc_init(&d, "x", SIZE, 0, 3, 1u << 20), -EINVAL,
	       "desc: block size not a power of two");
	is_int(nbd_export_desc_init(&d, "x", SIZE, 0, 131072, 1u << 20), -EINVAL,
	       "desc: block size above 64K");
	is_int(nbd_export_desc_init(&d, "x", SIZE, 0, 4096, 1000), -EINVAL,
	       "desc: maximum below one block");
}

static void test_greeting_flags(void)
{
	struct nbd_buf b;
	struct nbd_hs_state st = { 0 };

	nbd_buf_init(&b);
	nbd_put_greeting(&b);
	is_int(b.len, 18, "greeting: 18 bytes");
	ok(memcmp(b.data, "NBDMAGICIHAVEOPT", 16) == 0, "greeting: magics");
	is_int(get16(b.data + 16), NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES,
	       "greeting: fixed newstyle + no zeroes");
	nbd_buf_consume(&b, 8);
	is_int(b.len, 10, "buf: consume");
	ok(memcmp(b.data, "IHAVEOPT", 8) == 0, "buf: consume keeps the tail");
	nbd_buf_free(&b);

	ok(nbd_client_flags_ok(0, &st), "client flags: 0 accepted");
	ok(!st.no_zeroes && !st.fixed, "client flags: none set");
	ok(nbd_client_flags_ok(3, &st), "client flags: both known flags");
	ok(st.no_zeroes && st.fixed, "client flags: recorded");
	ok(!nbd_client_flags_ok(4, &st), "client flags: unknown bit refused");
	ok(!nbd_client_flags_ok(0x80000001u, &st), "client flags: high bit refused");
}

static void test_export_name(const struct nbd_export_desc *d)
{
	struct nbd_hs_state st = { .fixed = true };
	struct nbd_buf b;
	const char *why;

	nbd_buf_init(&b);
	is_int(nbd_handle_option(d, &st, NBD_OPT_EXPORT_NAME, (const uint8_t *)"disk0", 5, &b,
				 &why),
	       NBD_OPT_R_TRANSMISSION, "EXPORT_NAME: known name enters transmission");
	is_int(b.len, 10 + 124, "EXPORT_NAME: size, flags and 124 zeroes");
	is_int(get64(b.data), SIZE, "EXPORT_NAME: size");
	is_int(get16(b.data + 8), d->tflags, "EXPORT_NAME: transmission flags");
	ok(b.data[133] == 0 && b.data[10] == 0, "EXPORT_NAME: zero padding");
	nbd_buf_free(&b);

	st.no_zeroes = true;
	is_int(nbd_handle_option(d, &st, NBD_OPT_EXPORT_NAME, (const uint8_t *)"", 0, &b, &why),
	       NBD_OPT_R_TRANSMISSION, "EXPORT_NAME: empty name is the default export");
	is_int(b.len, 10, "EXPORT_NAME: no zeroes when the client asked");
	nbd_buf_free(&b);

	is_int(nbd_handle_option(d, &st, NBD_OPT_EXPORT_NAME, (const uint8_t *)"disk", 4, &b,
				 &why),
	       NBD_OPT_R_CLOSE, "EXPORT_NAME: unknown name closes (no error reply exists)");
	is_int(b.len, 0, "EXPORT_NAME: nothing sent for an unknown name");
	is_int(nbd_handle_option(d, &st, NBD_OPT_EXPORT_NAME, (const uint8_t *)"disk00", 6, &b,
				 &why),
	       NBD_OPT_R_CLOSE, "EXPORT_NAME: a longer name is a different name");
	is_int(nbd_handle_option(d, &st, NBD_OPT_EXPORT_NAME, NULL, 100000, &b, &why),
	       NBD_OPT_R_CLOSE, "EXPORT_NAME: overlong name closes");
	nbd_buf_free(&b);
}

static void test_list_abort_unsup(const struct nbd_export_desc *d)
{
	struct nbd_hs_state st = { .fixed = true };
	struct nbd_buf b;
	struct rep r[8];
	const char *why;

	nbd_buf_init(&b);
	is_int(nbd_handle_option(d, &st, NBD_OPT_LIST, NULL, 0, &b, &why), NBD_OPT_R_CONTINUE,
	       "LIST: continues");
	is_int(parse_replies(&b, r, 8), 2, "LIST: two replies");
	is_int(r[0].type, NBD_REP_SERVER, "LIST: NBD_REP_SERVER");
	is_int(r[0].opt, NBD_OPT_LIST, "LIST: reply names the option");
	is_int(r[0].len, 4 + 5, "LIST: server reply length");
	is_int(get32(r[0].data), 5, "LIST: name length");
	ok(memcmp(r[0].data + 4, "disk0", 5) == 0, "LIST: name");
	is_int(r[1].type, NBD_REP_ACK, "LIST: then ACK");
	nbd_buf_free(&b);

	nbd_handle_option(d, &st, NBD_OPT_LIST, (const uint8_t *)"x", 1, &b, &why);
	ok(parse_replies(&b, r, 8) == 1 && r[0].type == NBD_REP_ERR_INVALID,
	   "LIST: data is invalid");
	nbd_buf_free(&b);

	is_int(nbd_handle_option(d, &st, NBD_OPT_ABORT, NULL, 0, &b, &why), NBD_OPT_R_CLOSE,
	       "ABORT: closes");
	ok(parse_replies(&b, r, 8) == 1 && r[0].type == NBD_REP_ACK, "ABORT: ACK first");
	nbd_buf_free(&b);

	is_int(nbd_handle_option(d, &st, NBD_OPT_STRUCTURED_REPLY, NULL, 0, &b, &why),
	       NBD_OPT_R_CONTINUE, "STRUCTURED_REPLY: continues");
	ok(parse_replies(&b, r, 8) == 1 && r[0].type == NBD_REP_ERR_UNSUP,
	   "STRUCTURED_REPLY: ERR_UNSUP (simple replies)");
	nbd_buf_free(&b);
	nbd_handle_option(d, &st, NBD_OPT_STARTTLS, NULL, 0, &b, &why);
	ok(parse_replies(&b, r, 8) == 1 && r[0].type == NBD_REP_ERR_UNSUP, "STARTTLS: ERR_UNSUP");
	nbd_buf_free(&b);
	is_int(nbd_handle_option(d, &st, 4242, (const uint8_t *)"abc", 3, &b, &why),
	       NBD_OPT_R_CONTINUE, "unknown option: continues");
	ok(parse_replies(&b, r, 8) == 1 && r[0].type == NBD_REP_ERR_UNSUP && r[0].opt == 4242,
	   "unknown option: ERR_UNSUP naming it");
	nbd_buf_free(&b);
	nbd_handle_option(d, &st, NBD_OPT_INFO, NULL, 100000, &b, &why);
	ok(parse_replies(&b, r, 8) == 1 && r[0].type == NBD_REP_ERR_TOO_BIG,
	   "overlong option data: ERR_TOO_BIG");
	nbd_buf_free(&b);
}

static void test_info_go(const struct nbd_export_desc *d)
{
	struct nbd_hs_state st = { .fixed = true };
	uint16_t want_bs[] = { NBD_INFO_BLOCK_SIZE }, want_name[] = { NBD_INFO_NAME, 77 };
	uint8_t req[512];
	struct nbd_buf b;
	struct rep r[8];
	const char *why;
	size_t len;
	int n;

	nbd_buf_init(&b);
	len = info_req(req, "disk0", want_bs, 1);
	is_int(nbd_handle_option(d, &st, NBD_OPT_GO, req, (uint32_t)len, &b, &why),
	       NBD_OPT_R_TRANSMISSION, "GO: known export enters transmission");
	n = parse_replies(&b, r, 8);
	is_int(n, 3, "GO: INFO export, INFO block size, ACK");
	if (n == 3) {
		is_int(r[0].type, NBD_REP_INFO, "GO: first is INFO");
		is_int(r[0].len, 12, "GO: NBD_INFO_EXPORT length 12");
		is_int(get16(r[0].data), NBD_INFO_EXPORT, "GO: NBD_INFO_EXPORT");
		is_int(get64(r[0].data + 2), SIZE, "GO: size");
		is_int(get16(r[0].data + 10), d->tflags, "GO: flags");
		is_int(r[1].len, 14, "GO: NBD_INFO_BLOCK_SIZE length 14");
		is_int(get16(r[1].data), NBD_INFO_BLOCK_SIZE, "GO: NBD_INFO_BLOCK_SIZE");
		is_int(get32(r[1].data + 2), d->min_block, "GO: minimum");
		is_int(get32(r[1].data + 6), d->pref_block, "GO: preferred");
		is_int(get32(r[1].data + 10), d->max_payload, "GO: maximum");
		is_int(r[2].type, NBD_REP_ACK, "GO: ACK last");
		is_int(r[2].opt, NBD_OPT_GO, "GO: replies name the option");
	}
	nbd_buf_free(&b);

	len = info_req(req, "", NULL, 0);
	is_int(nbd_handle_option(d, &st, NBD_OPT_INFO, req, (uint32_t)len, &b, &why),
	       NBD_OPT_R_CONTINUE, "INFO: default export, stays in negotiation");
	n = parse_replies(&b, r, 8);
	ok(n == 3 && r[2].type == NBD_REP_ACK, "INFO: block size sent even if not asked");
	nbd_buf_free(&b);

	len = info_req(req, "disk0", want_name, 2);
	nbd_handle_option(d, &st, NBD_OPT_INFO, req, (uint32_t)len, &b, &why);
	n = parse_replies(&b, r, 8);
	ok(n == 4 && r[2].type == NBD_REP_INFO && get16(r[2].data) == NBD_INFO_NAME &&
		   r[2].len == 2 + 5 && memcmp(r[2].data + 2, "disk0", 5) == 0,
	   "INFO: NBD_INFO_NAME when asked; unknown info types ignored");
	nbd_buf_free(&b);

	len = info_req(req, "other", NULL, 0);
	is_int(nbd_handle_option(d, &st, NBD_OPT_GO, req, (uint32_t)len, &b, &why),
	       NBD_OPT_R_CONTINUE, "GO: unknown export stays in negotiation");
	ok(parse_replies(&b, r, 8) == 1 && r[0].type == NBD_REP_ERR_UNKNOWN,
	   "GO: unknown export is ERR_UNKNOWN");
	nbd_buf_free(&b);

	nbd_handle_option(d, &st, NBD_OPT_GO, req, 5, &b, &why);
	ok(parse_replies(&b, r, 8) == 1 && r[0].type == NBD_REP_ERR_INVALID,
	   "GO: shorter than 6 bytes is invalid");
	nbd_buf_free(&b);
	len = info_req(req, "disk0", want_bs, 1);
	nbd_handle_option(d, &st, NBD_OPT_GO, req, (uint32_t)len - 1, &b, &why);
	ok(parse_replies(&b, r, 8) == 1 && r[0].type == NBD_REP_ERR_INVALID,
	   "GO: info count not matching the length is invalid");
	nbd_buf_free(&b);
	memset(req, 0xff, 4);
	nbd_handle_option(d, &st, NBD_OPT_GO, req, (uint32_t)len, &b, &why);
	ok(parse_replies(&b, r, 8) == 1 && r[0].type == NBD_REP_ERR_INVALID,
	   "GO: name length beyond the option is invalid");
	nbd_buf_free(&b);
}

static struct nbd_req_hdr rq(uint16_t type, uint16_t flags, uint64_t off, uint32_t len)
{
	return (struct nbd_req_hdr){ .type = type, .flags = flags, .offset = off, .length = len };
}

static enum nbd_req_class chk(const struct nbd_export_desc *d, struct nbd_req_hdr r,
			      uint32_t *err)
{
	return nbd_check_request(d, &r, err);
}

static void test_requests(const struct nbd_export_desc *rw, const struct nbd_export_desc *ro,
			  const struct nbd_export_desc *bare)
{
	struct nbd_request raw = {
		.magic = htobe32(NBD_REQUEST_MAGIC),
		.flags = htobe16(NBD_CMD_FLAG_FUA),
		.type = htobe16(NBD_CMD_WRITE),
		.handle = 0x0123456789abcdefull,
		.offset = htobe64(4096),
		.length = htobe32(512),
	};
	struct nbd_req_hdr h;
	uint32_t err;

	ok(nbd_decode_request(&raw, &h), "decode: good magic");
	ok(h.type == NBD_CMD_WRITE && h.flags == NBD_CMD_FLAG_FUA && h.offset == 4096 &&
		   h.length == 512,
	   "decode: fields in host order");
	is_int(h.handle, 0x0123456789abcdefull, "decode: handle kept as sent (opaque)");
	raw.magic = htobe32(0x25609514);
	ok(!nbd_decode_request(&raw, &h), "decode: bad magic");

	is_int(chk(rw, rq(NBD_CMD_READ, 0, 0, 4096), &err), NBD_RC_EXECUTE, "READ: aligned");
	is_int(chk(rw, rq(NBD_CMD_READ, 0, SIZE - 512, 512), &err), NBD_RC_EXECUTE,
	       "READ: last block");
	ok(chk(rw, rq(NBD_CMD_READ, 0, 1, 512), &err) == NBD_RC_REPLY && err == NBD_EINVAL,
	   "READ: unaligned offset EINVAL");
	ok(chk(rw, rq(NBD_CMD_READ, 0, 0, 100), &err) == NBD_RC_REPLY && err == NBD_EINVAL,
	   "READ: unaligned length EINVAL");
	ok(chk(rw, rq(NBD_CMD_READ, 0, SIZE, 512), &err) == NBD_RC_REPLY && err == NBD_EINVAL,
	   "READ: beyond the end EINVAL");
	ok(chk(rw, rq(NBD_CMD_READ, 0, UINT64_MAX - 511, 1024), &err) == NBD_RC_REPLY &&
		   err == NBD_EINVAL,
	   "READ: offset+length overflow EINVAL");
	ok(chk(rw, rq(NBD_CMD_READ, 0, 0, rw->max_payload + 512), &err) == NBD_RC_REPLY &&
		   err == NBD_EINVAL,
	   "READ: above the maximum payload EINVAL");
	ok(chk(rw, rq(NBD_CMD_READ, 0, 0, 0), &err) == NBD_RC_REPLY && err == 0,
	   "READ: zero length succeeds without the target");
	is_int(chk(rw, rq(NBD_CMD_READ, NBD_CMD_FLAG_FUA, 0, 512), &err), NBD_RC_EXECUTE,
	       "READ: FUA accepted (ignored) when SEND_FUA");
	ok(chk(rw, rq(NBD_CMD_READ, NBD_CMD_FLAG_DF, 0, 512), &err) == NBD_RC_REPLY &&
		   err == NBD_EINVAL,
	   "READ: DF without structured replies EINVAL");

	is_int(chk(rw, rq(NBD_CMD_WRITE, NBD_CMD_FLAG_FUA, 512, 1024), &err), NBD_RC_EXECUTE,
	       "WRITE: FUA");
	ok(chk(rw, rq(NBD_CMD_WRITE, 0, SIZE - 512, 1024), &err) == NBD_RC_REPLY &&
		   err == NBD_ENOSPC,
	   "WRITE: beyond the end ENOSPC");
	ok(chk(ro, rq(NBD_CMD_WRITE, 0, 0, 512), &err) == NBD_RC_REPLY && err == NBD_EPERM,
	   "WRITE: read-only EPERM");
	ok(chk(bare, rq(NBD_CMD_WRITE, NBD_CMD_FLAG_FUA, 0, 512), &err) == NBD_RC_REPLY &&
		   err == NBD_EINVAL,
	   "WRITE: FUA not advertised EINVAL");

	is_int(chk(rw, rq(NBD_CMD_FLUSH, 0, 0, 0), &err), NBD_RC_EXECUTE, "FLUSH");
	ok(chk(bare, rq(NBD_CMD_FLUSH, 0, 0, 0), &err) == NBD_RC_REPLY && err == NBD_EINVAL,
	   "FLUSH: not advertised EINVAL");
	is_int(chk(ro, rq(NBD_CMD_FLUSH, 0, 0, 0), &err), NBD_RC_EXECUTE,
	       "FLUSH: allowed on read-only");

	is_int(chk(rw, rq(NBD_CMD_TRIM, 0, 0, 64u << 20), &err), NBD_RC_EXECUTE,
	       "TRIM: larger than the maximum payload is fine");
	ok(chk(ro, rq(NBD_CMD_TRIM, 0, 0, 512), &err) == NBD_RC_REPLY && err == NBD_EPERM,
	   "TRIM: read-only EPERM");
	ok(chk(bare, rq(NBD_CMD_TRIM, 0, 0, 512), &err) == NBD_RC_REPLY && err == NBD_EINVAL,
	   "TRIM: not advertised EINVAL");
	ok(chk(rw, rq(NBD_CMD_TRIM, 0, SIZE, 512), &err) == NBD_RC_REPLY && err == NBD_EINVAL,
	   "TRIM: beyond the end EINVAL");

	is_int(chk(rw, rq(NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_NO_HOLE | NBD_CMD_FLAG_FUA, 0, 4096),
		   &err),
	       NBD_RC_EXECUTE, "WRITE_ZEROES: NO_HOLE and FUA");
	is_int(chk(rw, rq(NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_FAST_ZERO | NBD_CMD_FLAG_NO_HOLE, 0,
			  4096),
		   &err),
	       NBD_RC_EXECUTE, "WRITE_ZEROES: FAST_ZERO advertised");
	{
		struct nbd_export_desc nf;

		nbd_export_desc_init(&nf, "nf", SIZE, ALL_FLAGS & ~RB_EXP_FAST_ZERO, 512, 1u << 20);
		ok(chk(&nf, rq(NBD_CMD_WRITE_ZEROES, NBD_CMD_FLAG_FAST_ZERO, 0, 4096), &err) ==
				   NBD_RC_REPLY &&
			   err == NBD_EINVAL,
		   "WRITE_ZEROES: FAST_ZERO not advertised EINVAL");
	}
	ok(chk(rw, rq(NBD_CMD_WRITE, NBD_CMD_FLAG_FAST_ZERO, 0, 4096), &err) == NBD_RC_REPLY &&
		   err == NBD_EINVAL,
	   "WRITE: FAST_ZERO EINVAL");
	ok(chk(rw, rq(NBD_CMD_WRITE_ZEROES, 0, SIZE, 512), &err) == NBD_RC_REPLY &&
		   err == NBD_ENOSPC,
	   "WRITE_ZEROES: beyond the end ENOSPC");
	ok(chk(ro, rq(NBD_CMD_WRITE_ZEROES, 0, 0, 512), &err) == NBD_RC_REPLY && err == NBD_EPERM,
	   "WRITE_ZEROES: read-only EPERM");

	is_int(chk(rw, rq(NBD_CMD_DISC, 0, 0, 0), &err), NBD_RC_DISCONNECT, "DISC");
	ok(chk(rw, rq(NBD_CMD_CACHE, 0, 0, 512), &err) == NBD_RC_REPLY && err == NBD_EINVAL,
	   "CACHE: not advertised EINVAL");
	ok(chk(rw, rq(NBD_CMD_BLOCK_STATUS, 0, 0, 512), &err) == NBD_RC_REPLY &&
		   err == NBD_EINVAL,
	   "BLOCK_STATUS: EINVAL");
	ok(chk(rw, rq(42, 0, 0, 512), &err) == NBD_RC_REPLY && err == NBD_EINVAL,
	   "unknown command EINVAL");
	ok(chk(rw, rq(NBD_CMD_READ, 1u << 9, 0, 512), &err) == NBD_RC_REPLY && err == NBD_EINVAL,
	   "unknown flag EINVAL");
}

static void test_errno(void)
{
	is_int(nbd_errno_to_nbd(0), 0, "errno: 0");
	is_int(nbd_errno_to_nbd(-EIO), NBD_EIO, "errno: -EIO");
	is_int(nbd_errno_to_nbd(EPERM), NBD_EPERM, "errno: EPERM");
	is_int(nbd_errno_to_nbd(-EROFS), NBD_EPERM, "errno: EROFS -> EPERM");
	is_int(nbd_errno_to_nbd(-ENOSPC), NBD_ENOSPC, "errno: ENOSPC");
	is_int(nbd_errno_to_nbd(-EDQUOT), NBD_ENOSPC, "errno: EDQUOT -> ENOSPC");
	is_int(nbd_errno_to_nbd(-EINVAL), NBD_EINVAL, "errno: EINVAL");
	is_int(nbd_errno_to_nbd(-EOPNOTSUPP), NBD_ENOTSUP, "errno: EOPNOTSUPP -> ENOTSUP");
	is_int(nbd_errno_to_nbd(-ESHUTDOWN), NBD_ESHUTDOWN, "errno: ESHUTDOWN");
	is_int(nbd_errno_to_nbd(-ETIMEDOUT), NBD_EIO, "errno: anything else -> EIO");
	/* Target statuses reach NBD through rb_status_errno. */
	is_int(nbd_errno_to_nbd(rb_status_errno(RB_S_READ_ONLY)), NBD_EPERM,
	       "status READ_ONLY -> EPERM");
	is_int(nbd_errno_to_nbd(rb_status_errno(RB_S_IO_ERROR)), NBD_EIO, "status IO_ERROR -> EIO");
}

static struct sockaddr_storage addr(const char *s)
{
	struct sockaddr_storage ss;

	memset(&ss, 0, sizeof(ss));
	if (strchr(s, ':')) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;

		in6->sin6_family = AF_INET6;
		inet_pton(AF_INET6, s, &in6->sin6_addr);
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;

		in->sin_family = AF_INET;
		inet_pton(AF_INET, s, &in->sin_addr);
	}
	return ss;
}

static bool lo(const char *s)
{
	struct sockaddr_storage ss = addr(s);

	return nbd_addr_is_loopback((struct sockaddr *)&ss);
}

static void test_listen(void)
{
	struct nbd_listeners ls;
	char dir[] = "/tmp/test-nbd-proto.XXXXXX", path[64];
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	struct stat st;
	int fd;

	ok(lo("127.0.0.1") && lo("127.1.2.3") && lo("::1") && lo("::ffff:127.0.0.1"),
	   "loopback: 127/8, ::1, v4-mapped 127/8");
	ok(!lo("0.0.0.0") && !lo("10.0.0.1") && !lo("192.0.2.1") && !lo("::") &&
		   !lo("::ffff:10.0.0.1") && !lo("2001:db8::1"),
	   "loopback: wildcard and other addresses are not");

	nbd_listeners_init(&ls);
	is_int(nbd_listen_tcp(&ls, "0.0.0.0:10809", false), -EPERM,
	       "listen tcp: wildcard refused without --nbd-listen-any");
	is_int(nbd_listen_tcp(&ls, "192.0.2.1:10809", false), -EPERM,
	       "listen tcp: non-loopback refused without --nbd-listen-any");
	is_int(nbd_listen_tcp(&ls, "127.0.0.1", false), -EINVAL, "listen tcp: port required");
	is_int(ls.nr, 0, "listen tcp: nothing bound after refusals");

	if (!mkdtemp(dir)) {
		ok(0, "mkdtemp: %s", strerror(errno));
		return;
	}
	snprintf(path, sizeof(path), "%s/nbd.sock", dir);
	is_int(nbd_listen_unix(&ls, path), 0, "listen unix: bound");
	ok(stat(path, &st) == 0 && S_ISSOCK(st.st_mode), "listen unix: socket file exists");
	{
		struct nbd_listeners ls2;

		nbd_listeners_init(&ls2);
		is_int(nbd_listen_unix(&ls2, path), -EADDRINUSE,
		       "listen unix: a live socket is not stolen");
	}
	nbd_listeners_close(&ls);
	ok(stat(path, &st) < 0 && errno == ENOENT, "listen unix: removed at close");

	/* A stale socket (its server died without unlinking) is replaced. */
	fd = socket(AF_UNIX, SOCK_STREAM, 0);
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	ok(fd >= 0 && bind(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0, "stale socket made");
	close(fd);
	is_int(nbd_listen_unix(&ls, path), 0, "listen unix: stale socket replaced");
	nbd_listeners_close(&ls);

	fd = creat(path, 0600);
	close(fd);
	is_int(nbd_listen_unix(&ls, path), -EADDRINUSE, "listen unix: a regular file is kept");
	ok(stat(path, &st) == 0 && S_ISREG(st.st_mode), "listen unix: regular file untouched");
	unlink(path);
	rmdir(dir);
}

int main(void)
{
	struct nbd_export_desc rw, ro, bare;

	/* Refusals are logged on purpose below: keep the TAP output readable. */
	rb_log_init("test-nbd-proto", (enum rb_log_level)(RB_LOG_ERR - 1));
	test_desc();
	test_greeting_flags();
	nbd_export_desc_init(&rw, "disk0", SIZE, ALL_FLAGS, 512, 1u << 20);
	nbd_export_desc_init(&ro, "ro", SIZE, RB_EXP_READ_ONLY | RB_EXP_FLUSH, 512, 1u << 20);
	nbd_export_desc_init(&bare, "bare", SIZE, 0, 512, 1u << 20);
	test_export_name(&rw);
	test_list_abort_unsup(&rw);
	test_info_go(&rw);
	test_requests(&rw, &ro, &bare);
	test_errno();
	test_listen();
	return tap_done();
}
