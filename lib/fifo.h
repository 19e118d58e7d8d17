/* SPDX-License-Identifier: MIT */
/*
 * Singly linked FIFO of any struct with a `next` pointer: head, tail and a
 * count.  Zero-initialized is empty, so a calloc'd owner needs no init.
 * Macros rather than an embedded node so that callers keep their element
 * type (no container_of at every pop).  Not thread safe: the owner locks.
 *
 *	RB_FIFO_DECLARE(wr_fifo, struct wr);	// struct wr_fifo
 *	rb_fifo_push(&q, w);  w = rb_fifo_pop(&q);
 */
#ifndef RB_FIFO_H
#define RB_FIFO_H

#include <stddef.h>

#define RB_FIFO_DECLARE(name, type)                                                                \
	struct name {                                                                              \
		type *head, *tail;                                                                 \
		unsigned int n;                                                                    \
	}

#define rb_fifo_empty(q) ((q)->head == NULL)

/* Append e at the tail. */
#define rb_fifo_push(q, e)                                                                         \
	do {                                                                                       \
		__typeof__((q)->head) fifo_e_ = (e);                                               \
		fifo_e_->next = NULL;                                                              \
		if ((q)->tail)                                                                     \
			(q)->tail->next = fifo_e_;                                                 \
		else                                                                               \
			(q)->head = fifo_e_;                                                       \
		(q)->tail = fifo_e_;                                                               \
		(q)->n++;                                                                          \
	} while (0)

/* Take e out; prev is the element before it (NULL: e is the head). */
#define rb_fifo_unlink(q, prev, e)                                                                 \
	do {                                                                                       \
		__typeof__((q)->head) fifo_p_ = (prev), fifo_e_ = (e);                             \
		if (fifo_p_)                                                                       \
			fifo_p_->next = fifo_e_->next;                                             \
		else                                                                               \
			(q)->head = fifo_e_->next;                                                 \
		if ((q)->tail == fifo_e_)                                                          \
			(q)->tail = fifo_p_;                                                       \
		(q)->n--;                                                                          \
		fifo_e_->next = NULL;                                                              \
	} while (0)

/* The head, taken out; NULL when empty. */
#define rb_fifo_pop(q)                                                                             \
	({                                                                                         \
		__typeof__((q)->head) fifo_h_ = (q)->head;                                         \
		if (fifo_h_)                                                                       \
			rb_fifo_unlink(q, NULL, fifo_h_);                                          \
		fifo_h_;                                                                           \
	})

/* Move every element of src, in order, to the tail of dst. */
#define rb_fifo_splice(dst, src)                                                                   \
	do {                                                                                       \
		if ((src)->head) {                                                                 \
			if ((dst)->tail)                                                           \
				(dst)->tail->next = (src)->head;                                   \
			else                                                                       \
				(dst)->head = (src)->head;                                         \
			(dst)->tail = (src)->tail;                                                 \
			(dst)->n += (src)->n;                                                      \
			(src)->head = (src)->tail = NULL;                                          \
			(src)->n = 0;                                                              \
		}                                                                                  \
	} while (0)

#endif
