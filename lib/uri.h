/* SPDX-License-Identifier: MIT */
/* Initiator URIs: tcp://HOST[:PORT]/EXPORT and rdma://HOST[:PORT]/EXPORT.
 * HOST may be a name, IPv4, or [IPv6]; EXPORT is percent-decoded. */
#ifndef RB_URI_H
#define RB_URI_H

#include <stddef.h>

#include "transport.h"
#include "wire.h"

struct rb_uri {
	char transport[16];
	struct rb_endpoint ep; /* port defaults to RB_DEFAULT_PORT */
	char export_name[RB_EXPORT_NAME_MAX];
};

/* 0 or -EINVAL with a reason in errbuf ("uri: ..."). */
int rb_uri_parse(const char *s, struct rb_uri *out, char *errbuf, size_t errlen);

/*
 * Building blocks shared with the config parser.  Both return 0 or -EINVAL
 * with a bare reason (no prefix) in errbuf.  ep->host never keeps the
 * brackets of an IPv6 literal.
 */
/* "SCHEME://HOST[:PORT]" with no export part (target listen addresses). */
int rb_uri_parse_listen(const char *s, char *transport, size_t tlen, struct rb_endpoint *ep,
			char *errbuf, size_t errlen);
/* "HOST:PORT" with the port required (e.g. nbd-listen). */
int rb_parse_hostport(const char *s, struct rb_endpoint *ep, char *errbuf, size_t errlen);

#endif
