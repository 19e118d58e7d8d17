/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the NBD server's protocol parsing (the bytes an NBD
 * client sends): a stream of options (fixed newstyle) and then transmission
 * requests, fed to the same socket-free functions the server uses.  An
 * accepted request must lie inside the export and within max_payload.
 */
#include "config.h"

#include <endian.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "nbd_proto.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nbd_export_desc d;
	struct nbd_hs_state st = { 0 };
	struct nbd_buf out;
	size_t pos = 0;

	if (size < 2)
		return 0;
	if (nbd_export_desc_init(&d, "disk0", 1ull << 30, data[0] & 0x3f, 512u << (data[1] % 4),
				 8u << 20) < 0)
		return 0;
	pos = 2;
	nbd_buf_init(&out);
	/* Options: u32 opt, u32 len, len bytes (len clamped to what is left). */
	while (pos + 8 <= size) {
		uint32_t opt, len;
		const char *why = NULL;
		enum nbd_opt_result r;

		memcpy(&opt, data + pos, 4);
		memcpy(&len, data + pos + 4, 4);
		opt = be32toh(opt);
		len = be32toh(len);
		pos += 8;
		if (len > size - pos)
			len = (uint32_t)(size - pos);
		r = nbd_handle_option(&d, &st, opt, data + pos, len, &out, &why);
		pos += len;
		if (!why)
			abort(); /* every outcome is explained for the log */
		nbd_buf_consume(&out, out.len);
		if (r != NBD_OPT_R_CONTINUE)
			break;
	}
	nbd_buf_free(&out);
	/* Transmission: 28-byte requests. */
	while (pos + 28 <= size) {
		struct nbd_req_hdr h;
		uint32_t err = 0;

		if (!nbd_decode_request(data + pos, &h))
			break;
		pos += 28;
		if (nbd_check_request(&d, &h, &err) == NBD_RC_EXECUTE &&
		    (h.type == NBD_CMD_READ || h.type == NBD_CMD_WRITE)) {
			if (!rb_range_ok(h.offset, h.length, d.size) || h.length > d.max_payload ||
			    h.offset % d.min_block || h.length % d.min_block)
				abort();
		}
	}
	return 0;
}
