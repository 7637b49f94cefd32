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

/* ---- late resolution ---- */

typedef struct FakeSymbols {
        pid_t pid; /* resolves for this process only */
        int error; /* returned instead, when set */
        unsigned calls;
} FakeSymbols;

/* 0x2000..0x21ff is "hot", 0x2200.. is "warm" (both in "app"), in process fs->pid. */
static int fake_resolve(void *userdata, uint32_t process, const ProfileLocation *location,
                        ProfileFrameName *ret) {
        FakeSymbols *fs = userdata;
        (void) process;

        fs->calls++;
        if (fs->error)
                return fs->error;
        if (location->address >= 0x2000 && location->address < 0x2200) {
                *ret = (ProfileFrameName){ .name = "hot", .module = "app", .kind = FRAME_USER };
                return 1;
        }
        if (location->address >= 0x2200 && location->address < 0x2300) {
                *ret = (ProfileFrameName){ .name = "warm", .module = "app", .kind = FRAME_USER };
                return 1;
        }
        return 0;
}

static int fake_resolve_pid(void *userdata, uint32_t process, const ProfileLocation *location,
                            ProfileFrameName *ret) {
        /* Only process 0 of the fixture has the symbols. */
        if (process != 0) {
                ((FakeSymbols *) userdata)->calls++;
                return 0;
        }
        return fake_resolve(userdata, process, location, ret);
}

static uint32_t location(ProfileData *d, uint64_t addr, uint32_t mapping, uint32_t frame) {
        uint32_t i = UINT32_MAX;

        ASSERT_OK(profile_data_intern_location(d, addr, mapping, frame, &i));
        return i;
}

static void add_full(ProfileData *d, uint32_t p, uint64_t count, size_t n, const uint32_t *locations) {
        uint32_t frames[16];

        ASSERT_TRUE(n <= ELEMENTSOF(frames));
        for (size_t i = 0; i < n; i++)
                frames[i] = d->locations[locations[i]].frame;
        ASSERT_OK(profile_data_add_stack_full(d, p, frames, locations, n, false, count));
}

/* The stack of process p whose leaf location has this address (NULL: none). */
static const ProfileStack *stack_with_leaf(const ProfileData *d, uint32_t p, uint64_t leaf,
                                           size_t n_frames) {
        for (size_t i = 0; i < d->n_stacks; i++) {
                const ProfileStack *st = &d->stacks[i];
                if (st->process == p && st->n_frames == n_frames && st->locations &&
                    d->locations[st->locations[n_frames - 1]].address == leaf)
                        return st;
        }
        return NULL;
}

TEST(relocate) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new(), *n = NULL;
        uint32_t p1, p2, app, kern, main_f, hot, unknown, kunknown, l_main, l_hot, l_u1, l_u2, l_u3, l_u4,
                l_k;
        ProfileRelocateStats st;
        FakeSymbols fs = {};

        p1 = process(d, 100, "app");
        p2 = process(d, 200, "app");
        ASSERT_OK(profile_data_intern_mapping(d, "/bin/app", 0x1000, 0x9000, 0, "abcd", false, &app));
        ASSERT_OK(profile_data_intern_mapping(d, "[kernel.kallsyms]", 0xffff800000000000, UINT64_MAX, 0,
                                              NULL, true, &kern));
        ASSERT_OK(profile_data_mapping_set_symbols(d, app, "dynsym (debuginfod pending)"));
        ASSERT_OK(profile_data_mapping_set_unwind_table(d, app, "eh_frame"));
        d->mappings[app].fp_frames = 7;
        main_f = frame(d, "main", "app", FRAME_USER);
        hot = frame(d, "hot", "app", FRAME_USER);
        unknown = frame(d, "[app]", "app", FRAME_UNKNOWN);
        kunknown = frame(d, "[kernel]", "[kernel.kallsyms]", FRAME_UNKNOWN);
        (void) frame(d, "orphan", "app", FRAME_USER); /* in no stack: not copied */
        l_main = location(d, 0x1500, app, main_f);
        l_hot = location(d, 0x2000, app, hot); /* resolved in a later drain */
        l_u1 = location(d, 0x2000, app, unknown); /* the same address, before the symbols came */
        l_u2 = location(d, 0x2100, app, unknown);
        l_u3 = location(d, 0x5000, app, unknown); /* never resolves */
        l_u4 = location(d, 0x2200, app, unknown);
        l_k = location(d, 0xffff800000001000, kern, kunknown);

        add_full(d, p1, 3, 2, (uint32_t[]){ l_main, l_u1 }); /* A: becomes B */
        add_full(d, p1, 4, 2, (uint32_t[]){ l_main, l_hot }); /* B */
        add_full(d, p1, 2, 2, (uint32_t[]){ l_main, l_u2 }); /* C: "hot", another address */
        add_full(d, p1, 5, 2, (uint32_t[]){ l_main, l_u3 }); /* D: stays */
        add_full(d, p2, 1, 3, (uint32_t[]){ l_main, l_u1, l_k }); /* E: p2 has no symbols; kernel stays */
        add_full(d, p1, 6, 3, (uint32_t[]){ l_main, l_u1, l_u4 }); /* F: both frames resolve */
        add(d, p1, 8, 2, main_f, unknown); /* G: no locations, no address: stays */
        ASSERT_EQ(d->n_stacks, 7);
        ASSERT_EQ(profile_data_total(d), 29);

        ASSERT_OK(profile_data_relocate(d, fake_resolve_pid, &fs, &n, &st));
        ASSERT_NOT_NULL(n);
        /* Unresolved user frames with a location: A 3, C 2, D 5, E 1, F 6+6. */
        ASSERT_EQ(st.candidates, 23);
        ASSERT_EQ(st.resolved, 3 + 2 + 12);
        /* Once to find that something resolves (u1, at once), then once per
         * location while the process stays the same: u1 (A), u2, u3, u1 for
         * p2 (E), u1 for p1 again (F), u4. */
        ASSERT_EQ(fs.calls, 7);
        ASSERT_EQ(st.calls, 7);
        ASSERT_EQ(st.locations_resolved, 3);
        ASSERT_EQ(st.stacks_before, 7);
        ASSERT_EQ(st.stacks_after, 6); /* A merged into B */

        /* Counts and processes add up as before. */
        ASSERT_EQ(profile_data_total(n), 29);
        ASSERT_EQ(n->n_processes, 2);
        ASSERT_EQ(n->processes[p1].pid, 100);
        ASSERT_EQ(n->processes[p1].samples, 28);
        ASSERT_EQ(n->processes[p2].samples, 1);
        /* Mappings keep their index and what they carry. */
        ASSERT_EQ(n->n_mappings, 2);
        ASSERT_STREQ(n->mappings[app].file, "/bin/app");
        ASSERT_STREQ(n->mappings[app].build_id, "abcd");
        ASSERT_STREQ(n->mappings[app].symbols, "dynsym (debuginfod pending)");
        ASSERT_STREQ(n->mappings[app].unwind_table, "eh_frame");
        ASSERT_EQ(n->mappings[app].fp_frames, 7);
        ASSERT_TRUE(n->mappings[kern].kernel);

        const ProfileStack *b = stack_with_leaf(n, p1, 0x2000, 2);
        ASSERT_NOT_NULL(b);
        ASSERT_EQ(b->count, 7);
        ASSERT_STREQ(n->frames[b->frames[1]].name, "hot");
        ASSERT_EQ(n->frames[b->frames[1]].kind, FRAME_USER);
        const ProfileStack *c = stack_with_leaf(n, p1, 0x2100, 2);
        ASSERT_NOT_NULL(c);
        ASSERT_EQ(c->count, 2);
        ASSERT_EQ(c->frames[1], b->frames[1]); /* one function, two locations */
        ASSERT_TRUE(c->locations[1] != b->locations[1]);
        const ProfileStack *dd = stack_with_leaf(n, p1, 0x5000, 2);
        ASSERT_NOT_NULL(dd);
        ASSERT_EQ(dd->count, 5);
        ASSERT_STREQ(n->frames[dd->frames[1]].name, "[app]");
        ASSERT_EQ(n->frames[dd->frames[1]].kind, FRAME_UNKNOWN);
        const ProfileStack *e = stack_with_leaf(n, p2, 0xffff800000001000, 3);
        ASSERT_NOT_NULL(e);
        ASSERT_STREQ(n->frames[e->frames[1]].name, "[app]");
        ASSERT_STREQ(n->frames[e->frames[2]].name, "[kernel]");
        ASSERT_EQ(n->locations[e->locations[1]].address, 0x2000);
        const ProfileStack *f = stack_with_leaf(n, p1, 0x2200, 3);
        ASSERT_NOT_NULL(f);
        ASSERT_EQ(f->count, 6);
        ASSERT_STREQ(n->frames[f->frames[1]].name, "hot");
        ASSERT_STREQ(n->frames[f->frames[2]].name, "warm");
        ASSERT_EQ(f->locations[1], b->locations[1]);
        bool found_g = false;
        for (size_t i = 0; i < n->n_stacks; i++)
                if (!n->stacks[i].locations) {
                        ASSERT_EQ(n->stacks[i].count, 8);
                        ASSERT_EQ(n->frames[n->stacks[i].frames[1]].kind, FRAME_UNKNOWN);
                        found_g = true;
                }
        ASSERT_TRUE(found_g);

        /* Only what the stacks use is copied: no "orphan", and the unknown
         * location at 0x2000 only for p2's stack. */
        for (size_t i = 0; i < n->n_frames; i++)
                ASSERT_FALSE(streq(n->frames[i].name, "orphan"));
        ASSERT_EQ(n->n_frames, 5); /* main, hot, warm, [app], [kernel] */
        /* main, hot at 0x2000 and 0x2100, warm, [app] at 0x5000 and 0x2000, [kernel] */
        ASSERT_EQ(n->n_locations, 7);

        /* The top functions see the merge. */
        _cleanup_free_ TopFunction *top = NULL;
        size_t n_top;
        ASSERT_OK(profile_data_top_functions(n, 0, &top, &n_top));
        ASSERT_EQ(n_top, 5);
        for (size_t i = 0; i < n_top; i++)
                if (streq(n->frames[top[i].frame].name, "hot")) {
                        ASSERT_EQ(top[i].self, 9); /* B with A, C */
                        ASSERT_EQ(top[i].total, 15); /* and F */
                }
}

/* JIT code in anonymous memory has a location in no mapping: a perf map
 * written later names it. */
static int fake_resolve_jit(void *userdata, uint32_t process, const ProfileLocation *location,
                            ProfileFrameName *ret) {
        ((FakeSymbols *) userdata)->calls++;
        if (location->mapping != PROFILE_NONE || location->address != 0x7f0000001000)
                return 0;
        *ret = (ProfileFrameName){ .name = "LazyCompile:*hot", .module = "[JIT]", .kind = FRAME_USER };
        return 1;
}

TEST(relocate_jit) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new(), *n = NULL;
        uint32_t p, app, main_f, unknown, l_main, l_jit, l_other;
        ProfileRelocateStats st;
        FakeSymbols fs = {};

        p = process(d, 100, "node");
        ASSERT_OK(profile_data_intern_mapping(d, "/usr/bin/node", 0x1000, 0x9000, 0, NULL, false, &app));
        main_f = frame(d, "main", "node", FRAME_USER);
        unknown = frame(d, "[unknown]", NULL, FRAME_UNKNOWN);
        l_main = location(d, 0x1500, app, main_f);
        l_jit = location(d, 0x7f0000001000, PROFILE_NONE, unknown);
        l_other = location(d, 0x7f0000009000, PROFILE_NONE, unknown);
        add_full(d, p, 4, 2, (uint32_t[]){ l_main, l_jit });
        add_full(d, p, 1, 2, (uint32_t[]){ l_main, l_other });

        ASSERT_OK(profile_data_relocate(d, fake_resolve_jit, &fs, &n, &st));
        ASSERT_NOT_NULL(n);
        ASSERT_EQ(st.candidates, 5);
        ASSERT_EQ(st.resolved, 4);
        const ProfileStack *j = stack_with_leaf(n, p, 0x7f0000001000, 2);
        ASSERT_NOT_NULL(j);
        ASSERT_STREQ(n->frames[j->frames[1]].name, "LazyCompile:*hot");
        ASSERT_EQ(n->locations[j->locations[1]].mapping, PROFILE_NONE);
        const ProfileStack *o = stack_with_leaf(n, p, 0x7f0000009000, 2);
        ASSERT_NOT_NULL(o);
        ASSERT_EQ(n->frames[o->frames[1]].kind, FRAME_UNKNOWN);
}

TEST(relocate_nothing) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new(), *n = NULL;
        uint32_t p, app, main_f, unknown, l_main, l_u;
        ProfileRelocateStats st;
        FakeSymbols fs = {};

        /* No unresolved frame: nothing is asked or copied. */
        p = process(d, 100, "app");
        ASSERT_OK(profile_data_intern_mapping(d, "/bin/app", 0x1000, 0x9000, 0, NULL, false, &app));
        main_f = frame(d, "main", "app", FRAME_USER);
        l_main = location(d, 0x1500, app, main_f);
        add_full(d, p, 3, 1, (uint32_t[]){ l_main });
        n = (ProfileData *) 1;
        ASSERT_OK(profile_data_relocate(d, fake_resolve, &fs, &n, &st));
        ASSERT_NULL(n);
        ASSERT_EQ(fs.calls, 0);
        ASSERT_EQ(st.candidates, 0);
        ASSERT_EQ(st.stacks_before, 1);

        /* Unresolved frames that stay so: asked, nothing returned. */
        unknown = frame(d, "[app]", "app", FRAME_UNKNOWN);
        l_u = location(d, 0x7000, app, unknown);
        add_full(d, p, 2, 2, (uint32_t[]){ l_main, l_u });
        add_full(d, p, 2, 3, (uint32_t[]){ l_main, l_u, l_u });
        n = (ProfileData *) 1;
        ASSERT_OK(profile_data_relocate(d, fake_resolve, &fs, &n, &st));
        ASSERT_NULL(n);
        ASSERT_EQ(fs.calls, 1);
        ASSERT_EQ(st.candidates, 6);
        ASSERT_EQ(st.resolved, 0);

        /* Errors of the resolver are returned. */
        fs.error = -EIO;
        ASSERT_ERROR(profile_data_relocate(d, fake_resolve, &fs, &n, NULL), EIO);
        ASSERT_ERROR(profile_data_relocate(NULL, fake_resolve, &fs, &n, NULL), EINVAL);
        ASSERT_ERROR(profile_data_relocate(d, NULL, &fs, &n, NULL), EINVAL);
        ASSERT_NULL(n); /* untouched on failure */

        /* update_symbols replaces, set_symbols keeps. */
        ASSERT_OK(profile_data_mapping_set_symbols(d, app, "dynsym"));
        ASSERT_OK(profile_data_mapping_set_symbols(d, app, "symtab"));
        ASSERT_STREQ(d->mappings[app].symbols, "dynsym");
        ASSERT_OK(profile_data_mapping_update_symbols(d, app, "debuginfod"));
        ASSERT_STREQ(d->mappings[app].symbols, "debuginfod");
        ASSERT_ERROR(profile_data_mapping_update_symbols(d, 9, "x"), EINVAL);
}

DEFINE_TEST_MAIN
