/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <sys/types.h>

#include "job-identity.h"
#include "macro.h"

/* The aggregated, symbolized samples of one report: interned frames, the
 * processes seen, and unique stacks with counts. Pure data: the sampler and
 * symbolizer fill it, the report writers read it. */

typedef enum FrameKind {
        FRAME_USER, /* resolved user-space function */
        FRAME_KERNEL, /* kernel function */
        FRAME_UNKNOWN, /* unresolved address (module known or not) */
        FRAME_PYTHON, /* a Python function (its code object), file in Frame.file */
        FRAME_THREAD, /* a thread of the process, by name: the root of its stacks in off-CPU sessions */
        _FRAME_KIND_MAX,
} FrameKind;

typedef struct Frame {
        char *name; /* "function", or "[module]" / "[unknown]" when unresolved */
        char *module; /* basename of the ELF file ("libc.so.6"), "[kernel.kallsyms]", or NULL */
        char *file; /* the function's source file ("/src/main.go"), or NULL when unknown */
        FrameKind kind;
} Frame;

typedef struct ProfileProcess {
        pid_t pid;
        char *comm; /* short name: the root frame of its stacks */
        char *cmdline; /* full command line, args separated by spaces */
        char *python; /* CPython it runs: "3.11", "unsupported version 3.99"; NULL: none seen */
        uint64_t samples;
        /* Who it is in a distributed job (job-identity.h): its listed
         * environment keys (JOB_IDENTITY_NONE: none), its role, and a
         * worker's parent (the rank's own process; 0: none). */
        JobIdentity job;
        JobRole role;
        pid_t parent_pid;
} ProfileProcess;

#define PROFILE_NONE UINT32_MAX

/* The module of a CUDA kernel launch's leaf frame (the kernel launched):
 * stacks that end in one count launches, not CPU samples
 * (profile_data_split_launches()). */
#define PROFILE_CUDA_KERNEL_MODULE "[cuda kernel]"
/* The module of the frame a launch's stack may end in after its kernel:
 * the launch's dimensions, named "grid=XxYxZ block=XxYxZ stream=0x..."
 * (pprof labels; profile_data_launches_without_dims() drops it). */
#define PROFILE_CUDA_LAUNCH_MODULE "[cuda launch]"

/* A mapped file of a process, or the kernel: what pprof calls a Mapping. */
typedef struct ProfileMapping {
        char *file; /* path as mapped ("/usr/lib/x86_64-linux-gnu/libc.so.6"), "[vdso]", "[kernel.kallsyms]" */
        uint64_t start, limit, offset; /* address range and file offset of the mapping */
        char *build_id; /* lowercase hex, or NULL */
        bool kernel;
        /* How user stacks were walked through it (weighted by samples): */
        char *unwind_table; /* its unwind table: "eh_frame", "none", "error: ...", ...; NULL: unknown */
        uint64_t table_frames; /* frames left with the unwind table */
        uint64_t fp_frames; /* frames left by frame pointer */
        uint64_t sp_cfa_frames, fp_cfa_frames; /* table rows found (non-leaf): CFA from sp / from fp */
        /* Where its function symbols came from: "symtab", "dynsym",
         * "minidebuginfo", "debug file", "none"; NULL: unknown (kernel). */
        char *symbols;
} ProfileMapping;

/* One function at a sampled address: what pprof calls a Line of a
 * Location. An address in code where calls were inlined has one location
 * per function of the chain: the physical function's (inlined_into
 * PROFILE_NONE), then each inlined call's, whose inlined_into is the
 * location of the function it was inlined into. Stacks list them in that
 * order, root first, so the chain is consecutive entries of a stack. */
typedef struct ProfileLocation {
        uint64_t address; /* runtime address (in the process, or the kernel) */
        uint32_t mapping; /* index into mappings, or PROFILE_NONE */
        uint32_t frame; /* index into frames: the function it resolved to */
        uint32_t line; /* source line in that function, 0 when unknown */
        uint32_t inlined_into; /* PROFILE_NONE, or the location (same address) this call was inlined into */
} ProfileLocation;

typedef struct ProfileStack {
        uint32_t process; /* index into processes */
        uint32_t *frames; /* frame indices, ROOT FIRST (outermost user frame ... innermost kernel frame) */
        uint32_t *locations; /* location indices parallel to frames, or NULL when addresses are unknown */
        uint32_t n_frames;
        bool truncated; /* the user stack hit the kernel's depth limit */
        uint64_t count; /* CPU samples */
        uint64_t offcpu_ns; /* time off CPU (waiting), ns: profile "events" with "offcpu" */
} ProfileStack;

typedef struct ProfileData {
        Frame *frames;
        size_t n_frames;
        ProfileProcess *processes;
        size_t n_processes;
        ProfileStack *stacks;
        size_t n_stacks;
        ProfileMapping *mappings;
        size_t n_mappings;
        ProfileLocation *locations;
        size_t n_locations;
        void *frame_index; /* private lookup structures */
        void *stack_index;
        void *mapping_index;
        void *location_index;
        size_t allocated_frames, allocated_processes, allocated_stacks, allocated_mappings,
                allocated_locations;
} ProfileData;

ProfileData *profile_data_new(void);
ProfileData *profile_data_free(ProfileData *d);
DEFINE_TRIVIAL_CLEANUP_FUNC(ProfileData *, profile_data_free);

/* Returns the index of the frame (name, module, file, kind), adding it if
 * new; file is the function's source file, NULL when unknown. Strings
 * (frame names, modules, files, comm, cmdline) are stored as valid UTF-8:
 * invalid bytes become U+FFFD, so every report format can carry them. */
int profile_data_intern_frame_full(ProfileData *d, const char *name, const char *module, const char *file,
                                   FrameKind kind, uint32_t *ret_index);
/* The same without a source file. */
int profile_data_intern_frame(ProfileData *d, const char *name, const char *module, FrameKind kind,
                              uint32_t *ret_index);
/* Adds a process; returns its index. Processes are not deduplicated: the
 * caller keeps one index per process instance. */
int profile_data_add_process(ProfileData *d, pid_t pid, const char *comm, const char *cmdline,
                             uint32_t *ret_index);
/* Adds count samples of the stack (frames root first) of a process; equal
 * (process, frames) stacks are merged. Also adds to the process's samples. */
int profile_data_add_stack(ProfileData *d, uint32_t process, const uint32_t *frames, size_t n_frames,
                           uint64_t count);

/* Returns the index of the mapping, adding it if new (equal: all fields). */
int profile_data_intern_mapping(ProfileData *d, const char *file, uint64_t start, uint64_t limit,
                                uint64_t offset, const char *build_id, bool kernel, uint32_t *ret_index);
/* Sets what a mapping's unwind table is (kept if already set). */
int profile_data_mapping_set_unwind_table(ProfileData *d, uint32_t mapping, const char *unwind_table);
/* Sets where a mapping's symbols came from (kept if already set). */
int profile_data_mapping_set_symbols(ProfileData *d, uint32_t mapping, const char *symbols);
/* The same, replacing what was set (symbols that arrived later). */
int profile_data_mapping_update_symbols(ProfileData *d, uint32_t mapping, const char *symbols);

/* Returns the index of the location (address, mapping, frame, line,
 * inlined_into), adding it if new. line: 0 when unknown; inlined_into:
 * PROFILE_NONE, or for an inlined call the location of the function it was
 * inlined into (an earlier location of the same address and mapping). */
int profile_data_intern_location_full(ProfileData *d, uint64_t address, uint32_t mapping, uint32_t frame,
                                      uint32_t line, uint32_t inlined_into, uint32_t *ret_index);
/* The same with no line and not inlined. */
int profile_data_intern_location(ProfileData *d, uint64_t address, uint32_t mapping, uint32_t frame,
                                 uint32_t *ret_index);
/* Sets the process's CPython status (profile-data keeps a copy). */
/* Who the process is in a distributed job (copied). */
int profile_data_process_set_job(ProfileData *d, uint32_t process, const JobIdentity *job, JobRole role,
                                 pid_t parent_pid);
int profile_data_process_set_python(ProfileData *d, uint32_t process, const char *status);
/* Like profile_data_add_stack(), with the locations of the frames (parallel
 * to frames, may be NULL) and whether the stack was truncated; equal
 * (process, frames, locations) stacks are merged. An inlined location must
 * come right after the location it was inlined into (-EINVAL otherwise). */
int profile_data_add_stack_full(ProfileData *d, uint32_t process, const uint32_t *frames,
                                const uint32_t *locations, size_t n_frames, bool truncated, uint64_t count);

/* The same with both values: count CPU samples and offcpu_ns nanoseconds off CPU. */
int profile_data_add_stack_values(ProfileData *d, uint32_t process, const uint32_t *frames,
                                  const uint32_t *locations, size_t n_frames, bool truncated, uint64_t count,
                                  uint64_t offcpu_ns);

uint64_t profile_data_total(const ProfileData *d);
/* The off-CPU nanoseconds of all stacks. */
uint64_t profile_data_offcpu_total(const ProfileData *d);

/* Which values of the stacks a copy keeps. */
typedef enum ProfileValue {
        PROFILE_VALUE_ALL, /* both, as they are */
        PROFILE_VALUE_CPU, /* the CPU samples: stacks without any are left out, offcpu_ns 0 */
        PROFILE_VALUE_OFFCPU_USEC, /* count: the off-CPU time in µs (stacks under 0.5 µs left out) */
} ProfileValue;
/* A copy of d (all processes) with one value (for the writers of one value:
 * folded, SVG, speedscope). NULL on OOM. */
ProfileData *profile_data_of_value(const ProfileData *d, ProfileValue value);

/* Whether d has thread frames (FRAME_THREAD, off-CPU sessions). */
bool profile_data_has_threads(const ProfileData *d);
/* A copy of d without its thread frames: stacks equal but for their thread
 * merged. NULL on OOM. */
ProfileData *profile_data_without_threads(const ProfileData *d);
/* The wall-clock view of d: its stacks (thread frames kept; CUDA launches
 * left out) with one value,
 * count: CPU samples × period_ns plus off-CPU time, in µs (stacks under
 * 0.5 µs left out). NULL on OOM. */
ProfileData *profile_data_wall_clock(const ProfileData *d, uint64_t period_ns);

/* Late resolution: the frames that were unresolved (FRAME_UNKNOWN) when
 * their stacks were added may resolve now that more symbols are known (a
 * debug file fetched later, a JIT map written later).
 *
 * 'resolve' is asked about each unresolved frame of a stack that has a
 * user-space location (in a user mapping, or in none: JIT code in anonymous
 * memory), with the stack's process and the
 * location; it returns 1 and fills *ret (a name, a module, a kind other than
 * FRAME_UNKNOWN; the strings need to live until the next call only) when
 * the frame resolves now, 0 when it does not, or a negative errno. Stacks
 * share their locations: it is asked once per location, and again only when
 * the location's next stack is another process's (a shared library). The
 * strings it returns must stay valid until profile_data_relocate() returns:
 * a first pass only looks for one frame that resolves (nothing is copied
 * when none does), a second builds the result, asking again. */
typedef struct ProfileFrameName {
        const char *name;
        const char *module;
        FrameKind kind;
} ProfileFrameName;
typedef int (*ProfileResolveFunc)(void *userdata, uint32_t process, const ProfileLocation *location,
                                  ProfileFrameName *ret);

typedef struct ProfileRelocateStats {
        uint64_t candidates; /* unresolved user frames in the stacks, weighted by samples */
        uint64_t resolved; /* of which resolve now, weighted by samples */
        size_t locations_resolved; /* distinct locations that resolve now */
        size_t calls; /* times 'resolve' was asked (both passes) */
        size_t stacks_before, stacks_after; /* stacks that became equal are merged */
} ProfileRelocateStats;

/* Builds *ret: d with the frames that resolve now replaced (the stack's
 * frame and its location), stacks that became equal merged (counts and
 * process samples added), and only the frames and locations the stacks
 * still use. Processes and mappings keep their indices (and everything
 * they carry). *ret is NULL when nothing resolves (d stays as it is, and
 * nothing was copied). *ret_stats
 * (optional) is filled either way. */
int profile_data_relocate(const ProfileData *d, ProfileResolveFunc resolve, void *userdata,
                          ProfileData **ret, ProfileRelocateStats *ret_stats);

/* A new ProfileData with only the stacks (and their frames, mappings,
 * locations) of one process, for per-process reports. NULL on OOM/EINVAL. */
ProfileData *profile_data_of_process(const ProfileData *d, uint32_t process);
/* The same for several processes (indices into d->processes) in one
 * report: each keeps its own entry in processes[]. */
ProfileData *profile_data_of_processes(const ProfileData *d, const uint32_t *processes, size_t n);
/* Adds every process of d to into, each its own entry, with its stacks
 * (frames, mappings and locations interned in into): the several sessions
 * of one distributed job in one report (docs/training-jobs.md). */
int profile_data_merge(ProfileData *into, const ProfileData *d);
/* Whether the stack counts CUDA kernel launches (its leaf's module is
 * PROFILE_CUDA_KERNEL_MODULE). */
bool profile_stack_is_launch(const ProfileData *d, const ProfileStack *st);
/* d's CPU samples (*ret_cpu) and its launches (*ret_launches, NULL when
 * there are none; *ret_cpu is NULL then too: d is all CPU samples). */
int profile_data_split_launches(const ProfileData *d, ProfileData **ret_cpu, ProfileData **ret_launches);
/* The launches without their dimensions frame: each stack ends in its
 * kernel (stacks equal but for their dimensions merged). NULL on OOM. */
ProfileData *profile_data_launches_without_dims(const ProfileData *launches);

/* A function with its self (leaf) and total (inclusive, counted once per
 * stack) samples, sorted by self samples, descending, ties by name.
 * (Precisely: self desc, then total desc, then name; functions without
 * samples are left out; max 0 means no limit; *ret is NULL when *ret_n is 0.) */
typedef struct TopFunction {
        uint32_t frame;
        uint64_t self;
        uint64_t total;
} TopFunction;
int profile_data_top_functions(const ProfileData *d, size_t max, TopFunction **ret, size_t *ret_n);
