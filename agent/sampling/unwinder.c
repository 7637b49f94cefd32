/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <bpf/bpf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <search.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "elf-symtab.h"
#include "elf-util.h"
#include "log.h"
#include "proc-maps.h"
#include "profile.h"
#include "unwind-compact.h"
#include "unwind-store.h"
#include "unwind-table.h"
#include "unwind.h"
#include "unwinder.h"

/* A table no live process uses is kept this long: the next process of the
 * same binary (a shell loop, a worker pool) finds it ready. */
#define UNUSED_GRACE_USEC (60 * USEC_PER_SEC)
#define MAX_SEGMENTS 16

typedef struct BuildJob BuildJob;
static void build_job_detach(BuildJob *j);

typedef struct FileKey {
        uint64_t dev, ino, size, mtime_nsec;
} FileKey;

typedef struct LoadSegment {
        uint64_t offset, vaddr, filesz;
        bool exec;
} LoadSegment;

typedef struct UnwindFile UnwindFile;

typedef enum FileState {
        FILE_NO_TABLE, /* none to load (describe says why): its table id walks by frame pointer */
        FILE_PENDING, /* queued or being built */
        FILE_LOADED,
} FileState;

/* One (device, inode, size, mtime) that names a file entry: a file has
 * several when copies with one build ID are mapped (containers). */
typedef struct FileAlias {
        FileKey key;
        UnwindFile *file;
        struct FileAlias *next;
} FileAlias;

struct UnwindFile {
        char *build_id; /* NULL: none, found by its aliases only */
        FileAlias *aliases;
        LoadSegment segments[MAX_SEGMENTS];
        size_t n_segments;
        uint32_t table; /* its id in the tables map from the first sight on; 0: none */
        FileState state;
        UnwindPlacement placement; /* FILE_LOADED: its cells and pages */
        uint64_t base; /* the table's base vaddr */
        char *describe; /* "eh_frame", "none", "error: ...", "not loaded: ..." */
        /* FILE_PENDING: what the build reads (a file, or the vDSO's image),
         * the job building it, its place in the queue. */
        char *path;
        int build_fd;
        void *image;
        size_t image_size;
        BuildJob *job;
        UnwindFile *queue_prev, *queue_next;
        bool in_queue;
        unsigned n_ref; /* processes mapping it */
        uint64_t unused_since; /* when n_ref dropped to 0 */
        UnwindFile *unused_prev, *unused_next;
        bool in_unused;
};

typedef struct ProcMapping {
        uint64_t start, end;
        uint64_t bias; /* table row pc = address - bias (when file->table != 0) */
        UnwindFile *file; /* a reference, or NULL */
        const char *describe;
} ProcMapping;

/* A process's executable mappings loaded for the walker, at most: real
 * programs have hundreds (a JVM, a few thousand); a process that maps one
 * file 65,000 times would cost a file open per mapping and several map
 * entries each, on the event loop, in every forked child too. Beyond the
 * bound the rest are left out (their frames end the walk, or are walked by
 * frame pointer) and the process is not reloaded when the walker meets
 * them (that would read them all again). */
#define PROCESS_MAPPINGS_MAX PROC_MAPS_EXECUTABLE_MAX

#define PROCESS_KEYS_MAX 8192
/* ... and of one file in a row (a library has one or two): the others'
 * mappings, further on, still fit. */
#define PROCESS_SAME_FILE_RUN_MAX PROC_MAPS_SAME_FILE_RUN_MAX

typedef struct UnwindProcess {
        Unwinder *unwinder;
        pid_t pid;
        uint64_t start_time;
        unsigned n_ref;
        int pidfd;
        sd_event_source *exit_source;
        ProcMapping *mappings;
        size_t n_mappings;
        struct cgprof_mapping_key *keys; /* its entries in the mappings map */
        size_t n_keys;
        uint64_t loaded_usec;
        bool capped; /* more mappings than PROCESS_MAPPINGS_MAX / PROCESS_KEYS_MAX: some left out */
        /* The executable mappings of the last complete load (maps_digest()). */
        uint64_t digest;
        bool have_digest;
        /* Exited: out of the maps, its mappings kept for two more ticks, so
         * the samples drained after its exit are still described. */
        unsigned exited_ticks;
        bool exited;
} UnwindProcess;

struct Unwinder {
        ProcMapsCache *maps_cache; /* the Manager's (NULL: none) */
        sd_event *event;
        SamplerUnwindMaps maps;
        UnwindStore *store;
        /* The worker's while a build runs (it interns); the loop reads those published. */
        UnwindRules *rules;
        Worker *worker; /* builds tables */
        UnwindFile *queue_first, *queue_last; /* tables to build, in the order seen */
        BuildJob *in_flight; /* the build on the worker (one at a time) */
        bool freeing;
        uint8_t table_used[CGPROF_MAX_UNWIND_TABLES];
        uint32_t next_table;

        void *by_key; /* tsearch: FileAlias by FileKey */
        void *by_build_id; /* tsearch: UnwindFile by build ID */
        void *processes; /* tsearch: UnwindProcess by pid */
        UnwindFile *unused_first, *unused_last; /* oldest first */
        UnwindFile *vdso; /* the vDSO's table (we hold a reference); NULL: none */
        size_t vdso_size;
        bool vdso_tried;

        UnwinderStats stats;
};

static uint32_t table_id_alloc(Unwinder *u) {
        for (uint32_t k = 0; k < CGPROF_MAX_UNWIND_TABLES - 1; k++) {
                uint32_t id = u->next_table;
                u->next_table = id + 1 >= CGPROF_MAX_UNWIND_TABLES ? 1 : id + 1;
                if (!u->table_used[id]) {
                        u->table_used[id] = 1;
                        return id;
                }
        }
        return 0;
}

/* ---- files ---- */

static int file_key_cmp(const void *a, const void *b) {
        const FileKey *x = &((const FileAlias *) a)->key, *y = &((const FileAlias *) b)->key;
        int c = CMP(x->dev, y->dev);
        if (c == 0)
                c = CMP(x->ino, y->ino);
        if (c == 0)
                c = CMP(x->size, y->size);
        if (c == 0)
                c = CMP(x->mtime_nsec, y->mtime_nsec);
        return c;
}

static int build_id_cmp(const void *a, const void *b) {
        return strcmp(((const UnwindFile *) a)->build_id, ((const UnwindFile *) b)->build_id);
}

static void unused_remove(Unwinder *u, UnwindFile *f) {
        if (!f->in_unused)
                return;
        DLIST_REMOVE(unused_prev, unused_next, u->unused_first, u->unused_last, f);
        f->in_unused = false;
        u->stats.tables_unused--;
}

static void unused_append(Unwinder *u, UnwindFile *f) {
        DLIST_APPEND(unused_prev, unused_next, u->unused_first, u->unused_last, f);
        f->in_unused = true;
        f->unused_since = now_usec(CLOCK_MONOTONIC);
        u->stats.tables_unused++;
}

/* The table entry of f: loaded (its pages), pending, or none. */
static int table_entry_write(Unwinder *u, UnwindFile *f) {
        struct cgprof_unwind_table e = {};

        if (f->state == FILE_LOADED)
                e = (struct cgprof_unwind_table){
                        .base = f->base,
                        .first_page = f->placement.first_page,
                        .n_pages = f->placement.n_pages,
                };
        else if (f->state == FILE_PENDING)
                e.pending = 1;
        return bpf_map_update_elem(u->maps.tables_fd, &f->table, &e, BPF_ANY) < 0 ? negative_errno() : 0;
}

static void queue_remove(Unwinder *u, UnwindFile *f) {
        if (!f->in_queue)
                return;
        DLIST_REMOVE(queue_prev, queue_next, u->queue_first, u->queue_last, f);
        f->in_queue = false;
}

/* What a pending file holds for its build. */
static void file_build_input_free(UnwindFile *f) {
        f->build_fd = safe_close(f->build_fd);
        f->image = mfree(f->image);
        f->path = mfree(f->path);
}

static void file_unload_table(Unwinder *u, UnwindFile *f) {
        if (f->table == 0)
                return;
        if (f->state == FILE_LOADED)
                u->stats.tables--;
        else if (f->state == FILE_PENDING)
                u->stats.tables_pending--;
        f->state = FILE_NO_TABLE;
        /* Out of the walker's sight before its space is given back. */
        (void) table_entry_write(u, f);
        unwind_store_release(u->store, &f->placement);
        u->table_used[f->table] = 0;
        f->table = 0;
}

static void file_free(Unwinder *u, UnwindFile *f) {
        unused_remove(u, f);
        queue_remove(u, f);
        if (f->job)
                build_job_detach(f->job); /* its done() drops what it built */
        file_unload_table(u, f);
        file_build_input_free(f);
        while (f->aliases) {
                FileAlias *a = f->aliases;
                f->aliases = a->next;
                tdelete(a, &u->by_key, file_key_cmp);
                free(a);
        }
        if (f->build_id)
                tdelete(f, &u->by_build_id, build_id_cmp);
        free(f->build_id);
        free(f->describe);
        free(f);
}

static void file_unref(Unwinder *u, UnwindFile *f) {
        if (!f || f->n_ref == 0)
                return;
        if (--f->n_ref > 0)
                return;
        if (f->state == FILE_NO_TABLE)
                file_free(u, f); /* nothing loaded to keep */
        else
                unused_append(u, f); /* loaded or on its way: the next process may want it */
}

static UnwindFile *file_ref(Unwinder *u, UnwindFile *f) {
        if (f->n_ref++ == 0)
                unused_remove(u, f);
        return f;
}

/* Puts c into the store, freeing unused tables, oldest first, until it fits
 * (or none is left). f, whose table it is, is never one of them. */
static int store_put_evicting(Unwinder *u, UnwindFile *f, const UnwindCompact *c) {
        bool was_unused = f->in_unused;
        int r;

        unused_remove(u, f);
        while ((r = unwind_store_put(u->store, c, u->rules, &f->placement)) == -ENOSPC && u->unused_first)
                file_free(u, u->unused_first);
        if (was_unused)
                unused_append(u, f);
        return r;
}

static int read_segments(Elf *elf, UnwindFile *f) {
        size_t phnum;

        if (elf_getphdrnum(elf, &phnum) < 0)
                return -EBADMSG;
        for (size_t i = 0; i < phnum && f->n_segments < MAX_SEGMENTS; i++) {
                GElf_Phdr ph;
                if (!gelf_getphdr(elf, (int) i, &ph) || ph.p_type != PT_LOAD)
                        continue;
                f->segments[f->n_segments++] = (LoadSegment){
                        .offset = ph.p_offset,
                        .vaddr = ph.p_vaddr,
                        .filesz = ph.p_filesz,
                        .exec = ph.p_flags & PF_X,
                };
        }
        return f->n_segments > 0 ? 0 : -ENOEXEC;
}

/* The load bias of a mapping of the file: runtime address = bias + vaddr. */
static int file_load_bias(const UnwindFile *f, uint64_t map_start, uint64_t pgoff, uint64_t *ret) {
        const LoadSegment *best = NULL;

        for (size_t i = 0; i < f->n_segments; i++) {
                const LoadSegment *sg = &f->segments[i];
                uint64_t page_off = sg->offset & ~UINT64_C(0xfff);
                if (pgoff < page_off || pgoff >= sg->offset + MAX(sg->filesz, (uint64_t) 1))
                        continue;
                if (!best || (sg->exec && !best->exec))
                        best = sg;
        }
        if (!best)
                return -ENOENT;
        /* The mapping's first byte is file offset pgoff, which is vaddr
         * sg->vaddr + (pgoff - sg->offset) of the file. */
        *ret = map_start - (best->vaddr + pgoff - best->offset);
        return 0;
}

static int file_describef(UnwindFile *f, const char *fmt, const char *arg) {
        free(f->describe);
        f->describe = NULL;
        if (asprintf(&f->describe, fmt, arg) < 0) {
                f->describe = NULL;
                return -ENOMEM;
        }
        return 0;
}

/* ---- builds, on the worker ---- */

/* A table built (and made compact) on the worker for one file. The file
 * may go meanwhile (detached: file NULL); done() then drops the result. */
struct BuildJob {
        WorkerJob job;
        Unwinder *unwinder;
        UnwindFile *file;
        /* Input, taken from the file (the worker's while it runs). */
        char *path;
        int fd;
        void *image;
        size_t image_size;
        /* Output. */
        int r;
        UnwindTable *table;
        UnwindCompact *compact;
        uint64_t build_usec, compact_usec;
};

static void build_job_detach(BuildJob *j) {
        j->file->job = NULL;
        j->file = NULL;
}

static void build_job_free(BuildJob *j) {
        safe_close(j->fd);
        free(j->image);
        free(j->path);
        unwind_table_free(j->table);
        unwind_compact_free(j->compact);
        free(j);
}

/* On the worker: reads the file, builds its table, makes it compact
 * (interning its rules: the loop only reads those published). */
static void build_run(WorkerJob *job) {
        BuildJob *j = (BuildJob *) job;
        uint64_t t0 = now_usec(CLOCK_MONOTONIC), t1;
        Elf *elf = NULL;

        if (j->image)
                elf = elf_memory(j->image, j->image_size);
        else if (elf_open_fd(j->fd, &elf) < 0)
                elf = NULL;
        if (!elf) {
                j->r = -EBADMSG;
                return;
        }
        j->r = unwind_table_build_elf(elf, &j->table);
        elf_end(elf);
        t1 = now_usec(CLOCK_MONOTONIC);
        j->build_usec = t1 - t0;
        if (j->r < 0 || j->table->n_rows == 0 || j->table->n_rows > UINT32_MAX)
                return;
        j->r = unwind_compact_build(j->table, j->unwinder->rules, &j->compact);
        j->compact_usec = now_usec(CLOCK_MONOTONIC) - t1;
}

static void builds_pump(Unwinder *u);

/* A built table into the maps (the rest of f's fields: its describe). */
static int file_load_built(Unwinder *u, UnwindFile *f, BuildJob *j) {
        const UnwindTable *t = j->table;
        int r;

        if (j->r == -ENODATA || (j->r >= 0 && (t->n_rows == 0 || t->n_rows > UINT32_MAX))) {
                u->stats.files_without_table++;
                return file_describef(f, "%s", "none");
        }
        if (j->r == -ENOSPC) {
                u->stats.tables_not_fitted++;
                return file_describef(f, "%s", "not loaded: too many distinct unwind rules");
        }
        if (j->r < 0) {
                u->stats.files_bad++;
                log_debug_errno(j->r,
                                "Failed to build the unwind table of %s, walking it by frame pointer: %m",
                                f->path);
                return file_describef(f, "error: %s",
                                      j->r == -EBADMSG   ? "malformed unwind data"
                                      : j->r == -E2BIG   ? "unwind table too large"
                                      : j->r == -ENOTSUP ? "unsupported architecture"
                                                         : strerror(-j->r));
        }
        u->stats.tables_built++;
        if (t->stats.n_bad_entries > 0)
                u->stats.files_bad++;

        r = store_put_evicting(u, f, j->compact);
        if (r < 0) {
                u->stats.tables_not_fitted++;
                log_debug("The unwind table of %s (%zu rows) does not fit in the budget, walking it by "
                          "frame pointer.",
                          f->path, t->n_rows);
                return file_describef(f, "%s",
                                      "not loaded: the unwind rows budget is full (unwindTableRows)");
        }
        f->base = t->base;
        f->state = FILE_LOADED;
        r = table_entry_write(u, f);
        if (r < 0) {
                f->state = FILE_NO_TABLE;
                unwind_store_release(u->store, &f->placement);
                return r;
        }
        u->stats.tables++;
        log_debug(
                "Unwind table of %s: %zu rows from %s (%zu FDEs, %zu bad entries) as table %u: %zu cells in "
                "%u pages, built in %.1f ms, made compact in %.1f ms.",
                f->path, t->n_rows, unwind_source_to_string(t->source), t->stats.n_fdes,
                t->stats.n_bad_entries, f->table, j->compact->n_cells, f->placement.n_pages,
                (double) j->build_usec / 1e3, (double) j->compact_usec / 1e3);
        if (t->stats.n_bad_entries > 0) {
                char buf[128];
                snprintf(buf, sizeof(buf), "%s (%zu bad entries skipped)",
                         unwind_source_to_string(t->source), t->stats.n_bad_entries);
                return file_describef(f, "%s", buf);
        }
        return file_describef(f, "%s", unwind_source_to_string(t->source));
}

/* On the loop: the build's result into the maps, the next build out. */
static void build_done(WorkerJob *job, bool ran) {
        BuildJob *j = (BuildJob *) job;
        Unwinder *u = j->unwinder;
        UnwindFile *f = j->file;

        if (u->in_flight == j)
                u->in_flight = NULL;
        if (f) {
                f->job = NULL;
                u->stats.build_usec += j->build_usec + j->compact_usec;
                u->stats.build_usec_max = MAX(u->stats.build_usec_max, j->build_usec + j->compact_usec);
                if (!ran)
                        j->r = -ECANCELED;
                u->stats.tables_pending--;
                f->state = FILE_NO_TABLE;
                if (!u->freeing && file_load_built(u, f, j) < 0)
                        (void) file_describef(f, "%s", "error: the table could not be loaded");
                if (f->state != FILE_LOADED)
                        (void) table_entry_write(u, f); /* not pending any more: frame pointers */
                if (f->n_ref == 0 && f->state == FILE_NO_TABLE)
                        file_free(u, f);
        }
        build_job_free(j);
        if (!u->freeing)
                builds_pump(u);
}

/* Whether the walker met f's table while it was pending. */
static bool table_wanted(Unwinder *u, UnwindFile *f) {
        struct cgprof_unwind_table e;

        return bpf_map_lookup_elem(u->maps.tables_fd, &f->table, &e) >= 0 && e.wanted;
}

/* The next build out, when none runs: a table a walk wanted first, else
 * the first seen. */
static void builds_pump(Unwinder *u) {
        UnwindFile *f = NULL;
        BuildJob *j;

        if (u->in_flight || !u->queue_first)
                return;
        for (UnwindFile *i = u->queue_first; i && !f; i = i->queue_next)
                if (table_wanted(u, i)) {
                        f = i;
                        u->stats.tables_wanted++;
                }
        if (!f)
                f = u->queue_first;
        j = calloc(1, sizeof(*j));
        if (!j)
                return (void) log_oom();
        queue_remove(u, f);
        *j = (BuildJob){
                .unwinder = u,
                .file = f,
                .path = TAKE_PTR(f->path),
                .fd = TAKE_FD(f->build_fd),
                .image = TAKE_PTR(f->image),
                .image_size = f->image_size,
        };
        f->path = strdup(j->path ?: "?"); /* for its messages */
        f->job = j;
        u->in_flight = j;
        worker_submit(u->worker, &j->job, build_run, build_done);
}

/* A new file: its table id at once (its mappings point at it), pending
 * until its build is done. fd (dup()ed) or image (taken) is what the
 * build reads. */
static int file_enqueue(Unwinder *u, UnwindFile *f, int fd, void *image, size_t image_size,
                        const char *path) {
        int r;

        f->table = table_id_alloc(u);
        if (f->table == 0) {
                free(image);
                u->stats.tables_not_fitted++;
                return file_describef(f, "%s", "not loaded: too many tables");
        }
        f->path = strdup(path);
        if (!f->path) {
                free(image);
                return -ENOMEM;
        }
        if (image) {
                f->image = image;
                f->image_size = image_size;
        } else {
                f->build_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
                if (f->build_fd < 0)
                        return negative_errno();
        }
        f->state = FILE_PENDING;
        u->stats.tables_pending++;
        r = table_entry_write(u, f);
        if (r < 0)
                return r;
        DLIST_APPEND(queue_prev, queue_next, u->queue_first, u->queue_last, f);
        f->in_queue = true;
        return file_describef(f, "%s", UNWINDER_DESCRIBE_PENDING);
}

static int alias_add(Unwinder *u, UnwindFile *f, const FileKey *key) {
        FileAlias *a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->key = *key;
        a->file = f;
        if (!tsearch(a, &u->by_key, file_key_cmp)) {
                free(a);
                return -ENOMEM;
        }
        a->next = f->aliases;
        f->aliases = a;
        return 0;
}

/* The file entry of an open file (new files: built and loaded). */
static int file_get(Unwinder *u, int fd, const char *path, UnwindFile **ret) {
        FileAlias key = {}, **found;
        struct stat st;
        Elf *elf = NULL;
        UnwindFile *f = NULL;
        int r;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        key.key = (FileKey){
                .dev = st.st_dev,
                .ino = st.st_ino,
                .size = (uint64_t) st.st_size,
                .mtime_nsec = (uint64_t) st.st_mtim.tv_sec * NSEC_PER_SEC + (uint64_t) st.st_mtim.tv_nsec,
        };
        found = tfind(&key, &u->by_key, file_key_cmp);
        if (found) {
                *ret = file_ref(u, (*found)->file);
                return 0;
        }

        r = elf_open_fd(fd, &elf);
        if (r < 0)
                return r;

        f = calloc(1, sizeof(*f));
        if (!f) {
                r = -ENOMEM;
                goto finish;
        }
        f->build_fd = -EBADF;
        (void) elf_read_build_id(elf, &f->build_id);
        if (f->build_id) {
                UnwindFile **same = tfind(f, &u->by_build_id, build_id_cmp);
                if (same) {
                        /* A copy of a file we know (another container's). */
                        free(f->build_id);
                        free(f);
                        f = NULL;
                        r = alias_add(u, *same, &key.key);
                        if (r >= 0)
                                *ret = file_ref(u, *same);
                        goto finish;
                }
        }

        if (elf_kind(elf) != ELF_K_ELF || read_segments(elf, f) < 0)
                r = file_describef(f, "%s", "none");
        else
                r = file_enqueue(u, f, fd, NULL, 0, path);
        if (r < 0)
                goto finish;

        if (f->build_id && !tsearch(f, &u->by_build_id, build_id_cmp)) {
                r = -ENOMEM;
                goto finish;
        }
        r = alias_add(u, f, &key.key);
        if (r < 0) {
                if (f->build_id)
                        tdelete(f, &u->by_build_id, build_id_cmp);
                goto finish;
        }
        *ret = file_ref(u, TAKE_PTR(f));
        r = 0;
finish:
        if (f) {
                queue_remove(u, f);
                file_unload_table(u, f);
                file_build_input_free(f);
                free(f->build_id);
                free(f->describe);
                free(f);
        }
        elf_end(elf);
        return r;
}

/* The vDSO is one image for every 64-bit process: its table is built from
 * our own copy. A process whose vDSO differs in size (32-bit) gets none. */
static UnwindFile *vdso_get(Unwinder *u, uint64_t size) {
        if (!u->vdso_tried) {
                _cleanup_free_ void *image = NULL;
                _cleanup_free_ UnwindFile *f = NULL;
                const void *own;
                size_t n;
                Elf *elf;
                int r;

                u->vdso_tried = true;
                if (proc_self_vdso(&own, &n) < 0)
                        return NULL;
                image = malloc(n);
                f = calloc(1, sizeof(*f));
                if (!image || !f)
                        return NULL;
                f->build_fd = -EBADF;
                memcpy(image, own, n);
                elf = elf_memory(image, n);
                if (!elf)
                        return NULL;
                r = read_segments(elf, f);
                elf_end(elf);
                if (r < 0)
                        return NULL;
                r = file_enqueue(u, f, -EBADF, TAKE_PTR(image), n, "[vdso]");
                if (r < 0 || f->table == 0) {
                        queue_remove(u, f);
                        file_unload_table(u, f);
                        file_build_input_free(f);
                        free(f->describe);
                        return NULL;
                }
                f->n_ref = 1;
                u->vdso = TAKE_PTR(f);
                u->vdso_size = n;
        }
        if (!u->vdso || size != u->vdso_size)
                return NULL;
        return file_ref(u, u->vdso);
}

/* ---- processes ---- */

static int process_cmp(const void *a, const void *b) {
        return CMP(((const UnwindProcess *) a)->pid, ((const UnwindProcess *) b)->pid);
}

static UnwindProcess *process_find(Unwinder *u, pid_t pid) {
        UnwindProcess key = { .pid = pid }, **found = tfind(&key, &u->processes, process_cmp);
        return found ? *found : NULL;
}

/* Removes the process's entries from the maps. */
static void process_unload_maps(UnwindProcess *p) {
        Unwinder *u = p->unwinder;
        uint32_t pid = (uint32_t) p->pid;

        /* Not ready any more first: the walker falls back to frame pointers. */
        (void) bpf_map_delete_elem(u->maps.procs_fd, &pid);
        ARRAY_CLEAR(p->keys, p->n_keys, (void) bpf_map_delete_elem(u->maps.mappings_fd, _e));
}

/* ... and drops its mappings. */
static void process_unload(UnwindProcess *p) {
        Unwinder *u = p->unwinder;

        process_unload_maps(p);
        ARRAY_CLEAR(p->mappings, p->n_mappings, file_unref(u, _e->file));
}

static void process_free(UnwindProcess *p) {
        Unwinder *u = p->unwinder;

        process_unload(p);
        tdelete(p, &u->processes, process_cmp);
        sd_event_source_disable_unref(p->exit_source);
        safe_close(p->pidfd);
        u->stats.processes--;
        free(p);
}

static int on_process_exit(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        UnwindProcess *p = userdata;

        log_debug("PID %d exited, unloading its mappings.", (int) p->pid);
        process_unload_maps(p);
        p->exit_source = sd_event_source_disable_unref(p->exit_source);
        p->pidfd = safe_close(p->pidfd);
        p->exited = true;
        return 0;
}

/* The aligned blocks that cover [start, end), as keys of the mappings map. */
static int keys_add_range(struct cgprof_mapping_key **keys, size_t *n, size_t *allocated, uint32_t pid,
                          uint64_t start, uint64_t end) {
        while (start < end) {
                unsigned bits = start == 0 ? 63 : (unsigned) __builtin_ctzll(start);
                while (bits > 0 && (bits >= 64 || end - start < (UINT64_C(1) << bits)))
                        bits--;
                if (*n == *allocated) {
                        size_t na = MAX(*allocated * 2, (size_t) 64);
                        struct cgprof_mapping_key *k = reallocarray(*keys, na, sizeof(**keys));
                        if (!k)
                                return -ENOMEM;
                        *keys = k;
                        *allocated = na;
                }
                (*keys)[(*n)++] = (struct cgprof_mapping_key){
                        .prefixlen = 32 + 64 - bits,
                        .pid_be = __builtin_bswap32(pid),
                        .addr_be = __builtin_bswap64(start),
                };
                start += UINT64_C(1) << bits;
        }
        return 0;
}

static int mapping_key_cmp(const void *a, const void *b) {
        return memcmp(a, b, sizeof(struct cgprof_mapping_key));
}

/* pm's table and bias (also v's, the map entry's) where its file has a
 * load bias at start. */
static void mapping_set_bias(ProcMapping *pm, struct cgprof_mapping *v, uint64_t start, uint64_t pgoff) {
        uint64_t bias;

        if (file_load_bias(pm->file, start, pgoff, &bias) >= 0) {
                v->table = pm->file->table;
                v->bias = bias; /* the table's base is in its entry (known once built) */
                pm->bias = v->bias;
        }
}

/* One reading of a process's mappings, what carries from one entry to the
 * next. */
typedef struct MapsLoad {
        ProcMapping *maps;
        size_t n_maps, allocated_maps;
        struct cgprof_mapping_key *keys;
        size_t n_keys, allocated_keys;
        ProcMapsEntry last; /* the last file-backed entry opened, and ... */
        UnwindFile *last_file; /* ... its file (a file mapped again and again is opened once) */
        size_t left_out, run;
} MapsLoad;

static void maps_load_done(MapsLoad *l) {
        free(l->maps);
        free(l->keys);
}

/* The file of entry e into pm (its table and bias also into v): the file
 * of the entry before when same_file, the file e maps, or the vDSO;
 * pm->describe says which, or why none. */
static void maps_load_file(UnwindProcess *p, MapsLoad *l, const ProcMapsEntry *e, bool same_file,
                           ProcMapping *pm, struct cgprof_mapping *v) {
        Unwinder *u = p->unwinder;

        if (same_file) {
                /* The file of the entry before: no open() again. */
                pm->file = file_ref(u, l->last_file);
                pm->describe = pm->file->describe;
                if (pm->file->table != 0)
                        mapping_set_bias(pm, v, e->start, e->pgoff);
        } else if (proc_maps_entry_file_backed(e)) {
                _cleanup_close_ int fd = proc_maps_open_file("/proc", p->pid, e);
                l->last_file = NULL;
                if (fd >= 0 && file_get(u, fd, e->path, &pm->file) >= 0) {
                        l->last = *e;
                        l->last_file = pm->file;
                        pm->describe = pm->file->describe;
                        if (pm->file->table != 0)
                                mapping_set_bias(pm, v, e->start, e->pgoff);
                } else
                        pm->describe = "not loaded: the file could not be opened";
        } else if (streq(e->path, "[vdso]") && (pm->file = vdso_get(u, e->end - e->start))) {
                pm->describe = pm->file->describe;
                mapping_set_bias(pm, v, e->start, 0);
        } else
                pm->describe = e->path[0] ? "none" : "anonymous";
}

/* Executable entry e of the process's maps: a mapping, and its map
 * entries in the walker's map; or left out, beyond the bounds. */
static int maps_load_entry(UnwindProcess *p, MapsLoad *l, const ProcMapsEntry *e) {
        Unwinder *u = p->unwinder;
        ProcMapping pm = { .start = e->start, .end = e->end };
        struct cgprof_mapping v = { .start = e->start, .end = e->end };
        size_t first_key = l->n_keys;
        int r;

        if (l->n_maps >= PROCESS_MAPPINGS_MAX || l->n_keys >= PROCESS_KEYS_MAX) {
                l->left_out++;
                return 0;
        }
        bool same_file = l->last_file && proc_maps_entry_file_backed(e) && e->major == l->last.major &&
                         e->minor == l->last.minor && e->inode == l->last.inode &&
                         e->deleted == l->last.deleted;
        l->run = same_file ? l->run + 1 : 0;
        if (l->run >= PROCESS_SAME_FILE_RUN_MAX) {
                l->left_out++;
                return 0;
        }
        maps_load_file(p, l, e, same_file, &pm, &v);

        if (l->n_maps == l->allocated_maps) {
                size_t na = MAX(l->allocated_maps * 2, (size_t) 32);
                ProcMapping *a = reallocarray(l->maps, na, sizeof(*a));
                if (!a) {
                        file_unref(u, pm.file);
                        return -ENOMEM;
                }
                l->maps = a;
                l->allocated_maps = na;
        }
        l->maps[l->n_maps++] = pm;

        r = keys_add_range(&l->keys, &l->n_keys, &l->allocated_keys, (uint32_t) p->pid, e->start, e->end);
        if (r < 0)
                return r;
        for (size_t k = first_key; k < l->n_keys; k++)
                if (bpf_map_update_elem(u->maps.mappings_fd, &l->keys[k], &v, BPF_ANY) < 0)
                        u->stats.mapping_entries_failed++;
        return 0;
}

/* A reading that left mappings out: warned about and counted once, until
 * one fits again. */
static void process_note_capped(UnwindProcess *p, size_t left_out) {
        if (left_out > 0 && !p->capped) {
                log_warning(
                        "PID %d has more executable mappings than the walker loads (%zu left out: beyond %d "
                        "mappings, %d map entries, or %d of one file in a row): frames in those end its "
                        "stacks.",
                        (int) p->pid, left_out, PROCESS_MAPPINGS_MAX, PROCESS_KEYS_MAX,
                        PROCESS_SAME_FILE_RUN_MAX);
                p->unwinder->stats.processes_capped++;
        }
        p->capped = left_out > 0;
}

/* Drops the old entries the new ones did not replace (on failure, !ok:
 * the new ones the old ones do not have). */
static void process_drop_stale_keys(UnwindProcess *p, MapsLoad *l, bool ok) {
        struct cgprof_mapping_key *stale = ok ? p->keys : l->keys, *kept = ok ? l->keys : p->keys;
        size_t n_stale = ok ? p->n_keys : l->n_keys, n_kept = ok ? l->n_keys : p->n_keys;

        if (n_kept > 0)
                qsort(kept, n_kept, sizeof(*kept), mapping_key_cmp);
        for (size_t i = 0; i < n_stale; i++)
                if (n_kept == 0 || !bsearch(&stale[i], kept, n_kept, sizeof(*kept), mapping_key_cmp))
                        (void) bpf_map_delete_elem(p->unwinder->maps.mappings_fd, &stale[i]);
}

/* (Re)reads the process's mappings. The new entries go in before the old
 * ones that are gone come out, and the process stays ready throughout: a
 * reload after a dlopen() does not make its samples pending. */
/* What the walker may use of an entry: executable, in user space. */
static bool maps_entry_wanted(char *line, ProcMapsEntry *e) {
        return proc_maps_parse_line(line, e) >= 0 && proc_maps_entry_executable(e) &&
               e->start <= 0x00007fffffffffffULL; /* not [vsyscall] */
}

static uint64_t fnv1a_u64(uint64_t h, uint64_t v) {
        for (unsigned i = 0; i < 8; i++) {
                h ^= (v >> (8 * i)) & 0xff;
                h *= UINT64_C(0x100000001b3);
        }
        return h;
}

/* A digest of the executable mappings f lists (each one's range, offset,
 * device, inode, deletion), f rewound after. */
static int maps_digest(FILE *f, char **line, size_t *alloc, uint64_t *ret) {
        uint64_t h = UINT64_C(0xcbf29ce484222325);

        while (getline(line, alloc, f) > 0) {
                ProcMapsEntry e;

                if (!maps_entry_wanted(*line, &e))
                        continue;
                h = fnv1a_u64(h, e.start);
                h = fnv1a_u64(h, e.end);
                h = fnv1a_u64(h, e.pgoff);
                h = fnv1a_u64(h, (uint64_t) e.major << 32 | e.minor);
                h = fnv1a_u64(h, e.inode << 1 | e.deleted);
        }
        if (ferror(f))
                return errno == ESRCH ? -ESRCH : -EIO;
        rewind(f);
        *ret = h;
        return 0;
}

/* Reads the process's executable mappings and loads them (their files'
 * tables, the walker's map entries). With may_skip, mappings the same as
 * at the last complete load are not loaded again: returns 1. */
static int process_load(UnwindProcess *p, bool may_skip) {
        Unwinder *u = p->unwinder;
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        _cleanup_(maps_load_done) MapsLoad l = {};
        size_t alloc = 0;
        struct cgprof_unwind_proc ready = { .start_time = p->start_time };
        uint32_t pid = (uint32_t) p->pid;
        uint64_t digest = 0;
        int r = 0;

        f = proc_maps_fopen(u->maps_cache, "/proc", p->pid);
        if (!f)
                return errno == ENOENT ? -ESRCH : negative_errno();
        r = maps_digest(f, &line, &alloc, &digest);
        if (r < 0)
                return r;
        if (may_skip && p->have_digest && digest == p->digest) {
                /* Nothing to load; the walker may ask again (this clears
                 * the request it made), as after a load. */
                if (bpf_map_update_elem(u->maps.procs_fd, &pid, &ready, BPF_ANY) < 0)
                        return negative_errno();
                return 1;
        }

        p->loaded_usec = now_usec(CLOCK_MONOTONIC);
        p->have_digest = false;
        while (getline(&line, &alloc, f) > 0) {
                ProcMapsEntry e;

                if (!maps_entry_wanted(line, &e))
                        continue;
                r = maps_load_entry(p, &l, &e);
                if (r < 0)
                        break;
        }
        if (r >= 0 && ferror(f))
                r = errno == ESRCH ? -ESRCH : -EIO;
        /* What the read itself left out (the same bounds). */
        l.left_out += proc_maps_cache_dropped(u->maps_cache, "/proc", p->pid);
        if (r >= 0 && l.n_maps == 0)
                /* A zombie, or in the middle of exec(): the exec() or its
                 * first sample will tell us again. */
                r = -EAGAIN;
        if (r >= 0)
                process_note_capped(p, l.left_out);

        process_drop_stale_keys(p, &l, r >= 0);
        if (r < 0) {
                for (size_t i = 0; i < l.n_maps; i++)
                        file_unref(u, l.maps[i].file);
                return r;
        }

        for (size_t i = 0; i < p->n_mappings; i++)
                file_unref(u, p->mappings[i].file);
        free(p->mappings);
        free(p->keys);
        p->mappings = TAKE_PTR(l.maps);
        p->n_mappings = l.n_maps;
        p->keys = TAKE_PTR(l.keys);
        p->n_keys = l.n_keys;

        builds_pump(u); /* the tables of the files new to us */

        /* Everything in place: the walker may use the tables. */
        if (bpf_map_update_elem(u->maps.procs_fd, &pid, &ready, BPF_ANY) < 0)
                return negative_errno();
        p->digest = digest;
        p->have_digest = true;
        log_debug("PID %d: %zu executable mappings, %zu map entries loaded for unwinding in %.1f ms (%.1f "
                  "ms after "
                  "it started).",
                  (int) p->pid, p->n_mappings, p->n_keys,
                  (double) (now_usec(CLOCK_MONOTONIC) - p->loaded_usec) / 1e3,
                  (double) (now_usec(CLOCK_MONOTONIC) * 1000 - p->start_time) / 1e6);
        return 0;
}

int unwinder_process_ref(Unwinder *u, pid_t pid, uint64_t start_time) {
        UnwindProcess *p = process_find(u, pid);
        int r;

        if (p && p->start_time == start_time && !p->exited) {
                /* Another holder (a session, or the next program after
                 * exec()): its mappings may have changed. */
                p->n_ref++;
                r = process_load(p, false);
                if (r < 0 && r != -EAGAIN)
                        log_debug_errno(r, "Failed to reload the mappings of PID %d for unwinding: %m",
                                        (int) pid);
                return 0;
        }
        if (p)
                process_free(p); /* the PID was reused */

        p = calloc(1, sizeof(*p));
        if (!p)
                return -ENOMEM;
        p->unwinder = u;
        p->pid = pid;
        p->start_time = start_time;
        p->n_ref = 1;
        p->pidfd = (int) syscall(SYS_pidfd_open, pid, 0);
        if (p->pidfd < 0) {
                r = errno == ESRCH ? -ESRCH : negative_errno();
                free(p);
                return r;
        }
        if (!tsearch(p, &u->processes, process_cmp)) {
                safe_close(p->pidfd);
                free(p);
                return -ENOMEM;
        }
        u->stats.processes++;
        r = sd_event_add_io(u->event, &p->exit_source, p->pidfd, EPOLLIN, on_process_exit, p);
        if (r < 0) {
                process_free(p);
                return r;
        }
        (void) sd_event_source_set_description(p->exit_source, "unwind-process-exit");

        r = process_load(p, false);
        if (r < 0) {
                log_debug_errno(r, "Failed to load the mappings of PID %d for unwinding: %m", (int) pid);
                process_free(p);
                return r;
        }
        return 0;
}

void unwinder_process_unref(Unwinder *u, pid_t pid, uint64_t start_time) {
        UnwindProcess *p = process_find(u, pid);

        if (!p || p->start_time != start_time)
                return;
        if (--p->n_ref == 0)
                process_free(p);
}

int unwinder_process_reload(Unwinder *u, pid_t pid, uint64_t start_time, uint64_t min_interval_usec) {
        UnwindProcess *p = process_find(u, pid);
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        int r;

        if (!p || p->start_time != start_time || p->exited)
                return -ENOENT;
        if (min_interval_usec > 0 && now - p->loaded_usec < min_interval_usec)
                return 0;
        /* A walk met an address outside what was loaded: for a capped
         * process that is what was left out; reading them all again would
         * find the same (at most once a minute, for a dlopen()). */
        if (p->capped && now - p->loaded_usec < 60 * USEC_PER_SEC)
                return 0;
        u->stats.reloads++;
        r = process_load(p, true);
        if (r == 1) {
                /* The same mappings: the address was in no new one (a walk
                 * gone astray, say a frame-pointer step in a library built
                 * without them). */
                u->stats.reloads_unchanged++;
                return 0;
        }
        if (r < 0)
                log_debug_errno(r, "Failed to reload the mappings of PID %d for unwinding: %m", (int) pid);
        return r;
}

static const ProcMapping *mapping_find(Unwinder *u, pid_t pid, uint64_t addr) {
        UnwindProcess *p = process_find(u, pid);

        if (!p)
                return NULL;
        for (size_t i = 0; i < p->n_mappings; i++)
                if (addr >= p->mappings[i].start && addr < p->mappings[i].end)
                        return &p->mappings[i];
        return NULL;
}

const char *unwinder_describe(Unwinder *u, pid_t pid, uint64_t addr) {
        const ProcMapping *pm = mapping_find(u, pid, addr);

        if (!pm)
                return NULL;
        /* The file's says where its build is now. */
        return pm->file && pm->file->describe ? pm->file->describe : pm->describe;
}

int unwinder_frame_rule(Unwinder *u, pid_t pid, uint64_t addr, uint8_t *ret_rule) {
        const ProcMapping *pm = mapping_find(u, pid, addr);
        struct cgprof_unwind_rule rule;
        uint64_t rel;

        if (!pm || !pm->file || pm->file->state != FILE_LOADED)
                return -ENOENT;
        rel = addr - pm->bias - pm->file->base;
        if (rel > UINT32_MAX || unwind_store_rule(u->store, &pm->file->placement, (uint32_t) rel, &rule) < 0)
                return -ENOENT;
        /* A NONE rule: no FDE there. */
        if (CGPROF_UNWIND_CFA(rule.rule) == CGPROF_CFA_NONE)
                return -ENOENT;
        *ret_rule = rule.rule;
        return 0;
}

static void exited_action(const void *nodep, VISIT which, void *userdata) {
        UnwindProcess *p = *(UnwindProcess *const *) nodep;
        UnwindProcess ***list = userdata;

        if ((which == postorder || which == leaf) && p->exited && ++p->exited_ticks > 2)
                *(*list)++ = p;
}

void unwinder_tick(Unwinder *u) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        _cleanup_free_ UnwindProcess **gone = NULL;

        if (u->stats.processes > 0) {
                gone = calloc(u->stats.processes, sizeof(UnwindProcess *));
                if (gone) {
                        UnwindProcess **end = gone;
                        twalk_r(u->processes, exited_action, &end);
                        for (UnwindProcess **i = gone; i < end; i++)
                                process_free(*i);
                }
        }

        while (u->unused_first && now - u->unused_first->unused_since >= UNUSED_GRACE_USEC)
                file_free(u, u->unused_first);
        builds_pump(u);
}

void unwinder_stats(const Unwinder *u, UnwinderStats *ret) {
        UnwindStoreStats ss;

        *ret = u->stats;
        unwind_store_stats(u->store, &ss);
        ret->rows_used = ss.cells_used;
        ret->rows_max = ss.cells_max;
        ret->shards = ss.shards;
        ret->shards_max = ss.shards_max;
        ret->rules = ss.rules;
        ret->bytes_used = ss.bytes_used;
        ret->bytes_budget = ss.bytes_budget;
        ret->bytes_fixed = ss.bytes_fixed;
}

int unwinder_new(sd_event *event, const SamplerUnwindMaps *maps, Unwinder **ret) {
        _cleanup_(unwinder_freep) Unwinder *u = NULL;
        int r;

        if (elf_version(EV_CURRENT) == EV_NONE)
                return -EINVAL;
        u = calloc(1, sizeof(*u));
        if (!u)
                return -ENOMEM;
        u->event = sd_event_ref(event);
        u->maps = *maps;
        u->next_table = 1;
        u->table_used[0] = 1; /* "no table" */

        r = unwind_store_new(maps, &u->store);
        if (r < 0)
                return r;
        r = unwind_rules_new(&u->rules);
        if (r < 0)
                return r;
        /* Builds take long (100 ms for the largest libraries) and the
         * walker waits for them: at the loop's priority (at nice 10 beside
         * a busy workload a build took 10 times longer). */
        r = worker_new(event, "unwind-build", 0, &u->worker);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(u);
        return 0;
}

static void process_free_action(void *p) {
        UnwindProcess *x = p;
        Unwinder *u = x->unwinder;

        process_unload(x);
        sd_event_source_disable_unref(x->exit_source);
        safe_close(x->pidfd);
        u->stats.processes--;
        free(x);
}

void unwinder_set_maps_cache(Unwinder *x, ProcMapsCache *c) {
        x->maps_cache = c;
}

Unwinder *unwinder_free(Unwinder *u) {
        if (!u)
                return NULL;
        /* The build on the worker ends, its result is dropped. */
        u->freeing = true;
        u->worker = worker_free(u->worker);
        tdestroy(u->processes, process_free_action);
        u->processes = NULL;
        file_unref(u, TAKE_PTR(u->vdso));
        while (u->unused_first)
                file_free(u, u->unused_first);
        while (u->queue_first)
                file_free(u, u->queue_first); /* pending, held by nobody (none left) */
        unwind_store_free(u->store);
        unwind_rules_free(u->rules);
        sd_event_unref(u->event);
        free(u);
        return NULL;
}
