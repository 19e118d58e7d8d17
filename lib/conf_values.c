/* SPDX-License-Identifier: MIT */
/* Config values: numbers, sizes, booleans, names and the host id, shared by
 * the config files and command-line flags. */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "conf.h"
#include "conf_priv.h"
#include "log.h"
#include "uri.h"

/* ---- value parsers ----------------------------------------------------- */

/* Decimal digits only: -EINVAL for syntax, -ERANGE for overflow. */
static int parse_u64(const char *s, uint64_t *out, const char **end)
{
	uint64_t v = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -ERANGE;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (!end && *p)
		return -EINVAL;
	if (end)
		*end = p;
	*out = v;
	return 0;
}

int rb_conf_size(const char *s, uint64_t *out)
{
	static const char suffixes[] = "KMG";
	const char *end, *suffix;
	unsigned int shift = 0;
	uint64_t v;
	int ret;

	ret = parse_u64(s, &v, &end);
	if (ret)
		return ret;
	if (*end) {
		suffix = strchr(suffixes, toupper((unsigned char)*end));
		if (!suffix || end[1])
			return -EINVAL;
		shift = 10 * (unsigned int)(suffix - suffixes + 1);
	}
	if (v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}

int rb_conf_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;
	int ret = parse_u64(s, &v, NULL);

	if (ret)
		return ret;
	if (v < min || v > max)
		return -ERANGE;
	*out = (uint32_t)v;
	return 0;
}

int rb_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(s, yes[i]) == 0) {
			*out = true;
			return 0;
		}
		if (strcasecmp(s, no[i]) == 0) {
			*out = false;
			return 0;
		}
	}
	return -EINVAL;
}

int rb_parse_size(const char *s, uint64_t *out)
{
	return rb_conf_size(s, out) ? -EINVAL : 0;
}

int rb_parse_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	return rb_conf_u32(s, min, max, out) ? -EINVAL : 0;
}

int rb_parse_listen(const char *s, struct rb_listen_addr *out)
{
	char reason[128];

	return rb_uri_parse_listen(s, out->transport, sizeof(out->transport), &out->ep, reason,
				   sizeof(reason));
}

/* "16K" rather than 16384 in range messages. */
const char *rb_conf_human(uint64_t v, char buf[24])
{
	if (v && v % (1u << 20) == 0)
		snprintf(buf, 24, "%" PRIu64 "M", v >> 20);
	else if (v && v % 1024 == 0)
		snprintf(buf, 24, "%" PRIu64 "K", v >> 10);
	else
		snprintf(buf, 24, "%" PRIu64, v);
	return buf;
}

/* ---- string checks ----------------------------------------------------- */

int rb_conf_check_hostid(const char *v, char *reason, size_t len)
{
	size_t n = strlen(v);

	if (n >= RB_HOSTID_MAX) {
		snprintf(reason, len, "host id too long (%zu bytes, max %d)", n, RB_HOSTID_MAX - 1);
		return -EINVAL;
	}
	for (const char *p = v; *p; p++) {
		if (*p <= ' ' || *p >= 0x7f || *p == ',') {
			snprintf(reason, len,
				 "host id must be printable ASCII without spaces or commas");
			return -EINVAL;
		}
	}
	return 0;
}

int rb_conf_check_path(const char *v, char *reason, size_t len)
{
	if (v[0] != '/') {
		snprintf(reason, len, "path must be absolute");
		return -EINVAL;
	}
	return 0;
}

int rb_conf_check_uri(const char *v, char *reason, size_t len)
{
	struct rb_uri u;
	char msg[256];

	if (rb_uri_parse(v, &u, msg, sizeof(msg)) == 0)
		return 0;
	/* Drop rb_uri_parse's "uri: " prefix: the key already says so. */
	snprintf(reason, len, "%s", strncmp(msg, "uri: ", 5) == 0 ? msg + 5 : msg);
	return -EINVAL;
}

int rb_conf_check_hostport(const char *v, char *reason, size_t len)
{
	struct rb_endpoint ep;

	return rb_parse_hostport(v, &ep, reason, len);
}

int rb_conf_check_nbd_device(const char *v, char *reason, size_t len)
{
	static const char prefix[] = "/dev/nbd";
	const char *n = v + sizeof(prefix) - 1;
	size_t digits;

	if (strcmp(v, "auto") == 0)
		return 0;
	if (strncmp(v, prefix, sizeof(prefix) - 1) == 0) {
		/* Decimal index without leading zeros, as the kernel names them. */
		digits = strspn(n, "0123456789");
		if (digits && digits <= 6 && !n[digits] && (n[0] != '0' || digits == 1))
			return 0;
	}
	snprintf(reason, len, "want /dev/nbdN or auto");
	return -EINVAL;
}


/* ---- host id ----------------------------------------------------------- */

int rb_hostid_from_file(const char *path, char *buf, size_t len)
{
	char id[64];
	size_t n;
	FILE *f;
	int ret;

	f = fopen(path, "re");
	if (!f) {
		ret = -errno;
		rb_err("%s: %s", path, strerror(-ret));
		return ret;
	}
	if (!fgets(id, sizeof(id), f))
		id[0] = '\0';
	fclose(f);
	n = strcspn(id, "\n");
	id[n] = '\0';
	/* systemd's rules: 32 hex digits, and never all zero. */
	if (n != 32 || strspn(id, "0123456789abcdefABCDEF") != 32 ||
	    strspn(id, "0") == 32) {
		rb_err("%s: malformed machine id (want 32 hex digits)", path);
		return -EINVAL;
	}
	for (char *p = id; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	if ((size_t)snprintf(buf, len, "rdmablk:uuid:%.8s-%.4s-%.4s-%.4s-%.12s", id, id + 8,
			     id + 12, id + 16, id + 20) >= len) {
		rb_err("host id buffer too small (%zu bytes)", len);
		return -ENOSPC;
	}
	return 0;
}

int rb_default_hostid(char *buf, size_t len)
{
	return rb_hostid_from_file("/etc/machine-id", buf, len);
}
