/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A worker thread (see worker.h): a queue of jobs to run under a lock, a
 * list of jobs that ran, and an eventfd that tells the loop there are some. */
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/eventfd.h>

#include "fileio.h"
#include "log.h"
#include "macro.h"
#include "worker.h"

struct Worker {
        sd_event_source *ran_source;
        int event_fd;
        char *name;
        int nice;
        uint64_t budget_usec; /* of done() calls per dispatch; 0: no limit */
        int64_t priority; /* of ran_source, when nothing is left over */

        /* The loop's. */
        WorkerStats stats;

        /* Shared, under lock. */
        pthread_mutex_t lock;
        pthread_cond_t cond; /* the worker waits for jobs */
        pthread_cond_t ran_cond; /* worker_flush() waits for the queue to empty */
        WorkerJob *queue_head, *queue_tail;
        WorkerJob *ran_head, *ran_tail;
        bool running; /* a job is being run */
        bool stop;

        pthread_t thread;
        bool thread_started;
};

static void list_append(WorkerJob **head, WorkerJob **tail, WorkerJob *job) {
        job->next = NULL;
        if (*tail)
                (*tail)->next = job;
        else
                *head = job;
        *tail = job;
}

static void *worker_main(void *userdata) {
        Worker *w = userdata;

        if (w->nice != 0 && setpriority(PRIO_PROCESS, (id_t) gettid(), w->nice) < 0)
                log_debug_errno(errno, "Failed to lower the priority of the %s thread, ignoring: %m",
                                w->name);

        for (;;) {
                WorkerJob *job;

                pthread_mutex_lock(&w->lock);
                while (!w->stop && !w->queue_head)
                        pthread_cond_wait(&w->cond, &w->lock);
                if (w->stop) {
                        pthread_mutex_unlock(&w->lock);
                        break;
                }
                job = w->queue_head;
                w->queue_head = job->next;
                if (!w->queue_head)
                        w->queue_tail = NULL;
                w->running = true;
                pthread_mutex_unlock(&w->lock);

                job->started_usec = now_usec(CLOCK_MONOTONIC);
                job->run(job);
                job->finished_usec = now_usec(CLOCK_MONOTONIC);

                pthread_mutex_lock(&w->lock);
                list_append(&w->ran_head, &w->ran_tail, job);
                w->running = false;
                pthread_cond_broadcast(&w->ran_cond);
                pthread_mutex_unlock(&w->lock);
                (void) eventfd_write(w->event_fd, 1);
        }
        return NULL;
}

static void job_done(Worker *w, WorkerJob *job) {
        uint64_t wait = job->started_usec - job->submitted_usec,
                 run = job->finished_usec - job->started_usec;

        w->stats.completed++;
        w->stats.pending--;
        w->stats.wait_usec_max = MAX(w->stats.wait_usec_max, wait);
        w->stats.run_usec_max = MAX(w->stats.run_usec_max, run);
        w->stats.run_usec_total += run;
        job->done(job, true);
}

/* Calls done() for the jobs that ran, until the budget (0: none) is spent;
 * returns true when some are left. */
static bool dispatch(Worker *w, uint64_t budget_usec) {
        uint64_t deadline = budget_usec > 0 ? now_usec(CLOCK_MONOTONIC) + budget_usec : 0;
        WorkerJob *list;

        pthread_mutex_lock(&w->lock);
        list = w->ran_head;
        w->ran_head = w->ran_tail = NULL;
        pthread_mutex_unlock(&w->lock);

        while (list) {
                WorkerJob *job = list;
                list = job->next;
                job_done(w, job);
                if (list && deadline > 0 && now_usec(CLOCK_MONOTONIC) >= deadline) {
                        /* The rest go back in front of what ran since. */
                        WorkerJob *tail = list;
                        while (tail->next)
                                tail = tail->next;
                        pthread_mutex_lock(&w->lock);
                        tail->next = w->ran_head;
                        if (!w->ran_head)
                                w->ran_tail = tail;
                        w->ran_head = list;
                        pthread_mutex_unlock(&w->lock);
                        return true;
                }
        }
        return false;
}

void worker_dispatch(Worker *w) {
        (void) dispatch(w, 0);
}

static int on_ran(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Worker *w = userdata;
        eventfd_t v;
        bool more;

        (void) eventfd_read(w->event_fd, &v);
        more = dispatch(w, w->budget_usec);
        if (w->budget_usec > 0) {
                if (more)
                        (void) eventfd_write(w->event_fd, 1); /* the next iteration goes on */
                (void) sd_event_source_set_priority(
                        s, more ? MAX(w->priority, (int64_t) SD_EVENT_PRIORITY_NORMAL) : w->priority);
        }
        return 0;
}

int worker_set_dispatch(Worker *w, uint64_t budget_usec, int64_t priority) {
        w->budget_usec = budget_usec;
        w->priority = priority;
        return sd_event_source_set_priority(w->ran_source, priority);
}

void worker_submit(Worker *w, WorkerJob *job, WorkerRunFunc run, WorkerDoneFunc done) {
        job->run = run;
        job->done = done;
        job->submitted_usec = now_usec(CLOCK_MONOTONIC);
        job->started_usec = job->finished_usec = 0;

        w->stats.submitted++;
        w->stats.pending++;
        w->stats.pending_max = MAX(w->stats.pending_max, w->stats.pending);

        pthread_mutex_lock(&w->lock);
        list_append(&w->queue_head, &w->queue_tail, job);
        pthread_cond_signal(&w->cond);
        pthread_mutex_unlock(&w->lock);
}

void worker_flush(Worker *w) {
        pthread_mutex_lock(&w->lock);
        while (w->queue_head || w->running)
                pthread_cond_wait(&w->ran_cond, &w->lock);
        pthread_mutex_unlock(&w->lock);
        /* Jobs that done() submits in turn are flushed too. */
        while (w->stats.pending > 0) {
                worker_dispatch(w);
                if (w->stats.pending == 0)
                        break;
                pthread_mutex_lock(&w->lock);
                while (w->queue_head || w->running)
                        pthread_cond_wait(&w->ran_cond, &w->lock);
                pthread_mutex_unlock(&w->lock);
        }
}

unsigned worker_pending(const Worker *w) {
        return w ? w->stats.pending : 0;
}

void worker_stats(const Worker *w, WorkerStats *ret) {
        *ret = w ? w->stats : (WorkerStats){};
}

int worker_new(sd_event *event, const char *name, int nice, Worker **ret) {
        Worker *w;
        sigset_t all, old;
        int r;

        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->event_fd = -EBADF;
        w->nice = nice;
        pthread_mutex_init(&w->lock, NULL);
        pthread_cond_init(&w->cond, NULL);
        pthread_cond_init(&w->ran_cond, NULL);
        w->name = strdup(name);
        if (!w->name) {
                r = -ENOMEM;
                goto fail;
        }
        w->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (w->event_fd < 0) {
                r = negative_errno();
                goto fail;
        }
        r = sd_event_add_io(event, &w->ran_source, w->event_fd, EPOLLIN, on_ran, w);
        if (r < 0)
                goto fail;
        (void) sd_event_source_set_description(w->ran_source, w->name);

        /* Signals stay with the event loop's thread. */
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        r = -pthread_create(&w->thread, NULL, worker_main, w);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r < 0)
                goto fail;
        w->thread_started = true;
        /* Named for ps, top and perf: "cgprofd" plus what it does. */
        {
                char comm[16];
                snprintf(comm, sizeof(comm), "%s", w->name);
                (void) pthread_setname_np(w->thread, comm);
        }
        *ret = w;
        return 0;
fail:
        worker_free(w);
        return r;
}

Worker *worker_free(Worker *w) {
        if (!w)
                return NULL;

        if (w->thread_started) {
                pthread_mutex_lock(&w->lock);
                w->stop = true;
                pthread_cond_broadcast(&w->cond);
                pthread_mutex_unlock(&w->lock);
                pthread_join(w->thread, NULL);
        }
        /* What ran is delivered; what did not is handed back to be freed. */
        for (WorkerJob *j = w->ran_head, *n; j; j = n) {
                n = j->next;
                job_done(w, j);
        }
        for (WorkerJob *j = w->queue_head, *n; j; j = n) {
                n = j->next;
                w->stats.pending--;
                j->done(j, false);
        }
        sd_event_source_disable_unref(w->ran_source);
        safe_close(w->event_fd);
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->cond);
        pthread_cond_destroy(&w->ran_cond);
        free(w->name);
        free(w);
        return NULL;
}
