/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for authentication: the message checkers of lib/wire.c
 * and the target state machine of lib/auth.c fed arbitrary host halves.
 * First byte: bit 0 picks a checker run on the target half instead; the
 * rest of the input is cut into host halves, each one AUTH step.  Whatever
 * the input, a forged exchange must never reach DONE (the host secret is
 * random per run), and a refusal must name a field.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct rb_auth_key key;

static void fuzz_tgt_msg(const uint8_t *p, size_t n)
{
	union rb_auth_tgt_msg m = {0};
	struct rb_validate_err err;

	if (n < 1)
		return;
	memcpy(&m, p + 1, n - 1 < sizeof(m) ? n - 1 : sizeof(m));
	if (rb_check_auth_tgt_msg(&m, p[0] % 6, &err) ? !err.field : err.field != NULL)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rb_auth_params p = {
	    .hostid = "nqn.fuzz:host",
	    .target_id = "disk",
	    .session = 1,
	    .host_key = &key,
	    .hash_mask = RB_AUTH_HASH_MASK_ALL,
	    /* ffdhe2048 keeps a run short; the parsing is the same. */
	    .dh_mask = 1u << RB_AUTH_DH_NULL | 1u << RB_AUTH_DH_FFDHE2048,
	};
	struct rb_auth_tgt *t;
	union rb_auth_host_msg in;
	union rb_auth_tgt_msg out;
	struct rb_validate_err err;

	if (size < 1)
		return 0;
	if (!key.len && rb_auth_key_generate(0, 32, &key))
		abort();
	if (data[0] & 1) {
		fuzz_tgt_msg(data + 1, size - 1);
		return 0;
	}
	if (rb_auth_tgt_new(&p, &t))
		abort();
	data++, size--;
	for (int step = 0; step < 3 && size; step++) {
		size_t n = size < sizeof(in) ? size : sizeof(in);
		enum rb_status st, chk;

		/* Short input: the rest zero, as a zeroed receive buffer. */
		memset(&in, 0, sizeof(in));
		memcpy(&in, data, n);
		data += n, size -= n;
		chk = rb_check_auth_host_msg(&in, &err);
		if (chk ? !err.field : err.field != NULL)
			abort();
		st = rb_auth_tgt_step(t, 0, &in, &out);
		if (chk && st == RB_S_SUCCESS)
			abort(); /* the state machine took what the checker refused */
		if (st != RB_S_SUCCESS)
			break;
		if (out.hdr.type != RB_AUTH_CHALLENGE && out.hdr.type != RB_AUTH_SUCCESS)
			abort();
	}
	/* Without the (random) secret nobody gets in. */
	if (rb_auth_tgt_done(t))
		abort();
	rb_auth_tgt_free(t);
	return 0;
}
