/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Profiles pulled over HTTP: see manager-pull.h and docs/pull.md. Each
 * request is a PullRequest: authorized (http-auth.c, with Kubernetes),
 * then answered from the loop (the targets), from the report worker (the
 * listings, a report's file) or when the session it started ends. */
#include <fcntl.h>
#include <microhttpd.h>

#include "sessions.h"
#include "fileio.h"
#include "http-auth.h"
#include "http-server.h"
#include "log.h"
#include "kube.h"
#include "manager-pull.h"
#include "metrics.h"
#include "pull-query.h"
#include "rate-limit.h"
#include "report-format.h"
#include "template.h"
#include "base.h"

#define JSON_TYPE "application/json"
#define PPROF_TYPE "application/octet-stream"

typedef enum PullKind {
        PULL_PROFILE,
        PULL_TARGETS,
        PULL_REPORTS,
        PULL_DOWNLOAD,
} PullKind;

typedef struct PullRequest PullRequest;

struct ManagerPull {
        const HttpRoomDeps *deps; /* the room's (http-deps.h) */
        HttpAuth *auth; /* NULL without Kubernetes: loopback only, no token asked */
        RateLimit *pulls; /* profile pulls, by user (without Kubernetes: by address) */
        uint64_t pulls_limited;
        PullRequest *requests;
        unsigned n_requests;
        LogRateLimit log;
};

/* What the report worker reads for a listing or a download. */
typedef struct PullJob {
        WorkerJob job;
        HttpRoomDeps deps; /* a copy: the job may outlive the listener */
        PullRequest *request;
        int dir_fd; /* a copy of reportDir's */
        char *dir_path, *filter, *session_id, *file;
        char *path; /* a profile's: the file to read, in the report the session just wrote */
        bool listing; /* counted in list_reports_pending */
        bool indexed; /* a download whose report the index found (found set) or did not (NULL) */
        ControlReport *list;
        size_t n;
        char *message;
        int error;
        ControlReport *found; /* download: in list */
        int fd; /* the file read: opened on the worker, streamed from the loop */
        uint64_t size;
} PullJob;

struct PullRequest {
        ManagerPull *pull; /* NULL once the listener went away (a job still holds it) */
        PullRequest *prev, *next;
        PullKind kind;
        HttpRequest *req; /* NULL once answered or cancelled */
        HttpAuthCheck *auth;
        PullJob *job; /* on the report worker */
        char *token; /* kept for a download: its authorization comes after the walk */
        char *source; /* the client's address (rate_limit_source_key()) */
        char *user; /* the token's user, once authorized */
        PullQuery query;
        char *namespace; /* listings: NULL for every namespace */
        size_t limit; /* /reports: a page's size */
        bool has_after;
        ReportCursor after; /* /reports: after the page that ended there */
        char *session_id; /* the session started, or the one asked for */
        char *file;
        int fd; /* a download's file, once found (-EBADF: none) */
        uint64_t size;
        uint64_t start_usec;
};

static bool endswith(const char *s, const char *suffix) {
        size_t a = strlen(s), b = strlen(suffix);
        return a >= b && streq(s + a - b, suffix);
}

static bool isempty(const char *s) {
        return !s || s[0] == 0;
}

static void pull_job_free(PullJob *j) {
        if (!j)
                return;
        control_reports_free(j->list, j->n);
        safe_close(j->dir_fd);
        free(j->dir_path);
        free(j->filter);
        free(j->session_id);
        free(j->file);
        free(j->path);
        free(j->message);
        safe_close(j->fd);
        free(j);
}

static void request_unlink(PullRequest *p) {
        ManagerPull *pull = p->pull;

        if (!pull)
                return;
        LIST_REMOVE(pull->requests, p);
        pull->n_requests--;
        p->pull = NULL;
}

static void request_free(PullRequest *p) {
        if (!p)
                return;
        request_unlink(p);
        if (p->auth)
                http_auth_check_cancel(p->auth);
        erase_and_free(p->token);
        free(p->source);
        free(p->user);
        pull_query_done(&p->query);
        free(p->namespace);
        free(p->session_id);
        free(p->file);
        safe_close(p->fd);
        free(p);
}

/* Frees it unless something still holds it (the worker). */
static void request_release(PullRequest *p) {
        if (p->job) {
                request_unlink(p); /* the job's done() frees it */
                return;
        }
        request_free(p);
}

static void on_http_cancel(void *userdata, HttpCancelReason reason) {
        PullRequest *p = userdata;
        _cleanup_free_ char *error = NULL, *id = NULL;

        p->req = NULL;
        /* A profile nobody waits for any more: stop profiling, as Go's
         * /debug/pprof/profile stops when its client goes. Its report is
         * written, as for cgprofctl stop, unless nothing was sampled (a
         * report nobody waits for, of nothing). The request lets go of
         * the session first: the end may be announced at once. */
        if (reason == HTTP_CANCEL_CLIENT_GONE && p->kind == PULL_PROFILE && p->session_id && p->pull) {
                Session *s;

                id = TAKE_PTR(p->session_id);
                s = p->pull->deps->session_find(p->pull->deps->userdata, id);
                log_info("http: the client of the pull of session %s hung up: stopping the session.", id);
                if (s)
                        s->report_if_sampled = true;
                if (p->pull->deps->stop_session(p->pull->deps->userdata, id, &error) < 0)
                        log_debug("http: session %s: %s", id, strna(error));
        }
        request_release(p);
}

static void request_answered(PullRequest *p, unsigned status);

static void request_reply(PullRequest *p, unsigned status, const char *content_type, char *body,
                          size_t size) {
        if (p->req) {
                (void) http_request_reply(p->req, status, content_type, body, size);
                p->req = NULL;
        } else
                free(body);
        request_answered(p, status);
}

/* A file's bytes, streamed (takes fd). */
static void request_reply_file(PullRequest *p, const char *content_type, int fd, uint64_t size) {
        if (p->req) {
                (void) http_request_reply_fd(p->req, MHD_HTTP_OK, content_type, fd, size);
                p->req = NULL;
        } else
                safe_close(fd);
        request_answered(p, MHD_HTTP_OK);
}

static void request_answered(PullRequest *p, unsigned status) {
        ManagerPull *pull = p->pull;
        char code[16];

        if (pull) {
                snprintf(code, sizeof(code), "%u", status);
                metrics_pull_request(pull->deps->metrics, code);
                log_debug("http: %s answered %u after %.3f ms.",
                          p->kind == PULL_PROFILE   ? "a profile"
                          : p->kind == PULL_TARGETS ? "the targets"
                          : p->kind == PULL_REPORTS ? "the reports"
                                                    : "a report's file",
                          status, (double) (now_usec(CLOCK_MONOTONIC) - p->start_usec) / 1000.0);
        }
        request_release(p);
}

static _printf_(3, 4) void request_reply_text(PullRequest *p, unsigned status, const char *fmt, ...) {
        char *body = NULL;
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vasprintf(&body, fmt, ap);
        va_end(ap);
        body = n < 0 ? NULL : utf8_make_valid_take(body); /* it says charset=utf-8 */
        n = body ? (int) strlen(body) : 0;
        request_reply(p, status, "text/plain; charset=utf-8", body, (size_t) n);
}

/* 429 with Retry-After (whole seconds, at least 1): too many 'what'. */
static void request_reply_too_many(PullRequest *p, uint64_t wait_usec, const char *what) {
        char retry[16];

        snprintf(retry, sizeof(retry), "%u", rate_limit_retry_after_sec(wait_usec));
        if (p->req)
                (void) http_request_add_header(p->req, "Retry-After", retry);
        request_reply_text(p, MHD_HTTP_TOO_MANY_REQUESTS, "Too many %s; try again in %s s.\n", what, retry);
}

/* cJSON writes a string's bytes as they are: the text is made valid UTF-8
 * after (a cgroup or pod name that is not gets U+FFFD per invalid byte). */
static void request_reply_json(PullRequest *p, cJSON *j) {
        char *s = j ? utf8_make_valid_take(cJSON_PrintUnformatted(j)) : NULL;

        cJSON_Delete(j);
        if (!s)
                return request_reply_text(p, MHD_HTTP_INTERNAL_SERVER_ERROR, "Out of memory.\n");
        request_reply(p, MHD_HTTP_OK, JSON_TYPE, s, strlen(s));
}

static unsigned status_of_errno(int r) {
        switch (r) {
        case -ENOENT:
                return MHD_HTTP_NOT_FOUND;
        case -EBUSY:
                return MHD_HTTP_CONFLICT;
        case -EINVAL:
                return MHD_HTTP_BAD_REQUEST;
        case -ESHUTDOWN:
        case -EAGAIN:
                return MHD_HTTP_SERVICE_UNAVAILABLE;
        default:
                return MHD_HTTP_INTERNAL_SERVER_ERROR;
        }
}

static void pull_job_run(WorkerJob *job);
static void pull_job_done(WorkerJob *job, bool ran);

/* ---- the answers, once authorized ---- */

static void profile_start(PullRequest *p) {
        const HttpRoomDeps *d = p->pull->deps;
        const Config *c = d->config(d->userdata);
        _cleanup_free_ char *target = NULL, *error = NULL, *id = NULL;
        Session *s;
        int r;

        /* Without Kubernetes no token is asked: whoever reaches the
         * listener profiles what the config targets, not any cgroup of
         * the host (perf_event_paranoid would stop a local user from
         * profiling another's processes; the agent is root), unless the
         * config says so. */
        if (!p->pull->auth && p->query.cgroup && !c->http.pull_any_cgroup &&
            !d->host_target(d->userdata, p->query.cgroup))
                return request_reply_text(
                        p, MHD_HTTP_FORBIDDEN,
                        "Forbidden: cgroup %s is not a target of this agent's configuration "
                        "(\"http\": {\"pullAnyCgroup\": true} allows any cgroup).\n",
                        p->query.cgroup);
        /* Pulls per user (the token's; without Kubernetes, the address's). */
        uint64_t wait = 0;
        if (!rate_limit_take(p->pull->pulls, p->user ?: p->source, now_usec(CLOCK_MONOTONIC), &wait)) {
                p->pull->pulls_limited++;
                return request_reply_too_many(p, wait, "profile pulls by this user");
        }
        r = pull_query_target(&p->query, &target);
        if (r < 0)
                return request_reply_text(p, MHD_HTTP_INTERNAL_SERVER_ERROR, "Out of memory.\n");
        r = d->start_session(d->userdata, target, (uint64_t) p->query.seconds * USEC_PER_SEC, &id, &error);
        if (r < 0)
                return request_reply_text(p, status_of_errno(r), "%s\n", error ?: strerror(-r));
        /* The report must have a profile.pb.gz, whatever the profile's formats. */
        s = d->session_find(d->userdata, id);
        if (s)
                s->extra_formats |= 1u << REPORT_FORMAT_PPROF;
        log_info("http: profiling %s for %u s (session %s), for a pull.", target, p->query.seconds, id);
        p->session_id = TAKE_PTR(id);
        /* Answered by manager_pull_session_ended(). */
}

void manager_pull_session_ended(ManagerPull *pull, const char *id, const char *report_dirs, int error) {
        PullRequest *p;
        PullJob *j;
        size_t n;

        if (!pull)
                return;
        for (p = pull->requests; p; p = p->next)
                if (p->kind == PULL_PROFILE && streq_ptr(p->session_id, id))
                        break;
        if (!p)
                return;
        if (error < 0)
                return request_reply_text(p, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                          "The report of session %s could not be written: %s\n", id,
                                          strerror(-error));
        if (isempty(report_dirs))
                return request_reply_text(p, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                          "Session %s ended without a report (it never started).\n", id);
        /* The first directory (a per-process output writes several),
         * read on the report worker, right behind the write. */
        n = strcspn(report_dirs, " ");
        j = calloc(1, sizeof(*j));
        if (!j || asprintf(&j->path, "%.*s/profile.pb.gz", (int) n, report_dirs) < 0) {
                free(j);
                return request_reply_text(p, MHD_HTTP_INTERNAL_SERVER_ERROR, "Out of memory.\n");
        }
        j->dir_fd = -EBADF;
        j->fd = -EBADF;
        j->request = p;
        j->deps = *pull->deps;
        p->job = j;
        worker_submit(sessions_room_worker(pull->deps->sessions_room), &j->job, pull_job_run, pull_job_done);
}

static int add_pod(const KubePod *pod, void *userdata) {
        cJSON *pods = userdata, *o, *cs, *c;

        o = cJSON_CreateObject();
        if (!o || !cJSON_AddItemToArray(pods, o)) {
                cJSON_Delete(o);
                return -ENOMEM;
        }
        if (!cJSON_AddStringToObject(o, "namespace", pod->namespace) ||
            !cJSON_AddStringToObject(o, "pod", pod->name) || !cJSON_AddStringToObject(o, "uid", pod->uid) ||
            !(cs = cJSON_AddArrayToObject(o, "containers")))
                return -ENOMEM;
        for (size_t i = 0; i < pod->n_containers; i++) {
                const KubeContainer *k = &pod->containers[i];

                c = cJSON_CreateObject();
                if (!c || !cJSON_AddItemToArray(cs, c)) {
                        cJSON_Delete(c);
                        return -ENOMEM;
                }
                if (!cJSON_AddStringToObject(c, "name", k->name) ||
                    !cJSON_AddBoolToObject(c, "running", k->running) ||
                    (k->id && !cJSON_AddStringToObject(c, "id", k->id)))
                        return -ENOMEM;
        }
        return 0;
}

static void targets_answer(PullRequest *p) {
        const HttpRoomDeps *d = p->pull->deps;
        cJSON *j = cJSON_CreateObject(), *pods;

        if (!j || !cJSON_AddStringToObject(j, "node", d->node_name) ||
            !cJSON_AddBoolToObject(j, "kubernetes", kube_room_enabled(d->kube)) ||
            !(pods = cJSON_AddArrayToObject(j, "pods")) ||
            (kube_room_enabled(d->kube) &&
             kube_room_foreach_pod(d->kube, p->namespace, add_pod, pods) < 0)) {
                cJSON_Delete(j);
                j = NULL;
        }
        request_reply_json(p, j);
}

static cJSON *report_json(const ControlReport *x) {
        cJSON *o = cJSON_CreateObject();
        char *url = NULL;

        if (!o || asprintf(&url, "/reports/%s/", x->session) < 0 ||
            !cJSON_AddStringToObject(o, "session", x->session) ||
            !cJSON_AddStringToObject(o, "namespace", x->namespace) ||
            !cJSON_AddStringToObject(o, "pod", x->pod) ||
            !cJSON_AddStringToObject(o, "container", x->container) ||
            !cJSON_AddStringToObject(o, "cgroup", x->cgroup) ||
            !cJSON_AddNumberToObject(o, "startUsec", (double) x->start_usec) ||
            !cJSON_AddNumberToObject(o, "samples", (double) x->samples) ||
            !cJSON_AddStringToObject(o, "url", url)) {
                free(url);
                cJSON_Delete(o);
                return NULL;
        }
        free(url);
        return o;
}

/* ---- the report worker: listings, and a report's file ---- */

static void pull_job_run(WorkerJob *job) {
        PullJob *j = (PullJob *) job;
        size_t l;

        if (j->path) {
                j->fd = open_regular_file(AT_FDCWD, j->path, &j->size);
                j->error = MIN(j->fd, 0);
                return;
        }
        l = strlen(j->dir_path);
        if (j->indexed) {
                /* The index found it (or not) on the loop. */
                if (!j->found)
                        return;
        } else {
                j->error = control_list_reports(j->dir_fd, j->dir_path, j->filter, 0, &j->list, &j->n,
                                                &j->message);
                if (j->error < 0 || !j->session_id)
                        return;
        }
        /* The newest report of that session (a session's checkpoints and
         * its final report share a directory; per-process outputs make
         * several: the first). */
        for (size_t i = 0; !j->indexed && i < j->n; i++)
                if (streq(j->list[i].session, j->session_id)) {
                        j->found = &j->list[i];
                        break;
                }
        if (!j->found)
                return;
        /* The walk went below dir_path only, and followed no symlink: the
         * directory again, relative, the same way. */
        const char *dir = j->found->report_dir;
        if (strncmp(dir, j->dir_path, l) != 0 || (dir[l] != '/' && dir[l] != 0)) {
                j->error = -EPERM;
                return;
        }
        const char *rel = dir + l + strspn(dir + l, "/");
        _cleanup_close_ int fd = *rel ? open_dir_below(j->dir_fd, rel)
                                      : openat(j->dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                j->error = fd;
                return;
        }
        j->fd = open_regular_file(fd, j->file, &j->size);
        j->error = MIN(j->fd, 0);
}

static void download_authorized(PullRequest *p);
static void request_authorize(PullRequest *p, const KubeResourceAttributes *at,
                              void (*then)(PullRequest *p));

static void reports_answer(PullRequest *p, PullJob *j) {
        cJSON *a = cJSON_CreateArray();

        for (size_t i = 0; a && i < j->n; i++) {
                cJSON *o = report_json(&j->list[i]);
                if (!o || !cJSON_AddItemToArray(a, o)) {
                        cJSON_Delete(o);
                        cJSON_Delete(a);
                        a = NULL;
                }
        }
        request_reply_json(p, a);
}

/* A page of /reports from the index: newest first, at most p->limit;
 * when more remain, a Link header (RFC 8288, as GitHub's API pages) names
 * the next page, and X-Cgprof-More says so plainly: never cut silently. */
static void reports_answer_index(PullRequest *p) {
        const HttpRoomDeps *d = p->pull->deps;
        _cleanup_(control_report_filter_freep) ReportFilter *f = NULL;
        _cleanup_free_ const ReportEntry **l = NULL;
        _cleanup_free_ char *message = NULL, *link = NULL;
        cJSON *a;
        size_t n;
        bool more;
        int r;

        r = control_report_filter_new(strempty(p->namespace), 0, &f, &message);
        if (r >= 0)
                r = manager_reports_list(d->sessions_room, control_report_filter_match, f,
                                         p->has_after ? &p->after : NULL, p->limit, &l, &n, &more);
        if (r < 0)
                return request_reply_text(p, status_of_errno(r), "%s\n", message ?: strerror(-r));
        a = cJSON_CreateArray();
        for (size_t i = 0; a && i < n; i++) {
                cJSON *o = report_json(&l[i]->report);
                if (!o || !cJSON_AddItemToArray(a, o)) {
                        cJSON_Delete(o);
                        cJSON_Delete(a);
                        a = NULL;
                }
        }
        if (a && more && p->req) {
                char cursor[REPORT_CURSOR_STRING_MAX];

                report_cursor_format(&(const ReportCursor){ .start_usec = l[n - 1]->report.start_usec,
                                                            .serial = l[n - 1]->serial },
                                     cursor);
                if (asprintf(&link, "</reports?%s%s%slimit=%zu&after=%s>; rel=\"next\"",
                             p->namespace ? "namespace=" : "", strempty(p->namespace),
                             p->namespace ? "&" : "", p->limit, cursor) < 0 ||
                    http_request_add_header(p->req, "Link", link) < 0 ||
                    http_request_add_header(p->req, "X-Cgprof-More", "true") < 0) {
                        cJSON_Delete(a);
                        a = NULL;
                }
        }
        request_reply_json(p, a);
}

static void not_found(PullRequest *p) {
        request_reply_text(p, MHD_HTTP_NOT_FOUND, "No report of session %s with a file %s.\n", p->session_id,
                           p->file);
}

static void pull_job_done(WorkerJob *job, bool ran) {
        PullJob *j = (PullJob *) job;
        PullRequest *p = j->request;
        const HttpRoomDeps d = j->deps;

        p->job = NULL;
        if (j->listing)
                d.listing_pending(d.userdata, false);
        if (!p->pull || !p->req) {
                /* The listener went away meanwhile. */
                pull_job_free(j);
                request_free(p);
                d.reports_written(d.userdata);
                return;
        }
        if (!ran)
                j->error = -ECANCELED;
        if (p->kind == PULL_PROFILE) {
                if (j->error < 0)
                        request_reply_text(p, MHD_HTTP_INTERNAL_SERVER_ERROR, "Failed to read %s: %s\n",
                                           j->path, strerror(-j->error));
                else
                        request_reply_file(p, PPROF_TYPE, TAKE_FD(j->fd), j->size);
                pull_job_free(j);
                /* A stopping agent exits once the worker is idle: this job may have been its last. */
                d.reports_written(d.userdata);
                return;
        }
        if (p->kind == PULL_REPORTS) {
                if (j->error < 0)
                        request_reply_text(p, status_of_errno(j->error), "%s\n",
                                           j->message ?: strerror(-j->error));
                else
                        reports_answer(p, j);
                pull_job_free(j);
                d.reports_written(d.userdata);
                return;
        }

        /* A download: authorized against the report's own pod (its
         * namespace), or the node for a host cgroup's report. A report not
         * found says so only to who may see the node's. */
        const ControlReport *x = j->found;
        KubeResourceAttributes at = {
                .verb = "get",
                .resource = "nodes",
                .subresource = "profile",
                .name = d.node_name,
        };
        if (x && !isempty(x->namespace) && !isempty(x->pod))
                at = (KubeResourceAttributes){
                        .verb = "get",
                        .resource = "pods",
                        .subresource = "profile",
                        .namespace = x->namespace,
                        .name = x->pod,
                };
        if (x && j->error >= 0) {
                p->fd = TAKE_FD(j->fd);
                p->size = j->size;
        } else if (x && j->error != -ENOENT && j->error != -ELOOP && j->error != -EPERM) {
                log_full_errno(log_ratelimit_level(&p->pull->log, now_usec(CLOCK_MONOTONIC), LOG_WARNING),
                               j->error, "http: failed to read the report file %s of session %s: %m",
                               p->file, p->session_id);
        }
        /* at points into j->list: authorized (its strings copied) before j goes. */
        request_authorize(p, &at, p->fd >= 0 ? download_authorized : not_found);
        pull_job_free(j);
        d.reports_written(d.userdata);
}

static void download_authorized(PullRequest *p) {
        const char *type = endswith(p->file, ".json")  ? JSON_TYPE
                           : endswith(p->file, ".svg") ? "image/svg+xml"
                           : endswith(p->file, ".gz")  ? PPROF_TYPE
                                                       : "text/plain; charset=utf-8";

        request_reply_file(p, type, TAKE_FD(p->fd), p->size);
}

static void job_submit(PullRequest *p, const char *filter) {
        const HttpRoomDeps *d = p->pull->deps;
        const char *report_dir;
        int report_dir_fd;
        PullJob *j;

        if (d->listing_refused(d->userdata))
                return request_reply_text(p, MHD_HTTP_SERVICE_UNAVAILABLE,
                                          "%u report listings are being read already; try again later.\n",
                                          d->list_reports_max);
        report_dir = d->report_dir(d->userdata, &report_dir_fd);
        if (report_dir_fd < 0)
                return request_reply_text(p, MHD_HTTP_SERVICE_UNAVAILABLE, "No report directory.\n");
        j = calloc(1, sizeof(*j));
        if (!j)
                return request_reply_text(p, MHD_HTTP_INTERNAL_SERVER_ERROR, "Out of memory.\n");
        j->request = p;
        j->deps = *d;
        j->fd = -EBADF;
        j->dir_fd = fcntl(report_dir_fd, F_DUPFD_CLOEXEC, 3);
        j->dir_path = strdup(strempty(report_dir));
        j->filter = strdup(strempty(filter));
        if (p->kind == PULL_DOWNLOAD) {
                j->session_id = strdup(p->session_id);
                j->file = strdup(p->file);
                /* Found by the index: the worker reads the file, no walk. */
                const ReportEntry *e =
                        manager_reports_ready(d->sessions_room)
                                ? manager_reports_find_session(d->sessions_room, p->session_id)
                                : NULL;
                if (manager_reports_ready(d->sessions_room)) {
                        j->indexed = true;
                        j->list = calloc(1, sizeof(ControlReport));
                        if (j->list && e) {
                                j->list[0] = (ControlReport){
                                        .session = strdup(e->report.session),
                                        .report_dir = strdup(e->report.report_dir),
                                        .namespace = strdup(e->report.namespace),
                                        .pod = strdup(e->report.pod),
                                        .container = strdup(e->report.container),
                                        .cgroup = strdup(e->report.cgroup),
                                };
                                j->n = 1;
                                j->found = &j->list[0];
                        }
                        if (!j->list ||
                            (e && (!j->found->session || !j->found->report_dir || !j->found->namespace ||
                                   !j->found->pod || !j->found->container || !j->found->cgroup))) {
                                pull_job_free(j);
                                return request_reply_text(p, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                                          "Out of memory.\n");
                        }
                }
        }
        if (j->dir_fd < 0 || !j->dir_path || !j->filter ||
            (p->kind == PULL_DOWNLOAD && (!j->session_id || !j->file))) {
                pull_job_free(j);
                return request_reply_text(p, MHD_HTTP_INTERNAL_SERVER_ERROR, "Out of resources.\n");
        }
        p->job = j;
        j->listing = true;
        d->listing_pending(d->userdata, true);
        worker_submit(sessions_room_worker(d->sessions_room), &j->job, pull_job_run, pull_job_done);
}

static void reports_start(PullRequest *p) {
        if (manager_reports_ready(p->pull->deps->sessions_room))
                return reports_answer_index(p);
        job_submit(p, p->namespace);
}

static void download_start(PullRequest *p) {
        job_submit(p, NULL);
}

/* ---- authorization ---- */

static void on_auth_done(const HttpAuthOutcome *o, void *userdata) {
        PullRequest *p = userdata;
        void (*then)(PullRequest * p) = NULL;
        const char *message = o->message;

        p->auth = NULL;
        switch (o->result) {
        case HTTP_AUTH_ALLOWED:
                free(p->user);
                p->user = strdup(o->username);
                if (!p->user)
                        return request_reply_text(p, MHD_HTTP_INTERNAL_SERVER_ERROR, "Out of memory.\n");
                break;
        case HTTP_AUTH_RATE_LIMITED:
                return request_reply_too_many(p, o->retry_after_usec,
                                              "requests to authorize from this address");
        case HTTP_AUTH_UNAUTHENTICATED:
                return request_reply_text(p, MHD_HTTP_UNAUTHORIZED, "Unauthorized: %s.\n", message);
        case HTTP_AUTH_DENIED:
                /* A download's refusal says the same whether the session has
                 * a report or not, and whose: no probing for IDs. */
                if (p->kind == PULL_DOWNLOAD) {
                        log_debug("http: download of session %s refused: %s", p->session_id, message);
                        return request_reply_text(
                                p, MHD_HTTP_FORBIDDEN,
                                "Forbidden: this token may not read a report of session %s.\n",
                                p->session_id);
                }
                return request_reply_text(p, MHD_HTTP_FORBIDDEN, "Forbidden: %s.\n", message);
        default:
                /* Why (the API server's address, libcurl's error) is for the log only. */
                log_full(log_ratelimit_level(&p->pull->log, now_usec(CLOCK_MONOTONIC), LOG_WARNING),
                         "http: cannot authorize a request: %s", message);
                return request_reply_text(p, MHD_HTTP_SERVICE_UNAVAILABLE,
                                          "The request could not be authorized now; try again later.\n");
        }
        then = p->kind == PULL_PROFILE   ? profile_start
               : p->kind == PULL_TARGETS ? targets_answer
               : p->kind == PULL_REPORTS ? reports_start
               : p->fd >= 0              ? download_authorized
                                         : not_found;
        then(p);
}

/* Runs 'then' at once without Kubernetes (loopback only); else the
 * request's token is checked for 'at' and on_auth_done() goes on, at once
 * when the caches know, else after the reviews. */
static void request_authorize(PullRequest *p, const KubeResourceAttributes *at,
                              void (*then)(PullRequest *p)) {
        ManagerPull *pull = p->pull;
        int r;

        if (!pull->auth)
                return then(p);
        r = http_auth_check(pull->auth, p->token, p->source, at, on_auth_done, p, &p->auth);
        if (r == -E2BIG)
                return request_reply_text(p, MHD_HTTP_UNAUTHORIZED,
                                          "Unauthorized: the token is too long.\n");
        if (r < 0) {
                log_full_errno(log_ratelimit_level(&pull->log, now_usec(CLOCK_MONOTONIC), LOG_WARNING), r,
                               "http: cannot ask the API server to authorize a request: %m");
                return request_reply_text(p, MHD_HTTP_SERVICE_UNAVAILABLE,
                                          "Cannot authorize the request now.\n");
        }
        /* Answered (on_auth_done(), at once from the caches, or later). */
}

/* ---- the handler ---- */

static const char *query_get(const char *key, void *userdata) {
        return http_request_query(userdata, key);
}

static int bearer_token(HttpRequest *req, char **ret) {
        const char *h = http_request_header(req, MHD_HTTP_HEADER_AUTHORIZATION);

        if (!h || strncasecmp(h, "Bearer ", 7) != 0)
                return -ENOKEY;
        h += 7;
        h += strspn(h, " ");
        if (h[0] == 0 || strpbrk(h, " \t"))
                return -ENOKEY;
        *ret = strdup(h);
        return *ret ? 0 : -ENOMEM;
}

/* /reports?limit=N&after=CURSOR: a page (PULL_REPORTS_PAGE by default). */
static int reports_page_parse(HttpRequest *req, PullRequest *p, char **ret_error) {
        const char *limit = http_request_query(req, "limit"), *after = http_request_query(req, "after");
        unsigned long n;
        char *end;

        p->limit = PULL_REPORTS_PAGE;
        if (limit) {
                errno = 0;
                n = strtoul(limit, &end, 10);
                if (!(limit[0] >= '0' && limit[0] <= '9') || *end || errno != 0 || n < 1 ||
                    n > PULL_REPORTS_PAGE_MAX) {
                        *ret_error = strdup("limit: must be an integer 1..10000");
                        return -EINVAL;
                }
                p->limit = n;
        }
        if (after) {
                if (report_cursor_parse(after, &p->after) < 0) {
                        *ret_error = strdup("after: not a cursor of a Link header (START.SERIAL)");
                        return -EINVAL;
                }
                p->has_after = true;
        }
        return 0;
}

/* Waiting pulls hold connections: at most half of them, so that scrapes
 * and listings always find room. */
static bool pull_is_full(const ManagerPull *pull) {
        const HttpRoomDeps *d = pull->deps;

        return pull->n_requests >=
               MIN(PULL_PENDING_MAX, MAX(d->config(d->userdata)->http.max_connections / 2, 1U));
}

/* A PullRequest for req, in pull's list, cancelled with it. */
static int request_new(ManagerPull *pull, HttpRequest *req, PullRequest **ret) {
        PullRequest *p = calloc(1, sizeof(*p));

        if (!p)
                return -ENOMEM;
        p->pull = pull;
        p->req = req;
        p->fd = -EBADF;
        p->start_usec = now_usec(CLOCK_MONOTONIC);
        LIST_PREPEND(pull->requests, p);
        pull->n_requests++;
        http_request_set_cancel(req, on_http_cancel, p);
        *ret = p;
        return 0;
}

/* The helpers below answer every error through p (which may then be freed)
 * and return a negative errno; 0: go on. */

/* /reports/ID/FILE: p's session ID and file. */
static int request_parse_download_path(PullRequest *p, const char *path) {
        const char *id = path + strlen("/reports/"), *slash = strchr(id, '/');

        if (!slash || !(p->session_id = strndup(id, (size_t) (slash - id))) ||
            !(p->file = strdup(slash + 1)) || !pull_session_id_is_valid(p->session_id) ||
            !pull_report_file_is_valid(p->file)) {
                request_reply_text(p, MHD_HTTP_NOT_FOUND,
                                   "Not found: expected /reports/SESSION_ID/FILE, a session ID of 32 "
                                   "hexadecimal digits and FILE profile.pb.gz, summary.json, "
                                   "profile.folded, flame.svg or profile.speedscope.json.\n");
                return -ENOENT;
        }
        return 0;
}

/* p's kind, from the path; the query's arguments must be the kind's, each
 * with a value. */
static int request_route(PullRequest *p) {
        static const char *const profile_args[] = { "seconds",   "namespace", "pod",
                                                    "container", "cgroup",    NULL };
        static const char *const list_args[] = { "namespace", NULL };
        static const char *const reports_args[] = { "namespace", "limit", "after", NULL };
        static const char *const no_args[] = { NULL };
        HttpRequest *req = p->req;
        const char *path = http_request_path(req), *unknown;
        int r;

        if (streq(path, "/debug/pprof/profile")) {
                p->kind = PULL_PROFILE;
                if (http_request_is_head(req)) {
                        /* A HEAD would start a session for nothing. */
                        (void) http_request_add_header(req, MHD_HTTP_HEADER_ALLOW, "GET");
                        request_reply_text(p, MHD_HTTP_METHOD_NOT_ALLOWED, "Use GET for a profile.\n");
                        return -EOPNOTSUPP;
                }
                unknown = http_request_unknown_query(req, profile_args);
        } else if (streq(path, "/targets") || streq(path, "/reports")) {
                p->kind = streq(path, "/targets") ? PULL_TARGETS : PULL_REPORTS;
                unknown =
                        http_request_unknown_query(req, p->kind == PULL_TARGETS ? list_args : reports_args);
        } else {
                p->kind = PULL_DOWNLOAD;
                unknown = http_request_unknown_query(req, no_args);
                r = request_parse_download_path(p, path);
                if (r < 0)
                        return r;
        }
        if (unknown) {
                request_reply_text(p, MHD_HTTP_BAD_REQUEST, "Unknown query argument \"%.64s\".\n", unknown);
                return -EINVAL;
        }
        unknown = http_request_valueless_query(req);
        if (unknown) {
                request_reply_text(p, MHD_HTTP_BAD_REQUEST,
                                   "Query argument \"%.64s\" has no value (%.64s=...).\n", unknown, unknown);
                return -EINVAL;
        }
        return 0;
}

/* The listings' ?namespace=NS: p->namespace. */
static int request_parse_namespace(PullRequest *p) {
        const char *ns = http_request_query(p->req, "namespace");

        if (!ns)
                return 0;
        if (!kube_name_is_dns_label(ns)) {
                request_reply_text(p, MHD_HTTP_BAD_REQUEST,
                                   "Bad request: namespace: not a namespace name.\n");
                return -EINVAL;
        }
        p->namespace = strdup(ns);
        if (!p->namespace) {
                request_reply_text(p, MHD_HTTP_INTERNAL_SERVER_ERROR, "Out of memory.\n");
                return -ENOMEM;
        }
        return 0;
}

/* The query's arguments, by kind: p->query, the page, p->namespace. */
static int request_parse_query(PullRequest *p) {
        _cleanup_free_ char *error = NULL;
        int r;

        switch (p->kind) {
        case PULL_PROFILE:
                r = pull_query_parse(query_get, p->req, &p->query, &error);
                if (r < 0) {
                        request_reply_text(p, status_of_errno(r), "Bad request: %s.\n",
                                           error ?: strerror(-r));
                        return r;
                }
                return 0;
        case PULL_REPORTS:
                r = reports_page_parse(p->req, p, &error);
                if (r < 0) {
                        request_reply_text(p, MHD_HTTP_BAD_REQUEST, "Bad request: %s.\n", strna(error));
                        return r;
                }
                return request_parse_namespace(p);
        case PULL_TARGETS:
                return request_parse_namespace(p);
        case PULL_DOWNLOAD:
                return 0;
        }
        return 0;
}

/* With Kubernetes, p->token: the one "Authorization: Bearer TOKEN". */
static int request_parse_token(PullRequest *p) {
        int r;

        if (!p->pull->auth)
                return 0;
        /* Two tokens: which one would be checked is not for us to guess. */
        if (http_request_header_count(p->req, MHD_HTTP_HEADER_AUTHORIZATION) > 1) {
                request_reply_text(p, MHD_HTTP_BAD_REQUEST,
                                   "Bad request: more than one Authorization header.\n");
                return -EINVAL;
        }
        r = bearer_token(p->req, &p->token);
        if (r == -ENOMEM) {
                request_reply_text(p, MHD_HTTP_INTERNAL_SERVER_ERROR, "Out of memory.\n");
                return r;
        }
        if (r < 0) {
                request_reply_text(p, MHD_HTTP_UNAUTHORIZED,
                                   "Unauthorized: an \"Authorization: Bearer TOKEN\" header is required.\n");
                return r;
        }
        return 0;
}

/* What the token must be allowed: get pods/profile of the pod, or in the
 * namespace (listings of one namespace); get nodes/profile of this node for
 * a host cgroup and for what spans namespaces. */
static KubeResourceAttributes request_resource(const PullRequest *p) {
        KubeResourceAttributes at = { .verb = "get", .subresource = "profile" };

        if ((p->kind == PULL_PROFILE && p->query.namespace) || p->namespace) {
                at.resource = "pods";
                at.namespace = p->kind == PULL_PROFILE ? p->query.namespace : p->namespace;
                at.name = p->kind == PULL_PROFILE ? p->query.pod : NULL;
        } else {
                at.resource = "nodes";
                at.name = p->pull->deps->node_name;
        }
        return at;
}

static int on_pull(HttpRequest *req, void *userdata) {
        ManagerPull *pull = *(ManagerPull **) userdata;
        char source[RATE_LIMIT_SOURCE_MAX];
        KubeResourceAttributes at;
        PullRequest *p;
        int r;

        if (!pull)
                return http_request_reply_text(req, MHD_HTTP_NOT_FOUND, "Not found.\n");
        if (pull_is_full(pull)) {
                metrics_pull_request(pull->deps->metrics, "503");
                return http_request_reply_text(req, MHD_HTTP_SERVICE_UNAVAILABLE,
                                               "Too many profile requests at once; try again later.\n");
        }
        r = request_new(pull, req, &p);
        if (r < 0)
                return r;

        /* From here on every error is answered through p: never a
         * negative return, which would leave p holding the request. */
        p->source = strdup(rate_limit_source_key(http_request_client_address(req), source));
        if (!p->source) {
                request_reply_text(p, MHD_HTTP_INTERNAL_SERVER_ERROR, "Out of memory.\n");
                return 0;
        }
        if (request_route(p) < 0 || request_parse_query(p) < 0 || request_parse_token(p) < 0)
                return 0; /* answered */

        at = request_resource(p);
        switch (p->kind) {
        case PULL_PROFILE:
                request_authorize(p, &at, profile_start);
                break;
        case PULL_TARGETS:
                request_authorize(p, &at, targets_answer);
                break;
        case PULL_REPORTS:
                request_authorize(p, &at, reports_start);
                break;
        case PULL_DOWNLOAD:
                /* Authorized once the report (and its namespace) is found. */
                download_start(p);
                break;
        }
        return 0;
}

int manager_pull_start(HttpServer *http, const HttpRoomDeps *deps, ManagerPull **ret) {
        const Config *c = deps->config(deps->userdata);
        static const char *const routes[] = { "/debug/pprof/profile", "/targets", "/reports", "/reports/" };
        ManagerPull *pull;
        int r;

        if (!http || !c || !c->http.pprof)
                return 0;
        pull = calloc(1, sizeof(*pull));
        if (!pull)
                return log_oom();
        pull->deps = deps;
        pull->log = (LogRateLimit){ .interval_usec = 10 * USEC_PER_SEC };
        r = rate_limit_new(c->http.pull_rate_limit.per_second, c->http.pull_rate_limit.burst, PULL_USERS_MAX,
                           &pull->pulls);
        if (r >= 0 && kube_room_enabled(deps->kube))
                r = http_auth_new(kube_room_client(deps->kube),
                                  &(const HttpAuthOptions){
                                          .audiences = c->http.token_audiences,
                                          .reviews_per_second = c->http.review_rate_limit.per_second,
                                          .review_burst = c->http.review_rate_limit.burst,
                                  },
                                  &pull->auth);
        if (r < 0) {
                rate_limit_free(pull->pulls);
                free(pull);
                return log_error_errno(r, "Failed to set up the authorization of pulled profiles: %m");
        }
        *ret = pull;
        for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
                r = http_server_add_async_route(http, routes[i], on_pull, ret);
                if (r < 0) {
                        manager_pull_stop(ret);
                        return log_error_errno(r, "Failed to serve %s: %m", routes[i]);
                }
        }
        log_info("Serving profiles at /debug/pprof/profile, /targets and /reports (%s).",
                 pull->auth ? "bearer tokens reviewed by the API server" : "loopback, no authentication");
        return 0;
}

void manager_pull_stop(ManagerPull **slot) {
        ManagerPull *pull = *slot;

        if (!pull)
                return;
        /* The listener answers what is left (503); requests with a job on
         * the worker are freed by its done(). */
        while (pull->requests) {
                PullRequest *p = pull->requests;

                if (p->req)
                        http_request_set_cancel(p->req, NULL, NULL);
                p->req = NULL;
                request_release(p);
        }
        http_auth_free(pull->auth);
        rate_limit_free(pull->pulls);
        free(pull);
        *slot = NULL;
}

void manager_pull_stats(ManagerPull *pull, PullStats *ret) {
        *ret = (PullStats){};
        if (!pull)
                return;
        ret->kubernetes = pull->auth != NULL;
        http_auth_stats(pull->auth, &ret->auth);
        ret->pulls_limited = pull->pulls_limited;
}
