/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "cuda-probes.h"
#include "base.h"
#include "elf-symtab.h"
#include "log.h"
#include "proc-maps.h"
#include "profile.h"
#include "sampler.h"

/* The launch entry points, by symbol (bpf/profile.h: how each one's
 * arguments are read). */
static const struct {
        const char *name;
        uint32_t entry;
} entry_points[] = {
        { "cudaLaunchKernel", CGPROF_LAUNCH_KERNEL },
        { "cudaLaunchKernel_ptsz", CGPROF_LAUNCH_KERNEL },
        { "cudaLaunchCooperativeKernel", CGPROF_LAUNCH_KERNEL },
        { "cudaLaunchCooperativeKernel_ptsz", CGPROF_LAUNCH_KERNEL },
        { "cudaLaunchKernelExC", CGPROF_LAUNCH_KERNEL_EXC },
        { "cudaLaunchKernelExC_ptsz", CGPROF_LAUNCH_KERNEL_EXC },
        { "cudaGraphLaunch", CGPROF_LAUNCH_GRAPH },
        { "cudaGraphLaunch_ptsz", CGPROF_LAUNCH_GRAPH },
        { "cuLaunchKernel", CGPROF_LAUNCH_CU_KERNEL },
        { "cuLaunchKernel_ptsz", CGPROF_LAUNCH_CU_KERNEL },
        { "cuLaunchKernelEx", CGPROF_LAUNCH_CU_KERNEL_EX },
        { "cuLaunchKernelEx_ptsz", CGPROF_LAUNCH_CU_KERNEL_EX },
        { "cuGraphLaunch", CGPROF_LAUNCH_GRAPH },
        { "cuGraphLaunch_ptsz", CGPROF_LAUNCH_GRAPH },
        /* libcgprof-cupti.so: CUPTI's callback at each launch (gpu.durations) */
        { "cgprof_cupti_launch", CGPROF_LAUNCH_CUPTI },
};

typedef struct CudaProbeProc {
        pid_t pid;
        uint64_t start_time;
        unsigned refs;
        CudaProbeFile **files; /* the probed files it maps */
        size_t n_files;
} CudaProbeProc;

struct CudaProbes {
        Sampler *sampler;
        Worker *worker; /* reads the files' symbols, off the loop */
        bool freeing;
        /* Every file looked at, by (dev, ino): with probes, or none (no
         * entry point: looked at once). */
        CudaProbeFile **files;
        size_t n_files;
        CudaProbeProc **procs;
        size_t n_procs;
};

CudaProbes *cuda_probes_new(Sampler *sampler, sd_event *event) {
        CudaProbes *p = calloc(1, sizeof(*p));

        if (!p)
                return NULL;
        p->sampler = sampler;
        if (worker_new(event, "cgprofd-cuda", 0, &p->worker) < 0) {
                free(p);
                return NULL;
        }
        return p;
}

static void file_detach(CudaProbeFile *f) {
        for (size_t i = 0; i < f->n_links; i++)
                bpf_link__destroy(f->links[i]);
        free(f->links);
        f->links = NULL;
        f->n_links = 0;
        free(f->entries);
        f->entries = NULL;
}

static void file_free(CudaProbeFile *f) {
        if (!f)
                return;
        file_detach(f);
        free(f->path);
        free(f);
}

CudaProbes *cuda_probes_free(CudaProbes *p) {
        if (!p)
                return NULL;
        /* Jobs not run yet are freed (done(ran false)); their files below. */
        p->freeing = true;
        worker_free(p->worker);
        for (size_t i = 0; i < p->n_procs; i++) {
                free(p->procs[i]->files);
                free(p->procs[i]);
        }
        free(p->procs);
        for (size_t i = 0; i < p->n_files; i++)
                file_free(p->files[i]);
        free(p->files);
        free(p);
        return NULL;
}

static int append_entry(char **list, const char *name) {
        char *n;

        if (asprintf(&n, "%s%s%s", *list ?: "", *list ? "," : "", name) < 0)
                return -ENOMEM;
        free(*list);
        *list = n;
        return 0;
}

/* A file's entry points, looked for on the worker. */
typedef struct InspectJob {
        WorkerJob job;
        CudaProbes *p;
        CudaProbeFile *f;
        pid_t pid;
        ProcMapsEntry e; /* e.path: path */
        char *path;
        int error;
        bool found[ELEMENTSOF(entry_points)];
        uint64_t offsets[ELEMENTSOF(entry_points)];
} InspectJob;

static void inspect_run(WorkerJob *job) {
        InspectJob *j = (InspectJob *) job;
        _cleanup_(elf_symtab_freep) ElfSymtab *st = NULL;
        _cleanup_close_ int fd = proc_maps_open_file("/proc", j->pid, &j->e);
        uint64_t vaddr;

        if (fd < 0) {
                j->error = fd;
                return;
        }
        j->error = elf_symtab_load(fd, &st);
        if (j->error < 0)
                return;
        for (size_t i = 0; i < ELEMENTSOF(entry_points); i++)
                j->found[i] = elf_symtab_find_name(st, entry_points[i].name, &vaddr) >= 0 && vaddr != 0 &&
                              elf_symtab_vaddr_to_offset(st, vaddr, &j->offsets[i]) >= 0;
}

/* Attaches the probes of the entry points found (on the loop: a
 * perf_event_open() each). The uprobe is placed by path: the file through
 * the process's root (containers). */
static int file_attach(CudaProbes *p, CudaProbeFile *f, const InspectJob *j) {
        _cleanup_free_ char *path = NULL;
        int r;

        if (asprintf(&path, "/proc/%d/root%s", (int) j->pid, f->path) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(entry_points); i++) {
                struct bpf_link *l, **a;

                if (!j->found[i])
                        continue;
                r = sampler_launch_attach(p->sampler, path, j->offsets[i], entry_points[i].entry, &l);
                if (r < 0) {
                        log_warning_errno(r, "Failed to attach the launch probe %s in %s, ignoring: %m",
                                          entry_points[i].name, f->path);
                        continue;
                }
                a = reallocarray(f->links, f->n_links + 1, sizeof(*a));
                if (!a) {
                        bpf_link__destroy(l);
                        return -ENOMEM;
                }
                f->links = a;
                f->links[f->n_links++] = l;
                r = append_entry(&f->entries, entry_points[i].name);
                if (r < 0)
                        return r;
        }
        if (f->n_links > 0)
                log_info("CUDA launch probes in %s: %s", f->path, f->entries);
        return 0;
}

static void inspect_done(WorkerJob *job, bool ran) {
        InspectJob *j = (InspectJob *) job;
        CudaProbeFile *f = j->f;

        if (!j->p->freeing) {
                f->pending = false;
                if (f->orphan) /* no process holds it any more */
                        file_free(f);
                else if (!ran || j->error < 0)
                        log_debug_errno(j->error,
                                        "Failed to read the symbols of %s for launch probes, ignoring: %m",
                                        f->path);
                else if (file_attach(j->p, f, j) < 0)
                        log_oom();
        } else if (f->orphan)
                file_free(f);
        free(j->path);
        free(j);
}

static CudaProbeFile *file_find(CudaProbes *p, uint64_t dev, uint64_t ino) {
        for (size_t i = 0; i < p->n_files; i++)
                if (p->files[i]->dev == dev && p->files[i]->ino == ino)
                        return p->files[i];
        return NULL;
}

/* The file of a mapping: looked at the first time, on the worker (pending
 * until then). */
static int file_get(CudaProbes *p, pid_t pid, const ProcMapsEntry *e, CudaProbeFile **ret) {
        uint64_t dev = ((uint64_t) e->major << 32) | e->minor;
        CudaProbeFile *f, **a;
        InspectJob *j;

        f = file_find(p, dev, e->inode);
        if (f) {
                *ret = f;
                return 0;
        }
        f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        f->dev = dev;
        f->ino = e->inode;
        f->path = strdup(e->path);
        j = f->path ? calloc(1, sizeof(*j)) : NULL;
        a = j ? reallocarray(p->files, p->n_files + 1, sizeof(*a)) : NULL;
        if (!a || !(j->path = strdup(e->path))) {
                if (a)
                        p->files = a;
                free(j);
                file_free(f);
                return -ENOMEM;
        }
        p->files = a;
        p->files[p->n_files++] = f;
        *j = (InspectJob){ .p = p, .f = f, .pid = pid, .e = *e, .path = j->path };
        j->e.path = j->path;
        f->pending = true;
        worker_submit(p->worker, &j->job, inspect_run, inspect_done);
        *ret = f;
        return 0;
}

/* A probed file no process holds any more: detached and forgotten (a
 * process that maps it later attaches it again). */
static void file_unuse(CudaProbes *p, CudaProbeFile *f) {
        if (f->users > 0)
                f->users--;
        /* A file without entry points stays known (it is not read again). */
        if (f->users > 0 || (!f->pending && f->n_links == 0))
                return;
        for (size_t i = 0; i < p->n_files; i++)
                if (p->files[i] == f) {
                        p->files[i] = p->files[--p->n_files];
                        break;
                }
        if (f->pending) {
                f->orphan = true; /* freed when its job is done */
                return;
        }
        log_info("CUDA launch probes in %s detached: no process maps it", f->path);
        file_free(f);
}

static CudaProbeProc *proc_find(CudaProbes *p, pid_t pid, uint64_t start_time, size_t *ret_index) {
        for (size_t i = 0; i < p->n_procs; i++)
                if (p->procs[i]->pid == pid && p->procs[i]->start_time == start_time) {
                        if (ret_index)
                                *ret_index = i;
                        return p->procs[i];
                }
        return NULL;
}

static bool files_contain(CudaProbeFile **files, size_t n, const CudaProbeFile *f) {
        for (size_t i = 0; i < n; i++)
                if (files[i] == f)
                        return true;
        return false;
}

/* The probed files the process maps now (executable mappings). */
static int proc_scan(CudaProbes *p, pid_t pid, CudaProbeFile ***ret, size_t *ret_n) {
        _cleanup_(proc_maps_text_done) ProcMapsText t = {};
        _cleanup_free_ CudaProbeFile **files = NULL;
        size_t n = 0;
        int r;

        r = proc_maps_text_read("/proc", pid, &t);
        if (r < 0)
                return r;
        for (char *line = t.buf, *end; line && line < t.buf + t.size; line = end ? end + 1 : NULL) {
                ProcMapsEntry e;
                CudaProbeFile *f, **a;

                end = memchr(line, '\n', t.buf + t.size - line);
                if (end)
                        *end = '\0';
                if (proc_maps_parse_line(line, &e) < 0 || !proc_maps_entry_executable(&e) ||
                    !proc_maps_entry_file_backed(&e) || e.deleted)
                        continue;
                r = file_get(p, pid, &e, &f);
                if (r < 0)
                        return r;
                if ((!f->pending && f->n_links == 0) || files_contain(files, n, f))
                        continue;
                a = reallocarray(files, n + 1, sizeof(*a));
                if (!a)
                        return -ENOMEM;
                files = a;
                files[n++] = f;
        }
        *ret = TAKE_PTR(files);
        *ret_n = n;
        return 0;
}

int cuda_probes_process_rescan(CudaProbes *p, pid_t pid, uint64_t start_time) {
        _cleanup_free_ CudaProbeFile **files = NULL;
        CudaProbeProc *c = proc_find(p, pid, start_time, NULL);
        size_t n = 0;
        int r;

        if (!c)
                return -ENOENT;
        r = proc_scan(p, pid, &files, &n);
        if (r < 0)
                return r;
        /* Take the new ones before letting go of the old (a file in both
         * keeps its probes). */
        for (size_t i = 0; i < n; i++)
                if (!files_contain(c->files, c->n_files, files[i]))
                        files[i]->users++;
        for (size_t i = 0; i < c->n_files; i++)
                if (!files_contain(files, n, c->files[i]))
                        file_unuse(p, c->files[i]);
        free(c->files);
        c->files = TAKE_PTR(files);
        c->n_files = n;
        return (int) n;
}

int cuda_probes_process_ref(CudaProbes *p, pid_t pid, uint64_t start_time) {
        CudaProbeProc *c = proc_find(p, pid, start_time, NULL), **a;

        if (c) {
                c->refs++;
                return cuda_probes_process_rescan(p, pid, start_time);
        }
        c = calloc(1, sizeof(*c));
        a = c ? reallocarray(p->procs, p->n_procs + 1, sizeof(*a)) : NULL;
        if (!a) {
                free(c);
                return -ENOMEM;
        }
        p->procs = a;
        *c = (CudaProbeProc){ .pid = pid, .start_time = start_time, .refs = 1 };
        p->procs[p->n_procs++] = c;
        return cuda_probes_process_rescan(p, pid, start_time);
}

void cuda_probes_process_unref(CudaProbes *p, pid_t pid, uint64_t start_time) {
        size_t index;
        CudaProbeProc *c = p ? proc_find(p, pid, start_time, &index) : NULL;

        if (!c || --c->refs > 0)
                return;
        for (size_t i = 0; i < c->n_files; i++)
                file_unuse(p, c->files[i]);
        free(c->files);
        free(c);
        p->procs[index] = p->procs[--p->n_procs];
}

size_t cuda_probes_files(CudaProbes *p, const CudaProbeFile *const **ret) {
        *ret = (const CudaProbeFile *const *) p->files;
        return p->n_files;
}

size_t cuda_probes_process_files(CudaProbes *p, pid_t pid, uint64_t start_time,
                                 const CudaProbeFile *const **ret) {
        CudaProbeProc *c = p ? proc_find(p, pid, start_time, NULL) : NULL;

        *ret = c ? (const CudaProbeFile *const *) c->files : NULL;
        return c ? c->n_files : 0;
}
