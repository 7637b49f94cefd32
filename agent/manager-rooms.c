/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "control.h"
#include "http.h"
#include "manager-pods.h"
#include "manager-rooms.h"

static void on_session_started(void *userdata, Session *s) {
        Manager *m = userdata;
        manager_bus_session_started(m->control, s);
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
        manager_bus_session_ended(m->control, s->id_string, reason, report_dirs, samples);
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

static void control_loop_stats(Manager *m, ControlLoopStats *l) {
        uint64_t now_sec = now_usec(CLOCK_MONOTONIC) / USEC_PER_SEC;

        *l = (ControlLoopStats){
                .dispatches = m->loop.dispatches,
                .dispatch_usec_total = m->loop.dispatch_usec_total,
                .dispatch_usec_max = m->loop.dispatch_usec_max,
                .dispatches_over_50ms = m->loop.dispatches_over_50ms,
                .dispatch_cpu_usec_max = m->loop.dispatch_cpu_usec_max,
                .recent_sec = LOOP_RECENT_SEC,
        };
        for (unsigned i = 0; i < LOOP_RECENT_SEC; i++)
                if (m->loop.recent_sec[i] + LOOP_RECENT_SEC > now_sec) {
                        l->recent_usec_max = MAX(l->recent_usec_max, m->loop.recent_usec_max[i]);
                        l->recent_cpu_usec_max = MAX(l->recent_cpu_usec_max, m->loop.recent_cpu_usec_max[i]);
                }
}

static void control_status(void *userdata, ControlStatus *ret) {
        Manager *m = userdata;

        *ret = (ControlStatus){
                .node_name = m->node_name,
                .config_path = m->config_path,
                .report_dir = m->report_dir,
                .cgroup_root = m->cgroup_root,
                .attach_mode = m->opts.attach_mode,
                .start_usec = m->start_usec,
                .kube = m->kube,
                .machine = m->machine,
                .sessions_room = m->sessions_room,
                .cgroups_watched = m->cgroup_watch ? cgroup_watch_count(m->cgroup_watch) : 0,
                .sessions_fd_starved = m->sessions_fd_starved,
                .maps_cache = m->maps_cache,
                .proc_event_queue = m->proc_event_queue,
                .sample_park = &m->sample_park,
                .list_reports_refused = m->list_reports_refused,
                .drain_timing = &m->drain_timing,
                .unwinder = m->unwinder,
                .offcpu_unavailable = m->sampler ? sampler_offcpu_unavailable(m->sampler) : "no sampler",
                .offcpu_record_at = m->sampler ? sampler_offcpu_record_at(m->sampler) : "none",
                .debuginfod = m->debuginfod,
                .debuginfod_urls = m->debuginfod_urls,
                .sessions = m->sessions,
                .n_sessions = m->n_sessions,
        };
        control_loop_stats(m, &ret->loop);
}

static ConfigRef *control_config(void *userdata) {
        Manager *m = userdata;
        return m->config;
}

static const char *control_cgroup_root(void *userdata) {
        Manager *m = userdata;
        return m->cgroup_root;
}

static bool control_can_start(void *userdata) {
        Manager *m = userdata;
        return !m->stopping && m->sampler;
}

static Session *const *control_sessions(void *userdata, size_t *ret_n) {
        Manager *m = userdata;
        *ret_n = m->n_sessions;
        return m->sessions;
}

static Session *control_session_find(void *userdata, const char *id) {
        return manager_session_find(userdata, id);
}

static bool control_cgroup(const CgroupState *c, ControlCgroup *ret) {
        if (!c)
                return false;
        *ret = (ControlCgroup){
                .path = c->path,
                .container = c->container,
                .pod_uid = c->pod_uid,
                .container_id = c->container_id,
                .session = c->session,
        };
        return true;
}

static bool control_cgroup_find(void *userdata, const char *path, ControlCgroup *ret) {
        return control_cgroup(manager_cgroup_find(userdata, path), ret);
}

static bool control_cgroup_find_container(void *userdata, const char *pod_uid, const char *container_id,
                                          ControlCgroup *ret) {
        return control_cgroup(manager_cgroup_find_container(userdata, pod_uid, container_id), ret);
}

static const Target *control_host_target(void *userdata, const char *path) {
        return manager_host_target(userdata, path);
}

static void control_session_failed(void *userdata, const char *reason) {
        manager_count_session_failed(userdata, reason);
}

static int control_launch_session(void *userdata, Session *s) {
        return manager_launch_session(userdata, s, true, NULL);
}

static const char *control_last_config_load(void *userdata) {
        Manager *m = userdata;
        return m->last_config_load;
}

static uint64_t control_uptime_usec(void *userdata) {
        return manager_uptime_usec(userdata);
}

static int control_reload(void *userdata, char **ret_error) {
        return manager_reload(userdata, ret_error);
}

static bool control_listing_begin(void *userdata) {
        Manager *m = userdata;

        if (m->list_reports_pending >= LIST_REPORTS_MAX_PENDING) {
                m->list_reports_refused++;
                return false;
        }
        m->list_reports_pending++;
        return true;
}

static void control_listing_end(void *userdata) {
        Manager *m = userdata;
        m->list_reports_pending--;
}

static void on_control_fatal(void *userdata, int error) {
        manager_fatal(userdata, error);
}

int manager_control_room_new(Manager *m) {
        ControlDeps deps = {
                .node_name = m->node_name,
                .sysctl_root = m->opts.sysctl_root,
                .kube = m->kube,
                .machine = m->machine,
                .sessions_room = m->sessions_room,
                .status = control_status,
                .config = control_config,
                .cgroup_root = control_cgroup_root,
                .can_start = control_can_start,
                .sessions = control_sessions,
                .session_find = control_session_find,
                .cgroup_find = control_cgroup_find,
                .cgroup_find_container = control_cgroup_find_container,
                .host_target = control_host_target,
                .session_failed = control_session_failed,
                .launch_session = control_launch_session,
                .event = m->event,
                .bus_socket = m->bus_socket,
                .config_path = m->config_path,
                .last_config_load = control_last_config_load,
                .uptime_usec = control_uptime_usec,
                .reload = control_reload,
                .report_dir = sessions_report_dir,
                .listing_begin = control_listing_begin,
                .listing_end = control_listing_end,
                .reports_written = on_sessions_reports_written,
                .fatal = on_control_fatal,
                .userdata = m,
        };

        return control_room_new(&deps, &m->control);
}

int manager_start_session(Manager *m, const char *target, const char *profile, uint64_t duration_usec,
                          char **ret_id, char **ret_error) {
        return control_start_session(m->control, target, profile, duration_usec, ret_id, ret_error);
}

int manager_stop_session(Manager *m, const char *id, SessionEndedFunc callback, void *userdata,
                         char **ret_error) {
        return control_stop_session(m->control, id, callback, userdata, ret_error);
}
