/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "kube.h"
#include "kube-review.h"

/* Who may pull a profile: a request's bearer token, checked by the API
 * server with a TokenReview, then its user authorized with a
 * SubjectAccessReview for the attributes of what it asks (docs/pull.md).
 * Both are POSTs on the agent's Kubernetes client (libcurl multi on the
 * loop): nothing blocks. What they cost the API server is bounded:
 *
 * - tokens: the SHA-256 of a token (never the token) -> its user (name,
 *   uid, groups, extra, as the TokenReview said) for HTTP_AUTH_CACHE_USEC,
 *   at most HTTP_AUTH_TOKENS_PER_USER tokens per user name; a token the
 *   review did not take, for HTTP_AUTH_NEGATIVE_USEC in a table of its own
 *   (HTTP_AUTH_BAD_TOKENS_MAX), so that the same bad token again costs no
 *   review and bad tokens evict no good one;
 * - decisions: (user, attributes) -> allowed for HTTP_AUTH_CACHE_USEC,
 *   denied for HTTP_AUTH_NEGATIVE_USEC, at most HTTP_AUTH_DECISIONS_PER_USER
 *   per user name: one user asking for many pods replaces its own
 *   decisions, never another's;
 * - reviews in flight: a check that needs the review another check is
 *   waiting for (the same token, the same user and attributes) waits for
 *   that one (a scraper's round of requests at once costs one TokenReview);
 * - a client address (HttpAuthOptions' rate) may cause so many reviews: a
 *   check past it is refused (HTTP_AUTH_RATE_LIMITED) before any review;
 *   answers from the caches cost nothing and are not counted. */

#define HTTP_AUTH_CACHE_USEC (10 * USEC_PER_SEC)
#define HTTP_AUTH_NEGATIVE_USEC (5 * USEC_PER_SEC)
#define HTTP_AUTH_TOKENS_MAX 1024U
#define HTTP_AUTH_TOKENS_PER_USER 16U
#define HTTP_AUTH_BAD_TOKENS_MAX 256U
#define HTTP_AUTH_CACHE_MAX 1024U /* decisions */
#define HTTP_AUTH_DECISIONS_PER_USER 64U
#define HTTP_AUTH_SOURCES_MAX 4096U /* client addresses whose reviews are counted */
#define HTTP_AUTH_TOKEN_MAX (16U * 1024U)
#define HTTP_AUTH_STALL_SEC 10U

typedef enum HttpAuthResult {
        HTTP_AUTH_ALLOWED,
        HTTP_AUTH_DENIED, /* 403 */
        HTTP_AUTH_UNAUTHENTICATED, /* 401: the token is not valid */
        HTTP_AUTH_FAILED, /* the API server could not say (503) */
        HTTP_AUTH_RATE_LIMITED, /* 429: the client's address caused too many reviews */
        _HTTP_AUTH_RESULT_MAX,
        _HTTP_AUTH_RESULT_INVALID = -EINVAL,
} HttpAuthResult;

/* What a check found; valid during the callback only. */
typedef struct HttpAuthOutcome {
        HttpAuthResult result;
        const char *message; /* why (for the log and the answer's body), never the token */
        const char *username; /* the token's user (ALLOWED, DENIED), else NULL */
        uint64_t retry_after_usec; /* RATE_LIMITED: when the address may cause a review again */
} HttpAuthOutcome;

typedef struct HttpAuth HttpAuth;
typedef struct HttpAuthCheck HttpAuthCheck;
typedef void (*HttpAuthDone)(const HttpAuthOutcome *o, void *userdata);

typedef struct HttpAuthOptions {
        /* TokenReview's spec.audiences, and what status.audiences must name
         * one of (kube-review.h); NULL or empty: the API server's own. */
        char *const *audiences;
        /* Reviews one client address may cause: burst at once, then
         * per_second (0: no limit). */
        double reviews_per_second;
        unsigned review_burst;
        /* The clock (CLOCK_MONOTONIC microseconds); NULL: now_usec(). For tests. */
        uint64_t (*now)(void);
} HttpAuthOptions;

typedef struct HttpAuthStats {
        uint64_t token_reviews, access_reviews; /* POSTs to the API server */
        uint64_t token_hits, bad_token_hits, decision_hits; /* answers from the caches */
        uint64_t joined; /* checks that waited for a review another check had asked */
        uint64_t rate_limited; /* checks refused: their address asked too many reviews */
} HttpAuthStats;

int http_auth_new(KubeClient *kube, const HttpAuthOptions *o, HttpAuth **ret);
/* Pending checks are dropped without their callbacks. */
HttpAuth *http_auth_free(HttpAuth *a);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpAuth *, http_auth_free);

/* source: whose reviews these are (rate_limit_source_key() of the client).
 * 1: answered at once (from the caches, or refused by the rate): done was
 * called, before this returned. 0: asked, done is called later (from the
 * loop) exactly once unless cancelled; *ret (if given) is the check until
 * then. < 0: not checked (-E2BIG: the token is longer than
 * HTTP_AUTH_TOKEN_MAX), done is not called. */
int http_auth_check(HttpAuth *a, const char *token, const char *source, const KubeResourceAttributes *attrs,
                    HttpAuthDone done, void *userdata, HttpAuthCheck **ret);
void http_auth_check_cancel(HttpAuthCheck *c);
void http_auth_stats(const HttpAuth *a, HttpAuthStats *ret);
