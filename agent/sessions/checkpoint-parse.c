/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Parsing a checkpoint registry entry and marking a checkpoint's
 * summary.json interrupted (see checkpoint-parse.h). */
#include <cjson/cJSON.h>

#include "checkpoint-parse.h"
#include "macro.h"

static void cjson_deletep(cJSON **j) {
        cJSON_Delete(*j);
}
#define _cleanup_cjson_ _cleanup_(cjson_deletep)

void checkpoint_entry_done(CheckpointEntry *e) {
        free(e->report_dir);
        free(e->boot_id);
        strv_free(e->dirs);
        *e = (CheckpointEntry){};
}

int checkpoint_entry_parse(const char *text, size_t size, CheckpointEntry *ret) {
        _cleanup_cjson_ cJSON *j = cJSON_ParseWithLength(text, size);
        const cJSON *report_dir = cJSON_GetObjectItemCaseSensitive(j, "reportDir");
        const cJSON *boot = cJSON_GetObjectItemCaseSensitive(j, "bootId");
        const cJSON *dirs = cJSON_GetObjectItemCaseSensitive(j, "dirs"), *d;
        CheckpointEntry e = {};
        size_t n = 0;

        if (!cJSON_IsObject(j) || !cJSON_IsString(report_dir) || !cJSON_IsArray(dirs))
                return -EBADMSG;
        e.report_dir = strdup(report_dir->valuestring);
        e.boot_id = strdup(cJSON_IsString(boot) ? boot->valuestring : "");
        e.dirs = calloc((size_t) cJSON_GetArraySize(dirs) + 1, sizeof(char *));
        if (!e.report_dir || !e.boot_id || !e.dirs) {
                checkpoint_entry_done(&e);
                return -ENOMEM;
        }
        cJSON_ArrayForEach (d, dirs) {
                if (!cJSON_IsString(d))
                        continue;
                e.dirs[n] = strdup(d->valuestring);
                if (!e.dirs[n]) {
                        checkpoint_entry_done(&e);
                        return -ENOMEM;
                }
                n++;
        }
        *ret = e;
        return 0;
}

void checkpoint_marked_done(CheckpointMarked *m) {
        free(m->text);
        free(m->cgroup);
        free(m->end);
        *m = (CheckpointMarked){};
}

static int strdup_string(const cJSON *j, const char *key, char **ret) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);

        *ret = NULL;
        if (!cJSON_IsString(v))
                return 0;
        *ret = strdup(v->valuestring);
        return *ret ? 0 : -ENOMEM;
}

int checkpoint_summary_mark_interrupted(const char *text, size_t size, const char *reason,
                                        CheckpointMarked *ret) {
        _cleanup_cjson_ cJSON *summary = cJSON_ParseWithLength(text, size);
        _cleanup_free_ char *out = NULL;
        CheckpointMarked m = {};

        /* A final report (written before the crash), or already marked. */
        if (!cJSON_IsObject(summary) ||
            !cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(summary, "partial")) ||
            cJSON_GetObjectItemCaseSensitive(summary, "interrupted"))
                return 0;

        /* A reason without the mark would come first for readers that take a
         * key's first value (cJSON), last for others (Python's json). */
        while (cJSON_GetObjectItemCaseSensitive(summary, "interruptedReason"))
                cJSON_DeleteItemFromObjectCaseSensitive(summary, "interruptedReason");
        if (!cJSON_AddTrueToObject(summary, "interrupted") ||
            !cJSON_AddStringToObject(summary, "interruptedReason", reason) ||
            !(out = cJSON_Print(summary)) || asprintf(&m.text, "%s\n", out) < 0) {
                m.text = NULL;
                return -ENOMEM;
        }
        const cJSON *total = cJSON_GetObjectItemCaseSensitive(
                cJSON_GetObjectItemCaseSensitive(summary, "samples"), "total");
        m.samples = cJSON_IsNumber(total) ? u64_from_double(total->valuedouble) : 0;
        if (strdup_string(summary, "cgroup", &m.cgroup) < 0 || strdup_string(summary, "end", &m.end) < 0) {
                checkpoint_marked_done(&m);
                return -ENOMEM;
        }
        *ret = m;
        return 1;
}
