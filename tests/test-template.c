/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "template.h"
#include "tests.h"

static const TemplateVars test_vars = {
        .namespace = "ml",
        .pod = "trainer-0",
        .container = "main",
        .container_id = "0123abcd",
        .cgroup = "kubepods.slice/kubepods-pod1.slice/cri-containerd-0123abcd.scope",
        .node = "node-1",
        .profile = "default",
        .process_name = "python3",
        .process_id = "4242",
        .rank = "1",
        .timestamp_ms = UINT64_C(1700000000123),
        .uid = "abcd1234",
};

static char *expand(const char *tmpl, const TemplateVars *vars) {
        char *s = NULL;

        ASSERT_OK(template_expand(tmpl, vars, &s));
        ASSERT_NOT_NULL(s);
        return s;
}

#define ASSERT_EXPANDS(tmpl, vars, expected)                  \
        do {                                                  \
                _cleanup_free_ char *_s = expand(tmpl, vars); \
                ASSERT_STREQ(_s, expected);                   \
        } while (0)

TEST(each_placeholder) {
        ASSERT_EXPANDS("{NAMESPACE}", &test_vars, "ml");
        ASSERT_EXPANDS("{POD}", &test_vars, "trainer-0");
        ASSERT_EXPANDS("{CONTAINER}", &test_vars, "main");
        ASSERT_EXPANDS("{CONTAINER_ID}", &test_vars, "0123abcd");
        ASSERT_EXPANDS("{CGROUP}", &test_vars,
                       "kubepods.slice_kubepods-pod1.slice_cri-containerd-0123abcd.scope");
        ASSERT_EXPANDS("{NODE}", &test_vars, "node-1");
        ASSERT_EXPANDS("{PROFILE}", &test_vars, "default");
        ASSERT_EXPANDS("{PROCESS_NAME}", &test_vars, "python3");
        ASSERT_EXPANDS("{PROCESS_ID}", &test_vars, "4242");
        ASSERT_EXPANDS("rank{RANK}", &test_vars, "rank1");
        ASSERT_EXPANDS("{TIMESTAMP}", &test_vars, "1700000000123");
        ASSERT_EXPANDS("{UID}", &test_vars, "abcd1234");

        ASSERT_EXPANDS(TEMPLATE_POD_DEFAULT, &test_vars, "ml/trainer-0/main/1700000000123_abcd1234");
        ASSERT_EXPANDS(TEMPLATE_HOST_DEFAULT, &test_vars,
                       "kubepods.slice_kubepods-pod1.slice_cri-containerd-0123abcd.scope/"
                       "1700000000123_abcd1234");
        ASSERT_EXPANDS("reports/{NODE}-{PROFILE}/p{PROCESS_ID}.d", &test_vars,
                       "reports/node-1-default/p4242.d");
        /* A '%' not followed by '{' is literal. */
        ASSERT_EXPANDS("100%/{POD}", &test_vars, "100%/trainer-0");
}

TEST(null_values) {
        TemplateVars v = {};
        _cleanup_free_ char *s = NULL;

        ASSERT_EXPANDS("{NAMESPACE}/{POD}/{CONTAINER}/{CONTAINER_ID}", &v,
                       "unknown/unknown/unknown/unknown");
        ASSERT_EXPANDS("{CGROUP}/{NODE}/{PROFILE}/{PROCESS_NAME}/{PROCESS_ID}", &v,
                       "unknown/unknown/unknown/unknown/unknown");
        ASSERT_EXPANDS("{TIMESTAMP}", &v, "0");

        v.pod = "";
        ASSERT_EXPANDS("{POD}", &v, "unknown");
        v.cgroup = "/";
        ASSERT_EXPANDS("{CGROUP}", &v, "unknown");
        v.cgroup = "/system.slice/nginx.service";
        ASSERT_EXPANDS("{CGROUP}", &v, "system.slice_nginx.service");

        /* No vars at all. */
        s = expand("{POD}/x", NULL);
        ASSERT_STREQ(s, "unknown/x");
}

static bool uid_valid(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
                        return false;
        return s[n] == 0 || s[n] == '/' || s[n] == '_';
}

TEST(uid) {
        TemplateVars v = {};
        char a[9], b[9];

        random_uid(a);
        random_uid(b);
        ASSERT_EQ(strlen(a), 8);
        ASSERT_TRUE(uid_valid(a, 8));
        ASSERT_TRUE(uid_valid(b, 8));
        ASSERT_TRUE(!streq(a, b)); /* 36^8: a collision here means a broken generator */

        /* Generated when vars->uid is NULL, and the same for every {UID} of one expansion. */
        _cleanup_free_ char *s = expand("{UID}/{UID}", &v);
        ASSERT_EQ(strlen(s), 17);
        ASSERT_TRUE(uid_valid(s, 8));
        ASSERT_TRUE(memcmp(s, s + 9, 8) == 0);

        _cleanup_free_ char *t = expand("{UID}", &v);
        ASSERT_TRUE(!streq(s + 9, t));
}

TEST(climbing_out) {
        TemplateVars v = test_vars;

        /* Values never add a path component. */
        v.process_name = "../../x";
        ASSERT_EXPANDS("{NAMESPACE}/{PROCESS_NAME}", &v, "ml/.._.._x");
        v.process_name = "/etc/passwd";
        ASSERT_EXPANDS("{PROCESS_NAME}", &v, "_etc_passwd");
        v.process_name = "a\\b";
        ASSERT_EXPANDS("{PROCESS_NAME}", &v, "a_b");

        /* "." and ".." values. */
        v.pod = ".";
        ASSERT_EXPANDS("{NAMESPACE}/{POD}/x", &v, "ml/_/x");
        v.pod = "..";
        ASSERT_EXPANDS("{NAMESPACE}/{POD}/x", &v, "ml/__/x");
        v.pod = "...";
        ASSERT_EXPANDS("{POD}", &v, "...");
        v.pod = ".hidden";
        ASSERT_EXPANDS("{POD}", &v, ".hidden");

        /* A value next to literal text cannot form "..": "{POD}." with
         * POD="." (the value alone becomes "_" first). */
        v.pod = ".";
        ASSERT_EXPANDS("{POD}.", &v, "_.");
        ASSERT_EXPANDS(".{POD}/y", &v, "._/y");
        v.namespace = ".";
        ASSERT_EXPANDS("{NAMESPACE}{POD}", &v, "__");

        /* Environment values too. */
        const char *env[] = { "EVIL=..", "SLASHY=a/../b", NULL };
        v.env = env;
        ASSERT_EXPANDS("%{EVIL}/%{SLASHY}", &v, "__/a_.._b");
}

TEST(control_characters) {
        TemplateVars v = test_vars;

        v.pod = "a\nb\tc\x7f"
                "d\x01";
        ASSERT_EXPANDS("{POD}", &v, "a_b_c_d_");
        /* C1 control (U+0085), invalid UTF-8, valid UTF-8 kept. */
        v.pod = "x\xc2\x85y\xff\xfe"
                "z\xc3\xa9";
        ASSERT_EXPANDS("{POD}", &v, "x_y__z\xc3\xa9");
        /* Truncated sequence at the end. */
        v.pod = "ok\xe2\x82";
        ASSERT_EXPANDS("{POD}", &v, "ok__");
}

TEST(long_names) {
        TemplateVars v = test_vars;
        char name[301], *expected;

        memset(name, 'a', 300);
        name[300] = 0;
        v.pod = name;

        _cleanup_free_ char *s = expand("{NAMESPACE}/{POD}/x", &v);
        ASSERT_EQ(strlen(s), strlen("ml/") + TEMPLATE_COMPONENT_MAX + strlen("/x"));
        expected = strndupa(name, TEMPLATE_COMPONENT_MAX);
        ASSERT_TRUE(strncmp(s + 3, expected, TEMPLATE_COMPONENT_MAX) == 0);
        ASSERT_STREQ(s + 3 + TEMPLATE_COMPONENT_MAX, "/x");

        /* Literal text plus a long value: the whole component is cut. */
        _cleanup_free_ char *t = expand("prefix-{POD}-suffix", &v);
        ASSERT_EQ(strlen(t), TEMPLATE_COMPONENT_MAX);
        ASSERT_TRUE(strncmp(t, "prefix-aaa", 10) == 0);

        /* Never in the middle of a UTF-8 character: 'é' is 2 bytes; 199 'a' + 'é' + ... */
        char utf[512];
        memset(utf, 'a', 199);
        strcpy(utf + 199, "\xc3\xa9\xc3\xa9");
        v.pod = utf;
        _cleanup_free_ char *u = expand("{POD}", &v);
        ASSERT_EQ(strlen(u), 199);

        /* 3-byte '€' straddling the limit. */
        memset(utf, 'a', 198);
        strcpy(utf + 198, "\xe2\x82\xac"
                          "bbb");
        _cleanup_free_ char *w = expand("{POD}", &v);
        ASSERT_EQ(strlen(w), 198);

        memset(utf, 'a', 197);
        strcpy(utf + 197, "\xe2\x82\xac"
                          "bbb");
        _cleanup_free_ char *x = expand("{POD}", &v);
        ASSERT_EQ(strlen(x), 200);
        ASSERT_STREQ(x + 197, "\xe2\x82\xac");
}

TEST(env) {
        TemplateVars v = test_vars;
        const char *env[] = { "HOME=/root", "HOMEX=nope", "CLUSTER=prod", "EMPTY=", NULL };

        v.env = env;
        ASSERT_EXPANDS("%{CLUSTER}/{POD}", &v, "prod/trainer-0");
        ASSERT_EXPANDS("%{HOME}", &v, "_root");
        ASSERT_EXPANDS("%{HOM}", &v, "unknown");
        ASSERT_EXPANDS("%{EMPTY}", &v, "unknown");
        ASSERT_EXPANDS("%{UNSET_VAR_1}", &v, "unknown");

        /* The process environment when vars->env is NULL. */
        v.env = NULL;
        ASSERT_EQ(setenv("CGPROF_TEST_TEMPLATE", "from-env", 1), 0);
        ASSERT_EXPANDS("%{CGPROF_TEST_TEMPLATE}/{POD}", &v, "from-env/trainer-0");
        ASSERT_EQ(unsetenv("CGPROF_TEST_TEMPLATE"), 0);
        ASSERT_EXPANDS("%{CGPROF_TEST_TEMPLATE}", &v, "unknown");
}

static void assert_invalid(const char *tmpl, const char *reason_part) {
        _cleanup_free_ char *error = NULL, *s = NULL;

        ASSERT_ERROR(template_validate(tmpl, &error), EINVAL);
        ASSERT_NOT_NULL(error);
        if (!strstr(error, reason_part)) {
                fprintf(stderr, "template \"%s\": reason \"%s\" lacks \"%s\"\n", strna(tmpl), error,
                        reason_part);
                abort();
        }
        /* Expansion refuses what validation refuses. */
        ASSERT_ERROR(template_expand(tmpl, &test_vars, &s), EINVAL);
        ASSERT_NULL(s);
        /* ret_error is optional. */
        ASSERT_ERROR(template_validate(tmpl, NULL), EINVAL);
}

TEST(validate) {
        char *error = NULL;
        char long_literal[TEMPLATE_COMPONENT_MAX + 2];

        ASSERT_OK(template_validate(TEMPLATE_POD_DEFAULT, &error));
        ASSERT_OK(template_validate(TEMPLATE_HOST_DEFAULT, &error));
        ASSERT_OK(template_validate("a/b.c/{POD}.../..{POD}/%{HOME}_x/100%", &error));
        ASSERT_OK(template_validate("...", &error));
        ASSERT_NULL(error);

        assert_invalid("", "empty");
        assert_invalid(NULL, "empty");
        assert_invalid("/abs/{POD}", "relative");
        assert_invalid("a//b", "empty path component");
        assert_invalid("a/", "empty path component");
        assert_invalid("./a", "\".\"");
        assert_invalid("a/../b", "\"..\"");
        assert_invalid("a/..", "\"..\"");
        assert_invalid("{FOO}", "unknown placeholder {FOO}");
        assert_invalid("{pod}", "unknown placeholder {pod}");
        assert_invalid("{}", "unknown placeholder {}");
        assert_invalid("{POD", "unbalanced '{'");
        assert_invalid("POD}", "unbalanced '}'");
        assert_invalid("{PO{D}}", "nested");
        assert_invalid("%{1ABC}", "invalid environment variable name");
        assert_invalid("%{A-B}", "invalid environment variable name");
        assert_invalid("%{}", "invalid environment variable name");
        assert_invalid("a\nb", "control character");
        assert_invalid("a\x7f", "control character");
        assert_invalid("a\xff", "invalid UTF-8");

        memset(long_literal, 'x', sizeof(long_literal) - 1);
        long_literal[sizeof(long_literal) - 1] = 0;
        assert_invalid(long_literal, "longer than");
        long_literal[TEMPLATE_COMPONENT_MAX] = 0;
        ASSERT_OK(template_validate(long_literal, NULL));
}

TEST(per_process) {
        ASSERT_TRUE(template_is_per_process("{NAMESPACE}/{PROCESS_NAME}"));
        ASSERT_TRUE(template_is_per_process("x/{PROCESS_ID}_{UID}"));
        ASSERT_FALSE(template_is_per_process(TEMPLATE_POD_DEFAULT));
        /* One report per rank (a rank's process and its workers). */
        ASSERT_TRUE(template_is_per_process("{CGROUP}/{TIMESTAMP}/rank{RANK}"));
        ASSERT_FALSE(template_is_per_process("%{PROCESS_NAME}"));
        ASSERT_FALSE(template_is_per_process("PROCESS_NAME"));
        ASSERT_FALSE(template_is_per_process(NULL));
}

TEST(path_component_sanitize) {
        const struct {
                const char *in, *out;
        } cases[] = {
                { NULL, "unknown" },
                { "", "unknown" },
                { ".", "_" },
                { "..", "__" },
                { "a/b", "a_b" },
                { "a\\b", "a_b" },
                { "\t", "_" },
                { "ok-1.2", "ok-1.2" },
                { "/", "_" },
                { "\xc3\xa9t\xc3\xa9", "\xc3\xa9t\xc3\xa9" },
                { "\xed\xa0\x80", "___" }, /* a surrogate: 3 invalid bytes */
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *s = path_component_sanitize(cases[i].in);
                ASSERT_STREQ(s, cases[i].out);
        }
}

TEST(utf8) {
        ASSERT_EQ(utf8_valid_char_len("a"), 1);
        ASSERT_EQ(utf8_valid_char_len(""), 0);
        ASSERT_EQ(utf8_valid_char_len("\xc3\xa9"), 2);
        ASSERT_EQ(utf8_valid_char_len("\xe2\x82\xac"), 3);
        ASSERT_EQ(utf8_valid_char_len("\xf0\x9f\x98\x80"), 4);
        ASSERT_EQ(utf8_valid_char_len("\xc0\xaf"), 0); /* overlong '/' */
        ASSERT_EQ(utf8_valid_char_len("\xe0\x80\xaf"), 0); /* overlong */
        ASSERT_EQ(utf8_valid_char_len("\xed\xa0\x80"), 0); /* surrogate */
        ASSERT_EQ(utf8_valid_char_len("\xf4\x90\x80\x80"), 0); /* > U+10FFFF */
        ASSERT_EQ(utf8_valid_char_len("\xe2\x82"), 0); /* truncated */

        _cleanup_free_ char *s = utf8_make_valid("a\xff"
                                                 "b\xc3\xa9");
        ASSERT_STREQ(s, "a\xef\xbf\xbd"
                        "b\xc3\xa9");
}

/* The one escaping of names that are not UTF-8 (template.h): each invalid
 * byte becomes U+FFFD, valid text is kept as it is. */
TEST(utf8_make_valid) {
        const struct {
                const char *in, *out;
        } cases[] = {
                { "", "" },
                { "probe", "probe" },
                { "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80" },
                /* Valid already, U+FFFD and systemd's own escapes included. */
                { "a\xef\xbf\xbd\\x2d", "a\xef\xbf\xbd\\x2d" },
                { "probe-\xff\xfe", "probe-\xef\xbf\xbd\xef\xbf\xbd" },
                { "node-\xff", "node-\xef\xbf\xbd" },
                { "\x80", "\xef\xbf\xbd" }, /* a lone continuation byte */
                { "\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd" }, /* overlong '/' */
                { "\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* a surrogate */
                { "\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* > U+10FFFF */
                /* A truncated sequence: each of its bytes; what follows stays. */
                { "\xe2\x82x", "\xef\xbf\xbd\xef\xbf\xbdx" },
                { "\xe2\x82\"", "\xef\xbf\xbd\xef\xbf\xbd\"" },
                { "end\xc3", "end\xef\xbf\xbd" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *s = utf8_make_valid(cases[i].in), *t = NULL, *u = NULL;
                const char *p = cases[i].in;
                bool valid = streq(cases[i].in, cases[i].out);

                ASSERT_STREQ(s, cases[i].out);
                ASSERT_TRUE(utf8_is_valid(s));
                ASSERT_EQ(utf8_is_valid(cases[i].in), valid);

                /* utf8_ensure_valid(): no copy of a valid string. */
                ASSERT_OK(utf8_ensure_valid(&p, &t));
                ASSERT_STREQ(p, cases[i].out);
                ASSERT_TRUE(valid ? p == cases[i].in && !t : p == t);

                /* utf8_make_valid_take(): the same string when valid. */
                u = strdup(cases[i].in);
                ASSERT_NOT_NULL(u);
                char *v = u;
                u = utf8_make_valid_take(u);
                ASSERT_STREQ(u, cases[i].out);
                if (valid)
                        ASSERT_TRUE(u == v);
        }

        const char *n = NULL;
        char *c = NULL;
        ASSERT_TRUE(utf8_is_valid(NULL));
        ASSERT_NULL(utf8_make_valid(NULL));
        ASSERT_NULL(utf8_make_valid_take(NULL));
        ASSERT_OK(utf8_ensure_valid(&n, &c));
        ASSERT_TRUE(!n && !c);

        /* A whole text made valid is each of its strings made valid: JSON
         * and the exposition are escaped after they are written. */
        _cleanup_free_ char *doc = utf8_make_valid("{\"cgroup\":\"a\xe2\x82\",\"node\":\"n\xff\"}");
        ASSERT_STREQ(doc, "{\"cgroup\":\"a\xef\xbf\xbd\xef\xbf\xbd\",\"node\":\"n\xef\xbf\xbd\"}");
}

TEST(utf8_bus) {
        /* Noncharacters: valid UTF-8, refused by D-Bus. */
        ASSERT_EQ(utf8_valid_char_len("\xef\xbf\xbf"), 3); /* U+FFFF */
        ASSERT_EQ(utf8_bus_char_len("\xef\xbf\xbf"), 0);
        ASSERT_EQ(utf8_bus_char_len("\xef\xbf\xbe"), 0); /* U+FFFE */
        ASSERT_EQ(utf8_bus_char_len("\xef\xb7\x90"), 0); /* U+FDD0 */
        ASSERT_EQ(utf8_bus_char_len("\xef\xb7\xaf"), 0); /* U+FDEF */
        ASSERT_EQ(utf8_bus_char_len("\xf0\x9f\xbf\xbf"), 0); /* U+1FFFF */
        ASSERT_EQ(utf8_bus_char_len("\xef\xb7\xb0"), 3); /* U+FDF0 */
        ASSERT_EQ(utf8_bus_char_len("\xef\xbf\xbd"), 3); /* U+FFFD */
        ASSERT_EQ(utf8_bus_char_len("\xf0\x9f\x98\x80"), 4);
        ASSERT_EQ(utf8_bus_char_len("\xc3\xa9"), 2);
        ASSERT_EQ(utf8_bus_char_len("a"), 1);
        ASSERT_EQ(utf8_bus_char_len("\xed\xa0\x80"), 0); /* a surrogate, as before */

        _cleanup_free_ char *s = utf8_make_valid_bus("a\xef\xbf\xbf"
                                                     "b\xbd");
        ASSERT_STREQ(s, "a\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"
                        "b\xef\xbf\xbd");
        ASSERT_TRUE(utf8_is_valid("a\xef\xbf\xbf"));
        ASSERT_FALSE(utf8_is_valid_bus("a\xef\xbf\xbf"));
        ASSERT_TRUE(utf8_is_valid_bus(s));

        const char *p = "x\xef\xb7\x90";
        char *c = NULL;
        ASSERT_OK(utf8_ensure_valid_bus(&p, &c));
        ASSERT_NOT_NULL(c);
        ASSERT_STREQ(p, "x\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
        free(c);
}

DEFINE_TEST_MAIN
