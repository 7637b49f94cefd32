/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* agent/base/worker.c: jobs run off the loop's thread, in submission order, and
 * come back to the loop (through its eventfd) once run; flush waits for
 * all; freeing hands back the ones that never ran. */
#include <fcntl.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <unistd.h>
#include <stdatomic.h>

#include "tests.h"
#include "worker.h"

#define N_JOBS 1000

typedef struct TestJob {
        WorkerJob job;
        unsigned index;
        pthread_t ran_on;
        bool ran, done;
} TestJob;

static unsigned run_order[N_JOBS], n_run; /* written on the worker only */
static unsigned done_order[N_JOBS], n_done, n_not_ran;
static atomic_bool hold, started; /* a test that wants the worker to wait in a job */

static void sleep_ms(long ms) {
        struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
}

static void job_run(WorkerJob *j) {
        TestJob *t = (TestJob *) j;

        atomic_store(&started, true);
        while (atomic_load(&hold))
                sleep_ms(1);
        t->ran_on = pthread_self();
        t->ran = true;
        run_order[n_run++] = t->index;
}

static void job_done(WorkerJob *j, bool ran) {
        TestJob *t = (TestJob *) j;

        t->done = true;
        if (ran)
                done_order[n_done++] = t->index;
        else
                n_not_ran++;
}

static void reset(void) {
        n_run = n_done = n_not_ran = 0;
}

static int on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        return sd_event_exit(sd_event_source_get_event(s), -ETIMEDOUT);
}

static int on_check(sd_event_source *s, void *userdata) {
        Worker *w = userdata;
        if (worker_pending(w) == 0)
                return sd_event_exit(sd_event_source_get_event(s), 0);
        return 0;
}

TEST(jobs_come_back_to_the_loop_in_order) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        Worker *w = NULL;
        TestJob *jobs = calloc(N_JOBS, sizeof(TestJob));
        sd_event_source *timeout = NULL, *check = NULL;
        WorkerStats st;

        reset();
        ASSERT_NOT_NULL(jobs);
        ASSERT_EQ(sd_event_new(&e), 0);
        ASSERT_EQ(worker_new(e, "test-worker", WORKER_NICE_BACKGROUND, &w), 0);
        for (unsigned i = 0; i < N_JOBS; i++) {
                jobs[i].index = i;
                worker_submit(w, &jobs[i].job, job_run, job_done);
        }
        ASSERT_EQ(worker_pending(w), N_JOBS);
        /* Done only on the loop: nothing is handed back until it runs. */
        ASSERT_EQ(n_done, 0U);

        ASSERT_TRUE(sd_event_add_time_relative(e, &timeout, CLOCK_MONOTONIC, 60 * USEC_PER_SEC, 0,
                                               on_timeout, NULL) >= 0);
        ASSERT_TRUE(sd_event_add_post(e, &check, on_check, w) >= 0);
        ASSERT_EQ(sd_event_loop(e), 0);

        ASSERT_EQ(n_run, N_JOBS);
        ASSERT_EQ(n_done, N_JOBS);
        for (unsigned i = 0; i < N_JOBS; i++) {
                ASSERT_EQ(run_order[i], i);
                ASSERT_EQ(done_order[i], i);
                ASSERT_TRUE(jobs[i].ran && jobs[i].done);
                ASSERT_FALSE(pthread_equal(jobs[i].ran_on, pthread_self()));
        }
        worker_stats(w, &st);
        ASSERT_EQ(st.submitted, (uint64_t) N_JOBS);
        ASSERT_EQ(st.completed, (uint64_t) N_JOBS);
        ASSERT_EQ(st.pending, 0U);
        ASSERT_EQ(st.pending_max, N_JOBS);

        sd_event_source_unref(timeout);
        sd_event_source_unref(check);
        worker_free(w);
        free(jobs);
}

TEST(flush_waits_for_every_job) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        Worker *w = NULL;
        TestJob jobs[10] = {};

        reset();
        ASSERT_EQ(sd_event_new(&e), 0);
        ASSERT_EQ(worker_new(e, "test-worker", WORKER_NICE_BACKGROUND, &w), 0);
        for (unsigned i = 0; i < ELEMENTSOF(jobs); i++) {
                jobs[i].index = i;
                worker_submit(w, &jobs[i].job, job_run, job_done);
        }
        worker_flush(w);
        ASSERT_EQ(n_done, 10U);
        ASSERT_EQ(worker_pending(w), 0U);
        for (unsigned i = 0; i < ELEMENTSOF(jobs); i++)
                ASSERT_TRUE(jobs[i].done);
        worker_free(w);
}

static void *release_later(void *arg) {
        sleep_ms(50);
        atomic_store(&hold, false);
        return NULL;
}

TEST(free_hands_back_what_never_ran) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        Worker *w = NULL;
        TestJob jobs[5] = {};
        pthread_t releaser;

        reset();
        ASSERT_EQ(sd_event_new(&e), 0);
        ASSERT_EQ(worker_new(e, "test-worker", WORKER_NICE_BACKGROUND, &w), 0);
        /* The first job waits; the others stay queued. */
        atomic_store(&hold, true);
        atomic_store(&started, false);
        for (unsigned i = 0; i < ELEMENTSOF(jobs); i++) {
                jobs[i].index = i;
                worker_submit(w, &jobs[i].job, job_run, job_done);
        }
        while (!atomic_load(&started))
                sleep_ms(1);
        /* Freed while the first job runs: it finishes, the rest never run
         * (unless the worker took them before it was told to stop). */
        ASSERT_EQ(pthread_create(&releaser, NULL, release_later, NULL), 0);
        worker_free(w);
        pthread_join(releaser, NULL);
        /* Every job is handed back exactly once, run or not, and what ran
         * ran first, in order. */
        ASSERT_EQ(n_done + n_not_ran, (unsigned) ELEMENTSOF(jobs));
        ASSERT_TRUE(n_done >= 1);
        for (unsigned i = 0; i < ELEMENTSOF(jobs); i++)
                ASSERT_TRUE(jobs[i].done);
        for (unsigned i = 0; i < n_done; i++)
                ASSERT_EQ(done_order[i], i);
}

/* A done() that takes 2 ms, and a bus-like handler of normal priority that
 * counts how often it got a turn. */
static unsigned turns, turns_at_done[10];

static void slow_done(WorkerJob *j, bool ran) {
        job_done(j, ran);
        if (ran)
                turns_at_done[n_done - 1] = turns;
        sleep_ms(2);
}

static int on_other(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Worker *w = userdata;
        turns++;
        if (worker_pending(w) == 0)
                return sd_event_exit(sd_event_source_get_event(s), 0);
        return 0;
}

TEST(dispatch_budget_lets_others_take_turns) {
        _cleanup_(sd_event_unrefp) sd_event *e = NULL;
        Worker *w = NULL;
        TestJob jobs[10] = {};
        sd_event_source *timeout = NULL, *other = NULL;
        int pipe_fds[2];

        reset();
        turns = 0;
        /* Always readable: a handler that wants a turn at every iteration. */
        ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
        ASSERT_EQ(write(pipe_fds[1], "x", 1), 1);
        ASSERT_EQ(sd_event_new(&e), 0);
        ASSERT_EQ(worker_new(e, "test-worker", 0, &w), 0);
        ASSERT_EQ(worker_set_dispatch(w, USEC_PER_MSEC, SD_EVENT_PRIORITY_IMPORTANT), 0);
        for (unsigned i = 0; i < ELEMENTSOF(jobs); i++) {
                jobs[i].index = i;
                worker_submit(w, &jobs[i].job, job_run, slow_done);
        }
        /* Every job has run before the loop looks: one dispatch could hand
         * back all ten (20 ms); with a budget of 1 ms it hands back one. */
        while (n_run < ELEMENTSOF(jobs))
                sleep_ms(1);
        ASSERT_TRUE(sd_event_add_time_relative(e, &timeout, CLOCK_MONOTONIC, 60 * USEC_PER_SEC, 0,
                                               on_timeout, NULL) >= 0);
        ASSERT_TRUE(sd_event_add_io(e, &other, pipe_fds[0], EPOLLIN, on_other, w) >= 0);
        ASSERT_EQ(sd_event_loop(e), 0);

        ASSERT_EQ(n_done, (unsigned) ELEMENTSOF(jobs));
        for (unsigned i = 0; i < n_done; i++)
                ASSERT_EQ(done_order[i], i);
        /* The other handler had a turn between any two done() calls. */
        for (unsigned i = 1; i < n_done; i++)
                ASSERT_TRUE(turns_at_done[i] > turns_at_done[i - 1]);

        sd_event_source_unref(timeout);
        sd_event_source_unref(other);
        worker_free(w);
        close(pipe_fds[0]);
        close(pipe_fds[1]);
}

DEFINE_TEST_MAIN
