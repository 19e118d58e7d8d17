/* SPDX-License-Identifier: MIT */
/* The rdma transport's private data framing: what a peer declares never
 * decides how much is copied. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "tap.h"
#include "transport_rdma_priv.h"

int main(void)
{
	uint8_t wire[600], dst[RD_PRIV_BUF + 16], payload[64];
	size_t n, framed;

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i + 1);

	framed = rd_priv_frame(wire, payload, sizeof(payload));
	memset(dst, 0xee, sizeof(dst));
	n = rd_priv_take(wire, framed, dst, RD_PRIV_BUF);
	is_int(n, sizeof(payload), "a framed payload that fits is taken whole");
	ok(memcmp(dst, payload, sizeof(payload)) == 0, "and copied as sent");

	/* iWARP carries up to 512 bytes: a frame claiming 250 of them. */
	memset(wire, 0x41, sizeof(wire));
	wire[0] = RD_PRIV_MAGIC;
	wire[1] = 250;
	memset(dst, 0xee, sizeof(dst));
	n = rd_priv_take(wire, 512, dst, RD_PRIV_BUF);
	ok(n <= RD_PRIV_BUF, "a frame longer than the buffer copies at most the buffer (%zu)", n);
	ok(dst[RD_PRIV_BUF] == 0xee, "nothing written past the buffer");
	ok(dst[0] == RD_PRIV_MAGIC, "the raw field is handed over (the engine refuses it)");

	/* A length byte beyond what arrived: not a frame. */
	wire[1] = 60;
	n = rd_priv_take(wire, 40, dst, RD_PRIV_BUF);
	is_int(n, 40, "a frame claiming more than arrived is raw data");

	n = rd_priv_take(NULL, 0, dst, RD_PRIV_BUF);
	is_int(n, 0, "no private data");
	n = rd_priv_take(wire, 1, dst, RD_PRIV_BUF);
	is_int(n, 1, "one byte is raw data");
	return tap_done();
}
