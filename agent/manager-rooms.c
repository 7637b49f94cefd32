/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "control.h"
#include "http.h"
#include "manager-pods.h"
#include "manager-rooms.h"

static void on_session_started(void *userdata, Session *s) {
        manager_bus_session_started(userdata, s);
}

static void on_session_stopped(void *userdata, Session *s, const SamplerSessionStats *st) {
        Manager *m = userdata;
        metrics_session_final(m->metrics, s, st);
}

static void on_session_ended(void *userdata, Session *s, const char *reason, const char *report_dirs,
                             int error, uint64_t samples) {
        Manager *m = userdata;

        if (error >= 0)
                metrics_session_ended(m->metrics, reason);
        else
                metrics_session_failed(m->metrics, "report");
        manager_bus_session_ended(m, s->id_string, reason, report_dirs, samples);
        http_room_session_ended(m->http_room, s->id_string, report_dirs, error);
}

static const SessionEvents manager_session_events = {
        .started = on_session_started,
        .stopped = on_session_stopped,
        .ended = on_session_ended,
};

static const char *sessions_report_dir(void *userdata, int *ret_fd) {
        Manager *m = userdata;
        *ret_fd = m->report_dir_fd;
        return strempty(m->report_dir);
}

static bool sessions_stopping(void *userdata) {
        Manager *m = userdata;
        return m->stopping;
}

static void on_sessions_reports_written(void *userdata) {
        manager_reports_written(userdata);
}

static const char *sessions_cgroup_root(void *userdata) {
        Manager *m = userdata;
        return m->cgroup_root;
}

static Session *sessions_find(void *userdata, const char *id) {
        return manager_session_find(userdata, id);
}

static void sessions_slot(void *userdata, Session *s, bool taken) {
        manager_session_slot(userdata, s, taken);
}

static void sessions_removed(void *userdata, Session *s, const char *reason) {
        manager_remove_session(userdata, s, reason);
}

static void sessions_assign_cgroups_below(void *userdata, const char *path) {
        manager_assign_cgroups_below(userdata, path);
}

static void sessions_refresh_process_soon(void *userdata, uint32_t session_slot, uint32_t pid,
                                          uint64_t start_time, uint32_t exec_id) {
        manager_refresh_process_soon(userdata, session_slot, pid, start_time, exec_id);
}

static int sessions_drain(void *userdata, bool full) {
        return manager_drain(userdata, full);
}

static const Config *sessions_config(void *userdata) {
        Manager *m = userdata;
        return m->config ? m->config->config : NULL;
}

int manager_sessions_room_new(Manager *m) {
        SessionsRoomDeps deps = {
                .event = m->event,
                .state_dir = m->state_dir,
                .node_name = m->node_name,
                .cgroup_root = sessions_cgroup_root,
                .report_dir = sessions_report_dir,
                .config = sessions_config,
                .stopping = sessions_stopping,
                .reports_written = on_sessions_reports_written,
                .session_find = sessions_find,
                .session_slot = sessions_slot,
                .session_removed = sessions_removed,
                .assign_cgroups_below = sessions_assign_cgroups_below,
                .refresh_process_soon = sessions_refresh_process_soon,
                .drain = sessions_drain,
                .events = &manager_session_events,
                .userdata = m,
        };

        return sessions_room_new(&deps, &m->sessions_room);
}

static const Config *machine_config(void *userdata) {
        Manager *m = userdata;
        return m->config ? m->config->config : NULL;
}

static void on_machine_changed(void *userdata, const char *sysctl, MachineChange change) {
        Manager *m = userdata;
        metrics_machine_change(m->metrics, sysctl, change);
}

static void on_machine_fatal(void *userdata, int error) {
        manager_fatal(userdata, error);
}

int manager_machine_new(Manager *m) {
        MachineRoomDeps deps = {
                .event = m->event,
                .node_name = m->node_name,
                .state_dir = m->state_dir,
                .sysctl_root = m->opts.sysctl_root,
                .host = m->opts.no_kubernetes,
                .config = machine_config,
                .changed = on_machine_changed,
                .fatal = on_machine_fatal,
                .userdata = m,
        };

        return machine_room_new(&deps, &m->machine);
}

static ConfigRef *kube_config(void *userdata) {
        Manager *m = userdata;
        return m->config;
}

static int on_kube_client_started(void *userdata, KubeClient *client, const KubeWatchOptions *opts) {
        Manager *m = userdata;
        return machine_room_node_start(m->machine, client, opts);
}

static int on_kube_status(void *userdata, cJSON *k) {
        Manager *m = userdata;
        return machine_room_node_status(m->machine, k);
}

static void on_pods_changed(void *userdata, const char *pod_uid, const char *namespace) {
        manager_pods_changed(userdata, pod_uid, namespace);
}

int manager_kube_new(Manager *m) {
        KubeRoomDeps deps = {
                .event = m->event,
                .node_name = m->node_name,
                .kubeconfig = m->opts.kubeconfig,
                .no_kubernetes = m->opts.no_kubernetes,
                .idle_sec = m->opts.kube_idle_sec,
                .backoff_max_msec = m->opts.kube_backoff_max_msec,
                .config = kube_config,
                .client_started = on_kube_client_started,
                .status = on_kube_status,
                .pods_changed = on_pods_changed,
                .userdata = m,
        };

        return kube_room_new(&deps, &m->kube);
}

static Session **metrics_sessions(void *userdata, size_t *ret_n) {
        Manager *m = userdata;
        *ret_n = m->n_sessions;
        return m->sessions;
}

static Sampler *metrics_sampler(void *userdata) {
        Manager *m = userdata;
        return m->sampler;
}

static size_t metrics_sessions_fd_starved(void *userdata) {
        Manager *m = userdata;
        return m->sessions_fd_starved;
}

static size_t metrics_cgroups_watched(void *userdata) {
        Manager *m = userdata;
        return m->cgroup_watch ? cgroup_watch_count(m->cgroup_watch) : 0;
}

int manager_metrics_new(Manager *m) {
        MetricsDeps deps = {
                .node_name = m->node_name,
                .attach_mode = m->opts.attach_mode,
                .sessions_room = m->sessions_room,
                .kube = m->kube,
                .loop_histogram = &m->loop.dispatch_histogram,
                .drain_histogram = &m->drain_timing.histogram,
                .sessions = metrics_sessions,
                .sampler = metrics_sampler,
                .sessions_fd_starved = metrics_sessions_fd_starved,
                .cgroups_watched = metrics_cgroups_watched,
                .userdata = m,
        };

        return manager_metrics_init(&deps, &m->metrics);
}

static const Config *http_config(void *userdata) {
        Manager *m = userdata;
        return m->config ? m->config->config : NULL;
}

static Session *http_session_find(void *userdata, const char *id) {
        return manager_session_find(userdata, id);
}

static int http_start_session(void *userdata, const char *target, uint64_t duration_usec, char **ret_id,
                              char **ret_error) {
        return manager_start_session(userdata, target, NULL, duration_usec, ret_id, ret_error);
}

static int http_stop_session(void *userdata, const char *id, char **ret_error) {
        return manager_stop_session(userdata, id, NULL, NULL, ret_error);
}

static bool http_host_target(void *userdata, const char *path) {
        return manager_host_target(userdata, path) != NULL;
}

static bool http_listing_refused(void *userdata) {
        Manager *m = userdata;

        if (m->list_reports_pending < LIST_REPORTS_MAX_PENDING)
                return false;
        m->list_reports_refused++;
        return true;
}

static void http_listing_pending(void *userdata, bool more) {
        Manager *m = userdata;

        if (more)
                m->list_reports_pending++;
        else
                m->list_reports_pending--;
}

int manager_http_room_new(Manager *m) {
        HttpRoomDeps deps = {
                .event = m->event,
                .node_name = m->node_name,
                .sessions_room = m->sessions_room,
                .kube = m->kube,
                .metrics = m->metrics,
                .list_reports_max = LIST_REPORTS_MAX_PENDING,
                .config = http_config,
                .report_dir = sessions_report_dir,
                .session_find = http_session_find,
                .start_session = http_start_session,
                .stop_session = http_stop_session,
                .host_target = http_host_target,
                .listing_refused = http_listing_refused,
                .listing_pending = http_listing_pending,
                .reports_written = on_sessions_reports_written,
                .userdata = m,
        };

        return http_room_new(&deps, &m->http_room);
}
