/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "uri.h"

#define HOST_NAME_MAX_LEN 253 /* RFC 1035 presentation form, no trailing dot */
#define HOST_LABEL_MAX 63

static void __attribute__((format(printf, 3, 4)))
set_err(char *errbuf, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!errbuf || errlen == 0)
		return;
	va_start(ap, fmt);
	vsnprintf(errbuf, errlen, fmt, ap);
	va_end(ap);
}

/* A byte for an error message: the character itself if printable, else hex. */
static const char *show_char(unsigned char c, char buf[8])
{
	if (c > 0x20 && c < 0x7f && c != '\'')
		snprintf(buf, 8, "'%c'", c);
	else
		snprintf(buf, 8, "0x%02x", c);
	return buf;
}

static bool is_digits(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (s[i] < '0' || s[i] > '9')
			return false;
	return len > 0;
}

static int parse_port(const char *s, size_t len, uint16_t *out, char *errbuf, size_t errlen)
{
	unsigned long v = 0;

	if (len == 0) {
		set_err(errbuf, errlen, "empty port");
		return -EINVAL;
	}
	if (!is_digits(s, len)) {
		set_err(errbuf, errlen, "bad port '%.*s'", (int)(len > 32 ? 32 : len), s);
		return -EINVAL;
	}
	/* More than 5 digits cannot be a port; avoids overflow below. */
	for (size_t i = 0; i < len && v <= 65535; i++)
		v = v * 10 + (unsigned long)(s[i] - '0');
	if (len > 5 || v < 1 || v > 65535) {
		set_err(errbuf, errlen, "port %.*s out of range (1..65535)",
			(int)(len > 32 ? 32 : len), s);
		return -EINVAL;
	}
	*out = (uint16_t)v;
	return 0;
}

static bool host_char_ok(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_' || c == '.';
}

/* Host name or dotted IPv4 address, not bracketed. */
static int parse_host(const char *s, size_t len, char *host, size_t hostlen, char *errbuf,
		      size_t errlen)
{
	size_t label = 0;
	bool numeric = true;
	char cbuf[8];

	if (len == 0) {
		set_err(errbuf, errlen, "empty host");
		return -EINVAL;
	}
	if (len > HOST_NAME_MAX_LEN || len >= hostlen) {
		set_err(errbuf, errlen, "host name too long (%zu bytes, max %d)", len,
			HOST_NAME_MAX_LEN);
		return -EINVAL;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (!host_char_ok(c)) {
			set_err(errbuf, errlen, "invalid character %s in host", show_char(c, cbuf));
			return -EINVAL;
		}
		if (c != '.' && (c < '0' || c > '9'))
			numeric = false;
		if (c == '.') {
			if (label == 0)
				goto bad_label;
			label = 0;
			continue;
		}
		/* Labels neither start nor end with a hyphen (RFC 952/1123). */
		if (c == '-' && (label == 0 || i + 1 == len || s[i + 1] == '.'))
			goto bad_label;
		if (++label > HOST_LABEL_MAX)
			goto bad_label;
	}
	if (label == 0)
		goto bad_label;
	memcpy(host, s, len);
	host[len] = '\0';
	if (numeric) {
		struct in_addr a;

		/* All digits and dots: must be a complete dotted quad. */
		if (inet_pton(AF_INET, host, &a) != 1) {
			set_err(errbuf, errlen, "bad IPv4 address '%s'", host);
			return -EINVAL;
		}
	}
	return 0;

bad_label:
	set_err(errbuf, errlen, "bad host name '%.*s'", (int)len, s);
	return -EINVAL;
}

/*
 * s[0..len) is "HOST[:PORT]".  A missing port becomes default_port, or is an
 * error when default_port is 0.
 */
static int parse_authority(const char *s, size_t len, uint16_t default_port,
			   struct rb_endpoint *ep, char *errbuf, size_t errlen)
{
	const char *port = NULL;
	size_t port_len = 0;
	int ret;

	if (len > 0 && s[0] == '[') {
		const char *rb = memchr(s, ']', len);
		char v6[INET6_ADDRSTRLEN + 1];
		struct in6_addr a;
		size_t hl;

		if (!rb) {
			set_err(errbuf, errlen, "missing ']' after IPv6 address");
			return -EINVAL;
		}
		hl = (size_t)(rb - s) - 1;
		if (hl == 0) {
			set_err(errbuf, errlen, "empty host");
			return -EINVAL;
		}
		if (hl >= sizeof(v6)) {
			set_err(errbuf, errlen, "bad IPv6 address '%.*s'", (int)(hl > 48 ? 48 : hl),
				s + 1);
			return -EINVAL;
		}
		memcpy(v6, s + 1, hl);
		v6[hl] = '\0';
		if (inet_pton(AF_INET6, v6, &a) != 1) {
			set_err(errbuf, errlen, "bad IPv6 address '%s'", v6);
			return -EINVAL;
		}
		rb++;
		if (rb < s + len) {
			if (*rb != ':') {
				set_err(errbuf, errlen, "junk after IPv6 address: '%.*s'",
					(int)(s + len - rb > 32 ? 32 : s + len - rb), rb);
				return -EINVAL;
			}
			port = rb + 1;
			port_len = (size_t)(s + len - port);
		}
		memcpy(ep->host, v6, hl + 1);
	} else {
		const char *colon = memchr(s, ':', len);
		size_t hl = len;

		if (colon) {
			if (memchr(colon + 1, ':', (size_t)(s + len - colon - 1))) {
				set_err(errbuf, errlen, "IPv6 address must be in brackets");
				return -EINVAL;
			}
			hl = (size_t)(colon - s);
			port = colon + 1;
			port_len = (size_t)(s + len - port);
		}
		ret = parse_host(s, hl, ep->host, sizeof(ep->host), errbuf, errlen);
		if (ret)
			return ret;
	}
	if (port)
		return parse_port(port, port_len, &ep->port, errbuf, errlen);
	if (default_port == 0) {
		set_err(errbuf, errlen, "missing port");
		return -EINVAL;
	}
	ep->port = default_port;
	return 0;
}

/* "tcp://" or "rdma://" (scheme case-insensitive); *rest points after it. */
static int parse_scheme(const char *s, char *transport, size_t tlen, const char **rest,
			char *errbuf, size_t errlen)
{
	static const char *const schemes[] = { "tcp", "rdma" };
	const char *sep = strstr(s, "://");
	size_t len;

	if (!sep) {
		set_err(errbuf, errlen, "missing scheme (want tcp:// or rdma://)");
		return -EINVAL;
	}
	len = (size_t)(sep - s);
	for (size_t i = 0; i < sizeof(schemes) / sizeof(schemes[0]); i++) {
		if (len == strlen(schemes[i]) && strncasecmp(s, schemes[i], len) == 0) {
			if (len >= tlen) {
				set_err(errbuf, errlen, "transport buffer too small");
				return -EINVAL;
			}
			memcpy(transport, schemes[i], len + 1);
			*rest = sep + 3;
			return 0;
		}
	}
	set_err(errbuf, errlen, "unknown scheme '%.*s' (want tcp:// or rdma://)",
		(int)(len > 32 ? 32 : len), s);
	return -EINVAL;
}

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* RFC 3986 pchar plus '/', minus pct-encoded (handled by the caller). */
static bool path_char_ok(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("-._~!$&'()*+,;=:@/", c));
}

static int decode_export(const char *s, char *out, size_t outlen, char *errbuf, size_t errlen)
{
	size_t n = 0;
	char cbuf[8];

	for (const char *p = s; *p; p++) {
		unsigned char c = (unsigned char)*p;

		if (c == '%') {
			int hi = hexval(p[1]), lo = hi < 0 ? -1 : hexval(p[2]);

			if (hi < 0 || lo < 0) {
				set_err(errbuf, errlen, "bad percent escape '%.3s' in export", p);
				return -EINVAL;
			}
			c = (unsigned char)(hi << 4 | lo);
			p += 2;
		} else if (c == '?' || c == '#') {
			set_err(errbuf, errlen, "query or fragment ('%c') not supported", c);
			return -EINVAL;
		} else if (c >= 0x20 && c != 0x7f && !path_char_ok(c)) {
			set_err(errbuf, errlen, "character %s in export must be percent-encoded",
				show_char(c, cbuf));
			return -EINVAL;
		}
		if (c < 0x20 || c == 0x7f) {
			set_err(errbuf, errlen, "control character 0x%02x in export", c);
			return -EINVAL;
		}
		if (n + 1 >= outlen) {
			set_err(errbuf, errlen, "export name too long (max %zu bytes)", outlen - 1);
			return -EINVAL;
		}
		out[n++] = (char)c;
	}
	if (n == 0) {
		set_err(errbuf, errlen, "empty export name");
		return -EINVAL;
	}
	out[n] = '\0';
	return 0;
}

int rb_uri_parse_listen(const char *s, char *transport, size_t tlen, struct rb_endpoint *ep,
			char *errbuf, size_t errlen)
{
	struct rb_endpoint tmp = { .port = 0 };
	char tr[16];
	const char *rest;
	int ret;

	ret = parse_scheme(s, tr, sizeof(tr), &rest, errbuf, errlen);
	if (ret)
		return ret;
	if (strchr(rest, '/')) {
		set_err(errbuf, errlen, "a listen address takes no /EXPORT");
		return -EINVAL;
	}
	ret = parse_authority(rest, strlen(rest), RB_DEFAULT_PORT, &tmp, errbuf, errlen);
	if (ret)
		return ret;
	if (strlen(tr) >= tlen) {
		set_err(errbuf, errlen, "transport buffer too small");
		return -EINVAL;
	}
	strcpy(transport, tr);
	*ep = tmp;
	return 0;
}

int rb_parse_hostport(const char *s, struct rb_endpoint *ep, char *errbuf, size_t errlen)
{
	struct rb_endpoint tmp = { .port = 0 };
	int ret;

	ret = parse_authority(s, strlen(s), 0, &tmp, errbuf, errlen);
	if (ret)
		return ret;
	*ep = tmp;
	return 0;
}

int rb_uri_parse(const char *s, struct rb_uri *out, char *errbuf, size_t errlen)
{
	struct rb_uri u;
	const char *rest;
	size_t alen;
	char reason[256];
	int ret;

	memset(&u, 0, sizeof(u));
	ret = parse_scheme(s, u.transport, sizeof(u.transport), &rest, reason, sizeof(reason));
	if (ret)
		goto out_err;
	alen = strcspn(rest, "/?#");
	if (rest[alen] != '/') {
		if (rest[alen])
			snprintf(reason, sizeof(reason), "query or fragment ('%c') not supported",
				 rest[alen]);
		else
			snprintf(reason, sizeof(reason), "missing /EXPORT");
		ret = -EINVAL;
		goto out_err;
	}
	ret = parse_authority(rest, alen, RB_DEFAULT_PORT, &u.ep, reason, sizeof(reason));
	if (ret)
		goto out_err;
	ret = decode_export(rest + alen + 1, u.export_name, sizeof(u.export_name), reason,
			    sizeof(reason));
	if (ret)
		goto out_err;
	*out = u;
	return 0;

out_err:
	set_err(errbuf, errlen, "uri: %s", reason);
	return ret;
}
