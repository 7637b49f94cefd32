/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* common/kube/kube-review.c: a TokenReview's audiences, asked and checked,
 * and a user's copy. */
#include "kube-review.h"
#include "tests.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

static const char *const reviewed =
        "{\"kind\":\"TokenReview\",\"status\":{\"authenticated\":true,"
        "\"user\":{\"username\":\"system:serviceaccount:a:puller\",\"uid\":\"u-1\","
        "\"groups\":[\"system:serviceaccounts\",\"system:serviceaccounts:a\"],"
        "\"extra\":{\"authentication.kubernetes.io/pod-name\":[\"p\"]}},"
        "\"audiences\":[\"other\",\"cgprof\"]}}";

TEST(request_audiences) {
        char *const audiences[] = { (char *) "cgprof", (char *) "cgprof-2", NULL };
        _cleanup_free_ char *json = NULL, *plain = NULL;
        _cleanup_(cJSON_Deletep) cJSON *j = NULL, *p = NULL;
        const cJSON *a;

        ASSERT_OK(kube_token_review_request("t0k3n", audiences, &json));
        j = cJSON_Parse(json);
        ASSERT_NOT_NULL(j);
        a = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "spec"), "audiences");
        ASSERT_EQ(cJSON_GetArraySize(a), 2);
        ASSERT_STREQ(cJSON_GetArrayItem(a, 0)->valuestring, "cgprof");
        ASSERT_STREQ(cJSON_GetArrayItem(a, 1)->valuestring, "cgprof-2");

        /* None: no spec.audiences (the API server's own). */
        ASSERT_OK(kube_token_review_request("t0k3n", NULL, &plain));
        p = cJSON_Parse(plain);
        ASSERT_NOT_NULL(p);
        ASSERT_NULL(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "spec"), "audiences"));
        ASSERT_STREQ(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(p, "spec"), "token")
                             ->valuestring,
                     "t0k3n");
}

static bool parse(const char *body, char *const *audiences) {
        _cleanup_(kube_user_info_done) KubeUserInfo u = {};
        _cleanup_free_ char *error = NULL;
        bool ok = false;

        ASSERT_OK(kube_token_review_parse(body, strlen(body), audiences, &ok, &u, &error));
        ASSERT_TRUE(!ok || streq(u.username, "system:serviceaccount:a:puller"));
        return ok;
}

TEST(parse_audiences) {
        char *const cgprof[] = { (char *) "cgprof", NULL }, *const api[] = { (char *) "https://api", NULL },
                    *const none[] = { NULL };
        static const char *const no_audiences =
                "{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"system:serviceaccount:a:"
                "puller\"}}}";
        _cleanup_(kube_user_info_done) KubeUserInfo u = {};
        _cleanup_free_ char *error = NULL;
        bool ok = true;

        ASSERT_TRUE(parse(reviewed, NULL));
        ASSERT_TRUE(parse(reviewed, none));
        ASSERT_TRUE(parse(reviewed, cgprof));
        /* Authenticated, but for none of the audiences asked: not valid here. */
        ASSERT_FALSE(parse(reviewed, api));
        /* An answer that names no audience is none of ours. */
        ASSERT_TRUE(parse(no_audiences, NULL));
        ASSERT_FALSE(parse(no_audiences, cgprof));
        /* A malformed status.audiences is an error, not a guess. */
        static const char *const bad = "{\"status\":{\"authenticated\":true,\"user\":{\"username\":\"x\"},"
                                       "\"audiences\":\"cgprof\"}}";
        ASSERT_ERROR(kube_token_review_parse(bad, strlen(bad), cgprof, &ok, &u, &error), EBADMSG);
        ASSERT_TRUE(strstr(error, "status.audiences"));
}

TEST(user_copy) {
        _cleanup_(kube_user_info_done) KubeUserInfo u = {}, c = {};
        _cleanup_free_ char *error = NULL, *a = NULL, *b = NULL;
        const KubeResourceAttributes at = { .verb = "get", .resource = "pods", .namespace = "a" };
        bool ok = false;

        ASSERT_OK(kube_token_review_parse(reviewed, strlen(reviewed), NULL, &ok, &u, &error));
        ASSERT_TRUE(ok);
        ASSERT_OK(kube_user_info_copy(&u, &c));
        ASSERT_STREQ(c.username, u.username);
        ASSERT_STREQ(c.uid, "u-1");
        ASSERT_TRUE(c.groups != u.groups && cJSON_Compare(c.groups, u.groups, true));
        ASSERT_TRUE(c.extra != u.extra && cJSON_Compare(c.extra, u.extra, true));
        /* The same SubjectAccessReview from either. */
        ASSERT_OK(kube_access_review_request(&u, &at, &a));
        ASSERT_OK(kube_access_review_request(&c, &at, &b));
        ASSERT_STREQ(a, b);
        ASSERT_ERROR(kube_user_info_copy(&(const KubeUserInfo){}, &c), EINVAL);
}

DEFINE_TEST_MAIN
