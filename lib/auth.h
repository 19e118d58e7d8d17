/* SPDX-License-Identifier: MIT */
/*
 * Authentication (protocol version 2, docs/protocol.md "Authentication"):
 * DH-HMAC-CHAP-like state machines for the host and the target side, the
 * session key and I/O queue proofs, and DHHC-1 secrets.  Transport
 * independent: the callers move the fixed-size messages of lib/wire.h.
 * Crypto is OpenSSL 3 libcrypto.  Functions return 0 or -errno.
 */
#ifndef RB_AUTH_H
#define RB_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

/* The admin exchange must be done, and an I/O queue's QUEUE_AUTH in, this
 * long after the transport accepted the connection. */
#define RB_AUTH_TIMEOUT_MS 10000u

/* A secret as a DHHC-1 string holds it: key bytes and the transform hash. */
struct rb_auth_key {
	uint8_t key[64];
	uint8_t len; /* 32, 48 or 64 */
	uint8_t hh;  /* 0 none, else enum rb_auth_hash used to transform */
};

/* Session key from the admin exchange: I/O queues prove themselves with it. */
struct rb_auth_skey {
	uint8_t key[64];
	uint8_t len;  /* digest length of hash */
	uint8_t hash; /* enum rb_auth_hash */
	uint64_t session;
};

struct rb_auth_params {
	const char *hostid;    /* < RB_HOSTID_MAX bytes, not empty */
	const char *target_id; /* export name, "" for discovery; < RB_EXPORT_NAME_MAX */
	uint64_t session;      /* from CONNECT */
	/* Host: its secret (required).  Target: the host's secret, NULL if it
	 * has none (the exchange then runs with a random key and fails). */
	const struct rb_auth_key *host_key;
	/* Host: verify the target with it (BIDI); target: prove itself with
	 * it when asked.  NULL: none. */
	const struct rb_auth_key *target_key;
	uint8_t hash_mask; /* host: offered; target: accepted (1 << enum rb_auth_hash) */
	uint8_t dh_mask;   /* the same for groups; target: without bit 0, DH is required */
	uint64_t now_ns;   /* target: start of the RB_AUTH_TIMEOUT_MS budget */
};

/* ---- host side: negotiate -> challenge -> success ---- */
struct rb_auth_host;
int rb_auth_host_new(const struct rb_auth_params *p, struct rb_auth_host **out);
int rb_auth_host_negotiate(struct rb_auth_host *h, union rb_auth_host_msg *out);
/* -EPROTO (malformed, out of state, not what was offered), else writes REPLY. */
int rb_auth_host_challenge(struct rb_auth_host *h, const union rb_auth_tgt_msg *in,
			   union rb_auth_host_msg *out);
/* -EACCES: the target failed authentication (BIDI); -EPROTO: malformed.  On
 * success the session key, and in->succ.connect is the grant. */
int rb_auth_host_success(struct rb_auth_host *h, const union rb_auth_tgt_msg *in,
			 struct rb_auth_skey *sk);
/* Why the last call failed, for the log line (never secret material). */
const char *rb_auth_host_why(const struct rb_auth_host *h);
void rb_auth_host_free(struct rb_auth_host *h);

/* ---- target side: one call per AUTH command ---- */
struct rb_auth_tgt;
int rb_auth_tgt_new(const struct rb_auth_params *p, struct rb_auth_tgt **out);
/*
 * The host half of an AUTH buffer in, the target half out.  Validates it
 * (rb_check_auth_host_msg) and its place in the exchange; RB_S_SUCCESS with
 * CHALLENGE or SUCCESS in out (SUCCESS: the caller fills out->succ.connect),
 * or the status to answer with, after which the exchange is over.
 */
enum rb_status rb_auth_tgt_step(struct rb_auth_tgt *t, uint64_t now_ns,
				const union rb_auth_host_msg *in, union rb_auth_tgt_msg *out);
bool rb_auth_tgt_done(const struct rb_auth_tgt *t);
uint64_t rb_auth_tgt_deadline_ns(const struct rb_auth_tgt *t);
int rb_auth_tgt_session_key(const struct rb_auth_tgt *t, struct rb_auth_skey *sk);
const char *rb_auth_tgt_why(const struct rb_auth_tgt *t);
void rb_auth_tgt_free(struct rb_auth_tgt *t);

/* ---- I/O queues ---- */
int rb_auth_nonce(uint8_t nonce[RB_AUTH_NONCE_SIZE]);
/* Phq (target_role false) or Ptq into proof[64], zero padded. */
int rb_auth_queue_proof(const struct rb_auth_skey *sk, bool target_role, uint16_t qid,
			const uint8_t host_nonce[RB_AUTH_NONCE_SIZE],
			const uint8_t tgt_nonce[RB_AUTH_NONCE_SIZE],
			uint8_t proof[RB_AUTH_PROOF_MAX]);
/* 0 if proof is right, -EACCES if not (constant time). */
int rb_auth_queue_check(const struct rb_auth_skey *sk, bool target_role, uint16_t qid,
			const uint8_t host_nonce[RB_AUTH_NONCE_SIZE],
			const uint8_t tgt_nonce[RB_AUTH_NONCE_SIZE],
			const uint8_t proof[RB_AUTH_PROOF_MAX]);
void rb_auth_skey_clear(struct rb_auth_skey *sk);

/* ---- secrets ---- */
/* "DHHC-1:<hh>:<base64 key+crc32>:" (trailing newline allowed).  -EINVAL
 * with *why saying what is wrong. */
int rb_auth_key_parse(const char *s, struct rb_auth_key *k, const char **why);
/* A new key of len bytes from RAND_bytes, transform hash hh. */
int rb_auth_key_generate(unsigned int hh, unsigned int len, struct rb_auth_key *k);
/* Its DHHC-1 string into buf (cap >= 128). */
int rb_auth_key_format(const struct rb_auth_key *k, char *buf, size_t cap);
/* Load a key file: owned by the effective user, no group/other access.
 * On failure err says "<path>: <why>". */
int rb_auth_key_load(const char *path, struct rb_auth_key *k, char *err, size_t errlen);
void rb_auth_key_clear(struct rb_auth_key *k);

#endif
