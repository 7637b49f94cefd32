/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cgprofctl reports, report: listing the agent's reports, and re-rendering
 * a report directory in other formats (no agent needed). */
#include <cjson/cJSON.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-bus.h"
#include "ctl-output.h"
#include "ctl.h"
#include "log.h"
#include "fileio.h"
#include "report-by-rank.h"
#include "report.h"

static cJSON *report_to_json(const ReportInfo *ri) {
        cJSON *o = cJSON_CreateObject();

        if (!o)
                return NULL;
        cJSON_AddStringToObject(o, "session", ri->session);
        cJSON_AddStringToObject(o, "reportDir", ri->dir);
        cJSON_AddStringToObject(o, "namespace", ri->namespace);
        cJSON_AddStringToObject(o, "pod", ri->pod);
        cJSON_AddStringToObject(o, "container", ri->container);
        cJSON_AddStringToObject(o, "cgroup", ri->cgroup);
        cJSON_AddNumberToObject(o, "startUsec", (double) ri->start_usec);
        cJSON_AddNumberToObject(o, "samples", (double) ri->samples);
        return o;
}

static int reports_table_add(Table *t, const ReportInfo *ri) {
        _cleanup_free_ char *what = format_profiled(ri->namespace, ri->pod, ri->container, ri->cgroup);
        char ts[TIMESTAMP_MAX], samples[UINT64_DECIMAL_MAX];

        if (!what)
                return -ENOMEM;
        snprintf(samples, sizeof(samples), "%" PRIu64, ri->samples);
        return table_add(t, format_timestamp(ri->start_usec, ts, sizeof(ts)), ri->session, samples, what,
                         ri->dir);
}

int verb_reports(Ctl *c, char **args) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(table_done) Table t = { .n_columns = 5 };
        ReportInfo ri;
        cJSON *a = NULL;
        int r;

        r = ctl_call(c, "ListReports", &error, &reply, "st", strempty(c->filter), c->since_usec);
        if (r < 0)
                return call_failed(&error, r, "Failed to list reports");

        if (c->json && !(a = cJSON_CreateArray()))
                return log_oom(), EXIT_FAILURE;
        if (!c->json && table_add(&t, "STARTED", "SESSION", "SAMPLES", "PROFILED", "REPORT") < 0)
                return log_oom(), EXIT_FAILURE;

        r = report_list_enter(reply);
        while (r >= 0 && (r = report_list_read(reply, &ri)) > 0) {
                if (c->json) {
                        cJSON *o = report_to_json(&ri);
                        if (!o) {
                                r = -ENOMEM;
                                break;
                        }
                        cJSON_AddItemToArray(a, o);
                } else if (reports_table_add(&t, &ri) < 0) {
                        r = -ENOMEM;
                        break;
                }
        }
        if (r < 0) {
                cJSON_Delete(a);
                return log_error_errno(r, "Failed to parse the reports: %m"), EXIT_FAILURE;
        }
        if (c->json)
                return print_json(a);
        if (!table_has_rows(&t))
                printf("No reports.\n");
        else
                table_print(&t);
        return EXIT_SUCCESS;
}

/* The frequency of a report directory's samples (summary.json), 0: unknown. */
static uint64_t report_frequency(int fd) {
        _cleanup_free_ char *text = NULL;
        cJSON *j, *f;
        uint64_t v = 0;

        if (read_full_file_max(fd, "summary.json", 64 * 1024 * 1024, &text, NULL) < 0)
                return 0;
        j = cJSON_Parse(text);
        f = cJSON_GetObjectItemCaseSensitive(j, "frequency");
        if (cJSON_IsNumber(f) && f->valuedouble > 0 && f->valuedouble <= 1e6)
                v = (uint64_t) f->valuedouble;
        cJSON_Delete(j);
        return v;
}

/* report --by rank DIR...: the by-rank view of one or more report
 * directories (the pods of one job, each its own report), from their
 * profile.pb.gz (its rank, local_rank and role labels). */
static int report_by_rank(Ctl *c, char **args) {
        _cleanup_(by_rank_freep) ByRank *b = NULL;
        int r;

        r = by_rank_new(NULL, &b, NULL);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the view: %m"), EXIT_FAILURE;
        for (char **a = args; *a; a++) {
                _cleanup_(profile_data_freep) ProfileData *d = NULL;
                _cleanup_free_ char *pb = NULL;
                _cleanup_close_ int fd = open(*a, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                size_t size;

                if (fd < 0) {
                        log_error_errno(errno, "%s: %m", *a);
                        return errno == ENOENT || errno == ENOTDIR ? EXIT_NOT_FOUND : EXIT_FAILURE;
                }
                r = read_full_file_max(fd, "profile.pb.gz", 0, &pb, &size);
                if (r >= 0)
                        r = report_read_pprof(pb, size, &d);
                if (r >= 0)
                        r = by_rank_add(b, d, report_frequency(fd));
                if (r < 0) {
                        log_error_errno(r, "%s/profile.pb.gz: %m", *a);
                        return r == -ENOENT ? EXIT_NOT_FOUND : EXIT_FAILURE;
                }
        }
        if (c->json) {
                cJSON *j = NULL;
                r = by_rank_json(b, &j);
                if (r < 0)
                        return log_oom(), EXIT_FAILURE;
                return print_json(j);
        }
        r = by_rank_print(b, stdout);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}

int verb_report(Ctl *c, char **args) {
        _cleanup_free_ char *error = NULL, *path = strdup(args[0]);
        _cleanup_close_ int fd = -EBADF;
        unsigned formats = c->formats ?: (1u << _REPORT_FORMAT_MAX) - 1;
        size_t l;
        int r;

        if (c->by_rank)
                return report_by_rank(c, args);
        if (args[1])
                return usage_error(c->verb, "report: one report directory (several with --by rank).");
        if (!path)
                return log_oom(), EXIT_FAILURE;
        for (l = strlen(path); l > 1 && path[l - 1] == '/'; l--)
                path[l - 1] = 0;
        fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                log_error_errno(errno, "%s: %m", path);
                return errno == ENOENT || errno == ENOTDIR ? EXIT_NOT_FOUND : EXIT_FAILURE;
        }
        r = report_convert_dir(fd, path, formats, &error);
        if (r < 0) {
                log_error("%s", error ?: strerror(-r));
                return r == -ENOENT ? EXIT_NOT_FOUND : EXIT_FAILURE;
        }
        for (ReportFormat f = 0; f < _REPORT_FORMAT_MAX; f++)
                if (formats & (1u << f))
                        printf("%s/%s\n", path, report_format_info(f)->file);
        return EXIT_SUCCESS;
}
