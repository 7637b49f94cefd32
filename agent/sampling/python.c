/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <bpf/bpf.h>
#include <errno.h>
#include <gelf.h>
#include <inttypes.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../bpf/profile.h"
#include "../bpf/python.h"
#include "elf-util.h"
#include "log.h"
#include "proc-maps.h"
#include "python-runtime.h"
#include "python.h"

/* What one ELF file is, by (device, inode, size, mtime): looked at once. */
#define FILE_CACHE_MAX 512
#define MAX_LOADS 16

typedef struct FileInfo {
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime;
        bool python;
        PythonElfInfo info;
        struct {
                uint64_t offset, vaddr, filesz;
        } loads[MAX_LOADS];
        size_t n_loads;
} FileInfo;

typedef struct CodeInfo {
        uint64_t addr;
        uint64_t validated_seq;
        uint8_t header[256]; /* the code object's first code_header_size bytes, as read */
        char *name, *file;
        uint8_t *linetable;
        size_t linetable_size;
        int firstlineno;
        bool bad; /* not a code object (or unreadable): no name */
} CodeInfo;

struct PythonProcess {
        pid_t pid;
        uint64_t start_time;
        uint32_t exec_id;
        unsigned n_ref;
        uint64_t runtime; /* _PyRuntime's address in the process */
        PythonProcess *parent; /* forked from it (holds a reference): names what it can no longer read */
        bool registered; /* in python_procs */
        bool gone; /* its memory cannot be read any more: use the cache as it is */
        char *status;
        const PythonOffsets *offsets; /* the table's, or own_offsets */
        PythonOffsets own_offsets; /* read from the interpreter (_Py_DebugOffsets) */
        uint64_t code_type; /* PyCode_Type in the process, 0: unknown */
        void *codes; /* tsearch() tree of CodeInfo by addr */
        size_t n_codes;
};

struct Python {
        ProcMapsCache *maps_cache; /* the Manager's (NULL: none) */
        int procs_fd, threads_fd;
        char *proc_root;
        void *processes; /* tsearch() tree of PythonProcess by (pid, start_time, exec_id) */
        FileInfo *files;
        size_t n_files, next_file;
        PythonStats stats;
};

static int process_cmp(const void *a, const void *b) {
        const PythonProcess *x = a, *y = b;
        int r = CMP(x->pid, y->pid);
        if (r == 0)
                r = CMP(x->start_time, y->start_time);
        if (r == 0)
                r = CMP(x->exec_id, y->exec_id);
        return r;
}

static int code_cmp(const void *a, const void *b) {
        return CMP(((const CodeInfo *) a)->addr, ((const CodeInfo *) b)->addr);
}

static void code_free(void *p) {
        CodeInfo *c = p;
        if (!c)
                return;
        free(c->name);
        free(c->file);
        free(c->linetable);
        free(c);
}

static void process_free(PythonProcess *pp) {
        if (!pp)
                return;
        tdestroy(pp->codes, code_free);
        free(pp->status);
        free(pp);
}

int python_new(int procs_fd, int threads_fd, const char *proc_root, Python **ret) {
        _cleanup_free_ Python *py = calloc(1, sizeof(*py));

        if (!py)
                return -ENOMEM;
        py->procs_fd = procs_fd;
        py->threads_fd = threads_fd;
        py->proc_root = strdup(proc_root ?: "/proc");
        py->files = calloc(FILE_CACHE_MAX, sizeof(FileInfo));
        if (!py->proc_root || !py->files) {
                free(py->proc_root);
                free(py->files);
                return -ENOMEM;
        }
        *ret = TAKE_PTR(py);
        return 0;
}

static void process_destroy(void *p) {
        process_free(p);
}

void python_set_maps_cache(Python *x, ProcMapsCache *c) {
        x->maps_cache = c;
}

Python *python_free(Python *py) {
        if (!py)
                return NULL;
        tdestroy(py->processes, process_destroy);
        free(py->files);
        free(py->proc_root);
        free(py);
        return NULL;
}

/* Reads what we need of one file (once per (dev, inode, size, mtime)). */
static const FileInfo *file_inspect(Python *py, int fd, const char *path) {
        _cleanup_(elf_endp) Elf *elf = NULL;
        struct stat st;
        FileInfo *fi;
        size_t n;

        if (fstat(fd, &st) < 0)
                return NULL;
        for (size_t i = 0; i < py->n_files; i++) {
                fi = &py->files[i];
                if (fi->dev == st.st_dev && fi->ino == st.st_ino && fi->size == st.st_size &&
                    fi->mtime.tv_sec == st.st_mtim.tv_sec && fi->mtime.tv_nsec == st.st_mtim.tv_nsec)
                        return fi;
        }
        /* A new entry (the oldest is replaced when the cache is full). */
        if (py->n_files < FILE_CACHE_MAX)
                fi = &py->files[py->n_files++];
        else {
                fi = &py->files[py->next_file];
                py->next_file = (py->next_file + 1) % FILE_CACHE_MAX;
        }
        *fi = (FileInfo){
                .dev = st.st_dev,
                .ino = st.st_ino,
                .size = st.st_size,
                .mtime = st.st_mtim,
        };
        if (elf_open_fd(fd, &elf) < 0)
                return fi;
        if (python_elf_inspect(elf, path, &fi->info) < 0)
                return fi;
        if (elf_getphdrnum(elf, &n) < 0)
                return fi;
        for (size_t i = 0; i < n && fi->n_loads < MAX_LOADS; i++) {
                GElf_Phdr ph;
                if (!gelf_getphdr(elf, (int) i, &ph) || ph.p_type != PT_LOAD)
                        continue;
                fi->loads[fi->n_loads].offset = ph.p_offset;
                fi->loads[fi->n_loads].vaddr = ph.p_vaddr;
                fi->loads[fi->n_loads].filesz = ph.p_filesz;
                fi->n_loads++;
        }
        fi->python = true;
        return fi;
}

/* The load bias of the file in the process, from one of its mappings. */
static int mapping_bias(const FileInfo *fi, const ProcMapsEntry *e, uint64_t *ret) {
        for (size_t i = 0; i < fi->n_loads; i++) {
                uint64_t page_offset = fi->loads[i].offset & ~4095ULL,
                         page_vaddr = fi->loads[i].vaddr & ~4095ULL;
                if (e->pgoff >= page_offset && e->pgoff - page_offset < fi->loads[i].filesz + 4096) {
                        *ret = e->start - (page_vaddr + (e->pgoff - page_offset));
                        return 0;
                }
        }
        return -ENOENT;
}

/* Finds CPython in the process's executable file mappings. */
static int process_find_python(Python *py, pid_t pid, const FileInfo **ret_fi, uint64_t *ret_bias) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        size_t size = 0;
        dev_t last_dev = 0;
        ino_t last_ino = 0;

        f = proc_maps_fopen(py->maps_cache, py->proc_root, pid);
        if (!f)
                return -errno;
        while (getline(&line, &size, f) > 0) {
                ProcMapsEntry e;
                const FileInfo *fi;
                int fd;

                if (proc_maps_parse_line(line, &e) < 0 || !proc_maps_entry_executable(&e) ||
                    !proc_maps_entry_file_backed(&e))
                        continue;
                if (e.inode == last_ino && makedev(e.major, e.minor) == last_dev)
                        continue;
                last_ino = e.inode;
                last_dev = makedev(e.major, e.minor);
                fd = proc_maps_open_file(py->proc_root, pid, &e);
                if (fd < 0)
                        continue;
                fi = file_inspect(py, fd, e.path);
                close(fd);
                if (!fi || !fi->python)
                        continue;
                if (mapping_bias(fi, &e, ret_bias) < 0)
                        continue;
                *ret_fi = fi;
                return 1;
        }
        return 0;
}

static int process_register(Python *py, PythonProcess *pp, uint64_t runtime) {
        const PythonOffsets *o = pp->offsets;
        struct cgprof_python_proc v = {
                .start_time = pp->start_time,
                .interp_head = runtime + o->runtime_interp_head,
                .interp_threads_head = o->interp_threads_head,
                .tstate_next = o->tstate_next,
                .tstate_thread_id = o->tstate_thread_id,
                .tstate_cframe = o->tstate_cframe,
                .cframe_current_frame = o->cframe_current_frame,
                .frame_code = o->frame_code,
                .frame_previous = o->frame_previous,
                .frame_prev_instr = o->frame_prev_instr,
                .frame_is_entry = o->frame_is_entry,
                .frame_owner = o->frame_owner,
                .code_adaptive = o->code_adaptive,
                .frame_lasti = o->frame_lasti,
                .frame_size = o->frame_size,
                .owner_cstack = o->owner_cstack,
                .lasti_shift = o->frame_lasti_shift,
                .exec_id = pp->exec_id,
        };
        uint32_t key = (uint32_t) pp->pid;

        if (bpf_map_update_elem(py->procs_fd, &key, &v, BPF_ANY) < 0)
                return -errno;
        pp->registered = true;
        py->stats.registered++;
        return 0;
}

/* Registers pp with the walk (when its offsets are known) and adds it to the
 * processes; on failure pp is freed. */
static int process_insert(Python *py, PythonProcess *pp) {
        int r;

        if (pp->offsets) {
                r = process_register(py, pp, pp->runtime);
                if (r < 0)
                        log_debug_errno(r, "Failed to register Python process %d with the walk: %m",
                                        (int) pp->pid);
        }
        if (!tsearch(pp, &py->processes, process_cmp)) {
                process_free(pp);
                return -ENOMEM;
        }
        return 0;
}
int python_process_ref(Python *py, pid_t pid, uint64_t start_time, uint32_t exec_id, PythonProcess **ret) {
        PythonProcess key = { .pid = pid, .start_time = start_time, .exec_id = exec_id }, **found, *pp;
        const FileInfo *fi = NULL;
        uint64_t bias = 0;
        int r;

        found = tfind(&key, &py->processes, process_cmp);
        if (found) {
                (*found)->n_ref++;
                *ret = *found;
                return 1;
        }
        r = process_find_python(py, pid, &fi, &bias);
        if (r <= 0) {
                *ret = NULL;
                return r;
        }

        pp = calloc(1, sizeof(*pp));
        if (!pp)
                return -ENOMEM;
        *pp = (PythonProcess){ .pid = pid, .start_time = start_time, .exec_id = exec_id, .n_ref = 1 };
        if (fi->info.major == 0)
                r = asprintf(&pp->status, "unknown version");
        else {
                const char *bad = NULL;
                if (fi->info.has_debug_offsets) {
                        /* 3.13+: what the interpreter publishes, not a table. */
                        pp->own_offsets = fi->info.debug_offsets;
                        pp->offsets = &pp->own_offsets;
                } else
                        pp->offsets = python_offsets_find(fi->info.major, fi->info.minor);
                if (pp->offsets && (bad = python_offsets_invalid(pp->offsets)))
                        pp->offsets = NULL;
                if (pp->offsets)
                        r = asprintf(&pp->status, "%u.%u", fi->info.major, fi->info.minor);
                else if (bad)
                        r = asprintf(&pp->status, "unsupported version %u.%u (offsets: %s)", fi->info.major,
                                     fi->info.minor, bad);
                else if (fi->info.debug_missing)
                        r = asprintf(&pp->status, "unsupported version %u.%u (_Py_DebugOffsets: no %s)",
                                     fi->info.major, fi->info.minor, fi->info.debug_missing);
                else
                        r = asprintf(&pp->status, "unsupported version %u.%u", fi->info.major,
                                     fi->info.minor);
        }
        if (r < 0) {
                free(pp);
                return -ENOMEM;
        }
        if (fi->info.code_type_vaddr)
                pp->code_type = bias + fi->info.code_type_vaddr;
        pp->runtime = bias + fi->info.runtime_vaddr;
        r = process_insert(py, pp);
        if (r < 0)
                return r;
        py->stats.processes++;
        log_debug("PID %d runs CPython (%s%s).", (int) pid, pp->status,
                  pp->offsets == &pp->own_offsets ? ", offsets from its _Py_DebugOffsets" : "");
        *ret = pp;
        return 1;
}

int python_process_ref_forked(Python *py, pid_t pid, uint64_t start_time, uint32_t exec_id, pid_t ppid,
                              uint64_t parent_start_time, PythonProcess **ret) {
        PythonProcess key = { .pid = pid, .start_time = start_time, .exec_id = exec_id }, **found, *pp;
        PythonProcess pkey = { .pid = ppid, .start_time = parent_start_time, .exec_id = exec_id }, *parent;
        int r;

        found = tfind(&key, &py->processes, process_cmp);
        if (found) {
                (*found)->n_ref++;
                *ret = *found;
                return 1;
        }
        found = ppid > 0 ? tfind(&pkey, &py->processes, process_cmp) : NULL;
        if (!found)
                return -ENOENT;
        parent = *found;

        pp = calloc(1, sizeof(*pp));
        if (!pp)
                return -ENOMEM;
        *pp = (PythonProcess){
                .pid = pid,
                .start_time = start_time,
                .exec_id = exec_id,
                .n_ref = 1,
                .runtime = parent->runtime,
                .parent = parent,
                .own_offsets = parent->own_offsets,
                .code_type = parent->code_type,
        };
        pp->offsets = parent->offsets == &parent->own_offsets ? &pp->own_offsets : parent->offsets;
        pp->status = strdup(parent->status);
        if (!pp->status) {
                free(pp);
                return -ENOMEM;
        }
        r = process_insert(py, pp);
        if (r < 0)
                return r;
        parent->n_ref++;
        py->stats.processes++;
        py->stats.forked++;
        log_debug("PID %d runs CPython (%s), forked from PID %d.", (int) pid, pp->status, (int) ppid);
        *ret = pp;
        return 1;
}

void python_process_unref(Python *py, PythonProcess *pp) {
        if (!pp || --pp->n_ref > 0)
                return;
        python_process_unref(py, TAKE_PTR(pp->parent));
        if (pp->registered) {
                struct cgprof_python_proc v;
                uint32_t key = (uint32_t) pp->pid;
                /* Only ours: after exec() the entry may already be another program's. */
                if (bpf_map_lookup_elem(py->procs_fd, &key, &v) == 0 && v.start_time == pp->start_time &&
                    v.exec_id == pp->exec_id)
                        (void) bpf_map_delete_elem(py->procs_fd, &key);
        }
        tdelete(pp, &py->processes, process_cmp);
        process_free(pp);
}

const char *python_process_status(const PythonProcess *pp) {
        return pp ? pp->status : NULL;
}

bool python_process_supported(const PythonProcess *pp) {
        return pp && pp->offsets;
}

static int read_memory(PythonProcess *pp, uint64_t addr, void *buf, size_t size) {
        struct iovec local = { .iov_base = buf, .iov_len = size };
        struct iovec remote = { .iov_base = (void *) (uintptr_t) addr, .iov_len = size };
        ssize_t n;

        if (addr == 0 || addr > 0x00007fffffffffffULL - size)
                return -EFAULT;
        n = process_vm_readv(pp->pid, &local, 1, &remote, 1, 0);
        if (n < 0) {
                if (errno == ESRCH)
                        pp->gone = true;
                return -errno;
        }
        return (size_t) n == size ? 0 : -EFAULT;
}

static uint64_t unaligned_u64(const uint8_t *p) {
        uint64_t v;
        memcpy(&v, p, sizeof(v));
        return v;
}

static uint64_t header_u64(const CodeInfo *c, uint16_t offset) {
        return unaligned_u64(c->header + offset);
}

/* Reads a str object into UTF-8. */
static int read_str(PythonProcess *pp, uint64_t addr, char **ret) {
        const PythonOffsets *o = pp->offsets;
        uint8_t header[128];
        _cleanup_free_ uint8_t *data = NULL;
        PythonStr s;
        int r;

        if (o->unicode_compact_data > sizeof(header))
                return -EINVAL;
        r = read_memory(pp, addr, header, o->unicode_compact_data);
        if (r < 0)
                return r;
        r = python_str_parse(o, header, o->unicode_compact_data, &s);
        if (r < 0)
                return r;
        if (s.length > 4096)
                s.length = 4096; /* a name or a path: more is not worth reading */
        data = malloc(s.length * s.kind + 1);
        if (!data)
                return -ENOMEM;
        r = read_memory(pp, addr + s.data_offset, data, s.length * s.kind);
        if (r < 0)
                return r;
        return python_str_to_utf8(data, s.length, s.kind, ret);
}

/* Reads a code object (its header already in c->header). */
static int code_read(Python *py, PythonProcess *pp, CodeInfo *c) {
        const PythonOffsets *o = pp->offsets;
        uint64_t linetable, size;
        int32_t firstlineno;
        int r;

        py->stats.code_reads++;
        if (pp->code_type && header_u64(c, o->object_type) != pp->code_type)
                return -EBADMSG; /* not a code object (any more) */
        r = read_str(pp, header_u64(c, o->code_qualname), &c->name);
        if (r < 0)
                return r;
        (void) read_str(pp, header_u64(c, o->code_filename), &c->file);
        memcpy(&firstlineno, c->header + o->code_firstlineno, sizeof(firstlineno));
        c->firstlineno = firstlineno;
        linetable = header_u64(c, o->code_linetable);
        if (read_memory(pp, linetable + o->bytes_size, &size, sizeof(size)) >= 0 && size > 0 &&
            size <= 65536) {
                c->linetable = malloc(size);
                if (c->linetable && read_memory(pp, linetable + o->bytes_data, c->linetable, size) >= 0)
                        c->linetable_size = size;
        }
        return 0;
}

/* Whether two reads of a code object's header are the same object: its
 * type, names, file, line table and first line (not the fields the
 * interpreter changes as it runs: reference count, warm-up counter, caches). */
static bool code_same(const PythonOffsets *o, const uint8_t *a, const uint8_t *b) {
        const uint16_t fields[] = { o->object_type, o->code_filename, o->code_name, o->code_qualname,
                                    o->code_linetable };
        for (size_t i = 0; i < ELEMENTSOF(fields); i++)
                if (memcmp(a + fields[i], b + fields[i], sizeof(uint64_t)) != 0)
                        return false;
        return memcmp(a + o->code_firstlineno, b + o->code_firstlineno, sizeof(int32_t)) == 0;
}

static void code_clear(CodeInfo *c) {
        free(c->name);
        free(c->file);
        free(c->linetable);
        c->name = c->file = NULL;
        c->linetable = NULL;
        c->linetable_size = 0;
        c->bad = false;
}

int python_process_resolve(Python *py, PythonProcess *pp, uint64_t frame, uint64_t seq, PythonFrame *ret) {
        const PythonOffsets *o;
        uint64_t addr = CGPROF_PY_FRAME_CODE(frame);
        uint32_t instr = CGPROF_PY_FRAME_INSTR(frame);
        CodeInfo key = { .addr = addr }, **found, *c;
        uint8_t header[sizeof(key.header)];
        int line, r;

        *ret = (PythonFrame){};
        if (!pp || !pp->offsets)
                return -EOPNOTSUPP;
        o = pp->offsets;
        if (o->code_header_size > sizeof(header))
                return -EINVAL;

        found = tfind(&key, &pp->codes, code_cmp);
        c = found ? *found : NULL;
        if (!c && pp->gone && pp->parent)
                /* A forked child that exited before its frames were named:
                 * the code objects it ran are its parent's, inherited at
                 * the fork at the same addresses (what the child created
                 * itself after the fork it no longer has). */
                return python_process_resolve(py, pp->parent, frame, seq, ret);
        if (c && !pp->gone && c->validated_seq != seq) {
                /* Still the same code object? A freed one's address may be
                 * reused by another. When what is there now is no code
                 * object at all, no frame can point at it any more, so the
                 * frames of this drain were taken while the one read before
                 * lived: it stays (a script's <module> is freed as it ends,
                 * before the interpreter exits and its last samples are
                 * drained). */
                r = read_memory(pp, addr, header, o->code_header_size);
                if (r >= 0 && !code_same(o, header, c->header) && !c->bad && pp->code_type &&
                    unaligned_u64(header + o->object_type) != pp->code_type)
                        py->stats.code_freed++;
                else if (r >= 0 && !code_same(o, header, c->header)) {
                        code_clear(c);
                        memcpy(c->header, header, o->code_header_size);
                        if (code_read(py, pp, c) < 0) {
                                py->stats.code_read_errors++;
                                c->bad = true;
                        }
                }
                c->validated_seq = seq;
        }
        if (!c) {
                if (pp->n_codes >= PYTHON_CODE_CACHE_MAX) {
                        tdestroy(pp->codes, code_free);
                        pp->codes = NULL;
                        pp->n_codes = 0;
                        py->stats.cache_drops++;
                }
                c = calloc(1, sizeof(*c));
                if (!c)
                        return -ENOMEM;
                c->addr = addr;
                c->validated_seq = seq;
                r = read_memory(pp, addr, c->header, o->code_header_size);
                if (r >= 0)
                        r = code_read(py, pp, c);
                if (r < 0 && pp->gone && pp->parent) {
                        /* Exited just now: as above. */
                        code_free(c);
                        return python_process_resolve(py, pp->parent, frame, seq, ret);
                }
                if (r < 0) {
                        py->stats.code_read_errors++;
                        if (py->stats.code_read_errors <= 64) /* the first few: a diagnosis, not a flood */
                                log_debug_errno(r,
                                                "PID %d: code object at 0x%" PRIx64
                                                " not read (type 0x%" PRIx64 ", PyCode_Type 0x%" PRIx64
                                                ", seq %" PRIu64 "): %m",
                                                (int) pp->pid, addr, header_u64(c, o->object_type),
                                                pp->code_type, seq);
                        code_clear(c);
                        c->bad = true;
                }
                if (!tsearch(c, &pp->codes, code_cmp)) {
                        code_free(c);
                        return -ENOMEM;
                }
                pp->n_codes++;
        }
        if (c->bad || !c->name)
                return -ENOENT;
        ret->name = c->name;
        ret->file = c->file;
        if (instr != CGPROF_PY_INSTR_UNKNOWN && c->linetable &&
            python_code_line_format(o->linetable_format, c->linetable, c->linetable_size, c->firstlineno,
                                    instr, &line) >= 0)
                ret->line = line;
        return 0;
}

void python_stats(const Python *py, PythonStats *ret) {
        *ret = py->stats;
}
