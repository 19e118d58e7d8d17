/* SPDX-License-Identifier: MIT */
/* DHHC-1 secrets (the format of nvme-cli gen-dhchap-key): parse, make, load. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "auth.h"

/* CRC-32 (IEEE 802.3, as zlib): a checksum against typos, not crypto. */
static uint32_t crc32_ieee(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	while (n--) {
		c ^= *p++;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0xedb88320u : c >> 1;
	}
	return ~c;
}

static bool b64_char(char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
	       ch == '+' || ch == '/';
}

/* Strict base64 of n chars at s into out (room for 3n/4); bytes or -1. */
static int b64_decode(const char *s, size_t n, uint8_t *out)
{
	size_t pad = 0;
	int len;

	if (n == 0 || n % 4)
		return -1;
	while (pad < 2 && s[n - 1 - pad] == '=')
		pad++;
	for (size_t i = 0; i < n - pad; i++)
		if (!b64_char(s[i]))
			return -1;
	len = EVP_DecodeBlock(out, (const unsigned char *)s, (int)n);
	return len < 0 ? -1 : len - (int)pad;
}

int rb_auth_key_parse(const char *s, struct rb_auth_key *k, const char **why)
{
	static const char prefix[] = "DHHC-1:";
	uint8_t raw[64 + 4 + 3]; /* key + crc; EVP_DecodeBlock writes whole triplets */
	const char *b, *end;
	size_t n;
	unsigned int hh;
	int len, ret = -EINVAL;
	uint32_t crc;

	memset(k, 0, sizeof(*k));
	*why = "not a DHHC-1 secret (want DHHC-1:<hh>:<base64>:)";
	if (strncmp(s, prefix, sizeof(prefix) - 1) != 0)
		return -EINVAL;
	s += sizeof(prefix) - 1;
	if (s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9' || s[2] != ':')
		return -EINVAL;
	hh = (unsigned int)(s[0] - '0') * 10 + (unsigned int)(s[1] - '0');
	if (hh > RB_AUTH_HASH_SHA512) {
		*why = "unknown transform hash (hh is 00, 01, 02 or 03)";
		return -EINVAL;
	}
	b = s + 3;
	end = strchr(b, ':');
	if (!end || (end[1] && strcmp(end + 1, "\n") != 0)) {
		*why = "not a DHHC-1 secret (want DHHC-1:<hh>:<base64>:)";
		return -EINVAL;
	}
	n = (size_t)(end - b);
	if (n > 4 * ((sizeof(raw) - 3 + 2) / 3)) {
		*why = "key too long (32, 48 or 64 bytes)";
		return -EINVAL;
	}
	len = b64_decode(b, n, raw);
	if (len < 0) {
		*why = "bad base64";
		goto out;
	}
	len -= 4;
	if (len != 32 && len != 48 && len != 64) {
		*why = "key length is not 32, 48 or 64 bytes";
		goto out;
	}
	if (hh && (unsigned int)len != rb_auth_hash_len(hh)) {
		*why = "key length does not match its transform hash (01: 32, 02: 48, 03: 64)";
		goto out;
	}
	crc = (uint32_t)raw[len] | (uint32_t)raw[len + 1] << 8 | (uint32_t)raw[len + 2] << 16 |
	      (uint32_t)raw[len + 3] << 24;
	if (crc32_ieee(raw, (size_t)len) != crc) {
		*why = "CRC mismatch (key mistyped or truncated)";
		goto out;
	}
	memcpy(k->key, raw, (size_t)len);
	k->len = (uint8_t)len;
	k->hh = (uint8_t)hh;
	*why = NULL;
	ret = 0;
out:
	OPENSSL_cleanse(raw, sizeof(raw));
	return ret;
}

int rb_auth_key_generate(unsigned int hh, unsigned int len, struct rb_auth_key *k)
{
	memset(k, 0, sizeof(*k));
	if (hh > RB_AUTH_HASH_SHA512 || (len != 32 && len != 48 && len != 64) ||
	    (hh && len != rb_auth_hash_len(hh)))
		return -EINVAL;
	if (RAND_bytes(k->key, (int)len) != 1)
		return -EIO;
	k->len = (uint8_t)len;
	k->hh = (uint8_t)hh;
	return 0;
}

int rb_auth_key_format(const struct rb_auth_key *k, char *buf, size_t cap)
{
	uint8_t raw[64 + 4];
	char b64[((sizeof(raw) + 2) / 3) * 4 + 1];
	uint32_t crc = crc32_ieee(k->key, k->len);
	int n;

	memcpy(raw, k->key, k->len);
	for (int i = 0; i < 4; i++)
		raw[k->len + i] = (uint8_t)(crc >> (8 * i));
	EVP_EncodeBlock((unsigned char *)b64, raw, k->len + 4);
	n = snprintf(buf, cap, "DHHC-1:%02u:%s:", k->hh, b64);
	OPENSSL_cleanse(raw, sizeof(raw));
	OPENSSL_cleanse(b64, sizeof(b64));
	return n < 0 || (size_t)n >= cap ? -ENOSPC : 0;
}

int rb_auth_key_load(const char *path, struct rb_auth_key *k, char *err, size_t errlen)
{
	char buf[160];
	const char *why;
	struct stat st;
	ssize_t n;
	int fd, ret;

	memset(k, 0, sizeof(*k));
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		return ret;
	}
	/* Checked on the open file: no window between check and read. */
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		goto out;
	}
	ret = -EPERM;
	if (!S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s: not a regular file", path);
		goto out;
	}
	if (st.st_uid != geteuid()) {
		snprintf(err, errlen, "%s: owned by uid %u, not by this daemon's user (uid %u)",
			 path, (unsigned int)st.st_uid, (unsigned int)geteuid());
		goto out;
	}
	if (st.st_mode & (S_IRWXG | S_IRWXO)) {
		snprintf(err, errlen,
			 "%s: mode %04o gives group or others access (want 0600 or 0400)", path,
			 (unsigned int)(st.st_mode & 07777));
		goto out;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	if (n < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		goto out;
	}
	buf[n] = '\0';
	ret = rb_auth_key_parse(buf, k, &why);
	if (ret)
		snprintf(err, errlen, "%s: %s", path, why);
out:
	OPENSSL_cleanse(buf, sizeof(buf));
	close(fd);
	return ret;
}

void rb_auth_key_clear(struct rb_auth_key *k)
{
	OPENSSL_cleanse(k, sizeof(*k));
}
