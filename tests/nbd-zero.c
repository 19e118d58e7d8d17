/* SPDX-License-Identifier: MIT */
/*
 * Test client for WRITE_ZEROES and TRIM with many requests in flight
 * (libnbd's asynchronous API).  Usage: nbd-zero URI MODE ARGS...
 *   burst FLAGS      a pattern over the first 32 MiB, then 32 WRITE_ZEROES at
 *                    once (8 KiB to 1 MiB, several buffers' worth), FLAGS a
 *                    comma list of nohole, fua (or none); every one must
 *                    succeed, the zeroed ranges read zeroes and the rest
 *                    keeps its pattern
 *   fast ok|ENOTSUP  16 WRITE_ZEROES with FAST_ZERO at once: all succeed
 *                    (and read zeroes), or all fail with ENOTSUP (and the
 *                    data stays)
 *   trim             16 TRIMs at once over data: all succeed
 *   torture SEED N   N random writes, zeroes (with/without NO_HOLE, FUA),
 *                    trims, flushes and reads, up to 32 in flight on
 *                    non-overlapping ranges, checked against a model of the
 *                    bytes (a trimmed sector reads either its old bytes or
 *                    zeroes), then a read of everything
 * Exit 0 when everything held, 1 with a message otherwise.
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <libnbd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SECTOR 512u
#define BLOCK 4096u
#define DEPTH 32

static struct nbd_handle *nbd;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "nbd-zero: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

/* One request in flight. */
struct op {
	bool busy, done;
	int err;
	char kind; /* w, z, t, f, r */
	uint32_t flags;
	uint64_t off;
	uint32_t len;
	uint32_t version; /* w: the version written */
	char *buf;
};

static int op_done(void *user_data, int *error)
{
	struct op *o = user_data;

	o->done = true;
	o->err = *error;
	return 1; /* retire the command */
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n);

	if (!p)
		die("out of memory");
	return p;
}

static void issue(struct op *o)
{
	nbd_completion_callback cb = { .callback = op_done, .user_data = o };
	int64_t r = -1;

	o->busy = true;
	o->done = false;
	o->err = 0;
	switch (o->kind) {
	case 'w': r = nbd_aio_pwrite(nbd, o->buf, o->len, o->off, cb, o->flags); break;
	case 'r': r = nbd_aio_pread(nbd, o->buf, o->len, o->off, cb, 0); break;
	case 'z': r = nbd_aio_zero(nbd, o->len, o->off, cb, o->flags); break;
	case 't': r = nbd_aio_trim(nbd, o->len, o->off, cb, 0); break;
	case 'f': r = nbd_aio_flush(nbd, cb, 0); break;
	}
	if (r < 0)
		die("issuing %c at %" PRIu64 " length %u: %s", o->kind, o->off, o->len,
		    nbd_get_error());
}

/* Wait until at least one issued request completed. */
static void poll_some(struct op *ops, int n)
{
	for (;;) {
		for (int i = 0; i < n; i++)
			if (ops[i].busy && ops[i].done)
				return;
		if (nbd_poll(nbd, -1) < 0)
			die("nbd_poll: %s", nbd_get_error());
	}
}

static void sync_pwrite(const void *buf, size_t len, uint64_t off)
{
	if (nbd_pwrite(nbd, buf, len, off, 0) < 0)
		die("write at %" PRIu64 ": %s", off, nbd_get_error());
}

static void sync_pread(void *buf, size_t len, uint64_t off)
{
	if (nbd_pread(nbd, buf, len, off, 0) < 0)
		die("read at %" PRIu64 ": %s", off, nbd_get_error());
}

static uint32_t parse_flags(const char *s)
{
	uint32_t f = 0;
	char *copy = strdup(s), *save, *t;

	for (t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (strcmp(t, "nohole") == 0)
			f |= LIBNBD_CMD_FLAG_NO_HOLE;
		else if (strcmp(t, "fua") == 0)
			f |= LIBNBD_CMD_FLAG_FUA;
		else if (strcmp(t, "none") != 0)
			die("unknown flag %s", t);
	}
	free(copy);
	return f;
}

/* Byte i of the burst pattern. */
static uint8_t pat(uint64_t i)
{
	return (uint8_t)(0x5a ^ (i * 131) ^ (i >> 12));
}

#define BURST_AREA (32u << 20)
#define BURST_N 32

/* Range i: inside its own 1 MiB, 8 KiB to 1 MiB - 8 KiB long. */
static void burst_range(int i, uint64_t *off, uint32_t *len)
{
	static const uint32_t lens[] = { 8192, 8192, 65536, 8192, 262144, 8192, 528384, 1040384 };

	*len = lens[i % 8];
	*off = (uint64_t)i * (1u << 20) + (i % 2 ? 4096 : 0);
}

static void fill_pattern(uint8_t *area, uint64_t size)
{
	for (uint64_t i = 0; i < size; i++)
		area[i] = pat(i);
	for (uint64_t off = 0; off < size; off += 1u << 20)
		sync_pwrite(area + off, 1u << 20, off);
}

static void verify_area(const uint8_t *want, uint64_t size, const char *what)
{
	uint8_t *got = xmalloc(1u << 20);

	for (uint64_t off = 0; off < size; off += 1u << 20) {
		sync_pread(got, 1u << 20, off);
		for (uint32_t i = 0; i < 1u << 20; i++)
			if (got[i] != want[off + i])
				die("%s: byte %" PRIu64 " is %#x, expected %#x", what, off + i,
				    got[i], want[off + i]);
	}
	free(got);
}

static int zero_burst(uint32_t flags, int n, bool expect_enotsup, const char *what)
{
	struct op ops[BURST_N] = { 0 };
	uint8_t *model = xmalloc(BURST_AREA);
	int left = n, failed = 0;

	if (nbd_get_size(nbd) < BURST_AREA)
		die("the export must have at least %u bytes", BURST_AREA);
	fill_pattern(model, BURST_AREA);
	for (int i = 0; i < n; i++) {
		ops[i].kind = 'z';
		ops[i].flags = flags;
		burst_range(i, &ops[i].off, &ops[i].len);
		issue(&ops[i]);
	}
	while (left) {
		poll_some(ops, n);
		for (int i = 0; i < n; i++) {
			if (!ops[i].busy || !ops[i].done)
				continue;
			ops[i].busy = false;
			left--;
			if (expect_enotsup) {
				if (ops[i].err != ENOTSUP) {
					fprintf(stderr, "nbd-zero: %s: zero %d: %s, expected ENOTSUP\n",
						what, i, strerror(ops[i].err));
					failed++;
				}
				continue;
			}
			if (ops[i].err) {
				fprintf(stderr,
					"nbd-zero: %s: zero %d (offset %" PRIu64 " length %u): %s\n",
					what, i, ops[i].off, ops[i].len, strerror(ops[i].err));
				failed++;
				continue;
			}
			memset(model + ops[i].off, 0, ops[i].len);
		}
	}
	if (failed)
		die("%s: %d of %d WRITE_ZEROES failed", what, failed, n);
	verify_area(model, BURST_AREA, what);
	free(model);
	printf("%s: %d WRITE_ZEROES at once: %s\n", what, n,
	       expect_enotsup ? "all failed with ENOTSUP, data unchanged" : "ok");
	return 0;
}

static int trim_burst(void)
{
	struct op ops[16] = { 0 };
	uint8_t *model = xmalloc(BURST_AREA);
	int left = 16;

	fill_pattern(model, BURST_AREA);
	for (int i = 0; i < 16; i++) {
		ops[i].kind = 't';
		burst_range(i, &ops[i].off, &ops[i].len);
		issue(&ops[i]);
	}
	while (left) {
		poll_some(ops, 16);
		for (int i = 0; i < 16; i++) {
			if (!ops[i].busy || !ops[i].done)
				continue;
			ops[i].busy = false;
			left--;
			if (ops[i].err)
				die("trim %d (offset %" PRIu64 "): %s", i, ops[i].off,
				    strerror(ops[i].err));
		}
	}
	free(model);
	printf("16 TRIMs at once: ok\n");
	return 0;
}

/* ---- torture: a model of the export's sectors ---------------------------- */

static uint64_t rng;

static uint64_t next_rand(void)
{
	/* splitmix64: fixed by the seed, the same on every machine */
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

struct sector_model {
	uint32_t version; /* 0: zeroes */
	uint32_t old; /* maybe_old: the version a trim may have left */
	bool trimmed; /* reads either `old` or zeroes */
	bool busy; /* a request in flight covers it */
};

static struct sector_model *sm;

static uint8_t content(uint32_t version, uint64_t pos)
{
	if (!version)
		return 0;
	return (uint8_t)(version * 0x9d ^ pos ^ (pos >> 9) ^ (pos >> 17)) | 1; /* never 0 */
}

static void fill_write(char *buf, uint32_t version, uint64_t off, uint32_t len)
{
	for (uint32_t i = 0; i < len; i++)
		buf[i] = (char)content(version, off + i);
}

/* A read of [off, off+len) against the model (no write in flight on it). */
static void check_read(const char *buf, uint64_t off, uint32_t len, uint64_t opno)
{
	for (uint32_t s = 0; s < len / SECTOR; s++) {
		uint64_t pos = off + (uint64_t)s * SECTOR;
		struct sector_model *m = &sm[pos / SECTOR];
		const char *p = buf + (size_t)s * SECTOR;
		bool as_version = true, as_zero = true, as_old = true;

		for (uint32_t i = 0; i < SECTOR; i++) {
			uint8_t b = (uint8_t)p[i];

			as_version &= b == content(m->version, pos + i);
			as_zero &= b == 0;
			as_old &= b == content(m->old, pos + i);
		}
		if (m->trimmed) {
			if (!as_zero && !as_old)
				die("op %" PRIu64 ": trimmed sector at %" PRIu64
				    " is neither zeroes nor its old data (version %u)",
				    opno, pos, m->old);
		} else if (!as_version) {
			die("op %" PRIu64 ": sector at %" PRIu64 " does not hold version %u%s",
			    opno, pos, m->version, m->version ? "" : " (zeroes)");
		}
	}
}

static void mark(uint64_t off, uint32_t len, bool busy)
{
	for (uint64_t s = off / SECTOR; s < (off + len) / SECTOR; s++)
		sm[s].busy = busy;
}

static bool is_free(uint64_t off, uint32_t len)
{
	for (uint64_t s = off / SECTOR; s < (off + len) / SECTOR; s++)
		if (sm[s].busy)
			return false;
	return true;
}

/* The model after a request on [off, len) succeeded. */
static void apply(const struct op *o)
{
	for (uint64_t s = o->off / SECTOR; s < (o->off + o->len) / SECTOR; s++) {
		struct sector_model *m = &sm[s];

		switch (o->kind) {
		case 'w':
		case 'z':
			m->version = o->kind == 'w' ? o->version : 0;
			m->trimmed = false;
			break;
		case 't':
			if (!m->trimmed)
				m->old = m->version;
			m->trimmed = true;
			m->version = 0;
			break;
		}
	}
}

static int torture(uint64_t seed, uint64_t count)
{
	int64_t size = nbd_get_size(nbd);
	uint64_t nsec, issued = 0, completed = 0, counts[128] = { 0 };
	uint32_t version = 1;
	struct op ops[DEPTH] = { 0 };
	char *all;

	if (size < (int64_t)(4u << 20))
		die("the export is too small");
	if (size > (int64_t)(64u << 20))
		size = 64u << 20;
	nsec = (uint64_t)size / SECTOR;
	printf("torture: seed %" PRIu64 ", %" PRIu64 " operations, depth %d, %" PRId64
	       " bytes\n",
	       seed, count, DEPTH, size);
	rng = seed;
	sm = calloc(nsec, sizeof(*sm));
	if (!sm)
		die("out of memory");
	for (int i = 0; i < DEPTH; i++)
		ops[i].buf = xmalloc(1u << 20);
	/* A known start: all of it zeroed, which is a WRITE_ZEROES too. */
	if (nbd_zero(nbd, (uint64_t)size, 0, 0) < 0)
		die("zeroing the export: %s", nbd_get_error());

	while (completed < count) {
		for (int i = 0; i < DEPTH && issued < count; i++) {
			struct op *o = &ops[i];
			uint64_t r = next_rand();
			uint32_t nblk;
			int tries;

			if (o->busy)
				continue;
			o->flags = 0;
			switch (r % 16) {
			case 0: o->kind = 'f'; break;
			case 1:
			case 2: o->kind = 't'; break;
			case 3:
			case 4:
			case 5:
			case 6: o->kind = 'z'; break;
			case 7:
			case 8:
			case 9:
			case 10: o->kind = 'r'; break;
			default: o->kind = 'w'; break;
			}
			if (o->kind == 'z' && (r >> 8) % 2)
				o->flags |= LIBNBD_CMD_FLAG_NO_HOLE;
			if ((o->kind == 'z' || o->kind == 'w') && (r >> 9) % 4 == 0)
				o->flags |= LIBNBD_CMD_FLAG_FUA;
			if (o->kind == 'f') {
				o->off = 0;
				o->len = 0;
			} else {
				/* 512 B to 256 KiB (1 MiB for zeroes), mostly small. */
				for (tries = 0; tries < 8; tries++) {
					uint32_t maxs = o->kind == 'z' ? 2048 : 512;

					nblk = 1 + (uint32_t)(next_rand() % ((r >> 10) % 4 ? 32 : maxs));
					o->len = nblk * SECTOR;
					o->off = next_rand() % (nsec - nblk + 1) * SECTOR;
					if (is_free(o->off, o->len))
						break;
				}
				if (tries == 8)
					break; /* crowded: wait for completions */
				mark(o->off, o->len, true);
			}
			if (o->kind == 'w') {
				o->version = ++version;
				fill_write(o->buf, o->version, o->off, o->len);
			}
			counts[(int)o->kind]++;
			issue(o);
			issued++;
		}
		poll_some(ops, DEPTH);
		for (int i = 0; i < DEPTH; i++) {
			struct op *o = &ops[i];

			if (!o->busy || !o->done)
				continue;
			o->busy = false;
			completed++;
			if (o->err)
				die("op %" PRIu64 ": %c at %" PRIu64 " length %u flags %#x failed: %s",
				    completed, o->kind, o->off, o->len, o->flags, strerror(o->err));
			if (o->kind == 'r')
				check_read(o->buf, o->off, o->len, completed);
			apply(o);
			if (o->len)
				mark(o->off, o->len, false);
		}
	}
	all = xmalloc(1u << 20);
	for (uint64_t off = 0; off < (uint64_t)size; off += 1u << 20) {
		uint32_t len = (uint64_t)size - off < (1u << 20) ? (uint32_t)(size - off) : 1u << 20;

		sync_pread(all, len, off);
		check_read(all, off, len, completed);
	}
	free(all);
	for (int i = 0; i < DEPTH; i++)
		free(ops[i].buf);
	free(sm);
	printf("torture: ok (writes %" PRIu64 ", zeroes %" PRIu64 ", trims %" PRIu64
	       ", flushes %" PRIu64 ", reads %" PRIu64 ")\n",
	       counts['w'], counts['z'], counts['t'], counts['f'], counts['r']);
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode;
	int ret;

	if (argc < 3)
		die("usage: nbd-zero URI burst FLAGS | fast ok|ENOTSUP | trim | torture SEED N");
	nbd = nbd_create();
	if (!nbd)
		die("nbd_create: %s", nbd_get_error());
	if (nbd_connect_uri(nbd, argv[1]) < 0)
		die("connect %s: %s", argv[1], nbd_get_error());
	mode = argv[2];
	if (strcmp(mode, "burst") == 0 && argc == 4) {
		ret = zero_burst(parse_flags(argv[3]), BURST_N, false, argv[3]);
	} else if (strcmp(mode, "fast") == 0 && argc == 4) {
		if (nbd_can_fast_zero(nbd) != 1)
			die("the server does not advertise FAST_ZERO");
		ret = zero_burst(LIBNBD_CMD_FLAG_FAST_ZERO, 16, strcmp(argv[3], "ENOTSUP") == 0,
				 "fast-zero");
	} else if (strcmp(mode, "trim") == 0 && argc == 3) {
		ret = trim_burst();
	} else if (strcmp(mode, "torture") == 0 && argc == 5) {
		ret = torture(strtoull(argv[3], NULL, 0), strtoull(argv[4], NULL, 0));
	} else {
		die("bad arguments for mode %s", mode);
	}
	if (nbd_shutdown(nbd, 0) < 0)
		die("shutdown: %s", nbd_get_error());
	nbd_close(nbd);
	return ret;
}
