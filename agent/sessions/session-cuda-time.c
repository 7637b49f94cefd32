/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* GPU time of CUDA kernels under the CPU stacks that launched them
 * (gpu.durations, docs/gpu.md: kernel durations). The CUPTI library in an
 * opted-in workload calls cgprof_cupti_launch(correlation) at each launch:
 * the launch probe counts it with its stack (bpf/profile.bpf.c,
 * CGPROF_LAUNCH_CUPTI) and notes (pid, correlation) -> the sample key in the
 * cupti_launches map. When the drain meets that sample key, its stack is
 * kept here (an anchor), not counted as a launch. The kernel records come
 * later on the agent's socket (the sampling room's cupti-socket.c): each
 * waits in the session's join (cuda-join.h) until the drain after its
 * launch's, then its GPU time is added to a stack of its own in the
 * session's data: the anchor's frames then a PROFILE_CUDA_TIME_MODULE
 * frame, its count the nanoseconds (report.c writes cuda-time.*). */
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "log.h"
#include "sampling.h"
#include "session.h"
#include "sessions-room.h"

/* A record waits this many joins (drains) for its launch's stack: the drain
 * that takes the launch's count comes within two. */
#define CUDA_JOIN_MAX_AGE 3

typedef struct SessionCudaAnchor {
        struct cgprof_sample_key key;
        struct SessionCudaAnchor *next; /* same hash */
        uint32_t process;
        uint32_t n;
        uint32_t *frames, *locations; /* root first, the kernel last, then the time frame */
} SessionCudaAnchor;

static uint64_t key_hash(const struct cgprof_sample_key *k) {
        const uint8_t *p = (const uint8_t *) k;
        uint64_t h = 14695981039346656037ULL;

        for (size_t i = 0; i < sizeof(*k); i++)
                h = (h ^ p[i]) * 1099511628211ULL;
        return h;
}

static void anchor_free(SessionCudaAnchor *a) {
        while (a) {
                SessionCudaAnchor *next = a->next;
                free(a->frames);
                free(a->locations);
                free(a);
                a = next;
        }
}

static SessionCudaAnchor *anchor_find(Session *s, const struct cgprof_sample_key *key) {
        SessionCudaAnchor *a =
                hashmap_get(&s->cuda_anchors, HASHMAP_KEY_UINT64, (HashmapKey){ .u64 = key_hash(key) });

        while (a && memcmp(&a->key, key, sizeof(*key)) != 0)
                a = a->next;
        return a;
}

/* Frames the CUPTI library adds above the launch API (its callback, CUPTI's
 * own): left out, so that the launch API is the kernel's caller, as with the
 * launch probes. */
static bool frame_of_cupti(const Frame *f) {
        return f->module &&
               (strncmp(f->module, "libcupti", 8) == 0 || strncmp(f->module, "libcgprof-cupti", 15) == 0);
}

int session_cuda_anchor(Session *s, const struct cgprof_sample_key *key, uint32_t process,
                        const uint32_t *frames, const uint32_t *locations, size_t n) {
        _cleanup_free_ SessionCudaAnchor *a = NULL;
        uint32_t time_frame, time_location;
        size_t keep;
        int r;

        if (n == 0 || anchor_find(s, key))
                return 0;
        /* The kernel is the last frame: the CUPTI frames before it go. */
        keep = n - 1;
        while (keep > 0 && frame_of_cupti(&s->data->frames[frames[keep - 1]]))
                keep--;
        r = profile_data_intern_frame(s->data, "[GPU time]", PROFILE_CUDA_TIME_MODULE, FRAME_USER,
                                      &time_frame);
        if (r < 0)
                return r;
        r = profile_data_intern_location(s->data, 0, PROFILE_NONE, time_frame, &time_location);
        if (r < 0)
                return r;
        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->frames = malloc((keep + 2) * sizeof(uint32_t));
        a->locations = malloc((keep + 2) * sizeof(uint32_t));
        if (!a->frames || !a->locations) {
                free(a->frames);
                free(a->locations);
                return -ENOMEM;
        }
        memcpy(a->frames, frames, keep * sizeof(uint32_t));
        memcpy(a->locations, locations, keep * sizeof(uint32_t));
        a->frames[keep] = frames[n - 1];
        a->locations[keep] = locations[n - 1];
        a->frames[keep + 1] = time_frame;
        a->locations[keep + 1] = time_location;
        a->n = (uint32_t) keep + 2;
        a->process = process;
        a->key = *key;
        a->next = hashmap_get(&s->cuda_anchors, HASHMAP_KEY_UINT64, (HashmapKey){ .u64 = key_hash(key) });
        r = hashmap_replace(&s->cuda_anchors, HASHMAP_KEY_UINT64, (HashmapKey){ .u64 = key_hash(key) }, a,
                            NULL);
        if (r < 0) {
                free(a->frames);
                free(a->locations);
                return r;
        }
        TAKE_PTR(a);
        return 1;
}

void session_cuda_anchors_forget(Session *s) {
        HashmapIter i = HASHMAP_ITER_INIT;
        void *v;

        while (hashmap_next(&s->cuda_anchors, &i, NULL, &v))
                anchor_free(v);
        hashmap_clear(&s->cuda_anchors);
}

void session_cuda_time_free(Session *s) {
        session_cuda_anchors_forget(s);
        cuda_join_done(&s->cuda_join);
}

int session_cuda_records(Session *s, uint32_t pid, uint32_t dropped, const CuptiWireKernel *k, size_t n) {
        int r;

        cuda_join_add_dropped(&s->cuda_join, dropped);
        for (size_t i = 0; i < n; i++) {
                r = cuda_join_add(&s->cuda_join, pid, k[i].correlation, k[i].start_ns, k[i].end_ns,
                                  k[i].device);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int join_lookup(void *userdata, uint32_t pid, uint32_t correlation, void **ret_anchor) {
        Session *s = userdata;
        struct cgprof_sample_key key;
        SessionCudaAnchor *a;
        int r;

        r = sampler_cupti_launch_find(s->room->sampler, pid, correlation, &key);
        if (r <= 0)
                return r;
        /* The map's key is the sender's pid: another session's launch of
         * the same process (a cgroup moved) is not this one's. */
        if (key.session != s->slot)
                return 0;
        a = anchor_find(s, &key);
        if (!a)
                return 0; /* its count not drained yet */
        sampler_cupti_launch_forget(s->room->sampler, pid, correlation);
        *ret_anchor = a;
        return 1;
}

static int join_emit(void *userdata, void *anchor, const CudaJoinRecord *rec) {
        Session *s = userdata;
        SessionCudaAnchor *a = anchor;

        if (rec->ns == 0)
                return 0;
        return profile_data_add_stack_full(s->data, a->process, a->frames, a->locations, a->n, false,
                                           rec->ns);
}

void session_cuda_join(Session *s, bool final) {
        int r;

        if (!s->profile->gpu_durations || !s->data || s->cuda_join.n_pending == 0)
                return;
        r = cuda_join_run(&s->cuda_join, join_lookup, join_emit, s, final ? 0 : CUDA_JOIN_MAX_AGE);
        if (r < 0)
                log_debug_errno(r, "Session %s: failed to join kernel records, ignoring: %m", s->id_string);
}

void session_cuda_time_info(Session *s, ReportCudaTimeInfo *ret) {
        const CudaJoin *j = &s->cuda_join;

        *ret = (ReportCudaTimeInfo){ .enabled = s->profile->gpu_durations,
                                     .records = j->records,
                                     .joined = j->joined,
                                     .joined_ns = j->joined_ns,
                                     .not_joined = j->not_joined,
                                     .not_joined_ns = j->not_joined_ns,
                                     .dropped = j->dropped,
                                     .pending = j->n_pending };
}
