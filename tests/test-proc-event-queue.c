/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* agent/sampling/proc-event-queue.c and agent/sampling/sample-park.c: process events come
 * back to the loop in order, each with its process's mappings read on the
 * worker and waiting in the maps cache (no read on the loop); a PID is
 * pending while an event of it is queued; parked samples keep copies of
 * their stacks and come back once they stop waiting. A fake proc root in a
 * temporary directory stands for /proc. */
#include <limits.h>
#include <sys/stat.h>

#include "proc-event-queue.h"
#include "sample-park.h"
#include "proc-maps-fixture.h"
#include "tests.h"

#define N_EVENTS 50

static char *root;
static ProcMapsCache *cache;
static ProcEventQueue *queue;
static unsigned handled[N_EVENTS], n_handled;
static char first_lines[N_EVENTS][128];
static bool pending_while_handled;

static void on_event(const struct cgprof_proc_event *e, const char *comm, const JobIdentity *identity,
                     void *userdata) {
        _cleanup_fclose_ FILE *f = proc_maps_fopen(cache, root, (pid_t) e->pid);
        char *line = NULL;
        size_t n = 0;

        handled[n_handled] = e->exec_id;
        if (f && getline(&line, &n, f) > 0)
                snprintf(first_lines[n_handled], sizeof(first_lines[0]), "%s", line);
        else
                snprintf(first_lines[n_handled], sizeof(first_lines[0]), "error %d", f ? 0 : errno);
        free(line);
        n_handled++;
        /* Another event of the same PID is still queued after this one. */
        if (e->exec_id == 0 && proc_event_queue_pid_pending(queue, e->pid))
                pending_while_handled = true;
}

static int on_check(sd_event_source *s, void *userdata) {
        if (proc_event_queue_pending(queue) == 0)
                return sd_event_exit(sd_event_source_get_event(s), 0);
        return 0;
}

static int on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        return sd_event_exit(sd_event_source_get_event(s), -ETIMEDOUT);
}

TEST(events_in_order_with_their_mappings) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        sd_event_source *check = NULL, *timeout = NULL;
        char tmpl[] = "/tmp/cgprof-test-proc-events-XXXXXX";
        uint64_t reads, hits, put;
        ProcEventQueueStats st;

        root = mkdtemp(tmpl);
        ASSERT_NOT_NULL(root);
        ASSERT_EQ(sd_event_new(&e), 0);
        cache = proc_maps_cache_new();
        ASSERT_NOT_NULL(cache);
        ASSERT_EQ(proc_event_queue_new(e, cache, root, on_event, NULL, &queue), 0);

        /* PIDs 100..109; PID 999 has no directory (gone). */
        for (int pid = 100; pid < 110; pid++) {
                char text[256];
                snprintf(text, sizeof(text),
                         "00400000-00401000 r--p 00000000 08:02 %d      /usr/bin/p%d\n"
                         "00401000-00402000 r-xp 00001000 08:02 %d      /usr/bin/p%d\n",
                         pid, pid, pid, pid);
                write_proc_maps(root, pid, text);
        }
        for (unsigned i = 0; i < N_EVENTS; i++) {
                struct cgprof_proc_event ev = {
                        .pid = i == N_EVENTS - 1 ? 999 : 100 + i % 10,
                        .exec_id = i, /* the order, for the check */
                };
                proc_event_queue_add(queue, &ev, "p");
        }
        ASSERT_TRUE(proc_event_queue_pid_pending(queue, 100));
        ASSERT_FALSE(proc_event_queue_pid_pending(queue, 110));
        ASSERT_EQ(proc_event_queue_pending(queue), (unsigned) N_EVENTS);

        ASSERT_TRUE(sd_event_add_post(e, &check, on_check, NULL) >= 0);
        ASSERT_TRUE(sd_event_add_time_relative(e, &timeout, CLOCK_MONOTONIC, 60 * USEC_PER_SEC, 0,
                                               on_timeout, NULL) >= 0);
        ASSERT_EQ(sd_event_loop(e), 0);

        ASSERT_EQ(n_handled, (unsigned) N_EVENTS);
        for (unsigned i = 0; i < N_EVENTS - 1; i++) {
                char want[128];
                ASSERT_EQ(handled[i], i);
                /* Only the executable line, read on the worker. */
                snprintf(want, sizeof(want), "00401000-00402000 r-xp 00001000 08:02 %u      /usr/bin/p%u\n",
                         100 + i % 10, 100 + i % 10);
                ASSERT_STREQ(first_lines[i], want);
        }
        /* The gone process: its readers see ENOENT, as from the file. */
        ASSERT_STREQ(first_lines[N_EVENTS - 1], "error 2");
        ASSERT_TRUE(pending_while_handled);
        ASSERT_FALSE(proc_event_queue_pid_pending(queue, 100));
        proc_maps_cache_stats(cache, &reads, &hits, &put);
        ASSERT_EQ(reads, UINT64_C(0)); /* nothing read on the loop */
        ASSERT_EQ(put, (uint64_t) N_EVENTS);
        proc_event_queue_stats(queue, &st);
        ASSERT_EQ(st.queued, (uint64_t) N_EVENTS);
        ASSERT_EQ(st.handled, (uint64_t) N_EVENTS);
        ASSERT_EQ(st.pending_max, (unsigned) N_EVENTS);

        sd_event_source_unref(check);
        sd_event_source_unref(timeout);
        proc_event_queue_free(queue);
        proc_maps_cache_free(cache);
        char cmd[PATH_MAX + 16];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
        ASSERT_EQ(system(cmd), 0);
}

static unsigned replayed_pids[16], n_replayed;
static uint64_t replayed_first_pc[16];

static void on_replay(const struct cgprof_sample_key *key, uint64_t count, const SamplerStack *user,
                      const SamplerStack *kernel, const SamplerStack *python, bool stack_lost,
                      void *userdata) {
        replayed_pids[n_replayed] = key->pid;
        replayed_first_pc[n_replayed] = user && user->n > 0 ? user->pcs[0] : 0;
        if (user && user->fp_frames)
                ASSERT_EQ(user->fp_frames[0], UINT64_C(5));
        ASSERT_NULL(python);
        ASSERT_EQ(stack_lost, key->pid == 3);
        n_replayed++;
}

static bool waits_for_pid_2(const struct cgprof_sample_key *key, void *userdata) {
        return key->pid == 2;
}

TEST(parked_samples) {
        SamplePark p = {};
        uint64_t pcs[3] = { 0x1000, 0x2000, 0x3000 }, fp[2] = { 5, 0 };
        SamplerStack user = { .pcs = pcs, .n = 3, .fp_frames = fp }, kernel = { .pcs = pcs, .n = 1 };

        for (uint32_t pid = 1; pid <= 3; pid++) {
                struct cgprof_sample_key key = { .pid = pid };
                pcs[0] = 0x1000 * pid;
                ASSERT_EQ(sample_park_add(&p, &key, 1, pid == 3 ? NULL : &user, &kernel, NULL, pid == 3), 0);
        }
        pcs[0] = 0xdead; /* the caller's buffers change: the copies do not */

        /* PID 2 still waits: 1 and 3 come back, in order. */
        sample_park_replay(&p, waits_for_pid_2, on_replay, NULL);
        ASSERT_EQ(n_replayed, 2U);
        ASSERT_EQ(replayed_pids[0], 1U);
        ASSERT_EQ(replayed_first_pc[0], UINT64_C(0x1000));
        ASSERT_EQ(replayed_pids[1], 3U);
        ASSERT_EQ(p.n, (size_t) 1);
        /* Without a wait function (a session ending): all. */
        sample_park_replay(&p, NULL, on_replay, NULL);
        ASSERT_EQ(n_replayed, 3U);
        ASSERT_EQ(replayed_pids[2], 2U);
        ASSERT_EQ(replayed_first_pc[2], UINT64_C(0x2000));
        ASSERT_EQ(p.n, (size_t) 0);

        /* Bounded. */
        for (unsigned i = 0; i < SAMPLE_PARK_MAX; i++) {
                struct cgprof_sample_key key = { .pid = 7 };
                ASSERT_EQ(sample_park_add(&p, &key, 1, &user, NULL, NULL, false), 0);
        }
        struct cgprof_sample_key key = { .pid = 7 };
        ASSERT_EQ(sample_park_add(&p, &key, 1, &user, NULL, NULL, false), -ENOSPC);
        ASSERT_EQ(p.full_total, UINT64_C(1));
        ASSERT_EQ(p.parked_total, (uint64_t) SAMPLE_PARK_MAX + 3);
        sample_park_done(&p);
}

DEFINE_TEST_MAIN
