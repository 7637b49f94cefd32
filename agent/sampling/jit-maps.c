/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* JIT symbol files of a process (see jit-maps.h for where they are found).
 *
 * Where the work runs: on the caller's thread (the event loop), called by
 * the symbolizer at most once per drain per process, and only for processes
 * with samples in anonymous executable memory. An update costs an fstat()
 * per open file when nothing changed, plus, while a file is missing and the
 * process lives, a read of /proc/PID/status (once) and two openat() calls.
 * What a file gained is read in 1 MiB preads, at most JIT_MAPS_READ_MAX
 * bytes per file per update, so a huge map is taken in bounded steps. */

#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>

#include "cred-check.h"
#include "fileio.h"
#include "jit-map.h"
#include "jit-maps.h"
#include "jitdump.h"
#include "log.h"
#include "perf-map.h"

#define READ_CHUNK (1U << 20)

typedef enum JitSourceKind {
        JIT_SOURCE_JITDUMP_MAPPED, /* lookup order: jitdumps first */
        JIT_SOURCE_JITDUMP_TMP,
        JIT_SOURCE_PERF_MAP,
        _JIT_SOURCE_MAX,
} JitSourceKind;

typedef struct JitSource {
        char *path; /* as the process sees it; NULL: not found (yet) */
        int fd;
        dev_t dev;
        ino_t ino;
        JitMap *map;
        PerfMapParser perf;
        JitDumpParser dump;
        bool done; /* not a valid file, or past its bound: read no more */
        char tail[64]; /* a perf map's last bytes before offset, to notice a rewrite */
        size_t tail_len;
} JitSource;

struct JitMaps {
        char *proc_root;
        pid_t pid;
        pid_t nspid;
        bool gone; /* its root could not be opened: no more discovery */
        JitSource sources[_JIT_SOURCE_MAX];
};

static bool kind_is_dump(JitSourceKind k) {
        return k != JIT_SOURCE_PERF_MAP;
}

static const char *kind_to_string(JitSourceKind k) {
        return kind_is_dump(k) ? "jitdump" : "perf map";
}

int jit_maps_new(const char *proc_root, pid_t pid, JitMaps **ret) {
        JitMaps *j;

        if (!proc_root || pid <= 0 || !ret)
                return -EINVAL;
        j = calloc(1, sizeof(JitMaps));
        if (!j)
                return -ENOMEM;
        j->pid = pid;
        j->proc_root = strdup(proc_root);
        if (!j->proc_root) {
                free(j);
                return -ENOMEM;
        }
        for (size_t i = 0; i < _JIT_SOURCE_MAX; i++)
                j->sources[i].fd = -EBADF;
        *ret = j;
        return 0;
}

JitMaps *jit_maps_free(JitMaps *j) {
        if (!j)
                return NULL;
        for (size_t i = 0; i < _JIT_SOURCE_MAX; i++) {
                safe_close(j->sources[i].fd);
                free(j->sources[i].path);
                jit_map_free(j->sources[i].map);
        }
        free(j->proc_root);
        free(j);
        return NULL;
}

pid_t jit_maps_nspid(const JitMaps *j) {
        return j ? j->nspid : 0;
}

bool jit_dump_file_name(const char *path) {
        const char *b = strrchr(path, '/');
        size_t digits;

        b = b ? b + 1 : path;
        if (strncmp(b, "jit-", 4) != 0)
                return false;
        digits = strspn(b + 4, "0123456789");
        return digits > 0 && streq(b + 4 + digits, ".dump");
}

/* The last field of "NSpid:" (the PID in the innermost namespace); the PID
 * itself on kernels without the line (before 4.1). */
static int read_nspid(const JitMaps *j, pid_t *ret) {
        _cleanup_free_ char *path = NULL, *buf = NULL;
        const char *line, *last = NULL;
        char *end;
        long v;
        int r;

        if (asprintf(&path, "%s/%d/status", j->proc_root, (int) j->pid) < 0)
                return -ENOMEM;
        r = read_full_file_max(AT_FDCWD, path, 64 * 1024, &buf, NULL);
        if (r < 0)
                return r == -ENOENT ? -ESRCH : r;

        line = strstr(buf, "\nNSpid:");
        if (!line) {
                *ret = j->pid;
                return 0;
        }
        line += strlen("\nNSpid:");
        for (const char *p = line; *p && *p != '\n';) {
                p += strspn(p, " \t");
                if (*p && *p != '\n')
                        last = p;
                p += strcspn(p, " \t\n");
        }
        if (!last)
                return -EBADMSG;
        errno = 0;
        v = strtol(last, &end, 10);
        if (errno != 0 || end == last || v <= 0 || v > INT32_MAX)
                return -EBADMSG;
        *ret = (pid_t) v;
        return 0;
}

/* 0 if the owner of the process could read the file open at fd (and search
 * the directory dir_fd it is in, unless -EBADF), as of now (not as of when
 * the process started: it may have dropped privileges since); -EACCES if
 * not, -ESRCH if the process is gone. */
static int check_owner_can_read(const JitMaps *j, int dir_fd, int fd) {
        _cleanup_(creds_done) Creds creds = {};
        struct stat st;
        int r;

        r = creds_from_pid(j->proc_root, j->pid, &creds);
        if (r < 0)
                return r;
        if (dir_fd >= 0) {
                if (fstat(dir_fd, &st) < 0)
                        return negative_errno();
                if (!creds_can_search(&creds, &st))
                        return -EACCES;
        }
        return creds_check_fd(&creds, fd);
}

/* name in the process's /tmp: no symlink followed on the way, a regular file
 * its owner could read; -EACCES if it could not. */
static int open_in_tmp(const JitMaps *j, const char *name) {
        _cleanup_free_ char *root = NULL;
        _cleanup_close_ int root_fd = -EBADF, tmp_fd = -EBADF, fd = -EBADF;
        int r;

        if (asprintf(&root, "%s/%d/root", j->proc_root, (int) j->pid) < 0)
                return -ENOMEM;
        root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return errno == ENOENT ? -ESRCH : negative_errno();
        tmp_fd = openat(root_fd, "tmp", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (tmp_fd < 0)
                return negative_errno();
        fd = openat(tmp_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        fd = fd_take_regular(TAKE_FD(fd));
        if (fd < 0)
                return fd;

        /* The process names the file (a hard link or a bind mount to a
         * file it cannot read gets past O_NOFOLLOW). */
        r = check_owner_can_read(j, tmp_fd, fd); /* -EACCES: logged by the caller */
        if (r < 0)
                return r;
        return TAKE_FD(fd);
}

static int source_adopt(JitMaps *j, JitSourceKind k, int fd, const char *path) {
        JitSource *src = &j->sources[k];
        _cleanup_close_ int owned = fd;
        struct stat st;
        int r;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        /* The same file found twice (a mapped dump in /tmp): read it once. */
        for (size_t i = 0; i < _JIT_SOURCE_MAX; i++)
                if (j->sources[i].path && j->sources[i].dev == st.st_dev && j->sources[i].ino == st.st_ino)
                        return 0;

        r = jit_map_new(0, &src->map);
        if (r < 0)
                return r;
        src->path = strdup(path);
        if (!src->path) {
                src->map = jit_map_free(src->map);
                return -ENOMEM;
        }
        src->fd = TAKE_FD(owned);
        src->dev = st.st_dev;
        src->ino = st.st_ino;
        log_debug("Reading JIT symbols of PID %d (%s) from %s/%d/root%s.", (int) j->pid, kind_to_string(k),
                  j->proc_root, (int) j->pid, path);
        return 0;
}

static void discover(JitMaps *j, const ProcMapsEntry *mapped_dump) {
        static const struct {
                JitSourceKind kind;
                const char *format;
        } in_tmp[] = {
                { JIT_SOURCE_PERF_MAP, "perf-%d.map" },
                { JIT_SOURCE_JITDUMP_TMP, "jit-%d.dump" },
        };
        int r;

        if (j->gone)
                return;
        if (j->nspid == 0) {
                r = read_nspid(j, &j->nspid);
                if (r == -ESRCH) {
                        j->gone = true;
                        return;
                }
                if (r < 0) {
                        log_debug_errno(r, "Failed to read the namespace PID of PID %d, ignoring: %m",
                                        (int) j->pid);
                        return;
                }
        }

        for (size_t i = 0; i < ELEMENTSOF(in_tmp); i++) {
                char name[64], path[80];
                int fd;

                if (j->sources[in_tmp[i].kind].path)
                        continue;
                snprintf(name, sizeof(name), in_tmp[i].format, (int) j->nspid);
                fd = open_in_tmp(j, name);
                if (fd == -ESRCH) {
                        j->gone = true;
                        return;
                }
                if (fd < 0) {
                        if (fd != -ENOENT)
                                log_debug_errno(fd, "Failed to open /tmp/%s of PID %d, ignoring: %m", name,
                                                (int) j->pid);
                        continue;
                }
                snprintf(path, sizeof(path), "/tmp/%s", name);
                r = source_adopt(j, in_tmp[i].kind, fd, path);
                if (r < 0)
                        log_debug_errno(r, "Failed to read %s of PID %d, ignoring: %m", path, (int) j->pid);
        }

        if (mapped_dump && !j->sources[JIT_SOURCE_JITDUMP_MAPPED].path) {
                int fd = proc_maps_open_file(j->proc_root, j->pid, mapped_dump);

                /* The process maps it, so could read it, but without
                 * /proc/PID/map_files (no CAP_SYS_ADMIN) on overlayfs the
                 * path is all that names it: the same check. */
                if (fd >= 0) {
                        r = check_owner_can_read(j, -EBADF, fd);
                        if (r < 0) {
                                safe_close(fd);
                                fd = r;
                        }
                }
                if (fd < 0)
                        log_debug_errno(fd, "Failed to open %s of PID %d, ignoring: %m", mapped_dump->path,
                                        (int) j->pid);
                else {
                        r = source_adopt(j, JIT_SOURCE_JITDUMP_MAPPED, fd, mapped_dump->path);
                        if (r < 0)
                                log_debug_errno(r, "Failed to read %s of PID %d, ignoring: %m",
                                                mapped_dump->path, (int) j->pid);
                }
        }
}

/* Reads what the file gained since the last time, up to the bounds. */
static int source_read(JitMaps *j, JitSourceKind k) {
        JitSource *src = &j->sources[k];
        _cleanup_free_ uint8_t *buf = NULL;
        uint64_t *offset = kind_is_dump(k) ? &src->dump.offset : &src->perf.offset;
        uint64_t budget = JIT_MAPS_READ_MAX;
        struct stat st;
        int r;

        if (!src->path || src->done)
                return 0;
        if (fstat(src->fd, &st) < 0)
                return negative_errno();

        while ((uint64_t) st.st_size > *offset && budget > 0) {
                uint64_t before = *offset;
                size_t want =
                        (size_t) MIN((uint64_t) st.st_size - before, MIN(budget, (uint64_t) READ_CHUNK));
                ssize_t n;

                if (before >= JIT_MAPS_FILE_MAX) {
                        log_debug("%s of PID %d is larger than %" PRIu64 " bytes, not reading more of it.",
                                  src->path, (int) j->pid, JIT_MAPS_FILE_MAX);
                        src->done = true;
                        break;
                }
                if (!buf) {
                        buf = malloc(READ_CHUNK);
                        if (!buf)
                                return -ENOMEM;
                }
                n = pread(src->fd, buf, want, (off_t) before);
                if (n < 0)
                        return negative_errno();
                if (n == 0)
                        break;
                budget -= (uint64_t) n;

                if (kind_is_dump(k))
                        r = jitdump_feed(&src->dump, src->map, buf, (size_t) n);
                else
                        r = perf_map_feed(&src->perf, src->map, (const char *) buf, (size_t) n);
                if (r == -EBADMSG) {
                        log_debug("%s of PID %d is not a valid jitdump file at byte %" PRIu64
                                  ", not reading more of it.",
                                  src->path, (int) j->pid, *offset);
                        src->done = true;
                        break;
                }
                if (r < 0)
                        return r;
                if (kind_is_dump(k) && src->dump.closed) {
                        src->done = true;
                        break;
                }
                if (*offset == before)
                        break; /* a partial line or record: wait for the rest */
        }

        log_debug("%s of PID %d: %zu symbols (%" PRIu64 " malformed, %" PRIu64 " skipped, %" PRIu64
                  " dropped) after %" PRIu64 " bytes.",
                  src->path, (int) j->pid, jit_map_count(src->map),
                  kind_is_dump(k) ? src->dump.malformed : src->perf.malformed,
                  kind_is_dump(k) ? 0 : src->perf.skipped, jit_map_dropped(src->map), *offset);
        return 0;
}

/* Whether a perf map was rewritten rather than appended to since we read up
 * to offset: it is shorter now, or the bytes before offset are not those we
 * read there. The JVM rewrites its map at each jcmd Compiler.perfmap, in
 * code cache order: new code shifts what follows it. (Jitdump files are
 * only appended to; their offset may be past the end while a record's code
 * bytes are still to come.) */
static bool source_rewritten(const JitSource *src, JitSourceKind k, uint64_t size, uint64_t offset) {
        char buf[sizeof(src->tail)];

        if (kind_is_dump(k) || offset == 0)
                return false;
        if (size < offset)
                return true;
        return pread(src->fd, buf, src->tail_len, (off_t) (offset - src->tail_len)) !=
                       (ssize_t) src->tail_len ||
               memcmp(buf, src->tail, src->tail_len) != 0;
}

static void source_remember_tail(JitSource *src) {
        uint64_t offset = src->perf.offset;
        size_t n = (size_t) MIN(offset, (uint64_t) sizeof(src->tail));
        ssize_t got = pread(src->fd, src->tail, n, (off_t) (offset - n));

        src->tail_len = got == (ssize_t) n ? n : 0;
}

int jit_maps_update(JitMaps *j, bool discover_files, const ProcMapsEntry *mapped_dump) {
        int r, ret = 0;

        if (!j)
                return -EINVAL;
        if (discover_files)
                discover(j, mapped_dump);
        for (size_t k = 0; k < _JIT_SOURCE_MAX; k++) {
                JitSource *src = &j->sources[k];
                uint64_t offset = kind_is_dump(k) ? src->dump.offset : src->perf.offset;
                struct stat st;

                if (!src->path || src->done)
                        continue;
                if (fstat(src->fd, &st) < 0 || (uint64_t) st.st_size == offset)
                        continue; /* the common case: nothing new */
                if (source_rewritten(src, k, (uint64_t) st.st_size, offset)) {
                        /* Read it again from the start; what we have stays
                         * until it is overwritten (later entries win). */
                        log_debug("%s of PID %d was rewritten, reading it again.", src->path, (int) j->pid);
                        src->perf = (PerfMapParser){};
                        src->dump = (JitDumpParser){};
                } else if ((uint64_t) st.st_size < offset)
                        continue; /* a jitdump record's code bytes still to come */
                r = source_read(j, (JitSourceKind) k);
                if (!kind_is_dump(k))
                        source_remember_tail(src);
                if (r < 0) {
                        log_debug_errno(r, "Failed to read %s of PID %d, ignoring: %m", src->path,
                                        (int) j->pid);
                        if (ret == 0)
                                ret = r;
                }
        }
        return ret;
}

bool jit_maps_lookup(const JitMaps *j, uint64_t addr, JitSymbolInfo *ret) {
        const JitSource *first = NULL;

        *ret = (JitSymbolInfo){};
        if (!j)
                return false;
        for (size_t k = 0; k < _JIT_SOURCE_MAX; k++) {
                const JitSource *src = &j->sources[k];
                const char *name;
                uint64_t off;

                if (!src->path)
                        continue;
                if (!first)
                        first = src;
                name = jit_map_lookup(src->map, addr, &off);
                if (name) {
                        *ret = (JitSymbolInfo){
                                .name = name,
                                .offset = off,
                                .path = src->path,
                                .source = kind_to_string((JitSourceKind) k),
                        };
                        return true;
                }
        }
        if (!first)
                return false;
        ret->path = first->path;
        ret->source = kind_to_string((JitSourceKind) (first - j->sources));
        return true;
}
