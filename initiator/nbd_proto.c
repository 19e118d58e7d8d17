/* SPDX-License-Identifier: MIT */
/*
 * NBD server logic without sockets: option negotiation and request
 * checking.  nbd_client.c drives these from its connection state machine;
 * tests/test-nbd-proto.c and fuzz/fuzz-nbd.c drive them directly.
 */
#include "config.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "nbd_proto.h"
#include "wire.h"

#define NBD_DEFAULT_PREF_BLOCK 4096u
#define NBD_MAX_MIN_BLOCK 65536u

int nbd_export_desc_init(struct nbd_export_desc *d, const char *name, uint64_t size,
			 uint32_t rb_flags, uint32_t block_size, uint32_t max_payload)
{
	uint32_t pref;

	memset(d, 0, sizeof(*d));
	if (!rb_is_pow2(block_size) || block_size > NBD_MAX_MIN_BLOCK)
		return -EINVAL;
	max_payload -= max_payload % block_size;
	if (max_payload < block_size)
		return -EINVAL;
	/* Preferred: 4096 (or the block size if larger), but never above the
	 * maximum payload, and never below 512 as the spec requires. */
	pref = block_size > NBD_DEFAULT_PREF_BLOCK ? block_size : NBD_DEFAULT_PREF_BLOCK;
	while (pref > max_payload && pref / 2 >= block_size && pref / 2 >= 512)
		pref /= 2;
	if (pref > max_payload)
		return -EINVAL;

	d->name = name;
	d->size = size;
	d->min_block = block_size;
	d->pref_block = pref;
	d->max_payload = max_payload;
	/* CAN_MULTI_CONN: all connections share the target's backing file and
	 * a FLUSH there is a datasync of the whole file. */
	d->tflags = NBD_FLAG_HAS_FLAGS | NBD_FLAG_CAN_MULTI_CONN;
	if (rb_flags & RB_EXP_READ_ONLY)
		d->tflags |= NBD_FLAG_READ_ONLY;
	if (rb_flags & RB_EXP_FLUSH)
		d->tflags |= NBD_FLAG_SEND_FLUSH;
	if (rb_flags & RB_EXP_FUA)
		d->tflags |= NBD_FLAG_SEND_FUA;
	if (rb_flags & RB_EXP_ROTATIONAL)
		d->tflags |= NBD_FLAG_ROTATIONAL;
	if (!(rb_flags & RB_EXP_READ_ONLY)) {
		if (rb_flags & RB_EXP_DISCARD)
			d->tflags |= NBD_FLAG_SEND_TRIM;
		/* A server that advertises WRITE_ZEROES must honour NO_HOLE: a
		 * target that cannot be told (older) gets none. */
		if ((rb_flags & RB_EXP_WRITE_ZEROES) && (rb_flags & RB_EXP_NO_HOLE)) {
			d->tflags |= NBD_FLAG_SEND_WRITE_ZEROES;
			if (rb_flags & RB_EXP_FAST_ZERO)
				d->tflags |= NBD_FLAG_SEND_FAST_ZERO;
		}
	}
	return 0;
}

/* ---- output buffer ------------------------------------------------------ */

void nbd_buf_init(struct nbd_buf *b)
{
	memset(b, 0, sizeof(*b));
}

void nbd_buf_free(struct nbd_buf *b)
{
	free(b->data);
	nbd_buf_init(b);
}

void nbd_buf_append(struct nbd_buf *b, const void *p, size_t n)
{
	if (b->oom)
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		uint8_t *nd;

		while (cap < b->len + n)
			cap *= 2;
		nd = realloc(b->data, cap);
		if (!nd) {
			b->oom = true;
			return;
		}
		b->data = nd;
		b->cap = cap;
	}
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
}

void nbd_buf_consume(struct nbd_buf *b, size_t n)
{
	if (n >= b->len) {
		b->len = 0;
		return;
	}
	memmove(b->data, b->data + n, b->len - n);
	b->len -= n;
}

void nbd_put_greeting(struct nbd_buf *b)
{
	struct nbd_greeting g = {
		.magic = htobe64(NBD_MAGIC),
		.opt_magic = htobe64(NBD_IHAVEOPT),
		.hs_flags = htobe16(NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES),
	};

	nbd_buf_append(b, &g, sizeof(g));
}

bool nbd_client_flags_ok(uint32_t flags, struct nbd_hs_state *st)
{
	if (flags & ~NBD_FLAG_C_KNOWN)
		return false;
	st->fixed = flags & NBD_FLAG_C_FIXED_NEWSTYLE;
	st->no_zeroes = flags & NBD_FLAG_C_NO_ZEROES;
	return true;
}

/* ---- option replies ----------------------------------------------------- */

static void put_reply(struct nbd_buf *out, uint32_t opt, uint32_t type, const void *data,
		      uint32_t len)
{
	struct nbd_opt_reply r = {
		.magic = htobe64(NBD_REP_MAGIC),
		.option = htobe32(opt),
		.type = htobe32(type),
		.length = htobe32(len),
	};

	nbd_buf_append(out, &r, sizeof(r));
	nbd_buf_append(out, data, len);
}

static void put_error(struct nbd_buf *out, uint32_t opt, uint32_t type, const char *msg)
{
	put_reply(out, opt, type, msg, (uint32_t)strlen(msg));
}

static bool name_matches(const struct nbd_export_desc *d, const uint8_t *name, uint32_t len)
{
	/* "" is the default export, which is the attached one. */
	return len == 0 || (len == strlen(d->name) && memcmp(name, d->name, len) == 0);
}

static void put_info_export(struct nbd_buf *out, uint32_t opt, const struct nbd_export_desc *d)
{
	struct nbd_info_export ie = {
		.type = htobe16(NBD_INFO_EXPORT),
		.size = htobe64(d->size),
		.tflags = htobe16(d->tflags),
	};

	put_reply(out, opt, NBD_REP_INFO, &ie, sizeof(ie));
}

static void put_info_block_size(struct nbd_buf *out, uint32_t opt,
				const struct nbd_export_desc *d)
{
	struct nbd_info_block_size bs = {
		.type = htobe16(NBD_INFO_BLOCK_SIZE),
		.minimum = htobe32(d->min_block),
		.preferred = htobe32(d->pref_block),
		.maximum = htobe32(d->max_payload),
	};

	put_reply(out, opt, NBD_REP_INFO, &bs, sizeof(bs));
}

static void put_info_name(struct nbd_buf *out, uint32_t opt, const struct nbd_export_desc *d)
{
	size_t n = strlen(d->name);
	struct nbd_opt_reply r = {
		.magic = htobe64(NBD_REP_MAGIC),
		.option = htobe32(opt),
		.type = htobe32(NBD_REP_INFO),
		.length = htobe32((uint32_t)(2 + n)),
	};
	uint16_t type = htobe16(NBD_INFO_NAME);

	nbd_buf_append(out, &r, sizeof(r));
	nbd_buf_append(out, &type, sizeof(type));
	nbd_buf_append(out, d->name, n);
}

static enum nbd_opt_result handle_info_go(const struct nbd_export_desc *d, uint32_t opt,
					  const uint8_t *data, uint32_t len, struct nbd_buf *out,
					  const char **why)
{
	uint32_t name_len, nr_off;
	uint16_t nr_info;
	bool want_name = false;

	/* name length (4) + name + count (2) + count x type (2) */
	if (len < 6) {
		*why = "INFO/GO option too short";
		put_error(out, opt, NBD_REP_ERR_INVALID, "option data too short");
		return NBD_OPT_R_CONTINUE;
	}
	memcpy(&name_len, data, 4);
	name_len = be32toh(name_len);
	if (name_len > len - 6) {
		*why = "INFO/GO name length exceeds option length";
		put_error(out, opt, NBD_REP_ERR_INVALID, "name length exceeds option length");
		return NBD_OPT_R_CONTINUE;
	}
	nr_off = 4 + name_len;
	memcpy(&nr_info, data + nr_off, 2);
	nr_info = be16toh(nr_info);
	if ((uint64_t)nr_off + 2 + 2ull * nr_info != len) {
		*why = "INFO/GO information request count does not match option length";
		put_error(out, opt, NBD_REP_ERR_INVALID, "information request count mismatch");
		return NBD_OPT_R_CONTINUE;
	}
	for (uint16_t i = 0; i < nr_info; i++) {
		uint16_t t;

		memcpy(&t, data + nr_off + 2 + 2u * i, 2);
		if (be16toh(t) == NBD_INFO_NAME)
			want_name = true;
	}
	if (!name_matches(d, data + 4, name_len)) {
		*why = "unknown export name";
		put_error(out, opt, NBD_REP_ERR_UNKNOWN, "unknown export; see NBD_OPT_LIST");
		return NBD_OPT_R_CONTINUE;
	}
	put_info_export(out, opt, d);
	/* Always sent: the spec allows unrequested info and libnbd honours it. */
	put_info_block_size(out, opt, d);
	if (want_name)
		put_info_name(out, opt, d);
	put_reply(out, opt, NBD_REP_ACK, NULL, 0);
	return opt == NBD_OPT_GO ? NBD_OPT_R_TRANSMISSION : NBD_OPT_R_CONTINUE;
}

enum nbd_opt_result nbd_handle_option(const struct nbd_export_desc *d,
				      const struct nbd_hs_state *st, uint32_t opt,
				      const uint8_t *data, uint32_t len, struct nbd_buf *out,
				      const char **why)
{
	*why = "";
	if (!data && len) {
		/* Too long to buffer; the payload has been skipped. */
		if (opt == NBD_OPT_EXPORT_NAME) {
			*why = "NBD_OPT_EXPORT_NAME name too long";
			return NBD_OPT_R_CLOSE;
		}
		*why = "option data too long";
		put_error(out, opt, NBD_REP_ERR_TOO_BIG, "option data too long");
		return NBD_OPT_R_CONTINUE;
	}

	switch (opt) {
	case NBD_OPT_EXPORT_NAME: {
		struct nbd_export_name_reply r = {
			.size = htobe64(d->size),
			.tflags = htobe16(d->tflags),
		};
		static const uint8_t zeroes[NBD_EXPORT_NAME_ZEROES];

		if (!name_matches(d, data, len)) {
			/* The option has no error reply: the spec says hang up. */
			*why = "NBD_OPT_EXPORT_NAME for an unknown export";
			return NBD_OPT_R_CLOSE;
		}
		nbd_buf_append(out, &r, sizeof(r));
		if (!st->no_zeroes)
			nbd_buf_append(out, zeroes, sizeof(zeroes));
		return NBD_OPT_R_TRANSMISSION;
	}
	case NBD_OPT_ABORT:
		put_reply(out, opt, NBD_REP_ACK, NULL, 0);
		*why = "client sent NBD_OPT_ABORT";
		return NBD_OPT_R_CLOSE;
	case NBD_OPT_LIST: {
		size_t n = strlen(d->name);
		uint32_t be_n = htobe32((uint32_t)n);
		struct nbd_opt_reply r = {
			.magic = htobe64(NBD_REP_MAGIC),
			.option = htobe32(opt),
			.type = htobe32(NBD_REP_SERVER),
			.length = htobe32((uint32_t)(4 + n)),
		};

		if (len) {
			*why = "NBD_OPT_LIST with data";
			put_error(out, opt, NBD_REP_ERR_INVALID, "NBD_OPT_LIST takes no data");
			return NBD_OPT_R_CONTINUE;
		}
		nbd_buf_append(out, &r, sizeof(r));
		nbd_buf_append(out, &be_n, sizeof(be_n));
		nbd_buf_append(out, d->name, n);
		put_reply(out, opt, NBD_REP_ACK, NULL, 0);
		return NBD_OPT_R_CONTINUE;
	}
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
		return handle_info_go(d, opt, data, len, out, why);
	case NBD_OPT_STARTTLS:
		*why = "TLS not supported";
		put_error(out, opt, NBD_REP_ERR_UNSUP, "TLS is not supported by this server");
		return NBD_OPT_R_CONTINUE;
	case NBD_OPT_STRUCTURED_REPLY:
		/* Simple replies only (allowed by the spec). */
		*why = "structured replies not supported";
		put_reply(out, opt, NBD_REP_ERR_UNSUP, NULL, 0);
		return NBD_OPT_R_CONTINUE;
	default:
		*why = "unsupported option";
		put_reply(out, opt, NBD_REP_ERR_UNSUP, NULL, 0);
		return NBD_OPT_R_CONTINUE;
	}
}

/* ---- transmission -------------------------------------------------------- */

bool nbd_decode_request(const void *raw, struct nbd_req_hdr *out)
{
	struct nbd_request r;

	memcpy(&r, raw, sizeof(r));
	out->flags = be16toh(r.flags);
	out->type = be16toh(r.type);
	/* The handle is opaque: echoed back byte for byte, never swapped. */
	out->handle = r.handle;
	out->offset = be64toh(r.offset);
	out->length = be32toh(r.length);
	return be32toh(r.magic) == NBD_REQUEST_MAGIC;
}

static enum nbd_req_class reply_err(uint32_t *err, uint32_t e)
{
	*err = e;
	return NBD_RC_REPLY;
}

/* Alignment and range; beyond-the-end error differs for writes (ENOSPC). */
static enum nbd_req_class check_extent(const struct nbd_export_desc *d,
				       const struct nbd_req_hdr *r, uint32_t end_err,
				       uint32_t *err)
{
	if (r->offset % d->min_block || r->length % d->min_block)
		return reply_err(err, NBD_EINVAL);
	if (!rb_range_ok(r->offset, r->length, d->size))
		return reply_err(err, end_err);
	if (r->length == 0)
		return reply_err(err, 0); /* nothing to do: succeed without the target */
	return NBD_RC_EXECUTE;
}

enum nbd_req_class nbd_check_request(const struct nbd_export_desc *d,
				     const struct nbd_req_hdr *r, uint32_t *err)
{
	uint16_t allowed = 0;
	bool ro = d->tflags & NBD_FLAG_READ_ONLY;

	*err = 0;
	if (d->tflags & NBD_FLAG_SEND_FUA)
		allowed |= NBD_CMD_FLAG_FUA; /* valid on every command (ignored on some) */

	switch (r->type) {
	case NBD_CMD_DISC:
		return NBD_RC_DISCONNECT;
	case NBD_CMD_READ:
		if (r->flags & ~allowed)
			return reply_err(err, NBD_EINVAL);
		if (r->length > d->max_payload)
			return reply_err(err, NBD_EINVAL);
		return check_extent(d, r, NBD_EINVAL, err);
	case NBD_CMD_WRITE:
		if (r->flags & ~allowed)
			return reply_err(err, NBD_EINVAL);
		if (ro)
			return reply_err(err, NBD_EPERM);
		if (r->length > d->max_payload)
			return reply_err(err, NBD_EINVAL);
		return check_extent(d, r, NBD_ENOSPC, err);
	case NBD_CMD_FLUSH:
		if (!(d->tflags & NBD_FLAG_SEND_FLUSH) || (r->flags & ~allowed))
			return reply_err(err, NBD_EINVAL);
		/* offset/length "MUST be zero"; tolerated if not (nbdkit does too). */
		return NBD_RC_EXECUTE;
	case NBD_CMD_TRIM:
		if (ro)
			return reply_err(err, NBD_EPERM);
		if (!(d->tflags & NBD_FLAG_SEND_TRIM) || (r->flags & ~allowed))
			return reply_err(err, NBD_EINVAL);
		return check_extent(d, r, NBD_EINVAL, err);
	case NBD_CMD_WRITE_ZEROES:
		if (ro)
			return reply_err(err, NBD_EPERM);
		allowed |= NBD_CMD_FLAG_NO_HOLE;
		if (d->tflags & NBD_FLAG_SEND_FAST_ZERO)
			allowed |= NBD_CMD_FLAG_FAST_ZERO;
		if (!(d->tflags & NBD_FLAG_SEND_WRITE_ZEROES) || (r->flags & ~allowed))
			return reply_err(err, NBD_EINVAL);
		return check_extent(d, r, NBD_ENOSPC, err);
	default:
		/* CACHE, BLOCK_STATUS (needs structured replies), unknown. */
		return reply_err(err, NBD_EINVAL);
	}
}

uint32_t nbd_errno_to_nbd(int err)
{
	if (err < 0)
		err = -err;
	switch (err) {
	case 0: return 0;
	case EPERM:
	case EACCES:
	case EROFS: return NBD_EPERM;
	case ENOMEM: return NBD_ENOMEM;
	case EINVAL: return NBD_EINVAL;
	case ENOSPC:
	case EDQUOT:
	case EFBIG: return NBD_ENOSPC;
	case EOVERFLOW: return NBD_EOVERFLOW;
	case ENOTSUP: return NBD_ENOTSUP;
	case ESHUTDOWN: return NBD_ESHUTDOWN;
	default: return NBD_EIO;
	}
}

const char *nbd_cmd_name(unsigned int type)
{
	switch (type) {
	case NBD_CMD_READ: return "READ";
	case NBD_CMD_WRITE: return "WRITE";
	case NBD_CMD_DISC: return "DISC";
	case NBD_CMD_FLUSH: return "FLUSH";
	case NBD_CMD_TRIM: return "TRIM";
	case NBD_CMD_CACHE: return "CACHE";
	case NBD_CMD_WRITE_ZEROES: return "WRITE_ZEROES";
	case NBD_CMD_BLOCK_STATUS: return "BLOCK_STATUS";
	}
	return "UNKNOWN";
}

const char *nbd_opt_name(unsigned int opt)
{
	switch (opt) {
	case NBD_OPT_EXPORT_NAME: return "EXPORT_NAME";
	case NBD_OPT_ABORT: return "ABORT";
	case NBD_OPT_LIST: return "LIST";
	case NBD_OPT_PEEK_EXPORT: return "PEEK_EXPORT";
	case NBD_OPT_STARTTLS: return "STARTTLS";
	case NBD_OPT_INFO: return "INFO";
	case NBD_OPT_GO: return "GO";
	case NBD_OPT_STRUCTURED_REPLY: return "STRUCTURED_REPLY";
	case NBD_OPT_LIST_META_CONTEXT: return "LIST_META_CONTEXT";
	case NBD_OPT_SET_META_CONTEXT: return "SET_META_CONTEXT";
	case NBD_OPT_EXTENDED_HEADERS: return "EXTENDED_HEADERS";
	}
	return "UNKNOWN";
}
