/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A report's summary.json as ListReports reads it (see control-report.h). */
#include <cjson/cJSON.h>

#include "control-report.h"
#include "macro.h"

void control_report_done(ControlReport *r) {
        free(r->session);
        free(r->report_dir);
        free(r->namespace);
        free(r->pod);
        free(r->container);
        free(r->cgroup);
        *r = (ControlReport){};
}

void control_reports_free(ControlReport *r, size_t n) {
        for (size_t i = 0; i < n; i++)
                control_report_done(&r[i]);
        free(r);
}

static const char *json_string(const cJSON *j, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static uint64_t json_u64(const cJSON *v) {
        return cJSON_IsNumber(v) ? u64_from_double(v->valuedouble) : 0;
}

int control_report_parse(const char *text, size_t size, const char *report_dir, ControlReport *ret) {
        cJSON *j = cJSON_ParseWithLength(text, size);
        const char *session = json_string(j, "session");
        ControlReport rep;

        if (!cJSON_IsObject(j) || !session) {
                cJSON_Delete(j);
                return -EBADMSG;
        }
        rep = (ControlReport){
                .session = strdup(session),
                .report_dir = strdup(report_dir),
                .namespace = strdup(strempty(json_string(j, "namespace"))),
                .pod = strdup(strempty(json_string(j, "pod"))),
                .container = strdup(strempty(json_string(j, "container"))),
                .cgroup = strdup(strempty(json_string(j, "cgroup"))),
                .start_usec = json_u64(cJSON_GetObjectItemCaseSensitive(j, "startUsec")),
                .samples = json_u64(cJSON_GetObjectItemCaseSensitive(
                        cJSON_GetObjectItemCaseSensitive(j, "samples"), "total")),
        };
        cJSON_Delete(j);
        if (!rep.session || !rep.report_dir || !rep.namespace || !rep.pod || !rep.container || !rep.cgroup) {
                control_report_done(&rep);
                return -ENOMEM;
        }
        *ret = rep;
        return 0;
}
