/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* JIT symbols (see jit-map.h for the model).
 *
 * Symbols live in one array in the order they were added (index order is
 * age order, compaction keeps it), the live ones first, then the pending
 * ones. Segments are sorted, disjoint ranges pointing at the symbol that
 * owns them. A commit sweeps the old segments (disjoint, all older than any
 * pending entry) together with the pending entries, sorted by start, with a
 * max-heap of the ranges active at the sweep position keyed by age: the
 * youngest active range owns the address space up to the next start or its
 * own end. Symbols left without a segment are freed. */

#include "jit-map.h"

typedef struct JitSymbol {
        uint64_t start, end;
        char *name;
} JitSymbol;

typedef struct JitSegment {
        uint64_t start, end;
        uint32_t sym;
} JitSegment;

struct JitMap {
        size_t max_entries;
        JitSymbol *syms; /* n_syms live, then n_pending pending */
        size_t n_syms, n_pending, n_alloc;
        JitSegment *segs;
        size_t n_segs, n_segs_alloc;
        uint64_t dropped;
        bool full; /* a commit could not make room: drop without committing again */
};

int jit_map_new(size_t max_entries, JitMap **ret) {
        JitMap *m;

        if (!ret)
                return -EINVAL;
        m = calloc(1, sizeof(JitMap));
        if (!m)
                return -ENOMEM;
        m->max_entries =
                max_entries > 0 ? MIN(max_entries, (size_t) UINT32_MAX / 2) : JIT_MAP_MAX_ENTRIES_DEFAULT;
        *ret = m;
        return 0;
}

JitMap *jit_map_free(JitMap *m) {
        if (!m)
                return NULL;
        for (size_t i = 0; i < m->n_syms + m->n_pending; i++)
                free(m->syms[i].name);
        free(m->syms);
        free(m->segs);
        free(m);
        return NULL;
}

/* Takes name (also on failure). */
static int add_owned(JitMap *m, uint64_t start, uint64_t end, char *name) {
        size_t n = m->n_syms + m->n_pending;

        if (n >= m->max_entries && !m->full) {
                int r = jit_map_commit(m); /* overwritten entries make room */
                if (r < 0) {
                        free(name);
                        return r;
                }
                n = m->n_syms;
                m->full = n >= m->max_entries;
        }
        if (n >= m->max_entries) {
                free(name);
                m->dropped++;
                return -E2BIG;
        }
        if (GREEDY_REALLOC(m->syms, m->n_alloc, n + 1, 64) < 0) {
                free(name);
                return -ENOMEM;
        }
        m->syms[n] = (JitSymbol){ .start = start, .end = end, .name = name };
        m->n_pending++;
        return 0;
}

int jit_map_add(JitMap *m, uint64_t start, uint64_t size, const char *name, size_t name_len) {
        char *copy;

        if (!m || !name)
                return -EINVAL;
        if (size == 0 || start > UINT64_MAX - size || name_len == 0 || name[0] == '\0')
                return -EINVAL;

        name_len = strnlen(name, MIN(name_len, (size_t) JIT_MAP_NAME_MAX));
        copy = strndup(name, name_len);
        if (!copy)
                return -ENOMEM;
        return add_owned(m, start, start + size, copy);
}

static const JitSegment *segment_find(const JitMap *m, uint64_t addr) {
        /* First segment starting above addr; the one before may hold it. */
        size_t lo = SORTED_UPPER_BOUND(m->segs, m->n_segs, _e->start, addr);

        if (lo == 0 || addr >= m->segs[lo - 1].end)
                return NULL;
        return &m->segs[lo - 1];
}

int jit_map_move(JitMap *m, uint64_t old_start, uint64_t new_start, uint64_t size) {
        const JitSegment *seg;
        char *name;
        int r;

        if (!m)
                return -EINVAL;
        if (size == 0 || new_start > UINT64_MAX - size)
                return -EINVAL;
        r = jit_map_commit(m);
        if (r < 0)
                return r;
        seg = segment_find(m, old_start);
        if (!seg || m->syms[seg->sym].start != old_start)
                return -ENOENT;
        name = strdup(m->syms[seg->sym].name);
        if (!name)
                return -ENOMEM;
        return add_owned(m, new_start, new_start + size, name);
}

/* ---- commit ---- */

static int item_compare(const void *a, const void *b) {
        const JitSegment *x = a, *y = b;
        int r = CMP(x->start, y->start);

        return r != 0 ? r : CMP(x->sym, y->sym);
}

/* The ranges active at the sweep position: a binary max-heap by symbol age
 * (younger: larger index), grown as needed (it holds as many ranges as
 * overlap at one address, not the table). */
typedef struct Heap {
        JitSegment *items;
        size_t n, n_alloc;
} Heap;

static int heap_push(Heap *h, JitSegment it) {
        size_t i;

        if (GREEDY_REALLOC(h->items, h->n_alloc, h->n + 1, 16) < 0)
                return -ENOMEM;
        for (i = h->n++; i > 0;) {
                size_t parent = (i - 1) / 2;

                if (h->items[parent].sym >= it.sym)
                        break;
                h->items[i] = h->items[parent];
                i = parent;
        }
        h->items[i] = it;
        return 0;
}

static void heap_pop(Heap *h) {
        JitSegment last = h->items[--h->n];
        size_t i = 0;

        for (;;) {
                size_t c = 2 * i + 1;

                if (c >= h->n)
                        break;
                if (c + 1 < h->n && h->items[c + 1].sym > h->items[c].sym)
                        c++;
                if (h->items[c].sym <= last.sym)
                        break;
                h->items[i] = h->items[c];
                i = c;
        }
        if (h->n > 0)
                h->items[i] = last;
}

typedef struct Output {
        JitSegment *segs;
        size_t n, n_alloc;
} Output;

static int emit(Output *o, uint64_t start, uint64_t end, uint32_t sym) {
        if (o->n > 0 && o->segs[o->n - 1].end == start && o->segs[o->n - 1].sym == sym) {
                o->segs[o->n - 1].end = end;
                return 0;
        }
        if (GREEDY_REALLOC(o->segs, o->n_alloc, o->n + 1, 64) < 0)
                return -ENOMEM;
        o->segs[o->n++] = (JitSegment){ .start = start, .end = end, .sym = sym };
        return 0;
}

/* The next range by start: the old segments and the sorted pending ones
 * merged (both sorted already: linear in the table). */
static const JitSegment *next_item(const JitMap *m, const JitSegment *pending, size_t *a, size_t *b) {
        if (*b < m->n_pending && (*a >= m->n_segs || pending[*b].start < m->segs[*a].start))
                return &pending[(*b)++];
        if (*a < m->n_segs)
                return &m->segs[(*a)++];
        return NULL;
}

/* The common case: new code in memory no other code used (sorted pending
 * ranges, disjoint from each other and from the segments). The pending
 * ranges are merged into the segments in place, from the end, and no symbol
 * dies. -EAGAIN when it is not that case. */
static int commit_disjoint(JitMap *m, const JitSegment *pending) {
        size_t a, b, k, need = m->n_segs + m->n_pending;

        for (b = 0; b < m->n_pending; b++) {
                const JitSegment *seg;
                size_t lo;

                if (b > 0 && pending[b].start < pending[b - 1].end)
                        return -EAGAIN;
                /* The first segment ending after the start must begin at
                 * or after the end. */
                lo = SORTED_UPPER_BOUND(m->segs, m->n_segs, _e->end, pending[b].start);
                seg = lo < m->n_segs ? &m->segs[lo] : NULL;
                if (seg && seg->start < pending[b].end)
                        return -EAGAIN;
        }

        if (need > m->n_segs_alloc) {
                size_t na = MAX(need, m->n_segs_alloc + m->n_segs_alloc / 2);
                JitSegment *g = reallocarray(m->segs, na, sizeof(JitSegment));

                if (!g)
                        return -ENOMEM;
                m->segs = g;
                m->n_segs_alloc = na;
        }
        for (a = m->n_segs, b = m->n_pending, k = need; b > 0;) {
                if (a > 0 && m->segs[a - 1].start > pending[b - 1].start)
                        m->segs[--k] = m->segs[--a];
                else
                        m->segs[--k] = pending[--b];
        }
        m->n_segs = need;
        m->n_syms += m->n_pending;
        m->n_pending = 0;
        m->full = false;
        return 0;
}

int jit_map_commit(JitMap *m) {
        _cleanup_free_ JitSegment *pending = NULL;
        _cleanup_free_ uint32_t *remap = NULL;
        _cleanup_free_ JitSegment *heap_items = NULL;
        Heap h = {};
        Output o = {};
        const JitSegment *it;
        size_t n_all, a = 0, b = 0, live = 0;
        uint64_t pos = 0;
        int r = 0;

        if (!m)
                return -EINVAL;
        if (m->n_pending == 0)
                return 0;

        n_all = m->n_syms + m->n_pending;
        pending = reallocarray(NULL, m->n_pending, sizeof(JitSegment));
        if (!pending)
                return -ENOMEM;
        for (size_t k = 0; k < m->n_pending; k++) {
                const JitSymbol *s = &m->syms[m->n_syms + k];

                pending[k] =
                        (JitSegment){ .start = s->start, .end = s->end, .sym = (uint32_t) (m->n_syms + k) };
        }
        qsort(pending, m->n_pending, sizeof(JitSegment), item_compare);
        r = commit_disjoint(m, pending);
        if (r != -EAGAIN)
                return r;
        r = 0;

        remap = reallocarray(NULL, n_all, sizeof(uint32_t));
        /* Owners change only at old starts and pending starts and ends. */
        o.n_alloc = m->n_segs + 2 * m->n_pending + 1;
        o.segs = reallocarray(NULL, o.n_alloc, sizeof(JitSegment));
        if (!remap || !o.segs) {
                free(o.segs);
                return -ENOMEM;
        }

        /* The youngest range active at pos owns [pos, the next boundary). */
        it = next_item(m, pending, &a, &b);
        while (it || h.n > 0) {
                uint64_t next;

                if (h.n == 0)
                        pos = it->start;
                for (; it && it->start <= pos; it = next_item(m, pending, &a, &b)) {
                        r = heap_push(&h, *it);
                        if (r < 0)
                                goto fail;
                }
                while (h.n > 0 && h.items[0].end <= pos)
                        heap_pop(&h);
                if (h.n == 0)
                        continue;
                next = h.items[0].end;
                if (it && it->start < next)
                        next = it->start;
                r = emit(&o, pos, next, h.items[0].sym);
                if (r < 0)
                        goto fail;
                pos = next;
        }
        heap_items = h.items;

        /* Keep the symbols some segment uses, in age order. */
        for (size_t k = 0; k < n_all; k++)
                remap[k] = UINT32_MAX;
        for (size_t k = 0; k < o.n; k++)
                remap[o.segs[k].sym] = 0;
        for (size_t k = 0; k < n_all; k++) {
                if (remap[k] == UINT32_MAX) {
                        free(m->syms[k].name);
                        continue;
                }
                m->syms[live] = m->syms[k];
                remap[k] = (uint32_t) live++;
        }
        for (size_t k = 0; k < o.n; k++)
                o.segs[k].sym = remap[o.segs[k].sym];

        free(m->segs);
        m->segs = o.segs;
        m->n_segs = o.n;
        m->n_segs_alloc = o.n_alloc;
        m->n_syms = live;
        m->n_pending = 0;
        m->full = false;
        return 0;

fail:
        free(h.items);
        free(o.segs);
        return r;
}

/* ---- lookup ---- */

const char *jit_map_lookup(const JitMap *m, uint64_t addr, uint64_t *ret_offset) {
        const JitSegment *seg;
        const JitSymbol *s;

        if (!m)
                return NULL;
        seg = segment_find(m, addr);
        if (!seg)
                return NULL;
        s = &m->syms[seg->sym];
        if (ret_offset)
                *ret_offset = addr - s->start;
        return s->name;
}

size_t jit_map_count(const JitMap *m) {
        return m ? m->n_syms : 0;
}

uint64_t jit_map_dropped(const JitMap *m) {
        return m ? m->dropped : 0;
}

size_t jit_map_segments(const JitMap *m) {
        return m ? m->n_segs : 0;
}

int jit_map_segment(const JitMap *m, size_t i, uint64_t *ret_start, uint64_t *ret_end,
                    const char **ret_name) {
        if (!m || i >= m->n_segs)
                return -EINVAL;
        if (ret_start)
                *ret_start = m->segs[i].start;
        if (ret_end)
                *ret_end = m->segs[i].end;
        if (ret_name)
                *ret_name = m->syms[m->segs[i].sym].name;
        return 0;
}
