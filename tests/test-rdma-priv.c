/* SPDX-License-Identifier: MIT */
/* The rdma transport's private data framing (what a peer declares never
 * decides how much is copied) and its connection parameters. */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "tap.h"
#include "transport_rdma_priv.h"

/* connect and accept build theirs here: the same bounds on both sides. */
static void conn_param_cases(void)
{
	struct ibv_device_attr a = { .max_qp_init_rd_atom = 16, .max_qp_rd_atom = 8 };
	struct rb_conn_caps caps = { .max_rd_atomic = 32, .max_dest_rd_atomic = 4 };
	struct rb_transport_opts o = { .retry_count = -1, .rnr_retry = 3 };
	struct rdma_conn_param p;
	uint8_t buf[RD_PRIV_BUF], priv[3] = { 1, 2, 3 };

	p = rd_conn_param(&a, &o, &caps, 255, 255, buf, priv, sizeof(priv));
	is_int(p.initiator_depth, 16, "conn param: READs we issue bounded by the device");
	is_int(p.responder_resources, 4, "conn param: READs we take bounded by our caps");
	is_int(p.retry_count, RD_DEFAULT_RETRY, "conn param: retry count default");
	is_int(p.rnr_retry_count, 3, "conn param: rnr retry from opts");
	is_int(p.flow_control, 1, "conn param: flow control");
	ok(p.private_data == buf && p.private_data_len == RD_PRIV_HDR + sizeof(priv) &&
		   buf[0] == RD_PRIV_MAGIC && buf[1] == sizeof(priv) && buf[4] == 3,
	   "conn param: private data framed into buf");
	p = rd_conn_param(&a, &o, &caps, 2, 1, buf, NULL, 0);
	ok(p.initiator_depth == 2 && p.responder_resources == 1,
	   "conn param: accept bounded by what the request offered");
	o.retry_count = 9;
	p = rd_conn_param(&a, &o, NULL, 255, 255, buf, NULL, 0);
	ok(p.initiator_depth == 0 && p.responder_resources == 0,
	   "conn param: no caps, no RDMA READs");
	is_int(p.retry_count, 7, "conn param: retry count capped at 7");
}

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
	conn_param_cases();
	return tap_done();
}
