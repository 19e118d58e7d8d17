/* SPDX-License-Identifier: MIT */
/* Minimal test helpers: TAP-style lines on stdout, exit status for automake. */
#ifndef RB_TAP_H
#define RB_TAP_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int tap_n, tap_failed;

#define ok(cond, ...)                                                                              \
	do {                                                                                       \
		int ok_c_ = !!(cond);                                                              \
		printf("%s %d - ", ok_c_ ? "ok" : "not ok", ++tap_n);                              \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
		if (!ok_c_) {                                                                      \
			tap_failed++;                                                              \
			printf("#   failed at %s:%d: %s\n", __FILE__, __LINE__, #cond);             \
		}                                                                                  \
	} while (0)

#define is_int(got, want, ...)                                                                     \
	do {                                                                                       \
		long long is_g_ = (long long)(got), is_w_ = (long long)(want);                     \
		ok(is_g_ == is_w_, __VA_ARGS__);                                                   \
		if (is_g_ != is_w_)                                                                \
			printf("#   got %lld, want %lld\n", is_g_, is_w_);                             \
	} while (0)

#define is_str(got, want, ...)                                                                     \
	do {                                                                                       \
		const char *is_g_ = (got), *is_w_ = (want);                                        \
		int is_eq_ = is_g_ && is_w_ && strcmp(is_g_, is_w_) == 0;                          \
		ok(is_eq_, __VA_ARGS__);                                                           \
		if (!is_eq_)                                                                       \
			printf("#   got \"%s\", want \"%s\"\n", is_g_ ? is_g_ : "(null)",           \
			       is_w_ ? is_w_ : "(null)");                                          \
	} while (0)

static inline int tap_done(void)
{
	printf("1..%d\n", tap_n);
	if (tap_failed)
		printf("# %d of %d failed\n", tap_failed, tap_n);
	return tap_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
