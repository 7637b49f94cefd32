/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* /proc/kallsyms: "ffffffff81000000 T _text" or, for a module,
 * "ffffffffc0a01000 t ext4_get_block\t[ext4]". Text symbols only, sorted once
 * by address, looked up by binary search. Names live in one string pool,
 * module names are interned (a few hundred at most). */

#include <fcntl.h>
#include <inttypes.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kallsyms.h"
#include "log.h"

#define NO_MODULE UINT16_MAX

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

typedef struct KSym {
        uint64_t addr;
        uint32_t name; /* offset into the pool; grows in file order */
        uint16_t module; /* index into modules[], NO_MODULE: the kernel image */
        uint8_t rank; /* preference among aliases at the same address */
} KSym;

/* The two big arrays (for a distribution kernel some 2 MB of symbols and 3 MB
 * of names) are anonymous mappings grown with mremap(): growing moves page
 * table entries, not bytes, and each grown part is populated with one
 * madvise() rather than a page fault per page. Both matter: copying and
 * faulting in these arrays as realloc() did cost more than parsing. */
typedef struct Area {
        void *p;
        size_t size; /* bytes mapped */
} Area;

struct Kallsyms {
        Area syms_area, pool_area;
        const KSym *syms;
        size_t n_syms;
        const char *pool;
        char **modules;
        size_t n_modules;
        uint64_t text_end; /* the image's text ends here (0: not said) */
};

static size_t page_size(void) {
        static size_t ps = 0;

        if (ps == 0) {
                long v = sysconf(_SC_PAGESIZE);

                ps = v > 0 ? (size_t) v : 4096;
        }
        return ps;
}

static int area_reserve(Area *a, size_t need) {
        size_t n, ps = page_size();
        void *q;

        if (need <= a->size)
                return 0;
        n = MAX(a->size * 2, (size_t) 256 * 1024);
        while (n < need) {
                if (n > SIZE_MAX / 2)
                        return -ENOMEM;
                n *= 2;
        }
        n = (n + ps - 1) / ps * ps;

        if (a->p)
                q = mremap(a->p, a->size, n, MREMAP_MAYMOVE);
        else
                q = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (q == MAP_FAILED)
                return -ENOMEM;
        /* Best effort: before Linux 5.14 the pages fault in one by one. */
        (void) madvise((char *) q + a->size, n - a->size, MADV_POPULATE_WRITE);
        a->p = q;
        a->size = n;
        return 0;
}

/* Gives back the pages past 'used' (the last growth doubled the area). */
static void area_trim(Area *a, size_t used) {
        size_t ps = page_size(), n = (MAX(used, (size_t) 1) + ps - 1) / ps * ps;

        if (!a->p || n >= a->size)
                return;
        if (mremap(a->p, a->size, n, 0) != MAP_FAILED)
                a->size = n;
}

static void area_free(Area *a) {
        if (a->p)
                (void) munmap(a->p, a->size);
        *a = (Area){};
}

Kallsyms *kallsyms_free(Kallsyms *k) {
        if (!k)
                return NULL;
        for (size_t i = 0; i < k->n_modules; i++)
                free(k->modules[i]);
        free(k->modules);
        area_free(&k->syms_area);
        area_free(&k->pool_area);
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
        Area syms; /* KSym[n_syms] */
        size_t n_syms;
        Area pool; /* pool_size bytes of names */
        size_t pool_size;
        char **modules;
        size_t n_modules, n_modules_alloc;
        size_t last_module; /* modules come in runs: remember the last one */
} Loader;

static void loader_done(Loader *l) {
        for (size_t i = 0; i < l->n_modules; i++)
                free(l->modules[i]);
        free(l->modules);
        area_free(&l->syms);
        area_free(&l->pool);
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

static bool is_blank(char c) {
        return c == ' ' || c == '\t';
}

static int hex_digit(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        c |= 0x20;
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        return -1;
}

/* One line, without its newline, NUL-terminated. Lines that are not text
 * symbols, or are malformed, are skipped: the format has grown columns
 * before. */
static int loader_line(Loader *l, char *line, bool *nonzero) {
        char *p = line, *name, *mod = NULL, *pool;
        size_t name_len, mod_len = 0;
        uint16_t module = NO_MODULE;
        uint64_t addr = 0;
        unsigned digits = 0;
        int rank, r, d;

        /* The address: hex digits, at most 64 bits of them. */
        for (; (d = hex_digit(*p)) >= 0; p++) {
                if (addr >> 60)
                        return 0;
                addr = addr << 4 | (uint64_t) d;
                digits++;
        }
        if (digits == 0 || !is_blank(*p))
                return 0;
        if (addr != 0)
                *nonzero = true;

        while (is_blank(*p))
                p++;
        if (*p == '\0' || !is_blank(p[1]))
                return 0;
        rank = type_rank(*p);
        if (rank < 0)
                return 0;

        p++;
        while (is_blank(*p))
                p++;
        name = p;
        while (*p != '\0' && !is_blank(*p))
                p++;
        name_len = (size_t) (p - name);
        if (name_len == 0)
                return 0;
        while (is_blank(*p))
                p++;
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

        if (l->pool_size + name_len + 1 > UINT32_MAX || l->n_syms >= SIZE_MAX / sizeof(KSym) - 1)
                return -E2BIG;
        r = area_reserve(&l->syms, (l->n_syms + 1) * sizeof(KSym));
        if (r < 0)
                return r;
        r = area_reserve(&l->pool, l->pool_size + name_len + 1);
        if (r < 0)
                return r;

        pool = l->pool.p;
        memcpy(pool + l->pool_size, name, name_len);
        pool[l->pool_size + name_len] = '\0';

        ((KSym *) l->syms.p)[l->n_syms] = (KSym){
                .addr = addr,
                .name = (uint32_t) l->pool_size,
                .module = module,
                .rank = (uint8_t) rank,
        };
        l->n_syms++;
        l->pool_size += name_len + 1;
        return 0;
}

/* Feeds the complete lines of buf[0..*have) to the loader and moves what is
 * left (a line cut by the read) to the front. A line that fills the whole
 * buffer is no symbol (names are at most KSYM_NAME_LEN): it is dropped up to
 * its newline. */
static int loader_feed(Loader *l, char *buf, size_t *have, size_t size, bool *skipping, bool *nonzero) {
        char *p = buf, *end = buf + *have, *nl;
        size_t left;
        int r;

        while ((nl = memchr(p, '\n', (size_t) (end - p)))) {
                *nl = '\0';
                if (!*skipping) {
                        r = loader_line(l, p, nonzero);
                        if (r < 0)
                                return r;
                }
                *skipping = false;
                p = nl + 1;
        }

        left = (size_t) (end - p);
        if (left == size) {
                *skipping = true;
                left = 0;
        } else if (left > 0 && p != buf)
                memmove(buf, p, left);
        *have = left;
        return 0;
}

/* Sorts by (address, rank, file order). /proc/kallsyms lists the kernel
 * image in address order, then modules, BPF programs and trampolines in
 * their own orders: the sorted prefix is kept as it is (aliases at one
 * address put in rank order), the rest is sorted and merged into it. */
static int loader_sort(Loader *l) {
        _cleanup_free_ KSym *tail = NULL;
        size_t n = l->n_syms, prefix = 1, m, i, j, k;
        KSym *s = l->syms.p;

        if (n < 2)
                return 0;
        while (prefix < n && s[prefix - 1].addr <= s[prefix].addr)
                prefix++;

        /* Runs of aliases are short: insertion sort. */
        for (i = 1; i < prefix; i++) {
                KSym x = s[i];

                if (s[i - 1].addr != x.addr)
                        continue;
                for (j = i; j > 0 && ksym_compare(&s[j - 1], &x) > 0; j--)
                        s[j] = s[j - 1];
                s[j] = x;
        }
        if (prefix == n)
                return 0;

        m = n - prefix;
        tail = malloc(m * sizeof(KSym));
        if (!tail)
                return -ENOMEM;
        memcpy(tail, s + prefix, m * sizeof(KSym));
        qsort(tail, m, sizeof(KSym), ksym_compare);

        /* Merge from the back: s[0..prefix) and tail[0..m) into s[0..n). */
        i = prefix;
        j = m;
        k = n;
        while (j > 0) {
                if (i > 0 && ksym_compare(&s[i - 1], &tail[j - 1]) > 0)
                        s[--k] = s[--i];
                else
                        s[--k] = tail[--j];
        }
        return 0;
}

/* The markers of the end of the kernel image's text: nothing follows them
 * that they name. */
static bool is_text_end(const char *name) {
        return streq(name, "_etext") || streq(name, "_einittext");
}

static uint64_t text_end(const KSym *syms, size_t n, const char *pool) {
        uint64_t end = 0;

        for (size_t i = 0; i < n; i++)
                if (syms[i].module == NO_MODULE && is_text_end(pool + syms[i].name))
                        end = MAX(end, syms[i].addr);
        return end;
}

/* Read in large chunks: /proc/kallsyms is megabytes, and every read() of a
 * seq_file has a fixed cost. */
#define READ_CHUNK (256U * 1024U)

int kallsyms_load(const char *path, Kallsyms **ret) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        Loader l = { .last_module = SIZE_MAX };
        Kallsyms *k;
        bool nonzero = false, skipping = false;
        size_t have = 0;
        int r = 0;

        if (!path || !ret)
                return -EINVAL;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        buf = malloc(READ_CHUNK + 1);
        if (!buf)
                return -ENOMEM;

        for (;;) {
                ssize_t n = read(fd, buf + have, READ_CHUNK - have);

                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r = negative_errno();
                        goto fail;
                }
                if (n == 0)
                        break;
                have += (size_t) n;
                r = loader_feed(&l, buf, &have, READ_CHUNK, &skipping, &nonzero);
                if (r < 0)
                        goto fail;
        }
        /* A last line without a newline. */
        if (have > 0 && !skipping) {
                buf[have] = '\0';
                r = loader_line(&l, buf, &nonzero);
                if (r < 0)
                        goto fail;
        }

        /* kptr_restrict (or no CAP_SYSLOG) shows every address as 0. */
        if (!nonzero) {
                r = -ENODATA;
                goto fail;
        }

        r = loader_sort(&l);
        if (r < 0)
                goto fail;

        k = malloc(sizeof(Kallsyms));
        if (!k) {
                r = -ENOMEM;
                goto fail;
        }
        area_trim(&l.syms, l.n_syms * sizeof(KSym));
        area_trim(&l.pool, l.pool_size);
        *k = (Kallsyms){
                .syms_area = l.syms,
                .syms = l.syms.p,
                .n_syms = l.n_syms,
                .pool_area = l.pool,
                .pool = l.pool.p,
                .modules = l.modules,
                .n_modules = l.n_modules,
        };
        k->text_end = text_end(k->syms, k->n_syms, k->pool);
        *ret = k;
        return 0;

fail:
        loader_done(&l);
        return r;
}

const char *kallsyms_lookup(const Kallsyms *k, uint64_t addr, uint64_t *ret_offset,
                            const char **ret_module) {
        size_t lo, i;
        const KSym *s;

        if (!k || k->n_syms == 0)
                return NULL;

        /* First index with syms[i].addr > addr. */
        lo = SORTED_UPPER_BOUND(k->syms, k->n_syms, _e->addr, addr);
        if (lo == 0)
                return NULL;
        i = lo - 1;

        /* The preferred alias sorts first among equal addresses. */
        while (i > 0 && k->syms[i - 1].addr == k->syms[i].addr)
                i--;
        s = &k->syms[i];
        /* Past the end of the image's text (BPF programs and modules loaded
         * after this table was read lie above it): in no symbol known. */
        if (s->module == NO_MODULE && is_text_end(k->pool + s->name))
                return NULL;

        if (ret_offset)
                *ret_offset = addr - s->addr;
        if (ret_module)
                *ret_module = s->module == NO_MODULE ? NULL : k->modules[s->module];
        return k->pool + s->name;
}

/* ---- when to reload ---- */

#define FNV_OFFSET UINT64_C(0xcbf29ce484222325)
#define FNV_PRIME UINT64_C(0x100000001b3)

static uint64_t fnv1a(uint64_t h, const char *p, size_t n) {
        for (size_t i = 0; i < n; i++) {
                h ^= (uint8_t) p[i];
                h *= FNV_PRIME;
        }
        return h;
}

int kallsyms_modules_fingerprint(const char *path, uint64_t *ret) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        uint64_t h = FNV_OFFSET;
        size_t alloc = 0;

        if (!path || !ret)
                return -EINVAL;

        f = fopen(path, "re");
        if (!f) {
                if (errno != ENOENT)
                        return negative_errno();
                *ret = h; /* no module support: no modules */
                return 0;
        }

        /* "name size refcount users state address [taints]": all but the
         * third and fourth field. */
        while (getline(&line, &alloc, f) >= 0) {
                char *p = line;
                unsigned field = 0;

                for (;;) {
                        size_t len;

                        p += strspn(p, " \t\n");
                        if (*p == '\0')
                                break;
                        len = strcspn(p, " \t\n");
                        field++;
                        if (field != 3 && field != 4) {
                                h = fnv1a(h, p, len);
                                h = fnv1a(h, " ", 1);
                        }
                        p += len;
                }
                if (field > 0)
                        h = fnv1a(h, "\n", 1);
        }
        if (ferror(f))
                return -EIO;

        *ret = h;
        return 0;
}

struct KallsymsCache {
        char *kallsyms_path;
        char *modules_path;
        uint64_t check_usec, retry_usec;

        Kallsyms *table;
        uint64_t fingerprint; /* of the modules when table was read */
        bool have_fingerprint;
        uint64_t next_check; /* table: when to compare the modules again */
        uint64_t next_try; /* no table: when to try loading it again */
        uint64_t loaded_at; /* table: when it was read */
        bool tried;
        unsigned loads;
};

int kallsyms_cache_new(const KallsymsCacheOptions *opts, KallsymsCache **ret) {
        KallsymsCacheOptions o = opts ? *opts : (KallsymsCacheOptions){};
        _cleanup_(kallsyms_cache_freep) KallsymsCache *c = NULL;

        if (!ret)
                return -EINVAL;

        c = calloc(1, sizeof(KallsymsCache));
        if (!c)
                return -ENOMEM;
        c->kallsyms_path = strdup(o.kallsyms_path ?: "/proc/kallsyms");
        c->modules_path = strdup(o.modules_path ?: "/proc/modules");
        if (!c->kallsyms_path || !c->modules_path)
                return -ENOMEM;
        c->check_usec = o.check_usec ?: KALLSYMS_CHECK_USEC_DEFAULT;
        c->retry_usec = o.retry_usec ?: KALLSYMS_RETRY_USEC_DEFAULT;

        *ret = TAKE_PTR(c);
        return 0;
}

KallsymsCache *kallsyms_cache_free(KallsymsCache *c) {
        if (!c)
                return NULL;
        kallsyms_free(c->table);
        free(c->kallsyms_path);
        free(c->modules_path);
        free(c);
        return NULL;
}

unsigned kallsyms_cache_loads(const KallsymsCache *c) {
        return c ? c->loads : 0;
}

static uint64_t add_usec(uint64_t now, uint64_t d) {
        return now > UINT64_MAX - d ? UINT64_MAX : now + d;
}

/* Reads the table; the modules are read first, so that a module loaded in
 * between shows as a change at the next check, not as one never seen. */
static int cache_load(KallsymsCache *c, uint64_t now, bool have_fingerprint, uint64_t fingerprint) {
        Kallsyms *k = NULL;
        int r;

        c->loads++;
        c->tried = true;
        r = kallsyms_load(c->kallsyms_path, &k);
        if (r < 0) {
                if (r == -ENOMEM)
                        return r;
                log_debug_errno(r, "Failed to load %s%s, trying again in %" PRIu64 " s: %m",
                                c->kallsyms_path, c->table ? ", keeping the old symbols" : "",
                                c->retry_usec / USEC_PER_SEC);
                c->next_try = add_usec(now, c->retry_usec);
                c->next_check = c->next_try;
                return 0;
        }

        log_debug("Loaded %zu kernel symbols from %s.", kallsyms_count(k), c->kallsyms_path);
        kallsyms_free(c->table);
        c->table = k;
        c->fingerprint = fingerprint;
        c->have_fingerprint = have_fingerprint;
        c->next_check = add_usec(now, c->check_usec);
        c->loaded_at = now;
        return 1;
}

int kallsyms_cache_get(KallsymsCache *c, uint64_t now, const Kallsyms **ret) {
        uint64_t fingerprint = 0;
        bool have;
        int r = 0;

        if (!c || !ret)
                return -EINVAL;

        if (!c->table) {
                if (!c->tried || now >= c->next_try) {
                        have = kallsyms_modules_fingerprint(c->modules_path, &fingerprint) >= 0;
                        r = cache_load(c, now, have, fingerprint);
                }
        } else if (now >= c->next_check) {
                c->next_check = add_usec(now, c->check_usec);
                /* Unreadable modules: nothing to compare, keep the table. */
                if (kallsyms_modules_fingerprint(c->modules_path, &fingerprint) >= 0 &&
                    (!c->have_fingerprint || fingerprint != c->fingerprint)) {
                        log_debug("The kernel's modules changed, reloading %s.", c->kallsyms_path);
                        r = cache_load(c, now, true, fingerprint);
                }
        }

        *ret = c->table;
        return r;
}

int kallsyms_cache_reload_on_miss(KallsymsCache *c, uint64_t now, uint64_t addr, const Kallsyms **ret) {
        uint64_t fingerprint = 0;
        bool have;
        int r = 0;

        if (!c || !ret)
                return -EINVAL;

        if (c->table && c->table->text_end != 0 && addr >= c->table->text_end &&
            now >= add_usec(c->loaded_at, c->check_usec)) {
                log_debug("A kernel address in no symbol, reloading %s.", c->kallsyms_path);
                have = kallsyms_modules_fingerprint(c->modules_path, &fingerprint) >= 0;
                r = cache_load(c, now, have, fingerprint);
        }
        *ret = c->table;
        return r;
}
