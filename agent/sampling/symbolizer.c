/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Symbolization of sampled addresses (see symbolizer.h for the model).
 *
 * The cache. Every executable file a snapshot maps is one FileEntry, keyed by
 * (st_dev, st_ino) of the file as opened through /proc/PID/map_files (so the
 * same libc seen by a hundred processes, or by processes in containers that
 * share an image layer, is loaded once), and checked against size and mtime
 * so that a reused inode number does not bring back another file's symbols.
 * Nothing is keyed by PID. Each mapping of a ProcessMaps snapshot holds a
 * reference on its entry; an entry nobody references goes to the front of an
 * LRU list, and the list is trimmed to max_files. A snapshot outlives its
 * process: that is what lets a short-lived process be symbolized after it
 * exited, as long as it was captured while it ran. A snapshot may also
 * outlive the Symbolizer: entries are then detached and freed with their last
 * reference.
 *
 * Where the work runs: on the caller's thread. Loading one file's symbols is
 * a bounded amount of work (an mmap()ed libelf read and a sort, milliseconds
 * even for large binaries) done once per file thanks to the cache; a capture
 * costs an open() and fstat() per executable mapping otherwise. The session
 * code calls it once per new process, not per sample.
 *
 * Kernel addresses go through /proc/kallsyms (a KallsymsCache): loaded on the
 * first kernel frame (and, while its addresses are hidden, tried again a
 * minute later), reloaded only when /proc/modules changed, compared at most
 * every 10 s. A kernel address in no symbol is an unnamed frame, never a
 * reason to reload.
 * vDSO addresses resolve through our own vDSO, the same image for every
 * process of our ABI on this kernel (compared with the process's through
 * /proc/PID/mem where we may read it, by size otherwise). */

#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>

#include "cred-check.h"
#include "elf-symtab.h"
#include "jit-maps.h"
#include "kallsyms.h"
#include "log.h"
#include "proc-maps.h"
#include "symbolizer.h"

#define MAX_FILES_DEFAULT 256U
#define KERNEL_MODULE "[kernel.kallsyms]"
#define VDSO_MODULE "[vdso]"
#define JIT_MODULE "[jit]"

/* Where a file stands with debuginfod. */
typedef enum DebuginfodState {
        DEBUGINFOD_NONE, /* not wanted: it has symbols, no build ID, or no server has its debug file */
        DEBUGINFOD_WANTED, /* to be asked for (the last request was not taken) */
        DEBUGINFOD_PENDING, /* asked for: symbolizer_debuginfod_done() will tell */
} DebuginfodState;

/* Where a file's separate debug file was found, and what it was. */
typedef struct DebugOrigin {
        bool used; /* a local debug file's symbols were adopted */
        bool in_root; /* in the process's root (else the host's debug directory) */
        dev_t dev;
        ino_t ino;
} DebugOrigin;

typedef struct FileEntry FileEntry;
struct FileEntry {
        Symbolizer *owner; /* NULL once the Symbolizer is gone */
        bool cached; /* in owner's hash table (else: vDSO, or detached) */

        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime;

        ElfSymtab *symtab; /* NULL: not an ELF file we could read; remembered as such */
        DebuginfodState debuginfod;
        /* The local debug file its symbols came from, if any: shared only
         * with processes that could have used it themselves. */
        DebugOrigin debug;
        unsigned n_ref;

        FileEntry *hash_next;
        FileEntry *lru_prev, *lru_next;
        bool in_lru;
};

typedef struct Mapping {
        uint64_t start, end, pgoff;
        /* As /proc/PID/maps shows them, to recognize an unchanged mapping on refresh. */
        unsigned maps_major, maps_minor;
        uint64_t maps_inode;
        char *path; /* without " (deleted)"; NULL for anonymous memory */
        const char *module; /* points into path, or a static string */
        bool file_backed;
        bool deleted; /* the path said " (deleted)" */
        FileEntry *file; /* a reference; NULL: nothing to resolve with */
} Mapping;

struct ProcessMaps {
        pid_t pid;
        uint64_t start_time; /* clock ticks after boot (stat field 22); 0: unknown */
        Mapping *mappings; /* executable mappings only, sorted by start */
        size_t n_mappings;
        char *proc_root; /* for the JIT files, which outlive the Symbolizer like the rest */
        JitMaps *jit; /* NULL until an address in anonymous memory asks for it */
        uint64_t jit_pass; /* the pass of its last update */
};

struct Symbolizer {
        ProcMapsCache *maps_cache; /* the Manager's (NULL: none) */
        uint64_t pass; /* symbolizer_begin_pass() */
        size_t max_files;
        char *debug_dir;
        char *proc_root;

        FileEntry **buckets;
        size_t n_buckets; /* a power of two */
        size_t n_entries;

        FileEntry *lru_head, *lru_tail; /* unreferenced entries, most recently used first */
        size_t n_lru;

        KallsymsCache *kallsyms;
        /* "[ext4]": every module name seen, kept across reloads of kallsyms. */
        char **modules;
        size_t n_modules, n_modules_alloc;

        FileEntry *vdso; /* we hold one reference */
        void *vdso_image;
        size_t vdso_size;
        bool vdso_tried;

        SymbolizerDebuginfod debuginfod; /* all NULL: none */
        uint64_t generation;
};

/* ---- file entries and the cache ---- */

static FileEntry *file_entry_free(FileEntry *e) {
        if (!e)
                return NULL;
        elf_symtab_free(e->symtab);
        free(e);
        return NULL;
}

static size_t bucket_of(const Symbolizer *s, dev_t dev, ino_t ino) {
        uint64_t h = (uint64_t) ino * UINT64_C(0x9e3779b97f4a7c15) ^
                     (uint64_t) dev * UINT64_C(0xc2b2ae3d27d4eb4f);

        h ^= h >> 29;
        return (size_t) (h & (s->n_buckets - 1));
}

static void lru_remove(Symbolizer *s, FileEntry *e) {
        if (!e->in_lru)
                return;
        DLIST_REMOVE(lru_prev, lru_next, s->lru_head, s->lru_tail, e);
        e->in_lru = false;
        s->n_lru--;
}

static void lru_push_front(Symbolizer *s, FileEntry *e) {
        DLIST_PREPEND(lru_prev, lru_next, s->lru_head, s->lru_tail, e);
        e->in_lru = true;
        s->n_lru++;
}

static void hash_remove(Symbolizer *s, FileEntry *e) {
        FileEntry **p;

        if (!e->cached)
                return;
        for (p = &s->buckets[bucket_of(s, e->dev, e->ino)]; *p; p = &(*p)->hash_next)
                if (*p == e) {
                        *p = e->hash_next;
                        break;
                }
        e->hash_next = NULL;
        e->cached = false;
        s->n_entries--;
}

static int hash_grow(Symbolizer *s) {
        FileEntry **buckets;
        size_t n, old_n = s->n_buckets;
        FileEntry **old = s->buckets;

        if (s->n_entries < s->n_buckets * 2)
                return 0;
        n = old_n ? old_n * 2 : 64;
        buckets = calloc(n, sizeof(FileEntry *));
        if (!buckets)
                return -ENOMEM;

        s->buckets = buckets;
        s->n_buckets = n;
        for (size_t i = 0; i < old_n; i++)
                while (old[i]) {
                        FileEntry *e = old[i];
                        size_t b;

                        old[i] = e->hash_next;
                        b = bucket_of(s, e->dev, e->ino);
                        e->hash_next = buckets[b];
                        buckets[b] = e;
                }
        free(old);
        return 0;
}

static int hash_add(Symbolizer *s, FileEntry *e) {
        size_t b;
        int r;

        r = hash_grow(s);
        if (r < 0)
                return r;
        b = bucket_of(s, e->dev, e->ino);
        e->hash_next = s->buckets[b];
        s->buckets[b] = e;
        e->cached = true;
        e->owner = s;
        s->n_entries++;
        return 0;
}

static void symbolizer_trim(Symbolizer *s) {
        while (s->n_lru > s->max_files) {
                FileEntry *e = s->lru_tail;

                lru_remove(s, e);
                hash_remove(s, e);
                log_debug("Dropping cached symbols of inode %ju on device %u:%u.", (uintmax_t) e->ino,
                          major(e->dev), minor(e->dev));
                file_entry_free(e);
        }
}

static FileEntry *file_entry_ref(FileEntry *e) {
        if (e->n_ref == 0 && e->owner)
                lru_remove(e->owner, e);
        e->n_ref++;
        return e;
}

static void file_entry_unref(FileEntry *e) {
        if (!e)
                return;
        if (--e->n_ref > 0)
                return;
        if (e->owner && e->cached) {
                lru_push_front(e->owner, e);
                symbolizer_trim(e->owner);
        } else
                file_entry_free(e);
}

static FileEntry *cache_find(Symbolizer *s, const struct stat *st) {
        FileEntry *e;

        if (s->n_buckets == 0)
                return NULL;
        for (e = s->buckets[bucket_of(s, st->st_dev, st->st_ino)]; e; e = e->hash_next) {
                if (e->dev != st->st_dev || e->ino != st->st_ino)
                        continue;
                if (e->size == st->st_size && e->mtime.tv_sec == st->st_mtim.tv_sec &&
                    e->mtime.tv_nsec == st->st_mtim.tv_nsec)
                        return e;

                /* The inode number was reused, or the file rewritten in place:
                 * forget the old entry (snapshots holding it keep it). */
                log_debug("Inode %ju on device %u:%u changed, reloading its symbols.",
                          (uintmax_t) st->st_ino, major(st->st_dev), minor(st->st_dev));
                hash_remove(s, e);
                e->owner = NULL;
                if (e->n_ref == 0) {
                        lru_remove(s, e);
                        file_entry_free(e);
                }
                return NULL;
        }
        return NULL;
}

/* ---- opening files ---- */

/* Loads the debug file at fd if it is one of the build build_id, with symbols. */
static int load_debug_file(int fd, const char *what, const char *build_id, ElfSymtab **ret) {
        _cleanup_(elf_symtab_freep) ElfSymtab *debug = NULL;
        int r;

        r = elf_symtab_load(fd, &debug);
        if (r < 0)
                return log_debug_errno(r, "Failed to read %s debug file of build ID %s, ignoring: %m", what,
                                       build_id);
        if (!streq_ptr(elf_symtab_build_id(debug), build_id) || !elf_symtab_has_full_symtab(debug)) {
                log_debug("The %s debug file of build ID %s does not match or has no symbols, ignoring.",
                          what, build_id);
                return -EBADMSG;
        }
        *ret = TAKE_PTR(debug);
        return 0;
}

/* A build ID's debug file, in a build-id directory rooted at /usr/lib/debug. */
static int debug_file_path(const char *build_id, char **ret) {
        if (!build_id || strlen(build_id) < 3)
                return -EINVAL;
        if (asprintf(ret, "/usr/lib/debug/.build-id/%.2s/%s.debug", build_id, build_id + 2) < 0)
                return -ENOMEM;
        return 0;
}

/* Opens the debug file of build_id as the owner of pid (creds) would: in the
 * process's root (in_root) or in the host's debug directory, every directory
 * on the way searchable by it, the file readable by it. The agent reads with
 * its own privileges what a path, often one the process controls, leads to,
 * and must not show in a report what the user could not read (a symlink to
 * a root-only file: a confused deputy). */
static int open_debug_file_as(const Symbolizer *s, pid_t pid, const Creds *creds, bool in_root,
                              const char *build_id) {
        _cleanup_free_ char *root = NULL, *path = NULL;
        _cleanup_close_ int root_fd = -EBADF;
        int fd;

        if (in_root) {
                if (asprintf(&root, "%s/%d/root", s->proc_root, (int) pid) < 0)
                        return -ENOMEM;
                if (debug_file_path(build_id, &path) < 0)
                        return -ENOMEM;
        } else if (asprintf(&path, "%s/.build-id/%.2s/%s.debug", s->debug_dir, build_id, build_id + 2) < 0)
                return -ENOMEM;
        root_fd = open(root ?: (path[0] == '/' ? "/" : "."), O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return negative_errno();

        fd = creds_open_in_root(creds, root_fd, path);
        if (fd == -EACCES)
                log_debug(
                        "Not using the %s debug file of build ID %s: the owner of PID %d (UID %u) could not "
                        "read it.",
                        in_root ? "process's" : "host's", build_id, (int) pid, (unsigned) creds->uid);
        return fd;
}

static void debug_origin_set(DebugOrigin *o, int fd, bool in_root) {
        struct stat st;

        *o = (DebugOrigin){};
        if (fstat(fd, &st) < 0)
                return;
        o->used = true;
        o->in_root = in_root;
        o->dev = st.st_dev;
        o->ino = st.st_ino;
}

/* Adopts a separate debug file's symbols when the file has only .dynsym:
 * <build-id dir>/xx/yyyy.debug in the process's own root first (a container
 * image with -dbgsym packages installed), then in the host's debug directory.
 * Either is used only if the process's owner could read it.
 * ret_origin: where the symbols came from, when they did. */
static void load_debug_symbols(const Symbolizer *s, pid_t pid, ElfSymtab *symtab, DebugOrigin *ret_origin) {
        _cleanup_(elf_symtab_freep) ElfSymtab *debug = NULL;
        _cleanup_(creds_done) Creds creds = {};
        _cleanup_close_ int fd = -EBADF;
        const char *build_id = elf_symtab_build_id(symtab);
        DebugOrigin origin = {};
        int r;

        if (!build_id || strlen(build_id) < 3 || elf_symtab_has_full_symtab(symtab))
                return;

        r = creds_from_pid(s->proc_root, pid, &creds);
        if (r < 0) {
                log_debug_errno(r,
                                "Failed to read the credentials of PID %d, not using debug files for it: %m",
                                (int) pid);
                return;
        }

        fd = open_debug_file_as(s, pid, &creds, true, build_id);
        if (fd >= 0) {
                if (load_debug_file(fd, "process's", build_id, &debug) >= 0)
                        debug_origin_set(&origin, fd, true);
                fd = safe_close(fd);
        }

        if (!debug) {
                fd = open_debug_file_as(s, pid, &creds, false, build_id);
                if (fd < 0)
                        return;
                if (load_debug_file(fd, "host's", build_id, &debug) < 0)
                        return;
                debug_origin_set(&origin, fd, false);
        }

        r = elf_symtab_take_symbols(symtab, debug);
        if (r < 0) {
                log_debug_errno(r, "Failed to adopt debug symbols of build ID %s, ignoring: %m", build_id);
                return;
        }
        log_debug("Using debug symbols of build ID %s.", build_id);
        /* Not knowing where they came from, share them with nobody else. */
        *ret_origin = origin.used ? origin : (DebugOrigin){ .used = true };
}

/* Whether pid would have used the debug file e's symbols came from: opened
 * as its owner would, where e's was found, it is the same file (containers
 * of one image share it; a root of one's own, or a user who may not read it,
 * do not). */
static bool file_entry_shareable(const Symbolizer *s, const FileEntry *e, pid_t pid) {
        _cleanup_(creds_done) Creds creds = {};
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (!e->debug.used)
                return true;
        if (e->debug.ino == 0 || creds_from_pid(s->proc_root, pid, &creds) < 0)
                return false;
        fd = open_debug_file_as(s, pid, &creds, e->debug.in_root, elf_symtab_build_id(e->symtab));
        return fd >= 0 && fstat(fd, &st) >= 0 && st.st_dev == e->debug.dev && st.st_ino == e->debug.ino;
}

/* Whether a file's symbols could still improve with a separate debug file. */
static bool symtab_wants_debug_file(const ElfSymtab *symtab) {
        const char *build_id = elf_symtab_build_id(symtab);

        /* Not a Go binary named by its .gopclntab (with files, lines and
         * inlined calls): a debug file's .symtab would add nothing. */
        return symtab && build_id && strlen(build_id) >= 3 && !elf_symtab_has_full_symtab(symtab) &&
               elf_symtab_symbols_source(symtab) != ELF_SYMBOLS_GOPCLNTAB;
}

/* Takes the symbols of the debug file debuginfod has at hand; -ENOENT when
 * it has none (yet). */
static int file_entry_take_debuginfod(Symbolizer *s, FileEntry *e) {
        _cleanup_(elf_symtab_freep) ElfSymtab *debug = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *build_id = elf_symtab_build_id(e->symtab);
        int r;

        fd = s->debuginfod.open_cached(s->debuginfod.userdata, build_id);
        if (fd < 0)
                return fd;
        r = load_debug_file(fd, "debuginfod", build_id, &debug);
        if (r < 0)
                return r;
        r = elf_symtab_take_symbols(e->symtab, debug);
        if (r < 0)
                return r;
        (void) elf_symtab_set_symbols_source(e->symtab, ELF_SYMBOLS_DEBUGINFOD);
        e->debuginfod = DEBUGINFOD_NONE;
        log_debug("Using the debuginfod debug file of build ID %s.", build_id);
        return 0;
}

/* A file without symbols of its own or a local debug file: its debug file
 * from debuginfod's cache, or asked for. Nothing is waited for. */
static void file_entry_want_debuginfod(Symbolizer *s, FileEntry *e) {
        const char *build_id = elf_symtab_build_id(e->symtab);
        int r;

        if (e->debuginfod == DEBUGINFOD_NONE || e->debuginfod == DEBUGINFOD_PENDING)
                return;
        if (file_entry_take_debuginfod(s, e) >= 0)
                return;
        r = s->debuginfod.request(s->debuginfod.userdata, build_id);
        if (r >= 0)
                e->debuginfod = DEBUGINFOD_PENDING;
        else if (r == -ENOENT)
                e->debuginfod = DEBUGINFOD_NONE; /* no server has it (lately) */
        else
                log_debug_errno(r, "Not asking debuginfod for build ID %s now: %m", build_id);
}

void symbolizer_set_debuginfod(Symbolizer *s, const SymbolizerDebuginfod *d) {
        if (!s)
                return;
        s->debuginfod = d && d->open_cached && d->request ? *d : (SymbolizerDebuginfod){};
}

int symbolizer_debuginfod_done(Symbolizer *s, const char *build_id, int result) {
        int n = 0, r;

        if (!s || !build_id)
                return -EINVAL;
        if (!s->debuginfod.open_cached)
                return 0;

        /* Every file of that build ID (one per (device, inode): the same
         * binary in several containers' layers) waiting for it. */
        for (size_t i = 0; i < s->n_buckets; i++)
                for (FileEntry *e = s->buckets[i]; e; e = e->hash_next) {
                        if (e->debuginfod == DEBUGINFOD_NONE ||
                            !streq_ptr(elf_symtab_build_id(e->symtab), build_id))
                                continue;
                        if (result < 0) {
                                /* Missing: never again (the fetcher remembers
                                 * for how long); failed: at a later capture. */
                                e->debuginfod = result == -ENOENT ? DEBUGINFOD_NONE : DEBUGINFOD_WANTED;
                                continue;
                        }
                        r = file_entry_take_debuginfod(s, e);
                        if (r < 0) {
                                log_debug_errno(r,
                                                "Failed to use the debuginfod debug file of build ID %s, "
                                                "ignoring: %m",
                                                build_id);
                                e->debuginfod = DEBUGINFOD_NONE;
                                continue;
                        }
                        n++;
                }
        if (n > 0)
                s->generation++;
        return n;
}

uint64_t symbolizer_generation(const Symbolizer *s) {
        return s ? s->generation : 0;
}

/* Returns a new reference to the cache entry of the file open at fd. */
static int file_entry_get(Symbolizer *s, pid_t pid, int fd, const char *path, FileEntry **ret) {
        _cleanup_free_ FileEntry *e = NULL;
        struct stat st;
        FileEntry *found;
        bool detached = false;
        int r;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode))
                return -EBADFD;

        found = cache_find(s, &st);
        if (found && !file_entry_shareable(s, found, pid)) {
                /* Its symbols came from a debug file this process could not
                 * have used: its own entry, not cached, symbols looked up
                 * for it. */
                log_debug("Not sharing the debug symbols of %s with PID %d: its owner could not read their "
                          "debug file, or its root leads to another.",
                          path, (int) pid);
                detached = true;
        } else if (found) {
                if (found->debuginfod == DEBUGINFOD_WANTED)
                        file_entry_want_debuginfod(s, found); /* not taken last time: again */
                *ret = file_entry_ref(found);
                return 0;
        }

        e = calloc(1, sizeof(FileEntry));
        if (!e)
                return -ENOMEM;
        e->dev = st.st_dev;
        e->ino = st.st_ino;
        e->size = st.st_size;
        e->mtime = st.st_mtim;

        r = elf_symtab_load(fd, &e->symtab);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                /* Remembered as unreadable, so it is not retried per process. */
                log_debug_errno(r, "Failed to read ELF symbols of %s, ignoring: %m", path);
        else {
                if (elf_symtab_minidebuginfo_error(e->symtab) < 0)
                        log_debug_errno(elf_symtab_minidebuginfo_error(e->symtab),
                                        "Failed to read the MiniDebugInfo of %s, using .dynsym: %m", path);
                if (elf_symtab_gopclntab_error(e->symtab) < 0)
                        log_debug_errno(elf_symtab_gopclntab_error(e->symtab),
                                        "Failed to read the Go symbols (.gopclntab) of %s, ignoring: %m",
                                        path);
                else if (elf_symtab_go_version(e->symtab))
                        log_debug("%s is a Go program (%s), symbols from %s.", path,
                                  elf_symtab_go_version(e->symtab),
                                  elf_symbols_source_to_string(elf_symtab_symbols_source(e->symtab)));
                load_debug_symbols(s, pid, e->symtab, &e->debug);
                /* (debuginfod's late answers go to cached entries only) */
                if (!detached && s->debuginfod.request && symtab_wants_debug_file(e->symtab)) {
                        e->debuginfod = DEBUGINFOD_WANTED;
                        file_entry_want_debuginfod(s, e);
                }
        }

        if (detached) {
                *ret = file_entry_ref(TAKE_PTR(e)); /* no owner: freed with its last reference */
                return 0;
        }
        r = hash_add(s, e);
        if (r < 0) {
                elf_symtab_free(e->symtab);
                return r;
        }
        *ret = file_entry_ref(TAKE_PTR(e));
        return 0;
}

/* ---- the vDSO ---- */

static void symbolizer_load_vdso(Symbolizer *s) {
        _cleanup_free_ FileEntry *e = NULL;
        _cleanup_free_ void *image = NULL;
        const void *own;
        size_t size;
        int r;

        if (s->vdso_tried)
                return;
        s->vdso_tried = true;

        if (proc_self_vdso(&own, &size) < 0)
                return;
        e = calloc(1, sizeof(FileEntry));
        image = malloc(size);
        if (!e || !image)
                return;
        memcpy(image, own, size);
        r = elf_symtab_load_memory(image, size, &e->symtab);
        if (r < 0) {
                log_debug_errno(r, "Failed to read the vDSO's symbols, ignoring: %m");
                return;
        }
        e->owner = s;
        s->vdso_image = TAKE_PTR(image);
        s->vdso_size = size;
        s->vdso = file_entry_ref(TAKE_PTR(e));
}

/* Whether the process's vDSO is ours (a 32-bit process has another): the
 * same bytes, or, where its memory cannot be read, the same size. */
static bool vdso_matches(Symbolizer *s, pid_t pid, const Mapping *mp) {
        _cleanup_free_ char *path = NULL;
        _cleanup_free_ void *buf = NULL;
        _cleanup_close_ int fd = -EBADF;
        ssize_t n;

        symbolizer_load_vdso(s);
        if (!s->vdso || mp->end - mp->start != s->vdso_size)
                return false;

        if (asprintf(&path, "%s/%d/mem", s->proc_root, (int) pid) < 0)
                return false;
        fd = open(path, O_RDONLY | O_CLOEXEC);
        buf = malloc(s->vdso_size);
        if (fd < 0 || !buf)
                return true;
        n = pread(fd, buf, s->vdso_size, (off_t) mp->start);
        if (n != (ssize_t) s->vdso_size)
                return true;
        return memcmp(buf, s->vdso_image, s->vdso_size) == 0;
}

/* ---- /proc/PID/maps ---- */

static void mapping_done(Mapping *m) {
        file_entry_unref(m->file);
        free(m->path);
        *m = (Mapping){};
}

static void mappings_free(Mapping *mappings, size_t n) {
        for (size_t i = 0; i < n; i++)
                mapping_done(&mappings[i]);
        free(mappings);
}

ProcessMaps *process_maps_free(ProcessMaps *m) {
        if (!m)
                return NULL;
        mappings_free(m->mappings, m->n_mappings);
        jit_maps_free(m->jit);
        free(m->proc_root);
        free(m);
        return NULL;
}

static int mapping_compare(const void *a, const void *b) {
        const Mapping *x = a, *y = b;

        return CMP(x->start, y->start);
}

static const Mapping *mappings_find(const Mapping *mappings, size_t n, uint64_t addr) {
        /* First mapping starting above addr; the one before may hold it. */
        size_t lo = SORTED_UPPER_BOUND(mappings, n, _e->start, addr);

        if (lo == 0 || addr >= mappings[lo - 1].end)
                return NULL;
        return &mappings[lo - 1];
}

bool process_maps_covers(const ProcessMaps *m, uint64_t addr) {
        return m && mappings_find(m->mappings, m->n_mappings, addr);
}

/* Fills everything but the file reference; returns 0 for a line to skip
 * (not executable). */
static int parse_maps_line(char *line, Mapping *ret) {
        const char *module = NULL, *slash;
        ProcMapsEntry e;
        char *path;
        int r;

        r = proc_maps_parse_line(line, &e);
        if (r < 0)
                return r;
        if (!proc_maps_entry_executable(&e))
                return 0;

        *ret = (Mapping){
                .start = e.start,
                .end = e.end,
                .pgoff = e.pgoff,
                .maps_major = e.major,
                .maps_minor = e.minor,
                .maps_inode = e.inode,
                .deleted = e.deleted,
        };
        if (e.path[0] == '\0')
                return 1; /* anonymous: JIT code and the like */

        path = strdup(e.path);
        if (!path)
                return -ENOMEM;
        if (proc_maps_entry_file_backed(&e)) {
                slash = strrchr(path, '/');
                module = slash[1] ? slash + 1 : path;
                ret->file_backed = true;
        } else if (streq(path, VDSO_MODULE))
                module = VDSO_MODULE;
        else
                module = path; /* "[vsyscall]", "[anon:name]" */

        ret->path = path;
        ret->module = module;
        return 1;
}

static bool mapping_same(const Mapping *a, const Mapping *b) {
        return a->start == b->start && a->end == b->end && a->pgoff == b->pgoff &&
               a->maps_major == b->maps_major && a->maps_minor == b->maps_minor &&
               a->maps_inode == b->maps_inode && a->file_backed == b->file_backed &&
               streq_ptr(a->path, b->path);
}

/* Takes a reference to the symbols of a file-backed mapping, if we can. */
static int mapping_attach_file(Symbolizer *s, pid_t pid, Mapping *mp) {
        _cleanup_close_ int fd = -EBADF;
        ProcMapsEntry e = {
                .start = mp->start,
                .end = mp->end,
                .pgoff = mp->pgoff,
                .major = mp->maps_major,
                .minor = mp->maps_minor,
                .inode = mp->maps_inode,
                .path = mp->path,
                .deleted = mp->deleted,
        };
        int r;

        fd = proc_maps_open_file(s->proc_root, pid, &e);
        if (fd == -ESTALE)
                log_debug("%s of PID %d was replaced, not symbolizing it.", mp->path, (int) pid);
        if (fd < 0) {
                log_debug_errno(fd, "Failed to open %s of PID %d, ignoring: %m", mp->path, (int) pid);
                return fd;
        }

        r = file_entry_get(s, pid, fd, mp->path, &mp->file);
        if (r < 0)
                log_debug_errno(r, "Failed to load symbols of %s of PID %d, ignoring: %m", mp->path,
                                (int) pid);
        return r;
}

/* The start time (clock ticks after boot) of a live process; -ESRCH when it
 * is gone or a zombie. */
static int read_start_time(const Symbolizer *s, pid_t pid, uint64_t *ret) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *path = NULL, *line = NULL;
        size_t alloc = 0;
        char *p, *tok, *end, *save = NULL;
        unsigned long long v;

        if (asprintf(&path, "%s/%d/stat", s->proc_root, (int) pid) < 0)
                return -ENOMEM;
        f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? -ESRCH : negative_errno();
        if (getline(&line, &alloc, f) < 0)
                return ferror(f) ? (errno == ESRCH ? -ESRCH : -EIO) : -ENODATA;

        /* "pid (comm) state ppid ...": comm may hold spaces and parentheses. */
        p = strrchr(line, ')');
        if (!p)
                return -EBADMSG;
        p++;
        tok = strtok_r(p, " \n", &save); /* field 3: state */
        if (tok && (streq(tok, "Z") || streq(tok, "X") || streq(tok, "x")))
                return -ESRCH;
        for (unsigned field = 3; tok && field < 22; field++)
                tok = strtok_r(NULL, " \n", &save);
        if (!tok)
                return -EBADMSG;

        errno = 0;
        v = strtoull(tok, &end, 10);
        if (errno != 0 || end == tok)
                return errno ? -errno : -EBADMSG;
        *ret = v;
        return 0;
}

/* A process's executable mappings kept, at most (see proc-maps.h): a
 * process that maps a file 65,000 times would otherwise cost 5 MB and a
 * file open per mapping, in each forked child. */
#define PROCESS_MAPPINGS_MAX PROC_MAPS_EXECUTABLE_MAX
#define PROCESS_SAME_FILE_RUN_MAX PROC_MAPS_SAME_FILE_RUN_MAX /* ... and of one file in a row */

/* Reads the executable mappings of pid. Mappings found unchanged in 'old'
 * (a refresh) share its file references instead of reopening the files,
 * and so does a mapping of the same file as the one before it. */
static int read_mappings(Symbolizer *s, pid_t pid, const Mapping *old, size_t n_old, Mapping **ret,
                         size_t *ret_n) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        Mapping *mappings = NULL;
        size_t n = 0, n_alloc = 0, alloc = 0, left_out = 0, run = 0;
        int r;

        f = proc_maps_fopen(s->maps_cache, s->proc_root, pid);
        if (!f)
                return errno == ENOENT ? -ESRCH : negative_errno();

        while (getline(&line, &alloc, f) > 0) {
                Mapping mp = {}, *grown;
                const Mapping *prev;

                r = parse_maps_line(line, &mp);
                if (r == -ENOMEM)
                        goto fail;
                if (r <= 0)
                        continue;
                if (n >= PROCESS_MAPPINGS_MAX) {
                        mapping_done(&mp);
                        left_out++;
                        continue;
                }

                if (n >= n_alloc) {
                        size_t na = MAX(n_alloc * 2, (size_t) 32);

                        grown = reallocarray(mappings, na, sizeof(Mapping));
                        if (!grown) {
                                mapping_done(&mp);
                                r = -ENOMEM;
                                goto fail;
                        }
                        mappings = grown;
                        n_alloc = na;
                }

                const Mapping *last = n > 0 ? &mappings[n - 1] : NULL;
                bool same_file = mp.file_backed && last && last->file && last->file_backed &&
                                 last->maps_major == mp.maps_major && last->maps_minor == mp.maps_minor &&
                                 last->maps_inode == mp.maps_inode && last->deleted == mp.deleted &&
                                 streq(last->path, mp.path);
                run = same_file ? run + 1 : 0;
                if (run >= PROCESS_SAME_FILE_RUN_MAX) {
                        mapping_done(&mp);
                        left_out++;
                        continue;
                }
                prev = mappings_find(old, n_old, mp.start);
                if (prev && prev->file && mapping_same(prev, &mp))
                        mp.file = file_entry_ref(prev->file);
                else if (same_file)
                        mp.file = file_entry_ref(last->file); /* the same file again: opened once */
                else if (mp.file_backed) {
                        r = mapping_attach_file(s, pid, &mp);
                        if (r == -ENOMEM) {
                                mapping_done(&mp);
                                goto fail;
                        }
                } else if (mp.module && streq(mp.module, VDSO_MODULE) && vdso_matches(s, pid, &mp))
                        mp.file = file_entry_ref(s->vdso);

                mappings[n++] = mp;
        }
        if (ferror(f)) {
                /* ESRCH from a read: the process is exiting. */
                r = errno == ESRCH ? -ESRCH : -EIO;
                goto fail;
        }

        left_out += proc_maps_cache_dropped(s->maps_cache, s->proc_root, pid);
        if (left_out > 0)
                log_debug(
                        "PID %d: %zu executable mappings left out (beyond %d, or beyond %d of one file in a "
                        "row).",
                        (int) pid, left_out, PROCESS_MAPPINGS_MAX, PROCESS_SAME_FILE_RUN_MAX);
        if (n > 1)
                qsort(mappings, n, sizeof(Mapping), mapping_compare);
        *ret = mappings;
        *ret_n = n;
        return 0;

fail:
        mappings_free(mappings, n);
        return r;
}

int symbolizer_capture(Symbolizer *s, pid_t pid, ProcessMaps **ret) {
        _cleanup_(process_maps_freep) ProcessMaps *m = NULL;
        uint64_t start_time = 0;
        int r;

        if (!s || pid <= 0 || !ret)
                return -EINVAL;

        r = read_start_time(s, pid, &start_time);
        if (r == -ESRCH)
                return r;
        if (r < 0)
                start_time = 0; /* unknown: refresh cannot tell a reused PID */

        m = calloc(1, sizeof(ProcessMaps));
        if (!m)
                return -ENOMEM;
        m->pid = pid;
        m->start_time = start_time;
        m->jit_pass = UINT64_MAX;
        m->proc_root = strdup(s->proc_root);
        if (!m->proc_root)
                return -ENOMEM;

        r = read_mappings(s, pid, NULL, 0, &m->mappings, &m->n_mappings);
        if (r < 0)
                return r;

        /* Exited while we read? A zombie's maps are empty. */
        if (m->n_mappings == 0 && read_start_time(s, pid, &start_time) == -ESRCH)
                return -ESRCH;

        log_debug("Captured %zu executable mappings of PID %d.", m->n_mappings, (int) pid);
        *ret = TAKE_PTR(m);
        return 0;
}

int symbolizer_refresh(Symbolizer *s, ProcessMaps *m) {
        Mapping *mappings = NULL;
        uint64_t start_time = 0;
        size_t n = 0;
        int r;

        if (!s || !m)
                return -EINVAL;

        r = read_start_time(s, m->pid, &start_time);
        if (r == -ESRCH)
                return r;
        if (r >= 0 && m->start_time != 0 && start_time != m->start_time)
                return -ESRCH; /* the PID belongs to another process now */

        r = read_mappings(s, m->pid, m->mappings, m->n_mappings, &mappings, &n);
        if (r < 0)
                return r;
        if (n == 0 && read_start_time(s, m->pid, &start_time) == -ESRCH) {
                /* Exited between the two reads: keep what we had. */
                free(mappings);
                return -ESRCH;
        }

        mappings_free(m->mappings, m->n_mappings);
        m->mappings = mappings;
        m->n_mappings = n;
        return 0;
}

/* ---- JIT code ---- */

void symbolizer_begin_pass(Symbolizer *s) {
        if (s)
                s->pass++;
}

/* Brings the process's JIT files up to date, once per pass: reads what they
 * gained, and looks for those not found yet while the PID is still the
 * process's. */
static void process_maps_update_jit(Symbolizer *s, ProcessMaps *m) {
        const Mapping *dump = NULL;
        uint64_t start_time;
        bool alive;
        int r;

        if (!s || m->jit_pass == s->pass)
                return;
        m->jit_pass = s->pass;

        if (!m->jit) {
                r = jit_maps_new(m->proc_root, m->pid, &m->jit);
                if (r < 0)
                        return (void) log_debug_errno(r, "Failed to set up the JIT symbols of PID %d: %m",
                                                      (int) m->pid);
        }
        alive = read_start_time(s, m->pid, &start_time) >= 0 &&
                (m->start_time == 0 || start_time == m->start_time);
        for (size_t i = 0; alive && i < m->n_mappings && !dump; i++)
                if (m->mappings[i].file_backed && jit_dump_file_name(m->mappings[i].path))
                        dump = &m->mappings[i];

        ProcMapsEntry e = {};
        if (dump)
                e = (ProcMapsEntry){
                        .start = dump->start,
                        .end = dump->end,
                        .pgoff = dump->pgoff,
                        .major = dump->maps_major,
                        .minor = dump->maps_minor,
                        .inode = dump->maps_inode,
                        .path = dump->path,
                        .deleted = dump->deleted,
                };
        (void) jit_maps_update(m->jit, alive, dump ? &e : NULL);
}

/* An address in anonymous executable memory, or in no mapping: named by the
 * process's JIT files if it has some. Returns false when it has none. */
static bool resolve_jit(Symbolizer *s, ProcessMaps *m, const Mapping *mp, uint64_t addr,
                        ResolvedFrame *ret) {
        JitSymbolInfo info;

        process_maps_update_jit(s, m);
        if (!jit_maps_lookup(m->jit, addr, &info))
                return false;
        *ret = (ResolvedFrame){
                .name = info.name,
                .module = JIT_MODULE,
                .offset = info.name ? info.offset : addr,
                .path = info.path,
                .map_start = mp ? mp->start : 0,
                .map_end = mp ? mp->end : 0,
                .symbols_source = info.source,
        };
        return true;
}

/* ---- resolution ---- */

/* Where a file's symbols came from, and whether better ones are on their way. */
static const char *file_symbols_source(const FileEntry *e) {
        ElfSymbolsSource source = e ? elf_symtab_symbols_source(e->symtab) : ELF_SYMBOLS_NONE;

        if (e && e->debuginfod == DEBUGINFOD_PENDING)
                switch (source) {
                case ELF_SYMBOLS_DYNSYM:
                        return "dynsym (debuginfod pending)";
                case ELF_SYMBOLS_MINIDEBUGINFO:
                        return "minidebuginfo (debuginfod pending)";
                default:
                        return "none (debuginfod pending)";
                }
        /* A section that should have named the functions but was broken
         * (truncated, wrong magic, a decompression bomb): say so. */
        if (e && e->symtab && elf_symtab_gopclntab_error(e->symtab) < 0)
                switch (source) {
                case ELF_SYMBOLS_DYNSYM:
                        return "dynsym (.gopclntab unusable)";
                case ELF_SYMBOLS_NONE:
                        return "none (.gopclntab unusable)";
                default:
                        break;
                }
        if (e && e->symtab && elf_symtab_minidebuginfo_error(e->symtab) < 0)
                switch (source) {
                case ELF_SYMBOLS_DYNSYM:
                        return "dynsym (.gnu_debugdata unusable)";
                case ELF_SYMBOLS_NONE:
                        return "none (.gnu_debugdata unusable)";
                default:
                        break;
                }
        return elf_symbols_source_to_string(source);
}

int symbolizer_resolve_user(Symbolizer *s, ProcessMaps *m, uint64_t addr, ResolvedFrame *ret) {
        size_t n;

        return symbolizer_resolve_user_inline(s, m, addr, ret, 1, &n);
}

int symbolizer_resolve_user_inline(Symbolizer *s, ProcessMaps *m, uint64_t addr, ResolvedFrame *frames,
                                   size_t max, size_t *ret_n) {
        ElfFrame ef[SYMBOLIZER_INLINE_MAX];
        const Mapping *mp;
        uint64_t file_off, vaddr;
        size_t n = 0;

        if (!m || !frames || max == 0 || !ret_n)
                return -EINVAL;

        mp = mappings_find(m->mappings, m->n_mappings, addr);
        /* JIT code: anonymous executable memory, or memory mapped after
         * our last look. File-backed mappings keep their ELF symbols. */
        if ((!mp || (!mp->file_backed && !mp->file)) && resolve_jit(s, m, mp, addr, &frames[0])) {
                *ret_n = 1;
                return 0;
        }
        if (!mp) {
                frames[0] = (ResolvedFrame){ .offset = addr };
                *ret_n = 1;
                return 0;
        }

        file_off = addr - mp->start + mp->pgoff;
        ResolvedFrame rf = {
                .module = mp->module,
                .offset = mp->file_backed || mp->file ? file_off : addr,
                .path = mp->path ?: mp->module,
                .map_start = mp->start,
                .map_end = mp->end,
                .map_pgoff = mp->pgoff,
                .build_id = mp->file && mp->file->symtab ? elf_symtab_build_id(mp->file->symtab) : NULL,
                .symbols_source = file_symbols_source(mp->file),
        };
        if (mp->file && mp->file->symtab &&
            elf_symtab_offset_to_vaddr(mp->file->symtab, file_off, &vaddr) >= 0)
                n = elf_symtab_lookup_frames(mp->file->symtab, vaddr, ef,
                                             MIN(max, (size_t) SYMBOLIZER_INLINE_MAX));
        if (n == 0) {
                frames[0] = rf;
                *ret_n = 1;
                return 0;
        }
        for (size_t i = 0; i < n; i++) {
                frames[i] = rf;
                frames[i].name = ef[i].name;
                frames[i].offset = ef[i].offset;
                frames[i].file = ef[i].file;
                frames[i].line = ef[i].line;
                frames[i].inlined = ef[i].inlined;
        }
        *ret_n = n;
        return 0;
}

static const char *kernel_module_name(Symbolizer *s, const char *module) {
        size_t len = strlen(module);
        char *b;

        for (size_t i = 0; i < s->n_modules; i++)
                if (strlen(s->modules[i]) == len + 2 && memcmp(s->modules[i] + 1, module, len) == 0)
                        return s->modules[i];

        if (GREEDY_REALLOC(s->modules, s->n_modules_alloc, s->n_modules + 1, 16) < 0)
                return NULL;
        if (asprintf(&b, "[%s]", module) < 0)
                return NULL;
        s->modules[s->n_modules++] = b;
        return b;
}

int symbolizer_resolve_kernel(Symbolizer *s, uint64_t addr, ResolvedFrame *ret) {
        const char *name, *module = NULL, *bracketed = KERNEL_MODULE;
        const Kallsyms *k = NULL;
        uint64_t off;
        int r;

        if (!s || !ret)
                return -EINVAL;

        /* Loads the table on the first kernel frame, and reloads it
         * when the modules changed or, rate-limited, after a miss above the
         * image's text. */
        r = kallsyms_cache_get(s->kallsyms, now_usec(CLOCK_MONOTONIC), &k);
        if (r < 0)
                return r;

        name = kallsyms_lookup(k, addr, &off, &module);
        if (!name) {
                /* A BPF program or module loaded since the table was read? */
                r = kallsyms_cache_reload_on_miss(s->kallsyms, now_usec(CLOCK_MONOTONIC), addr, &k);
                if (r < 0)
                        return r;
                if (r > 0)
                        name = kallsyms_lookup(k, addr, &off, &module);
        }
        if (!name) {
                *ret = (ResolvedFrame){ .module = KERNEL_MODULE, .offset = addr };
                return 0;
        }
        if (module) {
                bracketed = kernel_module_name(s, module);
                if (!bracketed)
                        return -ENOMEM;
        }

        *ret = (ResolvedFrame){ .name = name, .module = bracketed, .offset = off };
        return 0;
}

/* ---- the Symbolizer ---- */

int symbolizer_new(const SymbolizerOptions *opts, Symbolizer **ret) {
        _cleanup_(symbolizer_freep) Symbolizer *s = NULL;
        SymbolizerOptions o = opts ? *opts : (SymbolizerOptions){};
        int r;

        if (!ret)
                return -EINVAL;

        s = calloc(1, sizeof(Symbolizer));
        if (!s)
                return -ENOMEM;

        s->max_files = o.max_files > 0 ? o.max_files : MAX_FILES_DEFAULT;
        s->debug_dir = strdup(o.debug_dir ?: "/usr/lib/debug");
        s->proc_root = strdup(o.proc_root ?: "/proc");
        if (!s->debug_dir || !s->proc_root)
                return -ENOMEM;
        r = kallsyms_cache_new(
                &(KallsymsCacheOptions){
                        .kallsyms_path = o.kallsyms_path,
                        .modules_path = o.modules_path,
                        .check_usec = o.kernel_check_usec,
                },
                &s->kallsyms);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(s);
        return 0;
}

void symbolizer_set_maps_cache(Symbolizer *x, ProcMapsCache *c) {
        x->maps_cache = c;
}

Symbolizer *symbolizer_free(Symbolizer *s) {
        if (!s)
                return NULL;

        /* Entries still referenced by snapshots are detached and go with
         * their last reference; the others go now. */
        for (size_t i = 0; i < s->n_buckets; i++)
                while (s->buckets[i]) {
                        FileEntry *e = s->buckets[i];

                        s->buckets[i] = e->hash_next;
                        e->hash_next = NULL;
                        e->cached = false;
                        e->owner = NULL;
                        e->in_lru = false;
                        e->lru_prev = e->lru_next = NULL;
                        if (e->n_ref == 0)
                                file_entry_free(e);
                }
        free(s->buckets);

        if (s->vdso) {
                s->vdso->owner = NULL;
                file_entry_unref(s->vdso);
        }
        free(s->vdso_image);

        for (size_t i = 0; i < s->n_modules; i++)
                free(s->modules[i]);
        free(s->modules);
        kallsyms_cache_free(s->kallsyms);

        free(s->debug_dir);
        free(s->proc_root);
        free(s);
        return NULL;
}

size_t symbolizer_cached_files(const Symbolizer *s) {
        return s ? s->n_entries : 0;
}

unsigned symbolizer_kernel_loads(const Symbolizer *s) {
        return s ? kallsyms_cache_loads(s->kallsyms) : 0;
}
