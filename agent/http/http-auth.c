/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Bearer tokens: TokenReview, then SubjectAccessReview, with a short cache
 * of what was allowed. See http-auth.h. */
#include <gnutls/crypto.h>

#include "http-auth.h"
#include "log.h"

#define KEY_SIZE 32 /* SHA-256 */

typedef struct CacheEntry {
        uint8_t key[KEY_SIZE];
        uint64_t expires; /* CLOCK_MONOTONIC; 0: free */
} CacheEntry;

struct HttpAuthCheck {
        HttpAuth *auth;
        HttpAuthCheck *prev, *next;
        uint8_t key[KEY_SIZE];
        char *token;
        char *verb, *group, *resource, *subresource, *namespace, *name;
        KubeUserInfo user;
        KubeRequest *request;
        char *body;
        size_t size;
        HttpAuthDone done;
        void *userdata;
};

struct HttpAuth {
        KubeClient *kube;
        HttpAuthCheck *checks;
        CacheEntry cache[HTTP_AUTH_CACHE_MAX];
        HttpAuthStats stats;
};

static void check_free(HttpAuthCheck *c) {
        HttpAuth *a;

        if (!c)
                return;
        a = c->auth;
        if (c->prev)
                c->prev->next = c->next;
        else if (a->checks == c)
                a->checks = c->next;
        if (c->next)
                c->next->prev = c->prev;
        if (c->request)
                kube_request_cancel(c->request);
        erase_and_free(c->token);
        free(c->verb);
        free(c->group);
        free(c->resource);
        free(c->subresource);
        free(c->namespace);
        free(c->name);
        kube_user_info_done(&c->user);
        free(c->body);
        free(c);
}

/* SHA-256 of the token and the attributes, each followed by a NUL (none of
 * them holds one), so that no two different requests share a key. */
static int cache_key(const char *token, const KubeResourceAttributes *at, uint8_t key[static KEY_SIZE]) {
        const char *parts[] = { token,
                                at->verb,
                                strempty(at->group),
                                at->resource,
                                strempty(at->subresource),
                                strempty(at->namespace),
                                strempty(at->name) };
        _cleanup_free_ char *buf = NULL;
        size_t n = 0, k = 0;

        for (size_t i = 0; i < ELEMENTSOF(parts); i++)
                n += strlen(parts[i]) + 1;
        buf = malloc(n);
        if (!buf)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(parts); i++) {
                size_t l = strlen(parts[i]) + 1;
                memcpy(buf + k, parts[i], l);
                k += l;
        }
        int g = gnutls_hash_fast(GNUTLS_DIG_SHA256, buf, n, key);
        explicit_bzero(buf, n);
        return g < 0 ? -EIO : 0;
}

static bool cache_lookup(HttpAuth *a, const uint8_t key[static KEY_SIZE], uint64_t now) {
        for (size_t i = 0; i < HTTP_AUTH_CACHE_MAX; i++)
                if (a->cache[i].expires > now && memcmp(a->cache[i].key, key, KEY_SIZE) == 0)
                        return true;
        return false;
}

static void cache_add(HttpAuth *a, const uint8_t key[static KEY_SIZE], uint64_t now) {
        size_t victim = 0;

        /* A free or expired slot, else the one that expires first. */
        for (size_t i = 0; i < HTTP_AUTH_CACHE_MAX; i++) {
                if (a->cache[i].expires <= now) {
                        victim = i;
                        break;
                }
                if (a->cache[i].expires < a->cache[victim].expires)
                        victim = i;
        }
        memcpy(a->cache[victim].key, key, KEY_SIZE);
        a->cache[victim].expires = now + HTTP_AUTH_CACHE_USEC;
}

static void check_finish(HttpAuthCheck *c, HttpAuthResult result, const char *message) {
        HttpAuthDone done = c->done;
        void *userdata = c->userdata;

        if (result == HTTP_AUTH_ALLOWED) {
                cache_add(c->auth, c->key, now_usec(CLOCK_MONOTONIC));
                c->auth->stats.cached++;
        }
        check_free(c);
        done(result, message, userdata);
}

static int on_data(KubeRequest *r, const char *data, size_t size, void *userdata) {
        HttpAuthCheck *c = userdata;
        char *b;

        if (c->size + size > KUBE_REVIEW_BODY_MAX)
                return -EFBIG;
        b = realloc(c->body, c->size + size + 1);
        if (!b)
                return -ENOMEM;
        memcpy(b + c->size, data, size);
        c->size += size;
        b[c->size] = 0;
        c->body = b;
        return 0;
}

/* The API server's answer to a review, as a failure message; NULL when it is one to read. */
static char *review_failure(KubeRequest *r, const char *what, long status, int error) {
        char *m = NULL;

        if (error < 0)
                (void) asprintf(&m, "%s failed: %s%s%s", what, strerror(-error),
                                *kube_request_get_error_message(r) ? ": " : "",
                                kube_request_get_error_message(r));
        else if (status < 200 || status > 299)
                (void) asprintf(
                        &m, "%s failed: HTTP %ld (does the agent's ServiceAccount have \"create\" on it?)",
                        what, status);
        else
                return NULL;
        return m ?: strdup(what);
}

static void on_access_review(KubeRequest *r, long status, int error, void *userdata) {
        HttpAuthCheck *c = userdata;
        _cleanup_free_ char *failure = NULL, *reason = NULL, *perror = NULL, *msg = NULL;
        bool allowed = false;
        int k;

        c->request = NULL;
        failure = review_failure(r, "SubjectAccessReview", status, error);
        if (failure)
                return check_finish(c, HTTP_AUTH_FAILED, failure);
        k = kube_access_review_parse(c->body, c->size, &allowed, &reason, &perror);
        if (k < 0)
                return check_finish(c, HTTP_AUTH_FAILED,
                                    perror ?: "SubjectAccessReview: cannot read the answer");
        if (allowed)
                return check_finish(c, HTTP_AUTH_ALLOWED, "allowed");
        (void) asprintf(&msg, "%s may not %s %s%s%s%s%s%s%s%s", c->user.username, c->verb, c->resource,
                        c->subresource ? "/" : "", strempty(c->subresource),
                        c->namespace ? " in namespace " : "", strempty(c->namespace), c->name ? " (" : "",
                        strempty(c->name), c->name ? ")" : "");
        check_finish(c, HTTP_AUTH_DENIED, msg ?: "denied");
}

static void on_token_review(KubeRequest *r, long status, int error, void *userdata) {
        HttpAuthCheck *c = userdata;
        _cleanup_free_ char *failure = NULL, *perror = NULL, *json = NULL;
        KubeResourceAttributes at;
        bool authenticated = false;
        int k;

        c->request = NULL;
        failure = review_failure(r, "TokenReview", status, error);
        if (failure)
                return check_finish(c, HTTP_AUTH_FAILED, failure);
        k = kube_token_review_parse(c->body, c->size, NULL, &authenticated, &c->user, &perror);
        if (k < 0)
                return check_finish(c, HTTP_AUTH_FAILED, perror ?: "TokenReview: cannot read the answer");
        if (!authenticated)
                return check_finish(c, HTTP_AUTH_UNAUTHENTICATED, "the token is not valid");

        at = (KubeResourceAttributes){
                .verb = c->verb,
                .group = c->group,
                .resource = c->resource,
                .subresource = c->subresource,
                .namespace = c->namespace,
                .name = c->name,
        };
        k = kube_access_review_request(&c->user, &at, &json);
        if (k >= 0) {
                free(c->body);
                c->body = NULL;
                c->size = 0;
                c->auth->stats.access_reviews++;
                k = kube_client_post(c->auth->kube, "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                                     json, HTTP_AUTH_STALL_SEC, on_data, on_access_review, c, &c->request);
        }
        if (k < 0)
                check_finish(c, HTTP_AUTH_FAILED, "cannot ask for a SubjectAccessReview");
}

static int dup_opt(const char *s, char **ret) {
        if (!s || s[0] == 0) {
                *ret = NULL;
                return 0;
        }
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

int http_auth_check(HttpAuth *a, const char *token, const KubeResourceAttributes *attrs, HttpAuthDone done,
                    void *userdata, HttpAuthCheck **ret) {
        _cleanup_free_ char *json = NULL;
        HttpAuthCheck *c;
        uint8_t key[KEY_SIZE];
        int r;

        if (!a || !token || !attrs || !attrs->verb || !attrs->resource || !done)
                return -EINVAL;
        if (strlen(token) > HTTP_AUTH_TOKEN_MAX)
                return -E2BIG;
        r = cache_key(token, attrs, key);
        if (r < 0)
                return r;
        if (cache_lookup(a, key, now_usec(CLOCK_MONOTONIC))) {
                a->stats.cache_hits++;
                return 1;
        }

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->auth = a;
        c->next = a->checks;
        if (a->checks)
                a->checks->prev = c;
        a->checks = c;
        memcpy(c->key, key, KEY_SIZE);
        c->done = done;
        c->userdata = userdata;
        c->token = strdup(token);
        if (!c->token || dup_opt(attrs->verb, &c->verb) < 0 || dup_opt(attrs->group, &c->group) < 0 ||
            dup_opt(attrs->resource, &c->resource) < 0 || dup_opt(attrs->subresource, &c->subresource) < 0 ||
            dup_opt(attrs->namespace, &c->namespace) < 0 || dup_opt(attrs->name, &c->name) < 0) {
                check_free(c);
                return -ENOMEM;
        }
        r = kube_token_review_request(token, NULL, &json);
        if (r >= 0) {
                a->stats.token_reviews++;
                r = kube_client_post(a->kube, "/apis/authentication.k8s.io/v1/tokenreviews", json,
                                     HTTP_AUTH_STALL_SEC, on_data, on_token_review, c, &c->request);
        }
        if (json)
                explicit_bzero(json, strlen(json));
        if (r < 0) {
                check_free(c);
                return r;
        }
        if (ret)
                *ret = c;
        return 0;
}

void http_auth_check_cancel(HttpAuthCheck *c) {
        check_free(c);
}

int http_auth_new(KubeClient *kube, HttpAuth **ret) {
        HttpAuth *a;

        if (!kube || !ret)
                return -EINVAL;
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->kube = kube;
        *ret = a;
        return 0;
}

HttpAuth *http_auth_free(HttpAuth *a) {
        if (!a)
                return NULL;
        while (a->checks)
                check_free(a->checks);
        explicit_bzero(a->cache, sizeof(a->cache));
        free(a);
        return NULL;
}

void http_auth_stats(const HttpAuth *a, HttpAuthStats *ret) {
        *ret = a ? a->stats : (HttpAuthStats){};
}
