/* SPDX-License-Identifier: MIT */
/*
 * Test client: runs a sequence of NBD operations with libnbd against a URI
 * and checks each result.  Operations (OFF and LEN in bytes, BYTE in hex):
 *   write:OFF:LEN:BYTE        write LEN bytes of BYTE
 *   writefua:OFF:LEN:BYTE     the same with NBD_CMD_FLAG_FUA
 *   read:OFF:LEN:BYTE         read and check every byte is BYTE
 *   flush
 *   trim:OFF:LEN              trim (must read back as zeroes afterwards)
 *   zero:OFF:LEN              write zeroes
 *   zerofua:OFF:LEN
 *   size:N                    the export is N bytes
 *   flag:NAME:0|1             can_flush/can_fua/can_trim/can_zero/
 *                             can_multi_conn/is_read_only is as given
 *   fail:ERRNO:OP...          OP must fail with ERRNO (EPERM, EINVAL, EIO...)
 *   nostrict                  turn off libnbd's client-side checks so bad
 *                             requests reach the server
 *   hang:OP...                OP must fail (any error) rather than succeed;
 *                             the caller bounds it with a timeout
 * Exit 0 when every step behaved, 1 with a message otherwise.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <libnbd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct nbd_handle *nbd;

static int errno_by_name(const char *s)
{
	static const struct {
		const char *name;
		int err;
	} t[] = { { "EPERM", EPERM },	{ "EINVAL", EINVAL }, { "EIO", EIO },
		  { "ENOSPC", ENOSPC }, { "ENOTSUP", ENOTSUP }, { "ESHUTDOWN", ESHUTDOWN } };

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strcmp(s, t[i].name) == 0)
			return t[i].err;
	fprintf(stderr, "nbd-ops: unknown errno name %s\n", s);
	exit(2);
}

static int flag_value(const char *name)
{
	if (strcmp(name, "can_flush") == 0)
		return nbd_can_flush(nbd);
	if (strcmp(name, "can_fua") == 0)
		return nbd_can_fua(nbd);
	if (strcmp(name, "can_trim") == 0)
		return nbd_can_trim(nbd);
	if (strcmp(name, "can_zero") == 0)
		return nbd_can_zero(nbd);
	if (strcmp(name, "can_multi_conn") == 0)
		return nbd_can_multi_conn(nbd);
	if (strcmp(name, "is_read_only") == 0)
		return nbd_is_read_only(nbd);
	fprintf(stderr, "nbd-ops: unknown flag %s\n", name);
	exit(2);
}

/* A pattern is one byte in hex ("a1"): anything else is a mistake in the
 * test, not a value to truncate. */
static int pattern_byte(const char *s)
{
	char *end;
	long v = strtol(s, &end, 16);

	if (!*s || *end || v < 0 || v > 255) {
		fprintf(stderr, "nbd-ops: pattern '%s' is not one byte in hex (00..ff)\n", s);
		exit(2);
	}
	return (int)v;
}

/* Returns 0 on success, or the errno of the failed NBD call (>0), or -1 for
 * a check that did not hold. */
static int run_op(char *op)
{
	char *save, *name = strtok_r(op, ":", &save);
	char *a1 = strtok_r(NULL, ":", &save);
	char *a2 = strtok_r(NULL, ":", &save);
	char *a3 = strtok_r(NULL, ":", &save);
	uint64_t off = a1 ? strtoull(a1, NULL, 0) : 0;
	uint64_t len = a2 ? strtoull(a2, NULL, 0) : 0;
	int byte = a3 ? pattern_byte(a3) : 0;
	char *buf;
	int r;

	if (!name)
		return -1;
	if (strcmp(name, "size") == 0) {
		int64_t sz = nbd_get_size(nbd);

		if (sz != (int64_t)off) {
			fprintf(stderr, "nbd-ops: size is %" PRId64 ", expected %" PRIu64 "\n", sz,
				off);
			return -1;
		}
		return 0;
	}
	if (strcmp(name, "flag") == 0) {
		int got = flag_value(a1), want = atoi(a2);

		if (got != want) {
			fprintf(stderr, "nbd-ops: %s is %d, expected %d\n", a1, got, want);
			return -1;
		}
		return 0;
	}
	if (strcmp(name, "nostrict") == 0)
		return nbd_set_strict_mode(nbd, 0) == 0 ? 0 : nbd_get_errno();
	if (strcmp(name, "flush") == 0)
		return nbd_flush(nbd, 0) == 0 ? 0 : nbd_get_errno();
	if (strcmp(name, "trim") == 0)
		return nbd_trim(nbd, len, off, 0) == 0 ? 0 : nbd_get_errno();
	if (strcmp(name, "zero") == 0 || strcmp(name, "zerofua") == 0)
		return nbd_zero(nbd, len, off, name[4] ? LIBNBD_CMD_FLAG_FUA : 0) == 0 ?
			       0 :
			       nbd_get_errno();

	buf = malloc(len ? len : 1);
	if (!buf)
		return ENOMEM;
	if (strcmp(name, "write") == 0 || strcmp(name, "writefua") == 0) {
		memset(buf, byte, len);
		r = nbd_pwrite(nbd, buf, len, off, name[5] ? LIBNBD_CMD_FLAG_FUA : 0);
		free(buf);
		return r == 0 ? 0 : nbd_get_errno();
	}
	if (strcmp(name, "read") == 0) {
		r = nbd_pread(nbd, buf, len, off, 0);
		if (r != 0) {
			free(buf);
			return nbd_get_errno();
		}
		for (uint64_t i = 0; i < len; i++) {
			if ((unsigned char)buf[i] != byte) {
				fprintf(stderr,
					"nbd-ops: byte %" PRIu64 " is 0x%02x, expected 0x%02x\n",
					off + i, (unsigned char)buf[i], byte);
				free(buf);
				return -1;
			}
		}
		free(buf);
		return 0;
	}
	free(buf);
	fprintf(stderr, "nbd-ops: unknown operation %s\n", name);
	exit(2);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: nbd-ops URI OP...\n");
		return 2;
	}
	nbd = nbd_create();
	if (!nbd || nbd_connect_uri(nbd, argv[1]) == -1) {
		fprintf(stderr, "nbd-ops: connect %s: %s\n", argv[1], nbd_get_error());
		return 1;
	}
	for (int i = 2; i < argc; i++) {
		char step[256], *op = step;
		int want_err = 0, any_err = 0, r;

		snprintf(step, sizeof(step), "%s", argv[i]);
		if (strncmp(op, "fail:", 5) == 0) {
			char *colon = strchr(op + 5, ':');

			if (!colon)
				return 2;
			*colon = '\0';
			want_err = errno_by_name(op + 5);
			op = colon + 1;
		} else if (strncmp(op, "hang:", 5) == 0) {
			any_err = 1;
			op += 5;
		}
		r = run_op(op);
		if (r < 0) {
			fprintf(stderr, "nbd-ops: step '%s' failed its check\n", argv[i]);
			return 1;
		}
		if (any_err) {
			if (r == 0) {
				fprintf(stderr, "nbd-ops: step '%s' succeeded, expected an error\n",
					argv[i]);
				return 1;
			}
			printf("step %s: failed as expected: %s\n", argv[i], strerror(r));
			continue;
		}
		if (r != want_err) {
			fprintf(stderr, "nbd-ops: step '%s': got %s, expected %s (%s)\n", argv[i],
				r ? strerror(r) : "success", want_err ? strerror(want_err) : "success",
				nbd_get_error() ? nbd_get_error() : "");
			return 1;
		}
		printf("step %s: ok\n", argv[i]);
	}
	nbd_shutdown(nbd, 0);
	nbd_close(nbd);
	return 0;
}
