/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <sys/stat.h>

#include "config.h"
#include "tests.h"

static bool startswith(const char *s, const char *prefix) {
        return s && strncmp(s, prefix, strlen(prefix)) == 0;
}

static Config *parse_ok(const char *json) {
        Config *c = NULL;
        char *err = NULL;
        int r;

        r = config_parse(json, &c, &err);
        if (r < 0)
                fprintf(stderr, "unexpected error for %s: %s\n", json, strna(err));
        ASSERT_OK(r);
        ASSERT_NULL(err);
        ASSERT_NOT_NULL(c);
        return c;
}

/* Parses a document that must be refused with -EINVAL and a message starting
 * with 'prefix'; returns the message (caller frees). */
static char *parse_fail(const char *json, const char *prefix) {
        Config *c = (Config *) 0x1;
        char *err = NULL;

        int r;

        r = config_parse(json, &c, &err);
        if (r != -EINVAL)
                fprintf(stderr, "unexpected result %i for %s\n", r, json);
        ASSERT_ERROR(r, EINVAL);
        ASSERT_TRUE(c == (Config *) 0x1); /* not written on failure */
        ASSERT_NOT_NULL(err);
        if (!startswith(err, prefix)) {
                fprintf(stderr, "for %s\n  expected prefix \"%s\"\n  got \"%s\"\n", json, prefix, err);
                ASSERT_TRUE(false);
        }
        return err;
}

static void check_fail(const char *json, const char *prefix) {
        free(parse_fail(json, prefix));
}

/* A document with one profile whose body is 'fields' (after the name). */
static char *profile_doc(const char *fields) {
        char *s;

        ASSERT_TRUE(asprintf(&s, "{\"profiles\": [{\"name\": \"p\"}, {\"name\": \"q\"%s%s}]}",
                             *fields ? ", " : "", fields) >= 0);
        return s;
}

static void check_profile_fail(const char *fields, const char *prefix) {
        _cleanup_free_ char *doc = profile_doc(fields);

        check_fail(doc, prefix);
}

static Config *parse_profile_ok(const char *fields) {
        _cleanup_free_ char *doc = profile_doc(fields);

        return parse_ok(doc);
}

/* A document with targets[1] = { "name": "t", <fields> } after a valid targets[0]. */
static char *target_doc(const char *fields) {
        char *s;

        ASSERT_TRUE(asprintf(&s,
                             "{\"profiles\": [{\"name\": \"p\"}], \"targets\": ["
                             "{\"name\": \"ok\", \"containers\": [\"main\"]},"
                             "{\"name\": \"t\"%s%s}]}",
                             *fields ? ", " : "", fields) >= 0);
        return s;
}

static void check_target_fail(const char *fields, const char *prefix) {
        _cleanup_free_ char *doc = target_doc(fields);

        check_fail(doc, prefix);
}

static Config *parse_target_ok(const char *fields) {
        _cleanup_free_ char *doc = target_doc(fields);

        return parse_ok(doc);
}

static void check_machine_fail(const char *items, const char *prefix) {
        _cleanup_free_ char *doc = NULL;

        ASSERT_TRUE(asprintf(&doc, "{\"machineConfig\": [%s]}", items) >= 0);
        check_fail(doc, prefix);
}

/* ---- defaults and the full example ------------------------------------------------------------ */

static void assert_default_profile(const Profile *p) {
        ASSERT_STREQ(p->event, "cpu-clock");
        ASSERT_EQ(p->frequency, 99);
        ASSERT_EQ(p->duration_usec, 20 * USEC_PER_SEC);
        ASSERT_EQ(p->checkpoint_interval_usec, 5 * 60 * USEC_PER_SEC);
        ASSERT_EQ(p->start, PROFILE_START_AUTO);
        ASSERT_TRUE(p->kernel_stacks);
        ASSERT_TRUE(p->python_frames);
        ASSERT_FALSE(p->gpu_launches);
        ASSERT_FALSE(p->gpu_durations);
        ASSERT_EQ(p->formats, (1u << REPORT_FORMAT_FOLDED) | (1u << REPORT_FORMAT_JSON));
        ASSERT_NULL(p->output);
        ASSERT_EQ(p->n_include_patterns, 1);
        ASSERT_STREQ(p->include_patterns[0].source, ".*");
        ASSERT_EQ(p->n_exclude_patterns, 0);
}

TEST(empty_document) {
        Config *c = parse_ok("{}");
        const Profile *p;

        ASSERT_STREQ(c->report_dir, "/var/lib/cgprof/reports");
        ASSERT_EQ(c->n_machine_config, 0);
        ASSERT_TRUE(c->restore_machine_config);
        ASSERT_EQ(c->machine_config_interval_usec, 30 * USEC_PER_SEC);
        ASSERT_FALSE(c->enable_default);
        ASSERT_STREQ(c->default_profile_ref, "default");
        ASSERT_EQ(c->n_targets, 0);
        ASSERT_NULL(c->debuginfod_urls); /* off unless configured */

        /* The implicit default profile. */
        ASSERT_EQ(c->n_profiles, 1);
        p = config_find_profile(c, "default");
        ASSERT_NOT_NULL(p);
        ASSERT_STREQ(p->name, "default");
        assert_default_profile(p);

        config_free(c);
}

TEST(profile_defaults) {
        Config *c = parse_ok("{\"profiles\": [{\"name\": \"mine\"}]}");
        const Profile *p = config_find_profile(c, "mine");

        ASSERT_NOT_NULL(p);
        assert_default_profile(p);
        /* "default" is added next to it, as nothing named "default" exists. */
        ASSERT_EQ(c->n_profiles, 2);
        ASSERT_NOT_NULL(config_find_profile(c, "default"));
        config_free(c);
}

TEST(explicit_default_profile) {
        Config *c = parse_ok("{\"profiles\": [{\"name\": \"default\", \"frequency\": 49}]}");

        ASSERT_EQ(c->n_profiles, 1);
        ASSERT_EQ(config_find_profile(c, "default")->frequency, 49);
        config_free(c);

        /* Writing the default ref explicitly changes nothing. */
        c = parse_ok("{\"defaultProfileRef\": \"default\"}");
        ASSERT_EQ(c->n_profiles, 1);
        ASSERT_STREQ(c->profiles[0].name, "default");
        config_free(c);
}

TEST(default_profile_ref) {
        Config *c =
                parse_ok("{\"defaultProfileRef\": \"fast\", \"profiles\": [{\"name\": \"fast\", "
                         "\"frequency\": 999}], \"targets\": [{\"name\": \"t\", \"containers\": [\"a\"]}]}");

        /* No implicit "default" when another default is named. */
        ASSERT_EQ(c->n_profiles, 1);
        ASSERT_NULL(config_find_profile(c, "default"));
        ASSERT_STREQ(config_target_profile(c, &c->targets[0])->name, "fast");
        config_free(c);

        char *err = parse_fail("{\"defaultProfileRef\": \"x\"}", "defaultProfileRef: ");
        ASSERT_STREQ(err, "defaultProfileRef: no profile named \"x\"");
        free(err);

        check_fail("{\"defaultProfileRef\": \"x\", \"profiles\": [{\"name\": \"default\"}]}",
                   "defaultProfileRef: ");
        check_fail("{\"defaultProfileRef\": \"\"}", "defaultProfileRef: ");
        check_fail("{\"defaultProfileRef\": 1}", "defaultProfileRef: must be a string");
        check_fail("{\"defaultProfileRef\": \"a/b\"}", "defaultProfileRef: ");
}

static const char full_example[] =
        "{\n"
        "  \"reportDir\": \"/srv/reports\",\n"
        "  \"machineConfig\": [\n"
        "    { \"name\": \"kernel.perf_event_paranoid\", \"value\": \"2\" },\n"
        "    { \"name\": \"kernel.perf_event_max_stack\", \"value\": 255 }\n"
        "  ],\n"
        "  \"restoreMachineConfig\": false,\n"
        "  \"machineConfigInterval\": \"1m30s\",\n"
        "  \"enableDefault\": true,\n"
        "  \"defaultProfileRef\": \"default\",\n"
        "  \"profiles\": [\n"
        "    {\n"
        "      \"name\": \"default\",\n"
        "      \"event\": \"cycles\",\n"
        "      \"frequency\": 999,\n"
        "      \"duration\": \"0\",\n"
        "      \"start\": \"manual\",\n"
        "      \"kernelStacks\": false,\n"
        "      \"pythonFrames\": false,\n"
        "      \"gpu\": { \"launches\": true, \"durations\": true },\n"
        "      \"formats\": [\"pprof\", \"svg\", \"speedscope\"],\n"
        "      \"output\": \"{NAMESPACE}/{POD}/{CONTAINER}/{TIMESTAMP}_{UID}\",\n"
        "      \"includePatterns\": [\"python\", \"java\"],\n"
        "      \"excludePatterns\": [\"(^|/)(ba|da|z)?sh( |$)\", \"(^|/)cgprof\"]\n"
        "    },\n"
        "    { \"name\": \"other.profile_1-x\" }\n"
        "  ],\n"
        "  \"targets\": [\n"
        "    {\n"
        "      \"name\": \"labelled\",\n"
        "      \"profileRef\": \"other.profile_1-x\",\n"
        "      \"namespaceSelector\": { \"matchLabels\": { \"team\": \"ml\" } },\n"
        "      \"podSelector\": { \"matchExpressions\": [ { \"key\": \"app\", \"operator\": \"In\", "
        "\"values\": "
        "[\"trainer\"] } ] },\n"
        "      \"podNamePatterns\": [\"^trainer-\"],\n"
        "      \"owner\": { \"kind\": \"DaemonSet\", \"name\": \"collector\" },\n"
        "      \"containers\": [\"main\", \"sidecar\"],\n"
        "      \"cgroupPatterns\": [\"system.slice/nginx.service\"],\n"
        "      \"disabled\": true\n"
        "    },\n"
        "    { \"name\": \"host\", \"cgroupPatterns\": [\"system.slice/*.service\"] }\n"
        "  ]\n"
        "}\n";

TEST(full_example) {
        Config *c = parse_ok(full_example);
        const Profile *p;
        const Target *t;

        ASSERT_STREQ(c->report_dir, "/srv/reports");
        ASSERT_EQ(c->n_machine_config, 2);
        ASSERT_STREQ(c->machine_config[0].name, "kernel.perf_event_paranoid");
        ASSERT_STREQ(c->machine_config[0].value, "2");
        ASSERT_STREQ(c->machine_config[1].name, "kernel.perf_event_max_stack");
        ASSERT_STREQ(c->machine_config[1].value, "255");
        ASSERT_FALSE(c->restore_machine_config);
        ASSERT_EQ(c->machine_config_interval_usec, 90 * USEC_PER_SEC);
        ASSERT_TRUE(c->enable_default);
        ASSERT_STREQ(c->default_profile_ref, "default");

        ASSERT_EQ(c->n_profiles, 2);
        p = &c->profiles[0];
        ASSERT_STREQ(p->name, "default");
        ASSERT_STREQ(p->event, "cycles");
        ASSERT_EQ(p->frequency, 999);
        ASSERT_EQ(p->duration_usec, 0);
        ASSERT_EQ(p->start, PROFILE_START_MANUAL);
        ASSERT_FALSE(p->kernel_stacks);
        ASSERT_FALSE(p->python_frames);
        ASSERT_TRUE(p->gpu_launches);
        ASSERT_TRUE(p->gpu_durations);
        ASSERT_EQ(p->formats, (1u << REPORT_FORMAT_PPROF) | (1u << REPORT_FORMAT_SVG) |
                                      (1u << REPORT_FORMAT_SPEEDSCOPE));
        ASSERT_STREQ(p->output, "{NAMESPACE}/{POD}/{CONTAINER}/{TIMESTAMP}_{UID}");
        ASSERT_EQ(p->n_include_patterns, 2);
        ASSERT_STREQ(p->include_patterns[1].source, "java");
        ASSERT_EQ(p->n_exclude_patterns, 2);
        ASSERT_STREQ(p->exclude_patterns[1].source, "(^|/)cgprof");
        assert_default_profile(&c->profiles[1]);

        ASSERT_EQ(c->n_targets, 2);
        t = &c->targets[0];
        ASSERT_STREQ(t->name, "labelled");
        ASSERT_STREQ(t->profile_ref, "other.profile_1-x");
        ASSERT_TRUE(config_target_profile(c, t) == &c->profiles[1]);
        ASSERT_NOT_NULL(t->namespace_selector);
        ASSERT_STREQ(t->namespace_selector->match_labels[0], "team");
        ASSERT_NOT_NULL(t->pod_selector);
        ASSERT_EQ(t->pod_selector->n_requirements, 1);
        ASSERT_EQ(t->n_pod_name_patterns, 1);
        ASSERT_STREQ(t->pod_name_patterns[0].source, "^trainer-");
        ASSERT_NOT_NULL(t->owner);
        ASSERT_STREQ(t->owner->kind, "DaemonSet");
        ASSERT_STREQ(t->owner->name, "collector");
        ASSERT_EQ(strv_length(t->containers), 2);
        ASSERT_STREQ(t->containers[1], "sidecar");
        ASSERT_EQ(strv_length(t->cgroup_patterns), 1);
        ASSERT_TRUE(t->disabled);

        t = &c->targets[1];
        ASSERT_NULL(t->profile_ref);
        ASSERT_TRUE(config_target_profile(c, t) == &c->profiles[0]);
        ASSERT_NULL(t->namespace_selector);
        ASSERT_NULL(t->pod_selector);
        ASSERT_NULL(t->pod_name_patterns);
        ASSERT_NULL(t->owner);
        ASSERT_NULL(t->containers);
        ASSERT_FALSE(t->disabled);

        config_free(c);
}

/* ---- document-level errors -------------------------------------------------------------------- */

TEST(json_syntax) {
        char *err;

        err = parse_fail("{\n  \"reportDir\": \"/x\",\n  \"profiles\": [,]\n}\n", "$: ");
        ASSERT_STREQ(err, "$: not valid JSON near line 3");
        free(err);

        err = parse_fail("", "$: not valid JSON");
        free(err);
        err = parse_fail("{\"a\": 1", "$: not valid JSON near line 1");
        free(err);
        err = parse_fail("{} {}", "$: not valid JSON");
        free(err);
        err = parse_fail("{}\n\n  x", "$: not valid JSON near line 3");
        free(err);

        /* An escaped NUL would truncate strings: refused. */
        check_fail("{\"profiles\": [{\"name\": \"a\\u0000b\"}]}", "$: ");
        /* ... but an escaped backslash followed by "u0000" is fine. */
        Config *c =
                parse_ok("{\"profiles\": [{\"name\": \"default\", \"includePatterns\": [\"\\\\u0000\"]}]}");
        ASSERT_STREQ(c->profiles[0].include_patterns[0].source, "\\u0000");
        config_free(c);
}

TEST(top_level_not_object) {
        char *err = parse_fail("[]", "$: ");

        ASSERT_STREQ(err, "$: must be an object");
        free(err);
        check_fail("1", "$: must be an object");
        check_fail("null", "$: must be an object");
        check_fail("\"x\"", "$: must be an object");
}

TEST(bom) {
        Config *c = parse_ok("\xEF\xBB\xBF{\"enableDefault\": true}");

        ASSERT_TRUE(c->enable_default);
        config_free(c);
}

TEST(unknown_keys) {
        char *err = parse_fail("{\"reportdir\": \"/x\"}", "reportdir: ");

        ASSERT_STREQ(err, "reportdir: unknown key");
        free(err);

        err = parse_fail("{\"profiles\": [{\"name\": \"a\", \"frequncy\": 10}]}", "profiles[0].frequncy: ");
        ASSERT_STREQ(err, "profiles[0].frequncy: unknown key");
        free(err);

        check_target_fail("\"containers\": [\"a\"], \"podselector\": {}",
                          "targets[1].podselector: unknown key");
        check_target_fail("\"owner\": {\"kind\": \"Job\", \"uid\": \"x\"}",
                          "targets[1].owner.uid: unknown key");
        check_target_fail("\"podSelector\": {\"matchLabel\": {}}",
                          "targets[1].podSelector.matchLabel: unknown key");
        check_machine_fail("{\"name\": \"kernel.kptr_restrict\", \"value\": \"1\", \"x\": 1}",
                           "machineConfig[0].x: unknown key");
}

TEST(duplicate_keys) {
        check_fail("{\"enableDefault\": true, \"enableDefault\": false}", "enableDefault: duplicate key");
        check_profile_fail("\"frequency\": 1, \"frequency\": 2", "profiles[1].frequency: duplicate key");
}

/* ---- top-level keys --------------------------------------------------------------------------- */

TEST(report_dir) {
        Config *c = parse_ok("{\"reportDir\": \"/data/x\"}");

        ASSERT_STREQ(c->report_dir, "/data/x");
        config_free(c);

        check_fail("{\"reportDir\": \"data\"}", "reportDir: ");
        check_fail("{\"reportDir\": \"\"}", "reportDir: ");
        check_fail("{\"reportDir\": \"/data/../etc\"}", "reportDir: ");
        check_fail("{\"reportDir\": \"/..\"}", "reportDir: ");
        check_fail("{\"reportDir\": 1}", "reportDir: must be a string");
        check_fail("{\"reportDir\": null}", "reportDir: must be a string");
}

TEST(http) {
        Config *c = parse_ok("{}");

        /* Absent: no listener. */
        ASSERT_NULL(c->http.listen);
        ASSERT_EQ(c->http.max_connections, CONFIG_HTTP_DEFAULT_MAX_CONNECTIONS);
        ASSERT_EQ(c->http.timeout_usec, CONFIG_HTTP_DEFAULT_TIMEOUT_USEC);
        config_free(c);

        c = parse_ok("{\"http\": {\"listen\": \"0.0.0.0:9469\"}}");
        ASSERT_STREQ(c->http.listen, "0.0.0.0:9469");
        config_free(c);
        c = parse_ok("{\"http\": {\"listen\": \"[::1]:1\", \"maxConnections\": 4, \"timeout\": \"2s\"}}");
        ASSERT_STREQ(c->http.listen, "[::1]:1");
        ASSERT_EQ(c->http.max_connections, 4);
        ASSERT_EQ(c->http.timeout_usec, 2 * USEC_PER_SEC);
        config_free(c);
        c = parse_ok("{\"http\": {\"listen\": \":65535\"}}");
        config_free(c);
        c = parse_ok("{\"http\": {\"listen\": \"127.0.0.1:9469\"}}");
        config_free(c);

        check_fail("{\"http\": \"0.0.0.0:9469\"}", "http: must be an object");
        check_fail("{\"http\": {}}", "http.listen: required key is missing");
        check_fail("{\"http\": {\"listen\": \"0.0.0.0:9469\", \"port\": 1}}", "http.port: unknown key");
        check_fail("{\"http\": {\"listen\": 9469}}", "http.listen: must be a string");
        check_fail("{\"http\": {\"listen\": \"\"}}", "http.listen: ");
        check_fail("{\"http\": {\"listen\": \"0.0.0.0\"}}",
                   "http.listen: \"0.0.0.0\": must be ADDRESS:PORT (no port)");
        check_fail("{\"http\": {\"listen\": \"0.0.0.0:0\"}}",
                   "http.listen: \"0.0.0.0:0\": the port must be");
        check_fail("{\"http\": {\"listen\": \"0.0.0.0:65536\"}}",
                   "http.listen: \"0.0.0.0:65536\": the port must be");
        check_fail("{\"http\": {\"listen\": \"0.0.0.0:-1\"}}",
                   "http.listen: \"0.0.0.0:-1\": the port must be");
        check_fail("{\"http\": {\"listen\": \"0.0.0.0:80x\"}}",
                   "http.listen: \"0.0.0.0:80x\": the port must be");
        check_fail(
                "{\"http\": {\"listen\": \"localhost:9469\"}}",
                "http.listen: \"localhost:9469\": not a numeric IPv4 address (host names are not resolved)");
        check_fail("{\"http\": {\"listen\": \"::1:9469\"}}",
                   "http.listen: \"::1:9469\": an IPv6 address must be in brackets");
        check_fail("{\"http\": {\"listen\": \"[::1:9469\"}}",
                   "http.listen: \"[::1:9469\": an IPv6 address must be in brackets");
        check_fail("{\"http\": {\"listen\": \"[zz]:9469\"}}",
                   "http.listen: \"[zz]:9469\": not a numeric IPv6 address");
        check_fail("{\"http\": {\"listen\": \"1.2.3.4.5:9469\"}}",
                   "http.listen: \"1.2.3.4.5:9469\": not a numeric IPv4");
        check_fail("{\"http\": {\"listen\": \":9469\", \"maxConnections\": 0}}",
                   "http.maxConnections: must be an integer 1..1024");
        check_fail("{\"http\": {\"listen\": \":9469\", \"maxConnections\": 1.5}}",
                   "http.maxConnections: must be an integer");
        check_fail("{\"http\": {\"listen\": \":9469\", \"maxConnections\": 5000}}",
                   "http.maxConnections: must be an integer");
        check_fail("{\"http\": {\"listen\": \":9469\", \"maxConnections\": \"4\"}}",
                   "http.maxConnections: must be an integer");
        check_fail("{\"http\": {\"listen\": \":9469\", \"timeout\": \"500ms\"}}",
                   "http.timeout: must be whole seconds, 1s..1h");
        check_fail("{\"http\": {\"listen\": \":9469\", \"timeout\": \"0\"}}",
                   "http.timeout: must be whole seconds");
        check_fail("{\"http\": {\"listen\": \":9469\", \"timeout\": \"2h\"}}",
                   "http.timeout: must be whole seconds");
        check_fail("{\"http\": {\"listen\": \":9469\", \"timeout\": 5}}",
                   "http.timeout: must be a duration string");
}

static void check_mode(const char *json, bool kubernetes, const char *prefix) {
        Config *c = parse_ok(json);
        char *err = NULL;
        int r = config_check_http_mode(c, kubernetes, &err);

        if (!prefix)
                ASSERT_EQ(r, 0);
        else {
                ASSERT_EQ(r, -EINVAL);
                ASSERT_NOT_NULL(err);
                ASSERT_TRUE(strncmp(err, prefix, strlen(prefix)) == 0);
        }
        free(err);
        config_free(c);
}

TEST(http_pprof) {
        Config *c = parse_ok("{\"http\": {\"listen\": \"127.0.0.1:1\"}}");
        ASSERT_FALSE(c->http.pprof); /* off by default */
        ASSERT_NULL(c->http.tls_cert_file);
        config_free(c);
        c = parse_ok("{\"http\": {\"listen\": \":1\", \"pprof\": true, \"tlsCertFile\": \"/c\", "
                     "\"tlsKeyFile\": \"/k\"}}");
        ASSERT_TRUE(c->http.pprof);
        ASSERT_STREQ(c->http.tls_cert_file, "/c");
        ASSERT_STREQ(c->http.tls_key_file, "/k");
        config_free(c);

        check_fail("{\"http\": {\"listen\": \":1\", \"pprof\": 1}}", "http.pprof: must be a boolean");
        check_fail("{\"http\": {\"listen\": \":1\", \"tlsCertFile\": \"/c\"}}",
                   "http.tlsKeyFile: required with http.tlsCertFile");
        check_fail("{\"http\": {\"listen\": \":1\", \"tlsKeyFile\": \"/k\"}}",
                   "http.tlsCertFile: required with http.tlsKeyFile");
        check_fail("{\"http\": {\"listen\": \":1\", \"tlsCertFile\": \"c\", \"tlsKeyFile\": \"/k\"}}",
                   "http.tlsCertFile: must be an absolute path");

        /* Kubernetes: pprof needs TLS. Host: pprof on loopback only. */
        check_mode("{\"http\": {\"listen\": \":1\", \"pprof\": true}}", true, "http.tlsCertFile: required");
        check_mode("{\"http\": {\"listen\": \":1\", \"pprof\": true, \"tlsCertFile\": \"/c\", "
                   "\"tlsKeyFile\": \"/k\"}}",
                   true, NULL);
        check_mode("{\"http\": {\"listen\": \":1\"}}", true, NULL);
        check_mode("{\"http\": {\"listen\": \":1\", \"pprof\": true}}", false, "http.listen: \":1\": with");
        check_mode("{\"http\": {\"listen\": \"10.0.0.1:1\", \"pprof\": true}}", false, "http.listen:");
        check_mode("{\"http\": {\"listen\": \"127.0.0.1:1\", \"pprof\": true}}", false, NULL);
        check_mode("{\"http\": {\"listen\": \"127.1.2.3:1\", \"pprof\": true}}", false, NULL);
        check_mode("{\"http\": {\"listen\": \"[::1]:1\", \"pprof\": true}}", false, NULL);
        check_mode("{\"http\": {\"listen\": \"[::]:1\", \"pprof\": true}}", false, "http.listen:");
        check_mode("{\"http\": {\"listen\": \"0.0.0.0:1\"}}", false, NULL);
        check_mode("{\"http\": {\"listen\": \"unix:/run/x.sock\", \"pprof\": true}}", false, NULL);
        check_fail("{\"http\": {\"listen\": \"unix:x.sock\"}}",
                   "http.listen: \"unix:x.sock\": a Unix socket must be");
}

TEST(http_limits) {
        Config *c = parse_ok("{\"http\": {\"listen\": \":1\"}}");

        /* Defaults: no audiences (the API server's), both limits on. */
        ASSERT_NULL(c->http.token_audiences);
        ASSERT_TRUE(c->http.review_rate_limit.per_second == CONFIG_HTTP_DEFAULT_REVIEWS_PER_SECOND);
        ASSERT_EQ(c->http.review_rate_limit.burst, CONFIG_HTTP_DEFAULT_REVIEW_BURST);
        ASSERT_TRUE(c->http.pull_rate_limit.per_second == CONFIG_HTTP_DEFAULT_PULLS_PER_SECOND);
        ASSERT_EQ(c->http.pull_rate_limit.burst, CONFIG_HTTP_DEFAULT_PULL_BURST);
        config_free(c);

        c = parse_ok("{\"http\": {\"listen\": \":1\", \"tokenAudiences\": [\"cgprof\", "
                     "\"https://kubernetes.default.svc\"], \"reviewRateLimit\": {\"perSecond\": 0.5}, "
                     "\"pullRateLimit\": {\"perSecond\": 0, \"burst\": 7}}}");
        ASSERT_STREQ(c->http.token_audiences[0], "cgprof");
        ASSERT_STREQ(c->http.token_audiences[1], "https://kubernetes.default.svc");
        ASSERT_NULL(c->http.token_audiences[2]);
        /* A key left out keeps its default. */
        ASSERT_TRUE(c->http.review_rate_limit.per_second == 0.5);
        ASSERT_EQ(c->http.review_rate_limit.burst, CONFIG_HTTP_DEFAULT_REVIEW_BURST);
        ASSERT_TRUE(c->http.pull_rate_limit.per_second == 0);
        ASSERT_EQ(c->http.pull_rate_limit.burst, 7);
        config_free(c);

        check_fail("{\"http\": {\"listen\": \":1\", \"tokenAudiences\": \"cgprof\"}}",
                   "http.tokenAudiences: must be an array");
        check_fail("{\"http\": {\"listen\": \":1\", \"tokenAudiences\": []}}", "http.tokenAudiences: ");
        check_fail("{\"http\": {\"listen\": \":1\", \"tokenAudiences\": [\"\"]}}",
                   "http.tokenAudiences[0]: must not be empty");
        check_fail("{\"http\": {\"listen\": \":1\", \"tokenAudiences\": [\"a\", \"a\"]}}",
                   "http.tokenAudiences[1]: duplicate audience \"a\"");
        check_fail("{\"http\": {\"listen\": \":1\", \"tokenAudiences\": [\"a\\nb\"]}}",
                   "http.tokenAudiences[0]: \"a\nb\" has a control character");
        check_fail("{\"http\": {\"listen\": \":1\", \"tokenAudiences\": [1]}}",
                   "http.tokenAudiences[0]: must be a string");
        check_fail("{\"http\": {\"listen\": \":1\", \"reviewRateLimit\": 10}}",
                   "http.reviewRateLimit: must be an object");
        check_fail("{\"http\": {\"listen\": \":1\", \"reviewRateLimit\": {\"perSecond\": -1}}}",
                   "http.reviewRateLimit.perSecond: must be a number 0..1000000 (0: no limit)");
        check_fail("{\"http\": {\"listen\": \":1\", \"pullRateLimit\": {\"perSecond\": \"10\"}}}",
                   "http.pullRateLimit.perSecond: must be a number");
        check_fail("{\"http\": {\"listen\": \":1\", \"pullRateLimit\": {\"perSecond\": 1e-9}}}",
                   "http.pullRateLimit.perSecond: must be 0 (no limit) or at least one a day");
        check_fail("{\"http\": {\"listen\": \":1\", \"pullRateLimit\": {\"burst\": 0}}}",
                   "http.pullRateLimit.burst: must be an integer 1..1000000");
        check_fail("{\"http\": {\"listen\": \":1\", \"pullRateLimit\": {\"burst\": 1.5}}}",
                   "http.pullRateLimit.burst: must be an integer");
        check_fail("{\"http\": {\"listen\": \":1\", \"pullRateLimit\": {\"rate\": 1}}}",
                   "http.pullRateLimit.rate: unknown key");
}

TEST(debuginfod_urls) {
        Config *c = parse_ok("{\"debuginfodUrls\": [\"https://debuginfod.debian.net\", "
                             "\"http://127.0.0.1:8002/\", \"http://[::1]:8002/prefix\"]}");

        ASSERT_NOT_NULL(c->debuginfod_urls);
        ASSERT_STREQ(c->debuginfod_urls[0], "https://debuginfod.debian.net");
        ASSERT_STREQ(c->debuginfod_urls[1], "http://127.0.0.1:8002/");
        ASSERT_STREQ(c->debuginfod_urls[2], "http://[::1]:8002/prefix");
        ASSERT_NULL(c->debuginfod_urls[3]);
        config_free(c);

        /* Empty: no server, as when the key is absent. */
        c = parse_ok("{\"debuginfodUrls\": []}");
        ASSERT_NOT_NULL(c->debuginfod_urls);
        ASSERT_NULL(c->debuginfod_urls[0]);
        config_free(c);

        char *err = parse_fail("{\"debuginfodUrls\": [\"http://a\", \"ftp://b\"]}", "debuginfodUrls[1]: ");
        ASSERT_STREQ(err, "debuginfodUrls[1]: not an http(s) URL");
        free(err);
        check_fail("{\"debuginfodUrls\": \"http://a\"}", "debuginfodUrls: must be an array");
        check_fail("{\"debuginfodUrls\": [1]}", "debuginfodUrls[0]: must be a string");
        check_fail("{\"debuginfodUrls\": [\"\"]}", "debuginfodUrls[0]: not an http(s) URL");
        check_fail("{\"debuginfodUrls\": [\"debuginfod.debian.net\"]}",
                   "debuginfodUrls[0]: not an http(s) URL");
        check_fail("{\"debuginfodUrls\": [\"file:///srv/debug\"]}", "debuginfodUrls[0]: not an http(s) URL");
        check_fail("{\"debuginfodUrls\": [\"http://\"]}", "debuginfodUrls[0]: not an http(s) URL: no host");
        check_fail("{\"debuginfodUrls\": [\"https:///x\"]}",
                   "debuginfodUrls[0]: not an http(s) URL: no host");
        /* libdebuginfod reads the servers space-separated from one variable. */
        check_fail("{\"debuginfodUrls\": [\"http://a http://b\"]}",
                   "debuginfodUrls[0]: must not contain whitespace or control characters");
        check_fail("{\"debuginfodUrls\": [\"http://a/\\n\"]}",
                   "debuginfodUrls[0]: must not contain whitespace or control characters");
        check_fail("{\"debuginfodUrls\": [\"http://a/?x=1\"]}", "debuginfodUrls[0]: must not have a query");
        check_fail("{\"debuginfodUrls\": [\"http://a\", \"http://a\"]}",
                   "debuginfodUrls[1]: duplicate URL \"http://a\"");
        check_fail(
                "{\"debuginfodUrls\": [\"http://1\", \"http://2\", \"http://3\", \"http://4\", "
                "\"http://5\", "
                "\"http://6\", \"http://7\", \"http://8\", \"http://9\", \"http://10\", \"http://11\", "
                "\"http://12\", \"http://13\", \"http://14\", \"http://15\", \"http://16\", \"http://17\"]}",
                "debuginfodUrls: at most 16 servers");

        _cleanup_free_ char *doc = NULL, *long_url = malloc(1100);
        ASSERT_NOT_NULL(long_url);
        memset(long_url, 'a', 1099);
        memcpy(long_url, "http://", 7);
        long_url[1099] = '\0';
        ASSERT_TRUE(asprintf(&doc, "{\"debuginfodUrls\": [\"%s\"]}", long_url) >= 0);
        check_fail(doc, "debuginfodUrls[0]: longer than 1024 characters");
}

TEST(rank_categories) {
        Config *c =
                parse_ok("{\"profiles\": [{\"name\": \"p\", \"foldedRankRoot\": true, \"rankCategories\": "
                         "{\"communication\": [\"^horovod::\"], \"compute\": [\"^xla::\", \"jax\"]}}]}");
        const Profile *p = &c->profiles[0];

        ASSERT_TRUE(p->folded_rank_root);
        ASSERT_STREQ(p->rank_categories[0][0], "^horovod::");
        ASSERT_NULL(p->rank_categories[0][1]);
        ASSERT_NULL(p->rank_categories[1]);
        ASSERT_STREQ(p->rank_categories[2][1], "jax");
        config_free(c);
        check_profile_fail("\"rankCategories\": {\"io\": [\"x\"]}",
                           "profiles[1].rankCategories.io: unknown key");
        check_profile_fail("\"rankCategories\": {\"compute\": [\"(\"]}",
                           "profiles[1].rankCategories.compute[0]: ");
}

TEST(booleans) {
        check_fail("{\"restoreMachineConfig\": \"true\"}", "restoreMachineConfig: must be a boolean");
        check_fail("{\"enableDefault\": 1}", "enableDefault: must be a boolean");
        check_fail("{\"enableDefault\": null}", "enableDefault: must be a boolean");
        check_profile_fail("\"kernelStacks\": \"yes\"", "profiles[1].kernelStacks: must be a boolean");
        check_profile_fail("\"pythonFrames\": 1", "profiles[1].pythonFrames: must be a boolean");
        check_profile_fail("\"gpu\": {\"launches\": \"yes\"}",
                           "profiles[1].gpu.launches: must be a boolean");
        check_profile_fail("\"gpu\": {\"durations\": 1}", "profiles[1].gpu.durations: must be a boolean");
        check_profile_fail("\"gpu\": {\"launch\": true}", "profiles[1].gpu.launch: unknown key");
        check_profile_fail("\"gpu\": true", "profiles[1].gpu: must be an object");
        check_profile_fail("\"foldedRankRoot\": 1", "profiles[1].foldedRankRoot: must be a boolean");

        _cleanup_free_ char *doc = NULL;
        ASSERT_TRUE(asprintf(&doc,
                             "{\"targets\": [{\"name\": \"a\", \"containers\": [\"x\"]}, {\"name\": \"b\", "
                             "\"containers\": [\"x\"]}, {\"name\": \"c\", \"containers\": [\"x\"], "
                             "\"disabled\": 0}]}") >= 0);
        char *err = parse_fail(doc, "targets[2].disabled: ");
        ASSERT_STREQ(err, "targets[2].disabled: must be a boolean");
        free(err);
}

TEST(machine_config_interval) {
        Config *c = parse_ok("{\"machineConfigInterval\": \"500ms\"}");

        ASSERT_EQ(c->machine_config_interval_usec, 500 * USEC_PER_MSEC);
        config_free(c);

        check_fail("{\"machineConfigInterval\": \"0\"}", "machineConfigInterval: ");
        check_fail("{\"machineConfigInterval\": \"0s\"}", "machineConfigInterval: ");
        check_fail("{\"machineConfigInterval\": \"30\"}", "machineConfigInterval: ");
        check_fail("{\"machineConfigInterval\": 30}", "machineConfigInterval: ");
        check_fail("{\"machineConfigInterval\": \"99999999999999d\"}", "machineConfigInterval: ");
}

/* ---- machineConfig ---------------------------------------------------------------------------- */

TEST(machine_config_allowed) {
        Config *c = parse_ok("{\"machineConfig\": ["
                             "{\"name\": \"kernel.perf_event_paranoid\", \"value\": \"-1\"},"
                             "{\"name\": \"kernel.perf_event_max_stack\", \"value\": \"127\"},"
                             "{\"name\": \"kernel.perf_event_mlock_kb\", \"value\": 2048},"
                             "{\"name\": \"kernel.perf_event_max_sample_rate\", \"value\": \"100000\"},"
                             "{\"name\": \"kernel.perf_cpu_time_max_percent\", \"value\": -3},"
                             "{\"name\": \"kernel.kptr_restrict\", \"value\": \"0\"}]}");

        ASSERT_EQ(c->n_machine_config, 6);
        ASSERT_STREQ(c->machine_config[0].value, "-1");
        ASSERT_STREQ(c->machine_config[2].value, "2048");
        ASSERT_STREQ(c->machine_config[4].value, "-3");
        ASSERT_STREQ(c->machine_config[5].name, "kernel.kptr_restrict");
        config_free(c);

        c = parse_ok("{\"machineConfig\": []}");
        ASSERT_EQ(c->n_machine_config, 0);
        config_free(c);
}

TEST(machine_config_refused) {
        char *err;

        err = parse_fail(
                "{\"machineConfig\": [{\"name\": \"kernel.core_pattern\", \"value\": \"|/bin/sh\"}]}",
                "machineConfig[0].name: ");
        ASSERT_TRUE(startswith(err,
                               "machineConfig[0].name: \"kernel.core_pattern\" is not an allowed sysctl "
                               "(allowed: kernel.perf_event_paranoid, "));
        ASSERT_NOT_NULL(strstr(err, "kernel.kptr_restrict)"));
        free(err);

        check_machine_fail("{\"name\": \"kernel.kptr_restrict\", \"value\": \"1\"},"
                           "{\"name\": \"kernel/perf_event_paranoid\", \"value\": \"1\"}",
                           "machineConfig[1].name: \"kernel/perf_event_paranoid\" is not an allowed sysctl");
        check_machine_fail("{\"name\": \"kernel.perf_event_paranoid/../../core_pattern\", \"value\": \"1\"}",
                           "machineConfig[0].name: ");
        check_machine_fail("{\"name\": \"kernel..perf_event_paranoid\", \"value\": \"1\"}",
                           "machineConfig[0].name: ");
        check_machine_fail("{\"name\": \"../kernel.perf_event_paranoid\", \"value\": \"1\"}",
                           "machineConfig[0].name: ");
        check_machine_fail("{\"name\": \"/proc/sys/kernel/perf_event_paranoid\", \"value\": \"1\"}",
                           "machineConfig[0].name: ");
        check_machine_fail("{\"name\": \"KERNEL.PERF_EVENT_PARANOID\", \"value\": \"1\"}",
                           "machineConfig[0].name: ");
        check_machine_fail("{\"name\": \"kernel.perf_event_paranoid \", \"value\": \"1\"}",
                           "machineConfig[0].name: ");
        check_machine_fail("{\"name\": \"vm.overcommit_memory\", \"value\": \"1\"}",
                           "machineConfig[0].name: ");
        check_machine_fail("{\"name\": \"\", \"value\": \"1\"}", "machineConfig[0].name: ");
        check_machine_fail("{\"name\": 5, \"value\": \"1\"}", "machineConfig[0].name: must be a string");
        check_machine_fail("{\"value\": \"1\"}", "machineConfig[0].name: ");

        ASSERT_FALSE(machine_setting_allowed("kernel.core_pattern"));
        ASSERT_FALSE(machine_setting_allowed("kernel/perf_event_paranoid"));
        ASSERT_FALSE(machine_setting_allowed(".."));
        ASSERT_FALSE(machine_setting_allowed(""));
        ASSERT_FALSE(machine_setting_allowed(NULL));
        ASSERT_TRUE(machine_setting_allowed("kernel.perf_event_paranoid"));
        ASSERT_TRUE(machine_setting_allowed("kernel.perf_event_max_stack"));
        ASSERT_TRUE(machine_setting_allowed("kernel.perf_event_mlock_kb"));
        ASSERT_TRUE(machine_setting_allowed("kernel.perf_event_max_sample_rate"));
        ASSERT_TRUE(machine_setting_allowed("kernel.perf_cpu_time_max_percent"));
        ASSERT_TRUE(machine_setting_allowed("kernel.kptr_restrict"));
}

TEST(machine_config_values) {
        check_machine_fail("{\"name\": \"kernel.kptr_restrict\"}", "machineConfig[0].value: ");
        check_machine_fail("{\"name\": \"kernel.kptr_restrict\", \"value\": \"\"}",
                           "machineConfig[0].value: ");
        check_machine_fail("{\"name\": \"kernel.kptr_restrict\", \"value\": \"1\\n2\"}",
                           "machineConfig[0].value: ");
        check_machine_fail("{\"name\": \"kernel.kptr_restrict\", \"value\": \"1\\r\"}",
                           "machineConfig[0].value: ");
        check_machine_fail("{\"name\": \"kernel.kptr_restrict\", \"value\": 1.5}",
                           "machineConfig[0].value: ");
        check_machine_fail("{\"name\": \"kernel.kptr_restrict\", \"value\": true}",
                           "machineConfig[0].value: ");
        check_machine_fail("{\"name\": \"kernel.kptr_restrict\", \"value\": null}",
                           "machineConfig[0].value: ");
        check_machine_fail("{\"name\": \"kernel.kptr_restrict\", \"value\": 1e300}",
                           "machineConfig[0].value: ");
}

TEST(machine_config_structure) {
        check_fail("{\"machineConfig\": {}}", "machineConfig: must be an array");
        check_machine_fail("\"kernel.kptr_restrict=1\"", "machineConfig[0]: must be an object");

        char *err;
        err = parse_fail("{\"machineConfig\": [{\"name\": \"kernel.kptr_restrict\", \"value\": \"1\"},"
                         "{\"name\": \"kernel.kptr_restrict\", \"value\": \"2\"}]}",
                         "machineConfig[1].name: ");
        ASSERT_TRUE(strstr(err, "duplicate sysctl \"kernel.kptr_restrict\" (also set by machineConfig[0])"));
        free(err);
}

#define GPU "{\"matchLabels\": {\"nvidia.com/gpu.present\": \"true\"}}"
#define NOT_GPU                                                                        \
        "{\"matchExpressions\": [{\"key\": \"nvidia.com/gpu.present\", \"operator\": " \
        "\"NotIn\", \"values\": [\"true\"]}]}"

TEST(machine_config_node_selector) {
        Config *c = parse_ok(
                "{\"machineConfig\": ["
                "{\"name\": \"kernel.perf_event_paranoid\", \"value\": -1, \"nodeSelector\": " GPU "},"
                "{\"name\": \"kernel.perf_event_paranoid\", \"value\": 2, \"nodeSelector\": " NOT_GPU "},"
                "{\"name\": \"kernel.kptr_restrict\", \"value\": 0, \"nodeSelector\": " GPU "},"
                "{\"name\": \"kernel.perf_event_mlock_kb\", \"value\": 1024}],"
                "\"nodeLabels\": {\"nvidia.com/gpu.present\": \"true\", \"zone\": \"\"}}");
        static char *const gpu[] = { "nvidia.com/gpu.present", "true", NULL };

        ASSERT_EQ(c->n_machine_config, 4);
        ASSERT_TRUE(label_selector_matches(c->machine_config[0].node_selector, gpu));
        ASSERT_FALSE(label_selector_matches(c->machine_config[1].node_selector, gpu));
        ASSERT_NULL(c->machine_config[3].node_selector);
        ASSERT_EQ(strv_length(c->node_labels), 4);
        ASSERT_STREQ(c->node_labels[0], "nvidia.com/gpu.present");
        ASSERT_STREQ(c->node_labels[3], "");
        config_free(c);

        /* nodeSelector errors name their key path. */
        check_machine_fail("{\"name\": \"kernel.kptr_restrict\", \"value\": 1, \"nodeSelector\": []}",
                           "machineConfig[0].nodeSelector: ");
        check_machine_fail("{\"name\": \"kernel.kptr_restrict\", \"value\": 1, \"nodeSelector\": "
                           "{\"matchExpressions\": [{\"key\": \"a\", \"operator\": \"Near\"}]}}",
                           "machineConfig[0].nodeSelector.matchExpressions[0].operator: ");
        check_machine_fail("{\"name\": \"kernel.kptr_restrict\", \"value\": 1, \"nodeSelector\": "
                           "{\"matchLabels\": {\"-bad\": \"x\"}}}",
                           "machineConfig[0].nodeSelector.matchLabels: ");
        check_machine_fail("{\"name\": \"kernel.kptr_restrict\", \"value\": 1, \"nodeSelector\": "
                           "{\"labels\": {}}}",
                           "machineConfig[0].nodeSelector.labels: ");

        /* Bounds: entries, and a selector's size. */
        {
                _cleanup_free_ char *doc = NULL, *values = NULL;
                size_t n = 0;
                FILE *f = open_memstream(&doc, &n);

                ASSERT_NOT_NULL(f);
                fputs("{\"machineConfig\": [", f);
                for (int i = 0; i < CONFIG_MACHINE_CONFIG_MAX + 1; i++)
                        fprintf(f,
                                "%s{\"name\": \"kernel.kptr_restrict\", \"value\": 1, \"nodeSelector\": "
                                "{\"matchLabels\": {\"k\": \"v%d\"}}}",
                                i ? "," : "", i);
                fputs("]}", f);
                fclose(f);
                check_fail(doc, "machineConfig: at most 64 entries");

                f = open_memstream(&values, &n);
                ASSERT_NOT_NULL(f);
                for (int i = 0; i < CONFIG_NODE_SELECTOR_VALUES_MAX; i++)
                        fprintf(f, "%s\"v%d\"", i ? "," : "", i);
                fclose(f);
                free(doc);
                ASSERT_TRUE(asprintf(&doc,
                                     "{\"name\": \"kernel.kptr_restrict\", \"value\": 1, \"nodeSelector\": "
                                     "{\"matchExpressions\": [{\"key\": \"k\", \"operator\": \"In\", "
                                     "\"values\": [%s]}]}}",
                                     values) >= 0);
                check_machine_fail(doc, "machineConfig[0].nodeSelector: more than 64");
        }

        /* nodeLabels: an object of label values. */
        check_fail("{\"nodeLabels\": []}", "nodeLabels: must be an object");
        check_fail("{\"nodeLabels\": {\"a\": 1}}", "nodeLabels: value of \"a\" must be a string");
        check_fail("{\"nodeLabels\": {\"a b\": \"x\"}}", "nodeLabels: invalid label key");
        check_fail("{\"nodeLabels\": {\"a\": \"-x\"}}", "nodeLabels: invalid value");
}

TEST(machine_config_duplicates) {
        char *err;

        /* Unscoped and scoped for one sysctl: the unscoped one applies on
         * every node, so both would on some. */
        err = parse_fail("{\"machineConfig\": ["
                         "{\"name\": \"kernel.perf_event_paranoid\", \"value\": 2},"
                         "{\"name\": \"kernel.perf_event_paranoid\", \"value\": -1, \"nodeSelector\": " GPU
                         "}]}",
                         "machineConfig[1].name: ");
        ASSERT_TRUE(strstr(err, "(also set by machineConfig[0])"));
        ASSERT_TRUE(strstr(err, "without nodeSelector"));
        free(err);

        /* Two selectors a node can both match: the message gives such a node's labels. */
        err = parse_fail("{\"machineConfig\": ["
                         "{\"name\": \"kernel.kptr_restrict\", \"value\": 0, \"nodeSelector\": " GPU "},"
                         "{\"name\": \"kernel.perf_event_paranoid\", \"value\": -1, \"nodeSelector\": " GPU
                         "},"
                         "{\"name\": \"kernel.kptr_restrict\", \"value\": 1, \"nodeSelector\": "
                         "{\"matchLabels\": {\"cgprof.io/tuning\": \"open\"}}}]}",
                         "machineConfig[2].name: ");
        ASSERT_STREQ(
                err,
                "machineConfig[2].name: duplicate sysctl \"kernel.kptr_restrict\" (also set by "
                "machineConfig[0]): a node labelled {nvidia.com/gpu.present=true,cgprof.io/tuning=open} "
                "matches both entries' nodeSelectors; scope them so that no node matches both (e.g. In "
                "and NotIn on one label)");
        free(err);

        /* Disjoint: fine, and so is another sysctl under the same selector. */
        Config *c = parse_ok("{\"machineConfig\": ["
                             "{\"name\": \"kernel.kptr_restrict\", \"value\": 0, \"nodeSelector\": " GPU "},"
                             "{\"name\": \"kernel.kptr_restrict\", \"value\": 1, \"nodeSelector\": "
                             "{\"matchExpressions\": [{\"key\": \"nvidia.com/gpu.present\", \"operator\": "
                             "\"NotIn\", \"values\": [\"true\", \"false\"]}]}},"
                             "{\"name\": \"kernel.kptr_restrict\", \"value\": 2, \"nodeSelector\": "
                             "{\"matchLabels\": {\"nvidia.com/gpu.present\": \"false\"}}}]}");
        ASSERT_EQ(c->n_machine_config, 3);
        config_free(c);
}

TEST(machine_config_node_labels_not_in_profileconfig) {
        cJSON *spec = cJSON_Parse("{\"nodeLabels\": {\"a\": \"b\"}}");
        Config *cluster = parse_ok("{}"), *c = NULL;
        char *err = NULL;

        ASSERT_NOT_NULL(spec);
        ASSERT_ERROR(config_parse_namespaced(spec, "spec", cluster, &c, &err), EINVAL);
        ASSERT_STREQ(
                err,
                "spec.nodeLabels: not allowed in a ProfileConfig: only the cluster config sets nodeLabels");
        free(err);
        cJSON_Delete(spec);
        config_free(cluster);
}

/* ---- profiles --------------------------------------------------------------------------------- */

TEST(profile_name) {
        check_fail("{\"profiles\": [{\"event\": \"cycles\"}]}", "profiles[0].name: ");
        check_fail("{\"profiles\": [{\"name\": \"\"}]}", "profiles[0].name: ");
        check_fail("{\"profiles\": [{\"name\": \"a b\"}]}", "profiles[0].name: ");
        check_fail("{\"profiles\": [{\"name\": \"a/b\"}]}", "profiles[0].name: ");
        check_fail("{\"profiles\": [{\"name\": \"..\"}]}", "profiles[0].name: ");
        check_fail("{\"profiles\": [{\"name\": 7}]}", "profiles[0].name: must be a string");

        char *err = parse_fail("{\"profiles\": [{\"name\": \"a\"}, {\"name\": \"b\"}, {\"name\": \"a\"}]}",
                               "profiles[2].name: ");
        ASSERT_STREQ(err, "profiles[2].name: duplicate profile name \"a\"");
        free(err);

        check_fail("{\"profiles\": {}}", "profiles: must be an array");
        check_fail("{\"profiles\": [[]]}", "profiles[0]: must be an object");

        Config *c = parse_ok("{\"profiles\": []}");
        ASSERT_EQ(c->n_profiles, 1); /* the implicit default */
        config_free(c);
}

TEST(profile_event) {
        static const char *const events[] = {
                "cpu-clock",    "task-clock", "cycles",       "cpu-cycles",
                "instructions", "ref-cycles", "cache-misses", "branch-misses",
        };

        for (size_t i = 0; i < ELEMENTSOF(events); i++) {
                _cleanup_free_ char *f = NULL;
                Config *c;

                ASSERT_TRUE(asprintf(&f, "\"event\": \"%s\"", events[i]) >= 0);
                c = parse_profile_ok(f);
                ASSERT_STREQ(config_find_profile(c, "q")->event, events[i]);
                config_free(c);
        }

        check_profile_fail("\"event\": \"page-faults\"", "profiles[1].event: ");
        check_profile_fail("\"event\": \"CPU-CLOCK\"", "profiles[1].event: ");
        check_profile_fail("\"event\": 1", "profiles[1].event: must be a string");
}

TEST(profile_events) {
        Config *c = parse_profile_ok("");
        ASSERT_EQ(config_find_profile(c, "q")->events, PROFILE_EVENT_CPU);
        ASSERT_EQ(config_find_profile(c, "q")->offcpu_min_usec, 1000);
        ASSERT_TRUE(config_find_profile(c, "q")->offcpu_probability == 1.0);
        config_free(c);

        c = parse_profile_ok(
                "\"events\": [\"cpu\", \"offcpu\"], \"offCpuMinUsec\": 0, \"offCpuProbability\": 0.25");
        ASSERT_EQ(config_find_profile(c, "q")->events, PROFILE_EVENT_CPU | PROFILE_EVENT_OFFCPU);
        ASSERT_EQ(config_find_profile(c, "q")->offcpu_min_usec, 0);
        ASSERT_TRUE(config_find_profile(c, "q")->offcpu_probability == 0.25);
        config_free(c);
        c = parse_profile_ok("\"events\": [\"offcpu\"]");
        ASSERT_EQ(config_find_profile(c, "q")->events, PROFILE_EVENT_OFFCPU);
        config_free(c);

        check_profile_fail("\"events\": [\"gpu\"]", "profiles[1].events[0]: unknown event \"gpu\"");
        check_profile_fail("\"events\": [\"cpu\", \"cpu\"]", "profiles[1].events[1]: duplicate event");
        check_profile_fail("\"formats\": [\"folded\", \"flame\"]",
                           "profiles[1].formats[1]: unknown format \"flame\" (known: folded, json, pprof, "
                           "svg, speedscope)");
        check_profile_fail("\"formats\": [\"svg\", \"svg\"]",
                           "profiles[1].formats[1]: duplicate format \"svg\"");
        check_profile_fail("\"formats\": [7]", "profiles[1].formats[0]: must be a string");
        check_profile_fail("\"events\": []", "profiles[1].events: ");
        check_profile_fail("\"events\": \"cpu\"", "profiles[1].events: ");
        check_profile_fail("\"offCpuMinUsec\": -1", "profiles[1].offCpuMinUsec: must be an integer");
        check_profile_fail("\"offCpuMinUsec\": 1.5", "profiles[1].offCpuMinUsec: ");
        check_profile_fail("\"offCpuMinUsec\": \"1ms\"", "profiles[1].offCpuMinUsec: ");
        check_profile_fail("\"offCpuProbability\": 0",
                           "profiles[1].offCpuProbability: must be a number in (0, 1]");
        check_profile_fail("\"offCpuProbability\": 1.5", "profiles[1].offCpuProbability: ");
}

TEST(profile_frequency) {
        Config *c = parse_profile_ok("\"frequency\": 1");
        ASSERT_EQ(config_find_profile(c, "q")->frequency, 1);
        config_free(c);
        c = parse_profile_ok("\"frequency\": 100000");
        ASSERT_EQ(config_find_profile(c, "q")->frequency, 100000);
        config_free(c);
        c = parse_profile_ok("\"frequency\": 1e3");
        ASSERT_EQ(config_find_profile(c, "q")->frequency, 1000);
        config_free(c);

        char *err = parse_fail("{\"profiles\": [{\"name\": \"a\"}, {\"name\": \"b\", \"frequency\": 0}]}",
                               "profiles[1].frequency: ");
        ASSERT_STREQ(err, "profiles[1].frequency: must be 1..100000");
        free(err);

        check_profile_fail("\"frequency\": 100001", "profiles[1].frequency: must be 1..100000");
        check_profile_fail("\"frequency\": -5", "profiles[1].frequency: must be 1..100000");
        check_profile_fail("\"frequency\": 1e30", "profiles[1].frequency: must be 1..100000");
        check_profile_fail("\"frequency\": 99.5", "profiles[1].frequency: must be an integer");
        check_profile_fail("\"frequency\": \"99\"", "profiles[1].frequency: must be an integer");
}

TEST(profile_duration) {
        Config *c = parse_profile_ok("\"duration\": \"0\"");
        ASSERT_EQ(config_find_profile(c, "q")->duration_usec, 0);
        config_free(c);
        c = parse_profile_ok("\"duration\": \"1m30s\"");
        ASSERT_EQ(config_find_profile(c, "q")->duration_usec, 90 * USEC_PER_SEC);
        config_free(c);
        c = parse_profile_ok("\"duration\": \"1.5s\"");
        ASSERT_EQ(config_find_profile(c, "q")->duration_usec, 1500 * USEC_PER_MSEC);
        config_free(c);

        check_profile_fail("\"duration\": \"20\"", "profiles[1].duration: ");
        check_profile_fail("\"duration\": \"\"", "profiles[1].duration: ");
        check_profile_fail("\"duration\": \"-1s\"", "profiles[1].duration: ");
        check_profile_fail("\"duration\": 20", "profiles[1].duration: ");
        check_profile_fail("\"duration\": \"999999999999d\"", "profiles[1].duration: ");
}

TEST(profile_checkpoint_interval) {
        Config *c = parse_profile_ok("\"checkpointInterval\": \"0\"");
        ASSERT_EQ(config_find_profile(c, "q")->checkpoint_interval_usec, 0);
        ASSERT_EQ(config_find_profile(c, "p")->checkpoint_interval_usec, 5 * 60 * USEC_PER_SEC);
        config_free(c);
        c = parse_profile_ok("\"checkpointInterval\": \"1s\"");
        ASSERT_EQ(config_find_profile(c, "q")->checkpoint_interval_usec, USEC_PER_SEC);
        config_free(c);
        c = parse_profile_ok("\"checkpointInterval\": \"1m30s\", \"duration\": \"0\"");
        ASSERT_EQ(config_find_profile(c, "q")->checkpoint_interval_usec, 90 * USEC_PER_SEC);
        config_free(c);

        check_profile_fail("\"checkpointInterval\": \"500ms\"",
                           "profiles[1].checkpointInterval: must be \"0\" (no checkpoints) or at least 1s, "
                           "not \"500ms\"");
        check_profile_fail("\"checkpointInterval\": \"1us\"", "profiles[1].checkpointInterval: must be");
        check_profile_fail("\"checkpointInterval\": 60",
                           "profiles[1].checkpointInterval: must be a duration string");
        check_profile_fail("\"checkpointInterval\": \"5\"",
                           "profiles[1].checkpointInterval: invalid duration");
        check_profile_fail("\"checkpointInterval\": \"-1s\"",
                           "profiles[1].checkpointInterval: invalid duration");
        check_profile_fail("\"checkpointInterval\": \"999999999999d\"",
                           "profiles[1].checkpointInterval: duration \"999999999999d\" is out of range");
        check_profile_fail("\"checkpointinterval\": \"1s\"", "profiles[1].checkpointinterval: unknown key");
}

TEST(profile_start) {
        Config *c = parse_profile_ok("\"start\": \"manual\"");
        ASSERT_EQ(config_find_profile(c, "q")->start, PROFILE_START_MANUAL);
        config_free(c);
        c = parse_profile_ok("\"start\": \"auto\"");
        ASSERT_EQ(config_find_profile(c, "q")->start, PROFILE_START_AUTO);
        config_free(c);

        check_profile_fail("\"start\": \"launch\"", "profiles[1].start: ");
        check_profile_fail("\"start\": true", "profiles[1].start: ");
}

TEST(profile_formats) {
        Config *c = parse_profile_ok("\"formats\": [\"speedscope\"]");
        ASSERT_EQ(config_find_profile(c, "q")->formats, 1u << REPORT_FORMAT_SPEEDSCOPE);
        config_free(c);
        c = parse_profile_ok("\"formats\": [\"folded\", \"json\", \"pprof\", \"svg\", \"speedscope\"]");
        ASSERT_EQ(config_find_profile(c, "q")->formats, (1u << _REPORT_FORMAT_MAX) - 1);
        config_free(c);

        check_profile_fail("\"formats\": []", "profiles[1].formats: must not be empty");
        check_profile_fail("\"formats\": \"json\"", "profiles[1].formats: must be an array");
        check_profile_fail("\"formats\": [\"json\", \"html\"]", "profiles[1].formats[1]: ");
        check_profile_fail("\"formats\": [\"json\", 1]", "profiles[1].formats[1]: ");
        check_profile_fail("\"formats\": [\"json\", \"folded\", \"json\"]",
                           "profiles[1].formats[2]: duplicate");
}

TEST(profile_output) {
        Config *c = parse_profile_ok("\"output\": \"{CGROUP}/{PROFILE}-%{HOSTNAME}/{TIMESTAMP}_{UID}\"");
        ASSERT_STREQ(config_find_profile(c, "q")->output,
                     "{CGROUP}/{PROFILE}-%{HOSTNAME}/{TIMESTAMP}_{UID}");
        config_free(c);

        /* The reason comes from template_validate(). */
        check_profile_fail("\"output\": \"{FOO}/x\"", "profiles[1].output: ");
        check_profile_fail("\"output\": \"/abs/{POD}\"", "profiles[1].output: ");
        check_profile_fail("\"output\": \"../{POD}\"", "profiles[1].output: ");
        check_profile_fail("\"output\": \"{POD\"", "profiles[1].output: ");
        check_profile_fail("\"output\": 1", "profiles[1].output: must be a string");

        char *err = parse_fail("{\"profiles\": [{\"name\": \"default\", \"output\": \"{FOO}\"}]}",
                               "profiles[0].output: ");
        ASSERT_TRUE(strlen(err) > strlen("profiles[0].output: "));
        free(err);
}

TEST(profile_patterns) {
        char *err;
        Config *c;

        c = parse_profile_ok("\"includePatterns\": [\"^python\", \"java\"], \"excludePatterns\": []");
        ASSERT_EQ(config_find_profile(c, "q")->n_include_patterns, 2);
        ASSERT_EQ(config_find_profile(c, "q")->n_exclude_patterns, 0);
        config_free(c);

        err = parse_fail("{\"profiles\": [{\"name\": \"default\", \"includePatterns\": [\"ok\", \"(\"]}]}",
                         "profiles[0].includePatterns[1]: ");
        ASSERT_TRUE(startswith(err, "profiles[0].includePatterns[1]: invalid regular expression \"(\": "));
        free(err);

        check_profile_fail("\"excludePatterns\": [\"a\", \"[z-a]\"]", "profiles[1].excludePatterns[1]: ");
        check_profile_fail("\"excludePatterns\": [\"*x\", \"a\"]", "profiles[1].excludePatterns[0]: ");
        check_profile_fail("\"includePatterns\": []", "profiles[1].includePatterns: must not be empty");
        check_profile_fail("\"includePatterns\": \".*\"", "profiles[1].includePatterns: must be an array");
        check_profile_fail("\"includePatterns\": [1]", "profiles[1].includePatterns[0]: must be a string");
        check_profile_fail("\"excludePatterns\": {}", "profiles[1].excludePatterns: must be an array");

        /* Patterns too costly to compile or match are refused before regcomp(). */
        _cleanup_free_ char *deep = NULL, *doc = NULL, *lengthy = NULL;
        deep = malloc(2 * 40 + 2);
        ASSERT_NOT_NULL(deep);
        memset(deep, '(', 40);
        deep[40] = 'a';
        memset(deep + 41, ')', 40);
        deep[81] = 0;
        ASSERT_TRUE(asprintf(&doc, "\"includePatterns\": [\"%s\"]", deep) > 0);
        check_profile_fail(
                doc,
                "profiles[1].includePatterns[0]: regular expression groups nested deeper than 32 levels");
        check_profile_fail("\"includePatterns\": [\"(a+)\\\\1\"]",
                           "profiles[1].includePatterns[0]: regular expression has a backreference");
        lengthy = malloc(1100);
        ASSERT_NOT_NULL(lengthy);
        memset(lengthy, 'a', 1099);
        lengthy[1099] = 0;
        free(TAKE_PTR(doc));
        ASSERT_TRUE(asprintf(&doc, "\"includePatterns\": [\"%s\"]", lengthy) > 0);
        check_profile_fail(doc,
                           "profiles[1].includePatterns[0]: regular expression longer than 1024 characters");
        /* Stacked and nested repetitions, which glibc expands into copies. */
        check_profile_fail("\"includePatterns\": [\"a++++++++++++++++++++\"]",
                           "profiles[1].includePatterns[0]: regular expression repeats too much");
        check_profile_fail("\"includePatterns\": [\"x(a{1000}){1000}\"]",
                           "profiles[1].includePatterns[0]: regular expression repeats too much");
        check_profile_fail("\"includePatterns\": [\"x{1,255}{1,255}\"]",
                           "profiles[1].includePatterns[0]: regular expression repeats too much");
        check_profile_fail("\"excludePatterns\": [\"((a{30}){30}){30}\"]",
                           "profiles[1].excludePatterns[0]: regular expression repeats too much");
        check_profile_fail("\"excludePatterns\": [\"a+++++++++++++++++++++++++++++++++++++++[\"]",
                           "profiles[1].excludePatterns[0]: regular expression repeats too much");
        /* ... and the '*' and '?' copies, whose closures glibc computes in quadratic time or worse. */
        check_profile_fail("\"includePatterns\": [\"(.*){9999}\"]",
                           "profiles[1].includePatterns[0]: regular expression repeats too much");
        check_profile_fail("\"includePatterns\": [\"(^|/)++++++x\"]",
                           "profiles[1].includePatterns[0]: regular expression repeats an anchor");
        check_profile_fail("\"includePatterns\": [\"(^|$|)+{10}\"]",
                           "profiles[1].includePatterns[0]: regular expression repeats an anchor");
        check_profile_fail("\"includePatterns\": [\"((a*)*){2500}\"]",
                           "profiles[1].includePatterns[0]: regular expression repeats too much");
        check_profile_fail("\"includePatterns\": [\"a++++++****************************************+++++\"]",
                           "profiles[1].includePatterns[0]: regular expression repeats too much");
        /* After an anchor, far fewer: glibc's closures grow much faster there. */
        check_profile_fail(
                "\"excludePatterns\": [\"$;*******x***************+**rof\"]",
                "profiles[1].excludePatterns[0]: regular expression repeats too much after an anchor");
        check_profile_fail(
                "\"excludePatterns\": [\"^((a*)*){20}\"]",
                "profiles[1].excludePatterns[0]: regular expression repeats too much after an anchor");
        check_profile_fail(
                "\"excludePatterns\": [\"x(^|/)((a*)*){14}\"]",
                "profiles[1].excludePatterns[0]: regular expression repeats too much after an anchor");
        c = parse_profile_ok("\"includePatterns\": [\"((a*)*){20}$\", \"^((a*)*){12}\", "
                             "\"^.*python3?( .*)? .*train\\\\.py( |$)\"]");
        config_free(c);
        c = parse_profile_ok("\"includePatterns\": [\"^[0-9]{1,3}(\\\\.[0-9]{1,3}){3}$\", \"a{10000}\", "
                             "\"(ab+)*c?{2,}\", \"(.*){500}\", \"((a*)*){166}\", \".*?x\"]");
        config_free(c);
        /* ... but brackets, classes and escaped parentheses are no groups. */
        c = parse_profile_ok("\"includePatterns\": [\"[(][[:alpha:]]\\\\(x\\\\)[]]\"]");
        config_free(c);
}

TEST(process_wanted) {
        Config *c = parse_ok(full_example);
        const Profile *p = config_find_profile(c, "default");
        const Profile *all = config_find_profile(c, "other.profile_1-x");

        /* include: python or java; exclude: shells and cgprof itself. */
        ASSERT_TRUE(profile_process_wanted(p, "/usr/bin/python3 train.py"));
        ASSERT_TRUE(profile_process_wanted(p, "java -jar app.jar"));
        ASSERT_FALSE(profile_process_wanted(p, "/usr/bin/ruby x.rb"));
        ASSERT_FALSE(profile_process_wanted(p, "/bin/bash -c python3 x.py"));
        ASSERT_FALSE(profile_process_wanted(p, "sh -c java"));
        ASSERT_FALSE(profile_process_wanted(p, "/usr/bin/cgprofd --python"));
        /* the exclude pattern needs a word boundary: "bashful" is not a shell */
        ASSERT_TRUE(profile_process_wanted(p, "/opt/bashful/python"));
        ASSERT_FALSE(profile_process_wanted(p, ""));
        ASSERT_FALSE(profile_process_wanted(p, NULL));

        /* Default patterns: everything. */
        ASSERT_TRUE(profile_process_wanted(all, "/usr/bin/ruby x.rb"));
        ASSERT_TRUE(profile_process_wanted(all, "sh"));
        ASSERT_TRUE(profile_process_wanted(all, ""));

        config_free(c);

        /* The whole command line is searched, anchors apply to all of it. */
        c = parse_profile_ok("\"includePatterns\": [\"^/usr/bin/python[0-9.]* \"], \"excludePatterns\": "
                             "[\"--no-profile( |$)\"]");
        p = config_find_profile(c, "q");
        ASSERT_TRUE(profile_process_wanted(p, "/usr/bin/python3.11 -m app"));
        ASSERT_FALSE(profile_process_wanted(p, "env /usr/bin/python3 -m app"));
        ASSERT_FALSE(profile_process_wanted(p, "/usr/bin/python3 -m app --no-profile"));
        ASSERT_TRUE(profile_process_wanted(p, "/usr/bin/python3 -m app --no-profiles"));
        config_free(c);
}

/* ---- targets ---------------------------------------------------------------------------------- */

TEST(target_name) {
        check_fail("{\"targets\": [{\"containers\": [\"a\"]}]}", "targets[0].name: ");
        check_target_fail("\"name\": \"x\"", "targets[1].name: duplicate key");
        check_fail("{\"targets\": [{\"name\": \"a b\", \"containers\": [\"a\"]}]}", "targets[0].name: ");
        check_fail("{\"targets\": [{\"name\": \"\", \"containers\": [\"a\"]}]}", "targets[0].name: ");

        char *err = parse_fail("{\"targets\": [{\"name\": \"a\", \"containers\": [\"a\"]}, "
                               "{\"name\": \"a\", \"containers\": [\"b\"]}]}",
                               "targets[1].name: ");
        ASSERT_STREQ(err, "targets[1].name: duplicate target name \"a\"");
        free(err);

        check_fail("{\"targets\": {}}", "targets: must be an array");
        check_fail("{\"targets\": [1]}", "targets[0]: must be an object");
}

TEST(target_profile_ref) {
        char *err;
        Config *c;

        err = parse_fail(
                "{\"targets\": [{\"name\": \"a\", \"profileRef\": \"x\", \"containers\": [\"a\"]}]}",
                "targets[0].profileRef: ");
        ASSERT_STREQ(err, "targets[0].profileRef: no profile named \"x\"");
        free(err);

        check_target_fail("\"profileRef\": 1, \"containers\": [\"a\"]",
                          "targets[1].profileRef: must be a string");
        check_target_fail("\"profileRef\": \"\", \"containers\": [\"a\"]", "targets[1].profileRef: ");

        /* The implicit default profile can be referenced by name. */
        c = parse_ok(
                "{\"targets\": [{\"name\": \"a\", \"profileRef\": \"default\", \"containers\": [\"a\"]}]}");
        ASSERT_TRUE(config_target_profile(c, &c->targets[0]) == config_find_profile(c, "default"));
        config_free(c);

        /* Profiles listed after the targets in the document still count. */
        c = parse_ok("{\"targets\": [{\"name\": \"a\", \"profileRef\": \"late\", \"containers\": [\"a\"]}], "
                     "\"profiles\": [{\"name\": \"late\"}]}");
        ASSERT_STREQ(config_target_profile(c, &c->targets[0])->name, "late");
        config_free(c);
}

TEST(target_needs_condition) {
        char *err = parse_fail("{\"targets\": [{\"name\": \"a\"}]}", "targets[0]: ");

        ASSERT_TRUE(startswith(err, "targets[0]: needs at least one condition ("));
        free(err);

        check_target_fail("\"disabled\": false", "targets[1]: needs at least one condition");
        check_target_fail("\"profileRef\": \"p\"", "targets[1]: needs at least one condition");
}

TEST(target_conditions) {
        Config *c;

        c = parse_target_ok("\"namespaceSelector\": {}");
        ASSERT_NOT_NULL(c->targets[1].namespace_selector);
        config_free(c);
        c = parse_target_ok("\"podSelector\": {\"matchLabels\": {\"a\": \"b\"}}");
        ASSERT_NOT_NULL(c->targets[1].pod_selector);
        config_free(c);
        c = parse_target_ok("\"podNamePatterns\": [\"^web-\"]");
        ASSERT_EQ(c->targets[1].n_pod_name_patterns, 1);
        config_free(c);
        c = parse_target_ok("\"owner\": {\"kind\": \"Job\"}");
        ASSERT_STREQ(c->targets[1].owner->kind, "Job");
        ASSERT_NULL(c->targets[1].owner->name);
        config_free(c);
        c = parse_target_ok("\"owner\": {\"name\": \"nightly\"}");
        ASSERT_NULL(c->targets[1].owner->kind);
        ASSERT_STREQ(c->targets[1].owner->name, "nightly");
        config_free(c);
        c = parse_target_ok(
                "\"cgroupPatterns\": [\"system.slice/*.service\", \"user.slice/user-[0-9]*.slice\"]");
        ASSERT_EQ(strv_length(c->targets[1].cgroup_patterns), 2);
        config_free(c);
}

TEST(target_condition_errors) {
        /* Selectors: errors carry the full path. */
        check_target_fail("\"podSelector\": []", "targets[1].podSelector: must be an object");
        check_target_fail("\"namespaceSelector\": {\"matchLabels\": {\"-x\": \"y\"}}",
                          "targets[1].namespaceSelector.matchLabels: ");
        check_target_fail(
                "\"podSelector\": {\"matchExpressions\": [{\"key\": \"a\", \"operator\": \"Exists\"}, "
                "{\"key\": \"a\", \"operator\": \"Has\"}]}",
                "targets[1].podSelector.matchExpressions[1].operator: ");

        check_target_fail("\"podNamePatterns\": []", "targets[1].podNamePatterns: must not be empty");
        check_target_fail("\"podNamePatterns\": [\"(x\"]",
                          "targets[1].podNamePatterns[0]: invalid regular expression");

        check_target_fail("\"owner\": {}", "targets[1].owner: ");
        check_target_fail("\"owner\": \"Job\"", "targets[1].owner: must be an object");
        check_target_fail("\"owner\": {\"kind\": 1}", "targets[1].owner.kind: must be a string");
        check_target_fail("\"owner\": {\"kind\": \"\"}", "targets[1].owner.kind: must not be empty");
        check_target_fail("\"owner\": {\"name\": null}", "targets[1].owner.name: must be a string");

        check_target_fail("\"containers\": []", "targets[1].containers: must not be empty");
        check_target_fail("\"containers\": \"main\"", "targets[1].containers: must be an array");
        check_target_fail("\"containers\": [\"main\", \"\"]", "targets[1].containers[1]: must not be empty");
        check_target_fail("\"containers\": [\"main\", 2]", "targets[1].containers[1]: must be a string");

        check_target_fail("\"cgroupPatterns\": []", "targets[1].cgroupPatterns: must not be empty");
        check_target_fail("\"cgroupPatterns\": [\"\"]", "targets[1].cgroupPatterns[0]: must not be empty");
        check_target_fail("\"cgroupPatterns\": [\"a\", \"/system.slice/x\"]",
                          "targets[1].cgroupPatterns[1]: ");
        check_target_fail("\"cgroupPatterns\": [\"system.slice/../x\"]", "targets[1].cgroupPatterns[0]: ");
        check_target_fail("\"cgroupPatterns\": [\"..\"]", "targets[1].cgroupPatterns[0]: ");
        check_target_fail("\"cgroupPatterns\": [\"a/..\"]", "targets[1].cgroupPatterns[0]: ");
        check_target_fail("\"cgroupPatterns\": [\"./a\"]", "targets[1].cgroupPatterns[0]: ");
        check_target_fail("\"cgroupPatterns\": [\"a//b\"]", "targets[1].cgroupPatterns[0]: ");
        check_target_fail("\"cgroupPatterns\": [\"a/\"]", "targets[1].cgroupPatterns[0]: ");
        check_target_fail("\"cgroupPatterns\": [\"a[bc\"]", "targets[1].cgroupPatterns[0]: ");
        check_target_fail("\"cgroupPatterns\": [\"a[b/c]\"]", "targets[1].cgroupPatterns[0]: ");
        check_target_fail("\"cgroupPatterns\": [\"a\\\\\"]", "targets[1].cgroupPatterns[0]: ");
        check_target_fail("\"cgroupPatterns\": [\"a[[:alpha:]\"]", "targets[1].cgroupPatterns[0]: ");
        check_target_fail("\"cgroupPatterns\": [\"a[[:nosuchclass:]]\"]", "targets[1].cgroupPatterns[0]: ");

        /* Valid tricky ones. */
        Config *c =
                parse_target_ok("\"cgroupPatterns\": [\"a[]]b\", \"x[!.]y\", \"[[:alnum:]]*\", \"a\\\\[b\", "
                                "\"..a\", \"a..\"]");
        config_free(c);
}

TEST(cgroup_matching) {
        Config *c = parse_target_ok(
                "\"cgroupPatterns\": [\"system.slice/*.service\", "
                "\"kubepods.slice/kubepods-burstable.slice/pod*\", \"user.slice/user-100[0-9].slice\"]");
        const Target *t = &c->targets[1];

        ASSERT_TRUE(target_matches_cgroup(t, "system.slice/nginx.service"));
        ASSERT_TRUE(target_matches_cgroup(t, "/system.slice/nginx.service")); /* leading '/' ignored */
        ASSERT_FALSE(target_matches_cgroup(t, "system.slice/nginx.socket"));
        /* '*' does not cross '/'. */
        ASSERT_FALSE(target_matches_cgroup(t, "system.slice/a/b.service"));
        ASSERT_FALSE(target_matches_cgroup(t, "system.slice/x.service/child"));
        ASSERT_TRUE(target_matches_cgroup(t, "kubepods.slice/kubepods-burstable.slice/pod123"));
        ASSERT_FALSE(target_matches_cgroup(
                t, "kubepods.slice/kubepods-burstable.slice/pod123/cri-containerd-x.scope"));
        ASSERT_TRUE(target_matches_cgroup(t, "user.slice/user-1000.slice"));
        ASSERT_FALSE(target_matches_cgroup(t, "user.slice/user-1010.slice"));
        ASSERT_FALSE(target_matches_cgroup(t, ""));
        ASSERT_FALSE(target_matches_cgroup(t, NULL));

        /* A target without cgroupPatterns matches no cgroup. */
        ASSERT_FALSE(target_matches_cgroup(&c->targets[0], "system.slice/nginx.service"));
        config_free(c);
}

/* ---- enums and lookups ------------------------------------------------------------------------ */

TEST(enum_strings) {
        for (ReportFormat f = 0; f < _REPORT_FORMAT_MAX; f++)
                ASSERT_EQ(report_format_from_string(report_format_to_string(f)), f);
        ASSERT_STREQ(report_format_to_string(REPORT_FORMAT_PPROF), "pprof");
        ASSERT_STREQ(report_format_to_string(REPORT_FORMAT_SPEEDSCOPE), "speedscope");
        ASSERT_NULL(report_format_to_string(_REPORT_FORMAT_MAX));
        ASSERT_NULL(report_format_to_string(_REPORT_FORMAT_INVALID));
        ASSERT_EQ(report_format_from_string("html"), _REPORT_FORMAT_INVALID);
        ASSERT_EQ(report_format_from_string(NULL), _REPORT_FORMAT_INVALID);

        ASSERT_STREQ(profile_start_to_string(PROFILE_START_AUTO), "auto");
        ASSERT_STREQ(profile_start_to_string(PROFILE_START_MANUAL), "manual");
        ASSERT_NULL(profile_start_to_string(_PROFILE_START_MAX));
        ASSERT_EQ(profile_start_from_string("manual"), PROFILE_START_MANUAL);
        ASSERT_EQ(profile_start_from_string("Auto"), _PROFILE_START_INVALID);
        ASSERT_EQ(profile_start_from_string(NULL), _PROFILE_START_INVALID);
}

TEST(find_profile) {
        Config *c = parse_ok(full_example);

        ASSERT_TRUE(config_find_profile(c, "default") == &c->profiles[0]);
        ASSERT_NULL(config_find_profile(c, "nope"));
        ASSERT_NULL(config_find_profile(c, NULL));
        ASSERT_NULL(config_find_profile(NULL, "default"));
        config_free(c);

        ASSERT_NULL(config_free(NULL));
}

/* ---- files ------------------------------------------------------------------------------------ */

static char *write_temp(const char *content, size_t size) {
        char *path = strdup("/tmp/test-config.XXXXXX");
        int fd;

        ASSERT_NOT_NULL(path);
        fd = mkstemp(path);
        ASSERT_TRUE(fd >= 0);
        ASSERT_EQ(write(fd, content, size), (ssize_t) size);
        close(fd);
        return path;
}

TEST(load_file) {
        _cleanup_free_ char *path = write_temp(full_example, strlen(full_example));
        Config *c = NULL;
        char *err = NULL;

        ASSERT_OK(config_load_file(path, &c, &err));
        ASSERT_NULL(err);
        ASSERT_EQ(c->n_targets, 2);
        config_free(c);
        unlink(path);

        /* Missing file: "<path>: <strerror>". */
        c = NULL;
        ASSERT_ERROR(config_load_file("/nonexistent/cgprof.json", &c, &err), ENOENT);
        ASSERT_NULL(c);
        ASSERT_STREQ(err, "/nonexistent/cgprof.json: No such file or directory");
        free(err);
        err = NULL;

        /* A directory. */
        ASSERT_TRUE(config_load_file("/", &c, &err) < 0);
        ASSERT_TRUE(startswith(err, "/: "));
        free(err);
        err = NULL;
}

TEST(load_file_errors) {
        static const char bad_text[] = "{\n\"profiles\": [{\"name\": \"a\", \"frequency\": 0}]}";
        _cleanup_free_ char *bad = write_temp(bad_text, strlen(bad_text));
        _cleanup_free_ char *nul = write_temp("{}\0{\"x\": 1}", 11);
        Config *c = NULL;
        char *err = NULL;

        ASSERT_ERROR(config_load_file(bad, &c, &err), EINVAL);
        ASSERT_STREQ(err, "profiles[0].frequency: must be 1..100000");
        free(err);
        err = NULL;
        unlink(bad);

        ASSERT_ERROR(config_load_file(nul, &c, &err), EINVAL);
        ASSERT_TRUE(startswith(err, "$: "));
        free(err);
        err = NULL;
        unlink(nul);
        ASSERT_NULL(c);
}

TEST(load_file_too_large) {
        size_t size = 5 * 1024 * 1024;
        char *big = malloc(size);
        _cleanup_free_ char *path = NULL;
        Config *c = NULL;
        char *err = NULL;

        ASSERT_NOT_NULL(big);
        memset(big, ' ', size);
        big[0] = '{';
        big[size - 1] = '}';
        path = write_temp(big, size);
        free(big);

        ASSERT_ERROR(config_load_file(path, &c, &err), EFBIG);
        ASSERT_TRUE(startswith(err, path));
        ASSERT_TRUE(strstr(err, ": larger than 4 MiB, the most a config file may be") != NULL);
        free(err);
        unlink(path);
}

TEST(too_deep) {
        /* Valid JSON, only nested deeper than cJSON parses: say so, not "not valid". */
        size_t n = 100000;
        _cleanup_free_ char *doc = malloc(2 * n + 1);
        _cleanup_free_ char *err = NULL;
        Config *c = NULL;

        ASSERT_NOT_NULL(doc);
        memset(doc, '[', n);
        memset(doc + n, ']', n);
        doc[2 * n] = 0;
        ASSERT_ERROR(config_parse(doc, &c, &err), EINVAL);
        ASSERT_STREQ(err, "$: nested deeper than 1000 levels (arrays and objects) near line 1");
        free(TAKE_PTR(err));
        /* Brackets in strings do not count. */
        memset(doc, ' ', 2 * n);
        memcpy(doc, "{\"x\": \"[[[[[[[[\"", 16);
        doc[2 * n - 1] = '}';
        ASSERT_ERROR(config_parse(doc, &c, &err), EINVAL);
        ASSERT_TRUE(strstr(err, "nested deeper") == NULL);
        ASSERT_NULL(c);
}

TEST(error_optional) {
        Config *c = NULL;

        /* ret_error may be NULL. */
        ASSERT_ERROR(config_parse("{\"x\": 1}", &c, NULL), EINVAL);
        ASSERT_ERROR(config_parse("{", &c, NULL), EINVAL);
        ASSERT_ERROR(config_load_file("/nonexistent", &c, NULL), ENOENT);
        ASSERT_NULL(c);
}

DEFINE_TEST_MAIN
