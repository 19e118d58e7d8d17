/* SPDX-License-Identifier: MIT */
/* Authentication exchanges run in memory, queue proofs, DHHC-1 secrets, log escaping. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "log.h"
#include "tap.h"

#define HOST "nqn.2024-01.io.rdmablk:host-good"
#define EXPORT "disk0"
#define SESSION 0x1122334455667788ull

static struct rb_auth_key hkey, tkey, other;

struct run {
	struct rb_auth_params hp, tp; /* host, target */
	struct rb_auth_host *h;
	struct rb_auth_tgt *t;
	union rb_auth_host_msg neg, reply;
	union rb_auth_tgt_msg chal, succ;
	struct rb_auth_skey hsk, tsk;
	enum rb_status st_neg, st_reply;
	int host_chal, host_succ;
};

static void setup(struct run *r, const struct rb_auth_key *host_has,
		  const struct rb_auth_key *tgt_has, const struct rb_auth_key *host_tkey,
		  const struct rb_auth_key *tgt_tkey)
{
	memset(r, 0, sizeof(*r));
	r->hp = (struct rb_auth_params){.hostid = HOST,
					.target_id = EXPORT,
					.session = SESSION,
					.host_key = host_has,
					.target_key = host_tkey,
					.hash_mask = RB_AUTH_HASH_MASK_ALL,
					.dh_mask = RB_AUTH_DH_MASK_ALL};
	r->tp = r->hp;
	r->tp.host_key = tgt_has;
	r->tp.target_key = tgt_tkey;
	r->tp.now_ns = 1000;
	/* ffdhe2048 unless a test asks for more: the bigger groups cost time. */
	r->tp.dh_mask = 1u << RB_AUTH_DH_NULL | 1u << RB_AUTH_DH_FFDHE2048;
}

/* The whole exchange; stops at the first failure. */
static void run(struct run *r)
{
	if (rb_auth_host_new(&r->hp, &r->h) || rb_auth_tgt_new(&r->tp, &r->t))
		abort();
	r->st_neg = r->st_reply = RB_S_MAX;
	r->host_chal = r->host_succ = 1;
	if (rb_auth_host_negotiate(r->h, &r->neg))
		abort();
	r->st_neg = rb_auth_tgt_step(r->t, 2000, &r->neg, &r->chal);
	if (r->st_neg)
		return;
	r->host_chal = rb_auth_host_challenge(r->h, &r->chal, &r->reply);
	if (r->host_chal)
		return;
	r->st_reply = rb_auth_tgt_step(r->t, 3000, &r->reply, &r->succ);
	if (r->st_reply)
		return;
	r->host_succ = rb_auth_host_success(r->h, &r->succ, &r->hsk);
	if (!r->host_succ && rb_auth_tgt_session_key(r->t, &r->tsk))
		abort();
}

static void done(struct run *r)
{
	rb_auth_host_free(r->h);
	rb_auth_tgt_free(r->t);
}

static void test_success(void)
{
	static const char *const hn[] = {"", "sha256", "sha384", "sha512"};

	for (unsigned int hash = 1; hash <= 3; hash++)
		for (unsigned int dh = 0; dh <= 5; dh += (dh == 0 ? 1 : 4))
			for (int bidi = 0; bidi <= 1; bidi++) {
				struct run r;

				setup(&r, &hkey, &hkey, bidi ? &tkey : NULL, &tkey);
				r.tp.hash_mask = (uint8_t)(1u << hash);
				r.tp.dh_mask = (uint8_t)(1u << dh);
				run(&r);
				ok(r.st_neg == 0 && r.host_chal == 0 && r.st_reply == 0 &&
				       r.host_succ == 0 && rb_auth_tgt_done(r.t),
				   "%s %s %s: authenticated", hn[hash], rb_auth_dhgroup_name(dh),
				   bidi ? "bidirectional" : "unidirectional");
				ok(r.chal.hdr.hash == hash && r.chal.hdr.dhgroup == dh &&
				       r.hsk.len == rb_auth_hash_len(hash) &&
				       r.hsk.len == r.tsk.len &&
				       memcmp(r.hsk.key, r.tsk.key, r.hsk.len) == 0,
				   "  chosen as required; both sides derive the same session key");
				ok(!!(r.succ.hdr.flags & RB_AUTH_F_BIDI) == bidi,
				   "  target proof present only when asked for");
				done(&r);
			}
}

static void test_strongest_and_transform(void)
{
	struct run r, r2;
	struct rb_auth_key h1;

	/* Both sides accept everything: sha512, and the strongest group. */
	setup(&r, &hkey, &hkey, NULL, NULL);
	r.tp.dh_mask = RB_AUTH_DH_MASK_ALL;
	r.hp.dh_mask = 1u << RB_AUTH_DH_NULL | 1u << RB_AUTH_DH_FFDHE2048;
	run(&r);
	ok(r.host_succ == 0 && r.chal.hdr.hash == RB_AUTH_HASH_SHA512 &&
	       r.chal.hdr.dhgroup == RB_AUTH_DH_FFDHE2048,
	   "the strongest common hash and group are chosen");
	/* Two runs with the same secret: fresh nonces, fresh session keys. */
	setup(&r2, &hkey, &hkey, NULL, NULL);
	r2.hp.dh_mask = r.hp.dh_mask;
	run(&r2);
	ok(memcmp(r.chal.chal.nonce, r2.chal.chal.nonce, 32) != 0 &&
	       memcmp(r.hsk.key, r2.hsk.key, r.hsk.len) != 0,
	   "each exchange has a fresh nonce and session key");
	done(&r2);
	done(&r);
	/* A transformed key (hh 01) works end to end. */
	if (rb_auth_key_generate(RB_AUTH_HASH_SHA256, 32, &h1))
		abort();
	setup(&r, &h1, &h1, NULL, NULL);
	run(&r);
	ok(r.host_succ == 0, "a key with transform hash 01 authenticates");
	done(&r);
}

static void test_wrong_secrets(void)
{
	struct run r;

	setup(&r, &other, &hkey, NULL, NULL);
	run(&r);
	is_int(r.st_reply, RB_S_AUTH_FAILED, "wrong host secret: AUTH_FAILED");
	ok(!rb_auth_tgt_done(r.t) && r.succ.hdr.type == 0,
	   "  and no SUCCESS, no target proof written");
	done(&r);

	setup(&r, &hkey, NULL, NULL, NULL);
	run(&r);
	is_int(r.st_reply, RB_S_AUTH_FAILED, "host without a secret on the target: AUTH_FAILED");
	done(&r);

	setup(&r, &hkey, &hkey, &tkey, &other);
	run(&r);
	ok(r.st_reply == 0 && r.host_succ == -EACCES,
	   "wrong target secret: the host refuses the target (%s)", rb_auth_host_why(r.h));
	done(&r);

	setup(&r, &hkey, &hkey, &tkey, NULL);
	run(&r);
	is_int(r.st_neg, RB_S_AUTH_BIDI_UNAVAILABLE,
	       "target proof asked of a target without secret: AUTH_BIDI_UNAVAILABLE");
	done(&r);
}

static void test_replay(void)
{
	struct run a, b;
	union rb_auth_tgt_msg out;

	/* Record an exchange, replay its REPLY to a new one. */
	setup(&a, &hkey, &hkey, &tkey, &tkey);
	a.tp.dh_mask = a.hp.dh_mask = 1u << RB_AUTH_DH_NULL;
	run(&a);
	ok(a.host_succ == 0, "recorded exchange succeeded");
	setup(&b, &hkey, &hkey, &tkey, &tkey);
	b.tp.dh_mask = 1u << RB_AUTH_DH_NULL;
	if (rb_auth_tgt_new(&b.tp, &b.t))
		abort();
	is_int(rb_auth_tgt_step(b.t, 2000, &a.neg, &out), 0, "replayed NEGOTIATE is answered");
	is_int(rb_auth_tgt_step(b.t, 3000, &a.reply, &out), RB_S_AUTH_FAILED,
	       "replayed REPLY fails (new target nonce)");
	rb_auth_tgt_free(b.t);
	done(&a);
}

/* Reflection in the simple form: one exchange, target and host secret equal. */
static void test_reflection(void)
{
	struct run r;
	union rb_auth_tgt_msg fake;
	struct rb_auth_tgt *t2;
	union rb_auth_tgt_msg out;
	union rb_auth_host_msg fake_reply;

	setup(&r, &hkey, &hkey, &hkey, &hkey); /* target secret = host secret */
	run(&r);
	ok(r.host_succ == 0, "exchange with equal secrets succeeds");
	done(&r);

	/* Host proof reflected as the target's proof. */
	setup(&r, &hkey, &hkey, &hkey, &hkey);
	if (rb_auth_host_new(&r.hp, &r.h) || rb_auth_tgt_new(&r.tp, &r.t))
		abort();
	rb_auth_host_negotiate(r.h, &r.neg);
	rb_auth_tgt_step(r.t, 2000, &r.neg, &r.chal);
	rb_auth_host_challenge(r.h, &r.chal, &r.reply);
	memset(&fake, 0, sizeof(fake));
	fake.hdr.type = RB_AUTH_SUCCESS;
	fake.hdr.hash = r.chal.hdr.hash;
	fake.hdr.dhgroup = r.chal.hdr.dhgroup;
	fake.hdr.flags = RB_AUTH_F_BIDI;
	memcpy(fake.succ.proof, r.reply.reply.proof, sizeof(fake.succ.proof));
	is_int(rb_auth_host_success(r.h, &fake, &r.hsk), -EACCES,
	       "host proof reflected as target proof: refused");
	/* Target proof reflected as the host's: a SUCCESS from a second
	 * target answering the same REPLY gives its proof; offered to t2. */
	if (rb_auth_tgt_new(&r.tp, &t2))
		abort();
	rb_auth_tgt_step(r.t, 3000, &r.reply, &r.succ); /* r.t: DONE, proof in r.succ */
	rb_auth_tgt_step(t2, 2000, &r.neg, &out);
	fake_reply = r.reply;
	memcpy(fake_reply.reply.proof, r.succ.succ.proof, sizeof(fake_reply.reply.proof));
	is_int(rb_auth_tgt_step(t2, 3000, &fake_reply, &out), RB_S_AUTH_FAILED,
	       "target proof reflected as host proof: refused");
	rb_auth_tgt_free(t2);
	done(&r);
}

static void test_downgrade(void)
{
	struct run r;

	setup(&r, &hkey, &hkey, NULL, NULL);
	r.tp.hash_mask = 1u << RB_AUTH_HASH_SHA512;
	r.hp.hash_mask = 1u << RB_AUTH_HASH_SHA256;
	run(&r);
	is_int(r.st_neg, RB_S_AUTH_HASH_UNUSABLE, "weaker hash than required: AUTH_HASH_UNUSABLE");
	done(&r);

	setup(&r, &hkey, &hkey, NULL, NULL);
	r.tp.dh_mask = 1u << RB_AUTH_DH_FFDHE3072;
	r.hp.dh_mask = 1u << RB_AUTH_DH_NULL | 1u << RB_AUTH_DH_FFDHE2048;
	run(&r);
	is_int(r.st_neg, RB_S_AUTH_DHGROUP_UNUSABLE,
	       "no DH when the target requires it: AUTH_DHGROUP_UNUSABLE");
	done(&r);

	/* A man in the middle strips the host's offer to the weakest: the
	 * target (accepting it) chooses sha256 and no DH; the proofs fail. */
	setup(&r, &hkey, &hkey, &tkey, &tkey);
	if (rb_auth_host_new(&r.hp, &r.h) || rb_auth_tgt_new(&r.tp, &r.t))
		abort();
	rb_auth_host_negotiate(r.h, &r.neg);
	r.neg.neg.hash_mask = 1u << RB_AUTH_HASH_SHA256;
	r.neg.neg.dh_mask = 1u << RB_AUTH_DH_NULL;
	is_int(rb_auth_tgt_step(r.t, 2000, &r.neg, &r.chal), 0, "edited NEGOTIATE answered");
	is_int(rb_auth_host_challenge(r.h, &r.chal, &r.reply), 0, "host answers (offered both)");
	is_int(rb_auth_tgt_step(r.t, 3000, &r.reply, &r.succ), RB_S_AUTH_FAILED,
	       "edited offer is in the transcript: host proof fails");
	done(&r);

	/* The target choosing what the host did not offer is refused. */
	setup(&r, &hkey, &hkey, NULL, NULL);
	r.hp.hash_mask = 1u << RB_AUTH_HASH_SHA512;
	if (rb_auth_host_new(&r.hp, &r.h) || rb_auth_tgt_new(&r.tp, &r.t))
		abort();
	rb_auth_host_negotiate(r.h, &r.neg);
	rb_auth_tgt_step(r.t, 2000, &r.neg, &r.chal);
	r.chal.hdr.hash = RB_AUTH_HASH_SHA256;
	is_int(rb_auth_host_challenge(r.h, &r.chal, &r.reply), -EPROTO,
	       "host refuses a CHALLENGE with a hash it did not offer");
	done(&r);
}

static void test_state_and_garbage(void)
{
	struct run r;
	union rb_auth_tgt_msg out;
	union rb_auth_host_msg m;

	setup(&r, &hkey, &hkey, NULL, NULL);
	run(&r);
	is_int(rb_auth_tgt_step(r.t, 4000, &r.reply, &out), RB_S_AUTH_OUT_OF_STATE,
	       "REPLY after DONE: AUTH_OUT_OF_STATE");
	is_int(rb_auth_host_success(r.h, &r.succ, &r.hsk), -EPROTO, "second SUCCESS refused");
	done(&r);

	setup(&r, &hkey, &hkey, NULL, NULL);
	if (rb_auth_host_new(&r.hp, &r.h) || rb_auth_tgt_new(&r.tp, &r.t))
		abort();
	rb_auth_host_negotiate(r.h, &r.neg);
	memset(&m, 0, sizeof(m));
	m.hdr.type = RB_AUTH_REPLY;
	m.hdr.hash = RB_AUTH_HASH_SHA256;
	is_int(rb_auth_tgt_step(r.t, 2000, &m, &out), RB_S_AUTH_OUT_OF_STATE,
	       "REPLY before NEGOTIATE: AUTH_OUT_OF_STATE");
	is_int(rb_auth_tgt_step(r.t, 2000, &r.neg, &out), RB_S_AUTH_OUT_OF_STATE,
	       "  and the exchange is over after a failure");
	done(&r);

	setup(&r, &hkey, &hkey, NULL, NULL);
	if (rb_auth_host_new(&r.hp, &r.h) || rb_auth_tgt_new(&r.tp, &r.t))
		abort();
	rb_auth_host_negotiate(r.h, &r.neg);
	rb_auth_tgt_step(r.t, 2000, &r.neg, &r.chal);
	is_int(rb_auth_tgt_step(r.t, 2000, &r.neg, &out), RB_S_AUTH_OUT_OF_STATE,
	       "second NEGOTIATE: AUTH_OUT_OF_STATE");
	done(&r);

	setup(&r, &hkey, &hkey, NULL, NULL);
	if (rb_auth_host_new(&r.hp, &r.h) || rb_auth_tgt_new(&r.tp, &r.t))
		abort();
	rb_auth_host_negotiate(r.h, &r.neg);
	is_int(rb_auth_tgt_step(r.t, 1000 + RB_AUTH_TIMEOUT_MS * 1000000ull + 1, &r.neg, &out),
	       RB_S_AUTH_FAILED, "step after the deadline: AUTH_FAILED (timed out)");
	is_str(rb_auth_tgt_why(r.t), "exchange timed out", "  reason says so");
	done(&r);

	/* Garbled and truncated messages (sha256: proof padding to garble). */
	setup(&r, &hkey, &hkey, NULL, NULL);
	r.tp.hash_mask = 1u << RB_AUTH_HASH_SHA256;
	run(&r);
	{
		struct {
			const char *what;
			size_t off;
			uint8_t val;
		} g[] = {
		    {"unknown type", 0, 9},
		    {"reserved header byte", 4, 1},
		    {"unknown flag", 3, 0x80},
		    {"proof padding", 40 + 64 - 1, 1},
		    {"dh_len garbled", 104, 7},
		    {"padding after the DH value", 112 + RB_AUTH_DH_MAX - 1, 1},
		};
		for (size_t i = 0; i < sizeof(g) / sizeof(g[0]); i++) {
			struct rb_auth_tgt *t;
			union rb_auth_host_msg bad = r.reply;

			bad.raw[g[i].off] ^= g[i].val;
			if (rb_auth_tgt_new(&r.tp, &t))
				abort();
			rb_auth_tgt_step(t, 2000, &r.neg, &out);
			is_int(rb_auth_tgt_step(t, 3000, &bad, &out), RB_S_INVALID_FIELD,
			       "REPLY with %s: INVALID_FIELD", g[i].what);
			rb_auth_tgt_free(t);
		}
	}
	{
		union rb_auth_host_msg trunc;
		struct rb_auth_tgt *t;

		/* What a transport gives for a short read: the rest zero. */
		memset(&trunc, 0, sizeof(trunc));
		memcpy(&trunc, &r.reply, 100);
		if (rb_auth_tgt_new(&r.tp, &t))
			abort();
		rb_auth_tgt_step(t, 2000, &r.neg, &out);
		ok(rb_auth_tgt_step(t, 3000, &trunc, &out) != RB_S_SUCCESS,
		   "truncated REPLY refused");
		rb_auth_tgt_free(t);
	}
	{
		union rb_auth_tgt_msg bad = r.succ;
		struct rb_validate_err err;

		bad.raw[sizeof(struct rb_auth_success)] = 1;
		is_int(rb_check_auth_tgt_msg(&bad, RB_AUTH_SUCCESS, &err), -EPROTO,
		       "SUCCESS with bytes past it: refused (%s)", err.field);
	}
	done(&r);
}

static void test_queue_proof(void)
{
	struct run r;
	uint8_t nh[32], nt[32], p[64], pt[64];
	struct rb_auth_skey wrong;

	setup(&r, &hkey, &hkey, &tkey, &tkey);
	run(&r);
	if (rb_auth_nonce(nh) || rb_auth_nonce(nt))
		abort();
	is_int(rb_auth_queue_proof(&r.hsk, false, 3, nh, nt, p), 0, "host queue proof");
	is_int(rb_auth_queue_check(&r.tsk, false, 3, nh, nt, p), 0, "target accepts it");
	is_int(rb_auth_queue_check(&r.tsk, false, 4, nh, nt, p), -EACCES, "other qid: refused");
	nt[0] ^= 1;
	is_int(rb_auth_queue_check(&r.tsk, false, 3, nh, nt, p), -EACCES,
	       "other target nonce: refused");
	nt[0] ^= 1;
	wrong = r.tsk;
	wrong.session++;
	is_int(rb_auth_queue_check(&wrong, false, 3, nh, nt, p), -EACCES, "other session: refused");
	is_int(rb_auth_queue_check(&r.tsk, true, 3, nh, nt, p), -EACCES,
	       "host queue proof as target's: refused");
	rb_auth_queue_proof(&r.tsk, true, 3, nh, nt, pt);
	is_int(rb_auth_queue_check(&r.hsk, true, 3, nh, nt, pt), 0, "target queue proof accepted");
	done(&r);
	/* Another exchange's session key (same session id) proves nothing. */
	setup(&r, &hkey, &hkey, NULL, NULL);
	run(&r);
	is_int(rb_auth_queue_check(&r.tsk, false, 3, nh, nt, p), -EACCES,
	       "proof with another exchange's session key: refused");
	done(&r);
}

static void test_keys(void)
{
	/* nvme-cli gen-dhchap-key style strings, made with our formatter and
	 * a known key (CRC computed independently: zlib crc32). */
	struct rb_auth_key k;
	const char *why = NULL;
	char s[160];

	/* 32 zero bytes: crc32 = 0x190a55ad. */
	is_int(rb_auth_key_parse("DHHC-1:00:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAACtVQoZ:", &k,
				 &why),
	       0, "known 32-byte zero key parses");
	ok(k.len == 32 && k.hh == 0, "  32 bytes, no transform");
	is_int(rb_auth_key_parse("DHHC-1:00:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAACtVQoa:", &k,
				 &why),
	       -EINVAL, "bad CRC refused");
	is_str(why, "CRC mismatch (key mistyped or truncated)", "  says why");
	is_int(rb_auth_key_parse("DHHC-1:00:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAC!VQoZ:", &k,
				 &why),
	       -EINVAL, "bad base64 refused");
	is_str(why, "bad base64", "  says why");
	is_int(rb_auth_key_parse("DHHC-1:00:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAyvuyv:", &k, &why),
	       -EINVAL, "26-byte key (right CRC) refused");
	is_str(why, "key length is not 32, 48 or 64 bytes", "  says why");
	is_int(rb_auth_key_parse("DHHC-1:02:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAACtVQoZ:", &k,
				 &why),
	       -EINVAL, "32-byte key with hh 02 (SHA-384) refused");
	is_int(rb_auth_key_parse("DHHC-1:04:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAACtVQoZ:", &k,
				 &why),
	       -EINVAL, "hh 04 refused");
	is_int(rb_auth_key_parse("DHHC-2:00:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAACtVQoZ:", &k,
				 &why),
	       -EINVAL, "other prefix refused");
	is_int(rb_auth_key_parse("DHHC-1:00:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAACtVQoZ", &k,
				 &why),
	       -EINVAL, "missing final colon refused");
	/* Written by nvme-cli 2.x: nvme gen-dhchap-key --hmac=N --nqn nqn.test */
	{
		static const char *const nvme[] = {
		    "DHHC-1:00:M9W8LYlFdWGK/khh3tqW8bIzEyoPLdelSCCJKglfY0xF2t/l:",
		    "DHHC-1:01:FgSbZRi9oXtZ2WA/zp7HXV1t8CoVAYlvP4SVsqoSiupFyflb:",
		    "DHHC-1:02:8jYwfas93Dj/7D6pgoFZsc6OFupS+3Huyz27Y0HRtvZ/KBorzXnCk0IRcPZ/"
		    "54hduD0RUw==:",
		    "DHHC-1:03:b4PuqNvp247zuc7opSAMKhzqBEw/"
		    "T7ePHvWxtA0RVkFYTmTpl2ruQiVbECBMur4g65Vibj9zPQy7/jXpim8+dh+tUuo=:",
		};
		static const unsigned int want_len[] = {32, 32, 48, 64};

		for (unsigned int i = 0; i < 4; i++)
			ok(rb_auth_key_parse(nvme[i], &k, &why) == 0 && k.hh == i &&
			       k.len == want_len[i],
			   "nvme-cli key with hmac %u parses", i);
	}
	for (unsigned int hh = 0; hh <= 3; hh++)
		for (unsigned int len = 32; len <= 64; len += 16) {
			struct rb_auth_key g, back;

			if (hh && len != rb_auth_hash_len(hh))
				continue;
			if (rb_auth_key_generate(hh, len, &g) ||
			    rb_auth_key_format(&g, s, sizeof(s)))
				abort();
			strcat(s, "\n");
			ok(rb_auth_key_parse(s, &back, &why) == 0 && back.len == len &&
			       back.hh == hh && memcmp(back.key, g.key, len) == 0,
			   "generated hh %02u len %u round-trips", hh, len);
		}
}

static void test_key_file(void)
{
	const char *tmp = getenv("TMPDIR");
	char dir[256], path[300], err[512];
	struct rb_auth_key k, g;
	char s[160];
	int fd;

	/* The scratch directory under $TMPDIR like the other tests; set-up
	 * failures stop the test loudly (abort), they are not results. */
	snprintf(dir, sizeof(dir), "%s/test-auth-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		abort();
	snprintf(path, sizeof(path), "%s/key", dir);
	if (rb_auth_key_generate(1, 32, &g) || rb_auth_key_format(&g, s, sizeof(s)))
		abort();
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s) || close(fd))
		abort();
	is_int(rb_auth_key_load(path, &k, err, sizeof(err)), 0, "0600 key file loads");
	ok(k.len == 32 && memcmp(k.key, g.key, 32) == 0, "  with the key");
	if (chmod(path, 0640))
		abort();
	is_int(rb_auth_key_load(path, &k, err, sizeof(err)), -EPERM, "0640 key file refused");
	ok(strncmp(err, path, strlen(path)) == 0 && strstr(err, "group or others"),
	   "  naming the file and why: %s", err);
	if (chmod(path, 0604))
		abort();
	is_int(rb_auth_key_load(path, &k, err, sizeof(err)), -EPERM, "0604 key file refused");
	if (chmod(path, 0400))
		abort();
	is_int(rb_auth_key_load(path, &k, err, sizeof(err)), 0, "0400 key file loads");
	if (geteuid() == 0) {
		if (chown(path, 1, (gid_t)-1))
			abort();
		is_int(rb_auth_key_load(path, &k, err, sizeof(err)), -EPERM,
		       "file of another user refused");
		ok(strstr(err, "owned by uid 1") != NULL, "  says so: %s", err);
	}
	unlink(path);
	is_int(rb_auth_key_load(path, &k, err, sizeof(err)), -ENOENT, "missing file: ENOENT");
	ok(strncmp(err, path, strlen(path)) == 0, "  naming it: %s", err);
	rmdir(dir);
}

static void test_log_escape(void)
{
	const char *forged = "x\n<0>rdmablk-target: fatal: FORGED";
	char buf[RB_LOG_ESCAPE_MAX], small[12];

	is_str(rb_log_escape(buf, sizeof(buf), forged, RB_HOSTID_MAX),
	       "x\\x0a<0>rdmablk-target: fatal: FORGED", "newline escaped: one line");
	is_str(rb_log_escape(buf, sizeof(buf), "a\\b\x7f\xff", 16), "a\\x5cb\\x7f\\xff",
	       "backslash, DEL and high bytes escaped");
	is_str(rb_log_escape(small, sizeof(small), forged, RB_HOSTID_MAX), "x\\x0a<0>...",
	       "bounded by the buffer, cut marked");
	is_str(rb_log_escape(buf, sizeof(buf), "abcdef", 3), "abc", "bounded by maxlen");
	is_str(rb_log_escape(small, sizeof(small), "12345678901", 64), "12345678901",
	       "exactly fitting string not cut");
	is_str(rb_log_escape(small, 1, "abc", 64), "", "cap 1: empty");
}

int main(void)
{
	if (rb_auth_key_generate(0, 32, &hkey) || rb_auth_key_generate(2, 48, &tkey) ||
	    rb_auth_key_generate(0, 32, &other))
		abort();
	test_success();
	test_strongest_and_transform();
	test_wrong_secrets();
	test_reflection();
	test_replay();
	test_downgrade();
	test_state_and_garbage();
	test_queue_proof();
	test_keys();
	test_key_file();
	test_log_escape();
	return tap_done();
}
