/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* debuginfod fetches on a worker thread (see debuginfod-fetcher.h).
 *
 * Who owns what: the event loop owns everything but the worker's own
 * fields (the libdebuginfod client once the thread runs, the deadline) and
 * the cancel flag. A request travels as a Job on a Worker (worker.h):
 * queued by the loop, fetched on the thread, handed back, and accounted
 * and freed by the loop. */

#include <elfutils/debuginfod.h>
#include <fcntl.h>
#include <inttypes.h>
#include <search.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>

#include "debuginfod-cache.h"
#include "debuginfod-fetcher.h"
#include "fileio.h"
#include "log.h"
#include "base.h"

typedef struct Job Job;
struct Job {
        WorkerJob job;
        DebuginfodFetcher *fetcher;
        /* Filled by the worker. */
        int result;
        bool downloaded; /* not in the cache before */
        uint64_t usec;
        DebuginfodCachePruneResult prune;
        bool pruned;
        char build_id[];
};

/* What the loop knows of a build ID: being fetched, or failed lately. */
typedef enum KnownState {
        KNOWN_PENDING,
        KNOWN_MISSING,
        KNOWN_FAILED,
} KnownState;

typedef struct Known {
        KnownState state;
        uint64_t until; /* CLOCK_MONOTONIC: missing or failed until then */
        char build_id[];
} Known;

#define KNOWN_MAX 4096U /* past this, expired entries are dropped */

struct DebuginfodFetcher {
        Worker *worker;
        int cache_fd;
        char *cache_dir;
        uint64_t cache_max_bytes, timeout_usec, miss_expiry_usec, failure_retry_usec;
        unsigned queue_max;
        DebuginfodFetchedFunc callback;
        void *userdata;

        /* The loop's. */
        const char *delivering; /* the build ID whose answer the callback has now */
        void *known; /* tsearch: Known by build ID */
        size_t n_known;
        DebuginfodFetcherStats stats;
        unsigned n_queued; /* queued or being fetched */

        atomic_bool cancel; /* read by the progress callback on the worker */

        /* The worker's. */
        debuginfod_client *client;
        uint64_t deadline;
        bool cancelled, too_big;
};

static int known_cmp(const void *a, const void *b) {
        return strcmp(((const Known *) a)->build_id, ((const Known *) b)->build_id);
}

static Known *known_find(DebuginfodFetcher *f, const char *build_id) {
        _cleanup_free_ Known *key = NULL;
        Known **k;

        key = malloc(sizeof(Known) + strlen(build_id) + 1);
        if (!key)
                return NULL;
        strcpy(key->build_id, build_id);
        k = tfind(key, &f->known, known_cmp);
        return k ? *k : NULL;
}

static void known_remove(DebuginfodFetcher *f, Known *k) {
        if (tdelete(k, &f->known, known_cmp))
                f->n_known--;
        free(k);
}

static int known_set(DebuginfodFetcher *f, const char *build_id, KnownState state, uint64_t until) {
        Known *k = known_find(f, build_id), **p;

        if (k) {
                k->state = state;
                k->until = until;
                return 0;
        }
        k = malloc(sizeof(Known) + strlen(build_id) + 1);
        if (!k)
                return -ENOMEM;
        strcpy(k->build_id, build_id);
        k->state = state;
        k->until = until;
        p = tsearch(k, &f->known, known_cmp);
        if (!p) {
                free(k);
                return -ENOMEM;
        }
        f->n_known++;
        return 0;
}

typedef struct Expired {
        Known **list;
        size_t n;
        uint64_t now;
} Expired;

static void expired_action(const void *nodep, VISIT which, void *userdata) {
        Known *k = *(Known *const *) nodep;
        Expired *e = userdata;

        if ((which == postorder || which == leaf) && k->state != KNOWN_PENDING && k->until <= e->now)
                e->list[e->n++] = k;
}

/* Keeps the negative cache bounded: drops what expired. */
static void known_gc(DebuginfodFetcher *f) {
        Expired e = { .now = now_usec(CLOCK_MONOTONIC) };

        if (f->n_known < KNOWN_MAX)
                return;
        e.list = calloc(f->n_known, sizeof(Known *));
        if (!e.list)
                return;
        twalk_r(f->known, expired_action, &e);
        for (size_t i = 0; i < e.n; i++)
                known_remove(f, e.list[i]);
        free(e.list);
}

/* ---- the worker ---- */

/* Called about every second while a fetch runs (and while libdebuginfod
 * cleans its cache), with the bytes downloaded so far (a) and the size
 * announced (b, <= 0 when unknown) once a server answers. This, rather than
 * DEBUGINFOD_MAXTIME and DEBUGINFOD_MAXSIZE, bounds a fetch: libdebuginfod
 * 0.188 writes to its verbose fd (none: -1) when those apply, and glibc's
 * dprintf() to a bad fd leaks its 8 KiB buffer each time. */
static int on_progress(debuginfod_client *c, long a, long b) {
        DebuginfodFetcher *f = debuginfod_get_user_data(c);

        if (atomic_load(&f->cancel) || now_usec(CLOCK_MONOTONIC) > f->deadline) {
                f->cancelled = true;
                return 1;
        }
        if ((b > 0 && (uint64_t) b > f->cache_max_bytes) || (a > 0 && (uint64_t) a > f->cache_max_bytes)) {
                f->cancelled = f->too_big = true;
                return 1;
        }
        return 0;
}

static void fetch_one(WorkerJob *wj) {
        Job *job = (Job *) wj;
        DebuginfodFetcher *f = job->fetcher;
        char path[160];
        struct stat st;
        bool had;
        uint64_t start = now_usec(CLOCK_MONOTONIC);
        _cleanup_free_ char *found = NULL;
        int fd;

        snprintf(path, sizeof(path), "%s/debuginfo", job->build_id);
        had = fstatat(f->cache_fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
              st.st_size > 0;

        /* The whole fetch: retries, a connect that never completes. */
        f->deadline = start + f->timeout_usec;
        f->cancelled = f->too_big = false;
        fd = debuginfod_find_debuginfo(f->client, (const unsigned char *) job->build_id, 0, &found);
        job->usec = now_usec(CLOCK_MONOTONIC) - start;
        if (fd >= 0) {
                /* Used now: the size bound's LRU order. */
                (void) futimens(fd, (const struct timespec[2]){ { .tv_nsec = UTIME_NOW },
                                                                { .tv_nsec = UTIME_OMIT } });
                safe_close(fd);
                job->result = 0;
                job->downloaded = !had;
                if (job->downloaded)
                        job->pruned =
                                debuginfod_cache_prune(f->cache_fd, f->cache_max_bytes, &job->prune) >= 0;
                return;
        }

        job->result = fd;
        if (f->too_big)
                /* Larger than the whole cache may be: as good as missing (its
                 * negative entry, if libdebuginfod made one, stays). */
                job->result = -EFBIG;
        else if (f->cancelled) {
                /* libdebuginfod takes a cancelled fetch for a miss and leaves
                 * an empty file (its negative entry): it was no answer. */
                if (fstatat(f->cache_fd, path, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) &&
                    st.st_size == 0)
                        (void) unlinkat(f->cache_fd, path, 0);
                job->result = atomic_load(&f->cancel) ? -ECANCELED : -ETIME;
        }
}

/* ---- the event loop's side ---- */

static void job_account(DebuginfodFetcher *f, Job *job) {
        Known *k = known_find(f, job->build_id);
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        if (job->result == 0) {
                if (job->downloaded) {
                        f->stats.fetched++;
                        f->stats.fetch_usec_max = MAX(f->stats.fetch_usec_max, job->usec);
                } else
                        f->stats.from_cache++;
                if (job->pruned) {
                        f->stats.cache_bytes = job->prune.bytes - job->prune.removed_bytes;
                        f->stats.cache_pruned += job->prune.removed;
                }
                if (k)
                        known_remove(f, k);
        } else if (job->result == -ENOENT || job->result == -EFBIG) {
                /* No server has it (or only larger than the cache may hold). */
                f->stats.not_found++;
                (void) known_set(f, job->build_id, KNOWN_MISSING, now + f->miss_expiry_usec);
        } else {
                f->stats.failed++;
                (void) known_set(f, job->build_id, KNOWN_FAILED, now + f->failure_retry_usec);
        }
        if (f->stats.pending > 0)
                f->stats.pending--;
}

/* On the loop: the answer is accounted and delivered. */
static void job_done(WorkerJob *wj, bool ran) {
        Job *job = (Job *) wj;
        DebuginfodFetcher *f = job->fetcher;

        f->n_queued--;
        /* Not once the fetcher is being freed (its answers would go to a
         * symbolizer that is going too). */
        if (ran && !atomic_load(&f->cancel)) {
                job_account(f, job);
                f->delivering = job->build_id;
                if (f->callback)
                        f->callback(f, job->build_id, job->result, job->usec, f->userdata);
                f->delivering = NULL;
        }
        free(job);
}

int debuginfod_fetcher_request(DebuginfodFetcher *f, const char *build_id) {
        Known *k;
        Job *job;
        int r;

        if (!f || !debuginfod_build_id_valid(build_id))
                return -EINVAL;
        f->stats.requested++;

        k = known_find(f, build_id);
        if (k && k->state == KNOWN_PENDING) {
                f->stats.joined++;
                return 0;
        }
        if (k && now_usec(CLOCK_MONOTONIC) < k->until) {
                f->stats.skipped++;
                return k->state == KNOWN_MISSING ? -ENOENT : -EAGAIN;
        }

        if (f->n_queued >= f->queue_max) {
                f->stats.dropped++;
                return -ENOBUFS;
        }
        job = calloc(1, sizeof(Job) + strlen(build_id) + 1);
        if (!job)
                return -ENOMEM;
        job->fetcher = f;
        strcpy(job->build_id, build_id);
        r = known_set(f, build_id, KNOWN_PENDING, 0);
        if (r < 0) {
                free(job);
                return r;
        }
        f->n_queued++;
        worker_submit(f->worker, &job->job, fetch_one, job_done);

        f->stats.queued++;
        f->stats.pending++;
        known_gc(f);
        return 1;
}

int debuginfod_fetcher_open_cached(DebuginfodFetcher *f, const char *build_id) {
        _cleanup_close_ int fd = -EBADF;
        char path[160];
        struct stat st;

        if (!f || !debuginfod_build_id_valid(build_id))
                return -EINVAL;
        snprintf(path, sizeof(path), "%s/debuginfo", build_id);
        fd = openat(f->cache_fd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? -ENOENT : negative_errno();
        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (!S_ISREG(st.st_mode) || st.st_size == 0)
                return -ENOENT; /* an empty file is libdebuginfod's negative entry */
        (void) futimens(fd,
                        (const struct timespec[2]){ { .tv_nsec = UTIME_NOW }, { .tv_nsec = UTIME_OMIT } });
        /* Opening the file an answer just brought is no cache hit. */
        if (!streq_ptr(f->delivering, build_id))
                f->stats.from_cache++;
        return TAKE_FD(fd);
}

/* libdebuginfod's settings, for every fetch of this process. */
static int set_environment(const DebuginfodFetcher *f, char *const *urls) {
        _cleanup_free_ char *joined = NULL, *timeout = NULL;
        size_t len = 0;

        for (char *const *u = urls; *u; u++)
                len += strlen(*u) + 1;
        joined = malloc(len + 1);
        if (!joined)
                return -ENOMEM;
        joined[0] = '\0';
        for (char *const *u = urls; *u; u++) {
                if (u != urls)
                        strcat(joined, " ");
                strcat(joined, *u);
        }
        if (asprintf(&timeout, "%" PRIu64, f->timeout_usec / USEC_PER_SEC) < 0)
                return -ENOMEM;

        if (setenv(DEBUGINFOD_URLS_ENV_VAR, joined, 1) < 0 ||
            setenv(DEBUGINFOD_CACHE_PATH_ENV_VAR, f->cache_dir, 1) < 0 ||
            /* No 100 kB in this many seconds, or no answer: give up. */
            setenv(DEBUGINFOD_TIMEOUT_ENV_VAR, timeout, 1) < 0 ||
            setenv(DEBUGINFOD_RETRY_LIMIT_ENV_VAR, "1", 1) < 0 ||
            /* The time and size bounds are on_progress()'s (see there). */
            unsetenv(DEBUGINFOD_MAXTIME_ENV_VAR) < 0 || unsetenv(DEBUGINFOD_MAXSIZE_ENV_VAR) < 0 ||
            unsetenv(DEBUGINFOD_PROGRESS_ENV_VAR) < 0 || unsetenv(DEBUGINFOD_VERBOSE_ENV_VAR) < 0)
                return negative_errno();
        return 0;
}

int debuginfod_fetcher_new(sd_event *event, const DebuginfodFetcherOptions *opts,
                           DebuginfodFetchedFunc callback, void *userdata, DebuginfodFetcher **ret) {
        _cleanup_(debuginfod_fetcher_freep) DebuginfodFetcher *f = NULL;
        _cleanup_free_ char *miss = NULL;
        int r;

        if (!event || !opts || !opts->urls || !opts->urls[0] || !opts->cache_dir ||
            opts->cache_dir[0] != '/' || !ret)
                return -EINVAL;

        f = calloc(1, sizeof(DebuginfodFetcher));
        if (!f)
                return -ENOMEM;
        f->cache_fd = -EBADF;
        atomic_init(&f->cancel, false);
        f->callback = callback;
        f->userdata = userdata;
        f->cache_max_bytes = opts->cache_max_bytes ?: DEBUGINFOD_CACHE_MAX_BYTES_DEFAULT;
        f->queue_max = opts->queue_max ?: DEBUGINFOD_QUEUE_MAX_DEFAULT;
        f->timeout_usec = MAX(opts->timeout_usec ?: DEBUGINFOD_TIMEOUT_USEC_DEFAULT, USEC_PER_SEC);
        f->miss_expiry_usec = opts->miss_expiry_usec ?: DEBUGINFOD_MISS_EXPIRY_USEC_DEFAULT;
        f->failure_retry_usec = opts->failure_retry_usec ?: DEBUGINFOD_FAILURE_RETRY_USEC_DEFAULT;
        f->cache_dir = strdup(opts->cache_dir);
        if (!f->cache_dir)
                return -ENOMEM;

        r = mkdir_p(f->cache_dir, 0700);
        if (r < 0)
                return r;
        f->cache_fd = open(f->cache_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (f->cache_fd < 0)
                return negative_errno();
        /* libdebuginfod's own negative cache (empty files) expires as ours. */
        if (asprintf(&miss, "%" PRIu64, f->miss_expiry_usec / USEC_PER_SEC) < 0)
                return -ENOMEM;
        r = write_string_file_atomic_at(f->cache_fd, "cache_miss_s", miss);
        if (r < 0)
                return r;
        {
                DebuginfodCachePruneResult pr;
                if (debuginfod_cache_prune(f->cache_fd, f->cache_max_bytes, &pr) >= 0)
                        f->stats.cache_bytes = pr.bytes - pr.removed_bytes;
        }

        r = set_environment(f, opts->urls);
        if (r < 0)
                return r;

        /* On this thread, before the worker exists: debuginfod_begin()
         * initializes libcurl once for the process. */
        f->client = debuginfod_begin();
        if (!f->client)
                return errno > 0 ? -errno : -ENOMEM;
        debuginfod_set_user_data(f->client, f);
        debuginfod_set_progressfn(f->client, on_progress);

        r = worker_new(event, "cgprofd-debuginfod", WORKER_NICE_BACKGROUND, &f->worker);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(f);
        return 0;
}

DebuginfodFetcher *debuginfod_fetcher_free(DebuginfodFetcher *f) {
        if (!f)
                return NULL;

        /* A fetch in progress gives up; the ones queued are dropped. */
        atomic_store(&f->cancel, true);
        f->worker = worker_free(f->worker);
        if (f->client)
                debuginfod_end(f->client);
        tdestroy(f->known, free);
        safe_close(f->cache_fd);
        free(f->cache_dir);
        free(f);
        return NULL;
}

void debuginfod_fetcher_stats(const DebuginfodFetcher *f, DebuginfodFetcherStats *ret) {
        *ret = f ? f->stats : (DebuginfodFetcherStats){};
}

const char *debuginfod_fetcher_cache_dir(const DebuginfodFetcher *f) {
        return f ? f->cache_dir : NULL;
}

uint64_t debuginfod_fetcher_cache_max_bytes(const DebuginfodFetcher *f) {
        return f ? f->cache_max_bytes : 0;
}
