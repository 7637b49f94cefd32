/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <bpf/bpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "log.h"
#include "unwind-store.h"

typedef struct Extent {
        uint32_t start, len;
} Extent;

/* Free extents, sorted by start, coalesced. */
typedef struct FreeList {
        Extent *e;
        size_t n, allocated;
} FreeList;

typedef struct Shard {
        int fd; /* -1: not created */
        struct cgprof_unwind_cell *cells; /* mmap()ed */
        FreeList free;
} Shard;

struct UnwindStore {
        SamplerUnwindMaps maps;
        Shard *shards; /* maps.n_shards */
        size_t n_shards_created;
        struct cgprof_unwind_page *pages; /* the pages map, mmap()ed */
        struct cgprof_unwind_rule *rules; /* the rules map, mmap()ed */
        size_t pages_size, rules_size, shard_size; /* of the mappings */
        FreeList free_pages;
        size_t rules_written;
        size_t cells_used, pages_used;
};

/* ---- free lists ---- */

static int free_list_init(FreeList *l, uint32_t n) {
        l->e = calloc(1, sizeof(Extent));
        if (!l->e)
                return -ENOMEM;
        l->e[0] = (Extent){ .start = 0, .len = n };
        l->n = l->allocated = 1;
        return 0;
}

/* First fit: n at *ret. */
static int free_list_take(FreeList *l, uint32_t n, uint32_t *ret) {
        for (size_t i = 0; i < l->n; i++) {
                Extent *e = &l->e[i];
                if (e->len < n)
                        continue;
                *ret = e->start;
                e->start += n;
                e->len -= n;
                if (e->len == 0) {
                        memmove(e, e + 1, (l->n - i - 1) * sizeof(*e));
                        l->n--;
                }
                return 0;
        }
        return -ENOSPC;
}

static int free_list_give(FreeList *l, uint32_t start, uint32_t n) {
        size_t i = 0;

        if (n == 0)
                return 0;
        while (i < l->n && l->e[i].start < start)
                i++;
        bool prev = i > 0 && l->e[i - 1].start + l->e[i - 1].len == start;
        bool next = i < l->n && start + n == l->e[i].start;
        if (prev && next) {
                l->e[i - 1].len += n + l->e[i].len;
                memmove(&l->e[i], &l->e[i + 1], (l->n - i - 1) * sizeof(Extent));
                l->n--;
        } else if (prev)
                l->e[i - 1].len += n;
        else if (next) {
                l->e[i].start = start;
                l->e[i].len += n;
        } else {
                if (l->n == l->allocated) {
                        size_t na = MAX(l->allocated * 2, (size_t) 16);
                        Extent *a = reallocarray(l->e, na, sizeof(Extent));
                        if (!a)
                                return -ENOMEM; /* lost to this run: harmless */
                        l->e = a;
                        l->allocated = na;
                }
                memmove(&l->e[i + 1], &l->e[i], (l->n - i) * sizeof(Extent));
                l->e[i] = (Extent){ .start = start, .len = n };
                l->n++;
        }
        return 0;
}

/* The longest free extent. */
static uint32_t free_list_longest(const FreeList *l, size_t *ret_i) {
        uint32_t best = 0;

        for (size_t i = 0; i < l->n; i++)
                if (l->e[i].len > best) {
                        best = l->e[i].len;
                        *ret_i = i;
                }
        return best;
}

/* ---- shards ---- */

static int map_mmap(int fd, size_t size, void **ret) {
        void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

        if (p == MAP_FAILED)
                return negative_errno();
        *ret = p;
        return 0;
}

static size_t page_round(size_t n) {
        size_t page = (size_t) sysconf(_SC_PAGESIZE);
        return (n + page - 1) & ~(page - 1);
}

static int shard_create(UnwindStore *s, uint32_t i) {
        LIBBPF_OPTS(bpf_map_create_opts, opts, .map_flags = BPF_F_MMAPABLE);
        Shard *sh = &s->shards[i];
        _cleanup_close_ int fd = -EBADF;
        void *cells = NULL;
        int r;

        /* Two cells a value (bpf/unwind.h): through mmap(), an array of cells. */
        fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "unwind_shard", sizeof(uint32_t),
                            2 * sizeof(struct cgprof_unwind_cell), s->maps.shard_rows / 2, &opts);
        if (fd < 0)
                return fd;
        r = map_mmap(fd, s->shard_size, &cells);
        if (r < 0)
                return r;
        r = free_list_init(&sh->free, s->maps.shard_rows);
        if (r < 0) {
                munmap(cells, s->shard_size);
                return r;
        }
        /* Empty until a page points into it: in the outer map at once. */
        if (bpf_map_update_elem(s->maps.shards_fd, &i, &fd, BPF_ANY) < 0) {
                r = negative_errno();
                munmap(cells, s->shard_size);
                free(sh->free.e);
                sh->free = (FreeList){};
                return r;
        }
        sh->fd = TAKE_FD(fd);
        sh->cells = cells;
        s->n_shards_created++;
        log_debug("Unwind tables: shard %u created (%zu of at most %u).", i, s->n_shards_created,
                  s->maps.n_shards);
        return 0;
}

static void shard_destroy(UnwindStore *s, uint32_t i) {
        Shard *sh = &s->shards[i];

        if (sh->fd < 0)
                return;
        (void) bpf_map_delete_elem(s->maps.shards_fd, &i);
        munmap(sh->cells, s->shard_size);
        sh->fd = safe_close(sh->fd);
        sh->cells = NULL;
        free(sh->free.e);
        sh->free = (FreeList){};
        s->n_shards_created--;
        log_debug("Unwind tables: shard %u released (empty).", i);
}

static bool shard_empty(const UnwindStore *s, const Shard *sh) {
        return sh->fd >= 0 && sh->free.n == 1 && sh->free.e[0].len == s->maps.shard_rows;
}

/* An extent for cells from page p on: one that holds them all (up to a
 * shard's size), else a new shard, else the longest one that holds page
 * p. Its shard and free-list index into *ret_shard, *ret_i. */
static int extent_pick(UnwindStore *s, uint32_t all, uint32_t min, uint32_t *ret_shard, size_t *ret_i) {
        uint32_t want = MAX(MIN(all, s->maps.shard_rows), min), best = 0;
        int r;

        if (min > s->maps.shard_rows)
                return -ENOSPC; /* a page larger than a shard (a tiny budget) */

        for (uint32_t k = 0; k < s->maps.n_shards; k++) {
                Shard *sh = &s->shards[k];
                for (size_t i = 0; sh->fd >= 0 && i < sh->free.n; i++)
                        if (sh->free.e[i].len >= want) {
                                *ret_shard = k;
                                *ret_i = i;
                                return 0;
                        }
        }
        for (uint32_t k = 0; k < s->maps.n_shards; k++)
                if (s->shards[k].fd < 0) {
                        r = shard_create(s, k);
                        if (r < 0)
                                break;
                        *ret_shard = k;
                        *ret_i = 0;
                        return 0;
                }
        for (uint32_t k = 0; k < s->maps.n_shards; k++) {
                size_t i = 0;
                uint32_t len = s->shards[k].fd >= 0 ? free_list_longest(&s->shards[k].free, &i) : 0;
                if (len >= min && len > best) {
                        best = len;
                        *ret_shard = k;
                        *ret_i = i;
                }
        }
        return best > 0 ? 0 : -ENOSPC;
}

/* ---- tables ---- */

static void rules_sync(UnwindStore *s, const UnwindRules *rules) {
        size_t n = unwind_rules_count(rules);

        if (n > s->rules_written) {
                memcpy(s->rules + s->rules_written, unwind_rules_array(rules) + s->rules_written,
                       (n - s->rules_written) * sizeof(struct cgprof_unwind_rule));
                s->rules_written = n;
        }
}

static int placement_add(UnwindPlacement *p, uint32_t shard, uint32_t start, uint32_t len) {
        UnwindStoreExtent *a = reallocarray(p->extents, p->n_extents + 1, sizeof(*a));

        if (!a)
                return -ENOMEM;
        p->extents = a;
        p->extents[p->n_extents++] = (UnwindStoreExtent){ .shard = shard, .start = start, .len = len };
        return 0;
}

/* The cells of pages [p, ...) into one extent: as many whole pages as fit. */
static int put_chunk(UnwindStore *s, const UnwindCompact *c, size_t *p, UnwindPlacement *pl) {
        uint32_t all = (uint32_t) (c->n_cells - c->pages[*p].first), min = c->pages[*p].n;
        uint32_t shard, start, len = 0, taken;
        size_t i, q;
        int r;

        r = extent_pick(s, all, min, &shard, &i);
        if (r < 0)
                return r;
        taken = s->shards[shard].free.e[i].len;
        for (q = *p; q < c->n_pages && len + c->pages[q].n <= taken; q++)
                len += c->pages[q].n;
        if (len == 0)
                return -ENOSPC;
        r = free_list_take(&s->shards[shard].free, len, &start);
        if (r < 0)
                return r;
        r = placement_add(pl, shard, start, len);
        if (r < 0) {
                (void) free_list_give(&s->shards[shard].free, start, len);
                return r;
        }
        memcpy(s->shards[shard].cells + start, c->cells + c->pages[*p].first,
               len * sizeof(struct cgprof_unwind_cell));
        for (size_t k = *p; k < q; k++)
                s->pages[pl->first_page + k] = (struct cgprof_unwind_page){
                        .first = shard << CGPROF_UNWIND_SHARD_BITS |
                                 (start + (c->pages[k].first - c->pages[*p].first)),
                        .n = c->pages[k].n,
                };
        *p = q;
        return 0;
}

int unwind_store_put(UnwindStore *s, const UnwindCompact *c, const UnwindRules *rules,
                     UnwindPlacement *ret) {
        UnwindPlacement pl = {};
        int r;

        if (c->n_pages == 0 || c->n_pages > UINT32_MAX || c->n_cells > s->maps.n_rows - s->cells_used)
                return -ENOSPC;
        r = free_list_take(&s->free_pages, (uint32_t) c->n_pages, &pl.first_page);
        if (r < 0)
                return r;
        pl.n_pages = (uint32_t) c->n_pages;
        pl.n_cells = c->n_cells;
        s->pages_used += pl.n_pages;
        s->cells_used += pl.n_cells;

        rules_sync(s, rules);
        for (size_t p = 0; p < c->n_pages;) {
                r = put_chunk(s, c, &p, &pl);
                if (r < 0) {
                        unwind_store_release(s, &pl);
                        return r;
                }
        }
        /* The cells and pages in place before a table points at them. */
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        *ret = pl;
        return 0;
}

void unwind_store_release(UnwindStore *s, UnwindPlacement *p) {
        for (size_t i = 0; i < p->n_extents; i++) {
                UnwindStoreExtent *e = &p->extents[i];
                Shard *sh = &s->shards[e->shard];
                (void) free_list_give(&sh->free, e->start, e->len);
                if (shard_empty(s, sh))
                        shard_destroy(s, e->shard);
        }
        if (p->n_pages > 0) {
                (void) free_list_give(&s->free_pages, p->first_page, p->n_pages);
                s->pages_used -= p->n_pages;
                s->cells_used -= p->n_cells;
        }
        free(p->extents);
        *p = (UnwindPlacement){};
}

int unwind_store_rule(const UnwindStore *s, const UnwindPlacement *p, uint32_t rel,
                      struct cgprof_unwind_rule *ret) {
        uint32_t pg = rel >> CGPROF_UNWIND_PAGE_SHIFT, first, shard;
        const struct cgprof_unwind_cell *cell;
        const struct cgprof_unwind_page *page;
        uint16_t pc = (uint16_t) (rel & 0xffff);

        if (pg >= p->n_pages)
                return -ENOENT;
        page = &s->pages[p->first_page + pg];
        shard = page->first >> CGPROF_UNWIND_SHARD_BITS;
        first = page->first & ((1u << CGPROF_UNWIND_SHARD_BITS) - 1);
        if (page->n == 0 || shard >= s->maps.n_shards || !s->shards[shard].cells)
                return -ENOENT;
        cell = unwind_cells_find(s->shards[shard].cells + first, page->n, pc);
        if (cell->rule_id >= s->rules_written)
                return -ENOENT;
        *ret = s->rules[cell->rule_id];
        return 0;
}

void unwind_store_stats(const UnwindStore *s, UnwindStoreStats *ret) {
        *ret = (UnwindStoreStats){
                .cells_used = s->cells_used,
                .cells_max = s->maps.n_rows,
                .shards = s->n_shards_created,
                .shards_max = s->maps.n_shards,
                .shard_cells = s->maps.shard_rows,
                .pages_used = s->pages_used,
                .pages_max = s->maps.n_pages,
                .rules = s->rules_written,
                .bytes_used = (uint64_t) s->n_shards_created * s->maps.shard_rows *
                              sizeof(struct cgprof_unwind_cell),
                .bytes_budget = (uint64_t) s->maps.n_rows * sizeof(struct cgprof_unwind_cell),
                .bytes_fixed = (uint64_t) s->maps.n_pages * sizeof(struct cgprof_unwind_page) +
                               (uint64_t) CGPROF_UNWIND_RULES_MAX * sizeof(struct cgprof_unwind_rule),
        };
}

int unwind_store_new(const SamplerUnwindMaps *maps, UnwindStore **ret) {
        _cleanup_(unwind_store_freep) UnwindStore *s = NULL;
        void *p;
        int r;

        if (maps->n_shards == 0 || maps->shard_rows == 0 ||
            maps->shard_rows > (1u << CGPROF_UNWIND_SHARD_BITS))
                return -EINVAL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->maps = *maps;
        s->shards = calloc(maps->n_shards, sizeof(Shard));
        if (!s->shards)
                return -ENOMEM;
        for (uint32_t i = 0; i < maps->n_shards; i++)
                s->shards[i].fd = -EBADF;
        s->shard_size = page_round((size_t) maps->shard_rows * sizeof(struct cgprof_unwind_cell));
        s->pages_size = page_round((size_t) maps->n_pages * sizeof(struct cgprof_unwind_page));
        s->rules_size = page_round((size_t) CGPROF_UNWIND_RULES_MAX * sizeof(struct cgprof_unwind_rule));
        r = map_mmap(maps->pages_fd, s->pages_size, &p);
        if (r < 0)
                return r;
        s->pages = p;
        r = map_mmap(maps->rules_fd, s->rules_size, &p);
        if (r < 0)
                return r;
        s->rules = p;
        s->rules_written = 1; /* NONE: all zero already */
        r = free_list_init(&s->free_pages, maps->n_pages);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

UnwindStore *unwind_store_free(UnwindStore *s) {
        if (!s)
                return NULL;
        for (uint32_t i = 0; s->shards && i < s->maps.n_shards; i++)
                shard_destroy(s, i);
        free(s->shards);
        if (s->pages)
                munmap(s->pages, s->pages_size);
        if (s->rules)
                munmap(s->rules, s->rules_size);
        free(s->free_pages.e);
        free(s);
        return NULL;
}
