/* SPDX-License-Identifier: MIT */
/*
 * rdmablk-keygen: print a new secret in the DHHC-1 format (that of nvme-cli
 * gen-dhchap-key), for rdmablk-target and rdmablk-initiator key files.
 */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"

static void usage(FILE *f)
{
	fprintf(f, "usage: rdmablk-keygen [--hmac 0|1|2|3] [--key-length 32|48|64]\n"
		   "  --hmac N        transform hash: 0 none, 1 SHA-256, 2 SHA-384, 3 SHA-512\n"
		   "                  (default 0; 1/2/3 fix the key length to 32/48/64)\n"
		   "  --key-length N  key bytes (default 32, or what --hmac fixes)\n"
		   "  --help          this text\n");
}

static int number(const char *s, unsigned int *out)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (!*s || *end || v > 64)
		return -1;
	*out = (unsigned int)v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"hmac", required_argument, NULL, 'm'},
	    {"key-length", required_argument, NULL, 'l'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	unsigned int hh = 0, len = 0;
	struct rb_auth_key k;
	char out[160];
	int c, ret;

	while ((c = getopt_long(argc, argv, "m:l:h", opts, NULL)) != -1) {
		switch (c) {
		case 'm':
			if (number(optarg, &hh) || hh > 3) {
				fprintf(stderr, "rdmablk-keygen: --hmac: want 0, 1, 2 or 3\n");
				return 2;
			}
			break;
		case 'l':
			if (number(optarg, &len) || (len != 32 && len != 48 && len != 64)) {
				fprintf(stderr,
					"rdmablk-keygen: --key-length: want 32, 48 or 64\n");
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (!len)
		len = hh ? rb_auth_hash_len(hh) : 32;
	if (hh && len != rb_auth_hash_len(hh)) {
		fprintf(stderr, "rdmablk-keygen: --hmac %u needs --key-length %u\n", hh,
			rb_auth_hash_len(hh));
		return 2;
	}
	ret = rb_auth_key_generate(hh, len, &k);
	if (!ret)
		ret = rb_auth_key_format(&k, out, sizeof(out));
	rb_auth_key_clear(&k);
	if (ret) {
		fprintf(stderr, "rdmablk-keygen: cannot make a key: %s\n", strerror(-ret));
		return 1;
	}
	puts(out);
	return 0;
}
