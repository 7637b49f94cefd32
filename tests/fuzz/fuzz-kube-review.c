/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for the API server's answers to the reviews that
 * authorize a pulled profile (common/kube/kube-review.c): the input is
 * read as a TokenReview (with and without audiences asked) and as a
 * SubjectAccessReview. Each parses or fails
 * with -EBADMSG (with a message) or -ENOMEM; nothing malformed is ever
 * "authenticated" with a user lacking a name, or "allowed". An
 * authenticated user is then put in a SubjectAccessReview request, which
 * must be valid JSON naming it.
 * Built by tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include "fuzz.h"
#include "kube-review.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = fuzz_strndup(data, size), *error = NULL, *reason = NULL, *json = NULL;
        _cleanup_(kube_user_info_done) KubeUserInfo user = {};
        bool authenticated = false, allowed = false;
        int r;

        r = kube_token_review_parse(text, size, NULL, &authenticated, &user, &error);
        CHECK(r == 0 || r == -EBADMSG || r == -ENOMEM);
        CHECK(r != -EBADMSG || error);
        {
                /* With audiences asked: never more than without. */
                char *const audiences[] = { (char *) "cgprof", NULL };
                _cleanup_(kube_user_info_done) KubeUserInfo u2 = {};
                _cleanup_free_ char *e2 = NULL;
                bool a2 = false;
                int r2 = kube_token_review_parse(text, size, audiences, &a2, &u2, &e2);

                CHECK(r2 == 0 || r2 == -EBADMSG || r2 == -ENOMEM);
                CHECK(r2 != 0 || !a2 || (r == 0 && authenticated));
        }
        if (r == 0 && authenticated) {
                const KubeResourceAttributes at = { .verb = "get",
                                                    .resource = "pods",
                                                    .subresource = "profile",
                                                    .namespace = "ns",
                                                    .name = "p" };
                _cleanup_(cJSON_Deletep) cJSON *j = NULL;

                CHECK(user.username && user.username[0] && user.uid);
                CHECK(!user.groups || cJSON_IsArray(user.groups));
                CHECK(!user.extra || cJSON_IsObject(user.extra));
                r = kube_access_review_request(&user, &at, &json);
                CHECK(r == 0 || r == -ENOMEM);
                if (r == 0) {
                        j = cJSON_Parse(json);
                        CHECK(j);
                        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(j, "spec");
                        const cJSON *u = cJSON_GetObjectItemCaseSensitive(spec, "user");
                        CHECK(cJSON_IsString(u) && streq(u->valuestring, user.username));
                }
        }
        free(error);
        error = NULL;

        r = kube_access_review_parse(text, size, &allowed, &reason, &error);
        CHECK(r == 0 || r == -EBADMSG || r == -ENOMEM);
        CHECK(r != -EBADMSG || error);
        CHECK(r == 0 || !allowed);
        return 0;
}
