/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "kube.h"
#include "kube-review.h"

/* Who may pull a profile: a request's bearer token, checked by the API
 * server with a TokenReview, then its user authorized with a
 * SubjectAccessReview for the attributes of what it asks (docs/pull.md).
 * Both are POSTs on the agent's Kubernetes client (libcurl multi on the
 * loop): nothing blocks. An allowed (token, attributes) is remembered for
 * HTTP_AUTH_CACHE_USEC, keyed by the SHA-256 of both (the token itself is
 * not kept), in at most HTTP_AUTH_CACHE_MAX entries; a refusal is never
 * remembered. */

#define HTTP_AUTH_CACHE_USEC (10 * USEC_PER_SEC)
#define HTTP_AUTH_CACHE_MAX 1024U
#define HTTP_AUTH_TOKEN_MAX (16U * 1024U)
#define HTTP_AUTH_STALL_SEC 10U

typedef enum HttpAuthResult {
        HTTP_AUTH_ALLOWED,
        HTTP_AUTH_DENIED, /* 403 */
        HTTP_AUTH_UNAUTHENTICATED, /* 401: the token is not valid */
        HTTP_AUTH_FAILED, /* the API server could not say (503) */
        _HTTP_AUTH_RESULT_MAX,
        _HTTP_AUTH_RESULT_INVALID = -EINVAL,
} HttpAuthResult;

typedef struct HttpAuth HttpAuth;
typedef struct HttpAuthCheck HttpAuthCheck;
/* message: why (for the log and the answer's body), never the token. */
typedef void (*HttpAuthDone)(HttpAuthResult result, const char *message, void *userdata);

typedef struct HttpAuthStats {
        uint64_t cache_hits, token_reviews, access_reviews, cached;
} HttpAuthStats;

int http_auth_new(KubeClient *kube, HttpAuth **ret);
/* Pending checks are dropped without their callbacks. */
HttpAuth *http_auth_free(HttpAuth *a);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpAuth *, http_auth_free);

/* 1: allowed now (from the cache; done is not called). 0: asked, done is
 * called later (from the loop) exactly once unless cancelled; *ret (if
 * given) is the check until then. */
int http_auth_check(HttpAuth *a, const char *token, const KubeResourceAttributes *attrs, HttpAuthDone done,
                    void *userdata, HttpAuthCheck **ret);
void http_auth_check_cancel(HttpAuthCheck *c);
void http_auth_stats(const HttpAuth *a, HttpAuthStats *ret);
