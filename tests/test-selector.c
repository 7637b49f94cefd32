/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "selector.h"
#include "tests.h"

static bool startswith(const char *s, const char *prefix) {
        return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

static LabelSelector *parse_ok(const char *json) {
        cJSON *j = cJSON_Parse(json);
        LabelSelector *s = NULL;
        char *err = NULL;
        int r;

        ASSERT_NOT_NULL(j);
        r = label_selector_from_json(j, "sel", &s, &err);
        if (r < 0)
                fprintf(stderr, "unexpected error for %s: %s\n", json, strna(err));
        ASSERT_OK(r);
        ASSERT_NULL(err);
        ASSERT_NOT_NULL(s);
        cJSON_Delete(j);
        return s;
}

/* Parses a selector that must be refused; checks the key path the message
 * starts with, and returns the message for further checks (caller frees). */
static char *parse_fail(const char *json, const char *path_prefix) {
        cJSON *j = cJSON_Parse(json);
        LabelSelector *s = NULL;
        char *err = NULL;

        ASSERT_NOT_NULL(j);
        ASSERT_ERROR(label_selector_from_json(j, "targets[0].podSelector", &s, &err), EINVAL);
        ASSERT_NULL(s);
        ASSERT_NOT_NULL(err);
        if (!startswith(err, path_prefix)) {
                fprintf(stderr, "for %s expected prefix \"%s\", got \"%s\"\n", json, path_prefix, err);
                ASSERT_TRUE(false);
        }
        cJSON_Delete(j);
        return err;
}

static void check_fail(const char *json, const char *path_prefix) {
        free(parse_fail(json, path_prefix));
}

static bool matches(const char *json, Labels labels) {
        LabelSelector *s = parse_ok(json);
        bool b = label_selector_matches(s, labels);

        label_selector_free(s);
        return b;
}

TEST(parse_match_labels) {
        LabelSelector *s =
                parse_ok("{\"matchLabels\": {\"app\": \"web\", \"app.kubernetes.io/name\": \"x\"}}");

        ASSERT_EQ(strv_length(s->match_labels), 4);
        ASSERT_STREQ(s->match_labels[0], "app");
        ASSERT_STREQ(s->match_labels[1], "web");
        ASSERT_STREQ(s->match_labels[2], "app.kubernetes.io/name");
        ASSERT_STREQ(s->match_labels[3], "x");
        ASSERT_EQ(s->n_requirements, 0);
        label_selector_free(s);
}

TEST(parse_match_expressions) {
        LabelSelector *s = parse_ok("{\"matchExpressions\": ["
                                    "{\"key\": \"app\", \"operator\": \"In\", \"values\": [\"a\", \"b\"]},"
                                    "{\"key\": \"tier\", \"operator\": \"NotIn\", \"values\": [\"\"]},"
                                    "{\"key\": \"x\", \"operator\": \"Exists\"},"
                                    "{\"key\": \"y\", \"operator\": \"DoesNotExist\", \"values\": []}]}");

        ASSERT_NULL(s->match_labels);
        ASSERT_EQ(s->n_requirements, 4);
        ASSERT_STREQ(s->requirements[0].key, "app");
        ASSERT_EQ(s->requirements[0].op, LABEL_OPERATOR_IN);
        ASSERT_EQ(strv_length(s->requirements[0].values), 2);
        ASSERT_STREQ(s->requirements[0].values[1], "b");
        ASSERT_EQ(s->requirements[1].op, LABEL_OPERATOR_NOT_IN);
        ASSERT_STREQ(s->requirements[1].values[0], "");
        ASSERT_EQ(s->requirements[2].op, LABEL_OPERATOR_EXISTS);
        ASSERT_EQ(strv_length(s->requirements[2].values), 0);
        ASSERT_EQ(s->requirements[3].op, LABEL_OPERATOR_DOES_NOT_EXIST);
        label_selector_free(s);
}

TEST(parse_empty) {
        LabelSelector *s = parse_ok("{}");

        ASSERT_NULL(s->match_labels);
        ASSERT_EQ(s->n_requirements, 0);
        label_selector_free(s);

        s = parse_ok("{\"matchLabels\": {}, \"matchExpressions\": []}");
        label_selector_free(s);
}

TEST(parse_errors_structure) {
        char *err;

        err = parse_fail("[]", "targets[0].podSelector: ");
        ASSERT_STREQ(err, "targets[0].podSelector: must be an object");
        free(err);

        err = parse_fail("{\"matchLabel\": {}}", "targets[0].podSelector.matchLabel: ");
        ASSERT_STREQ(err, "targets[0].podSelector.matchLabel: unknown key");
        free(err);

        check_fail("{\"matchLabels\": {}, \"matchLabels\": {}}", "targets[0].podSelector.matchLabels: ");
        check_fail("{\"matchLabels\": []}", "targets[0].podSelector.matchLabels: ");
        check_fail("{\"matchLabels\": {\"a\": 1}}", "targets[0].podSelector.matchLabels: ");
        check_fail("{\"matchLabels\": {\"a\": null}}", "targets[0].podSelector.matchLabels: ");
        check_fail("{\"matchLabels\": {\"a\": \"x\", \"a\": \"y\"}}",
                   "targets[0].podSelector.matchLabels: ");
        check_fail("{\"matchExpressions\": {}}", "targets[0].podSelector.matchExpressions: ");
        check_fail("{\"matchExpressions\": [\"app\"]}", "targets[0].podSelector.matchExpressions[0]: ");
        check_fail("{\"matchExpressions\": [{\"key\": \"a\", \"operator\": \"Exists\", \"value\": []}]}",
                   "targets[0].podSelector.matchExpressions[0].value: unknown key");
}

TEST(parse_errors_expressions) {
        char *err;

        err = parse_fail("{\"matchExpressions\": [{\"key\": \"a\", \"operator\": \"Exists\"},"
                         "{\"key\": \"a\", \"operator\": \"in\", \"values\": [\"x\"]}]}",
                         "targets[0].podSelector.matchExpressions[1].operator: ");
        ASSERT_STREQ(
                err,
                "targets[0].podSelector.matchExpressions[1].operator: must be one of In, NotIn, Exists, "
                "DoesNotExist");
        free(err);

        check_fail("{\"matchExpressions\": [{\"operator\": \"Exists\"}]}",
                   "targets[0].podSelector.matchExpressions[0].key: ");
        check_fail("{\"matchExpressions\": [{\"key\": \"a\"}]}",
                   "targets[0].podSelector.matchExpressions[0].operator: ");
        check_fail("{\"matchExpressions\": [{\"key\": 1, \"operator\": \"Exists\"}]}",
                   "targets[0].podSelector.matchExpressions[0].key: ");
        check_fail("{\"matchExpressions\": [{\"key\": \"a\", \"operator\": 1}]}",
                   "targets[0].podSelector.matchExpressions[0].operator: ");

        /* In and NotIn need values. */
        check_fail("{\"matchExpressions\": [{\"key\": \"a\", \"operator\": \"In\"}]}",
                   "targets[0].podSelector.matchExpressions[0].values: ");
        check_fail("{\"matchExpressions\": [{\"key\": \"a\", \"operator\": \"In\", \"values\": []}]}",
                   "targets[0].podSelector.matchExpressions[0].values: ");
        check_fail("{\"matchExpressions\": [{\"key\": \"a\", \"operator\": \"NotIn\", \"values\": []}]}",
                   "targets[0].podSelector.matchExpressions[0].values: ");
        /* Exists and DoesNotExist take none. */
        check_fail(
                "{\"matchExpressions\": [{\"key\": \"a\", \"operator\": \"Exists\", \"values\": [\"x\"]}]}",
                "targets[0].podSelector.matchExpressions[0].values: ");
        check_fail("{\"matchExpressions\": [{\"key\": \"a\", \"operator\": \"DoesNotExist\", \"values\": "
                   "[\"x\"]}]}",
                   "targets[0].podSelector.matchExpressions[0].values: ");
        /* Values are label values. */
        check_fail("{\"matchExpressions\": [{\"key\": \"a\", \"operator\": \"In\", \"values\": [\"-x\"]}]}",
                   "targets[0].podSelector.matchExpressions[0].values: ");
        check_fail("{\"matchExpressions\": [{\"key\": \"a\", \"operator\": \"In\", \"values\": [1]}]}",
                   "targets[0].podSelector.matchExpressions[0].values: ");
        check_fail("{\"matchExpressions\": [{\"key\": \"a\", \"operator\": \"In\", \"values\": \"x\"}]}",
                   "targets[0].podSelector.matchExpressions[0].values: ");
        check_fail("{\"matchExpressions\": [{\"key\": \"-a\", \"operator\": \"Exists\"}]}",
                   "targets[0].podSelector.matchExpressions[0].key: ");
}

static void check_key(const char *key, bool valid) {
        _cleanup_free_ char *json = NULL;

        ASSERT_TRUE(asprintf(&json, "{\"matchLabels\": {\"%s\": \"v\"}}", key) >= 0);
        if (valid)
                label_selector_free(parse_ok(json));
        else
                check_fail(json, "targets[0].podSelector.matchLabels: ");

        free(json);
        ASSERT_TRUE(asprintf(&json, "{\"matchExpressions\": [{\"key\": \"%s\", \"operator\": \"Exists\"}]}",
                             key) >= 0);
        if (valid)
                label_selector_free(parse_ok(json));
        else
                check_fail(json, "targets[0].podSelector.matchExpressions[0].key: ");
}

static void check_value(const char *value, bool valid) {
        _cleanup_free_ char *json = NULL;

        ASSERT_TRUE(asprintf(&json, "{\"matchLabels\": {\"k\": \"%s\"}}", value) >= 0);
        if (valid)
                label_selector_free(parse_ok(json));
        else
                check_fail(json, "targets[0].podSelector.matchLabels");
}

static char *repeat(char c, size_t n) {
        char *s = malloc(n + 1);

        ASSERT_NOT_NULL(s);
        memset(s, c, n);
        s[n] = '\0';
        return s;
}

TEST(label_keys) {
        _cleanup_free_ char *n63 = repeat('a', 63), *n64 = repeat('a', 64);
        _cleanup_free_ char *p253 = NULL, *p254 = NULL, *k = NULL;

        check_key("app", true);
        check_key("a", true);
        check_key("A_b.c-D9", true);
        check_key("9", true);
        check_key("app.kubernetes.io/name", true);
        check_key("cgprof.io/profile", true);
        check_key("a-b.c0/x", true);
        check_key(n63, true);
        check_key(n64, false);
        check_key("", false);
        check_key("-app", false);
        check_key("app-", false);
        check_key("_app", false);
        check_key("app.", false);
        check_key("a b", false);
        check_key("a:b", false);
        check_key("/name", false);
        check_key("example.com/", false);
        check_key("example.com/a/b", false);
        check_key("Example.com/name", false); /* the prefix is lowercase */
        check_key("example_com/name", false);
        check_key("-example.com/name", false);
        check_key("example-.com/name", false);
        check_key("example..com/name", false);
        check_key(".example.com/name", false);
        check_key("example.com./name", false);

        /* Prefix ≤ 253: labels of 63 joined by dots. */
        p253 = malloc(254);
        ASSERT_NOT_NULL(p253);
        p253[0] = '\0';
        for (int i = 0; i < 4; i++) {
                if (i > 0)
                        strcat(p253, ".");
                strncat(p253, n63, i == 3 ? 61 : 63);
        }
        ASSERT_EQ(strlen(p253), 253);
        ASSERT_TRUE(asprintf(&k, "%s/x", p253) >= 0);
        check_key(k, true);
        free(k);
        ASSERT_TRUE(asprintf(&p254, "%sa", p253) >= 0);
        ASSERT_TRUE(asprintf(&k, "%s/x", p254) >= 0);
        check_key(k, false);
        free(k);
        k = NULL;
}

TEST(label_values) {
        _cleanup_free_ char *v63 = repeat('v', 63), *v64 = repeat('v', 64);

        check_value("", true);
        check_value("web", true);
        check_value("v1.2_3-x", true);
        check_value(v63, true);
        check_value(v64, false);
        check_value("-web", false);
        check_value("web.", false);
        check_value("a/b", false);
        check_value("a b", false);
}

TEST(error_message_names_key) {
        char *err = parse_fail("{\"matchLabels\": {\"ok\": \"x\", \"bad key\": \"v\"}}",
                               "targets[0].podSelector.matchLabels: ");

        ASSERT_NOT_NULL(strstr(err, "\"bad key\""));
        free(err);

        err = parse_fail("{\"matchLabels\": {\"k\": \"bad value\"}}",
                         "targets[0].podSelector.matchLabels: ");
        ASSERT_NOT_NULL(strstr(err, "\"bad value\""));
        free(err);
}

TEST(error_only_on_error) {
        cJSON *j = cJSON_Parse("{\"matchLabels\": 5}");
        LabelSelector *s = (LabelSelector *) 0x1;

        /* ret untouched on failure, ret_error may be NULL. */
        ASSERT_ERROR(label_selector_from_json(j, "x", &s, NULL), EINVAL);
        ASSERT_TRUE(s == (LabelSelector *) 0x1);
        cJSON_Delete(j);
}

TEST(match_labels) {
        static char *const labels[] = { "app", "web", "tier", "front", NULL };
        static char *const other[] = { "app", "db", NULL };

        ASSERT_TRUE(matches("{\"matchLabels\": {\"app\": \"web\"}}", labels));
        ASSERT_TRUE(matches("{\"matchLabels\": {\"app\": \"web\", \"tier\": \"front\"}}", labels));
        ASSERT_FALSE(matches("{\"matchLabels\": {\"app\": \"web\", \"tier\": \"back\"}}", labels));
        ASSERT_FALSE(matches("{\"matchLabels\": {\"app\": \"web\"}}", other));
        ASSERT_FALSE(matches("{\"matchLabels\": {\"zone\": \"\"}}", labels)); /* absent is not "" */
        ASSERT_FALSE(matches("{\"matchLabels\": {\"app\": \"web\"}}", NULL));
}

TEST(match_empty) {
        static char *const labels[] = { "app", "web", NULL };
        static char *const none[] = { NULL };

        ASSERT_TRUE(matches("{}", labels));
        ASSERT_TRUE(matches("{}", none));
        ASSERT_TRUE(matches("{}", NULL));
        ASSERT_TRUE(matches("{\"matchLabels\": {}, \"matchExpressions\": []}", labels));
        /* Not set (NULL) matches like an empty selector. */
        ASSERT_TRUE(label_selector_matches(NULL, labels));
}

TEST(match_in) {
        static char *const web[] = { "app", "web", NULL };
        static char *const db[] = { "app", "db", NULL };
        static char *const none[] = { "x", "y", NULL };
        const char *sel = "{\"matchExpressions\": [{\"key\": \"app\", \"operator\": \"In\", "
                          "\"values\": [\"web\", \"api\"]}]}";

        ASSERT_TRUE(matches(sel, web));
        ASSERT_FALSE(matches(sel, db));
        ASSERT_FALSE(matches(sel, none));
        ASSERT_FALSE(matches(sel, NULL));
}

TEST(match_not_in) {
        static char *const web[] = { "app", "web", NULL };
        static char *const db[] = { "app", "db", NULL };
        static char *const none[] = { "x", "y", NULL };
        const char *sel = "{\"matchExpressions\": [{\"key\": \"app\", \"operator\": \"NotIn\", "
                          "\"values\": [\"web\", \"api\"]}]}";

        ASSERT_FALSE(matches(sel, web));
        ASSERT_TRUE(matches(sel, db));
        /* Kubernetes: NotIn matches when the key is absent. */
        ASSERT_TRUE(matches(sel, none));
        ASSERT_TRUE(matches(sel, NULL));
}

TEST(match_exists) {
        static char *const web[] = { "app", "web", NULL };
        static char *const empty[] = { "app", "", NULL };
        static char *const none[] = { "x", "y", NULL };
        const char *exists = "{\"matchExpressions\": [{\"key\": \"app\", \"operator\": \"Exists\"}]}";
        const char *not_exists =
                "{\"matchExpressions\": [{\"key\": \"app\", \"operator\": \"DoesNotExist\"}]}";

        ASSERT_TRUE(matches(exists, web));
        ASSERT_TRUE(matches(exists, empty));
        ASSERT_FALSE(matches(exists, none));
        ASSERT_FALSE(matches(exists, NULL));

        ASSERT_FALSE(matches(not_exists, web));
        ASSERT_FALSE(matches(not_exists, empty));
        ASSERT_TRUE(matches(not_exists, none));
        ASSERT_TRUE(matches(not_exists, NULL));
}

TEST(match_and) {
        static char *const a[] = { "team", "ml", "app", "trainer", "cgprof.io/profile", "enabled", NULL };
        static char *const b[] = { "team", "ml", "app", "trainer", NULL };
        static char *const c[] = { "team", "web", "app", "trainer", "cgprof.io/profile", "enabled", NULL };
        const char *sel = "{\"matchLabels\": {\"team\": \"ml\"}, \"matchExpressions\": ["
                          "{\"key\": \"app\", \"operator\": \"In\", \"values\": [\"trainer\"]},"
                          "{\"key\": \"cgprof.io/profile\", \"operator\": \"Exists\"},"
                          "{\"key\": \"skip\", \"operator\": \"DoesNotExist\"}]}";

        ASSERT_TRUE(matches(sel, a));
        ASSERT_FALSE(matches(sel, b));
        ASSERT_FALSE(matches(sel, c));
}

/* 1 when the two overlap (the witness then matches both), 0 when not. */
static int overlap(const char *ja, const char *jb) {
        LabelSelector *a = ja ? parse_ok(ja) : NULL, *b = jb ? parse_ok(jb) : NULL;
        char **w = NULL;
        int r = label_selectors_overlap(a, b, &w);

        ASSERT_OK(r);
        if (r > 0) {
                ASSERT_NOT_NULL(w);
                ASSERT_TRUE(label_selector_matches(a, w));
                ASSERT_TRUE(label_selector_matches(b, w));
        } else
                ASSERT_NULL(w);
        /* Symmetric. */
        ASSERT_EQ(label_selectors_overlap(b, a, NULL), r);
        strv_free(w);
        label_selector_free(a);
        label_selector_free(b);
        return r;
}

TEST(overlap) {
        const char *gpu = "{\"matchLabels\": {\"nvidia.com/gpu.present\": \"true\"}}";
        const char *not_gpu = "{\"matchExpressions\": [{\"key\": \"nvidia.com/gpu.present\", "
                              "\"operator\": \"NotIn\", \"values\": [\"true\"]}]}";

        /* Unscoped overlaps everything, also an empty selector. */
        ASSERT_EQ(overlap(NULL, NULL), 1);
        ASSERT_EQ(overlap(NULL, gpu), 1);
        ASSERT_EQ(overlap("{}", not_gpu), 1);
        /* The usual split: GPU nodes and the rest. */
        ASSERT_EQ(overlap(gpu, not_gpu), 0);
        ASSERT_EQ(overlap(gpu, "{\"matchLabels\": {\"nvidia.com/gpu.present\": \"false\"}}"), 0);
        ASSERT_EQ(overlap(gpu, "{\"matchExpressions\": [{\"key\": \"nvidia.com/gpu.present\", "
                               "\"operator\": \"DoesNotExist\"}]}"),
                  0);
        /* Different keys: a node may carry both. */
        ASSERT_EQ(overlap(gpu, "{\"matchLabels\": {\"cgprof.io/tuning\": \"open\"}}"), 1);
        /* In sets that share a value, or not. */
        ASSERT_EQ(overlap("{\"matchExpressions\": [{\"key\": \"zone\", \"operator\": \"In\", \"values\": "
                          "[\"a\", \"b\"]}]}",
                          "{\"matchExpressions\": [{\"key\": \"zone\", \"operator\": \"In\", \"values\": "
                          "[\"b\", \"c\"]}]}"),
                  1);
        ASSERT_EQ(overlap("{\"matchExpressions\": [{\"key\": \"zone\", \"operator\": \"In\", \"values\": "
                          "[\"a\"]}]}",
                          "{\"matchExpressions\": [{\"key\": \"zone\", \"operator\": \"In\", \"values\": "
                          "[\"b\", \"c\"]}]}"),
                  0);
        /* In {a,b} against NotIn {a,b}: nothing left. */
        ASSERT_EQ(overlap("{\"matchExpressions\": [{\"key\": \"zone\", \"operator\": \"In\", \"values\": "
                          "[\"a\", \"b\"]}]}",
                          "{\"matchExpressions\": [{\"key\": \"zone\", \"operator\": \"NotIn\", \"values\": "
                          "[\"b\", \"a\"]}]}"),
                  0);
        /* Two NotIn: an absent key, or any other value, passes both. */
        ASSERT_EQ(overlap("{\"matchExpressions\": [{\"key\": \"zone\", \"operator\": \"NotIn\", \"values\": "
                          "[\"x\"]}]}",
                          "{\"matchExpressions\": [{\"key\": \"zone\", \"operator\": \"NotIn\", \"values\": "
                          "[\"x0\"]},"
                          "{\"key\": \"zone\", \"operator\": \"Exists\"}]}"),
                  1);
        /* Exists against DoesNotExist. */
        ASSERT_EQ(overlap("{\"matchExpressions\": [{\"key\": \"k\", \"operator\": \"Exists\"}]}",
                          "{\"matchExpressions\": [{\"key\": \"k\", \"operator\": \"DoesNotExist\"}]}"),
                  0);
        /* One selector that can match nothing overlaps nothing. */
        ASSERT_EQ(overlap("{\"matchLabels\": {\"k\": \"a\"}, \"matchExpressions\": [{\"key\": \"k\", "
                          "\"operator\": \"NotIn\", \"values\": [\"a\"]}]}",
                          NULL),
                  0);
        /* One key disjoint is enough, whatever the others. */
        ASSERT_EQ(overlap("{\"matchLabels\": {\"a\": \"1\", \"b\": \"1\"}}",
                          "{\"matchLabels\": {\"a\": \"1\", \"b\": \"2\"}}"),
                  0);
}

DEFINE_TEST_MAIN
