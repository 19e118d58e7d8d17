/* SPDX-License-Identifier: MIT */
/* Config internals shared by lib/config.c (files) and lib/conf_values.c
 * (values).  Not for use outside lib/. */
#ifndef RB_CONF_PRIV_H
#define RB_CONF_PRIV_H

#include <stddef.h>
#include <stdint.h>

/* Like rb_parse_u32/rb_parse_size, but -EINVAL for syntax and -ERANGE for
 * out of range or overflow, so messages can tell them apart. */
int rb_conf_u32(const char *s, uint32_t min, uint32_t max, uint32_t *out);
int rb_conf_size(const char *s, uint64_t *out);
/* "16K" rather than 16384 in messages. */
const char *rb_conf_human(uint64_t v, char buf[24]);

/* String value checks: 0, or -EINVAL with the reason in reason[len]. */
int rb_conf_check_hostid(const char *v, char *reason, size_t len);
int rb_conf_check_path(const char *v, char *reason, size_t len);
int rb_conf_check_uri(const char *v, char *reason, size_t len);
int rb_conf_check_hostport(const char *v, char *reason, size_t len);
int rb_conf_check_nbd_device(const char *v, char *reason, size_t len);

#endif
