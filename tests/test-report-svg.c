/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdarg.h>
#include <time.h>

#include "report.h"
#include "profile-fixture.h"
#include "tests.h"

#define process(d, pid, comm) fixture_process(d, pid, comm, comm)

static char *svg(const ProfileData *d, const ReportSummaryInfo *info) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        f = open_memstream(&buf, &size);
        ASSERT_NOT_NULL(f);
        ASSERT_OK(report_write_svg(f, d, info));
        ASSERT_EQ(fclose(f), 0);
        ASSERT_NOT_NULL(buf);
        return buf;
}

/* ---- a small XML checker: balanced elements, valid references, no raw
 * '<' or '&' in text or attribute values, no control characters. ---- */

static const char *check_reference(const char *p) {
        static const char *const entities[] = { "&amp;", "&lt;", "&gt;", "&quot;", "&apos;" };

        for (size_t i = 0; i < ELEMENTSOF(entities); i++)
                if (strncmp(p, entities[i], strlen(entities[i])) == 0)
                        return p + strlen(entities[i]);
        ASSERT_TRUE(p[1] == '#');
        p += 2;
        ASSERT_TRUE(*p >= '0' && *p <= '9');
        while (*p >= '0' && *p <= '9')
                p++;
        ASSERT_TRUE(*p == ';');
        return p + 1;
}

static void check_xml(const char *s) {
        char stack[64][32];
        size_t depth = 0;
        bool root_seen = false;
        const char *p;

        ASSERT_TRUE(strncmp(s, "<?xml ", 6) == 0);
        p = strstr(s, "?>");
        ASSERT_NOT_NULL(p);
        p += 2;

        for (const char *c = s; *c; c++) {
                unsigned char u = (unsigned char) *c;
                ASSERT_TRUE(u >= 0x20 || u == '\n' || u == '\t' || u == '\r');
        }

        while (*p) {
                if (*p == '&') {
                        ASSERT_TRUE(depth > 0);
                        p = check_reference(p);
                        continue;
                }
                if (*p != '<') {
                        ASSERT_TRUE(depth > 0 || *p == '\n' || *p == ' ');
                        p++;
                        continue;
                }
                if (strncmp(p, "<![CDATA[", 9) == 0) {
                        p = strstr(p, "]]>");
                        ASSERT_NOT_NULL(p);
                        p += 3;
                        continue;
                }
                if (strncmp(p, "<!--", 4) == 0) {
                        p = strstr(p, "-->");
                        ASSERT_NOT_NULL(p);
                        p += 3;
                        continue;
                }
                if (p[1] == '/') {
                        size_t n = strcspn(p + 2, ">");
                        ASSERT_TRUE(depth > 0);
                        depth--;
                        ASSERT_EQ(n, strlen(stack[depth]));
                        ASSERT_TRUE(strncmp(p + 2, stack[depth], n) == 0);
                        p += 2 + n + 1;
                        continue;
                }

                /* A start tag: name, then attributes name="value". */
                size_t n = strcspn(p + 1, " />\n");
                ASSERT_TRUE(n > 0 && n < sizeof(stack[0]));
                ASSERT_TRUE(depth > 0 || !root_seen);
                root_seen = true;
                ASSERT_TRUE(depth < ELEMENTSOF(stack));
                memcpy(stack[depth], p + 1, n);
                stack[depth][n] = 0;
                p += 1 + n;
                for (;;) {
                        while (*p == ' ' || *p == '\n')
                                p++;
                        if (*p == '>') {
                                depth++;
                                p++;
                                break;
                        }
                        if (p[0] == '/' && p[1] == '>') {
                                p += 2;
                                break;
                        }
                        p += strcspn(p, "=");
                        ASSERT_TRUE(p[0] == '=' && p[1] == '"');
                        p += 2;
                        while (*p != '"') {
                                ASSERT_TRUE(*p && *p != '<');
                                p = *p == '&' ? check_reference(p) : p + 1;
                        }
                        p++;
                }
        }
        ASSERT_EQ(depth, 0);
        ASSERT_TRUE(root_seen);
}

static void check_no_external_urls(const char *s) {
        for (const char *p = strstr(s, "http"); p; p = strstr(p + 1, "http")) {
                if (strncmp(p, "https://", 8) == 0)
                        ASSERT_TRUE(false);
                if (strncmp(p, "http://", 7) == 0)
                        ASSERT_TRUE(strncmp(p, "http://www.w3.org/2000/svg\"", 27) == 0 ||
                                    strncmp(p, "http://www.w3.org/1999/xlink\"", 29) == 0);
        }
        ASSERT_NULL(strstr(s, "href"));
        ASSERT_NULL(strstr(s, "@import"));
}

/* ---- the frames, as drawn ---- */

typedef struct DrawnFrame {
        char name[64]; /* as written: escaped */
        char kind[16];
        char fill[32];
        uint64_t samples;
        double x, y, width;
} DrawnFrame;

static size_t parse_frames(const char *s, DrawnFrame *ret, size_t max) {
        size_t n = 0;

        for (const char *p = strstr(s, "<g class=\"frame\""); p; p = strstr(p + 1, "<g class=\"frame\"")) {
                DrawnFrame *f = ret + n;
                const char *end = strstr(p, "</g>"), *q;
                size_t l;

                ASSERT_TRUE(n < max);
                ASSERT_NOT_NULL(end);

                q = strstr(p, "data-name=\"");
                ASSERT_TRUE(q && q < end);
                q += strlen("data-name=\"");
                l = strcspn(q, "\"");
                ASSERT_TRUE(l < sizeof(f->name));
                memcpy(f->name, q, l);
                f->name[l] = 0;

                q = strstr(p, "data-samples=\"");
                ASSERT_TRUE(q && q < end);
                ASSERT_EQ(sscanf(q, "data-samples=\"%" SCNu64 "\"", &f->samples), 1);
                q = strstr(p, "data-kind=\"");
                ASSERT_TRUE(q && q < end);
                ASSERT_EQ(sscanf(q, "data-kind=\"%15[a-z]\"", f->kind), 1);

                q = strstr(p, "<rect ");
                ASSERT_TRUE(q && q < end);
                ASSERT_EQ(sscanf(q,
                                 "<rect x=\"%lf\" y=\"%lf\" width=\"%lf\" height=\"15\" fill=\"%31[^\"]\"",
                                 &f->x, &f->y, &f->width, f->fill),
                          4);
                n++;
        }
        return n;
}

/* The nth drawn frame of that (escaped) name, in document order. */
static const DrawnFrame *find(const DrawnFrame *frames, size_t n, const char *name, unsigned nth) {
        for (size_t i = 0; i < n; i++)
                if (streq(frames[i].name, name) && nth-- == 0)
                        return frames + i;
        return NULL;
}

static const ReportSummaryInfo test_info = {
        .session_id = "0123456789abcdef0123456789abcdef",
        .profile = "test",
        .target = "web",
        .cgroup = "test.slice/app<1>.service",
        .frequency = 99,
        .event = "cpu-clock",
        .start_usec = 1700000000 * USEC_PER_SEC,
        .end_usec = 1700000010 * USEC_PER_SEC + 500000,
};

static ProfileData *small_profile(bool reversed) {
        ProfileData *d = profile_data_new();
        uint32_t p1, p2, p3, main_, hot, weird, sys, unk, ctl;

        ASSERT_NOT_NULL(d);
        /* Interned in another order when reversed: the output must not change. */
        if (!reversed) {
                p1 = process(d, 100, "app");
                p2 = process(d, 101, "app");
                p3 = process(d, 200, "db");
                main_ = frame(d, "main", "app", FRAME_USER);
                hot = frame(d, "hot", "libhot.so", FRAME_USER);
                weird = frame(d, "a<b>&\"c\"", "app", FRAME_USER);
                sys = frame(d, "do_syscall_64", "[kernel.kallsyms]", FRAME_KERNEL);
                unk = frame(d, "[libc.so.6]", "libc.so.6", FRAME_UNKNOWN);
                ctl = frame(d,
                            "tab\there\x01"
                            "ctl'",
                            "app", FRAME_USER);
        } else {
                ctl = frame(d,
                            "tab\there\x01"
                            "ctl'",
                            "app", FRAME_USER);
                unk = frame(d, "[libc.so.6]", "libc.so.6", FRAME_UNKNOWN);
                sys = frame(d, "do_syscall_64", "[kernel.kallsyms]", FRAME_KERNEL);
                weird = frame(d, "a<b>&\"c\"", "app", FRAME_USER);
                hot = frame(d, "hot", "libhot.so", FRAME_USER);
                main_ = frame(d, "main", "app", FRAME_USER);
                p3 = process(d, 200, "db");
                p2 = process(d, 101, "app");
                p1 = process(d, 100, "app");
        }

        if (!reversed) {
                add(d, p1, 60, 2, main_, hot);
                add(d, p2, 20, 2, main_, hot); /* the same comm: merged */
                add(d, p1, 5, 3, main_, hot, sys);
                add(d, p1, 10, 2, main_, weird);
                add(d, p3, 4, 2, main_, sys);
                add(d, p3, 1, 2, main_, unk);
                add(d, p2, 3, 2, main_, ctl);
                add(d, p3, 7, 0);
                add(d, p1, 0, 2, main_, unk); /* no samples: not drawn */
        } else {
                /* The same stacks, added backwards. */
                add(d, p1, 0, 2, main_, unk);
                add(d, p3, 7, 0);
                add(d, p2, 3, 2, main_, ctl);
                add(d, p3, 1, 2, main_, unk);
                add(d, p3, 4, 2, main_, sys);
                add(d, p1, 10, 2, main_, weird);
                add(d, p1, 5, 3, main_, hot, sys);
                add(d, p2, 20, 2, main_, hot);
                add(d, p1, 60, 2, main_, hot);
        }
        return d;
}

TEST(svg_small) {
        _cleanup_(profile_data_freep) ProfileData *d = small_profile(false);
        _cleanup_free_ char *out = NULL;
        DrawnFrame frames[32];
        const DrawnFrame *all, *app, *db, *main_app, *main_db, *hot, *weird, *sys_hot, *sys_db, *unk, *ctl;
        size_t n;

        out = svg(d, &test_info);
        check_xml(out);
        check_no_external_urls(out);
        ASSERT_TRUE(strstr(out, "<svg ") != NULL);
        ASSERT_TRUE(strlen(out) > 7 && streq(out + strlen(out) - 7, "</svg>\n"));

        /* Title: target and session; the cgroup escaped. */
        ASSERT_NOT_NULL(strstr(out, "<title>Flame graph: test.slice/app&lt;1&gt;.service (session "
                                    "0123456789abcdef0123456789abcdef)</title>"));
        ASSERT_NOT_NULL(strstr(out, "session 0123456789abcdef0123456789abcdef"));
        ASSERT_NOT_NULL(strstr(out, "cpu-clock at 99 Hz"));
        ASSERT_NOT_NULL(strstr(out, "110 samples"));
        ASSERT_NOT_NULL(strstr(out, "10.5 s from 2023-11-14 22:13:20 UTC"));

        /* The UI: inline script and style, the search function and button. */
        ASSERT_NOT_NULL(strstr(out, "<script type=\"text/ecmascript\"><![CDATA["));
        ASSERT_NOT_NULL(strstr(out, "window.cgprofSearch = search"));
        ASSERT_NOT_NULL(strstr(out, ">Search</text>"));
        ASSERT_NOT_NULL(strstr(out, "<style>"));

        n = parse_frames(out, frames, ELEMENTSOF(frames));
        /* all, app, main, a<b>.., hot, do_syscall_64, tab.., db, main, [libc.so.6], do_syscall_64 */
        ASSERT_EQ(n, 11);

        ASSERT_NOT_NULL(all = find(frames, n, "all", 0));
        ASSERT_NOT_NULL(app = find(frames, n, "app", 0));
        ASSERT_NOT_NULL(db = find(frames, n, "db", 0));
        ASSERT_NOT_NULL(main_app = find(frames, n, "main", 0));
        ASSERT_NOT_NULL(main_db = find(frames, n, "main", 1));
        ASSERT_NOT_NULL(hot = find(frames, n, "hot", 0));
        ASSERT_NOT_NULL(weird = find(frames, n, "a&lt;b&gt;&amp;&quot;c&quot;", 0));
        ASSERT_NOT_NULL(sys_hot = find(frames, n, "do_syscall_64", 0));
        ASSERT_NOT_NULL(sys_db = find(frames, n, "do_syscall_64", 1));
        ASSERT_NOT_NULL(unk = find(frames, n, "[libc.so.6]", 0));
        /* Tab as a reference, the control character replaced, ' escaped. */
        ASSERT_NOT_NULL(ctl = find(frames, n,
                                   "tab&#9;here\xef\xbf\xbd"
                                   "ctl&apos;",
                                   0));
        ASSERT_NULL(find(frames, n, "app", 1)); /* processes of one comm are one frame */

        /* Samples, inclusive; the root first, then depth first by name. */
        ASSERT_TRUE(all == frames);
        ASSERT_EQ(all->samples, 110);
        ASSERT_EQ(app->samples, 98);
        ASSERT_EQ(main_app->samples, 98);
        ASSERT_EQ(hot->samples, 85);
        ASSERT_EQ(sys_hot->samples, 5);
        ASSERT_EQ(weird->samples, 10);
        ASSERT_EQ(ctl->samples, 3);
        ASSERT_EQ(db->samples, 12);
        ASSERT_EQ(main_db->samples, 5);
        ASSERT_EQ(sys_db->samples, 4);
        ASSERT_EQ(unk->samples, 1);
        ASSERT_TRUE(app < main_app && main_app < weird && weird < hot && hot < sys_hot && sys_hot < ctl &&
                    ctl < db && db < main_db && main_db < unk && unk < sys_db);

        /* Kinds and colours by kind. */
        ASSERT_STREQ(all->kind, "root");
        ASSERT_STREQ(app->kind, "process");
        ASSERT_STREQ(hot->kind, "user");
        ASSERT_STREQ(sys_hot->kind, "kernel");
        ASSERT_STREQ(unk->kind, "unknown");
        ASSERT_STREQ(sys_hot->fill, sys_db->fill); /* the same name, the same colour */
        ASSERT_STREQ(main_app->fill, main_db->fill);
        unsigned r, g, b;
        ASSERT_EQ(sscanf(hot->fill, "rgb(%u,%u,%u)", &r, &g, &b), 3);
        ASSERT_TRUE(r >= 205 && b <= 55); /* warm */
        ASSERT_EQ(sscanf(sys_hot->fill, "rgb(%u,%u,%u)", &r, &g, &b), 3);
        ASSERT_TRUE(b >= 200 && r <= 110); /* blue */
        ASSERT_EQ(sscanf(unk->fill, "rgb(%u,%u,%u)", &r, &g, &b), 3);
        ASSERT_TRUE(r == g && g == b); /* grey */

        /* Root at the bottom: callees above (smaller y) their callers. */
        ASSERT_TRUE(app->y < all->y);
        ASSERT_TRUE(main_app->y < app->y);
        ASSERT_TRUE(hot->y < main_app->y);
        ASSERT_TRUE(sys_hot->y < hot->y);
        ASSERT_TRUE(sys_db->y == hot->y);
        ASSERT_TRUE(all->y + 16 + 34 <= atof(strstr(out, "height=\"") + 8));

        /* Widths proportional to samples, children within their parents, by name left to right. */
        ASSERT_TRUE(all->x == 10 && all->width == 1180);
        ASSERT_TRUE(hot->width > 1180.0 * 85 / 110 - 0.001 && hot->width < 1180.0 * 85 / 110 + 0.001);
        ASSERT_TRUE(db->width > 1180.0 * 12 / 110 - 0.001 && db->width < 1180.0 * 12 / 110 + 0.001);
        ASSERT_TRUE(app->x == all->x && main_app->x == app->x && weird->x == main_app->x);
        ASSERT_TRUE(hot->x > weird->x && ctl->x > hot->x && db->x > ctl->x);
        ASSERT_TRUE(db->x + db->width <= all->x + all->width + 0.001);
        ASSERT_TRUE(sys_db->x >= main_db->x &&
                    sys_db->x + sys_db->width <= main_db->x + main_db->width + 0.001);

        /* Titles: name, module, samples and percentage. */
        ASSERT_NOT_NULL(strstr(out, "<title>hot [libhot.so] (85 samples, 77.27%)</title>"));
        ASSERT_NOT_NULL(strstr(out, "<title>do_syscall_64 [kernel] (5 samples, 4.55%)</title>"));
        ASSERT_NOT_NULL(strstr(out, "<title>all (110 samples, 100.00%)</title>"));
        ASSERT_NOT_NULL(strstr(out, "<title>[libc.so.6] (1 sample, 0.91%)</title>"));
        ASSERT_NOT_NULL(strstr(out, ">a&lt;b&gt;&amp;&quot;c&quot;</text>"));
}

TEST(svg_deterministic) {
        _cleanup_(profile_data_freep) ProfileData *a = small_profile(false), *b = small_profile(true);
        _cleanup_free_ char *x = NULL, *y = NULL, *z = NULL;

        x = svg(a, &test_info);
        y = svg(b, &test_info);
        z = svg(a, &test_info);
        ASSERT_STREQ(x, y);
        ASSERT_STREQ(x, z);
}

TEST(svg_no_info_and_pod) {
        _cleanup_(profile_data_freep) ProfileData *d = small_profile(false);
        _cleanup_free_ char *out = NULL, *pod = NULL;
        ReportSummaryInfo info = test_info;

        out = svg(d, NULL);
        check_xml(out);
        ASSERT_NOT_NULL(strstr(out, "<title>Flame graph: cgprof profile</title>"));

        info.namespace = "shop";
        info.pod = "web-7d9f";
        info.container = "nginx";
        info.node = "node-1";
        pod = svg(d, &info);
        check_xml(pod);
        ASSERT_NOT_NULL(strstr(pod, "<title>Flame graph: shop/web-7d9f/nginx (session "));
        ASSERT_NOT_NULL(strstr(pod, "node node-1"));
}

TEST(svg_empty) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_free_ char *out = NULL;
        DrawnFrame frames[1];

        out = svg(d, &test_info);
        check_xml(out);
        check_no_external_urls(out);
        ASSERT_EQ(parse_frames(out, frames, ELEMENTSOF(frames)), 0);
        ASSERT_NOT_NULL(strstr(out, "No samples"));
}

TEST(svg_narrow_frames_omitted) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_free_ char *out = NULL;
        DrawnFrame frames[16];
        uint32_t p, main_, big, tiny, tiny_child, small;
        size_t n;

        p = process(d, 1, "app");
        main_ = frame(d, "main", "app", FRAME_USER);
        big = frame(d, "big", "app", FRAME_USER);
        tiny = frame(d, "tiny", "app", FRAME_USER);
        tiny_child = frame(d, "tiny_child", "app", FRAME_USER);
        small = frame(d, "small", "app", FRAME_USER);

        /* 0.1 px of 1180 px is 1/11800 of the samples. */
        add(d, p, 117980, 2, main_, big);
        add(d, p, 1, 3, main_, tiny, tiny_child);
        add(d, p, 9, 2, main_, small); /* 9/118000 × 1180 = 0.09 px */
        add(d, p, 10, 1, big); /* 10/118000 × 1180 = 0.1 px: drawn */

        out = svg(d, &test_info);
        check_xml(out);
        n = parse_frames(out, frames, ELEMENTSOF(frames));
        ASSERT_NULL(find(frames, n, "tiny", 0));
        ASSERT_NULL(find(frames, n, "tiny_child", 0));
        ASSERT_NULL(find(frames, n, "small", 0));
        ASSERT_EQ(find(frames, n, "main", 0)->samples, 117990);
        ASSERT_EQ(find(frames, n, "big", 0)->samples, 10);
        ASSERT_EQ(find(frames, n, "big", 1)->samples, 117980);
        ASSERT_EQ(find(frames, n, "all", 0)->samples, 118000);
        ASSERT_EQ(n, 5); /* all, app, big, main, big */
}

TEST(svg_large) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_free_ char *out = NULL;
        uint32_t fr[64], p[8], stack[24];
        uint64_t seed = 1, total = 0;
        struct timespec t0, t1;
        double elapsed;

        for (size_t i = 0; i < ELEMENTSOF(p); i++) {
                char comm[16];
                snprintf(comm, sizeof(comm), "proc%zu", i % 5);
                p[i] = process(d, (pid_t) (i + 1), comm);
        }
        for (size_t i = 0; i < ELEMENTSOF(fr); i++) {
                char name[32];
                snprintf(name, sizeof(name), "function_%02zu", i);
                fr[i] = frame(d, name, "lib.so", i % 7 == 0 ? FRAME_KERNEL : FRAME_USER);
        }
        for (size_t i = 0; i < 100000; i++) {
                size_t depth;

                seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                depth = 4 + (seed >> 60);
                for (size_t k = 0; k < depth; k++) {
                        seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
                        /* A few callers near the root, many leaves. */
                        stack[k] = fr[(seed >> 33) % (k < 2 ? 4 : ELEMENTSOF(fr))];
                }
                ASSERT_OK(profile_data_add_stack(d, p[i % ELEMENTSOF(p)], stack, depth, 1 + i % 3));
                total += 1 + i % 3;
        }

        clock_gettime(CLOCK_MONOTONIC, &t0);
        out = svg(d, &test_info);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        elapsed = (double) (t1.tv_sec - t0.tv_sec) + (double) (t1.tv_nsec - t0.tv_nsec) / 1e9;
        fprintf(stderr, "%zu stacks: %zu bytes of SVG in %.3f s\n", d->n_stacks, strlen(out), elapsed);

        check_xml(out);
        /* A bound, not a benchmark: sanitizer builds are several times slower. */
        ASSERT_TRUE(elapsed < 10);
        char want[64];
        snprintf(want, sizeof(want), "data-name=\"all\" data-samples=\"%" PRIu64 "\"", total);
        ASSERT_NOT_NULL(strstr(out, want));
        /* Frames narrower than 0.1 px are left out: about 11800 per level at most. */
        ASSERT_TRUE(strlen(out) < 20 * 1024 * 1024);
}

DEFINE_TEST_MAIN
