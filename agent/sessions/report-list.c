/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The reports of reportDir as a walk finds them: see report-list.h. */
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup-util.h"
#include "fileio.h"
#include "key-path.h"
#include "log.h"
#include "report-list.h"
#include "report-writer.h"

/* The largest summary.json a listing reads (larger ones are skipped). */
#define REPORT_SUMMARY_MAX (16U * 1024U * 1024U)

static bool isempty(const char *s) {
        return !s || !s[0];
}

static void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}

struct ReportFilter {
        char *namespace, *pod, *cgroup; /* NULL: any */
        uint64_t since_usec;
};

static void report_filter_done(ReportFilter *f) {
        free(f->namespace);
        free(f->pod);
        free(f->cgroup);
}

static int report_filter_parse(const char *s, ReportFilter *f, char **ret_error) {
        int r;

        if (isempty(s))
                return 0;
        if (strncmp(s, "cgroup:", 7) == 0) {
                r = cgroup_path_normalize(s + 7, &f->cgroup);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return error_message(ret_error, -EINVAL, "Invalid filter \"%s\": bad cgroup path.",
                                             s);
                return 0;
        }
        /* NAMESPACE or NAMESPACE/POD: each part not empty, no more slashes. */
        const char *slash = strchr(s, '/');
        if (slash == s || (slash && (!slash[1] || strchr(slash + 1, '/'))))
                return error_message(
                        ret_error, -EINVAL,
                        "Invalid filter \"%s\": expected NAMESPACE, NAMESPACE/POD or cgroup:PATH.", s);
        f->namespace = slash ? strndup(s, (size_t) (slash - s)) : strdup(s);
        if (!f->namespace || (slash && !(f->pod = strdup(slash + 1))))
                return -ENOMEM;
        return 0;
}

int control_report_filter_new(const char *filter, uint64_t since_usec, ReportFilter **ret,
                              char **ret_error) {
        _cleanup_(control_report_filter_freep) ReportFilter *f = calloc(1, sizeof(*f));
        int r;

        if (!f)
                return -ENOMEM;
        f->since_usec = since_usec;
        r = report_filter_parse(filter, f, ret_error);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(f);
        return 0;
}

ReportFilter *control_report_filter_free(ReportFilter *f) {
        if (!f)
                return NULL;
        report_filter_done(f);
        free(f);
        return NULL;
}

bool control_report_filter_match(const ControlReport *r, void *userdata) {
        const ReportFilter *f = userdata;

        /* The filter's parts are never "": an absent field matches none. */
        return !((f->namespace && !streq(f->namespace, r->namespace)) ||
                 (f->pod && !streq(f->pod, r->pod)) || (f->cgroup && !streq(f->cgroup, r->cgroup)) ||
                 r->start_usec < f->since_usec);
}

typedef struct ReportWalk {
        const ReportFilter *filter;
        ControlReport *list;
        size_t n, allocated;
        unsigned dirs;
} ReportWalk;

static int report_add(ReportWalk *w, int dfd, const char *path) {
        _cleanup_free_ char *text = NULL;
        const ReportFilter *f = w->filter;
        ControlReport rep;
        size_t size;
        int r;

        r = read_regular_file_max(dfd, "summary.json", REPORT_SUMMARY_MAX, &text, &size);
        if (r == -ENOENT)
                return 0;
        if (r < 0) {
                log_debug_errno(r, "Skipping %s/summary.json: %m", path);
                return r == -ENOMEM ? r : 0;
        }
        r = control_report_parse(text, size, path, &rep);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                log_debug("Skipping %s/summary.json: not a cgprof summary.", path);
                return 0;
        }
        rep.bytes = report_dir_bytes(dfd);
        if (!control_report_filter_match(&rep, (void *) f)) {
                control_report_done(&rep);
                return 0;
        }

        if (w->n == w->allocated) {
                size_t a = MAX(w->allocated * 2, 16U);
                ControlReport *l = reallocarray(w->list, a, sizeof(ControlReport));
                if (!l) {
                        control_report_done(&rep);
                        return -ENOMEM;
                }
                w->list = l;
                w->allocated = a;
        }
        w->list[w->n++] = rep;
        return 0;
}

/* dfd: an open directory (taken over); depth: its depth below the report directory. */
static int report_walk(ReportWalk *w, int dfd, const char *path, unsigned depth) {
        _cleanup_(closedirp) DIR *d = NULL;
        struct dirent *de;
        int r;

        w->dirs++;
        d = fdopendir(dfd);
        if (!d) {
                r = negative_errno();
                safe_close(dfd);
                return r;
        }
        r = report_add(w, dirfd(d), path);
        if (r < 0)
                return r;
        if (depth >= CONTROL_REPORTS_MAX_DEPTH)
                return 0;

        while ((de = readdir(d))) {
                _cleanup_free_ char *sub = NULL;
                int fd;

                if (w->dirs >= CONTROL_REPORTS_MAX_DIRS)
                        break;
                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
                        continue;
                /* O_NOFOLLOW: a symlink is not followed (ELOOP), and not counted. */
                fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        continue;
                if (asprintf(&sub, "%s/%s", path, de->d_name) < 0) {
                        safe_close(fd);
                        return -ENOMEM;
                }
                r = report_walk(w, fd, sub, depth + 1);
                if (r == -ENOMEM)
                        return r;
        }
        return 0;
}

static int report_compare(const void *a, const void *b) {
        const ControlReport *x = a, *y = b;
        int r = CMP(y->start_usec, x->start_usec); /* newest first */
        return r != 0 ? r : strcmp(x->report_dir, y->report_dir);
}

int control_list_reports(int dir_fd, const char *dir_path, const char *filter, uint64_t since_usec,
                         ControlReport **ret, size_t *ret_n, char **ret_error) {
        _cleanup_(report_filter_done) ReportFilter f = { .since_usec = since_usec };
        ReportWalk w = { .filter = &f };
        int fd, r;

        r = report_filter_parse(filter, &f, ret_error);
        if (r < 0)
                return r;

        fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return error_message(ret_error, negative_errno(),
                                     "Failed to open the report directory %s: %s", dir_path,
                                     strerror(errno));
        r = report_walk(&w, fd, dir_path, 0);
        if (r < 0) {
                control_reports_free(w.list, w.n);
                return error_message(ret_error, r, "Failed to list the reports in %s: %s", dir_path,
                                     strerror(-r));
        }
        if (w.dirs >= CONTROL_REPORTS_MAX_DIRS)
                log_notice("Listing reports: stopped after %u directories below %s.", w.dirs, dir_path);
        if (w.n > 0)
                qsort(w.list, w.n, sizeof(ControlReport), report_compare);
        *ret = w.list;
        *ret_n = w.n;
        return 0;
}
