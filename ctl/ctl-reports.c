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

int verb_report(Ctl *c, char **args) {
        _cleanup_free_ char *error = NULL, *path = strdup(args[0]);
        _cleanup_close_ int fd = -EBADF;
        unsigned formats = c->formats ?: (1u << _REPORT_FORMAT_MAX) - 1;
        size_t l;
        int r;

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
