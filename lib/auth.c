/* SPDX-License-Identifier: MIT */
/* Authentication state machines and proofs (docs/protocol.md); OpenSSL 3. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/dh.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include "auth.h"

#define AUTH_KEY_LABEL "rdmablk auth key"
#define LABEL_SIZE 16

/* ---- HMAC through EVP_MAC ---- */

static const char *hash_evp_name(unsigned int hash)
{
	switch (hash) {
	case RB_AUTH_HASH_SHA256: return "SHA256";
	case RB_AUTH_HASH_SHA384: return "SHA384";
	case RB_AUTH_HASH_SHA512: return "SHA512";
	}
	return NULL;
}

static EVP_MAC_CTX *hmac_start(unsigned int hash, const uint8_t *key, size_t klen)
{
	const char *md = hash_evp_name(hash);
	EVP_MAC *mac;
	EVP_MAC_CTX *ctx;
	OSSL_PARAM params[2];

	if (!md)
		return NULL;
	mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
	if (!mac)
		return NULL;
	ctx = EVP_MAC_CTX_new(mac);
	EVP_MAC_free(mac); /* the context holds its own reference */
	if (!ctx)
		return NULL;
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)md, 0);
	params[1] = OSSL_PARAM_construct_end();
	if (!EVP_MAC_init(ctx, key, klen, params)) {
		EVP_MAC_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

static int hmac_update(EVP_MAC_CTX *ctx, const void *p, size_t n)
{
	return n == 0 || EVP_MAC_update(ctx, p, n) ? 0 : -EIO;
}

/* Finishes and frees ctx; out gets the digest (room for 64). */
static int hmac_final(EVP_MAC_CTX *ctx, uint8_t *out, int err)
{
	size_t n = 0;

	if (!err && !EVP_MAC_final(ctx, out, &n, RB_AUTH_PROOF_MAX))
		err = -EIO;
	EVP_MAC_CTX_free(ctx);
	return err;
}

/* One-shot HMAC over a || b. */
static int hmac2(unsigned int hash, const uint8_t *key, size_t klen, const void *a, size_t alen,
		 const void *b, size_t blen, uint8_t *out)
{
	EVP_MAC_CTX *ctx = hmac_start(hash, key, klen);
	int err;

	if (!ctx)
		return -EIO;
	err = hmac_update(ctx, a, alen);
	if (!err)
		err = hmac_update(ctx, b, blen);
	return hmac_final(ctx, out, err);
}

/* ---- FFDHE through EVP_PKEY ---- */

static const char *group_name(unsigned int g)
{
	return g >= RB_AUTH_DH_FFDHE2048 && g <= RB_AUTH_DH_FFDHE8192 ? rb_auth_dhgroup_name(g)
								      : NULL;
}

static EVP_PKEY *dh_keygen(unsigned int group)
{
	EVP_PKEY_CTX *pc = EVP_PKEY_CTX_new_from_name(NULL, "DH", NULL);
	EVP_PKEY *key = NULL;
	OSSL_PARAM params[2];

	if (!pc)
		return NULL;
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME,
						     (char *)group_name(group), 0);
	params[1] = OSSL_PARAM_construct_end();
	if (EVP_PKEY_keygen_init(pc) <= 0 || !EVP_PKEY_CTX_set_params(pc, params) ||
	    EVP_PKEY_generate(pc, &key) <= 0)
		key = NULL;
	EVP_PKEY_CTX_free(pc);
	return key;
}

/* Our public value, big endian, padded to the group's size. */
static int dh_public(EVP_PKEY *key, unsigned int group, uint8_t *out)
{
	unsigned char *pub = NULL;
	size_t n = EVP_PKEY_get1_encoded_public_key(key, &pub);
	int want = rb_auth_dh_len(group);

	if (!pub || (int)n != want) {
		OPENSSL_free(pub);
		return -EIO;
	}
	memcpy(out, pub, n);
	OPENSSL_free(pub);
	return 0;
}

/* Shared secret with the peer's public value into z (group size bytes);
 * -EPROTO if the peer's value is unusable (out of range). */
static int dh_derive(EVP_PKEY *key, unsigned int group, const uint8_t *peer_pub, uint8_t *z)
{
	int len = rb_auth_dh_len(group);
	EVP_PKEY *peer = EVP_PKEY_new();
	EVP_PKEY_CTX *dc = NULL;
	size_t zlen = (size_t)len;
	int ret = -EPROTO;

	if (!peer || !EVP_PKEY_copy_parameters(peer, key))
		goto out;
	if (!EVP_PKEY_set1_encoded_public_key(peer, peer_pub, (size_t)len))
		goto out;
	dc = EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL);
	if (!dc || EVP_PKEY_derive_init(dc) <= 0 || EVP_PKEY_CTX_set_dh_pad(dc, 1) <= 0)
		goto out;
	/* validate_peer: the full public key check (range and subgroup). */
	if (EVP_PKEY_derive_set_peer_ex(dc, peer, 1) <= 0)
		goto out;
	if (EVP_PKEY_derive(dc, z, &zlen) <= 0 || zlen != (size_t)len)
		goto out;
	ret = 0;
out:
	EVP_PKEY_CTX_free(dc);
	EVP_PKEY_free(peer);
	return ret;
}

/* ---- the exchange, shared by both sides ---- */

enum auth_state {
	ST_START,
	ST_WAIT_NEGOTIATE,
	ST_WAIT_CHALLENGE,
	ST_WAIT_REPLY,
	ST_WAIT_SUCCESS,
	ST_DONE,
	ST_FAILED
};

/* What both sides compute the same way; the rest is per side. */
struct auth_xchg {
	enum auth_state state;
	char hostid[RB_HOSTID_MAX];
	char target_id[RB_EXPORT_NAME_MAX];
	uint64_t session;
	struct rb_auth_key hkey, tkey; /* transformed (K'h, K't) */
	bool have_tkey;
	uint8_t hash_mask, dh_mask;		       /* ours: offered or accepted */
	uint8_t neg_hash_mask, neg_dh_mask, neg_flags; /* NEGOTIATE as sent/received */
	uint8_t hash, group;
	uint8_t nt[RB_AUTH_NONCE_SIZE], nh[RB_AUTH_NONCE_SIZE];
	uint8_t pub_t[RB_AUTH_DH_MAX], pub_h[RB_AUTH_DH_MAX];
	uint8_t z[RB_AUTH_DH_MAX];
	EVP_PKEY *dh; /* our ephemeral key */
	const char *why;
};

/* TP 8006 transform: K' = HMAC-hh(K, id || "NVMe-over-Fabrics"). */
static int key_transform(const struct rb_auth_key *in, const char *id, struct rb_auth_key *out)
{
	static const char suffix[] = "NVMe-over-Fabrics";
	int err;

	if (in->hh == 0) {
		*out = *in;
		return 0;
	}
	err = hmac2(in->hh, in->key, in->len, id, strlen(id), suffix, sizeof(suffix) - 1, out->key);
	out->len = (uint8_t)rb_auth_hash_len(in->hh);
	out->hh = 0;
	return err;
}

static int xchg_init(struct auth_xchg *x, const struct rb_auth_params *p, bool target)
{
	struct rb_auth_key rnd;
	int err;

	if (!p->hostid || !p->hostid[0] || strlen(p->hostid) >= RB_HOSTID_MAX || !p->target_id ||
	    strlen(p->target_id) >= RB_EXPORT_NAME_MAX)
		return -EINVAL;
	if (!p->hash_mask || (p->hash_mask & ~RB_AUTH_HASH_MASK_ALL) || !p->dh_mask ||
	    (p->dh_mask & ~RB_AUTH_DH_MASK_ALL))
		return -EINVAL;
	if (!target && !p->host_key)
		return -EINVAL;
	memset(x, 0, sizeof(*x));
	strcpy(x->hostid, p->hostid);
	strcpy(x->target_id, p->target_id);
	x->session = p->session;
	x->hash_mask = p->hash_mask;
	x->dh_mask = p->dh_mask;
	if (p->host_key) {
		err = key_transform(p->host_key, p->hostid, &x->hkey);
	} else {
		/* No secret for this host: fail at REPLY like a wrong one. */
		err = rb_auth_key_generate(0, 32, &rnd);
		if (!err)
			x->hkey = rnd;
		rb_auth_key_clear(&rnd);
	}
	if (!err && p->target_key) {
		err = key_transform(p->target_key, p->target_id, &x->tkey);
		x->have_tkey = true;
	}
	return err;
}

static void xchg_clear(struct auth_xchg *x)
{
	EVP_PKEY_free(x->dh);
	OPENSSL_cleanse(x, sizeof(*x));
}

static void put_le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* HMAC(key, T(label)) into out: the transcript of docs/protocol.md. */
static int transcript_mac(const struct auth_xchg *x, const uint8_t *key, size_t klen,
			  const char *label, uint8_t *out)
{
	uint8_t fixed[LABEL_SIZE + 2 + 6 + 8 + 2 + RB_HOSTID_MAX + RB_EXPORT_NAME_MAX];
	uint8_t *p = fixed;
	int dlen = rb_auth_dh_len(x->group);
	EVP_MAC_CTX *ctx = hmac_start(x->hash, key, klen);
	int err;

	if (!ctx)
		return -EIO;
	memset(fixed, 0, sizeof(fixed));
	memcpy(p, label, strlen(label));
	p += LABEL_SIZE;
	put_le16(p, RB_PROTO_VERSION_AUTH);
	p += 2;
	*p++ = x->hash;
	*p++ = x->group;
	*p++ = x->neg_hash_mask;
	*p++ = x->neg_dh_mask;
	*p++ = x->neg_flags;
	*p++ = 0;
	put_le64(p, x->session);
	p += 8;
	put_le16(p, 0); /* qid: the admin queue */
	p += 2;
	memcpy(p, x->hostid, strlen(x->hostid));
	p += RB_HOSTID_MAX;
	memcpy(p, x->target_id, strlen(x->target_id));
	err = hmac_update(ctx, fixed, sizeof(fixed));
	if (!err)
		err = hmac_update(ctx, x->nt, sizeof(x->nt));
	if (!err)
		err = hmac_update(ctx, x->nh, sizeof(x->nh));
	if (!err)
		err = hmac_update(ctx, x->pub_t, (size_t)dlen);
	if (!err)
		err = hmac_update(ctx, x->pub_h, (size_t)dlen);
	return hmac_final(ctx, out, err);
}

/* Ah or At: HMAC(K', "rdmablk auth key" || Z). */
static int proof_key(const struct auth_xchg *x, const struct rb_auth_key *k, uint8_t *out)
{
	return hmac2(x->hash, k->key, k->len, AUTH_KEY_LABEL, sizeof(AUTH_KEY_LABEL) - 1, x->z,
		     (size_t)rb_auth_dh_len(x->group), out);
}

/* Rh / Rt into proof[64] (zero padded); SK into sk when not NULL. */
static int make_proof(const struct auth_xchg *x, bool target_role, uint8_t *proof,
		      struct rb_auth_skey *sk)
{
	uint8_t a[RB_AUTH_PROOF_MAX];
	unsigned int n = rb_auth_hash_len(x->hash);
	int err;

	memset(proof, 0, RB_AUTH_PROOF_MAX);
	err = proof_key(x, target_role ? &x->tkey : &x->hkey, a);
	if (!err)
		err = transcript_mac(x, a, n, target_role ? "target proof" : "host proof", proof);
	if (!err && sk) {
		memset(sk, 0, sizeof(*sk));
		err = transcript_mac(x, a, n, "session key", sk->key);
		sk->len = (uint8_t)n;
		sk->hash = x->hash;
		sk->session = x->session;
	}
	OPENSSL_cleanse(a, sizeof(a));
	return err;
}

static int check_proof(const struct auth_xchg *x, bool target_role, const uint8_t *got)
{
	uint8_t want[RB_AUTH_PROOF_MAX];
	int err = make_proof(x, target_role, want, NULL);

	if (!err && CRYPTO_memcmp(want, got, RB_AUTH_PROOF_MAX) != 0)
		err = -EACCES;
	OPENSSL_cleanse(want, sizeof(want));
	return err;
}

/* Strongest identifier in mask (bit i = identifier i), -1 if none. */
static int strongest(unsigned int mask)
{
	for (int i = 7; i >= 0; i--)
		if (mask & (1u << i))
			return i;
	return -1;
}

/* ---- host ---- */

struct rb_auth_host {
	struct auth_xchg x;
};

int rb_auth_host_new(const struct rb_auth_params *p, struct rb_auth_host **out)
{
	struct rb_auth_host *h = calloc(1, sizeof(*h));
	int err;

	if (!h)
		return -ENOMEM;
	err = xchg_init(&h->x, p, false);
	if (err) {
		rb_auth_host_free(h);
		return err;
	}
	*out = h;
	return 0;
}

static int host_fail(struct rb_auth_host *h, const char *why, int err)
{
	h->x.state = ST_FAILED;
	h->x.why = why;
	return err;
}

int rb_auth_host_negotiate(struct rb_auth_host *h, union rb_auth_host_msg *out)
{
	struct auth_xchg *x = &h->x;

	if (x->state != ST_START)
		return host_fail(h, "NEGOTIATE out of state", -EPROTO);
	memset(out, 0, sizeof(*out));
	out->hdr.type = RB_AUTH_NEGOTIATE;
	out->hdr.flags = x->have_tkey ? RB_AUTH_F_BIDI : 0;
	out->neg.hash_mask = x->hash_mask;
	out->neg.dh_mask = x->dh_mask;
	x->neg_hash_mask = x->hash_mask;
	x->neg_dh_mask = x->dh_mask;
	x->neg_flags = out->hdr.flags;
	x->state = ST_WAIT_CHALLENGE;
	return 0;
}

int rb_auth_host_challenge(struct rb_auth_host *h, const union rb_auth_tgt_msg *in,
			   union rb_auth_host_msg *out)
{
	struct auth_xchg *x = &h->x;
	struct rb_validate_err verr;
	int dlen, err;

	if (x->state != ST_WAIT_CHALLENGE)
		return host_fail(h, "CHALLENGE out of state", -EPROTO);
	if (rb_check_auth_tgt_msg(in, RB_AUTH_CHALLENGE, &verr))
		return host_fail(h, "malformed CHALLENGE", -EPROTO);
	/* The target may only choose what we offered. */
	if (!(x->hash_mask & (1u << in->hdr.hash)))
		return host_fail(h, "CHALLENGE chose a hash not offered", -EPROTO);
	if (!(x->dh_mask & (1u << in->hdr.dhgroup)))
		return host_fail(h, "CHALLENGE chose a DH group not offered", -EPROTO);
	x->hash = in->hdr.hash;
	x->group = in->hdr.dhgroup;
	dlen = rb_auth_dh_len(x->group);
	memcpy(x->nt, in->chal.nonce, sizeof(x->nt));
	memcpy(x->pub_t, in->chal.dh_pub, (size_t)dlen);
	if (x->have_tkey && RAND_bytes(x->nh, sizeof(x->nh)) != 1)
		return host_fail(h, "RAND_bytes failed", -EIO);
	if (dlen) {
		x->dh = dh_keygen(x->group);
		if (!x->dh || dh_public(x->dh, x->group, x->pub_h))
			return host_fail(h, "DH key generation failed", -EIO);
		err = dh_derive(x->dh, x->group, x->pub_t, x->z);
		if (err)
			return host_fail(h, "target's DH public value refused", err);
	}
	memset(out, 0, sizeof(*out));
	out->hdr.type = RB_AUTH_REPLY;
	out->hdr.hash = x->hash;
	out->hdr.dhgroup = x->group;
	out->hdr.flags = x->neg_flags;
	memcpy(out->reply.nonce, x->nh, sizeof(x->nh));
	out->reply.dh_len = rb_le16((uint16_t)dlen);
	memcpy(out->reply.dh_pub, x->pub_h, (size_t)dlen);
	err = make_proof(x, false, out->reply.proof, NULL);
	if (err)
		return host_fail(h, "HMAC failed", err);
	x->state = ST_WAIT_SUCCESS;
	return 0;
}

int rb_auth_host_success(struct rb_auth_host *h, const union rb_auth_tgt_msg *in,
			 struct rb_auth_skey *sk)
{
	struct auth_xchg *x = &h->x;
	struct rb_validate_err verr;
	int err;

	if (x->state != ST_WAIT_SUCCESS)
		return host_fail(h, "SUCCESS out of state", -EPROTO);
	if (rb_check_auth_tgt_msg(in, RB_AUTH_SUCCESS, &verr))
		return host_fail(h, "malformed SUCCESS", -EPROTO);
	if (in->hdr.hash != x->hash || in->hdr.dhgroup != x->group)
		return host_fail(h, "SUCCESS names other algorithms", -EPROTO);
	if (x->have_tkey) {
		if (!(in->hdr.flags & RB_AUTH_F_BIDI))
			return host_fail(h, "target sent no proof of its own", -EACCES);
		err = check_proof(x, true, in->succ.proof);
		if (err)
			return host_fail(
			    h, err == -EACCES ? "target's proof is wrong" : "HMAC failed", err);
	}
	err = make_proof(x, false, (uint8_t[RB_AUTH_PROOF_MAX]){0}, sk);
	if (err)
		return host_fail(h, "HMAC failed", err);
	x->state = ST_DONE;
	return 0;
}

const char *rb_auth_host_why(const struct rb_auth_host *h)
{
	return h->x.why ? h->x.why : "no error";
}

void rb_auth_host_free(struct rb_auth_host *h)
{
	if (!h)
		return;
	xchg_clear(&h->x);
	free(h);
}

/* ---- target ---- */

struct rb_auth_tgt {
	struct auth_xchg x;
	uint64_t deadline_ns;
};

int rb_auth_tgt_new(const struct rb_auth_params *p, struct rb_auth_tgt **out)
{
	struct rb_auth_tgt *t = calloc(1, sizeof(*t));
	int err;

	if (!t)
		return -ENOMEM;
	err = xchg_init(&t->x, p, true);
	if (err) {
		rb_auth_tgt_free(t);
		return err;
	}
	t->x.state = ST_WAIT_NEGOTIATE;
	t->deadline_ns = p->now_ns + RB_AUTH_TIMEOUT_MS * 1000000ull;
	*out = t;
	return 0;
}

static enum rb_status tgt_fail(struct rb_auth_tgt *t, const char *why, enum rb_status st)
{
	t->x.state = ST_FAILED;
	t->x.why = why;
	return st;
}

static enum rb_status tgt_negotiate(struct rb_auth_tgt *t, const struct rb_auth_negotiate *n,
				    union rb_auth_tgt_msg *out)
{
	struct auth_xchg *x = &t->x;
	int hash = strongest(n->hash_mask & x->hash_mask);
	int group = strongest(n->dh_mask & x->dh_mask);
	int dlen;

	if (hash < 0)
		return tgt_fail(t, "no offered hash is accepted", RB_S_AUTH_HASH_UNUSABLE);
	if (group < 0)
		return tgt_fail(t, "no offered DH group is accepted", RB_S_AUTH_DHGROUP_UNUSABLE);
	if ((n->hdr.flags & RB_AUTH_F_BIDI) && !x->have_tkey)
		return tgt_fail(t, "host asks for a target proof: no target secret",
				RB_S_AUTH_BIDI_UNAVAILABLE);
	x->neg_hash_mask = n->hash_mask;
	x->neg_dh_mask = n->dh_mask;
	x->neg_flags = n->hdr.flags;
	x->hash = (uint8_t)hash;
	x->group = (uint8_t)group;
	dlen = rb_auth_dh_len(x->group);
	if (RAND_bytes(x->nt, sizeof(x->nt)) != 1)
		return tgt_fail(t, "RAND_bytes failed", RB_S_BUSY);
	if (dlen) {
		x->dh = dh_keygen(x->group);
		if (!x->dh || dh_public(x->dh, x->group, x->pub_t))
			return tgt_fail(t, "DH key generation failed", RB_S_BUSY);
	}
	memset(out, 0, sizeof(*out));
	out->hdr.type = RB_AUTH_CHALLENGE;
	out->hdr.hash = x->hash;
	out->hdr.dhgroup = x->group;
	memcpy(out->chal.nonce, x->nt, sizeof(x->nt));
	out->chal.dh_len = rb_le16((uint16_t)dlen);
	memcpy(out->chal.dh_pub, x->pub_t, (size_t)dlen);
	x->state = ST_WAIT_REPLY;
	return RB_S_SUCCESS;
}

static enum rb_status tgt_reply(struct rb_auth_tgt *t, const struct rb_auth_reply *r,
				union rb_auth_tgt_msg *out)
{
	struct auth_xchg *x = &t->x;
	int dlen = rb_auth_dh_len(x->group);
	int err;

	if (r->hdr.hash != x->hash || r->hdr.dhgroup != x->group || r->hdr.flags != x->neg_flags)
		return tgt_fail(t, "REPLY does not match the CHALLENGE", RB_S_AUTH_OUT_OF_STATE);
	memcpy(x->nh, r->nonce, sizeof(x->nh));
	memcpy(x->pub_h, r->dh_pub, (size_t)dlen);
	if (dlen && dh_derive(x->dh, x->group, x->pub_h, x->z))
		return tgt_fail(t, "host's DH public value refused", RB_S_INVALID_FIELD);
	/* The host's proof first: nothing of ours before it holds. */
	err = check_proof(x, false, r->proof);
	if (err == -EACCES)
		return tgt_fail(t, "host's proof is wrong", RB_S_AUTH_FAILED);
	if (err)
		return tgt_fail(t, "HMAC failed", RB_S_BUSY);
	memset(out, 0, sizeof(*out));
	out->hdr.type = RB_AUTH_SUCCESS;
	out->hdr.hash = x->hash;
	out->hdr.dhgroup = x->group;
	if (x->neg_flags & RB_AUTH_F_BIDI) {
		out->hdr.flags = RB_AUTH_F_BIDI;
		if (make_proof(x, true, out->succ.proof, NULL))
			return tgt_fail(t, "HMAC failed", RB_S_BUSY);
	}
	x->state = ST_DONE;
	return RB_S_SUCCESS;
}

enum rb_status rb_auth_tgt_step(struct rb_auth_tgt *t, uint64_t now_ns,
				const union rb_auth_host_msg *in, union rb_auth_tgt_msg *out)
{
	struct auth_xchg *x = &t->x;
	struct rb_validate_err verr;
	enum rb_status st;

	memset(out, 0, sizeof(*out));
	if (x->state == ST_DONE || x->state == ST_FAILED)
		return tgt_fail(t, "AUTH after the exchange ended", RB_S_AUTH_OUT_OF_STATE);
	if (now_ns > t->deadline_ns)
		return tgt_fail(t, "exchange timed out", RB_S_AUTH_FAILED);
	st = rb_check_auth_host_msg(in, &verr);
	if (st != RB_S_SUCCESS)
		return tgt_fail(t, "malformed message", st);
	if (in->hdr.type == RB_AUTH_NEGOTIATE && x->state == ST_WAIT_NEGOTIATE)
		return tgt_negotiate(t, &in->neg, out);
	if (in->hdr.type == RB_AUTH_REPLY && x->state == ST_WAIT_REPLY)
		return tgt_reply(t, &in->reply, out);
	return tgt_fail(
	    t, in->hdr.type == RB_AUTH_NEGOTIATE ? "NEGOTIATE out of state" : "REPLY out of state",
	    RB_S_AUTH_OUT_OF_STATE);
}

bool rb_auth_tgt_done(const struct rb_auth_tgt *t)
{
	return t->x.state == ST_DONE;
}

uint64_t rb_auth_tgt_deadline_ns(const struct rb_auth_tgt *t)
{
	return t->deadline_ns;
}

int rb_auth_tgt_session_key(const struct rb_auth_tgt *t, struct rb_auth_skey *sk)
{
	uint8_t proof[RB_AUTH_PROOF_MAX];
	int err;

	if (t->x.state != ST_DONE)
		return -EPROTO;
	err = make_proof(&t->x, false, proof, sk);
	OPENSSL_cleanse(proof, sizeof(proof));
	return err;
}

const char *rb_auth_tgt_why(const struct rb_auth_tgt *t)
{
	return t->x.why ? t->x.why : "no error";
}

void rb_auth_tgt_free(struct rb_auth_tgt *t)
{
	if (!t)
		return;
	xchg_clear(&t->x);
	free(t);
}

/* ---- I/O queues ---- */

int rb_auth_nonce(uint8_t nonce[RB_AUTH_NONCE_SIZE])
{
	return RAND_bytes(nonce, RB_AUTH_NONCE_SIZE) == 1 ? 0 : -EIO;
}

int rb_auth_queue_proof(const struct rb_auth_skey *sk, bool target_role, uint16_t qid,
			const uint8_t host_nonce[RB_AUTH_NONCE_SIZE],
			const uint8_t tgt_nonce[RB_AUTH_NONCE_SIZE],
			uint8_t proof[RB_AUTH_PROOF_MAX])
{
	uint8_t q[LABEL_SIZE + 2 + 2 + 8 + 2 + 2 * RB_AUTH_NONCE_SIZE] = {0};
	const char *label = target_role ? "queue target" : "queue host";
	uint8_t *p = q;
	EVP_MAC_CTX *ctx;
	int err;

	memset(proof, 0, RB_AUTH_PROOF_MAX);
	if (!rb_auth_hash_len(sk->hash) || sk->len != rb_auth_hash_len(sk->hash))
		return -EINVAL;
	memcpy(p, label, strlen(label));
	p += LABEL_SIZE;
	put_le16(p, RB_PROTO_VERSION_AUTH);
	p += 2;
	*p++ = sk->hash;
	*p++ = 0;
	put_le64(p, sk->session);
	p += 8;
	put_le16(p, qid);
	p += 2;
	memcpy(p, host_nonce, RB_AUTH_NONCE_SIZE);
	memcpy(p + RB_AUTH_NONCE_SIZE, tgt_nonce, RB_AUTH_NONCE_SIZE);
	ctx = hmac_start(sk->hash, sk->key, sk->len);
	if (!ctx)
		return -EIO;
	err = hmac_update(ctx, q, sizeof(q));
	return hmac_final(ctx, proof, err);
}

int rb_auth_queue_check(const struct rb_auth_skey *sk, bool target_role, uint16_t qid,
			const uint8_t host_nonce[RB_AUTH_NONCE_SIZE],
			const uint8_t tgt_nonce[RB_AUTH_NONCE_SIZE],
			const uint8_t proof[RB_AUTH_PROOF_MAX])
{
	uint8_t want[RB_AUTH_PROOF_MAX];
	int err = rb_auth_queue_proof(sk, target_role, qid, host_nonce, tgt_nonce, want);

	if (!err && CRYPTO_memcmp(want, proof, RB_AUTH_PROOF_MAX) != 0)
		err = -EACCES;
	OPENSSL_cleanse(want, sizeof(want));
	return err;
}

void rb_auth_skey_clear(struct rb_auth_skey *sk)
{
	OPENSSL_cleanse(sk, sizeof(*sk));
}
