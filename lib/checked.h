/* SPDX-License-Identifier: MIT */
/* Overflow-checked arithmetic: returns true on overflow (like nbdkit's). */
#ifndef RB_CHECKED_H
#define RB_CHECKED_H

#include <stdbool.h>
#include <stdint.h>

#define rb_add_overflow(a, b, r) __builtin_add_overflow((a), (b), (r))
#define rb_mul_overflow(a, b, r) __builtin_mul_overflow((a), (b), (r))

/* true iff [off, off+len) lies within [0, size) without overflow. */
static inline bool rb_range_ok(uint64_t off, uint64_t len, uint64_t size)
{
	uint64_t end;

	if (rb_add_overflow(off, len, &end))
		return false;
	return end <= size;
}

/* true iff [addr, addr+len) lies within [base, base+blen). */
static inline bool rb_region_ok(uint64_t addr, uint64_t len, uint64_t base, uint64_t blen)
{
	uint64_t end, bend;

	if (rb_add_overflow(addr, len, &end) || rb_add_overflow(base, blen, &bend))
		return false;
	return addr >= base && end <= bend;
}

static inline bool rb_is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

#define RB_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define rb_container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

#endif
