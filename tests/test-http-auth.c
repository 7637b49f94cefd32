/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* agent/http/http-auth.c against a fake API server (kube_client_post() is
 * this file's): what the caches answer, what reviews each check costs,
 * reviews shared while in flight, a user's share of the decisions, the
 * negative caches, the rate per address and the audiences. Time is the
 * test's clock, moved by hand. */
#include "auth-cache.h"
#include "http-auth.h"
#include "tests.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

/* ---- the fake API server ---- */

struct KubeRequest {
        size_t index;
};

typedef struct Posted {
        char *path, *json;
        KubeDataCallback on_data;
        KubeDoneCallback on_done;
        void *userdata;
        bool cancelled, answered;
        KubeRequest request;
} Posted;

#define POSTED_MAX 8192
static Posted posted[POSTED_MAX];
static size_t n_posted;

int kube_client_post(KubeClient *c, const char *path, const char *json_body, unsigned stall_sec,
                     KubeDataCallback on_data, KubeDoneCallback on_done, void *userdata, KubeRequest **ret) {
        Posted *p;

        ASSERT_TRUE(n_posted < POSTED_MAX);
        p = &posted[n_posted];
        *p = (Posted){ .path = strdup(path),
                       .json = strdup(json_body),
                       .on_data = on_data,
                       .on_done = on_done,
                       .userdata = userdata,
                       .request = { .index = n_posted } };
        ASSERT_TRUE(p->path && p->json);
        n_posted++;
        *ret = &p->request;
        return 0;
}

void kube_request_cancel(KubeRequest *r) {
        posted[r->index].cancelled = true;
}

const char *kube_request_get_error_message(const KubeRequest *r) {
        return "";
}

static void posted_reset(void) {
        for (size_t i = 0; i < n_posted; i++) {
                free(posted[i].path);
                free(posted[i].json);
        }
        n_posted = 0;
}

static size_t count(const char *what) {
        size_t n = 0;

        for (size_t i = 0; i < n_posted; i++)
                n += strstr(posted[i].path, what) != NULL;
        return n;
}
#define TOKEN_REVIEWS() count("tokenreviews")
#define ACCESS_REVIEWS() count("subjectaccessreviews")

static const char *spec_string(const cJSON *j, const char *a, const char *b) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "spec"), a);
        if (b)
                x = cJSON_GetObjectItemCaseSensitive(x, b);
        return cJSON_IsString(x) ? x->valuestring : NULL;
}

/* Tokens "user:NAME[:anything]" are NAME's (audiences "api", or those
 * asked when "aud" is in it), others are not valid. A user may do anything
 * in namespace "a", nothing elsewhere. status 0: 200 with that answer. */
static long server_status;
static void answer(size_t i) {
        Posted *p = &posted[i];
        _cleanup_(cJSON_Deletep) cJSON *j = cJSON_Parse(p->json);
        _cleanup_free_ char *body = NULL;
        long status = server_status ?: 200;

        ASSERT_NOT_NULL(j);
        p->answered = true;
        if (strstr(p->path, "tokenreviews")) {
                const char *t = spec_string(j, "token", NULL);
                char name[64] = "";

                ASSERT_NOT_NULL(t);
                if (strncmp(t, "user:", 5) == 0)
                        snprintf(name, sizeof(name), "%.*s", (int) strcspn(t + 5, ":"), t + 5);
                ASSERT_TRUE(asprintf(&body,
                                     "{\"kind\":\"TokenReview\",\"status\":{\"authenticated\":%s,"
                                     "\"user\":{\"username\":\"%s\",\"groups\":[\"g\"]},"
                                     "\"audiences\":[\"%s\"]}}",
                                     name[0] ? "true" : "false", name,
                                     strstr(t, "aud") ? "cgprof" : "api") >= 0);
        } else {
                const char *ns = spec_string(j, "resourceAttributes", "namespace");
                ASSERT_TRUE(asprintf(&body, "{\"kind\":\"SubjectAccessReview\",\"status\":{\"allowed\":%s}}",
                                     streq_ptr(ns, "a") ? "true" : "false") >= 0);
        }
        if (status == 200)
                ASSERT_OK(p->on_data(&p->request, body, strlen(body), p->userdata));
        p->on_done(&p->request, status, 0, p->userdata);
}

/* Answers every review asked and not answered, those asked meanwhile too. */
static void serve(void) {
        for (size_t i = 0; i < n_posted; i++)
                if (!posted[i].answered && !posted[i].cancelled)
                        answer(i);
}

/* ---- the checks ---- */

static uint64_t clock_now = 1000 * USEC_PER_SEC;
static uint64_t fake_clock(void) {
        return clock_now;
}

typedef struct Answer {
        bool done;
        HttpAuthResult result;
        char username[64];
        uint64_t retry;
        unsigned calls;
} Answer;

static void on_done(const HttpAuthOutcome *o, void *userdata) {
        Answer *a = userdata;

        a->done = true;
        a->calls++;
        a->result = o->result;
        snprintf(a->username, sizeof(a->username), "%s", strempty(o->username));
        a->retry = o->retry_after_usec;
}

static HttpAuth *auth_new(const HttpAuthOptions *extra) {
        HttpAuthOptions o = extra ? *extra : (HttpAuthOptions){};
        HttpAuth *a = NULL;

        posted_reset();
        o.now = fake_clock;
        ASSERT_OK(http_auth_new((KubeClient *) 0x1, &o, &a));
        return a;
}

static int check(HttpAuth *a, const char *token, const char *source, const char *ns, const char *pod,
                 Answer *ans) {
        const KubeResourceAttributes at = {
                .verb = "get", .resource = "pods", .subresource = "profile", .namespace = ns, .name = pod
        };
        *ans = (Answer){};
        return http_auth_check(a, token, source, &at, on_done, ans, NULL);
}

/* A check answered at once (from the caches): its result. */
static HttpAuthResult at_once(HttpAuth *a, const char *token, const char *ns, const char *pod) {
        Answer ans;

        ASSERT_EQ(check(a, token, "10.0.0.1", ns, pod, &ans), 1);
        ASSERT_TRUE(ans.done && ans.calls == 1);
        return ans.result;
}

/* A check answered after the reviews. */
static HttpAuthResult reviewed(HttpAuth *a, const char *token, const char *ns, const char *pod) {
        Answer ans;

        ASSERT_EQ(check(a, token, "10.0.0.1", ns, pod, &ans), 0);
        ASSERT_FALSE(ans.done);
        serve();
        ASSERT_TRUE(ans.done && ans.calls == 1);
        return ans.result;
}

TEST(token_then_decision) {
        _cleanup_(http_auth_freep) HttpAuth *a = auth_new(NULL);
        HttpAuthStats st;
        Answer ans;

        ASSERT_EQ(check(a, "user:alice", "10.0.0.1", "a", "p", &ans), 0);
        ASSERT_EQ(TOKEN_REVIEWS(), 1);
        ASSERT_EQ(ACCESS_REVIEWS(), 0);
        serve();
        ASSERT_EQ(ACCESS_REVIEWS(), 1);
        ASSERT_TRUE(ans.done);
        ASSERT_EQ(ans.result, HTTP_AUTH_ALLOWED);
        ASSERT_STREQ(ans.username, "alice");

        /* Again: from the caches, the username with it. */
        ASSERT_EQ(check(a, "user:alice", "10.0.0.1", "a", "p", &ans), 1);
        ASSERT_EQ(ans.result, HTTP_AUTH_ALLOWED);
        ASSERT_STREQ(ans.username, "alice");
        /* Another pod: the user from the cache of tokens, one review only. */
        ASSERT_EQ(reviewed(a, "user:alice", "a", "q"), HTTP_AUTH_ALLOWED);
        ASSERT_EQ(TOKEN_REVIEWS(), 1);
        ASSERT_EQ(ACCESS_REVIEWS(), 2);
        /* Another namespace: denied (once reviewed, then from the cache). */
        ASSERT_EQ(reviewed(a, "user:alice", "b", "p"), HTTP_AUTH_DENIED);
        ASSERT_EQ(at_once(a, "user:alice", "b", "p"), HTTP_AUTH_DENIED);
        ASSERT_EQ(ACCESS_REVIEWS(), 3);
        /* A denial lasts HTTP_AUTH_NEGATIVE_USEC, an allowed one HTTP_AUTH_CACHE_USEC. */
        clock_now += HTTP_AUTH_NEGATIVE_USEC;
        ASSERT_EQ(at_once(a, "user:alice", "a", "p"), HTTP_AUTH_ALLOWED);
        ASSERT_EQ(reviewed(a, "user:alice", "b", "p"), HTTP_AUTH_DENIED);
        ASSERT_EQ(TOKEN_REVIEWS(), 1);
        clock_now += HTTP_AUTH_CACHE_USEC - HTTP_AUTH_NEGATIVE_USEC;
        ASSERT_EQ(reviewed(a, "user:alice", "a", "p"), HTTP_AUTH_ALLOWED);
        ASSERT_EQ(TOKEN_REVIEWS(), 2);
        ASSERT_EQ(ACCESS_REVIEWS(), 5);

        http_auth_stats(a, &st);
        ASSERT_EQ(st.token_reviews, 2);
        ASSERT_EQ(st.access_reviews, 5);
        ASSERT_EQ(st.token_hits, 6);
        ASSERT_EQ(st.decision_hits, 3);
}

TEST(bad_token_remembered) {
        _cleanup_(http_auth_freep) HttpAuth *a = auth_new(NULL);
        HttpAuthStats st;

        ASSERT_EQ(reviewed(a, "bad", "a", "p"), HTTP_AUTH_UNAUTHENTICATED);
        /* 200 more of the same bad token: no review. */
        for (unsigned i = 0; i < 200; i++)
                ASSERT_EQ(at_once(a, "bad", "a", i % 2 ? "p" : "q"), HTTP_AUTH_UNAUTHENTICATED);
        ASSERT_EQ(TOKEN_REVIEWS(), 1);
        ASSERT_EQ(ACCESS_REVIEWS(), 0);
        /* For HTTP_AUTH_NEGATIVE_USEC. */
        clock_now += HTTP_AUTH_NEGATIVE_USEC;
        ASSERT_EQ(reviewed(a, "bad", "a", "p"), HTTP_AUTH_UNAUTHENTICATED);
        ASSERT_EQ(TOKEN_REVIEWS(), 2);
        /* Bad tokens have their own table: 1,000 of them evict no good one. */
        ASSERT_EQ(reviewed(a, "user:alice", "a", "p"), HTTP_AUTH_ALLOWED);
        for (unsigned i = 0; i < 1000; i++) {
                char t[32];
                snprintf(t, sizeof(t), "bad-%u", i);
                ASSERT_EQ(reviewed(a, t, "a", "p"), HTTP_AUTH_UNAUTHENTICATED);
        }
        ASSERT_EQ(at_once(a, "user:alice", "a", "p"), HTTP_AUTH_ALLOWED);
        http_auth_stats(a, &st);
        ASSERT_EQ(st.bad_token_hits, 200);
}

TEST(reviews_shared_in_flight) {
        _cleanup_(http_auth_freep) HttpAuth *a = auth_new(NULL);
        Answer ans[100];
        HttpAuthStats st;

        /* A scraper's round: 100 requests at once, one token, one pod each. */
        for (unsigned i = 0; i < 100; i++) {
                char pod[16];
                snprintf(pod, sizeof(pod), "p%u", i % 50);
                ASSERT_EQ(check(a, "user:scraper", "10.0.0.2", "a", pod, &ans[i]), 0);
        }
        ASSERT_EQ(TOKEN_REVIEWS(), 1);
        serve();
        /* One review per distinct decision (50 pods, each asked twice). */
        ASSERT_EQ(TOKEN_REVIEWS(), 1);
        ASSERT_EQ(ACCESS_REVIEWS(), 50);
        for (unsigned i = 0; i < 100; i++) {
                ASSERT_EQ(ans[i].calls, 1);
                ASSERT_EQ(ans[i].result, HTTP_AUTH_ALLOWED);
                ASSERT_STREQ(ans[i].username, "scraper");
        }
        http_auth_stats(a, &st);
        ASSERT_EQ(st.joined, 99 + 50);
}

TEST(a_users_share) {
        _cleanup_(http_auth_freep) HttpAuth *a = auth_new(NULL);
        char pod[32];

        ASSERT_EQ(reviewed(a, "user:alice", "a", "mine"), HTTP_AUTH_ALLOWED);
        /* Bob asks for 2,000 distinct pods (more than the cache holds):
         * allowed and denied ones, each reviewed (a microsecond apart:
         * the older ones expire first). */
        for (unsigned i = 0; i < 2000; i++) {
                clock_now++;
                snprintf(pod, sizeof(pod), "pod-%u", i);
                ASSERT_EQ(reviewed(a, "user:bob", i % 2 ? "a" : "b", pod),
                          i % 2 ? HTTP_AUTH_ALLOWED : HTTP_AUTH_DENIED);
        }
        ASSERT_EQ(ACCESS_REVIEWS(), 2001);
        /* Alice's decision is still there: no review. */
        ASSERT_EQ(at_once(a, "user:alice", "a", "mine"), HTTP_AUTH_ALLOWED);
        ASSERT_EQ(ACCESS_REVIEWS(), 2001);
        /* Bob keeps his last HTTP_AUTH_DECISIONS_PER_USER: the last pod's from
         * the cache, the first's reviewed again. */
        ASSERT_EQ(at_once(a, "user:bob", "a", "pod-1999"), HTTP_AUTH_ALLOWED);
        ASSERT_EQ(reviewed(a, "user:bob", "a", "pod-1"), HTTP_AUTH_ALLOWED);

        /* Bob's tokens: at most HTTP_AUTH_TOKENS_PER_USER kept; Alice's stays. */
        for (unsigned i = 0; i < 100; i++) {
                char t[32];
                snprintf(t, sizeof(t), "user:bob:%u", i);
                clock_now++;
                ASSERT_EQ(reviewed(a, t, "a", "pod-1999"), HTTP_AUTH_ALLOWED);
        }
        size_t before = TOKEN_REVIEWS();
        ASSERT_EQ(at_once(a, "user:alice", "a", "mine"), HTTP_AUTH_ALLOWED);
        ASSERT_EQ(at_once(a, "user:bob:99", "a", "pod-1999"), HTTP_AUTH_ALLOWED);
        ASSERT_EQ(reviewed(a, "user:bob:0", "a", "pod-1999"), HTTP_AUTH_ALLOWED);
        ASSERT_EQ(TOKEN_REVIEWS(), before + 1);
}

TEST(rate_per_address) {
        _cleanup_(http_auth_freep) HttpAuth *a =
                auth_new(&(const HttpAuthOptions){ .reviews_per_second = 1, .review_burst = 3 });
        Answer ans;
        HttpAuthStats st;

        /* 3 reviews at once, then none: refused before any review. */
        ASSERT_EQ(reviewed(a, "bad-1", "a", "p"), HTTP_AUTH_UNAUTHENTICATED);
        ASSERT_EQ(reviewed(a, "user:alice", "a", "p"), HTTP_AUTH_ALLOWED); /* two reviews, counted once */
        ASSERT_EQ(reviewed(a, "bad-2", "a", "p"), HTTP_AUTH_UNAUTHENTICATED);
        ASSERT_EQ(check(a, "bad-3", "10.0.0.1", "a", "p", &ans), 1);
        ASSERT_EQ(ans.result, HTTP_AUTH_RATE_LIMITED);
        ASSERT_EQ(ans.retry, USEC_PER_SEC);
        ASSERT_EQ(TOKEN_REVIEWS(), 3);
        /* What the caches answer costs nothing and is answered. */
        ASSERT_EQ(at_once(a, "bad-1", "a", "p"), HTTP_AUTH_UNAUTHENTICATED);
        ASSERT_EQ(at_once(a, "user:alice", "a", "p"), HTTP_AUTH_ALLOWED);
        /* A decision not cached needs a review: refused too. */
        ASSERT_EQ(check(a, "user:alice", "10.0.0.1", "a", "q", &ans), 1);
        ASSERT_EQ(ans.result, HTTP_AUTH_RATE_LIMITED);
        /* Another address has its own. */
        ASSERT_EQ(check(a, "bad-3", "10.0.0.9", "a", "p", &ans), 0);
        serve();
        ASSERT_EQ(ans.result, HTTP_AUTH_UNAUTHENTICATED);
        /* A second later, one more. */
        clock_now += USEC_PER_SEC;
        ASSERT_EQ(reviewed(a, "bad-4", "a", "p"), HTTP_AUTH_UNAUTHENTICATED);
        ASSERT_EQ(check(a, "bad-5", "10.0.0.1", "a", "p", &ans), 1);
        ASSERT_EQ(ans.result, HTTP_AUTH_RATE_LIMITED);
        http_auth_stats(a, &st);
        ASSERT_EQ(st.rate_limited, 3);
        ASSERT_EQ(st.token_reviews, 5);
}

TEST(audiences) {
        char *const cgprof[] = { (char *) "cgprof", NULL };
        _cleanup_(http_auth_freep) HttpAuth *a = auth_new(&(const HttpAuthOptions){ .audiences = cgprof });
        _cleanup_(cJSON_Deletep) cJSON *j = NULL;

        /* A token of the API server's audience: not ours. */
        ASSERT_EQ(reviewed(a, "user:alice", "a", "p"), HTTP_AUTH_UNAUTHENTICATED);
        j = cJSON_Parse(posted[0].json);
        const cJSON *aud =
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "spec"), "audiences");
        ASSERT_EQ(cJSON_GetArraySize(aud), 1);
        ASSERT_STREQ(cJSON_GetArrayItem(aud, 0)->valuestring, "cgprof");
        /* One made for cgprof. */
        ASSERT_EQ(reviewed(a, "user:alice:aud", "a", "p"), HTTP_AUTH_ALLOWED);
}

TEST(failures_not_cached) {
        _cleanup_(http_auth_freep) HttpAuth *a = auth_new(NULL);

        server_status = 500;
        ASSERT_EQ(reviewed(a, "user:alice", "a", "p"), HTTP_AUTH_FAILED);
        ASSERT_EQ(reviewed(a, "bad", "a", "p"), HTTP_AUTH_FAILED);
        server_status = 0;
        ASSERT_EQ(reviewed(a, "user:alice", "a", "p"), HTTP_AUTH_ALLOWED);
        ASSERT_EQ(reviewed(a, "bad", "a", "p"), HTTP_AUTH_UNAUTHENTICATED);
        ASSERT_EQ(TOKEN_REVIEWS(), 4);
}

TEST(cancel) {
        _cleanup_(http_auth_freep) HttpAuth *a = auth_new(NULL);
        HttpAuthCheck *c1 = NULL, *c2 = NULL;
        const KubeResourceAttributes at = { .verb = "get", .resource = "pods", .namespace = "a" };
        Answer a1 = {}, a2 = {}, a3 = {};

        ASSERT_EQ(http_auth_check(a, "user:alice", "x", &at, on_done, &a1, &c1), 0);
        ASSERT_EQ(http_auth_check(a, "user:alice", "x", &at, on_done, &a2, &c2), 0);
        ASSERT_EQ(TOKEN_REVIEWS(), 1);
        /* One of two gone: the review goes on for the other. */
        http_auth_check_cancel(c1);
        ASSERT_FALSE(posted[0].cancelled);
        serve();
        ASSERT_FALSE(a1.done);
        ASSERT_EQ(a2.result, HTTP_AUTH_ALLOWED);
        /* The last one gone: the review is cancelled. */
        ASSERT_EQ(http_auth_check(a, "user:bob", "x", &at, on_done, &a3, &c1), 0);
        http_auth_check_cancel(c1);
        ASSERT_TRUE(posted[n_posted - 1].cancelled);
        ASSERT_FALSE(a3.done);
        /* Freed with a check waiting: no callback. */
        ASSERT_EQ(http_auth_check(a, "user:carol", "x", &at, on_done, &a3, NULL), 0);
        a = http_auth_free(a);
        ASSERT_FALSE(a3.done);
        ASSERT_TRUE(posted[n_posted - 1].cancelled);
        ASSERT_ERROR(http_auth_check(NULL, "t", "x", &at, on_done, &a3, NULL), EINVAL);
}

TEST(token_too_long) {
        _cleanup_(http_auth_freep) HttpAuth *a = auth_new(NULL);
        _cleanup_free_ char *t = malloc(HTTP_AUTH_TOKEN_MAX + 2);
        Answer ans;

        ASSERT_NOT_NULL(t);
        memset(t, 'x', HTTP_AUTH_TOKEN_MAX + 1);
        t[HTTP_AUTH_TOKEN_MAX + 1] = 0;
        ASSERT_ERROR(check(a, t, "x", "a", "p", &ans), E2BIG);
        ASSERT_FALSE(ans.done);
        ASSERT_EQ(n_posted, 0);
}

/* The caches alone, with explicit times. */
TEST(cache_shares) {
        AuthCache c;
        uint8_t k[AUTH_KEY_SIZE] = {}, alice[AUTH_KEY_SIZE] = { 1 }, bob[AUTH_KEY_SIZE] = { 2 };
        const uint8_t nobody[AUTH_KEY_SIZE] = {};
        uint64_t now = 100;

        ASSERT_OK(auth_cache_init(&c, 8, 3));
        for (unsigned i = 0; i < 5; i++) {
                k[0] = (uint8_t) i;
                AuthCacheEntry *e = auth_cache_put(&c, k, alice, now);
                e->expires = now + 10 + i;
        }
        /* Alice holds her 3, the last ones. */
        ASSERT_EQ(auth_cache_count(&c, alice, now), 3);
        k[0] = 0;
        ASSERT_NULL(auth_cache_get(&c, k, now));
        k[0] = 4;
        ASSERT_NOT_NULL(auth_cache_get(&c, k, now));
        /* Bob: never more than his 3, whatever he puts; Alice keeps hers. */
        for (unsigned i = 0; i < 10; i++) {
                k[0] = (uint8_t) (100 + i);
                AuthCacheEntry *e = auth_cache_put(&c, k, bob, now);
                e->expires = now + 100;
        }
        ASSERT_EQ(auth_cache_count(&c, bob, now), 3);
        ASSERT_EQ(auth_cache_count(&c, alice, now), 3);
        /* Entries of nobody have no share: the 2 free ones, then the soonest of all. */
        for (unsigned i = 0; i < 3; i++) {
                k[0] = (uint8_t) (200 + i);
                AuthCacheEntry *e = auth_cache_put(&c, k, nobody, now);
                e->expires = now + 1000;
        }
        ASSERT_EQ(auth_cache_count(&c, NULL, now), 8);
        ASSERT_EQ(auth_cache_count(&c, alice, now), 2); /* the soonest of all went */
        /* The same key again replaces its entry. */
        k[0] = 200;
        AuthCacheEntry *e = auth_cache_put(&c, k, nobody, now);
        e->expires = now + 5;
        ASSERT_EQ(auth_cache_count(&c, NULL, now), 8);
        /* Expiry. */
        ASSERT_NOT_NULL(auth_cache_get(&c, k, now + 4));
        ASSERT_NULL(auth_cache_get(&c, k, now + 5));
        ASSERT_EQ(auth_cache_count(&c, NULL, now + 1000), 0);
        auth_cache_done(&c);
}

TEST(digests) {
        uint8_t a[AUTH_KEY_SIZE], b[AUTH_KEY_SIZE], id1[AUTH_KEY_SIZE], id2[AUTH_KEY_SIZE],
                o1[AUTH_KEY_SIZE], o2[AUTH_KEY_SIZE];
        KubeUserInfo u1 = { .username = (char *) "alice", .uid = (char *) "1" },
                     u2 = { .username = (char *) "alice", .uid = (char *) "2" };
        const KubeResourceAttributes
                x = { .verb = "get", .resource = "pods", .namespace = "ab", .name = "c" },
                y = { .verb = "get", .resource = "pods", .namespace = "a", .name = "bc" };

        ASSERT_OK(auth_token_key("alice", a));
        ASSERT_OK(auth_user_keys(&u1, id1, o1));
        ASSERT_OK(auth_user_keys(&u2, id2, o2));
        /* A token's digest is no user's; the same name is the same owner,
         * another uid another identity. */
        ASSERT_TRUE(memcmp(a, o1, AUTH_KEY_SIZE) != 0);
        ASSERT_TRUE(memcmp(o1, o2, AUTH_KEY_SIZE) == 0);
        ASSERT_TRUE(memcmp(id1, id2, AUTH_KEY_SIZE) != 0);
        /* Parts do not run into each other. */
        ASSERT_OK(auth_decision_key(id1, &x, a));
        ASSERT_OK(auth_decision_key(id1, &y, b));
        ASSERT_TRUE(memcmp(a, b, AUTH_KEY_SIZE) != 0);
        ASSERT_OK(auth_decision_key(id2, &x, b));
        ASSERT_TRUE(memcmp(a, b, AUTH_KEY_SIZE) != 0);
        ASSERT_OK(auth_decision_key(id1, &x, b));
        ASSERT_TRUE(memcmp(a, b, AUTH_KEY_SIZE) == 0);
}

DEFINE_TEST_MAIN
