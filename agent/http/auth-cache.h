/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "kube-review.h"

/* The caches of http-auth.c (http-auth.h says what each holds and for how
 * long): fixed arrays of entries keyed by a SHA-256 digest (never a token
 * itself), each entry owned by a user (the digest of its name) so that no
 * user holds more than per_owner_max of them: a user that fills its share
 * replaces its own entries, never another's. Time is the caller's
 * (CLOCK_MONOTONIC microseconds): the tests drive it. No I/O. */

#define AUTH_KEY_SIZE 32U /* SHA-256 */

typedef struct AuthCacheEntry {
        uint8_t key[AUTH_KEY_SIZE];
        uint8_t owner[AUTH_KEY_SIZE]; /* the user's; all zero: nobody's (no share) */
        uint64_t expires; /* 0: free; at or before now: expired */
        int value; /* the caller's (a result) */
        /* The cache of tokens: who the token is, and the digests of that
         * user (auth_user_keys()). */
        KubeUserInfo user;
        uint8_t identity[AUTH_KEY_SIZE];
} AuthCacheEntry;

typedef struct AuthCache {
        AuthCacheEntry *entries;
        size_t size;
        size_t per_owner_max; /* 0: no share (entries of nobody) */
} AuthCache;

int auth_cache_init(AuthCache *c, size_t size, size_t per_owner_max);
void auth_cache_done(AuthCache *c);

/* The live entry of key at now, or NULL. */
AuthCacheEntry *auth_cache_get(AuthCache *c, const uint8_t key[static AUTH_KEY_SIZE], uint64_t now);
/* An entry for key, emptied (its user freed), key and owner set, to be
 * filled by the caller (expires, value): key's own entry when there is
 * one; else, when the owner holds its share of live entries, the one of
 * them that expires first; else a free or expired entry; else the one
 * that expires first. */
AuthCacheEntry *auth_cache_put(AuthCache *c, const uint8_t key[static AUTH_KEY_SIZE],
                               const uint8_t owner[static AUTH_KEY_SIZE], uint64_t now);
/* Live entries at now, all or (owner not NULL) the owner's. */
size_t auth_cache_count(const AuthCache *c, const uint8_t *owner, uint64_t now);

/* The digests. Each is of its kind (no token's digest is a user's) and of
 * every part, lengths included (no two different inputs share one). */
int auth_token_key(const char *token, uint8_t ret[static AUTH_KEY_SIZE]);
/* identity: all a SubjectAccessReview is asked with (name, uid, groups,
 * extra); owner: the name alone (whose share). */
int auth_user_keys(const KubeUserInfo *u, uint8_t ret_identity[static AUTH_KEY_SIZE],
                   uint8_t ret_owner[static AUTH_KEY_SIZE]);
/* A decision: the user's identity and the attributes asked. */
int auth_decision_key(const uint8_t identity[static AUTH_KEY_SIZE], const KubeResourceAttributes *at,
                      uint8_t ret[static AUTH_KEY_SIZE]);
