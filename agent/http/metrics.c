/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* /metrics: the agent's state in Prometheus' text exposition format
 * (metrics.h). Read from the same places as GetStatus (manager-status.c). */
#include "cgprof-version.h"
#include "exposition.h"
#include "http-server.h"
#include "manager-pull.h"
#include "metrics.h"
#include "process-metrics.h"
#include "sessions.h"

/* Seconds, as microseconds. */
static const uint64_t dispatch_bounds[] = { 100,    500,    1000,   5000,    10000,   25000,  50000,
                                            100000, 250000, 500000, 1000000, 2500000, 5000000 };
static const uint64_t drain_bounds[] = { 1000,   5000,   10000,   25000,   50000,   100000,
                                         250000, 500000, 1000000, 2500000, 5000000, 10000000 };
static const uint64_t report_bounds[] = { 5000,   10000,   25000,   50000,   100000,   250000,
                                          500000, 1000000, 2500000, 5000000, 10000000, 30000000 };

/* The per-profile counters (columns of ManagerMetrics.profiles). */
enum {
        PROFILE_SAMPLES,
        PROFILE_LOST,
        PROFILE_EXPECTED,
        PROFILE_COLLISIONS,
        PROFILE_UNSYMBOLIZED_FRAMES,
        PROFILE_OFFCPU_RECORDED,
        PROFILE_OFFCPU_SHORT,
        PROFILE_OFFCPU_LOST,
        _PROFILE_COUNTERS_MAX,
};

/* What the metrics count beyond what the rooms keep (metrics.h). */
struct ManagerMetrics {
        MetricsDeps deps; /* what it reads beyond its counters (http-deps.h) */
        CounterTable profiles; /* by profile name: of the sessions that ended */
        CounterTable ended; /* by end reason */
        CounterTable failed; /* by reason: create, start, report */
        CounterTable sysctls; /* by sysctl, columns MachineChange */
        CounterTable pull; /* profile pulls (manager-pull.c) by HTTP status code */
};

int manager_metrics_init(const MetricsDeps *deps, ManagerMetrics **ret) {
        ManagerMetrics *x = calloc(1, sizeof(ManagerMetrics));
        int r;

        if (!x)
                return -ENOMEM;
        x->deps = *deps;
        counter_table_init(&x->profiles, METRICS_LABELS_MAX);
        counter_table_init(&x->ended, METRICS_LABELS_MAX);
        counter_table_init(&x->failed, METRICS_LABELS_MAX);
        counter_table_init(&x->sysctls, METRICS_LABELS_MAX);
        counter_table_init(&x->pull, METRICS_LABELS_MAX);
        *ret = x;
        r = histogram_init(deps->loop_histogram, dispatch_bounds, ELEMENTSOF(dispatch_bounds));
        if (r >= 0)
                r = histogram_init(deps->drain_histogram, drain_bounds, ELEMENTSOF(drain_bounds));
        if (r >= 0)
                r = histogram_init(&sessions_room_report_timing(deps->sessions_room)->histogram,
                                   report_bounds, ELEMENTSOF(report_bounds));
        return r;
}

ManagerMetrics *manager_metrics_free(ManagerMetrics *x) {
        if (!x)
                return NULL;
        counter_table_done(&x->profiles);
        counter_table_done(&x->ended);
        counter_table_done(&x->failed);
        counter_table_done(&x->sysctls);
        counter_table_done(&x->pull);
        free(x);
        return NULL;
}

void metrics_session_failed(ManagerMetrics *x, const char *reason) {
        if (x)
                (void) counter_table_add(&x->failed, reason, 0, 1);
}

void metrics_session_ended(ManagerMetrics *x, const char *reason) {
        if (x)
                (void) counter_table_add(&x->ended, reason, 0, 1);
}

void metrics_machine_change(ManagerMetrics *x, const char *sysctl, MachineChange change) {
        if (x && change >= 0 && change < _MACHINE_CHANGE_MAX)
                (void) counter_table_add(&x->sysctls, sysctl, (unsigned) change, 1);
}

void metrics_pull_request(ManagerMetrics *x, const char *code) {
        if (x)
                (void) counter_table_add(&x->pull, code, 0, 1);
}

/* A session's counters now, never below what was shown before: a session's
 * unsymbolized frames go down when late symbols arrive, its CPU time may be
 * read from another source at its end. Counters must not. */
static void session_counts(Session *s, const SamplerSessionStats *st,
                           uint64_t v[static COUNTER_TABLE_COLUMNS]) {
        uint64_t cpu = s->cpu_usage_last > s->cpu_usage_start ? s->cpu_usage_last - s->cpu_usage_start : 0;

        memset(v, 0, COUNTER_TABLE_COLUMNS * sizeof(uint64_t));
        v[PROFILE_SAMPLES] = profile_data_total(s->data);
        v[PROFILE_LOST] = s->stack_lost + (st ? st->lost : 0);
        /* As summary.json's samples.expected. */
        v[PROFILE_EXPECTED] =
                (uint64_t) (((unsigned __int128) s->profile->frequency * cpu + USEC_PER_SEC / 2) /
                            USEC_PER_SEC);
        v[PROFILE_COLLISIONS] = st ? st->collisions : 0;
        v[PROFILE_UNSYMBOLIZED_FRAMES] = s->frames_unsymbolized;
        v[PROFILE_OFFCPU_RECORDED] = st ? st->offcpu_recorded : 0;
        v[PROFILE_OFFCPU_SHORT] = st ? st->offcpu_short : 0;
        v[PROFILE_OFFCPU_LOST] = st ? st->offcpu_lost : 0;
        for (size_t i = 0; i < COUNTER_TABLE_COLUMNS; i++) {
                v[i] = MAX(v[i], s->metrics_seen[i]);
                s->metrics_seen[i] = v[i];
        }
}

void metrics_session_final(ManagerMetrics *x, Session *s, const SamplerSessionStats *st) {
        uint64_t v[COUNTER_TABLE_COLUMNS];
        CounterEntry *e;

        if (!x)
                return;
        session_counts(s, st, v);
        e = counter_table_get(&x->profiles, s->profile->name);
        if (!e)
                return;
        for (size_t i = 0; i < COUNTER_TABLE_COLUMNS; i++)
                e->values[i] += v[i];
}

/* ---- the exposition ---- */

static void write_sessions(ManagerMetrics *x, MetricsWriter *w) {
        uint64_t by_state[_SESSION_STATE_MAX] = {};
        SessionsCounts counts;
        size_t n;
        Session **sessions = x->deps.sessions(x->deps.userdata, &n);

        for (size_t i = 0; i < n; i++)
                if (sessions[i]->state < _SESSION_STATE_MAX)
                        by_state[sessions[i]->state]++;
        metrics_family(
                w, "cgprof_sessions", METRIC_GAUGE,
                "Sessions the agent holds, by state (new, armed: waiting for a manual start, running).");
        for (SessionState st = 0; st < _SESSION_STATE_MAX; st++)
                if (st != SESSION_ENDED)
                        metrics_sample_u64(w, METRICS_LABELS({ "state", session_state_to_string(st) }),
                                           by_state[st]);
        sessions_room_counts(x->deps.sessions_room, &counts);
        metrics_counter_u64(w, "cgprof_sessions_started_total", "Sessions that started sampling.",
                            counts.started);
        metrics_counter_table(w, "cgprof_sessions_ended_total",
                              "Sessions that ended with their report written, by reason.", "reason",
                              &x->ended, 0);
        metrics_counter_table(w, "cgprof_sessions_failed_total",
                              "Sessions that could not be created (create), started (start) or whose report "
                              "could not be written (report).",
                              "reason", &x->failed, 0);
        metrics_counter_u64(w, "cgprof_sessions_discarded_total",
                            "Provisional sessions discarded (a pod's sandbox, not a container).",
                            counts.discarded);
        metrics_gauge(w, "cgprof_sessions_waiting_for_fds",
                      "Cgroups whose session waits for file descriptors to start.",
                      (double) x->deps.sessions_fd_starved(x->deps.userdata));
        metrics_gauge(w, "cgprof_cgroups_watched", "Cgroups the agent watches.",
                      (double) x->deps.cgroups_watched(x->deps.userdata));
}

static void write_profiles(ManagerMetrics *x, MetricsWriter *w) {
        static const struct {
                const char *name, *help;
        } families[_PROFILE_COUNTERS_MAX] = {
                [PROFILE_SAMPLES] = { "cgprof_samples_total",
                                      "Samples collected, by profile (as summary.json's samples.total)." },
                [PROFILE_LOST] = { "cgprof_samples_lost_total",
                                   "Samples seen in the kernel but lost, by profile." },
                [PROFILE_EXPECTED] = { "cgprof_samples_expected_total",
                                       "Samples expected from the cgroups' CPU time at the profile's "
                                       "frequency, by profile." },
                [PROFILE_COLLISIONS] = { "cgprof_stack_collisions_total",
                                         "Stack map collisions, by profile." },
                [PROFILE_UNSYMBOLIZED_FRAMES] = { "cgprof_unsymbolized_frames_total",
                                                  "Frames left unsymbolized, weighted by samples, by "
                                                  "profile." },
                [PROFILE_OFFCPU_RECORDED] = { "cgprof_offcpu_waits_recorded_total",
                                              "Off-CPU waits recorded with their stacks, by profile." },
                [PROFILE_OFFCPU_SHORT] = { "cgprof_offcpu_waits_short_total",
                                           "Off-CPU waits under offCpuMinUsec (counted, not stacked), by "
                                           "profile." },
                [PROFILE_OFFCPU_LOST] = { "cgprof_offcpu_waits_lost_total",
                                          "Off-CPU waits not recorded (counts map full), by profile." },
        };
        CounterTable t;

        /* The sessions that ended, plus the running ones as they are now. */
        if (counter_table_copy(&t, &x->profiles) < 0) {
                for (size_t i = 0; i < _PROFILE_COUNTERS_MAX; i++)
                        metrics_family(w, families[i].name, METRIC_COUNTER, families[i].help);
                return;
        }
        size_t n;
        Session **sessions = x->deps.sessions(x->deps.userdata, &n);
        Sampler *sampler = x->deps.sampler(x->deps.userdata);

        for (size_t i = 0; i < n; i++) {
                Session *s = sessions[i];
                _cleanup_(sampler_session_stats_done) SamplerSessionStats st = {};
                uint64_t v[COUNTER_TABLE_COLUMNS];
                CounterEntry *e;

                if (s->state != SESSION_RUNNING || !s->data)
                        continue;
                bool have_stats = sampler && sampler_session_stats(sampler, s->slot, &st) >= 0;
                session_counts(s, have_stats ? &st : NULL, v);
                e = counter_table_get(&t, s->profile->name);
                for (size_t k = 0; e && k < COUNTER_TABLE_COLUMNS; k++)
                        e->values[k] += v[k];
        }
        for (size_t i = 0; i < _PROFILE_COUNTERS_MAX; i++)
                metrics_counter_table(w, families[i].name, families[i].help, "profile", &t, (unsigned) i);
        counter_table_done(&t);
}

static void write_bpf(ManagerMetrics *x, MetricsWriter *w) {
        uint64_t ns = 0, runs = 0;
        Sampler *sampler = x->deps.sampler(x->deps.userdata);
        bool ok = sampler && sampler_prog_stats(sampler, &ns, &runs) >= 0;

        metrics_family(w, "cgprof_bpf_program_run_seconds_total", METRIC_COUNTER,
                       "Time the sampling BPF program ran (needs kernel.bpf_stats_enabled=1).");
        if (ok)
                metrics_sample(w, NULL, 0, (double) ns / 1e9);
        metrics_family(w, "cgprof_bpf_program_runs_total", METRIC_COUNTER,
                       "Runs of the sampling BPF program (needs kernel.bpf_stats_enabled=1).");
        if (ok)
                metrics_sample_u64(w, NULL, 0, runs);
}

static void write_timings(ManagerMetrics *x, MetricsWriter *w) {
        metrics_family(
                w, "cgprof_drain_duration_seconds", METRIC_HISTOGRAM,
                "Drains of the sampler's maps: the maps read, every sample symbolized (on the event loop).");
        metrics_histogram(w, NULL, 0, x->deps.drain_histogram);
        metrics_family(w, "cgprof_report_write_duration_seconds", METRIC_HISTOGRAM,
                       "Report directories written (all formats, fsync()ed; on the report worker).");
        metrics_histogram(w, NULL, 0, &sessions_room_report_timing(x->deps.sessions_room)->histogram);
        metrics_family(w, "cgprof_event_loop_dispatch_duration_seconds", METRIC_HISTOGRAM,
                       "How long each event loop dispatch kept the loop (wall time): the latency it adds to "
                       "everything else.");
        metrics_histogram(w, NULL, 0, x->deps.loop_histogram);
        size_t queued;
        uint64_t overflows;
        sessions_room_report_queue(x->deps.sessions_room, &queued, &overflows);
        metrics_gauge(w, "cgprof_report_queue_directories", "Report directories queued or being written.",
                      (double) queued);
}

static void write_machine(ManagerMetrics *x, MetricsWriter *w) {
        metrics_counter_table(w, "cgprof_machine_config_applies_total",
                              "machineConfig sysctls set, by sysctl.", "sysctl", &x->sysctls,
                              MACHINE_CHANGE_APPLY);
        metrics_counter_table(w, "cgprof_machine_config_drift_repairs_total",
                              "machineConfig sysctls found changed by someone else and set back, by sysctl.",
                              "sysctl", &x->sysctls, MACHINE_CHANGE_DRIFT);
        metrics_counter_table(
                w, "cgprof_machine_config_refusals_total",
                "machineConfig sysctls that could not be set (refused or the write failed), by sysctl.",
                "sysctl", &x->sysctls, MACHINE_CHANGE_REFUSED);
}

static void write_kube(ManagerMetrics *x, MetricsWriter *w) {
        struct {
                const char *resource;
                const KubeWatch *w;
        } watches[] = {
                { "pods", kube_room_watch(x->deps.kube, KUBE_ROOM_WATCH_PODS) },
                { "namespaces", kube_room_watch(x->deps.kube, KUBE_ROOM_WATCH_NAMESPACES) },
                { "profileconfigs", kube_room_watch(x->deps.kube, KUBE_ROOM_WATCH_PROFILE_CONFIGS) },
        };
        KubeWatchStats st[ELEMENTSOF(watches)];
        size_t n = 0;
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        if (kube_room_enabled(x->deps.kube))
                for (size_t i = 0; i < ELEMENTSOF(watches); i++)
                        if (watches[i].w) {
                                kube_watch_stats(watches[i].w, &st[i]);
                                n = i + 1;
                        }
#define KUBE_FAMILY(name, type, help, expr)                                                            \
        do {                                                                                           \
                metrics_family(w, name, type, help);                                                   \
                for (size_t i = 0; i < n; i++)                                                         \
                        if (watches[i].w)                                                              \
                                metrics_sample(w, METRICS_LABELS({ "resource", watches[i].resource }), \
                                               (double) (expr));                                       \
        } while (0)
        KUBE_FAMILY("cgprof_kube_watch_connected", METRIC_GAUGE,
                    "1 when the watch has listed its resource and is watching it.", st[i].synced ? 1 : 0);
        KUBE_FAMILY("cgprof_kube_watch_relists_total", METRIC_COUNTER, "Lists after the first one.",
                    st[i].relists);
        KUBE_FAMILY("cgprof_kube_watch_gone_total", METRIC_COUNTER,
                    "HTTP 410 Gone answers (a resourceVersion or continue token too old).", st[i].gone);
        KUBE_FAMILY("cgprof_kube_watch_reconnects_total", METRIC_COUNTER, "Watch reconnects after errors.",
                    st[i].reconnects);
        KUBE_FAMILY("cgprof_kube_watch_events_total", METRIC_COUNTER, "Watch events handled.", st[i].events);
        metrics_family(w, "cgprof_kube_watch_last_event_age_seconds", METRIC_GAUGE,
                       "Seconds since the watch's last list, event or bookmark.");
        for (size_t i = 0; i < n; i++)
                if (watches[i].w && st[i].last_event_usec > 0)
                        metrics_sample(w, METRICS_LABELS({ "resource", watches[i].resource }),
                                       (double) (now - MIN(now, st[i].last_event_usec)) / 1e6);
#undef KUBE_FAMILY
}

/* The report index (manager-reports.h): what reportDir holds, and what retention removed. */
static void write_reports(ManagerMetrics *x, MetricsWriter *w) {
        ManagerReportsStats st;

        manager_reports_stats(x->deps.sessions_room, &st);
        if (st.ready) {
                metrics_gauge(w, "cgprof_reports", "Reports in reportDir (the agent's index of it).",
                              (double) st.reports);
                metrics_gauge(w, "cgprof_reports_bytes", "Bytes of the report files in reportDir.",
                              (double) st.bytes);
        }
        metrics_family(w, "cgprof_reports_removed_total", METRIC_COUNTER,
                       "Reports removed by reportRetention, by reason (age, count, bytes).");
        for (ReportRemoval r = 0; r < _REPORT_REMOVAL_MAX; r++)
                metrics_sample_u64(w, &(const MetricLabel){ "reason", report_removal_to_string(r) }, 1,
                                   st.removed[r]);
        metrics_counter_u64(w, "cgprof_reports_removed_bytes_total",
                            "Bytes of the report files removed by reportRetention.", st.removed_bytes);
        metrics_counter_u64(w, "cgprof_reports_remove_failures_total",
                            "Reports reportRetention failed to remove from the disk.", st.remove_failed);
}

/* What the pulls cost the API server, and what was refused for it. */
static void write_pull_limits(ManagerPull *pull, MetricsWriter *w) {
        PullStats ps;

        manager_pull_stats(pull, &ps);
        metrics_family(w, "cgprof_http_rate_limited_total", METRIC_COUNTER,
                       "Requests answered 429: reviews (too many requests to authorize from one client "
                       "address), pulls (too many profile pulls by one user).");
        metrics_sample_u64(w, &(const MetricLabel){ "what", "reviews" }, 1, ps.auth.rate_limited);
        metrics_sample_u64(w, &(const MetricLabel){ "what", "pulls" }, 1, ps.pulls_limited);
        if (!ps.kubernetes)
                return;
        metrics_family(w, "cgprof_http_auth_reviews_total", METRIC_COUNTER,
                       "Reviews asked of the API server: token (TokenReview), access "
                       "(SubjectAccessReview).");
        metrics_sample_u64(w, &(const MetricLabel){ "kind", "token" }, 1, ps.auth.token_reviews);
        metrics_sample_u64(w, &(const MetricLabel){ "kind", "access" }, 1, ps.auth.access_reviews);
        metrics_family(w, "cgprof_http_auth_cache_hits_total", METRIC_COUNTER,
                       "Lookups answered without asking the API server: token (a token's user), bad_token "
                       "(a token not taken), decision (allowed or denied), in_flight (a review another "
                       "request had asked).");
        metrics_sample_u64(w, &(const MetricLabel){ "cache", "token" }, 1, ps.auth.token_hits);
        metrics_sample_u64(w, &(const MetricLabel){ "cache", "bad_token" }, 1, ps.auth.bad_token_hits);
        metrics_sample_u64(w, &(const MetricLabel){ "cache", "decision" }, 1, ps.auth.decision_hits);
        metrics_sample_u64(w, &(const MetricLabel){ "cache", "in_flight" }, 1, ps.auth.joined);
}

int metrics_exposition(ManagerMetrics *x, HttpServer *http, ManagerPull *pull, char **ret,
                       size_t *ret_size) {
        _cleanup_(metrics_writer_freep) MetricsWriter *w = NULL;
        HttpServerStats hs;
        int r;

        if (!x)
                return -ENODATA;
        r = metrics_writer_new(&w);
        if (r < 0)
                return r;
        metrics_family(w, "cgprof_info", METRIC_GAUGE,
                       "The agent's version, node and attach mode (value 1).");
        metrics_sample(w,
                       METRICS_LABELS({ "version", CGPROF_VERSION }, { "node", strempty(x->deps.node_name) },
                                      { "attach_mode", sampler_mode_to_string(x->deps.attach_mode) }),
                       1);
        write_sessions(x, w);
        write_profiles(x, w);
        write_bpf(x, w);
        write_timings(x, w);
        write_machine(x, w);
        write_kube(x, w);
        write_reports(x, w);
        http_server_stats(http, &hs);
        metrics_counter_u64(w, "cgprof_http_requests_total", "HTTP requests answered (before this one).",
                            hs.requests);
        metrics_counter_u64(w, "cgprof_http_requests_abandoned_total",
                            "Requests waiting for their answer (a profile pull) whose client hung up.",
                            hs.abandoned);
        metrics_counter_u64(w, "cgprof_http_connections_evicted_total",
                            "Connections waiting for a request's head taken back for a new connection past "
                            "maxConnections.",
                            hs.evicted);
        metrics_counter_u64(w, "cgprof_http_head_timeouts_total",
                            "Connections closed for taking over 10 s to send a request's line and headers.",
                            hs.head_timeouts);
        metrics_counter_u64(w, "cgprof_http_stalled_runs_total",
                            "Listener runs that found only TLS handshakes waiting for bytes (paced, not "
                            "repeated at once).",
                            hs.stalled_runs);
        if (pull) {
                metrics_counter_table(w, "cgprof_http_pprof_requests_total",
                                      "Profile pulls and report requests answered, by HTTP status code.",
                                      "code", &x->pull, 0);
                write_pull_limits(pull, w);
        }
        process_metrics_write(w, "/proc/self");
        return metrics_writer_finish(w, ret, ret_size);
}
