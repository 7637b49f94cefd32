/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The caches of http-auth.c, keyed by digests, with a share per user: see auth-cache.h. */
#include <endian.h>
#include <gnutls/crypto.h>

#include "auth-cache.h"

int auth_cache_init(AuthCache *c, size_t size, size_t per_owner_max) {
        if (!c || size < 1)
                return -EINVAL;
        *c = (AuthCache){ .size = size, .per_owner_max = per_owner_max };
        c->entries = calloc(size, sizeof(AuthCacheEntry));
        return c->entries ? 0 : -ENOMEM;
}

static void entry_clear(AuthCacheEntry *e) {
        kube_user_info_done(&e->user);
        explicit_bzero(e, sizeof(*e));
}

void auth_cache_done(AuthCache *c) {
        if (!c || !c->entries)
                return;
        for (size_t i = 0; i < c->size; i++)
                entry_clear(&c->entries[i]);
        free(c->entries);
        *c = (AuthCache){};
}

AuthCacheEntry *auth_cache_get(AuthCache *c, const uint8_t key[static AUTH_KEY_SIZE], uint64_t now) {
        for (size_t i = 0; i < c->size; i++)
                if (c->entries[i].expires > now && memcmp(c->entries[i].key, key, AUTH_KEY_SIZE) == 0)
                        return &c->entries[i];
        return NULL;
}

static bool owned_by(const AuthCacheEntry *e, const uint8_t *owner) {
        return memcmp(e->owner, owner, AUTH_KEY_SIZE) == 0;
}

static bool is_nobody(const uint8_t *owner) {
        static const uint8_t zero[AUTH_KEY_SIZE] = {};
        return memcmp(owner, zero, AUTH_KEY_SIZE) == 0;
}

size_t auth_cache_count(const AuthCache *c, const uint8_t *owner, uint64_t now) {
        size_t n = 0;

        for (size_t i = 0; i < c->size; i++)
                if (c->entries[i].expires > now && (!owner || owned_by(&c->entries[i], owner)))
                        n++;
        return n;
}

AuthCacheEntry *auth_cache_put(AuthCache *c, const uint8_t key[static AUTH_KEY_SIZE],
                               const uint8_t owner[static AUTH_KEY_SIZE], uint64_t now) {
        AuthCacheEntry *e = NULL, *free_one = NULL, *soonest = NULL, *own_soonest = NULL;
        bool share = c->per_owner_max > 0 && !is_nobody(owner);
        size_t own = 0;

        for (size_t i = 0; i < c->size; i++) {
                AuthCacheEntry *x = &c->entries[i];

                if (x->expires <= now) {
                        if (!free_one)
                                free_one = x;
                        continue;
                }
                if (memcmp(x->key, key, AUTH_KEY_SIZE) == 0) {
                        e = x;
                        break;
                }
                if (!soonest || x->expires < soonest->expires)
                        soonest = x;
                if (share && owned_by(x, owner)) {
                        own++;
                        if (!own_soonest || x->expires < own_soonest->expires)
                                own_soonest = x;
                }
        }
        if (!e)
                e = share && own >= c->per_owner_max ? own_soonest : free_one ?: soonest;
        entry_clear(e);
        memcpy(e->key, key, AUTH_KEY_SIZE);
        memcpy(e->owner, owner, AUTH_KEY_SIZE);
        return e;
}

/* ---- the digests ---- */

typedef enum KeyKind {
        KEY_TOKEN = 1,
        KEY_IDENTITY,
        KEY_OWNER,
        KEY_DECISION,
} KeyKind;

typedef struct Digest {
        gnutls_hash_hd_t h;
        int error;
} Digest;

static void digest_begin(Digest *d, KeyKind kind) {
        uint8_t k = (uint8_t) kind;

        d->error = gnutls_hash_init(&d->h, GNUTLS_DIG_SHA256) < 0 ? -EIO : 0;
        if (d->error == 0 && gnutls_hash(d->h, &k, 1) < 0)
                d->error = -EIO;
}

/* A part: its length (8 bytes), then its bytes. */
static void digest_part(Digest *d, const void *data, size_t n) {
        uint64_t l = htole64((uint64_t) n);

        if (d->error < 0)
                return;
        if (gnutls_hash(d->h, &l, sizeof(l)) < 0 || (n > 0 && gnutls_hash(d->h, data, n) < 0))
                d->error = -EIO;
}

static void digest_string(Digest *d, const char *s) {
        digest_part(d, strempty(s), strlen(strempty(s)));
}

static int digest_end(Digest *d, uint8_t ret[static AUTH_KEY_SIZE]) {
        uint8_t out[AUTH_KEY_SIZE];

        if (d->error < 0 && !d->h)
                return d->error;
        gnutls_hash_deinit(d->h, out);
        if (d->error == 0)
                memcpy(ret, out, AUTH_KEY_SIZE);
        explicit_bzero(out, sizeof(out));
        return d->error;
}

int auth_token_key(const char *token, uint8_t ret[static AUTH_KEY_SIZE]) {
        Digest d = {};

        if (!token)
                return -EINVAL;
        digest_begin(&d, KEY_TOKEN);
        digest_string(&d, token);
        return digest_end(&d, ret);
}

/* A JSON value (groups, extra) as the API server gave it; absent and null alike. */
static void digest_json(Digest *d, const cJSON *j) {
        _cleanup_free_ char *s = j ? cJSON_PrintUnformatted(j) : NULL;

        if (j && !s) {
                d->error = d->error ?: -ENOMEM;
                return;
        }
        digest_string(d, s);
}

int auth_user_keys(const KubeUserInfo *u, uint8_t ret_identity[static AUTH_KEY_SIZE],
                   uint8_t ret_owner[static AUTH_KEY_SIZE]) {
        Digest d = {};
        int r;

        if (!u || !u->username)
                return -EINVAL;
        digest_begin(&d, KEY_IDENTITY);
        digest_string(&d, u->username);
        digest_string(&d, u->uid);
        digest_json(&d, u->groups);
        digest_json(&d, u->extra);
        r = digest_end(&d, ret_identity);
        if (r < 0)
                return r;
        d = (Digest){};
        digest_begin(&d, KEY_OWNER);
        digest_string(&d, u->username);
        return digest_end(&d, ret_owner);
}

int auth_decision_key(const uint8_t identity[static AUTH_KEY_SIZE], const KubeResourceAttributes *at,
                      uint8_t ret[static AUTH_KEY_SIZE]) {
        Digest d = {};

        if (!at)
                return -EINVAL;
        digest_begin(&d, KEY_DECISION);
        digest_part(&d, identity, AUTH_KEY_SIZE);
        digest_string(&d, at->verb);
        digest_string(&d, at->group);
        digest_string(&d, at->resource);
        digest_string(&d, at->subresource);
        digest_string(&d, at->namespace);
        digest_string(&d, at->name);
        return digest_end(&d, ret);
}
