/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "bufpool.h"
#include "checked.h"

int rb_bufpool_init(struct rb_bufpool *p, size_t buf_size, uint32_t count)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t size;

	memset(p, 0, sizeof(*p));
	if (!buf_size || !count || buf_size % page)
		return -EINVAL;
	if (rb_mul_overflow(buf_size, (size_t)count, &size))
		return -EOVERFLOW;
	/* mmap: page aligned, zeroed, and returned to the OS on fini. */
	p->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p->base == MAP_FAILED) {
		p->base = NULL;
		return -errno;
	}
	p->free = calloc(count, sizeof(*p->free));
	if (!p->free)
		goto out_unmap;
	p->slab_size = size;
	p->buf_size = buf_size;
	p->count = count;
	/* Hand out low indices first: keeps the hot set small. */
	for (uint32_t i = 0; i < count; i++)
		p->free[i] = count - 1 - i;
	p->nfree = count;
	return 0;

out_unmap:
	munmap(p->base, size);
	p->base = NULL;
	return -ENOMEM;
}

void rb_bufpool_fini(struct rb_bufpool *p)
{
	if (p->base)
		munmap(p->base, p->slab_size);
	free(p->free);
	memset(p, 0, sizeof(*p));
}

void *rb_bufpool_get(struct rb_bufpool *p)
{
	if (!p->nfree)
		return NULL;
	return rb_bufpool_at(p, p->free[--p->nfree]);
}

void rb_bufpool_put(struct rb_bufpool *p, void *buf)
{
	uint32_t i = rb_bufpool_index(p, buf);

	assert(i < p->count && rb_bufpool_at(p, i) == buf);
	assert(p->nfree < p->count);
	p->free[p->nfree++] = i;
}
