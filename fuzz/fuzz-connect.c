/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the connection setup checkers.  The first byte picks
 * the checker, then come what the receiver asked for (where it matters) and
 * the message.  Whatever the input, an accepted message must hold what the
 * daemons rely on, and every refusal must name a field.
 *
 * Private data is passed as the input bytes themselves: libFuzzer's copy
 * ends at the real length, so ASan catches a read beyond it.
 */
#include "config.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "checked.h"
#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { CM_REQ, CM_REP, CONNECT_REQ, CONNECT_RSP, EXPORT_LIST, NR_CHECKERS };

/* Little-endian integer of n bytes from the input's asks. */
static uint32_t ask(const uint8_t *p, int n)
{
	uint32_t v = 0;

	while (n--)
		v = v << 8 | p[n];
	return v;
}

/* A refusal names a field; an acceptance leaves err clear. */
static void check_err(int refused, const struct rb_validate_err *err)
{
	if (refused ? !err->field : err->field != NULL)
		abort();
}

static void fuzz_cm_req(const uint8_t *msg, size_t len)
{
	struct rb_validate_err err;
	enum rb_cm_reject_reason reason = rb_check_cm_req(msg, len, &err);
	const struct rb_cm_req2 *cr = (const void *)msg;

	check_err(reason != RB_REJ_NONE, &err);
	/* A version 1 request (or any other version) hears why it is refused. */
	if (reason != RB_REJ_NONE && len >= 6 && rb_from_le32(cr->magic) == RB_MAGIC &&
	    rb_from_le16(cr->version) != RB_PROTO_VERSION && reason != RB_REJ_BAD_VERSION)
		abort();
	if (reason == RB_REJ_NONE &&
	    (len < sizeof(*cr) || rb_from_le32(cr->magic) != RB_MAGIC ||
	     rb_from_le16(cr->version) != RB_PROTO_VERSION || rb_from_le16(cr->depth) == 0 ||
	     (rb_from_le16(cr->qid) == 0 && rb_from_le64(cr->session))))
		abort();
}

static void fuzz_cm_rep(const uint8_t *p, size_t size)
{
	struct rb_validate_err err;
	uint16_t asked_depth;
	uint32_t asked_incap;
	const struct rb_cm_rep2 *rep;
	int ret;

	if (size < 6)
		return;
	asked_depth = (uint16_t)ask(p, 2);
	asked_incap = ask(p + 2, 4);
	rep = (const void *)(p + 6);
	ret = rb_check_cm_rep(rep, size - 6, asked_depth, asked_incap, &err);
	check_err(ret < 0, &err);
	if (ret < 0) {
		if (ret != -EPROTO)
			abort();
		return;
	}
	if (size - 6 < sizeof(*rep) || rb_from_le32(rep->magic) != RB_MAGIC ||
	    rb_from_le16(rep->version) != RB_PROTO_VERSION || rep->rsvd ||
	    rb_from_le16(rep->depth) == 0 || rb_from_le16(rep->depth) > asked_depth)
		abort();
	if (ret != (rb_from_le32(rep->incapsule) > asked_incap ? RB_GRANT_OVER_INCAPSULE : 0))
		abort();
}

static void fuzz_connect_req(const uint8_t *msg, size_t len)
{
	struct rb_connect_req cr = { 0 };
	struct rb_validate_err err;
	enum rb_status st;

	memcpy(&cr, msg, len < sizeof(cr) ? len : sizeof(cr));
	st = rb_check_connect_req(&cr, &err);
	check_err(st != RB_S_SUCCESS, &err);
	if (st != RB_S_SUCCESS) {
		if (st != RB_S_BAD_VERSION && st != RB_S_INVALID_FIELD)
			abort();
		return;
	}
	/* admin.c uses both as C strings and looks the host id up. */
	if (!memchr(cr.hostid, '\0', sizeof(cr.hostid)) || !cr.hostid[0] ||
	    !memchr(cr.export_name, '\0', sizeof(cr.export_name)) ||
	    rb_from_le32(cr.magic) != RB_MAGIC || rb_from_le16(cr.version) != RB_PROTO_VERSION)
		abort();
}

static void fuzz_connect_rsp(const uint8_t *p, size_t size)
{
	struct rb_connect_rsp rsp = { 0 };
	struct rb_validate_err err;
	uint16_t asked_queues, asked_depth, nq, depth;
	uint32_t bs;
	int ret, want;

	if (size < 4)
		return;
	asked_queues = (uint16_t)ask(p, 2);
	asked_depth = (uint16_t)ask(p + 2, 2);
	memcpy(&rsp, p + 4, size - 4 < sizeof(rsp) ? size - 4 : sizeof(rsp));
	ret = rb_check_connect_rsp(&rsp, asked_queues, asked_depth, &err);
	check_err(ret < 0, &err);
	if (ret < 0) {
		if (ret != -EPROTO)
			abort();
		return;
	}
	/* session.c divides by the block size and sizes queues by these. */
	bs = rb_from_le32(rsp.block_size);
	nq = rb_from_le16(rsp.nr_io_queues);
	depth = rb_from_le16(rsp.queue_depth);
	if (!rb_is_pow2(bs) || bs > 65536 || rb_from_le32(rsp.max_transfer) < bs || !nq || !depth)
		abort();
	want = (nq > asked_queues ? RB_GRANT_OVER_QUEUES : 0) |
	       (depth > asked_depth ? RB_GRANT_OVER_DEPTH : 0);
	if (ret != want)
		abort();
}

static void fuzz_export_list(const uint8_t *p, size_t size)
{
	const size_t ent = sizeof(struct rb_export_entry);
	struct rb_export_entry *list;
	uint32_t cap, n, total;
	uint64_t result;

	if (size < 9)
		return;
	cap = p[0] % 8;
	result = (uint64_t)ask(p + 5, 4) << 32 | ask(p + 1, 4);
	size -= 9;
	/* Exactly cap entries on the heap: ASan sees a write past them. */
	list = calloc(cap ? cap : 1, ent);
	if (!list)
		return;
	memcpy(list, p + 9, size < cap * ent ? size : cap * ent);
	n = rb_export_list_fix(list, cap, result, &total);
	if (n > cap || n > (uint32_t)result || total < n)
		abort();
	if (total < (uint32_t)(result >> 32))
		abort();
	for (uint32_t i = 0; i < n; i++)
		if (!memchr(list[i].name, '\0', sizeof(list[i].name)))
			abort();
	free(list);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	switch (data[0] % NR_CHECKERS) {
	case CM_REQ: fuzz_cm_req(data + 1, size - 1); break;
	case CM_REP: fuzz_cm_rep(data + 1, size - 1); break;
	case CONNECT_REQ: fuzz_connect_req(data + 1, size - 1); break;
	case CONNECT_RSP: fuzz_connect_rsp(data + 1, size - 1); break;
	case EXPORT_LIST: fuzz_export_list(data + 1, size - 1); break;
	}
	return 0;
}
