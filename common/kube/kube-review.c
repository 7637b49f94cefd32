/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* TokenReview and SubjectAccessReview bodies: see kube-review.h. */
#include <stdarg.h>

#include "key-path.h"
#include "kube-review.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

static bool isempty(const char *s) {
        return !s || s[0] == 0;
}

void kube_user_info_done(KubeUserInfo *u) {
        if (!u)
                return;
        free(u->username);
        free(u->uid);
        cJSON_Delete(u->groups);
        cJSON_Delete(u->extra);
        *u = (KubeUserInfo){};
}

int kube_user_info_copy(const KubeUserInfo *src, KubeUserInfo *ret) {
        _cleanup_(kube_user_info_done) KubeUserInfo u = {};

        if (!src || !src->username || !ret)
                return -EINVAL;
        u.username = strdup(src->username);
        u.uid = strdup(strempty(src->uid));
        if (!u.username || !u.uid)
                return -ENOMEM;
        if (src->groups && !(u.groups = cJSON_Duplicate(src->groups, true)))
                return -ENOMEM;
        if (src->extra && !(u.extra = cJSON_Duplicate(src->extra, true)))
                return -ENOMEM;
        *ret = u;
        u = (KubeUserInfo){};
        return 0;
}

static int print_json(cJSON *root, char **ret_json) {
        char *s;

        if (!root)
                return -ENOMEM;
        s = cJSON_PrintUnformatted(root);
        cJSON_Delete(root);
        if (!s)
                return -ENOMEM;
        *ret_json = s;
        return 0;
}

static cJSON *review_new(const char *api_version, const char *kind, cJSON **ret_spec) {
        cJSON *root = cJSON_CreateObject(), *spec;

        if (!root || !cJSON_AddStringToObject(root, "apiVersion", api_version) ||
            !cJSON_AddStringToObject(root, "kind", kind) ||
            !(spec = cJSON_AddObjectToObject(root, "spec"))) {
                cJSON_Delete(root);
                return NULL;
        }
        *ret_spec = spec;
        return root;
}

int kube_token_review_request(const char *token, char *const *audiences, char **ret_json) {
        cJSON *spec, *root, *a = NULL;

        if (!token || !ret_json)
                return -EINVAL;
        root = review_new("authentication.k8s.io/v1", "TokenReview", &spec);
        if (root && !cJSON_AddStringToObject(spec, "token", token))
                goto fail;
        if (root && audiences && audiences[0]) {
                if (!(a = cJSON_AddArrayToObject(spec, "audiences")))
                        goto fail;
                for (char *const *i = audiences; *i; i++) {
                        cJSON *s = cJSON_CreateString(*i);
                        if (!s || !cJSON_AddItemToArray(a, s)) {
                                cJSON_Delete(s);
                                goto fail;
                        }
                }
        }
        return print_json(root, ret_json);
fail:
        cJSON_Delete(root);
        return -ENOMEM;
}

/* The "status" object of a review of 'kind', or NULL with *ret_error. */
/* Parses the body of a review of kind: its root (*ret_root, to be deleted) and its status object. */
static int review_parse(const char *body, size_t size, const char *kind, cJSON **ret_root,
                        const cJSON **ret_status, char **ret_error) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        const cJSON *k, *st;

        if (!body || size > KUBE_REVIEW_BODY_MAX)
                return error_message(ret_error, -EBADMSG, "%s: no body, or larger than %u bytes", kind,
                                     KUBE_REVIEW_BODY_MAX);
        root = cJSON_ParseWithLength(body, size);
        if (!root)
                return error_message(ret_error, -EBADMSG, "%s: not valid JSON", kind);
        if (!cJSON_IsObject(root))
                return error_message(ret_error, -EBADMSG, "not a JSON object");
        k = cJSON_GetObjectItemCaseSensitive(root, "kind");
        if (k && (!cJSON_IsString(k) || !streq(k->valuestring, kind)))
                return error_message(ret_error, -EBADMSG, "not a %s", kind);
        st = cJSON_GetObjectItemCaseSensitive(root, "status");
        if (!cJSON_IsObject(st))
                return error_message(ret_error, -EBADMSG, "%s without a status", kind);

        *ret_status = st;
        *ret_root = TAKE_PTR(root);
        return 0;
}

static bool string_array(const cJSON *a, size_t max) {
        const cJSON *i;
        size_t n = 0;

        if (!cJSON_IsArray(a))
                return false;
        cJSON_ArrayForEach (i, a) {
                if (!cJSON_IsString(i) || ++n > max)
                        return false;
        }
        return true;
}

static int parse_user(const cJSON *user, KubeUserInfo *ret, char **ret_error) {
        _cleanup_(kube_user_info_done) KubeUserInfo u = {};
        const cJSON *name, *uid, *groups, *extra, *i;

        if (!cJSON_IsObject(user))
                return error_message(ret_error, -EBADMSG, "TokenReview: authenticated without a user");
        name = cJSON_GetObjectItemCaseSensitive(user, "username");
        if (!cJSON_IsString(name) || name->valuestring[0] == 0)
                return error_message(ret_error, -EBADMSG, "TokenReview: user without a username");
        uid = cJSON_GetObjectItemCaseSensitive(user, "uid");
        if (uid && !cJSON_IsString(uid))
                return error_message(ret_error, -EBADMSG, "TokenReview: user.uid is not a string");
        groups = cJSON_GetObjectItemCaseSensitive(user, "groups");
        if (groups && !string_array(groups, KUBE_REVIEW_GROUPS_MAX))
                return error_message(ret_error, -EBADMSG,
                                     "TokenReview: user.groups is not an array of at most %u strings",
                                     KUBE_REVIEW_GROUPS_MAX);
        extra = cJSON_GetObjectItemCaseSensitive(user, "extra");
        if (extra) {
                if (!cJSON_IsObject(extra))
                        return error_message(ret_error, -EBADMSG,
                                             "TokenReview: user.extra is not an object");
                cJSON_ArrayForEach (i, extra) {
                        if (!string_array(i, KUBE_REVIEW_GROUPS_MAX))
                                return error_message(ret_error, -EBADMSG,
                                                     "TokenReview: user.extra.%s is not an array of strings",
                                                     i->string);
                }
        }
        u.username = strdup(name->valuestring);
        u.uid = strdup(uid ? uid->valuestring : "");
        if (!u.username || !u.uid)
                return -ENOMEM;
        if (groups && !(u.groups = cJSON_Duplicate(groups, true)))
                return -ENOMEM;
        if (extra && !(u.extra = cJSON_Duplicate(extra, true)))
                return -ENOMEM;
        *ret = u;
        u = (KubeUserInfo){};
        return 0;
}

/* Whether status.audiences (an array of strings, checked) names one of want. */
static int audiences_match(const cJSON *st, char *const *want, bool *ret, char **ret_error) {
        const cJSON *have = cJSON_GetObjectItemCaseSensitive(st, "audiences"), *i;

        *ret = false;
        if (!have)
                return 0;
        if (!string_array(have, KUBE_REVIEW_GROUPS_MAX))
                return error_message(ret_error, -EBADMSG,
                                     "TokenReview: status.audiences is not an array of at most %u strings",
                                     KUBE_REVIEW_GROUPS_MAX);
        cJSON_ArrayForEach (i, have)
                for (char *const *w = want; *w; w++)
                        if (streq(i->valuestring, *w)) {
                                *ret = true;
                                return 0;
                        }
        return 0;
}

int kube_token_review_parse(const char *body, size_t size, char *const *audiences, bool *ret_authenticated,
                            KubeUserInfo *ret_user, char **ret_error) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        const cJSON *st, *auth;
        bool match;
        int r;

        r = review_parse(body, size, "TokenReview", &root, &st, ret_error);
        if (r < 0)
                return r;
        auth = cJSON_GetObjectItemCaseSensitive(st, "authenticated");
        if (auth && !cJSON_IsBool(auth))
                return error_message(ret_error, -EBADMSG,
                                     "TokenReview: status.authenticated is not a boolean");
        if (!cJSON_IsTrue(auth)) {
                *ret_authenticated = false;
                return 0;
        }
        if (audiences && audiences[0]) {
                r = audiences_match(st, audiences, &match, ret_error);
                if (r < 0)
                        return r;
                if (!match) {
                        *ret_authenticated = false;
                        return 0;
                }
        }
        r = parse_user(cJSON_GetObjectItemCaseSensitive(st, "user"), ret_user, ret_error);
        if (r < 0)
                return r;
        *ret_authenticated = true;
        return 0;
}

int kube_access_review_request(const KubeUserInfo *user, const KubeResourceAttributes *a, char **ret_json) {
        cJSON *spec, *root, *ra, *x;

        if (!user || !user->username || !a || !a->verb || !a->resource || !ret_json)
                return -EINVAL;
        root = review_new("authorization.k8s.io/v1", "SubjectAccessReview", &spec);
        if (!root)
                return -ENOMEM;
        if (!cJSON_AddStringToObject(spec, "user", user->username) ||
            (!isempty(user->uid) && !cJSON_AddStringToObject(spec, "uid", user->uid)))
                goto fail;
        if (user->groups) {
                if (!(x = cJSON_Duplicate(user->groups, true)) ||
                    !cJSON_AddItemToObject(spec, "groups", x)) {
                        cJSON_Delete(x);
                        goto fail;
                }
        }
        if (user->extra) {
                if (!(x = cJSON_Duplicate(user->extra, true)) || !cJSON_AddItemToObject(spec, "extra", x)) {
                        cJSON_Delete(x);
                        goto fail;
                }
        }
        ra = cJSON_AddObjectToObject(spec, "resourceAttributes");
        if (!ra || !cJSON_AddStringToObject(ra, "verb", a->verb) ||
            !cJSON_AddStringToObject(ra, "group", strempty(a->group)) ||
            !cJSON_AddStringToObject(ra, "resource", a->resource) ||
            (!isempty(a->subresource) && !cJSON_AddStringToObject(ra, "subresource", a->subresource)) ||
            (!isempty(a->namespace) && !cJSON_AddStringToObject(ra, "namespace", a->namespace)) ||
            (!isempty(a->name) && !cJSON_AddStringToObject(ra, "name", a->name)))
                goto fail;
        return print_json(root, ret_json);
fail:
        cJSON_Delete(root);
        return -ENOMEM;
}

int kube_access_review_parse(const char *body, size_t size, bool *ret_allowed, char **ret_reason,
                             char **ret_error) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        const cJSON *st, *allowed, *denied, *reason;
        int r;

        r = review_parse(body, size, "SubjectAccessReview", &root, &st, ret_error);
        if (r < 0)
                return r;
        allowed = cJSON_GetObjectItemCaseSensitive(st, "allowed");
        if (!cJSON_IsBool(allowed))
                return error_message(ret_error, -EBADMSG,
                                     "SubjectAccessReview: status.allowed is not a boolean");
        denied = cJSON_GetObjectItemCaseSensitive(st, "denied");
        if (denied && !cJSON_IsBool(denied))
                return error_message(ret_error, -EBADMSG,
                                     "SubjectAccessReview: status.denied is not a boolean");
        reason = cJSON_GetObjectItemCaseSensitive(st, "reason");
        if (!cJSON_IsString(reason) || reason->valuestring[0] == 0)
                reason = cJSON_GetObjectItemCaseSensitive(st, "evaluationError");
        if (ret_reason) {
                *ret_reason = NULL;
                if (cJSON_IsString(reason) && reason->valuestring[0] != 0 &&
                    !(*ret_reason = strndup(reason->valuestring, 1024)))
                        return -ENOMEM;
        }
        /* "denied" wins: a server may say both. */
        *ret_allowed = cJSON_IsTrue(allowed) && !cJSON_IsTrue(denied);
        return 0;
}
