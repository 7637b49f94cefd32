/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* GetStatus (cgprofctl status): the agent's state and counters as JSON.
 * The counters of one object are a table of names and values. */
#include <unistd.h>

#include "cgprof-version.h"
#include "base.h"
#include "control-room.h"

typedef struct JsonNumber {
        const char *name;
        double value;
} JsonNumber;

/* Adds the numbers to o (under parent's 'name' when given, else to parent
 * itself). */
static cJSON *json_add_numbers(cJSON *parent, const char *name, const JsonNumber *n, size_t count) {
        cJSON *o = name ? cJSON_AddObjectToObject(parent, name) : parent;

        for (size_t i = 0; o && i < count; i++)
                cJSON_AddNumberToObject(o, n[i].name, n[i].value);
        return o;
}
#define JSON_ADD_NUMBERS(parent, name, ...)                                 \
        json_add_numbers(parent, name, (const JsonNumber[]){ __VA_ARGS__ }, \
                         sizeof((const JsonNumber[]){ __VA_ARGS__ }) / sizeof(JsonNumber))

static double msec(uint64_t usec) {
        return (double) usec / 1000.0;
}

static double mean_msec(uint64_t usec_total, uint64_t count) {
        return count > 0 ? (double) usec_total / (double) count / 1000.0 : 0.0;
}

static void timing_json(cJSON *parent, const char *name, const Timing *t) {
        JSON_ADD_NUMBERS(parent, name, { "count", (double) t->count }, { "totalMsec", msec(t->usec_total) },
                         { "maxMsec", msec(t->usec_max) },
                         { "meanMsec", mean_msec(t->usec_total, t->count) });
}

static void loop_json(const ControlLoopStats *l, cJSON *j) {
        JSON_ADD_NUMBERS(j, "eventLoop", { "dispatches", (double) l->dispatches },
                         { "dispatchMaxMsec", msec(l->dispatch_usec_max) },
                         { "dispatchMeanMsec", mean_msec(l->dispatch_usec_total, l->dispatches) },
                         { "dispatchesOver50ms", (double) l->dispatches_over_50ms },
                         { "dispatchMaxCpuMsec", msec(l->dispatch_cpu_usec_max) },
                         { "dispatchMaxRecentMsec", msec(l->recent_usec_max) },
                         { "dispatchMaxRecentCpuMsec", msec(l->recent_cpu_usec_max) },
                         { "recentSec", l->recent_sec });
}

static void workers_json(const ControlStatus *m, cJSON *j) {
        WorkerStats ws;
        size_t queued;
        uint64_t overflows;

        worker_stats(sessions_room_worker(m->sessions_room), &ws);
        sessions_room_report_queue(m->sessions_room, &queued, &overflows);
        JSON_ADD_NUMBERS(j, "reportQueue", { "jobs", ws.pending }, { "jobsMax", ws.pending_max },
                         { "directories", (double) queued }, { "waitMaxMsec", msec(ws.wait_usec_max) },
                         { "runMaxMsec", msec(ws.run_usec_max) }, { "writtenOnLoop", (double) overflows },
                         { "listingsRefused", (double) m->list_reports_refused });
        SessionsCheckpointStats cs;
        sessions_room_checkpoint_stats(m->sessions_room, &cs);
        JSON_ADD_NUMBERS(j, "checkpoints", { "written", (double) cs.written },
                         { "failed", (double) cs.failed }, { "lastMsec", msec(cs.usec_last) },
                         { "maxMsec", msec(cs.usec_max) }, { "interruptedFound", (double) cs.interrupted });
        timing_json(j, "drains", m->drain_timing);
        timing_json(j, "reportWrites", sessions_room_report_timing(m->sessions_room));
}

static void unwinder_json(const ControlStatus *m, cJSON *j) {
        UnwinderStats us;

        if (!m->unwinder)
                return;
        unwinder_stats(m->unwinder, &us);
        JSON_ADD_NUMBERS(
                j, "unwindTables", { "processes", (double) us.processes }, { "tables", (double) us.tables },
                { "tablesUnused", (double) us.tables_unused }, { "rowsUsed", (double) us.rows_used },
                { "rowsMax", (double) us.rows_max }, { "bytesUsed", (double) us.bytes_used },
                { "bytesBudget", (double) us.bytes_budget }, { "bytesFixed", (double) us.bytes_fixed },
                { "shards", (double) us.shards }, { "shardsMax", (double) us.shards_max },
                { "rulesInterned", (double) us.rules }, { "tablesPending", (double) us.tables_pending },
                { "tablesWanted", (double) us.tables_wanted }, { "tablesBuilt", (double) us.tables_built },
                { "buildMsec", msec(us.build_usec) }, { "buildMsecMax", msec(us.build_usec_max) },
                { "tablesNotFitted", (double) us.tables_not_fitted },
                { "filesWithoutTable", (double) us.files_without_table },
                { "filesBad", (double) us.files_bad },
                { "mappingEntriesFailed", (double) us.mapping_entries_failed },
                { "processesCapped", (double) us.processes_capped }, { "reloads", (double) us.reloads },
                { "reloadsUnchanged", (double) us.reloads_unchanged });
}

static void debuginfod_json(const ControlStatus *m, cJSON *j) {
        DebuginfodFetcherStats ds;
        cJSON *d, *urls;

        if (!m->debuginfod)
                return;
        debuginfod_fetcher_stats(m->debuginfod, &ds);
        d = JSON_ADD_NUMBERS(j, "debuginfod",
                             { "cacheMaxBytes", (double) debuginfod_fetcher_cache_max_bytes(m->debuginfod) },
                             { "cacheBytes", (double) ds.cache_bytes },
                             { "cachePruned", (double) ds.cache_pruned },
                             { "requested", (double) ds.requested }, { "queued", (double) ds.queued },
                             { "pending", (double) ds.pending }, { "joined", (double) ds.joined },
                             { "fetched", (double) ds.fetched }, { "fromCache", (double) ds.from_cache },
                             { "notFound", (double) ds.not_found }, { "failed", (double) ds.failed },
                             { "dropped", (double) ds.dropped }, { "skipped", (double) ds.skipped },
                             { "fetchMsecMax", msec(ds.fetch_usec_max) });
        if (!d)
                return;
        urls = cJSON_AddArrayToObject(d, "urls");
        for (size_t i = 0; urls && m->debuginfod_urls && m->debuginfod_urls[i]; i++)
                cJSON_AddItemToArray(urls, cJSON_CreateString(m->debuginfod_urls[i]));
        cJSON_AddStringToObject(d, "cacheDir", debuginfod_fetcher_cache_dir(m->debuginfod));
}

static void sessions_json(const ControlStatus *m, cJSON *j) {
        cJSON *sessions = cJSON_AddArrayToObject(j, "sessions");

        for (size_t i = 0; sessions && i < m->n_sessions; i++) {
                Session *x = m->sessions[i];
                cJSON *o = cJSON_CreateObject();
                if (!o)
                        return;
                cJSON_AddStringToObject(o, "id", x->id_string);
                cJSON_AddStringToObject(o, "state", session_state_to_string(x->state));
                cJSON_AddStringToObject(o, "cgroup", x->cgroup);
                if (x->pod) {
                        cJSON_AddStringToObject(o, "namespace", x->namespace);
                        cJSON_AddStringToObject(o, "pod", x->pod);
                        if (x->container)
                                cJSON_AddStringToObject(o, "container", x->container);
                        cJSON_AddStringToObject(o, "containerId", strempty(x->container_id));
                }
                cJSON_AddStringToObject(o, "target", x->target->name);
                if (x->profile_config)
                        cJSON_AddStringToObject(o, "profileConfig", x->profile_config);
                cJSON_AddStringToObject(o, "profile", x->profile->name);
                cJSON_AddNumberToObject(o, "samples", (double) profile_data_total(x->data));
                cJSON_AddItemToArray(sessions, o);
        }
}

char *manager_status_json(ControlRoom *c) {
        ControlStatus st = {}, *m = &st;
        cJSON *j;
        char *s;

        c->deps.status(c->deps.userdata, &st);
        j = cJSON_CreateObject();
        if (!j)
                return NULL;
        cJSON_AddStringToObject(j, "version", CGPROF_VERSION);
        cJSON_AddNumberToObject(j, "pid", getpid());
        cJSON_AddStringToObject(j, "node", strempty(m->node_name));
        cJSON_AddStringToObject(j, "config", m->config_path);
        cJSON_AddStringToObject(j, "reportDir", strempty(m->report_dir));
        cJSON_AddStringToObject(j, "cgroupRoot", strempty(m->cgroup_root));
        cJSON_AddStringToObject(j, "attachMode", sampler_mode_to_string(m->attach_mode));
        (void) kube_room_status(m->kube, j);
        (void) machine_room_status(m->machine, j);
        cJSON_AddBoolToObject(j, "journal", journal_available());
        /* "available", or why the kernel cannot (profile "events": ["offcpu"]). */
        cJSON_AddStringToObject(j, "offCpu", m->offcpu_unavailable ?: "available");
        /* Where a wait's user stack is taken: "task-work", "sys_exit", "none". */
        cJSON_AddStringToObject(j, "offCpuRecordAt", strempty(m->offcpu_record_at));
        SessionsCounts counts;
        sessions_room_counts(m->sessions_room, &counts);
        JSON_ADD_NUMBERS(j, NULL, { "uptimeSec", (double) (now_usec(CLOCK_REALTIME) - m->start_usec) / 1e6 },
                         { "cgroupsWatched", (double) m->cgroups_watched },
                         { "sessionsStarted", (double) counts.started },
                         { "sessionsEnded", (double) counts.ended },
                         { "sessionsFailed", (double) counts.failed },
                         { "sessionsDiscarded", (double) counts.discarded },
                         { "sessionsWaitingForFds", (double) m->sessions_fd_starved });
        manager_report_retry_status(m->sessions_room, j);
        uint64_t maps_reads, maps_hits, maps_put;
        ProcEventQueueStats pq;
        proc_maps_cache_stats(m->maps_cache, &maps_reads, &maps_hits, &maps_put);
        proc_event_queue_stats(m->proc_event_queue, &pq);
        JSON_ADD_NUMBERS(
                j, "procMaps", { "reads", (double) maps_reads }, { "readOffLoop", (double) maps_put },
                { "cacheHits", (double) maps_hits }, { "eventsPending", (double) pq.pending },
                { "eventsPendingMax", (double) pq.pending_max },
                { "eventWaitMaxMsec", msec(pq.wait_usec_max) }, { "readMaxMsec", msec(pq.read_usec_max) },
                { "samplesWaiting", (double) m->sample_park->n },
                { "samplesWaited", (double) m->sample_park->parked_total },
                { "samplesNotWaited", (double) m->sample_park->full_total });
        workers_json(m, j);
        loop_json(&m->loop, j);
        unwinder_json(m, j);
        debuginfod_json(m, j);
        sessions_json(m, j);
        s = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        return s;
}
