/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The D-Bus API of bus-api.h: object /io/cgprof/Agent1, interface
 * io.cgprof.Agent1. Served on the agent's private socket (peer-to-peer, no
 * bus daemon: only root may connect, the socket is mode 0600 and the peer's
 * credentials are checked) and, when a system bus is reachable, as
 * io.cgprof.Agent1 on it (systemd/io.cgprof.Agent1.conf lets only root own
 * and call it; sd-bus also checks the caller there). This file only
 * marshals: the operations are in manager-control.c. Every string goes
 * out valid UTF-8 (bus-valid.h): a workload's or node's name that is not
 * (a cgroup made with other bytes) never fails a call. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "bus-api.h"
#include "bus-valid.h"
#include "cgprof-version.h"
#include "control-room.h"
#include "fileio.h"
#include "log.h"
#include "manager-bus.h"
#include "manager-control.h"
#include "machine.h"
#include "sessions.h"

#define SYSTEM_BUS_SOCKET "/run/dbus/system_bus_socket"

/* Appends the n elements of list as an array of the struct signature sig
 * ("(ss)"): each one as the arguments after the signature, expressions of
 * `_e` (a pointer to the element), its strings made valid UTF-8. Returns 0
 * or a negative errno. */
#define BUS_APPEND_ARRAY(m, sig, list, n, ...)                         \
        ({                                                             \
                int _r = sd_bus_message_open_container(m, 'a', sig);   \
                for (size_t _i = 0; _r >= 0 && _i < (n); _i++) {       \
                        const __typeof__((list)[0]) *_e = &(list)[_i]; \
                        _r = bus_append_valid(m, sig, __VA_ARGS__);    \
                }                                                      \
                if (_r >= 0)                                           \
                        _r = sd_bus_message_close_container(m);        \
                _r;                                                    \
        })

/* A control error as a D-Bus error of bus-api.h. */
static int bus_reply_error(sd_bus_error *error, int r, const char *message) {
        const char *name;

        switch (r) {
        case -ENOMEM:
                return -ENOMEM;
        case -ENOENT:
                name = CGPROF_ERROR_NOT_FOUND;
                break;
        case -EBUSY:
                name = CGPROF_ERROR_ALREADY_RUNNING;
                break;
        case -EINVAL:
                name = CGPROF_ERROR_INVALID_ARGUMENT;
                break;
        default:
                name = CGPROF_ERROR_FAILED;
        }
        return bus_error_set_valid(error, name, message ?: strerror(-r));
}

/* ---- properties ---- */

static int property_get_version(sd_bus *bus, const char *path, const char *interface, const char *property,
                                sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return bus_append_valid(reply, "s", CGPROF_VERSION);
}

static int property_get_node(sd_bus *bus, const char *path, const char *interface, const char *property,
                             sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        ControlRoom *room = userdata;
        return bus_append_valid(reply, "s", strempty(room->deps.node_name));
}

static int property_get_uptime(sd_bus *bus, const char *path, const char *interface, const char *property,
                               sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        ControlRoom *room = userdata;
        return bus_append_valid(reply, "t", room->deps.uptime_usec(room->deps.userdata));
}

/* Running sessions (for ActiveSessions). */
static unsigned control_active_sessions(ControlRoom *room) {
        size_t n_sessions;
        Session *const *sessions = room->deps.sessions(room->deps.userdata, &n_sessions);
        unsigned n = 0;

        for (size_t i = 0; i < n_sessions; i++)
                if (sessions[i]->state == SESSION_RUNNING)
                        n++;
        return n;
}

static int property_get_active_sessions(sd_bus *bus, const char *path, const char *interface,
                                        const char *property, sd_bus_message *reply, void *userdata,
                                        sd_bus_error *error) {
        return bus_append_valid(reply, "u", control_active_sessions(userdata));
}

static int property_get_config_path(sd_bus *bus, const char *path, const char *interface,
                                    const char *property, sd_bus_message *reply, void *userdata,
                                    sd_bus_error *error) {
        ControlRoom *room = userdata;
        return bus_append_valid(reply, "s", room->deps.config_path);
}

static int property_get_last_config_load(sd_bus *bus, const char *path, const char *interface,
                                         const char *property, sd_bus_message *reply, void *userdata,
                                         sd_bus_error *error) {
        ControlRoom *room = userdata;
        return bus_append_valid(reply, "s", room->deps.last_config_load(room->deps.userdata) ?: "ok");
}

static int property_get_machine_config(sd_bus *bus, const char *path, const char *interface,
                                       const char *property, sd_bus_message *reply, void *userdata,
                                       sd_bus_error *error) {
        ControlSysctl *list = NULL;
        size_t n = 0;
        int r;

        r = control_machine_config(userdata, &list, &n);
        if (r < 0)
                return r;
        r = BUS_APPEND_ARRAY(reply, "(sss)", list, n, _e->name, _e->wanted, _e->current);
        control_sysctls_free(list, n);
        return r;
}

/* ---- methods ---- */

static int method_get_status(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        ControlRoom *room = userdata;
        _cleanup_free_ char *json = manager_status_json(room);
        if (!json)
                return -ENOMEM;
        return bus_reply_valid(msg, "s", json);
}

#define _cleanup_bus_message_ _cleanup_(sd_bus_message_unrefp)

/* Sends reply unless building it failed (r < 0). */
static int reply_send(sd_bus_message *reply, int r) {
        return r < 0 ? r : sd_bus_send(NULL, reply, NULL);
}

/* The targets as a(sssb): (name, profile, kind, disabled). */
static int append_targets(sd_bus_message *m, ControlRoom *room) {
        ControlTarget *list = NULL;
        size_t n = 0;
        int r;

        r = control_list_targets(room, &list, &n);
        if (r < 0)
                return r;
        r = BUS_APPEND_ARRAY(m, "(sssb)", list, n, _e->name, _e->profile, _e->kind, (int) _e->disabled);
        control_targets_free(list, n);
        return r;
}

static int property_get_targets(sd_bus *bus, const char *path, const char *interface, const char *property,
                                sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        return append_targets(reply, userdata);
}

static int method_list_targets(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_bus_message_ sd_bus_message *reply = NULL;
        int r;

        r = sd_bus_message_new_method_return(msg, &reply);
        if (r >= 0)
                r = append_targets(reply, userdata);
        return reply_send(reply, r);
}

static int method_list_sessions(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_bus_message_ sd_bus_message *reply = NULL;
        _cleanup_free_ ControlSession *list = NULL;
        size_t n = 0;
        int r;

        r = control_list_sessions(userdata, &list, &n);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_return(msg, &reply);
        if (r >= 0)
                r = BUS_APPEND_ARRAY(reply, "(ssssssssttt)", list, n, _e->id, _e->state, _e->target,
                                     _e->profile, _e->namespace, _e->pod, _e->container, _e->cgroup,
                                     _e->start_usec, _e->duration_usec, _e->samples);
        return reply_send(reply, r);
}

static int method_check(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_bus_message_ sd_bus_message *reply = NULL;
        _cleanup_(control_check_done) ControlCheck check = {};
        _cleanup_free_ char *message = NULL;
        const char *namespace, *pod, *container;
        int r;

        r = sd_bus_message_read(msg, "sss", &namespace, &pod, &container);
        if (r < 0)
                return r;
        r = control_check(userdata, namespace, pod, container, &check, &message);
        if (r < 0)
                return bus_reply_error(error, r, message);

        r = sd_bus_message_new_method_return(msg, &reply);
        if (r >= 0)
                r = bus_append_valid(reply, "bss", (int) check.targeted, check.target, check.profile);
        if (r >= 0)
                r = BUS_APPEND_ARRAY(reply, "(ss)", check.reasons, check.n_reasons, _e->target, _e->reason);
        return reply_send(reply, r);
}

static int method_check_machine_config(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_bus_message_ sd_bus_message *reply = NULL;
        _cleanup_(control_machine_check_done) ControlMachineCheck check = {};
        ControlRoom *room = userdata;
        int r;

        r = machine_room_check(room->deps.machine, &check);
        if (r < 0)
                return r;
        r = sd_bus_message_new_method_return(msg, &reply);
        if (r >= 0)
                r = bus_append_valid(reply, "sss", strempty(room->deps.node_name), check.labels,
                                     check.labels_source);
        if (r >= 0)
                r = BUS_APPEND_ARRAY(reply, "(ssssss)", check.sysctls, check.n_sysctls, _e->name,
                                     _e->desired, _e->entry, _e->selector, _e->actual, _e->state);
        return reply_send(reply, r);
}

static int method_start_session(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_free_ char *id = NULL, *message = NULL;
        const char *target, *profile;
        uint64_t duration_usec;
        int r;

        r = sd_bus_message_read(msg, "sst", &target, &profile, &duration_usec);
        if (r < 0)
                return r;
        r = control_start_session(userdata, target, profile, duration_usec, &id, &message);
        if (r < 0)
                return bus_reply_error(error, r, message);
        return bus_reply_valid(msg, "s", id);
}

/* An error reply to a call answered later (its handler returned already). */
static void bus_reply_error_later(sd_bus_message *msg, int r, const char *message) {
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;

        r = bus_reply_error(&e, r, message);
        if (!sd_bus_error_is_set(&e))
                (void) sd_bus_error_set_errno(&e, r);
        r = sd_bus_reply_method_error(msg, &e);
        if (r < 0)
                log_debug_errno(r, "Failed to send an error reply (the caller left?): %m");
}

/* Called once the session's report is written: the reply. */
static void on_session_stopped(void *userdata, const char *session_id, const char *report_dirs, int error) {
        _cleanup_bus_message_ sd_bus_message *msg = userdata;
        _cleanup_free_ char *message = NULL;
        int r;

        if (error < 0) {
                if (asprintf(&message, "Session %s stopped, but its report could not be written: %s",
                             session_id, strerror(-error)) < 0)
                        message = NULL;
                bus_reply_error_later(msg, error == -ENOMEM ? -EIO : error, message);
                return;
        }
        r = bus_reply_valid(msg, "s", strempty(report_dirs));
        if (r < 0)
                log_debug_errno(r, "Failed to reply to StopSession (the caller left?): %m");
}

static int method_stop_session(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_free_ char *message = NULL;
        const char *id;
        int r;

        r = sd_bus_message_read(msg, "s", &id);
        if (r < 0)
                return r;
        /* Answered when the report is written (on the report worker). */
        r = control_stop_session(userdata, id, on_session_stopped, sd_bus_message_ref(msg), &message);
        if (r < 0) {
                sd_bus_message_unref(msg);
                return bus_reply_error(error, r, message);
        }
        return 1;
}

static void on_all_stopped(void *userdata, char **report_dirs) {
        _cleanup_bus_message_ sd_bus_message *msg = userdata, *reply = NULL;
        _cleanup_strv_free_ char **dirs = report_dirs;
        int r;

        r = sd_bus_message_new_method_return(msg, &reply);
        if (r >= 0)
                r = bus_append_strv_valid(reply, dirs);
        if (r >= 0)
                r = sd_bus_send(NULL, reply, NULL);
        if (r < 0)
                log_debug_errno(r, "Failed to reply to StopAllSessions (the caller left?): %m");
}

static int method_stop_all_sessions(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        int r;

        r = control_stop_all_sessions(userdata, on_all_stopped, sd_bus_message_ref(msg));
        if (r < 0) {
                sd_bus_message_unref(msg);
                return r;
        }
        return 1;
}

/* ListReports reads and parses up to 10,000 summary.json files: on the
 * report worker, behind the reports being written. */
typedef struct ListReportsJob {
        WorkerJob job;
        ControlRoom *room;
        sd_bus_message *msg;
        int dir_fd; /* a copy of reportDir's */
        char *dir_path, *filter;
        uint64_t since;
        /* What it found. */
        ControlReport *list;
        size_t n;
        char *message;
        int error;
} ListReportsJob;

static void list_reports_run(WorkerJob *job) {
        ListReportsJob *j = (ListReportsJob *) job;

        j->error = control_list_reports(j->dir_fd, j->dir_path, j->filter, j->since, &j->list, &j->n,
                                        &j->message);
}

static void list_reports_done(WorkerJob *job, bool ran) {
        _cleanup_bus_message_ sd_bus_message *reply = NULL;
        ListReportsJob *j = (ListReportsJob *) job;
        ControlRoom *room = j->room;
        int r = j->error;

        room->deps.listing_end(room->deps.userdata);
        if (!ran)
                r = -ECANCELED;
        if (r < 0)
                bus_reply_error_later(j->msg, r, j->message);
        else {
                r = sd_bus_message_new_method_return(j->msg, &reply);
                if (r >= 0)
                        r = BUS_APPEND_ARRAY(reply, "(sssssstt)", j->list, j->n, _e->session, _e->report_dir,
                                             _e->namespace, _e->pod, _e->container, _e->cgroup,
                                             _e->start_usec, _e->samples);
                if (r >= 0)
                        r = sd_bus_send(NULL, reply, NULL);
                if (r < 0)
                        log_debug_errno(r, "Failed to reply to ListReports: %m");
        }
        control_reports_free(j->list, j->n);
        sd_bus_message_unref(j->msg);
        safe_close(j->dir_fd);
        free(j->dir_path);
        free(j->filter);
        free(j->message);
        free(j);
        room->deps.reports_written(room->deps.userdata);
}

/* Once the report index is loaded: answered from it, on the loop, in
 * milliseconds at any count (whole: a D-Bus reply holds 100,000 reports). */
static int list_reports_from_index(ControlRoom *room, sd_bus_message *msg, const char *filter,
                                   uint64_t since, sd_bus_error *error) {
        _cleanup_bus_message_ sd_bus_message *reply = NULL;
        _cleanup_free_ const ReportEntry **l = NULL;
        _cleanup_free_ ControlReport *list = NULL;
        _cleanup_(control_report_filter_freep) ReportFilter *f = NULL;
        _cleanup_free_ char *message = NULL;
        size_t n;
        int r;

        r = control_report_filter_new(filter, since, &f, &message);
        if (r >= 0)
                r = manager_reports_list(room->deps.sessions_room, control_report_filter_match, f, NULL, 0,
                                         &l, &n, NULL);
        if (r < 0)
                return bus_reply_error(error, r, message);
        list = calloc(MAX(n, 1U), sizeof(ControlReport));
        if (!list)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                list[i] = l[i]->report; /* borrowed strings */
        r = sd_bus_message_new_method_return(msg, &reply);
        if (r >= 0)
                r = BUS_APPEND_ARRAY(reply, "(sssssstt)", list, n, _e->session, _e->report_dir,
                                     _e->namespace, _e->pod, _e->container, _e->cgroup, _e->start_usec,
                                     _e->samples);
        if (r < 0)
                return r;
        return sd_bus_send(NULL, reply, NULL);
}

static int method_list_reports(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        ControlRoom *room = userdata;
        ListReportsJob *j;
        const char *filter, *report_dir;
        int report_dir_fd;
        uint64_t since;
        int r;

        r = sd_bus_message_read(msg, "st", &filter, &since);
        if (r < 0)
                return r;
        if (manager_reports_ready(room->deps.sessions_room))
                return list_reports_from_index(room, msg, filter, since, error);
        if (!room->deps.listing_begin(room->deps.userdata))
                return sd_bus_error_setf(error, CGPROF_ERROR_FAILED,
                                         "%u report listings are being read already; try again later.",
                                         LIST_REPORTS_MAX_PENDING);
        j = calloc(1, sizeof(*j));
        if (!j) {
                room->deps.listing_end(room->deps.userdata);
                return -ENOMEM;
        }
        report_dir = room->deps.report_dir(room->deps.userdata, &report_dir_fd);
        j->room = room;
        j->since = since;
        /* No report directory: the listing says it could not open it. */
        j->dir_fd = report_dir_fd < 0 ? -EBADF : fcntl(report_dir_fd, F_DUPFD_CLOEXEC, 3);
        j->dir_path = strdup(report_dir);
        j->filter = strdup(filter);
        if ((report_dir_fd >= 0 && j->dir_fd < 0) || !j->dir_path || !j->filter) {
                r = j->dir_fd < 0 && report_dir_fd >= 0 ? negative_errno() : -ENOMEM;
                safe_close(j->dir_fd);
                free(j->dir_path);
                free(j->filter);
                free(j);
                room->deps.listing_end(room->deps.userdata);
                return r;
        }
        j->msg = sd_bus_message_ref(msg);
        worker_submit(sessions_room_worker(room->deps.sessions_room), &j->job, list_reports_run,
                      list_reports_done);
        return 1;
}

static int method_reload(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_free_ char *message = NULL;
        ControlRoom *room = userdata;
        int r;

        r = room->deps.reload(room->deps.userdata, &message);
        if (r < 0)
                return bus_error_set_valid(error, CGPROF_ERROR_FAILED, message ?: strerror(-r));
        return sd_bus_reply_method_return(msg, NULL);
}

static const sd_bus_vtable agent_vtable[] = {
        SD_BUS_VTABLE_START(0),

        SD_BUS_PROPERTY("Version", "s", property_get_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Node", "s", property_get_node, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("UptimeUSec", "t", property_get_uptime, 0, 0),
        SD_BUS_PROPERTY("ActiveSessions", "u", property_get_active_sessions, 0, 0),
        SD_BUS_PROPERTY("ConfigPath", "s", property_get_config_path, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("LastConfigLoad", "s", property_get_last_config_load, 0, 0),
        SD_BUS_PROPERTY("MachineConfig", "a(sss)", property_get_machine_config, 0, 0),
        SD_BUS_PROPERTY("Targets", "a(sssb)", property_get_targets, 0, 0),

        SD_BUS_METHOD_WITH_ARGS("GetStatus", SD_BUS_NO_ARGS, SD_BUS_RESULT("s", status_json),
                                method_get_status, 0),
        SD_BUS_METHOD_WITH_ARGS("ListTargets", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(sssb)", targets),
                                method_list_targets, 0),
        SD_BUS_METHOD_WITH_ARGS("ListSessions", SD_BUS_NO_ARGS, SD_BUS_RESULT("a(ssssssssttt)", sessions),
                                method_list_sessions, 0),
        SD_BUS_METHOD_WITH_ARGS("Check", SD_BUS_ARGS("s", namespace, "s", pod, "s", container),
                                SD_BUS_RESULT("b", targeted, "s", target, "s", profile, "a(ss)", reasons),
                                method_check, 0),
        SD_BUS_METHOD_WITH_ARGS(
                "CheckMachineConfig", SD_BUS_NO_ARGS,
                SD_BUS_RESULT("s", node, "s", labels, "s", labels_source, "a(ssssss)", sysctls),
                method_check_machine_config, 0),
        SD_BUS_METHOD_WITH_ARGS("StartSession", SD_BUS_ARGS("s", target, "s", profile, "t", duration_usec),
                                SD_BUS_RESULT("s", session_id), method_start_session, 0),
        SD_BUS_METHOD_WITH_ARGS("StopSession", SD_BUS_ARGS("s", id), SD_BUS_RESULT("s", report_dir),
                                method_stop_session, 0),
        SD_BUS_METHOD_WITH_ARGS("StopAllSessions", SD_BUS_NO_ARGS, SD_BUS_RESULT("as", report_dirs),
                                method_stop_all_sessions, 0),
        SD_BUS_METHOD_WITH_ARGS("ListReports", SD_BUS_ARGS("s", filter, "t", since_usec),
                                SD_BUS_RESULT("a(sssssstt)", reports), method_list_reports, 0),
        SD_BUS_METHOD_WITH_ARGS("Reload", SD_BUS_NO_ARGS, SD_BUS_NO_RESULT, method_reload, 0),

        SD_BUS_SIGNAL_WITH_ARGS("SessionStarted",
                                SD_BUS_ARGS("s", id, "s", target, "s", profile, "s", namespace, "s", pod,
                                            "s", container, "s", cgroup),
                                0),
        SD_BUS_SIGNAL_WITH_ARGS("SessionEnded",
                                SD_BUS_ARGS("s", id, "s", reason, "s", report_dir, "t", samples), 0),

        SD_BUS_VTABLE_END,
};

/* ---- signals ---- */

static void emit_one(sd_bus *bus, const char *member, const char *types, va_list ap) {
        int r = bus_emit_signal_validv(bus, CGPROF_BUS_PATH, CGPROF_BUS_INTERFACE, member, types, ap);
        if (r < 0)
                log_debug_errno(r, "Failed to emit %s, ignoring: %m", member);
}

/* On every private connection and on the system bus. */
static void emit_all(ControlRoom *room, const char *member, const char *types, ...) {
        va_list ap, aq;

        va_start(ap, types);
        for (size_t i = 0; i < room->n_bus_clients; i++) {
                va_copy(aq, ap);
                emit_one(room->bus_clients[i], member, types, aq);
                va_end(aq);
        }
        if (room->system_bus && room->system_bus_named) {
                va_copy(aq, ap);
                emit_one(room->system_bus, member, types, aq);
                va_end(aq);
        }
        va_end(ap);
}

void manager_bus_session_started(ControlRoom *room, Session *s) {
        emit_all(room, "SessionStarted", "sssssss", s->id_string, s->target->name, s->profile->name,
                 strempty(s->namespace), strempty(s->pod), strempty(s->container), s->cgroup);
}

void manager_bus_session_ended(ControlRoom *room, const char *id, const char *reason, const char *report_dir,
                               uint64_t samples) {
        emit_all(room, "SessionEnded", "ssst", id, strempty(reason), strempty(report_dir), samples);
}

/* ---- the private socket ---- */

/* Bus clients (busctl --address=unix:path=..., sd-bus with bus_client set)
 * greet the bus daemon first and register their matches with it: on this
 * peer-to-peer socket the agent answers for it. Every signal reaches every
 * connection anyway. */
static int method_hello(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        static uint64_t n = 0;
        char name[32];

        snprintf(name, sizeof(name), ":1.%" PRIu64, ++n);
        return sd_bus_reply_method_return(msg, "s", name);
}

static int method_match_noop(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return sd_bus_reply_method_return(msg, NULL);
}

static const sd_bus_vtable bus_daemon_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("Hello", NULL, "s", method_hello, 0),
        SD_BUS_METHOD("AddMatch", "s", NULL, method_match_noop, 0),
        SD_BUS_METHOD("RemoveMatch", "s", NULL, method_match_noop, 0),
        SD_BUS_VTABLE_END,
};

static void client_drop(ControlRoom *room, sd_bus *bus) {
        for (size_t i = 0; i < room->n_bus_clients; i++)
                if (room->bus_clients[i] == bus) {
                        room->bus_clients[i] = room->bus_clients[--room->n_bus_clients];
                        break;
                }
        /* Safe from the bus's own callbacks: sd-bus holds a reference while dispatching. */
        sd_bus_detach_event(bus);
        sd_bus_close(bus);
        sd_bus_unref(bus);
}

/* sd-bus (v252 at least) does not look at its buffer again when a client's
 * first message arrives in the same read as the BEGIN that ends the
 * authentication: nothing on the socket wakes it up any more, and a client
 * that sends both at once (GLib's gdbus often does) waits forever. After
 * every event loop iteration, each connection processes what it has read
 * already (cheap: a read that fails with EAGAIN when there is nothing). */
static int on_bus_post(sd_event_source *source, void *userdata) {
        ControlRoom *room = userdata;

        for (size_t i = room->n_bus_clients; i > 0; i--) {
                if (i > room->n_bus_clients) /* a connection was dropped meanwhile */
                        continue;
                sd_bus *bus = sd_bus_ref(room->bus_clients[i - 1]);
                for (unsigned k = 0; k < 64; k++)
                        if (sd_bus_process(bus, NULL) <= 0)
                                break;
                sd_bus_unref(bus);
        }
        return 0;
}

static int on_client_disconnected(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        ControlRoom *room = userdata;
        log_debug("Control client disconnected.");
        client_drop(room, sd_bus_message_get_bus(msg));
        return 0;
}

#define ACCEPT_RETRY_MIN_USEC (100 * USEC_PER_MSEC)
#define ACCEPT_RETRY_MAX_USEC (5 * USEC_PER_SEC)

static int on_accept_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        ControlRoom *room = userdata;
        int r;

        log_debug("Accepting control connections again.");
        r = sd_event_source_set_enabled(room->bus_accept, SD_EVENT_ON);
        if (r < 0) {
                log_error_errno(r, "Failed to enable the control socket again, stopping the agent: %m");
                room->deps.fatal(room->deps.userdata, r);
        }
        return 0;
}

/* Out of file descriptors or memory: accept() would fail again at once, and
 * the listening socket stays readable, so the loop would spin. Stop
 * accepting for a while (100 ms, doubling up to 5 s while it lasts); the
 * connections wait in the backlog. */
static void accept_pause(ControlRoom *room, int error) {
        uint64_t now = 0;
        int r;

        room->bus_accept_backoff_usec =
                room->bus_accept_backoff_usec == 0
                        ? ACCEPT_RETRY_MIN_USEC
                        : MIN(room->bus_accept_backoff_usec * 2, ACCEPT_RETRY_MAX_USEC);
        (void) sd_event_now(room->deps.event, CLOCK_MONOTONIC, &now);
        log_full_errno(log_ratelimit_level(&room->bus_accept_log, now, LOG_WARNING), error,
                       "Failed to accept a control connection, trying again in %" PRIu64 " ms: %m",
                       room->bus_accept_backoff_usec / USEC_PER_MSEC);

        r = sd_event_source_set_enabled(room->bus_accept, SD_EVENT_OFF);
        if (r >= 0)
                r = sd_event_source_set_time_relative(room->bus_accept_retry, room->bus_accept_backoff_usec);
        if (r >= 0)
                r = sd_event_source_set_enabled(room->bus_accept_retry, SD_EVENT_ONESHOT);
        if (r < 0) {
                log_error_errno(r, "Failed to pause the control socket, stopping the agent: %m");
                room->deps.fatal(room->deps.userdata, r);
        }
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        ControlRoom *room = userdata;
        _cleanup_close_ int nfd = -EBADF;
        sd_bus *bus = NULL;
        struct ucred cred = {};
        socklen_t len = sizeof(cred);
        sd_id128_t id;
        int r;

        /* Every error is handled here and 0 returned: sd-event would disable
         * the source for good, and the control API with it. */
        nfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (nfd < 0) {
                switch (errno) {
                case EAGAIN:
                case EINTR:
                        return 0;
                case ECONNABORTED: /* the client went away first */
                        log_debug_errno(errno, "Failed to accept a control connection, ignoring: %m");
                        return 0;
                case EBADF:
                case EINVAL:
                case ENOTSOCK:
                case EOPNOTSUPP:
                        /* The listening socket itself is broken: no control API any more. */
                        r = log_error_errno(errno,
                                            "Failed to accept control connections on %s, stopping the "
                                            "agent: %m",
                                            room->deps.bus_socket);
                        room->deps.fatal(room->deps.userdata, r);
                        return 0;
                default: /* EMFILE, ENFILE, ENOBUFS, ENOMEM, ... */
                        accept_pause(room, errno);
                        return 0;
                }
        }
        room->bus_accept_backoff_usec = 0;
        if (getsockopt(nfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
                log_warning_errno(errno,
                                  "Failed to get the credentials of a control client, refusing it: %m");
                return 0;
        }
        if (cred.uid != 0) {
                log_notice("Refusing bus connection from UID %d: only root may control cgprofd.",
                           (int) cred.uid);
                return 0;
        }

        sd_bus **n = reallocarray(room->bus_clients, room->n_bus_clients + 1, sizeof(sd_bus *));
        if (!n) {
                log_oom();
                return 0;
        }
        room->bus_clients = n;

        r = sd_bus_new(&bus);
        if (r < 0) {
                log_warning_errno(r, "Failed to allocate a bus connection, ignoring: %m");
                return 0;
        }
        (void) sd_id128_randomize(&id);
        r = sd_bus_set_fd(bus, nfd, nfd);
        if (r >= 0)
                TAKE_FD(nfd); /* the bus closes it from now on */
        /* Trusted: the peer is root (checked above), no per-method privilege check. */
        if (r < 0 || (r = sd_bus_set_server(bus, 1, id)) < 0 || (r = sd_bus_set_anonymous(bus, 1)) < 0 ||
            (r = sd_bus_set_trusted(bus, 1)) < 0 ||
            (r = sd_bus_add_object_vtable(bus, NULL, CGPROF_BUS_PATH, CGPROF_BUS_INTERFACE, agent_vtable,
                                          room)) < 0 ||
            (r = sd_bus_add_object_vtable(bus, NULL, "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                          bus_daemon_vtable, room)) < 0 ||
            (r = sd_bus_match_signal(bus, NULL, NULL, "/org/freedesktop/DBus/Local",
                                     "org.freedesktop.DBus.Local", "Disconnected", on_client_disconnected,
                                     room)) < 0 ||
            (r = sd_bus_start(bus)) < 0 ||
            (r = sd_bus_attach_event(bus, room->deps.event, SD_EVENT_PRIORITY_NORMAL)) < 0) {
                sd_bus_close(bus);
                sd_bus_unref(bus);
                log_warning_errno(r, "Failed to set up a bus connection, ignoring: %m");
                return 0;
        }
        room->bus_clients[room->n_bus_clients++] = bus;
        return 0;
}

int manager_bus_listen(ControlRoom *room) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *dir = NULL;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int r;

        if (strlen(room->deps.bus_socket) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, room->deps.bus_socket);

        dir = strdup(room->deps.bus_socket);
        if (!dir)
                return -ENOMEM;
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
                *slash = 0;
                r = mkdir_p(dir, 0755);
                if (r < 0)
                        return r;
        }

        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return negative_errno();
        (void) unlink(room->deps.bus_socket);
        mode_t old = umask(0077);
        r = bind(fd, (struct sockaddr *) &sa, sizeof(sa));
        umask(old);
        if (r < 0)
                return negative_errno();
        if (listen(fd, SOMAXCONN) < 0)
                return negative_errno();

        r = sd_event_add_io(room->deps.event, &room->bus_accept, fd, EPOLLIN, on_accept, room);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(room->bus_accept, "bus-accept");
        /* Made now, not when it is needed: then file descriptors or memory may be short. */
        r = sd_event_add_time_relative(room->deps.event, &room->bus_accept_retry, CLOCK_MONOTONIC,
                                       ACCEPT_RETRY_MIN_USEC, 10 * USEC_PER_MSEC, on_accept_retry, room);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(room->bus_accept_retry, SD_EVENT_OFF);
        (void) sd_event_source_set_description(room->bus_accept_retry, "bus-accept-retry");
        room->bus_accept_log.interval_usec = 10 * USEC_PER_SEC;
        r = sd_event_add_post(room->deps.event, &room->bus_post, on_bus_post, room);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(room->bus_post, "bus-post");
        room->bus_listen_fd = TAKE_FD(fd);
        log_debug("Listening for cgprofctl on %s.", room->deps.bus_socket);
        return 0;
}

/* ---- the system bus ---- */

static void system_bus_drop(ControlRoom *room) {
        if (!room->system_bus)
                return;
        sd_bus_detach_event(room->system_bus);
        sd_bus_flush_close_unref(room->system_bus);
        room->system_bus = NULL;
        room->system_bus_named = false;
}

static int on_system_bus_disconnected(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        ControlRoom *room = userdata;
        log_warning("Disconnected from the system bus: %s is no longer served there.", CGPROF_BUS_NAME);
        system_bus_drop(room);
        return 0;
}

static int on_name_acquired(sd_bus_message *reply, void *userdata, sd_bus_error *error) {
        const sd_bus_error *e = sd_bus_message_get_error(reply);
        ControlRoom *room = userdata;

        if (e) {
                /* Not ours (no policy installed, or another agent has it): leave the system bus. */
                log_warning("Failed to acquire %s on the system bus, serving the private socket only: %s",
                            CGPROF_BUS_NAME, e->message ?: e->name);
                system_bus_drop(room);
                return 0;
        }
        /* RequestName's answer: 1 primary owner, 2 queued, 3 exists, 4 already the owner. */
        uint32_t ret = 0;
        if (sd_bus_message_read(reply, "u", &ret) < 0 || (ret != 1 && ret != 4)) {
                log_warning("Failed to acquire %s on the system bus (another process owns it), serving the "
                            "private socket only.",
                            CGPROF_BUS_NAME);
                system_bus_drop(room);
                return 0;
        }
        room->system_bus_named = true;
        log_info("Serving %s on the system bus.", CGPROF_BUS_NAME);
        return 0;
}

int manager_bus_connect_system(ControlRoom *room) {
        sd_bus *bus = NULL;
        int r;

        if (!getenv("DBUS_SYSTEM_BUS_ADDRESS") && access(SYSTEM_BUS_SOCKET, F_OK) < 0) {
                log_debug("No system bus (%s): serving the private socket only.", SYSTEM_BUS_SOCKET);
                return 0;
        }

        r = sd_bus_open_system(&bus);
        if (r < 0)
                return log_warning_errno(r, "Failed to connect to the system bus, ignoring: %m");
        if ((r = sd_bus_add_object_vtable(bus, NULL, CGPROF_BUS_PATH, CGPROF_BUS_INTERFACE, agent_vtable,
                                          room)) < 0 ||
            (r = sd_bus_match_signal(bus, NULL, NULL, "/org/freedesktop/DBus/Local",
                                     "org.freedesktop.DBus.Local", "Disconnected",
                                     on_system_bus_disconnected, room)) < 0 ||
            (r = sd_bus_request_name_async(bus, NULL, CGPROF_BUS_NAME, 0, on_name_acquired, room)) < 0 ||
            (r = sd_bus_attach_event(bus, room->deps.event, SD_EVENT_PRIORITY_NORMAL)) < 0) {
                sd_bus_flush_close_unref(bus);
                return log_warning_errno(r, "Failed to set up %s on the system bus, ignoring: %m",
                                         CGPROF_BUS_NAME);
        }
        room->system_bus = bus;
        return 0;
}

void manager_bus_close(ControlRoom *room) {
        if (!room) /* manager_new() failed before making it */
                return;
        while (room->n_bus_clients > 0)
                client_drop(room, room->bus_clients[room->n_bus_clients - 1]);
        free(room->bus_clients);
        room->bus_clients = NULL;
        system_bus_drop(room);
        room->bus_accept = sd_event_source_disable_unref(room->bus_accept);
        room->bus_accept_retry = sd_event_source_disable_unref(room->bus_accept_retry);
        room->bus_post = sd_event_source_disable_unref(room->bus_post);
        if (room->bus_listen_fd >= 0) {
                (void) unlink(room->deps.bus_socket);
                room->bus_listen_fd = safe_close(room->bus_listen_fd);
        }
}
