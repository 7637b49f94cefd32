/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include <systemd/sd-event.h>

#include "macro.h"

/* The launch probes of CUDA kernel launches (docs/gpu.md): for the
 * processes of sessions that count launches, the files they map that
 * define a launch entry point (libcudart.so.*, libcuda.so.*, a program or
 * library that links cudart statically) get one uprobe per entry point,
 * once per file however many processes map it, detached once no process
 * that holds it is left. Files are found by their symbols (.symtab, or
 * .dynsym when stripped): a file stripped of both, with cudart linked
 * statically, has no entry point to find and is not probed. */

typedef struct Sampler Sampler;
typedef struct CudaProbes CudaProbes;

/* Each file is read (its symbols) on a worker thread of event's. */
CudaProbes *cuda_probes_new(Sampler *sampler, sd_event *event);
CudaProbes *cuda_probes_free(CudaProbes *p);

/* Looks (again) at the process's mappings: attaches the probes of the
 * files it maps now, lets go of those it no longer maps (dlclose()). Each
 * call for a new (pid, start_time) takes a reference, dropped by
 * cuda_probes_process_unref(). Returns the number of files the process
 * maps that have probes, or are being looked at (their symbols read on the
 * worker: the probes come when that is done). */
int cuda_probes_process_ref(CudaProbes *p, pid_t pid, uint64_t start_time);
int cuda_probes_process_rescan(CudaProbes *p, pid_t pid, uint64_t start_time);
void cuda_probes_process_unref(CudaProbes *p, pid_t pid, uint64_t start_time);

/* A probed file: its path (as the first process that mapped it names it)
 * and the entry points attached in it. */
typedef struct CudaProbeFile {
        uint64_t dev, ino;
        char *path;
        char *entries; /* "cudaLaunchKernel,cudaLaunchKernel_ptsz,...": attached; NULL: none */
        struct bpf_link **links;
        size_t n_links;
        unsigned users; /* processes that map it */
        bool pending; /* its symbols are being read (on the worker) */
        bool orphan; /* no process holds it any more: freed once read */
} CudaProbeFile;

/* The probed files the process maps, as of its last look (none for a
 * process not referenced). */
size_t cuda_probes_process_files(CudaProbes *p, pid_t pid, uint64_t start_time,
                                 const CudaProbeFile *const **ret);

/* The files looked at (with probes: n_links > 0, or none). */
size_t cuda_probes_files(CudaProbes *p, const CudaProbeFile *const **ret);
