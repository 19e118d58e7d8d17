/* SPDX-License-Identifier: MIT */
/* Kernel NBD attach: device name parsing, and a family lookup that fails
 * with the documented error when the nbd module is absent. */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>

#include "log.h"
#include "nbd_netlink.h"
#include "tap.h"

static int parse(const char *s)
{
	int index = -2;

	return nbd_parse_device(s, &index) ? -100 : index;
}

int main(void)
{
	struct nbd_nl *nl = NULL;
	struct stat st;
	int ret;

	rb_log_init("test-nbd-netlink", RB_LOG_ERR);

	is_int(parse("auto"), -1, "auto: the kernel picks");
	is_int(parse("/dev/nbd0"), 0, "/dev/nbd0");
	is_int(parse("/dev/nbd15"), 15, "/dev/nbd15");
	is_int(parse("/dev/nbd1048576"), 1048576, "largest index");
	is_int(parse("/dev/nbd1048577"), -100, "index past MINORBITS");
	is_int(parse("/dev/nbd99999999999999999999"), -100, "overflowing index");
	is_int(parse("/dev/nbd"), -100, "no index");
	is_int(parse("/dev/nbd01"), -100, "leading zero");
	is_int(parse("/dev/nbd-1"), -100, "negative");
	is_int(parse("/dev/nbd1p1"), -100, "partition");
	is_int(parse("nbd1"), -100, "without /dev/");
	is_int(parse("/dev/sda"), -100, "another driver");
	is_int(parse("Auto"), -100, "auto is lower case");
	is_int(parse(""), -100, "empty");
	is_int(parse("/dev/nbd3 "), -100, "trailing blank");

	/* The family exists exactly when the driver is there (built in or
	 * loaded); a kernel that can autoload it may load it here. */
	ret = nbd_nl_open(&nl);
	if (stat("/sys/module/nbd", &st) == 0)
		is_int(ret, 0, "nbd module present: the netlink family resolves");
	else
		ok(ret == -ENOENT || ret == -EOPNOTSUPP || ret == 0,
		   "no nbd module: -ENOENT (or autoloaded), got %d", ret);
	nbd_nl_close(nl);
	return tap_done();
}
