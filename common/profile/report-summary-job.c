/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* summary.json's "job", in a job's report (the processes of several
 * sessions of one distributed job, docs/training-jobs.md):
 *   "job": {"name": "mnist", "source": "kubeflow",
 *           "sessions": ["<id>", ...], "reports": ["ns/pod/c/..._uid", ...]}
 * reports: the sessions' own report directories, relative to reportDir. */
#include <cjson/cJSON.h>
#include <errno.h>

#include "macro.h"
#include "report.h"

static int add_strv(cJSON *o, const char *key, char *const *l) {
        cJSON *a = cJSON_AddArrayToObject(o, key);

        if (!a)
                return -ENOMEM;
        for (size_t i = 0; l && l[i]; i++) {
                cJSON *s = cJSON_CreateString(l[i]);
                if (!s)
                        return -ENOMEM;
                cJSON_AddItemToArray(a, s);
        }
        return 0;
}

int report_summary_add_job(cJSON *root, const ReportSummaryInfo *info) {
        const ReportJobInfo *j = info->job;
        cJSON *o;
        int r;

        if (!j)
                return 0;
        o = cJSON_AddObjectToObject(root, "job");
        if (!o || !cJSON_AddStringToObject(o, "name", strempty(j->name)) ||
            !cJSON_AddStringToObject(o, "source", strempty(j->source)))
                return -ENOMEM;
        r = add_strv(o, "sessions", j->sessions);
        if (r < 0)
                return r;
        return add_strv(o, "reports", j->reports);
}
