/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* /proc/kallsyms: "ffffffff81000000 T _text" or, for a module,
 * "ffffffffc0a01000 t ext4_get_block\t[ext4]". Text symbols only, sorted once
 * by address, looked up by binary search. Names live in one string pool,
 * module names are interned (a few hundred at most). */

#include <inttypes.h>

#include "kallsyms.h"

#define NO_MODULE UINT16_MAX

typedef struct KSym {
        uint64_t addr;
        uint32_t name; /* offset into the pool; grows in file order */
        uint16_t module; /* index into modules[], NO_MODULE: the kernel image */
        uint8_t rank; /* preference among aliases at the same address */
} KSym;

struct Kallsyms {
        KSym *syms;
        size_t n_syms;
        char *pool;
        char **modules;
        size_t n_modules;
};

Kallsyms *kallsyms_free(Kallsyms *k) {
        if (!k)
                return NULL;
        for (size_t i = 0; i < k->n_modules; i++)
                free(k->modules[i]);
        free(k->modules);
        free(k->syms);
        free(k->pool);
        free(k);
        return NULL;
}

size_t kallsyms_count(const Kallsyms *k) {
        return k ? k->n_syms : 0;
}

/* Among aliases at one address, report global text before weak before local. */
static int type_rank(char t) {
        switch (t) {
        case 'T':
                return 0;
        case 'W':
                return 1;
        case 't':
                return 2;
        case 'w':
                return 3;
        default:
                return -1;
        }
}

static int ksym_compare(const void *a, const void *b) {
        const KSym *x = a, *y = b;
        int r;

        r = CMP(x->addr, y->addr);
        if (r != 0)
                return r;
        r = CMP(x->rank, y->rank);
        if (r != 0)
                return r;
        return CMP(x->name, y->name); /* file order: a total, deterministic order */
}

typedef struct Loader {
        KSym *syms;
        size_t n_syms, n_alloc;
        char *pool;
        size_t pool_size, pool_alloc;
        char **modules;
        size_t n_modules, n_modules_alloc;
        size_t last_module; /* modules come in runs: remember the last one */
} Loader;

static void loader_done(Loader *l) {
        for (size_t i = 0; i < l->n_modules; i++)
                free(l->modules[i]);
        free(l->modules);
        free(l->syms);
        free(l->pool);
}

static int grow(void **p, size_t *n_alloc, size_t need, size_t elem) {
        size_t n;
        void *q;

        if (need <= *n_alloc)
                return 0;
        n = MAX(*n_alloc * 2, MAX(need, (size_t) 64));
        if (n > SIZE_MAX / elem)
                return -ENOMEM;
        q = realloc(*p, n * elem);
        if (!q)
                return -ENOMEM;
        *p = q;
        *n_alloc = n;
        return 0;
}

static int loader_module(Loader *l, const char *name, size_t len, uint16_t *ret) {
        char *m;
        int r;

        if (l->last_module < l->n_modules && strlen(l->modules[l->last_module]) == len &&
            memcmp(l->modules[l->last_module], name, len) == 0) {
                *ret = (uint16_t) l->last_module;
                return 0;
        }
        for (size_t i = 0; i < l->n_modules; i++)
                if (strlen(l->modules[i]) == len && memcmp(l->modules[i], name, len) == 0) {
                        l->last_module = i;
                        *ret = (uint16_t) i;
                        return 0;
                }

        if (l->n_modules >= NO_MODULE)
                return -E2BIG;
        r = grow((void **) &l->modules, &l->n_modules_alloc, l->n_modules + 1, sizeof(char *));
        if (r < 0)
                return r;
        m = strndup(name, len);
        if (!m)
                return -ENOMEM;
        l->modules[l->n_modules] = m;
        l->last_module = l->n_modules;
        *ret = (uint16_t) l->n_modules++;
        return 0;
}

/* One line, without its newline. Lines that are not text symbols, or are
 * malformed, are skipped: the format has grown columns before. */
static int loader_line(Loader *l, char *line, bool *nonzero) {
        char *p = line, *end, *name, *mod = NULL;
        size_t name_len, mod_len = 0;
        uint16_t module = NO_MODULE;
        uint64_t addr;
        int rank, r;

        errno = 0;
        addr = strtoull(p, &end, 16);
        if (errno != 0 || end == p || (*end != ' ' && *end != '\t'))
                return 0;
        if (addr != 0)
                *nonzero = true;

        p = end + strspn(end, " \t");
        if (*p == '\0' || (p[1] != ' ' && p[1] != '\t'))
                return 0;
        rank = type_rank(*p);
        if (rank < 0)
                return 0;

        p += 1 + strspn(p + 1, " \t");
        name = p;
        name_len = strcspn(p, " \t");
        if (name_len == 0)
                return 0;
        p += name_len;
        p += strspn(p, " \t");
        if (*p == '[') {
                char *close = strchr(p, ']');

                if (close && close > p + 1) {
                        mod = p + 1;
                        mod_len = (size_t) (close - mod);
                }
        }

        if (mod) {
                r = loader_module(l, mod, mod_len, &module);
                if (r < 0)
                        return r;
        }

        if (l->pool_size + name_len + 1 > UINT32_MAX)
                return -E2BIG;
        r = grow((void **) &l->syms, &l->n_alloc, l->n_syms + 1, sizeof(KSym));
        if (r < 0)
                return r;
        r = grow((void **) &l->pool, &l->pool_alloc, l->pool_size + name_len + 1, 1);
        if (r < 0)
                return r;

        memcpy(l->pool + l->pool_size, name, name_len);
        l->pool[l->pool_size + name_len] = '\0';

        l->syms[l->n_syms] = (KSym){
                .addr = addr,
                .name = (uint32_t) l->pool_size,
                .module = module,
                .rank = (uint8_t) rank,
        };
        l->n_syms++;
        l->pool_size += name_len + 1;
        return 0;
}

int kallsyms_load(const char *path, Kallsyms **ret) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        Loader l = { .last_module = SIZE_MAX };
        Kallsyms *k;
        bool nonzero = false;
        size_t line_alloc = 0;
        ssize_t n;
        int r = 0;

        if (!path || !ret)
                return -EINVAL;

        f = fopen(path, "re");
        if (!f)
                return negative_errno();

        while ((n = getline(&line, &line_alloc, f)) >= 0) {
                if (n > 0 && line[n - 1] == '\n')
                        line[n - 1] = '\0';
                r = loader_line(&l, line, &nonzero);
                if (r < 0)
                        goto fail;
        }
        if (ferror(f)) {
                r = -EIO;
                goto fail;
        }

        /* kptr_restrict (or no CAP_SYSLOG) shows every address as 0. */
        if (!nonzero) {
                r = -ENODATA;
                goto fail;
        }

        if (l.n_syms > 1)
                qsort(l.syms, l.n_syms, sizeof(KSym), ksym_compare);

        k = malloc(sizeof(Kallsyms));
        if (!k) {
                r = -ENOMEM;
                goto fail;
        }
        *k = (Kallsyms){
                .syms = l.syms,
                .n_syms = l.n_syms,
                .pool = l.pool,
                .modules = l.modules,
                .n_modules = l.n_modules,
        };
        *ret = k;
        return 0;

fail:
        loader_done(&l);
        return r;
}

const char *kallsyms_lookup(const Kallsyms *k, uint64_t addr, uint64_t *ret_offset,
                            const char **ret_module) {
        size_t lo = 0, hi, i;
        const KSym *s;

        if (!k || k->n_syms == 0)
                return NULL;

        /* First index with syms[i].addr > addr. */
        hi = k->n_syms;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;

                if (k->syms[mid].addr <= addr)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        if (lo == 0)
                return NULL;
        i = lo - 1;

        /* The preferred alias sorts first among equal addresses. */
        while (i > 0 && k->syms[i - 1].addr == k->syms[i].addr)
                i--;
        s = &k->syms[i];

        if (ret_offset)
                *ret_offset = addr - s->addr;
        if (ret_module)
                *ret_module = s->module == NO_MODULE ? NULL : k->modules[s->module];
        return k->pool + s->name;
}
