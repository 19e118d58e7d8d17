/* SPDX-License-Identifier: MIT */
/*
 * Fixed-size I/O buffer pool: one page-aligned slab allocated once, so it
 * can be registered as a single region with io_uring and the transport.
 * Not thread safe: each reactor owns its pool.
 */
#ifndef RB_BUFPOOL_H
#define RB_BUFPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

struct rb_bufpool {
	void *base;
	size_t slab_size; /* count * buf_size, page rounded */
	size_t buf_size;
	uint32_t count;
	uint32_t nfree;
	uint32_t *free; /* stack of free indices */
};

int rb_bufpool_init(struct rb_bufpool *p, size_t buf_size, uint32_t count);
void rb_bufpool_fini(struct rb_bufpool *p);
/* NULL when empty: callers queue the request until a buffer returns. */
void *rb_bufpool_get(struct rb_bufpool *p);
void rb_bufpool_put(struct rb_bufpool *p, void *buf);

static inline uint32_t rb_bufpool_index(const struct rb_bufpool *p, const void *buf)
{
	return (uint32_t)(((const char *)buf - (const char *)p->base) / p->buf_size);
}

static inline void *rb_bufpool_at(const struct rb_bufpool *p, uint32_t i)
{
	return (char *)p->base + (size_t)i * p->buf_size;
}

/* Cache-line aligned, for capsule and response arrays.  aligned_alloc
 * wants a size that is a multiple of the alignment (C11; ASan enforces
 * it): three 16-byte responses are not, so round up. */
static inline void *rb_alloc_lines(size_t len)
{
	return aligned_alloc(64, (len + 63) / 64 * 64);
}

#endif
