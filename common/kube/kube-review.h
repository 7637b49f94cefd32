/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <cjson/cJSON.h>

#include "macro.h"

/* The two API reviews that authorize a request made with a bearer token:
 * a TokenReview (authentication.k8s.io/v1: who is this token?) and a
 * SubjectAccessReview (authorization.k8s.io/v1: may this user do that?).
 * Building the requests and reading the answers only: no I/O. The answers
 * are outside input (a compromised or confused API server): every field is
 * type-checked, sizes are bounded, and anything unexpected is an error,
 * never an "allowed". */

#define KUBE_REVIEW_BODY_MAX (1024U * 1024U)
#define KUBE_REVIEW_GROUPS_MAX 1024U

typedef struct KubeUserInfo {
        char *username, *uid; /* uid: "" when none */
        cJSON *groups; /* array of strings, or NULL */
        cJSON *extra; /* object of string arrays, or NULL */
} KubeUserInfo;

void kube_user_info_done(KubeUserInfo *u);
/* A deep copy of src into *ret (-ENOMEM). */
int kube_user_info_copy(const KubeUserInfo *src, KubeUserInfo *ret);

/* What a SubjectAccessReview asks: resourceAttributes when resource is
 * set; namespace "" for a cluster-scoped resource (nodes). */
typedef struct KubeResourceAttributes {
        const char *verb, *group, *resource, *subresource, *namespace, *name;
} KubeResourceAttributes;

/* audiences (NULL-terminated, may be NULL or empty): spec.audiences, the
 * audiences the token must be valid for (the API server's own when none). */
#define KUBE_REVIEW_AUDIENCES_MAX 16U
int kube_token_review_request(const char *token, char *const *audiences, char **ret_json);
/* 0 with *ret_authenticated and (when authenticated) *ret_user; -EBADMSG
 * with a message when the body is not a TokenReview's status. With
 * audiences (those of the request), a token is authenticated only when
 * status.audiences names one of them (as Kubernetes' webhook token
 * authenticator checks): an authenticator that ignored spec.audiences
 * does not make a token of another audience valid here. */
int kube_token_review_parse(const char *body, size_t size, char *const *audiences, bool *ret_authenticated,
                            KubeUserInfo *ret_user, char **ret_error);

int kube_access_review_request(const KubeUserInfo *user, const KubeResourceAttributes *a, char **ret_json);
/* 0 with *ret_allowed; *ret_reason (malloc()ed, may be NULL) is the
 * server's reason or evaluationError. -EBADMSG when malformed. */
int kube_access_review_parse(const char *body, size_t size, bool *ret_allowed, char **ret_reason,
                             char **ret_error);
