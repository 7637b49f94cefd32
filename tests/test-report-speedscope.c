/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <cjson/cJSON.h>
#include <stdarg.h>

#include "report.h"
#include "template.h"
#include "profile-fixture.h"
#include "tests.h"

#define process(d, pid, comm) fixture_process(d, pid, comm, comm)

static bool utf8_valid(const char *s) {
        while (*s) {
                size_t k = utf8_valid_char_len(s);
                if (k == 0)
                        return false;
                s += k;
        }
        return true;
}

/* Runs the writer into memory, checks that the output is valid UTF-8 and
 * parses it. */
static cJSON *speedscope(const ProfileData *d, const ReportSummaryInfo *info, char **ret_text) {
        char *buf = NULL;
        size_t size = 0;
        cJSON *j;
        FILE *f;

        f = open_memstream(&buf, &size);
        ASSERT_NOT_NULL(f);
        ASSERT_OK(report_write_speedscope(f, d, info));
        ASSERT_EQ(fclose(f), 0);
        ASSERT_NOT_NULL(buf);
        ASSERT_EQ(strlen(buf), size);
        ASSERT_TRUE(utf8_valid(buf));

        j = cJSON_ParseWithOpts(buf, NULL, true);
        if (!j)
                fprintf(stderr, "not JSON:\n%s\n", buf);
        ASSERT_NOT_NULL(j);
        if (ret_text)
                *ret_text = buf;
        else
                free(buf);
        return j;
}

static void cjson_deletep(cJSON **j) {
        if (*j)
                cJSON_Delete(*j);
}
#define _cleanup_cjson_ _cleanup_(cjson_deletep)

static const cJSON *get(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        if (!v)
                fprintf(stderr, "no key \"%s\"\n", key);
        ASSERT_NOT_NULL(v);
        return v;
}

static const char *get_string(const cJSON *o, const char *key) {
        const cJSON *v = get(o, key);

        ASSERT_TRUE(cJSON_IsString(v));
        return v->valuestring;
}

static double get_number(const cJSON *o, const char *key) {
        const cJSON *v = get(o, key);

        ASSERT_TRUE(cJSON_IsNumber(v));
        return v->valuedouble;
}

/* The one profile of the file, after checking the file's keys. */
static const cJSON *the_profile(const cJSON *j) {
        const cJSON *profiles;

        ASSERT_STREQ(get_string(j, "$schema"), "https://www.speedscope.app/file-format-schema.json");
        ASSERT_TRUE(strncmp(get_string(j, "exporter"), "cgprof@", 7) == 0);
        ASSERT_EQ(get_number(j, "activeProfileIndex"), 0);
        ASSERT_TRUE(cJSON_IsArray(get(get(j, "shared"), "frames")));
        profiles = get(j, "profiles");
        ASSERT_TRUE(cJSON_IsArray(profiles));
        ASSERT_EQ(cJSON_GetArraySize(profiles), 1);
        ASSERT_STREQ(get_string(profiles->child, "type"), "sampled");
        ASSERT_EQ(get_number(profiles->child, "startValue"), 0);
        return profiles->child;
}

/* A sample rendered as "name;name;..." (file names in brackets), for
 * comparisons, and checks that weights and samples match and endValue is
 * their sum. */
static char *render_samples(const cJSON *j) {
        const cJSON *frames = get(get(j, "shared"), "frames"), *p = the_profile(j);
        const cJSON *samples = get(p, "samples"), *weights = get(p, "weights"), *s, *w, *fr;
        _cleanup_free_ const cJSON **by_index = NULL;
        int n_frames = cJSON_GetArraySize(frames), i = 0;
        char *buf = NULL;
        size_t size = 0;
        double sum = 0;
        FILE *f;

        ASSERT_EQ(cJSON_GetArraySize(samples), cJSON_GetArraySize(weights));
        by_index = calloc(n_frames + 1, sizeof(cJSON *));
        ASSERT_NOT_NULL(by_index);
        cJSON_ArrayForEach (fr, frames)
                by_index[i++] = fr;

        f = open_memstream(&buf, &size);
        ASSERT_NOT_NULL(f);
        for (s = samples->child, w = weights->child; s && w; s = s->next, w = w->next) {
                const cJSON *k;

                ASSERT_TRUE(cJSON_IsNumber(w));
                ASSERT_TRUE(w->valuedouble > 0);
                sum += w->valuedouble;
                ASSERT_TRUE(cJSON_IsArray(s));
                ASSERT_NOT_NULL(s->child);
                cJSON_ArrayForEach (k, s) {
                        ASSERT_TRUE(cJSON_IsNumber(k));
                        ASSERT_TRUE(k->valueint >= 0 && k->valueint < n_frames);
                        fr = by_index[k->valueint];
                        if (k != s->child)
                                fputc(';', f);
                        fputs(get_string(fr, "name"), f);
                        if (cJSON_GetObjectItemCaseSensitive(fr, "file"))
                                fprintf(f, "[%s]", get_string(fr, "file"));
                }
                fprintf(f, " %.0f\n", w->valuedouble);
        }
        ASSERT_EQ(fclose(f), 0);
        ASSERT_EQ(get_number(p, "endValue"), sum);
        return buf;
}

TEST(speedscope_samples) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_cjson_ cJSON *j = NULL;
        _cleanup_free_ char *out = NULL;
        const cJSON *p;
        uint32_t p1, p2, p3, main_, work_a, work_b, sys, unk, opnew;

        p1 = process(d, 100, "app");
        p2 = process(d, 101, "app");
        p3 = process(d, 200, "db");

        main_ = frame(d, "main", "app", FRAME_USER);
        work_a = frame(d, "work", "liba.so", FRAME_USER);
        work_b = frame(d, "work", "libb.so", FRAME_USER);
        sys = frame(d, "do_syscall_64", "[kernel.kallsyms]", FRAME_KERNEL);
        unk = frame(d, "", NULL, FRAME_UNKNOWN);
        opnew = frame(d, "operator new(unsigned long)", "libstdc++.so.6", FRAME_USER);

        add(d, p1, 3, 2, main_, work_a);
        add(d, p2, 2, 2, main_, work_a); /* same comm, other process: merged */
        add(d, p1, 1, 2, main_, work_b); /* same name, other module: its own frame */
        add(d, p1, 1, 3, main_, work_a, sys);
        add(d, p3, 4, 2, main_, unk);
        add(d, p1, 6, 0); /* no frames: the comm alone */
        add(d, p1, 2, 2, main_, opnew);
        add(d, p2, 0, 1, main_); /* no samples: no sample */

        /* No info: weights are samples. */
        j = speedscope(d, NULL, NULL);
        p = the_profile(j);
        ASSERT_STREQ(get_string(p, "unit"), "none");
        ASSERT_STREQ(get_string(p, "name"), "cgprof");
        ASSERT_STREQ(get_string(j, "name"), "cgprof");
        ASSERT_EQ(get_number(p, "endValue"), 19);
        out = render_samples(j);
        ASSERT_STREQ(out, "app 6\n"
                          "app;main[app];operator new(unsigned long)[libstdc++.so.6] 2\n"
                          "app;main[app];work[liba.so] 5\n"
                          "app;main[app];work[liba.so];do_syscall_64_[k][[kernel.kallsyms]] 1\n"
                          "app;main[app];work[libb.so] 1\n"
                          "db;main[app];[unknown] 4\n");

        /* Frames: the data's, index for index, then one per comm. */
        const cJSON *frames = get(get(j, "shared"), "frames");
        ASSERT_EQ(cJSON_GetArraySize(frames), 6 + 2);
        ASSERT_STREQ(get_string(cJSON_GetArrayItem(frames, (int) sys), "name"), "do_syscall_64_[k]");
        ASSERT_STREQ(get_string(cJSON_GetArrayItem(frames, (int) sys), "file"), "[kernel.kallsyms]");
        ASSERT_NULL(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(frames, (int) unk), "file"));
        ASSERT_STREQ(get_string(cJSON_GetArrayItem(frames, 6), "name"), "app");
        ASSERT_STREQ(get_string(cJSON_GetArrayItem(frames, 7), "name"), "db");

        /* Root first: the comm, then main, ..., the kernel frame last. */
        const cJSON *s = cJSON_GetArrayItem(get(p, "samples"), 3);
        ASSERT_EQ(cJSON_GetArraySize(s), 4);
        ASSERT_EQ(cJSON_GetArrayItem(s, 0)->valueint, 6);
        ASSERT_EQ(cJSON_GetArrayItem(s, 1)->valueint, main_);
        ASSERT_EQ(cJSON_GetArrayItem(s, 2)->valueint, work_a);
        ASSERT_EQ(cJSON_GetArrayItem(s, 3)->valueint, sys);
}

TEST(speedscope_nanoseconds) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_cjson_ cJSON *j = NULL, *j2 = NULL;
        _cleanup_free_ char *out = NULL;
        const cJSON *p, *w;
        uint32_t p1, a, b;
        ReportSummaryInfo info = {
                .cgroup = "system.slice/app.service",
                .target = "app",
                .frequency = 100,
        };

        p1 = process(d, 1, "app");
        a = frame(d, "a", NULL, FRAME_USER);
        b = frame(d, "b", NULL, FRAME_USER);
        add(d, p1, 3, 1, a);
        add(d, p1, 7, 2, a, b);

        /* 100 Hz: 10 ms per sample. */
        j = speedscope(d, &info, NULL);
        p = the_profile(j);
        ASSERT_STREQ(get_string(p, "unit"), "nanoseconds");
        ASSERT_STREQ(get_string(p, "name"), "system.slice/app.service");
        ASSERT_STREQ(get_string(j, "name"), "system.slice/app.service");
        ASSERT_EQ(get_number(p, "endValue"), 100000000);
        out = render_samples(j);
        ASSERT_STREQ(out, "app;a 30000000\n"
                          "app;a;b 70000000\n");

        /* 999 Hz: weights are rounded per sample, and convert back exactly. */
        info.frequency = 999;
        add(d, p1, 123456788, 1, b); /* 123456789 samples of [b] */
        add(d, p1, 1, 1, b);
        j2 = speedscope(d, &info, NULL);
        p = the_profile(j2);
        double sum = 0;
        uint64_t samples = 0;
        cJSON_ArrayForEach (w, get(p, "weights")) {
                sum += w->valuedouble;
                samples += (uint64_t) (w->valuedouble * 999 / 1e9 + 0.5);
        }
        ASSERT_EQ(samples, 123456789 + 10);
        ASSERT_EQ(get_number(p, "endValue"), sum);
        ASSERT_EQ(cJSON_GetArrayItem(get(p, "weights"), 0)->valuedouble,
                  3003003); /* 3e9/999 = 3003003.003 */
}

TEST(speedscope_kubernetes_label) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_cjson_ cJSON *j = NULL;
        ReportSummaryInfo info = {
                .cgroup = "kubepods.slice/x",
                .namespace = "prod",
                .pod = "web-1",
                .container = "nginx",
                .frequency = 99,
        };

        add(d, process(d, 1, "nginx"), 1, 1, frame(d, "f", NULL, FRAME_USER));
        j = speedscope(d, &info, NULL);
        ASSERT_STREQ(get_string(the_profile(j), "name"), "prod/web-1/nginx");
}

TEST(speedscope_escaping) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_cjson_ cJSON *j = NULL;
        _cleanup_free_ char *text = NULL;
        const cJSON *frames;
        uint32_t p, q, odd, ctl, uni;

        p = process(d, 1, "we\"ird\\comm");
        q = process(d, 2, "tab\there");
        odd = frame(d, "a\"b\\c\nd", "lib\"x\".so", FRAME_USER);
        ctl = frame(d, "x\x01y\x1f\r\b\f\t</script>", NULL, FRAME_USER);
        uni = frame(d, "grüße 日本 😀", NULL, FRAME_USER);
        add(d, p, 1, 1, odd);
        add(d, p, 2, 2, odd, ctl);
        add(d, q, 3, 1, uni);

        j = speedscope(d, NULL, &text);
        frames = get(get(j, "shared"), "frames");
        ASSERT_STREQ(get_string(cJSON_GetArrayItem(frames, (int) odd), "name"), "a\"b\\c\nd");
        ASSERT_STREQ(get_string(cJSON_GetArrayItem(frames, (int) odd), "file"), "lib\"x\".so");
        ASSERT_STREQ(get_string(cJSON_GetArrayItem(frames, (int) ctl), "name"),
                     "x\x01y\x1f\r\b\f\t</script>");
        ASSERT_STREQ(get_string(cJSON_GetArrayItem(frames, (int) uni), "name"), "grüße 日本 😀");
        ASSERT_STREQ(get_string(cJSON_GetArrayItem(frames, 3), "name"), "tab\there");
        ASSERT_STREQ(get_string(cJSON_GetArrayItem(frames, 4), "name"), "we\"ird\\comm");

        /* As escaped in the text: no raw control characters inside strings. */
        ASSERT_NOT_NULL(strstr(text, "{\"name\":\"a\\\"b\\\\c\\nd\",\"file\":\"lib\\\"x\\\".so\"}"));
        ASSERT_NOT_NULL(strstr(text, "\"x\\u0001y\\u001f\\r\\b\\f\\t</script>\""));
        for (const char *c = text; *c; c++)
                ASSERT_TRUE(*c == '\n' || (unsigned char) *c >= 0x20);
}

TEST(speedscope_invalid_utf8) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_cjson_ cJSON *j = NULL;
        const cJSON *frames;
        uint32_t p, interned, raw;

        p = process(d, 1, "bad\xff");
        /* Interning makes names valid... */
        interned = frame(d, "f\xc3(", "m\xed\xa0\x80.so", FRAME_USER);
        /* ...and the writer copes with data that bypassed it: overlong,
         * truncated and stray bytes. */
        raw = frame(d, "placeholder", NULL, FRAME_USER);
        free(d->frames[raw].name);
        d->frames[raw].name = strdup("g\xc0\xaf-\xe2\x82-\x80-\xf5-ok\xc3");
        ASSERT_NOT_NULL(d->frames[raw].name);
        add(d, p, 1, 2, interned, raw);

        j = speedscope(d, NULL, NULL);
        frames = get(get(j, "shared"), "frames");
        ASSERT_STREQ(get_string(cJSON_GetArrayItem(frames, (int) interned), "name"), "f\uFFFD(");
        ASSERT_STREQ(get_string(cJSON_GetArrayItem(frames, (int) interned), "file"),
                     "m\uFFFD\uFFFD\uFFFD.so");
        ASSERT_STREQ(get_string(cJSON_GetArrayItem(frames, (int) raw), "name"),
                     "g\uFFFD\uFFFD-\uFFFD\uFFFD-\uFFFD-\uFFFD-ok\uFFFD");
        ASSERT_STREQ(get_string(cJSON_GetArrayItem(frames, 2), "name"), "bad\uFFFD");
}

TEST(speedscope_empty) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_cjson_ cJSON *j = NULL, *j2 = NULL;
        ReportSummaryInfo info = { .frequency = 99 };
        const cJSON *p;

        j = speedscope(d, &info, NULL);
        p = the_profile(j);
        ASSERT_EQ(cJSON_GetArraySize(get(get(j, "shared"), "frames")), 0);
        ASSERT_EQ(cJSON_GetArraySize(get(p, "samples")), 0);
        ASSERT_EQ(cJSON_GetArraySize(get(p, "weights")), 0);
        ASSERT_EQ(get_number(p, "endValue"), 0);

        /* A process whose stacks have no samples. */
        add(d, process(d, 1, "idle"), 0, 0);
        j2 = speedscope(d, &info, NULL);
        p = the_profile(j2);
        ASSERT_EQ(cJSON_GetArraySize(get(p, "samples")), 0);
        ASSERT_EQ(get_number(p, "endValue"), 0);
}

TEST(speedscope_invalid) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        char *buf = NULL;
        size_t size = 0;
        uint32_t p, a;
        FILE *f;

        ASSERT_ERROR(report_write_speedscope(NULL, d, NULL), EINVAL);
        ASSERT_ERROR(report_write_speedscope(stdout, NULL, NULL), EINVAL);

        p = process(d, 1, "x");
        a = frame(d, "a", NULL, FRAME_USER);
        add(d, p, 1, 1, a);
        d->stacks[0].frames[0] = 7; /* no such frame */
        f = open_memstream(&buf, &size);
        ASSERT_NOT_NULL(f);
        ASSERT_ERROR(report_write_speedscope(f, d, NULL), EINVAL);
        ASSERT_EQ(fflush(f), 0);
        ASSERT_EQ(size, 0u);
        d->stacks[0].frames[0] = a;
        d->stacks[0].process = 3; /* no such process */
        ASSERT_ERROR(report_write_speedscope(f, d, NULL), EINVAL);
        d->stacks[0].process = p;
        ASSERT_EQ(fclose(f), 0);
        free(buf);
}

TEST(speedscope_many) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_cjson_ cJSON *j = NULL;
        const cJSON *p, *s, *prev = NULL;
        uint32_t procs[4], frames[64], stack[8];
        uint64_t total = 0, n = 0;
        ReportSummaryInfo info = { .frequency = 997 };

        for (size_t i = 0; i < ELEMENTSOF(procs); i++)
                procs[i] = process(d, (pid_t) (i + 1), i % 2 ? "odd" : "even");
        for (size_t i = 0; i < ELEMENTSOF(frames); i++) {
                char name[32];

                snprintf(name, sizeof(name), "fn%zu", i);
                frames[i] = frame(d, name, "lib.so", i % 7 == 0 ? FRAME_KERNEL : FRAME_USER);
        }
        /* 20000 distinct stacks (per process), pseudo-random. */
        uint32_t x = 1;
        for (size_t i = 0; i < 20000; i++) {
                size_t depth = 1 + i % ELEMENTSOF(stack);

                for (size_t k = 0; k < depth; k++) {
                        x = x * 1103515245 + 12345;
                        stack[k] = frames[(x >> 16) % ELEMENTSOF(frames)];
                }
                ASSERT_OK(profile_data_add_stack(d, procs[i % ELEMENTSOF(procs)], stack, depth, 1 + i % 5));
                total += 1 + i % 5;
        }

        j = speedscope(d, &info, NULL);
        p = the_profile(j);
        cJSON_ArrayForEach (s, get(p, "weights"))
                n += (uint64_t) (s->valuedouble * 997 / 1e9 + 0.5);
        ASSERT_EQ(n, total);

        /* Sorted and merged: consecutive samples differ, in order of names. */
        cJSON_ArrayForEach (s, get(p, "samples")) {
                if (prev) {
                        char *a = cJSON_PrintUnformatted(prev), *b = cJSON_PrintUnformatted(s);
                        ASSERT_FALSE(streq(a, b));
                        cJSON_free(a);
                        cJSON_free(b);
                }
                prev = s;
        }
        free(render_samples(j));
}

DEFINE_TEST_MAIN;
