/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The unwind store (agent/sampling/unwind-store.c) on real BPF maps of its
 * own (the sampler's layout: shards of two cells a value in an array of
 * maps, pages, rules of two a value): tables put in read back through the
 * maps' mmap() the rules their compact form gives, at every row boundary;
 * a table larger than a shard spreads over several, no page split; the
 * budget is kept (-ENOSPC, nothing kept); released tables give their space
 * back and empty shards go. Needs BPF (root): skips without. */
#include <bpf/bpf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "tests.h"
#include "unwind-store.h"

#define SHARD_CELLS 4096
#define N_SHARDS 3

typedef struct Maps {
        SamplerUnwindMaps m;
        int inner_fd;
} Maps;

static void maps_close(Maps *x) {
        safe_close(x->m.shards_fd);
        safe_close(x->m.pages_fd);
        safe_close(x->m.rules_fd);
        safe_close(x->inner_fd);
}

static int maps_create(Maps *x) {
        LIBBPF_OPTS(bpf_map_create_opts, mm, .map_flags = BPF_F_MMAPABLE);
        LIBBPF_OPTS(bpf_map_create_opts, outer);

        *x = (Maps){ .m = { .shards_fd = -EBADF, .pages_fd = -EBADF, .rules_fd = -EBADF },
                     .inner_fd = -EBADF };
        x->inner_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "t_inner", 4, 8, SHARD_CELLS / 2, &mm);
        if (x->inner_fd < 0)
                return x->inner_fd;
        outer.inner_map_fd = x->inner_fd;
        x->m.shards_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY_OF_MAPS, "t_shards", 4, 4, N_SHARDS, &outer);
        x->m.pages_fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "t_pages", 4, 8, 4096, &mm);
        x->m.rules_fd =
                bpf_map_create(BPF_MAP_TYPE_ARRAY, "t_rules", 4, 8, CGPROF_UNWIND_RULES_MAX / 2, &mm);
        if (x->m.shards_fd < 0 || x->m.pages_fd < 0 || x->m.rules_fd < 0)
                return -EPERM;
        x->m.n_rows = SHARD_CELLS * N_SHARDS;
        x->m.shard_rows = SHARD_CELLS;
        x->m.n_shards = N_SHARDS;
        x->m.n_pages = 4096;
        return 0;
}

/* A table of n rows, step bytes apart, cycling through a few rules. */
static UnwindTable *table_make(size_t n, uint32_t step, unsigned salt) {
        UnwindTable *t = calloc(1, sizeof(*t));

        ASSERT_NOT_NULL(t);
        t->rows = calloc(n, sizeof(*t->rows));
        ASSERT_NOT_NULL(t->rows);
        t->n_rows = n;
        t->base = 0x1000;
        for (size_t i = 0; i < n; i++)
                t->rows[i] = (struct cgprof_unwind_row){
                        .pc = (uint32_t) i * step,
                        .rule = i + 1 == n ? 0 : CGPROF_UNWIND_RULE(CGPROF_CFA_SP, CGPROF_FP_SAME),
                        .cfa_offset = i + 1 == n ? 0 : (uint16_t) (8 + 8 * ((i + salt) % 5)),
                };
        t->end = t->base + t->rows[n - 1].pc;
        return t;
}

static void check_readback(UnwindStore *s, const UnwindPlacement *p, const UnwindCompact *c,
                           const UnwindRules *rules, const UnwindTable *t) {
        for (size_t i = 0; i < t->n_rows; i++)
                for (int d = 0; d <= 1; d++) {
                        uint32_t rel = t->rows[i].pc + (uint32_t) d;
                        const struct cgprof_unwind_rule *want =
                                unwind_rules_get(rules, unwind_compact_lookup(c, t->base + rel));
                        struct cgprof_unwind_rule got;

                        if (rel >> CGPROF_UNWIND_PAGE_SHIFT >= c->n_pages)
                                continue;
                        ASSERT_OK(unwind_store_rule(s, p, rel, &got));
                        ASSERT_EQ(got.rule, want->rule);
                        ASSERT_EQ(got.cfa_offset, want->cfa_offset);
                        ASSERT_EQ(got.fp_offset, want->fp_offset);
                }
}

TEST(put_read_release) {
        _cleanup_(unwind_rules_freep) UnwindRules *rules = NULL;
        _cleanup_(unwind_store_freep) UnwindStore *s = NULL;
        UnwindCompact *c[3] = {};
        UnwindTable *t[3] = {};
        UnwindPlacement p[3] = {};
        UnwindStoreStats st;
        Maps m;
        int r;

        r = maps_create(&m);
        if (r < 0) {
                maps_close(&m);
                return TEST_SKIP("cannot create BPF maps: %s", strerror(-r));
        }
        ASSERT_OK(unwind_rules_new(&rules));
        ASSERT_OK(unwind_store_new(&m.m, &s));

        /* 6,000 rows 16 bytes apart: 6,000 cells over 2 pages, 2 shards. */
        t[0] = table_make(6000, 16, 0);
        /* 3,000 rows 64 bytes apart: 3 pages, in what is left. */
        t[1] = table_make(3000, 64, 1);
        /* 4,000 more: over the budget of 12,288 cells. */
        t[2] = table_make(4000, 16, 2);
        for (int i = 0; i < 3; i++)
                ASSERT_OK(unwind_compact_build(t[i], rules, &c[i]));

        ASSERT_OK(unwind_store_put(s, c[0], rules, &p[0]));
        ASSERT_TRUE(p[0].n_extents >= 2); /* larger than a shard */
        unwind_store_stats(s, &st);
        ASSERT_EQ(st.cells_used, c[0]->n_cells);
        ASSERT_EQ(st.shards, 2);
        ASSERT_EQ(st.bytes_used, 2 * SHARD_CELLS * 4);
        check_readback(s, &p[0], c[0], rules, t[0]);

        ASSERT_OK(unwind_store_put(s, c[1], rules, &p[1]));
        check_readback(s, &p[1], c[1], rules, t[1]);
        check_readback(s, &p[0], c[0], rules, t[0]);

        ASSERT_EQ(unwind_store_put(s, c[2], rules, &p[2]), -ENOSPC);
        unwind_store_stats(s, &st);
        ASSERT_EQ(st.cells_used, c[0]->n_cells + c[1]->n_cells);
        ASSERT_TRUE(st.shards <= N_SHARDS);
        ASSERT_TRUE(st.bytes_used <= st.bytes_budget);

        /* The first out: the third fits now. */
        unwind_store_release(s, &p[0]);
        ASSERT_OK(unwind_store_put(s, c[2], rules, &p[2]));
        check_readback(s, &p[2], c[2], rules, t[2]);
        check_readback(s, &p[1], c[1], rules, t[1]);

        unwind_store_release(s, &p[1]);
        unwind_store_release(s, &p[2]);
        unwind_store_stats(s, &st);
        ASSERT_EQ(st.cells_used, 0);
        ASSERT_EQ(st.pages_used, 0);
        ASSERT_EQ(st.shards, 0); /* empty shards are released */
        ASSERT_TRUE(st.rules >= 6);

        for (int i = 0; i < 3; i++) {
                unwind_compact_free(c[i]);
                free(t[i]->rows);
                free(t[i]);
        }
        s = unwind_store_free(s);
        maps_close(&m);
}

DEFINE_TEST_MAIN
