/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Bearer tokens: TokenReview, then SubjectAccessReview, with caches of
 * tokens and of decisions, reviews shared while in flight, and a rate of
 * reviews per client address. See http-auth.h. */
#include <assert.h>

#include "auth-cache.h"
#include "http-auth.h"
#include "log.h"
#include "rate-limit.h"

#define TOKEN_REVIEWS "/apis/authentication.k8s.io/v1/tokenreviews"
#define ACCESS_REVIEWS "/apis/authorization.k8s.io/v1/subjectaccessreviews"

typedef enum ReviewKind {
        REVIEW_TOKEN,
        REVIEW_ACCESS,
} ReviewKind;

typedef struct Review Review;

struct HttpAuthCheck {
        HttpAuth *auth;
        Review *review; /* the one it waits for */
        HttpAuthCheck *prev, *next; /* in review->waiters */
        char *source;
        char *verb, *group, *resource, *subresource, *namespace, *name;
        bool charged; /* a review was counted against source already */
        bool has_user;
        KubeUserInfo user;
        uint8_t identity[AUTH_KEY_SIZE], owner[AUTH_KEY_SIZE];
        HttpAuthDone done;
        void *userdata;
};

/* One POST to the API server, and the checks that wait for its answer. */
struct Review {
        HttpAuth *auth;
        Review *prev, *next; /* in auth->reviews while a check may join it */
        bool listed;
        bool finishing; /* its checks are being answered: only that loop frees it */
        ReviewKind kind;
        uint8_t key[AUTH_KEY_SIZE]; /* the token's, or the decision's */
        uint8_t owner[AUTH_KEY_SIZE]; /* a decision's: the user's */
        KubeRequest *request;
        char *body;
        size_t size;
        HttpAuthCheck *waiters;
};

struct HttpAuth {
        KubeClient *kube;
        char **audiences;
        uint64_t (*now)(void);
        Review *reviews;
        AuthCache tokens, bad_tokens, decisions;
        RateLimit *sources;
        HttpAuthStats stats;
};

static const uint8_t nobody[AUTH_KEY_SIZE] = {};

static uint64_t auth_now(const HttpAuth *a) {
        return a->now ? a->now() : now_usec(CLOCK_MONOTONIC);
}

static void review_free(Review *rv) {
        if (!rv)
                return;
        if (rv->listed)
                LIST_REMOVE(rv->auth->reviews, rv);
        if (rv->request)
                kube_request_cancel(rv->request);
        free(rv->body);
        free(rv);
}

static void check_free(HttpAuthCheck *c) {
        Review *rv;

        if (!c)
                return;
        rv = c->review;
        if (rv) {
                LIST_REMOVE(rv->waiters, c);
                c->review = NULL;
                /* Nobody waits for it any more. */
                if (!rv->waiters && !rv->finishing)
                        review_free(rv);
        }
        free(c->source);
        free(c->verb);
        free(c->group);
        free(c->resource);
        free(c->subresource);
        free(c->namespace);
        free(c->name);
        kube_user_info_done(&c->user);
        free(c);
}

static void check_wait(HttpAuthCheck *c, Review *rv) {
        LIST_PREPEND(rv->waiters, c);
        c->review = rv;
}

/* Answers the check (which waits for nothing now) and frees it. */
static void check_finish(HttpAuthCheck *c, HttpAuthResult result, const char *message, uint64_t retry_usec) {
        HttpAuthOutcome o = {
                .result = result,
                .message = message,
                .username = c->has_user && (result == HTTP_AUTH_ALLOWED || result == HTTP_AUTH_DENIED)
                                    ? c->user.username
                                    : NULL,
                .retry_after_usec = retry_usec,
        };

        assert(!c->review);
        c->done(&o, c->userdata);
        check_free(c);
}

static KubeResourceAttributes check_attrs(const HttpAuthCheck *c) {
        return (KubeResourceAttributes){
                .verb = c->verb,
                .group = c->group,
                .resource = c->resource,
                .subresource = c->subresource,
                .namespace = c->namespace,
                .name = c->name,
        };
}

static void check_answer_access(HttpAuthCheck *c, bool allowed) {
        _cleanup_free_ char *msg = NULL;

        if (allowed)
                return check_finish(c, HTTP_AUTH_ALLOWED, "allowed", 0);
        (void) asprintf(&msg, "%s may not %s %s%s%s%s%s%s%s%s", c->user.username, c->verb, c->resource,
                        c->subresource ? "/" : "", strempty(c->subresource),
                        c->namespace ? " in namespace " : "", strempty(c->namespace), c->name ? " (" : "",
                        strempty(c->name), c->name ? ")" : "");
        check_finish(c, HTTP_AUTH_DENIED, msg ?: "denied", 0);
}

/* Counts a review against the check's address: false (the check answered)
 * past its rate. A check counts once, whatever it costs. */
static bool check_charge(HttpAuthCheck *c) {
        uint64_t wait = 0;

        if (c->charged)
                return true;
        if (!rate_limit_take(c->auth->sources, c->source, auth_now(c->auth), &wait)) {
                c->auth->stats.rate_limited++;
                check_finish(c, HTTP_AUTH_RATE_LIMITED, "too many requests to review from this address",
                             wait);
                return false;
        }
        c->charged = true;
        return true;
}

static int check_set_user(HttpAuthCheck *c, const KubeUserInfo *user, const uint8_t *identity,
                          const uint8_t *owner) {
        int r;

        kube_user_info_done(&c->user);
        c->has_user = false;
        r = kube_user_info_copy(user, &c->user);
        if (r < 0)
                return r;
        memcpy(c->identity, identity, AUTH_KEY_SIZE);
        memcpy(c->owner, owner, AUTH_KEY_SIZE);
        c->has_user = true;
        return 0;
}

static int on_review_data(KubeRequest *r, const char *data, size_t size, void *userdata) {
        Review *rv = userdata;
        char *b;

        if (rv->size + size > KUBE_REVIEW_BODY_MAX)
                return -EFBIG;
        b = realloc(rv->body, rv->size + size + 1);
        if (!b)
                return -ENOMEM;
        memcpy(b + rv->size, data, size);
        rv->size += size;
        b[rv->size] = 0;
        rv->body = b;
        return 0;
}

static void on_review_done(KubeRequest *r, long status, int error, void *userdata);

static Review *review_find(HttpAuth *a, ReviewKind kind, const uint8_t key[static AUTH_KEY_SIZE]) {
        for (Review *rv = a->reviews; rv; rv = rv->next)
                if (rv->kind == kind && memcmp(rv->key, key, AUTH_KEY_SIZE) == 0)
                        return rv;
        return NULL;
}

static int review_start(HttpAuth *a, ReviewKind kind, const uint8_t key[static AUTH_KEY_SIZE],
                        const uint8_t owner[static AUTH_KEY_SIZE], const char *json, Review **ret) {
        Review *rv;
        int r;

        rv = calloc(1, sizeof(*rv));
        if (!rv)
                return -ENOMEM;
        rv->auth = a;
        rv->kind = kind;
        memcpy(rv->key, key, AUTH_KEY_SIZE);
        memcpy(rv->owner, owner, AUTH_KEY_SIZE);
        r = kube_client_post(a->kube, kind == REVIEW_TOKEN ? TOKEN_REVIEWS : ACCESS_REVIEWS, json,
                             HTTP_AUTH_STALL_SEC, on_review_data, on_review_done, rv, &rv->request);
        if (r < 0) {
                free(rv);
                return r;
        }
        LIST_PREPEND(a->reviews, rv);
        rv->listed = true;
        if (kind == REVIEW_TOKEN)
                a->stats.token_reviews++;
        else
                a->stats.access_reviews++;
        *ret = rv;
        return 0;
}

/* The user is known: the decision, from the cache, the review in flight or
 * a new one. 1: answered; 0: waiting. */
static int check_decide(HttpAuthCheck *c) {
        HttpAuth *a = c->auth;
        const KubeResourceAttributes at = check_attrs(c);
        _cleanup_free_ char *json = NULL;
        uint8_t key[AUTH_KEY_SIZE];
        AuthCacheEntry *e;
        Review *rv;
        int r;

        r = auth_decision_key(c->identity, &at, key);
        if (r < 0) {
                check_finish(c, HTTP_AUTH_FAILED, "cannot ask for a SubjectAccessReview", 0);
                return 1;
        }
        e = auth_cache_get(&a->decisions, key, auth_now(a));
        if (e) {
                a->stats.decision_hits++;
                check_answer_access(c, e->value == HTTP_AUTH_ALLOWED);
                return 1;
        }
        rv = review_find(a, REVIEW_ACCESS, key);
        if (rv) {
                a->stats.joined++;
                check_wait(c, rv);
                return 0;
        }
        if (!check_charge(c))
                return 1;
        r = kube_access_review_request(&c->user, &at, &json);
        if (r >= 0)
                r = review_start(a, REVIEW_ACCESS, key, c->owner, json, &rv);
        if (r < 0) {
                check_finish(c, HTTP_AUTH_FAILED, "cannot ask for a SubjectAccessReview", 0);
                return 1;
        }
        check_wait(c, rv);
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

static HttpAuthCheck *review_pop(Review *rv) {
        HttpAuthCheck *c = rv->waiters;

        if (c) {
                LIST_REMOVE(rv->waiters, c);
                c->review = NULL;
        }
        return c;
}

static void review_answer_all(Review *rv, HttpAuthResult result, const char *message) {
        HttpAuthCheck *c;

        while ((c = review_pop(rv)))
                check_finish(c, result, message, 0);
}

static void token_review_done(Review *rv, KubeRequest *r, long status, int error) {
        HttpAuth *a = rv->auth;
        _cleanup_free_ char *failure = NULL, *perror = NULL;
        _cleanup_(kube_user_info_done) KubeUserInfo user = {};
        uint8_t identity[AUTH_KEY_SIZE], owner[AUTH_KEY_SIZE];
        uint64_t now = auth_now(a);
        bool authenticated = false;
        AuthCacheEntry *e;
        HttpAuthCheck *c;
        int k;

        failure = review_failure(r, "TokenReview", status, error);
        if (failure)
                return review_answer_all(rv, HTTP_AUTH_FAILED, failure);
        k = kube_token_review_parse(rv->body, rv->size, a->audiences, &authenticated, &user, &perror);
        if (k < 0)
                return review_answer_all(rv, HTTP_AUTH_FAILED,
                                         perror ?: "TokenReview: cannot read the answer");
        if (!authenticated) {
                /* Remembered a short while: the same bad token again costs
                 * no review, and a token made valid later (none is: a
                 * token's validity only ends) waits at most that long. */
                e = auth_cache_put(&a->bad_tokens, rv->key, nobody, now);
                e->value = HTTP_AUTH_UNAUTHENTICATED;
                e->expires = now + HTTP_AUTH_NEGATIVE_USEC;
                return review_answer_all(rv, HTTP_AUTH_UNAUTHENTICATED, "the token is not valid");
        }
        k = auth_user_keys(&user, identity, owner);
        if (k < 0)
                return review_answer_all(rv, HTTP_AUTH_FAILED, "TokenReview: cannot keep the user");
        e = auth_cache_put(&a->tokens, rv->key, owner, now);
        if (kube_user_info_copy(&user, &e->user) >= 0) {
                memcpy(e->identity, identity, AUTH_KEY_SIZE);
                e->value = HTTP_AUTH_ALLOWED;
                e->expires = now + HTTP_AUTH_CACHE_USEC;
        }
        while ((c = review_pop(rv))) {
                if (check_set_user(c, &user, identity, owner) < 0) {
                        check_finish(c, HTTP_AUTH_FAILED, "out of memory", 0);
                        continue;
                }
                (void) check_decide(c);
        }
}

static void access_review_done(Review *rv, KubeRequest *r, long status, int error) {
        HttpAuth *a = rv->auth;
        _cleanup_free_ char *failure = NULL, *reason = NULL, *perror = NULL;
        uint64_t now = auth_now(a);
        bool allowed = false;
        AuthCacheEntry *e;
        HttpAuthCheck *c;
        int k;

        failure = review_failure(r, "SubjectAccessReview", status, error);
        if (failure)
                return review_answer_all(rv, HTTP_AUTH_FAILED, failure);
        k = kube_access_review_parse(rv->body, rv->size, &allowed, &reason, &perror);
        if (k < 0)
                return review_answer_all(rv, HTTP_AUTH_FAILED,
                                         perror ?: "SubjectAccessReview: cannot read the answer");
        /* A denial is remembered too, shortly: a client that asks again and
         * again for what it may not (a scraper's target it was never
         * granted, retried each interval, or one that probes) costs one
         * review per HTTP_AUTH_NEGATIVE_USEC, and a binding granted meanwhile
         * takes effect that much later at most (Kubernetes' own webhook
         * authorizer keeps a denial 30 s). */
        e = auth_cache_put(&a->decisions, rv->key, rv->owner, now);
        e->value = allowed ? HTTP_AUTH_ALLOWED : HTTP_AUTH_DENIED;
        e->expires = now + (allowed ? HTTP_AUTH_CACHE_USEC : HTTP_AUTH_NEGATIVE_USEC);
        while ((c = review_pop(rv)))
                check_answer_access(c, allowed);
}

static void on_review_done(KubeRequest *r, long status, int error, void *userdata) {
        Review *rv = userdata;

        rv->request = NULL;
        /* No check joins it from now on, and none of its checks' answers frees it. */
        LIST_REMOVE(rv->auth->reviews, rv);
        rv->listed = false;
        rv->finishing = true;
        if (rv->kind == REVIEW_TOKEN)
                token_review_done(rv, r, status, error);
        else
                access_review_done(rv, r, status, error);
        review_answer_all(rv, HTTP_AUTH_FAILED, "the review's answer was lost");
        review_free(rv);
}

static int dup_opt(const char *s, char **ret) {
        if (!s || s[0] == 0) {
                *ret = NULL;
                return 0;
        }
        *ret = strdup(s);
        return *ret ? 0 : -ENOMEM;
}

static HttpAuthCheck *check_new(HttpAuth *a, const char *source, const KubeResourceAttributes *attrs,
                                HttpAuthDone done, void *userdata) {
        HttpAuthCheck *c = calloc(1, sizeof(*c));

        if (!c)
                return NULL;
        c->auth = a;
        c->done = done;
        c->userdata = userdata;
        if (dup_opt(source, &c->source) < 0 || dup_opt(attrs->verb, &c->verb) < 0 ||
            dup_opt(attrs->group, &c->group) < 0 || dup_opt(attrs->resource, &c->resource) < 0 ||
            dup_opt(attrs->subresource, &c->subresource) < 0 ||
            dup_opt(attrs->namespace, &c->namespace) < 0 || dup_opt(attrs->name, &c->name) < 0) {
                check_free(c);
                return NULL;
        }
        return c;
}

int http_auth_check(HttpAuth *a, const char *token, const char *source, const KubeResourceAttributes *attrs,
                    HttpAuthDone done, void *userdata, HttpAuthCheck **ret) {
        _cleanup_free_ char *json = NULL;
        uint8_t key[AUTH_KEY_SIZE];
        uint64_t now;
        AuthCacheEntry *e;
        HttpAuthCheck *c;
        Review *rv;
        int r;

        if (!a || !token || !attrs || !attrs->verb || !attrs->resource || !done)
                return -EINVAL;
        if (strlen(token) > HTTP_AUTH_TOKEN_MAX)
                return -E2BIG;
        r = auth_token_key(token, key);
        if (r < 0)
                return r;
        c = check_new(a, source, attrs, done, userdata);
        if (!c)
                return -ENOMEM;

        now = auth_now(a);
        if (auth_cache_get(&a->bad_tokens, key, now)) {
                a->stats.bad_token_hits++;
                check_finish(c, HTTP_AUTH_UNAUTHENTICATED, "the token is not valid", 0);
                return 1;
        }
        e = auth_cache_get(&a->tokens, key, now);
        if (e) {
                a->stats.token_hits++;
                r = check_set_user(c, &e->user, e->identity, e->owner);
                if (r < 0) {
                        check_free(c);
                        return r;
                }
                r = check_decide(c);
        } else if ((rv = review_find(a, REVIEW_TOKEN, key))) {
                a->stats.joined++;
                check_wait(c, rv);
                r = 0;
        } else if (!check_charge(c))
                r = 1;
        else {
                r = kube_token_review_request(token, a->audiences, &json);
                if (r >= 0)
                        r = review_start(a, REVIEW_TOKEN, key, nobody, json, &rv);
                if (json)
                        explicit_bzero(json, strlen(json));
                if (r < 0) {
                        check_free(c);
                        return r;
                }
                check_wait(c, rv);
        }
        if (r == 0 && ret)
                *ret = c;
        return r;
}

void http_auth_check_cancel(HttpAuthCheck *c) {
        check_free(c);
}

int http_auth_new(KubeClient *kube, const HttpAuthOptions *o, HttpAuth **ret) {
        _cleanup_(http_auth_freep) HttpAuth *a = NULL;
        const HttpAuthOptions none = {};
        int r;

        if (!kube || !ret)
                return -EINVAL;
        o = o ?: &none;
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->kube = kube;
        a->now = o->now;
        if (o->audiences && o->audiences[0]) {
                a->audiences = strv_copy(o->audiences);
                if (!a->audiences)
                        return -ENOMEM;
        }
        r = auth_cache_init(&a->tokens, HTTP_AUTH_TOKENS_MAX, HTTP_AUTH_TOKENS_PER_USER);
        if (r >= 0)
                r = auth_cache_init(&a->bad_tokens, HTTP_AUTH_BAD_TOKENS_MAX, 0);
        if (r >= 0)
                r = auth_cache_init(&a->decisions, HTTP_AUTH_CACHE_MAX, HTTP_AUTH_DECISIONS_PER_USER);
        if (r >= 0)
                r = rate_limit_new(o->reviews_per_second, MAX(o->review_burst, 1u), HTTP_AUTH_SOURCES_MAX,
                                   &a->sources);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(a);
        return 0;
}

HttpAuth *http_auth_free(HttpAuth *a) {
        if (!a)
                return NULL;
        while (a->reviews) {
                Review *rv = a->reviews;

                rv->finishing = true;
                while (rv->waiters)
                        check_free(rv->waiters);
                review_free(rv);
        }
        auth_cache_done(&a->tokens);
        auth_cache_done(&a->bad_tokens);
        auth_cache_done(&a->decisions);
        rate_limit_free(a->sources);
        strv_free(a->audiences);
        free(a);
        return NULL;
}

void http_auth_stats(const HttpAuth *a, HttpAuthStats *ret) {
        *ret = a ? a->stats : (HttpAuthStats){};
}
