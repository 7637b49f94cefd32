/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdarg.h>

#include "profile-data.h"
#include "profile-fixture.h"
#include "tests.h"

#define process(d, pid, comm) fixture_process(d, pid, comm, comm)

TEST(intern) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        uint32_t a, b, c, e, f, g;

        ASSERT_NOT_NULL(d);
        a = frame(d, "main", "app", FRAME_USER);
        b = frame(d, "main", "app", FRAME_USER);
        ASSERT_EQ(a, b);
        c = frame(d, "main", "other", FRAME_USER); /* different module */
        e = frame(d, "main", NULL, FRAME_USER); /* no module */
        f = frame(d, "main", "app", FRAME_UNKNOWN); /* different kind */
        g = frame(d, "main", NULL, FRAME_USER);
        ASSERT_TRUE(a != c && a != e && a != f && c != e && c != f && e != f);
        ASSERT_EQ(e, g);
        ASSERT_EQ(d->n_frames, 4);
        ASSERT_STREQ(d->frames[a].name, "main");
        ASSERT_STREQ(d->frames[a].module, "app");
        ASSERT_NULL(d->frames[e].module);
        ASSERT_EQ(d->frames[f].kind, FRAME_UNKNOWN);

        ASSERT_ERROR(profile_data_intern_frame(d, NULL, NULL, FRAME_USER, &a), EINVAL);
        ASSERT_ERROR(profile_data_intern_frame(d, "x", NULL, _FRAME_KIND_MAX, &a), EINVAL);
        ASSERT_ERROR(profile_data_intern_frame(d, "x", NULL, (FrameKind) -1, &a), EINVAL);

        /* Invalid UTF-8 is stored as U+FFFD. */
        a = frame(d, "bad\xff", "m\xfe", FRAME_USER);
        ASSERT_STREQ(d->frames[a].name, "bad\xef\xbf\xbd");
        ASSERT_STREQ(d->frames[a].module, "m\xef\xbf\xbd");
        ASSERT_EQ(frame(d, "bad\xff", "m\xfe", FRAME_USER), a);
}

TEST(intern_file_line_inline) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new(), *one = NULL;
        uint32_t a, b, c, m, l_a, l_a2, l_b, l_c, l_x, pid, stack[3];

        ASSERT_NOT_NULL(d);
        /* The file is part of a frame's identity; NULL is the old function's. */
        ASSERT_OK(profile_data_intern_frame_full(d, "main.goGamma", "app", "/src/main.go", FRAME_USER, &a));
        ASSERT_OK(profile_data_intern_frame_full(d, "main.goGamma", "app", "/src/main.go", FRAME_USER, &b));
        ASSERT_EQ(a, b);
        ASSERT_OK(profile_data_intern_frame_full(d, "main.goGamma", "app", "/src/other.go", FRAME_USER, &b));
        c = frame(d, "main.goGamma", "app", FRAME_USER);
        ASSERT_TRUE(a != b && a != c && b != c);
        ASSERT_STREQ(d->frames[a].file, "/src/main.go");
        ASSERT_NULL(d->frames[c].file);
        ASSERT_OK(profile_data_intern_frame_full(d, "main.goGamma", "app", NULL, FRAME_USER, &b));
        ASSERT_EQ(b, c);
        ASSERT_OK(profile_data_intern_frame_full(d, "f", NULL, "bad\xff.go", FRAME_USER, &b));
        ASSERT_STREQ(d->frames[b].file, "bad\xef\xbf\xbd.go");
        ASSERT_OK(
                profile_data_intern_frame_full(d, "main.gammaStep", "app", "/src/main.go", FRAME_USER, &b));
        ASSERT_OK(profile_data_intern_frame_full(d, "main.main", "app", "/src/main.go", FRAME_USER, &c));

        /* Locations: the line is part of the key, an inlined call names the
         * location (same address and mapping) it was inlined into. */
        ASSERT_OK(profile_data_intern_mapping(d, "/bin/app", 0x400000, 0x500000, 0, NULL, false, &m));
        ASSERT_OK(profile_data_intern_location_full(d, 0x401010, m, a, 56, PROFILE_NONE, &l_a));
        ASSERT_OK(profile_data_intern_location_full(d, 0x401010, m, a, 56, PROFILE_NONE, &l_a2));
        ASSERT_EQ(l_a, l_a2);
        ASSERT_OK(profile_data_intern_location_full(d, 0x401010, m, a, 57, PROFILE_NONE, &l_a2));
        ASSERT_TRUE(l_a != l_a2);
        ASSERT_OK(profile_data_intern_location(d, 0x401010, m, a, &l_x));
        ASSERT_TRUE(l_x != l_a && l_x != l_a2);
        ASSERT_EQ(d->locations[l_x].line, 0);
        ASSERT_EQ(d->locations[l_x].inlined_into, PROFILE_NONE);
        ASSERT_OK(profile_data_intern_location_full(d, 0x401010, m, b, 31, l_a, &l_b));
        ASSERT_EQ(d->locations[l_b].inlined_into, l_a);
        ASSERT_EQ(d->locations[l_b].line, 31);
        ASSERT_ERROR(profile_data_intern_location_full(d, 0x401011, m, b, 31, l_a, &l_x), EINVAL);
        ASSERT_ERROR(profile_data_intern_location_full(d, 0x401010, PROFILE_NONE, b, 31, l_a, &l_x), EINVAL);
        ASSERT_ERROR(profile_data_intern_location_full(d, 0x401010, m, b, 31, 9999, &l_x), EINVAL);
        ASSERT_OK(profile_data_intern_location_full(d, 0x401100, m, c, 70, PROFILE_NONE, &l_c));

        /* Stacks: the inlined call right after what it was inlined into. */
        pid = process(d, 1, "app");
        ASSERT_OK(profile_data_add_stack_full(d, pid, (uint32_t[]){ c, a, b }, (uint32_t[]){ l_c, l_a, l_b },
                                              3, false, 4));
        ASSERT_ERROR(profile_data_add_stack_full(d, pid, (uint32_t[]){ c, b }, (uint32_t[]){ l_c, l_b }, 2,
                                                 false, 1),
                     EINVAL);
        ASSERT_ERROR(profile_data_add_stack_full(d, pid, (uint32_t[]){ b, a }, (uint32_t[]){ l_b, l_a }, 2,
                                                 false, 1),
                     EINVAL);

        /* A per-process copy keeps files, lines and the chain. */
        one = profile_data_of_process(d, pid);
        ASSERT_NOT_NULL(one);
        ASSERT_EQ(one->n_stacks, 1);
        memcpy(stack, one->stacks[0].locations, sizeof(stack));
        ASSERT_STREQ(one->frames[one->stacks[0].frames[2]].name, "main.gammaStep");
        ASSERT_STREQ(one->frames[one->stacks[0].frames[2]].file, "/src/main.go");
        ASSERT_EQ(one->locations[stack[2]].line, 31);
        ASSERT_EQ(one->locations[stack[2]].inlined_into, stack[1]);
        ASSERT_EQ(one->locations[stack[1]].line, 56);
        ASSERT_EQ(one->locations[stack[1]].inlined_into, PROFILE_NONE);
        ASSERT_EQ(one->locations[stack[0]].line, 70);
}

TEST(intern_many) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        char name[32];

        /* Enough to grow the table several times; every index stays right. */
        for (unsigned i = 0; i < 50000; i++) {
                snprintf(name, sizeof(name), "fn%u", i);
                ASSERT_EQ(frame(d, name, i % 2 ? "libx.so" : NULL, FRAME_USER), i);
        }
        for (unsigned i = 0; i < 50000; i += 7) {
                snprintf(name, sizeof(name), "fn%u", i);
                ASSERT_EQ(frame(d, name, i % 2 ? "libx.so" : NULL, FRAME_USER), i);
        }
        ASSERT_EQ(d->n_frames, 50000);
}

TEST(stacks) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        uint32_t p1, p2, m, f, g, s1[2], s2[3];

        p1 = process(d, 100, "app");
        p2 = process(d, 101, "app");
        ASSERT_EQ(d->n_processes, 2); /* processes are not deduplicated */
        ASSERT_EQ(d->processes[p2].pid, 101);

        m = frame(d, "main", "app", FRAME_USER);
        f = frame(d, "f", "app", FRAME_USER);
        g = frame(d, "g", "app", FRAME_USER);

        s1[0] = m, s1[1] = f;
        s2[0] = m, s2[1] = f, s2[2] = g;
        ASSERT_OK(profile_data_add_stack(d, p1, s1, 2, 3));
        ASSERT_OK(profile_data_add_stack(d, p1, s1, 2, 4)); /* merged */
        ASSERT_OK(profile_data_add_stack(d, p2, s1, 2, 5)); /* other process: not merged */
        ASSERT_OK(profile_data_add_stack(d, p1, s2, 3, 1));
        ASSERT_OK(profile_data_add_stack(d, p1, s2, 2, 1)); /* a prefix is another stack: merged with s1 */
        ASSERT_OK(profile_data_add_stack(d, p1, NULL, 0, 2)); /* no frames */
        ASSERT_OK(profile_data_add_stack(d, p1, NULL, 0, 1));

        ASSERT_EQ(d->n_stacks, 4);
        ASSERT_EQ(d->stacks[0].count, 8);
        ASSERT_EQ(d->stacks[0].process, p1);
        ASSERT_EQ(d->stacks[1].count, 5);
        ASSERT_EQ(d->stacks[1].process, p2);
        ASSERT_EQ(d->stacks[2].count, 1);
        ASSERT_EQ(d->stacks[2].n_frames, 3);
        ASSERT_EQ(d->stacks[3].count, 3);
        ASSERT_EQ(d->stacks[3].n_frames, 0);
        ASSERT_EQ(d->processes[p1].samples, 12);
        ASSERT_EQ(d->processes[p2].samples, 5);
        ASSERT_EQ(profile_data_total(d), 17);

        /* Invalid references. */
        ASSERT_ERROR(profile_data_add_stack(d, 7, s1, 2, 1), EINVAL);
        s1[1] = 1000;
        ASSERT_ERROR(profile_data_add_stack(d, p1, s1, 2, 1), EINVAL);
        ASSERT_ERROR(profile_data_add_stack(d, p1, NULL, 2, 1), EINVAL);
        ASSERT_EQ(profile_data_total(d), 17);
}

TEST(stacks_many) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        uint32_t p, fr[16], st[5];

        p = process(d, 1, "x");
        for (unsigned i = 0; i < 16; i++) {
                char name[8];
                snprintf(name, sizeof(name), "f%u", i);
                fr[i] = frame(d, name, NULL, FRAME_USER);
        }

        /* 16^4 = 65536 distinct stacks of 5 frames, each added twice. */
        for (unsigned round = 0; round < 2; round++)
                for (unsigned i = 0; i < 65536; i++) {
                        st[0] = fr[0];
                        st[1] = fr[i & 15];
                        st[2] = fr[(i >> 4) & 15];
                        st[3] = fr[(i >> 8) & 15];
                        st[4] = fr[(i >> 12) & 15];
                        ASSERT_OK(profile_data_add_stack(d, p, st, 5, 1));
                }

        ASSERT_EQ(d->n_stacks, 65536);
        for (size_t i = 0; i < d->n_stacks; i++)
                ASSERT_EQ(d->stacks[i].count, 2);
        ASSERT_EQ(profile_data_total(d), 131072);
        ASSERT_EQ(d->processes[p].samples, 131072);
}

TEST(top_functions) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_free_ TopFunction *top = NULL;
        uint32_t p, main_, fib, leaf, k, unused;
        size_t n;

        p = process(d, 1, "app");
        main_ = frame(d, "main", "app", FRAME_USER);
        fib = frame(d, "fib", "app", FRAME_USER);
        leaf = frame(d, "leaf", "libc.so.6", FRAME_USER);
        k = frame(d, "do_syscall_64", "[kernel.kallsyms]", FRAME_KERNEL);
        unused = frame(d, "unused", NULL, FRAME_USER);

        /* Recursion: fib appears 3 times in one stack, counted once in total. */
        add(d, p, 10, 4, main_, fib, fib, fib);
        add(d, p, 5, 3, main_, fib, leaf);
        add(d, p, 2, 4, main_, fib, leaf, k);
        add(d, p, 7, 1, main_);
        add(d, p, 4, 0);

        ASSERT_OK(profile_data_top_functions(d, 0, &top, &n));
        ASSERT_EQ(n, 4); /* "unused" has no samples */

        ASSERT_EQ(top[0].frame, fib);
        ASSERT_EQ(top[0].self, 10);
        ASSERT_EQ(top[0].total, 17);
        ASSERT_EQ(top[1].frame, main_);
        ASSERT_EQ(top[1].self, 7);
        ASSERT_EQ(top[1].total, 24);
        ASSERT_EQ(top[2].frame, leaf);
        ASSERT_EQ(top[2].self, 5);
        ASSERT_EQ(top[2].total, 7);
        ASSERT_EQ(top[3].frame, k);
        ASSERT_EQ(top[3].self, 2);
        ASSERT_EQ(top[3].total, 2);
        for (size_t i = 0; i < n; i++)
                ASSERT_TRUE(top[i].frame != unused);

        free(top);
        top = NULL;
        ASSERT_OK(profile_data_top_functions(d, 2, &top, &n));
        ASSERT_EQ(n, 2);
        ASSERT_EQ(top[0].frame, fib);
        ASSERT_EQ(top[1].frame, main_);
}

TEST(top_functions_ties) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_free_ TopFunction *top = NULL;
        uint32_t p, root, b, a, c, z;
        size_t n;

        p = process(d, 1, "app");
        root = frame(d, "root", NULL, FRAME_USER);
        b = frame(d, "b", NULL, FRAME_USER);
        a = frame(d, "a", NULL, FRAME_USER);
        c = frame(d, "c", NULL, FRAME_USER);
        z = frame(d, "z", NULL, FRAME_USER);

        /* a, b, c and z each have self 3. z has the larger total (it is also
         * an inner frame), so it comes first; then a, b, c by name. */
        add(d, p, 3, 2, root, b);
        add(d, p, 3, 2, root, c);
        add(d, p, 3, 2, root, a);
        add(d, p, 3, 2, root, z);
        add(d, p, 1, 3, root, z, root); /* root recursive: self 1 */

        ASSERT_OK(profile_data_top_functions(d, 0, &top, &n));
        ASSERT_EQ(n, 5);
        ASSERT_EQ(top[0].frame, z);
        ASSERT_EQ(top[0].total, 4);
        ASSERT_EQ(top[1].frame, a);
        ASSERT_EQ(top[2].frame, b);
        ASSERT_EQ(top[3].frame, c);
        ASSERT_EQ(top[4].frame, root);
        ASSERT_EQ(top[4].self, 1);
        ASSERT_EQ(top[4].total, 13);
}

TEST(empty) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        TopFunction *top = (TopFunction *) 1;
        size_t n = 99;

        ASSERT_EQ(profile_data_total(d), 0);
        ASSERT_OK(profile_data_top_functions(d, 20, &top, &n));
        ASSERT_EQ(n, 0);
        ASSERT_NULL(top);
        ASSERT_NULL(profile_data_free(NULL));

        /* comm may be NULL. */
        ASSERT_EQ(process(d, 5, NULL), 0);
        ASSERT_STREQ(d->processes[0].comm, "[unknown]");
        ASSERT_NULL(d->processes[0].cmdline);
}

DEFINE_TEST_MAIN
