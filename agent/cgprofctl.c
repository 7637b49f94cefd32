/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cgprofctl: the control CLI of cgprofd, a client of the D-Bus API in
 * bus-api.h over the agent's private socket (or the system bus).
 *
 * Every command returns an exit status, having logged what went wrong:
 * 0 ok, 1 failure, 2 usage (or an argument the agent refused), 3 not found. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>
#include <systemd/sd-id128.h>

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "bus-api.h"
#include "cgprof-version.h"
#include "cgroup-util.h"
#include "config.h"
#include "duration.h"
#include "fileio.h"
#include "log.h"
#include "report.h"

#define DEFAULT_BUS_SOCKET "/run/cgprof/bus"
#define EXIT_USAGE 2
#define EXIT_NOT_FOUND 3

/* StartSession's duration 0 means "the profile's duration", so "until
 * stopped" is asked for as a duration longer than any session: 100 years. The
 * agent never reaches it; it shows as "until stopped" here. */
#define SESSION_UNTIL_STOPPED_USEC (100ULL * 365 * 24 * 3600 * USEC_PER_SEC)

/* record: the transient cgroups, below the cgroup v2 root. */
#define RECORD_SLICE "cgprof-record.slice"
/* Tries to make a record's cgroup while other records remove the slice. */
#define RECORD_SLICE_ATTEMPTS 8U
/* record: how long to retry StartSession while the agent has not yet seen
 * the cgroup we just created (its inotify event may still be queued). */
#define RECORD_START_RETRY_USEC (5 * USEC_PER_SEC)
#define RECORD_START_RETRY_STEP_USEC (20 * USEC_PER_MSEC)
#define RECORD_TOP_FUNCTIONS 10

/* Options that only some commands take. */
typedef enum Option {
        OPT_POD = 1u << 0,
        OPT_CONTAINER = 1u << 1,
        OPT_CGROUP = 1u << 2,
        OPT_PROFILE = 1u << 3,
        OPT_DURATION = 1u << 4,
        OPT_ALL = 1u << 5,
        OPT_SINCE = 1u << 6,
        OPT_FILTER = 1u << 7,
        OPT_FREQUENCY = 1u << 8,
        OPT_FORMAT = 1u << 9,
} Option;

static const char *const option_names[] = {
        "--pod", "--container", "--cgroup", "--profile",   "--duration",
        "--all", "--since",     "--filter", "--frequency", "--format",
};

static const char *arg_bus_socket = NULL; /* NULL: DEFAULT_BUS_SOCKET */
static bool arg_system = false;
static bool arg_json = false;
static unsigned arg_options = 0; /* the Options given */
static unsigned arg_formats = 0;
static const char *arg_pod = NULL;
static const char *arg_container = NULL;
static const char *arg_cgroup = NULL;
static const char *arg_profile = NULL;
static uint64_t arg_duration_usec = 0;
static bool arg_all = false;
static uint64_t arg_since_usec = 0;
static const char *arg_filter = NULL;
static uint64_t arg_frequency = 0;
/* Set by the verbs' verify step, before connecting. */
static char *arg_target = NULL; /* start: "pod:NS/POD[/C]" or "cgroup:PATH" */
static char *arg_namespace = NULL, *arg_pod_name = NULL, *arg_container_name = NULL; /* check */

static void help(void) {
        printf("%1$s [OPTIONS...] COMMAND [ARGS...]\n\n"
               "Controls cgprofd, the cgprof agent of this node.\n\n"
               "Commands:\n"
               "  status                     Show the agent's state\n"
               "  targets                    List the configured targets\n"
               "  sessions                   List the running and armed sessions, with their\n"
               "                             elapsed and remaining time and samples so far\n"
               "  check NS/POD[/CONTAINER]   Say whether a pod is targeted and by which target\n"
               "                             and profile, or which condition of each target\n"
               "                             failed (exit 0 either way, 3 if no such pod)\n"
               "  start --pod NS/POD [--container C] | --cgroup PATH\n"
               "        [--profile P] [--duration D]\n"
               "                             Start a session of a container or cgroup, targeted\n"
               "                             or not (an armed one starts); default profile: the\n"
               "                             target's, else the default; --duration 0: until\n"
               "                             stopped (default: the profile's duration)\n"
               "  stop ID|--all              End a session (an unambiguous ID prefix will do),\n"
               "                             or all; each writes its report now\n"
               "  reports [--since T] [--filter F]\n"
               "                             List reports, newest first; T: a duration ago (1h)\n"
               "                             or a UNIX time in seconds; F: NAMESPACE,\n"
               "                             NAMESPACE/POD or cgroup:PATH\n"
               "  record [--profile P] [--frequency F] [--duration D] -- COMMAND [ARGS...]\n"
               "                             Run COMMAND in a new cgroup (under %2$s/),\n"
               "                             profile it until it exits (or for D), then print\n"
               "                             the report directory and the top functions.\n"
               "                             --frequency picks a profile of the agent's config\n"
               "                             with that frequency (there is no ad-hoc one).\n"
               "                             Exits 0 once the report is written, whatever\n"
               "                             COMMAND's own exit status (which is printed);\n"
               "                             COMMAND's output comes first (--json: the JSON\n"
               "                             is the last line). SIGINT/SIGTERM/SIGHUP sent\n"
               "                             to cgprofctl are passed on to COMMAND\n"
               "  report DIR [--format F]    Re-render a report directory in other formats\n"
               "                             (from its profile.pb.gz, else profile.folded)\n\n"
               "Options:\n"
               "  -h --help                  Show this help\n"
               "     --version               Show the version\n"
               "     --bus-socket PATH       The agent's control socket (default: %3$s)\n"
               "     --system                Talk to %4$s on the system bus instead\n"
               "     --json                  Print JSON (camelCase keys, as the D-Bus results)\n"
               "     --format FORMAT         With report: folded, json, pprof, svg, speedscope\n"
               "                             (repeatable or comma-separated; default: all)\n\n"
               "Only root may control cgprofd. Exit status: 0 ok, 1 failure, 2 usage or an\n"
               "argument the agent refused (e.g. an unknown profile), 3 not found (pod,\n"
               "container, cgroup, session or report directory).\n",
               program_invocation_short_name, RECORD_SLICE, DEFAULT_BUS_SOCKET, CGPROF_BUS_NAME);
}

/* ------------------------------------------------------------------------ */
/* Small helpers */

typedef struct Verb {
        const char *name;
        unsigned min_args, max_args;
        unsigned options; /* the Options it takes */
        bool bus;
        int (*verify)(char **args); /* checks the arguments before connecting */
        int (*run)(sd_bus *bus, char **args);
        const char *usage;
} Verb;

static const Verb *find_verb(const char *name);

static int usage_error(const Verb *v, const char *fmt, ...) _printf_(2, 3);
static int usage_error(const Verb *v, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&msg, fmt, ap) < 0)
                msg = NULL;
        va_end(ap);
        log_error("%s", strna(msg));
        if (v)
                log_error("Usage: %s %s", program_invocation_short_name, v->usage);
        else
                log_error("See %s --help.", program_invocation_short_name);
        return EXIT_USAGE;
}

static uint64_t now_realtime_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / 1000;
}

static bool duration_unlimited(uint64_t usec) {
        return usec == 0 || usec >= SESSION_UNTIL_STOPPED_USEC;
}

/* "12.3s" below a minute, else whole seconds as "1h2m3s". */
static const char *format_timespan(uint64_t usec, char *buf, size_t size) {
        if (usec < 60 * USEC_PER_SEC)
                snprintf(buf, size, "%.1fs", (double) usec / USEC_PER_SEC);
        else
                format_duration((usec + USEC_PER_SEC / 2) / USEC_PER_SEC * USEC_PER_SEC, buf, size);
        return buf;
}
#define TIMESPAN_MAX 32

/* "2026-11-21 20:45:21" in local time. */
static const char *format_timestamp(uint64_t usec, char *buf, size_t size) {
        time_t t = (time_t) (usec / USEC_PER_SEC);
        struct tm tm;

        if (usec == 0 || !localtime_r(&t, &tm) || strftime(buf, size, "%Y-%m-%d %H:%M:%S", &tm) == 0)
                snprintf(buf, size, "-");
        return buf;
}
#define TIMESTAMP_MAX 32

static int permission_denied(void) {
        log_error("permission denied: only root may control cgprofd.");
        return EXIT_FAILURE;
}

static bool is_disconnect(int r) {
        return r == -ECONNRESET || r == -ENOTCONN || r == -EPIPE || r == -ESHUTDOWN || r == -ECONNABORTED;
}

static bool isempty_str(const char *s) {
        return !s || !*s;
}

/* The exit status for a failed method call, having logged it with 'what'
 * ("Failed to stop session X") as context. */
static int call_failed(const char *what, const sd_bus_error *error, int r) {
        const char *msg = sd_bus_error_is_set(error) ? error->message : NULL;

        if (sd_bus_error_has_name(error, CGPROF_ERROR_NOT_FOUND)) {
                log_error("%s: %s", what, msg ?: "not found");
                return EXIT_NOT_FOUND;
        }
        if (sd_bus_error_has_name(error, CGPROF_ERROR_INVALID_ARGUMENT)) {
                log_error("%s: %s", what, msg ?: "invalid argument");
                return EXIT_USAGE;
        }
        if (sd_bus_error_has_name(error, SD_BUS_ERROR_ACCESS_DENIED) || r == -EACCES || r == -EPERM)
                return permission_denied();
        if (sd_bus_error_has_name(error, SD_BUS_ERROR_SERVICE_UNKNOWN) ||
            sd_bus_error_has_name(error, SD_BUS_ERROR_NAME_HAS_NO_OWNER)) {
                log_error("%s: cgprofd is not on the system bus (%s).", what, strna(msg));
                return EXIT_FAILURE;
        }
        if (sd_bus_error_has_name(error, SD_BUS_ERROR_UNKNOWN_METHOD)) {
                log_error("%s: this cgprofd does not support it (%s).", what, msg ?: "unknown method");
                return EXIT_FAILURE;
        }
        /* The agent hangs up on a client that is not root. */
        if (is_disconnect(r) && geteuid() != 0)
                return permission_denied();
        if (is_disconnect(r)) {
                log_error("%s: the agent closed the connection.", what);
                return EXIT_FAILURE;
        }
        if (msg)
                log_error("%s: %s", what, msg);
        else
                log_error_errno(r, "%s: %m", what);
        return EXIT_FAILURE;
}

static int print_json(cJSON *j) {
        _cleanup_free_ char *s = NULL;

        if (!j)
                return log_oom(), EXIT_FAILURE;
        s = cJSON_PrintUnformatted(j);
        cJSON_Delete(j);
        if (!s)
                return log_oom(), EXIT_FAILURE;
        printf("%s\n", s);
        return EXIT_SUCCESS;
}

/* A table printed with aligned columns; the last column is not padded. */
typedef struct Table {
        size_t n_columns;
        char **cells; /* row-major, the header first */
        size_t n_cells;
} Table;

static void table_done(Table *t) {
        for (size_t i = 0; i < t->n_cells; i++)
                free(t->cells[i]);
        free(t->cells);
}

static int table_add(Table *t, const char *s) {
        char **n = reallocarray(t->cells, t->n_cells + 1, sizeof(char *));
        if (!n)
                return -ENOMEM;
        t->cells = n;
        t->cells[t->n_cells] = strdup(s && *s ? s : "-");
        if (!t->cells[t->n_cells])
                return -ENOMEM;
        t->n_cells++;
        return 0;
}

static int table_addf(Table *t, const char *fmt, ...) _printf_(2, 3);
static int table_addf(Table *t, const char *fmt, ...) {
        _cleanup_free_ char *s = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        return table_add(t, s);
}

static void table_print(const Table *t) {
        size_t widths[16] = {};

        for (size_t i = 0; i < t->n_cells; i++)
                widths[i % t->n_columns] = MAX(widths[i % t->n_columns], strlen(t->cells[i]));
        for (size_t i = 0; i < t->n_cells; i++) {
                size_t c = i % t->n_columns;
                if (c + 1 == t->n_columns)
                        printf("%s\n", t->cells[i]);
                else
                        printf("%-*s  ", (int) widths[c], t->cells[i]);
        }
}

/* ------------------------------------------------------------------------ */
/* The connection */

static const char *destination(void) {
        return arg_system ? CGPROF_BUS_NAME : NULL;
}

static int callv(sd_bus *bus, uint64_t timeout_usec, const char *method, sd_bus_error *error,
                 sd_bus_message **reply, const char *types, va_list ap) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, destination(), CGPROF_BUS_PATH, CGPROF_BUS_INTERFACE,
                                           method);
        if (r < 0)
                return r;
        r = sd_bus_message_appendv(m, types, ap);
        if (r < 0)
                return r;
        return sd_bus_call(bus, m, timeout_usec, error, reply);
}

/* A method call with sd-bus's default timeout (25 s). */
static int call(sd_bus *bus, const char *method, sd_bus_error *error, sd_bus_message **reply,
                const char *types, ...) {
        va_list ap;
        int r;

        va_start(ap, types);
        r = callv(bus, 0, method, error, reply, types, ap);
        va_end(ap);
        return r;
}

/* Stopping writes the reports before the answer: symbolizing a large
 * session takes its time. */
#define STOP_TIMEOUT_USEC (5 * 60 * USEC_PER_SEC)
static int call_stop(sd_bus *bus, const char *method, sd_bus_error *error, sd_bus_message **reply,
                     const char *types, ...) {
        va_list ap;
        int r;

        va_start(ap, types);
        r = callv(bus, STOP_TIMEOUT_USEC, method, error, reply, types, ap);
        va_end(ap);
        return r;
}

/* Returns 0 or an exit status. */
static int connect_agent(sd_bus **ret) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_free_ char *address = NULL;
        const char *path = arg_bus_socket ?: DEFAULT_BUS_SOCKET;
        int r;

        if (arg_system) {
                r = sd_bus_open_system(&bus);
                if (r < 0)
                        return log_error_errno(r, "Failed to connect to the system bus: %m"), EXIT_FAILURE;
                *ret = TAKE_PTR(bus);
                return 0;
        }

        /* Fail early with a clear message rather than a late ECONNREFUSED. */
        if (access(path, F_OK) < 0) {
                if (errno == EACCES)
                        return permission_denied();
                log_error_errno(errno, "Failed to connect to cgprofd at %s: %m (is cgprofd running?)", path);
                return EXIT_FAILURE;
        }
        if (asprintf(&address, "unix:path=%s", path) < 0)
                return log_oom(), EXIT_FAILURE;
        r = sd_bus_new(&bus);
        if (r < 0)
                return log_error_errno(r, "Failed to allocate a bus: %m"), EXIT_FAILURE;
        r = sd_bus_set_address(bus, address);
        if (r >= 0)
                r = sd_bus_start(bus);
        /* The agent hangs up on a client that is not root. */
        if (r == -EACCES || r == -EPERM || (is_disconnect(r) && geteuid() != 0))
                return permission_denied();
        if (r < 0)
                return log_error_errno(r, "Failed to connect to cgprofd at %s: %m", path), EXIT_FAILURE;
        *ret = TAKE_PTR(bus);
        return 0;
}

/* ------------------------------------------------------------------------ */
/* ListSessions */

typedef struct SessionInfo {
        const char *id, *state, *target, *profile, *namespace, *pod, *container, *cgroup;
        uint64_t start_usec, duration_usec, samples;
} SessionInfo;

typedef struct SessionList {
        sd_bus_message *reply; /* owns the strings */
        SessionInfo *items;
        size_t n;
} SessionList;

static void session_list_done(SessionList *l) {
        free(l->items);
        sd_bus_message_unref(l->reply);
}

/* Returns 0 or an exit status. */
static int list_sessions(sd_bus *bus, SessionList *ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        SessionList l = {};
        int r;

        r = call(bus, "ListSessions", &error, &l.reply, "");
        if (r < 0)
                return call_failed("Failed to list sessions", &error, r);
        r = sd_bus_message_enter_container(l.reply, 'a', "(ssssssssttt)");
        while (r >= 0) {
                SessionInfo s;
                r = sd_bus_message_read(l.reply, "(ssssssssttt)", &s.id, &s.state, &s.target, &s.profile,
                                        &s.namespace, &s.pod, &s.container, &s.cgroup, &s.start_usec,
                                        &s.duration_usec, &s.samples);
                if (r <= 0)
                        break;
                SessionInfo *n = reallocarray(l.items, l.n + 1, sizeof(SessionInfo));
                if (!n) {
                        r = -ENOMEM;
                        break;
                }
                l.items = n;
                l.items[l.n++] = s;
        }
        if (r < 0) {
                session_list_done(&l);
                return log_error_errno(r, "Failed to parse the sessions: %m"), EXIT_FAILURE;
        }
        *ret = l;
        return 0;
}

static const SessionInfo *session_list_find(const SessionList *l, const char *id) {
        for (size_t i = 0; i < l->n; i++)
                if (streq(l->items[i].id, id))
                        return l->items + i;
        return NULL;
}

/* What a session samples: "ns/pod/container" or the cgroup path. */
static char *session_what(const SessionInfo *s) {
        char *p;

        if (isempty_str(s->pod))
                return strdup(isempty_str(s->cgroup) ? "/" : s->cgroup);
        if (asprintf(&p, "%s/%s%s%s", s->namespace, s->pod, isempty_str(s->container) ? "" : "/",
                     strempty(s->container)) < 0)
                return NULL;
        return p;
}

static uint64_t session_elapsed(const SessionInfo *s, uint64_t now) {
        return s->start_usec > 0 && now > s->start_usec ? now - s->start_usec : 0;
}

/* Remaining time, or UINT64_MAX when it runs until stopped or is armed. */
static uint64_t session_remaining(const SessionInfo *s, uint64_t now) {
        if (s->start_usec == 0 || duration_unlimited(s->duration_usec))
                return UINT64_MAX;
        uint64_t elapsed = session_elapsed(s, now);
        return elapsed >= s->duration_usec ? 0 : s->duration_usec - elapsed;
}

static cJSON *session_to_json(const SessionInfo *s, uint64_t now) {
        cJSON *o = cJSON_CreateObject();
        uint64_t remaining = session_remaining(s, now);

        if (!o)
                return NULL;
        cJSON_AddStringToObject(o, "id", s->id);
        cJSON_AddStringToObject(o, "state", s->state);
        cJSON_AddStringToObject(o, "target", s->target);
        cJSON_AddStringToObject(o, "profile", s->profile);
        cJSON_AddStringToObject(o, "namespace", s->namespace);
        cJSON_AddStringToObject(o, "pod", s->pod);
        cJSON_AddStringToObject(o, "container", s->container);
        cJSON_AddStringToObject(o, "cgroup", s->cgroup);
        cJSON_AddNumberToObject(o, "startUsec", (double) s->start_usec);
        cJSON_AddNumberToObject(o, "durationUsec",
                                duration_unlimited(s->duration_usec) ? 0 : (double) s->duration_usec);
        cJSON_AddNumberToObject(o, "samples", (double) s->samples);
        /* Derived: the progress the table shows. */
        cJSON_AddNumberToObject(o, "elapsedUsec", (double) session_elapsed(s, now));
        if (remaining == UINT64_MAX)
                cJSON_AddNullToObject(o, "remainingUsec");
        else
                cJSON_AddNumberToObject(o, "remainingUsec", (double) remaining);
        return o;
}

static int sessions_table_add(Table *t, const SessionInfo *s, uint64_t now) {
        _cleanup_free_ char *what = session_what(s);
        char elapsed[TIMESPAN_MAX], remaining[TIMESPAN_MAX];
        uint64_t rem = session_remaining(s, now);
        int r = 0;

        if (!what)
                return -ENOMEM;
        if (s->start_usec == 0)
                snprintf(elapsed, sizeof(elapsed), "-");
        else
                format_timespan(session_elapsed(s, now), elapsed, sizeof(elapsed));
        if (s->start_usec == 0)
                snprintf(remaining, sizeof(remaining), "-");
        else if (rem == UINT64_MAX)
                snprintf(remaining, sizeof(remaining), "until stopped");
        else
                format_timespan(rem, remaining, sizeof(remaining));

        if ((r = table_add(t, s->id)) < 0 || (r = table_add(t, s->state)) < 0 ||
            (r = table_add(t, s->target)) < 0 || (r = table_add(t, s->profile)) < 0 ||
            (r = table_add(t, what)) < 0 || (r = table_add(t, elapsed)) < 0 ||
            (r = table_add(t, remaining)) < 0 || (r = table_addf(t, "%" PRIu64, s->samples)) < 0)
                return r;
        return 0;
}

static int print_sessions(const SessionInfo *items, size_t n) {
        uint64_t now = now_realtime_usec();

        if (arg_json) {
                cJSON *a = cJSON_CreateArray();
                for (size_t i = 0; a && i < n; i++) {
                        cJSON *o = session_to_json(items + i, now);
                        if (!o) {
                                cJSON_Delete(a);
                                return log_oom(), EXIT_FAILURE;
                        }
                        cJSON_AddItemToArray(a, o);
                }
                return print_json(a);
        }

        if (n == 0) {
                printf("No sessions.\n");
                return EXIT_SUCCESS;
        }
        _cleanup_(table_done) Table t = { .n_columns = 8 };
        static const char *const header[] = { "ID",        "STATE",   "TARGET",    "PROFILE",
                                              "PROFILING", "ELAPSED", "REMAINING", "SAMPLES" };
        for (size_t i = 0; i < ELEMENTSOF(header); i++)
                if (table_add(&t, header[i]) < 0)
                        return log_oom(), EXIT_FAILURE;
        for (size_t i = 0; i < n; i++)
                if (sessions_table_add(&t, items + i, now) < 0)
                        return log_oom(), EXIT_FAILURE;
        table_print(&t);
        return EXIT_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Commands */

static void print_kv(const cJSON *j, const char *key, const char *label) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
        if (cJSON_IsString(v))
                printf("%18s: %s\n", label, v->valuestring);
        else if (cJSON_IsNumber(v))
                printf("%18s: %.15g\n", label, v->valuedouble);
        else if (cJSON_IsBool(v))
                printf("%18s: %s\n", label, cJSON_IsTrue(v) ? "yes" : "no");
}

static int cmd_status(sd_bus *bus, char **args) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *json;
        int r;

        r = call(bus, "GetStatus", &error, &reply, "");
        if (r < 0)
                return call_failed("Failed to get the agent's status", &error, r);
        r = sd_bus_message_read(reply, "s", &json);
        if (r < 0)
                return log_error_errno(r, "Failed to parse the reply: %m"), EXIT_FAILURE;

        if (arg_json) {
                printf("%s\n", json);
                return EXIT_SUCCESS;
        }

        cJSON *j = cJSON_Parse(json);
        if (!j)
                return log_error("The agent sent invalid JSON."), EXIT_FAILURE;
        print_kv(j, "version", "Version");
        print_kv(j, "pid", "PID");
        print_kv(j, "node", "Node");
        print_kv(j, "config", "Config");
        print_kv(j, "reportDir", "Reports");
        print_kv(j, "cgroupRoot", "cgroup root");
        print_kv(j, "attachMode", "Attach mode");
        print_kv(j, "journal", "Journal");
        print_kv(j, "uptimeSec", "Uptime (s)");
        print_kv(j, "cgroupsWatched", "cgroups watched");
        print_kv(j, "sessionsStarted", "Sessions started");
        print_kv(j, "sessionsEnded", "Sessions ended");
        print_kv(j, "sessionsFailed", "Sessions failed");
        const cJSON *loop = cJSON_GetObjectItemCaseSensitive(j, "eventLoop");
        if (cJSON_IsObject(loop))
                printf("%18s: longest dispatch %.1f ms, mean %.3f ms, %.0f over 50 ms\n", "Event loop",
                       cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(loop, "dispatchMaxMsec")),
                       cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(loop, "dispatchMeanMsec")),
                       cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(loop, "dispatchesOver50ms")));
        for (size_t i = 0; i < 2; i++) {
                static const char *const keys[] = { "drains", "reportWrites" }, *const labels[] = { "Drains", "Report writes" };
                const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, keys[i]);
                if (cJSON_IsObject(t))
                        printf("%18s: %.0f, mean %.2f ms, longest %.1f ms\n", labels[i],
                               cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(t, "count")),
                               cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(t, "meanMsec")),
                               cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(t, "maxMsec")));
        }
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "debuginfod");
        if (cJSON_IsObject(d)) {
#define N(key) cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(d, key))
                printf("%18s: %.0f fetched, %.0f from cache, %.0f not found, %.0f failed, %.0f dropped, "
                       "%.0f pending\n",
                       "debuginfod", N("fetched"), N("fromCache"), N("notFound"), N("failed"), N("dropped"),
                       N("pending"));
#undef N
        }
        const cJSON *sessions = cJSON_GetObjectItemCaseSensitive(j, "sessions"), *s;
        printf("%18s: %d\n", "Active sessions", cJSON_GetArraySize(sessions));
        cJSON_ArrayForEach (s, sessions) {
                const cJSON *id = cJSON_GetObjectItem(s, "id"), *cg = cJSON_GetObjectItem(s, "cgroup"),
                            *st = cJSON_GetObjectItem(s, "state"), *n = cJSON_GetObjectItem(s, "samples");
                printf("%18s  %s %s %s (%.0f samples)\n", "", cJSON_GetStringValue(id),
                       cJSON_GetStringValue(st), cJSON_GetStringValue(cg), cJSON_GetNumberValue(n));
        }
        cJSON_Delete(j);
        return EXIT_SUCCESS;
}

static int cmd_targets(sd_bus *bus, char **args) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(table_done) Table t = { .n_columns = 4 };
        cJSON *a = NULL;
        const char *name, *profile, *kind;
        int disabled, r;

        r = call(bus, "ListTargets", &error, &reply, "");
        if (r < 0)
                return call_failed("Failed to list targets", &error, r);

        if (arg_json && !(a = cJSON_CreateArray()))
                return log_oom(), EXIT_FAILURE;
        if (!arg_json && ((r = table_add(&t, "TARGET")) < 0 || (r = table_add(&t, "PROFILE")) < 0 ||
                          (r = table_add(&t, "KIND")) < 0 || (r = table_add(&t, "DISABLED")) < 0))
                return log_oom(), EXIT_FAILURE;

        r = sd_bus_message_enter_container(reply, 'a', "(sssb)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(sssb)", &name, &profile, &kind, &disabled)) > 0) {
                if (arg_json) {
                        cJSON *o = cJSON_CreateObject();
                        if (!o) {
                                r = -ENOMEM;
                                break;
                        }
                        cJSON_AddStringToObject(o, "name", name);
                        cJSON_AddStringToObject(o, "profile", profile);
                        cJSON_AddStringToObject(o, "kind", kind);
                        cJSON_AddBoolToObject(o, "disabled", disabled);
                        cJSON_AddItemToArray(a, o);
                } else if ((r = table_add(&t, name)) < 0 || (r = table_add(&t, profile)) < 0 ||
                           (r = table_add(&t, kind)) < 0 || (r = table_add(&t, disabled ? "yes" : "no")) < 0)
                        break;
        }
        if (r < 0) {
                cJSON_Delete(a);
                return log_error_errno(r, "Failed to parse the targets: %m"), EXIT_FAILURE;
        }
        if (arg_json)
                return print_json(a);
        if (t.n_cells == t.n_columns)
                printf("No targets.\n");
        else
                table_print(&t);
        return EXIT_SUCCESS;
}

static int cmd_sessions(sd_bus *bus, char **args) {
        _cleanup_(session_list_done) SessionList l = {};
        int r;

        r = list_sessions(bus, &l);
        if (r != 0)
                return r;
        return print_sessions(l.items, l.n);
}

/* Splits "NS/POD" or "NS/POD/CONTAINER" (with_container); no part empty. */
static int parse_pod_ref(const char *arg, bool with_container, char **ret_ns, char **ret_pod,
                         char **ret_container) {
        _cleanup_free_ char *copy = strdup(arg);
        char *parts[4] = {};
        size_t n = 0;

        if (!copy)
                return -ENOMEM;
        for (char *p = copy, *slash; n < ELEMENTSOF(parts); p = slash + 1) {
                parts[n++] = p;
                slash = strchr(p, '/');
                if (!slash)
                        break;
                *slash = 0;
        }
        if (n < 2 || n > (with_container ? 3u : 2u) || strchr(parts[n - 1], '/'))
                return -EINVAL;
        for (size_t i = 0; i < n; i++)
                if (!*parts[i])
                        return -EINVAL;
        char *ns = strdup(parts[0]), *pod = strdup(parts[1]), *c = strdup(n == 3 ? parts[2] : "");
        if (!ns || !pod || !c) {
                free(ns), free(pod), free(c);
                return -ENOMEM;
        }
        *ret_ns = ns;
        *ret_pod = pod;
        if (ret_container)
                *ret_container = c;
        else
                free(c);
        return 0;
}

static int verify_check(char **args) {
        int r = parse_pod_ref(args[0], true, &arg_namespace, &arg_pod_name, &arg_container_name);
        if (r == -ENOMEM)
                return log_oom(), EXIT_FAILURE;
        if (r < 0)
                return usage_error(find_verb("check"),
                                   "check: '%s' is not NAMESPACE/POD or NAMESPACE/POD/CONTAINER.", args[0]);
        return 0;
}

static int cmd_check(sd_bus *bus, char **args) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(table_done) Table t = { .n_columns = 2 };
        const char *ns = arg_namespace, *pod = arg_pod_name, *container = arg_container_name;
        const char *target, *profile, *rt, *reason, *what = args[0];
        cJSON *j = NULL, *reasons = NULL;
        int targeted, r;

        r = call(bus, "Check", &error, &reply, "sss", ns, pod, container);
        if (r < 0) {
                _cleanup_free_ char *m = NULL;
                if (asprintf(&m, "Failed to check %s", what) < 0)
                        return log_oom(), EXIT_FAILURE;
                return call_failed(m, &error, r);
        }
        r = sd_bus_message_read(reply, "bss", &targeted, &target, &profile);
        if (r < 0)
                return log_error_errno(r, "Failed to parse the reply: %m"), EXIT_FAILURE;

        if (arg_json) {
                j = cJSON_CreateObject();
                if (!j)
                        return log_oom(), EXIT_FAILURE;
                cJSON_AddStringToObject(j, "namespace", ns);
                cJSON_AddStringToObject(j, "pod", pod);
                cJSON_AddStringToObject(j, "container", container);
                cJSON_AddBoolToObject(j, "targeted", targeted);
                cJSON_AddStringToObject(j, "target", target);
                cJSON_AddStringToObject(j, "profile", profile);
                reasons = cJSON_AddArrayToObject(j, "reasons");
        } else {
                if (targeted)
                        printf("%s is targeted by target \"%s\" with profile \"%s\".\n", what, target,
                               profile);
                else
                        printf("%s is not targeted.\n", what);
                if (table_add(&t, targeted ? "OTHER TARGET" : "TARGET") < 0 ||
                    table_add(&t, "FAILED CONDITION") < 0)
                        return log_oom(), EXIT_FAILURE;
        }

        r = sd_bus_message_enter_container(reply, 'a', "(ss)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(ss)", &rt, &reason)) > 0) {
                if (arg_json) {
                        cJSON *o = cJSON_CreateObject();
                        if (!o) {
                                r = -ENOMEM;
                                break;
                        }
                        cJSON_AddStringToObject(o, "target", rt);
                        cJSON_AddStringToObject(o, "reason", reason);
                        cJSON_AddItemToArray(reasons, o);
                } else if ((r = table_add(&t, rt)) < 0 || (r = table_add(&t, reason)) < 0)
                        break;
        }
        if (r < 0) {
                cJSON_Delete(j);
                return log_error_errno(r, "Failed to parse the reply: %m"), EXIT_FAILURE;
        }
        if (arg_json)
                return print_json(j);
        if (t.n_cells > t.n_columns) {
                printf("\n");
                table_print(&t);
        } else if (!targeted)
                printf("No target is configured.\n");
        return EXIT_SUCCESS;
}

/* A --cgroup argument relative to the cgroup root: "/sys/fs/cgroup/a/b",
 * "/a/b" and "a/b" all are "a/b". */
static int cgroup_relative(const char *arg, char **ret) {
        _cleanup_free_ char *root = NULL;
        const char *p = arg;
        size_t l;

        if (arg[0] == '/' && cg_find_unified_root(NULL, &root) >= 0) {
                l = strlen(root);
                if (strncmp(arg, root, l) == 0 && (arg[l] == '/' || arg[l] == 0))
                        p = arg + l;
        }
        p += strspn(p, "/");
        char *s = strdup(p);
        if (!s)
                return -ENOMEM;
        for (l = strlen(s); l > 0 && s[l - 1] == '/'; l--)
                s[l - 1] = 0;
        *ret = s;
        return 0;
}

static uint64_t requested_duration(void) {
        if (!(arg_options & OPT_DURATION))
                return 0; /* the profile's */
        return arg_duration_usec == 0 ? SESSION_UNTIL_STOPPED_USEC : arg_duration_usec;
}

/* Returns 0 or an exit status; *ret_id is the new session's ID. */
static int start_session(sd_bus *bus, const char *target, const char *profile, uint64_t duration_usec,
                         char **ret_id) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *id;
        int r;

        r = call(bus, "StartSession", &error, &reply, "sst", target, strempty(profile), duration_usec);
        if (r < 0) {
                _cleanup_free_ char *m = NULL;
                if (asprintf(&m, "Failed to start a session of %s", target) < 0)
                        return log_oom(), EXIT_FAILURE;
                return call_failed(m, &error, r);
        }
        r = sd_bus_message_read(reply, "s", &id);
        if (r < 0)
                return log_error_errno(r, "Failed to parse the reply: %m"), EXIT_FAILURE;
        *ret_id = strdup(id);
        if (!*ret_id)
                return log_oom(), EXIT_FAILURE;
        return 0;
}

static int verify_start(char **args) {
        const Verb *v = find_verb("start");
        int r;

        if (!!arg_pod == !!arg_cgroup)
                return usage_error(v, "start: needs either --pod NAMESPACE/POD or --cgroup PATH.");
        if (arg_container && !arg_pod)
                return usage_error(v, "start: --container needs --pod.");
        if (arg_pod) {
                _cleanup_free_ char *ns = NULL, *pod = NULL;
                r = parse_pod_ref(arg_pod, false, &ns, &pod, NULL);
                if (r == -ENOMEM)
                        return log_oom(), EXIT_FAILURE;
                if (r < 0)
                        return usage_error(v, "start: --pod '%s' is not NAMESPACE/POD.", arg_pod);
                if (arg_container && (!*arg_container || strchr(arg_container, '/')))
                        return usage_error(v, "start: --container '%s' is not a container name.",
                                           arg_container);
                if (asprintf(&arg_target, "pod:%s/%s%s%s", ns, pod, arg_container ? "/" : "",
                             strempty(arg_container)) < 0)
                        return log_oom(), EXIT_FAILURE;
        } else {
                _cleanup_free_ char *rel = NULL;
                if (cgroup_relative(arg_cgroup, &rel) < 0)
                        return log_oom(), EXIT_FAILURE;
                if (asprintf(&arg_target, "cgroup:%s", rel) < 0)
                        return log_oom(), EXIT_FAILURE;
        }
        return 0;
}

static int cmd_start(sd_bus *bus, char **args) {
        _cleanup_(session_list_done) SessionList l = {};
        _cleanup_free_ char *id = NULL;
        const char *target = arg_target;
        const SessionInfo *s;
        int r;

        r = start_session(bus, target, arg_profile, requested_duration(), &id);
        if (r != 0)
                return r;

        /* Its progress (a session of a short duration may be gone already). */
        r = list_sessions(bus, &l);
        s = r == 0 ? session_list_find(&l, id) : NULL;
        if (arg_json) {
                if (s)
                        return print_json(session_to_json(s, now_realtime_usec()));
                cJSON *o = cJSON_CreateObject();
                if (o)
                        cJSON_AddStringToObject(o, "id", id);
                return print_json(o);
        }
        printf("Started session %s of %s.\n", id, target);
        if (s) {
                char buf[TIMESPAN_MAX];
                uint64_t rem = session_remaining(s, now_realtime_usec());
                printf("Target %s, profile %s, %s; %s", s->target, s->profile, s->state,
                       rem == UINT64_MAX ? "runs until stopped" : "ends in ");
                if (rem != UINT64_MAX)
                        printf("%s", format_timespan(rem, buf, sizeof(buf)));
                printf(".\n");
        }
        printf("Stop it (and write its report) with: %s stop %s\n", program_invocation_short_name, id);
        return EXIT_SUCCESS;
}

/* The final sample count of a report, from its summary.json (the session
 * listing lags by up to one drain interval). */
static bool report_samples(const char *dir, uint64_t *ret) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        bool ok = false;

        if (isempty_str(dir) || asprintf(&path, "%s/summary.json", dir) < 0 ||
            read_full_file(path, &text, NULL) < 0)
                return false;
        cJSON *j = cJSON_Parse(text);
        const cJSON *total =
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "samples"), "total");
        if (cJSON_IsNumber(total) && total->valuedouble >= 0) {
                *ret = (uint64_t) total->valuedouble;
                ok = true;
        }
        cJSON_Delete(j);
        return ok;
}

/* Resolves a session ID or an unambiguous prefix of one. Returns 0 or an
 * exit status. */
static int resolve_session(const SessionList *l, const char *arg, const char **ret_id) {
        const char *found = NULL;

        for (size_t i = 0; i < l->n; i++) {
                if (streq(l->items[i].id, arg)) {
                        *ret_id = l->items[i].id;
                        return 0;
                }
                if (strncmp(l->items[i].id, arg, strlen(arg)) == 0) {
                        if (found) {
                                log_error("Session ID prefix '%s' is ambiguous.", arg);
                                return EXIT_USAGE;
                        }
                        found = l->items[i].id;
                }
        }
        *ret_id = found ?: arg; /* unknown: let the agent say so */
        return 0;
}

static int verify_stop(char **args) {
        const Verb *v = find_verb("stop");

        if (arg_all == !!args[0])
                return usage_error(v, "stop: needs a session ID or --all (not both).");
        if (!arg_all && (strlen(args[0]) == 0 || strlen(args[0]) > SD_ID128_STRING_MAX - 1 ||
                         strspn(args[0], "0123456789abcdef") != strlen(args[0])))
                return usage_error(v, "stop: '%s' is not a session ID (32 hexadecimal digits, or a prefix).",
                                   args[0]);
        return 0;
}

static int cmd_stop(sd_bus *bus, char **args) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(session_list_done) SessionList l = {};
        uint64_t now = now_realtime_usec();
        const char *id, *dir;
        int r;

        /* What they did so far; the stop itself reports only the directory. */
        r = list_sessions(bus, &l);
        if (r != 0)
                return r;

        if (arg_all) {
                const char *item;
                cJSON *a = NULL;

                r = call_stop(bus, "StopAllSessions", &error, &reply, "");
                if (r < 0)
                        return call_failed("Failed to stop the sessions", &error, r);
                if (arg_json && !(a = cJSON_CreateArray()))
                        return log_oom(), EXIT_FAILURE;
                for (size_t i = 0; !arg_json && i < l.n; i++) {
                        _cleanup_free_ char *what = session_what(l.items + i);
                        char buf[TIMESPAN_MAX];
                        printf("Stopped session %s (%s) after %s.\n", l.items[i].id, strna(what),
                               format_timespan(session_elapsed(l.items + i, now), buf, sizeof(buf)));
                }
                size_t n = 0;
                r = sd_bus_message_enter_container(reply, 'a', "s");
                while (r >= 0 && (r = sd_bus_message_read(reply, "s", &item)) > 0) {
                        uint64_t samples;
                        n++;
                        if (arg_json)
                                cJSON_AddItemToArray(a, cJSON_CreateString(item));
                        else if (report_samples(item, &samples))
                                printf("Report: %s (%" PRIu64 " samples)\n", item, samples);
                        else
                                printf("Report: %s\n", isempty_str(item) ? "(none written)" : item);
                }
                if (r < 0) {
                        cJSON_Delete(a);
                        return log_error_errno(r, "Failed to parse the reply: %m"), EXIT_FAILURE;
                }
                if (arg_json)
                        return print_json(a);
                printf("Stopped %zu session%s.\n", n, n == 1 ? "" : "s");
                return EXIT_SUCCESS;
        }

        r = resolve_session(&l, args[0], &id);
        if (r != 0)
                return r;
        const SessionInfo *s = session_list_find(&l, id);

        r = call_stop(bus, "StopSession", &error, &reply, "s", id);
        if (r < 0) {
                _cleanup_free_ char *m = NULL;
                if (asprintf(&m, "Failed to stop session %s", id) < 0)
                        return log_oom(), EXIT_FAILURE;
                return call_failed(m, &error, r);
        }
        r = sd_bus_message_read(reply, "s", &dir);
        if (r < 0)
                return log_error_errno(r, "Failed to parse the reply: %m"), EXIT_FAILURE;
        uint64_t samples = s ? s->samples : 0;
        bool have_samples = report_samples(dir, &samples) || s;

        if (arg_json) {
                cJSON *o = cJSON_CreateObject();
                if (o) {
                        cJSON_AddStringToObject(o, "id", id);
                        cJSON_AddStringToObject(o, "reportDir", dir);
                        if (s)
                                cJSON_AddNumberToObject(o, "elapsedUsec", (double) session_elapsed(s, now));
                        if (have_samples)
                                cJSON_AddNumberToObject(o, "samples", (double) samples);
                }
                return print_json(o);
        }
        if (s) {
                char buf[TIMESPAN_MAX];
                printf("Stopped session %s after %s, %" PRIu64 " samples.\n", id,
                       format_timespan(session_elapsed(s, now), buf, sizeof(buf)), samples);
        } else if (have_samples)
                printf("Stopped session %s, %" PRIu64 " samples.\n", id, samples);
        else
                printf("Stopped session %s.\n", id);
        printf("Report: %s\n", isempty_str(dir) ? "(none written)" : dir);
        return EXIT_SUCCESS;
}

static int cmd_reports(sd_bus *bus, char **args) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(table_done) Table t = { .n_columns = 5 };
        const char *session, *dir, *ns, *pod, *container, *cgroup;
        uint64_t start_usec, samples;
        cJSON *a = NULL;
        int r;

        r = call(bus, "ListReports", &error, &reply, "st", strempty(arg_filter), arg_since_usec);
        if (r < 0)
                return call_failed("Failed to list reports", &error, r);

        if (arg_json && !(a = cJSON_CreateArray()))
                return log_oom(), EXIT_FAILURE;
        if (!arg_json && ((r = table_add(&t, "STARTED")) < 0 || (r = table_add(&t, "SESSION")) < 0 ||
                          (r = table_add(&t, "SAMPLES")) < 0 || (r = table_add(&t, "PROFILED")) < 0 ||
                          (r = table_add(&t, "REPORT")) < 0))
                return log_oom(), EXIT_FAILURE;

        r = sd_bus_message_enter_container(reply, 'a', "(sssssstt)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(sssssstt)", &session, &dir, &ns, &pod, &container,
                                                  &cgroup, &start_usec, &samples)) > 0) {
                if (arg_json) {
                        cJSON *o = cJSON_CreateObject();
                        if (!o) {
                                r = -ENOMEM;
                                break;
                        }
                        cJSON_AddStringToObject(o, "session", session);
                        cJSON_AddStringToObject(o, "reportDir", dir);
                        cJSON_AddStringToObject(o, "namespace", ns);
                        cJSON_AddStringToObject(o, "pod", pod);
                        cJSON_AddStringToObject(o, "container", container);
                        cJSON_AddStringToObject(o, "cgroup", cgroup);
                        cJSON_AddNumberToObject(o, "startUsec", (double) start_usec);
                        cJSON_AddNumberToObject(o, "samples", (double) samples);
                        cJSON_AddItemToArray(a, o);
                        continue;
                }
                SessionInfo si = { .namespace = ns, .pod = pod, .container = container, .cgroup = cgroup };
                _cleanup_free_ char *what = session_what(&si);
                char ts[TIMESTAMP_MAX];
                if (!what || (r = table_add(&t, format_timestamp(start_usec, ts, sizeof(ts)))) < 0 ||
                    (r = table_add(&t, session)) < 0 || (r = table_addf(&t, "%" PRIu64, samples)) < 0 ||
                    (r = table_add(&t, what)) < 0 || (r = table_add(&t, dir)) < 0) {
                        r = -ENOMEM;
                        break;
                }
        }
        if (r < 0) {
                cJSON_Delete(a);
                return log_error_errno(r, "Failed to parse the reports: %m"), EXIT_FAILURE;
        }
        if (arg_json)
                return print_json(a);
        if (t.n_cells == t.n_columns)
                printf("No reports.\n");
        else
                table_print(&t);
        return EXIT_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* record */

/* The profile --frequency asks for, from the agent's config file (the API
 * has no ad-hoc frequency). Returns 0 or an exit status. */
static int profile_for_frequency(sd_bus *bus, char **ret_profile) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_free_ char *path = NULL, *err = NULL;
        int r;

        r = sd_bus_get_property_string(bus, destination(), CGPROF_BUS_PATH, CGPROF_BUS_INTERFACE,
                                       "ConfigPath", &error, &path);
        if (r < 0)
                return call_failed("Failed to get the agent's config path", &error, r);
        r = config_load_file(path, &c, &err);
        if (r < 0) {
                log_error("--frequency: cannot read the agent's profiles: %s", err ?: strerror(-r));
                return EXIT_FAILURE;
        }
        for (size_t i = 0; i < c->n_profiles; i++) {
                const Profile *p = c->profiles + i;
                if (arg_profile && !streq(p->name, arg_profile))
                        continue;
                if (p->frequency == arg_frequency) {
                        *ret_profile = strdup(p->name);
                        return *ret_profile ? 0 : (log_oom(), EXIT_FAILURE);
                }
                if (arg_profile) {
                        log_error("--frequency %" PRIu64 ": profile \"%s\" samples at %" PRIu64 " Hz.",
                                  arg_frequency, p->name, p->frequency);
                        return EXIT_USAGE;
                }
        }
        if (arg_profile) {
                log_error("--profile: no profile \"%s\" in %s.", arg_profile, path);
                return EXIT_USAGE;
        }

        _cleanup_free_ char *list = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&list, &size);
        if (!f)
                return log_oom(), EXIT_FAILURE;
        for (size_t i = 0; i < c->n_profiles; i++)
                fprintf(f, "%s%s %" PRIu64 " Hz", i ? ", " : "", c->profiles[i].name,
                        c->profiles[i].frequency);
        fclose(f);
        log_error("--frequency %" PRIu64 ": no profile of the agent (%s) samples at that frequency "
                  "(it has: %s). Add one to the config, or choose one with --profile.",
                  arg_frequency, path, strempty(list));
        return EXIT_USAGE;
}

typedef struct Record {
        sd_bus *bus;
        pid_t pid;
        siginfo_t status;
        const char *session_id;
        const char *cgroup;
        char *report_dir;
        bool stopped;
        int stop_result; /* exit status of record_stop() */
} Record;

/* The report a session ended by the agent itself wrote (it stopped, or the
 * session failed): found by ListReports. Returns 0 or an exit status. */
static int record_find_report(Record *rec) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ char *filter = NULL;
        const char *session, *dir, *ns, *pod, *container, *cgroup;
        uint64_t start_usec, samples;
        int r;

        if (asprintf(&filter, "cgroup:%s", rec->cgroup) < 0)
                return log_oom(), EXIT_FAILURE;
        r = call(rec->bus, "ListReports", &error, &reply, "st", filter, (uint64_t) 0);
        if (r < 0)
                return call_failed("Failed to list the reports", &error, r);
        r = sd_bus_message_enter_container(reply, 'a', "(sssssstt)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(sssssstt)", &session, &dir, &ns, &pod, &container,
                                                  &cgroup, &start_usec, &samples)) > 0)
                if (streq(session, rec->session_id)) {
                        rec->report_dir = strdup(dir);
                        return rec->report_dir ? 0 : (log_oom(), EXIT_FAILURE);
                }
        if (r < 0)
                return log_error_errno(r, "Failed to parse the reports: %m"), EXIT_FAILURE;
        log_error("The agent ended session %s and wrote no report.", rec->session_id);
        return EXIT_NOT_FOUND;
}

/* Returns 0 or an exit status. Sets rec->report_dir. */
static int record_stop(Record *rec) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *dir;
        int r;

        if (rec->stopped)
                return rec->stop_result;
        rec->stopped = true;
        r = call_stop(rec->bus, "StopSession", &error, &reply, "s", rec->session_id);
        if (r < 0 && sd_bus_error_has_name(&error, CGPROF_ERROR_NOT_FOUND)) {
                log_info("The agent ended session %s already.", rec->session_id);
                return (rec->stop_result = record_find_report(rec));
        }
        if (r < 0)
                return (rec->stop_result = call_failed("Failed to stop the session", &error, r));
        r = sd_bus_message_read(reply, "s", &dir);
        if (r < 0)
                return (rec->stop_result =
                                (log_error_errno(r, "Failed to parse the reply: %m"), EXIT_FAILURE));
        rec->report_dir = strdup(dir);
        if (!rec->report_dir)
                return (rec->stop_result = (log_oom(), EXIT_FAILURE));
        return 0;
}

static int on_record_child(sd_event_source *s, const siginfo_t *si, void *userdata) {
        Record *rec = userdata;
        rec->status = *si;
        /* Detach first: an attached bus is closed when its loop exits. */
        (void) sd_bus_detach_event(rec->bus);
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

static int on_record_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Record *rec = userdata;
        /* A terminal's ^C (SI_KERNEL) reaches the child's process group
         * already; only pass on what was sent to us alone (kill, timeout). */
        if (si->ssi_code != SI_KERNEL)
                (void) kill(rec->pid, (int) si->ssi_signo);
        return 0;
}

static int on_record_duration(sd_event_source *s, uint64_t usec, void *userdata) {
        Record *rec = userdata;
        if (record_stop(rec) == 0)
                log_info("Profiling stopped after the requested duration; waiting for the command to exit.");
        return 0;
}

static _Noreturn void record_child(int cgroup_fd, int go_fd, int status_fd, const sigset_t *mask,
                                   char **command) {
        char c;
        int r;

        (void) sigprocmask(SIG_SETMASK, mask, NULL);
        r = cg_attach_fd(cgroup_fd, 0);
        (void) write(status_fd, &r, sizeof(r));
        if (r < 0)
                _exit(EXIT_FAILURE);
        /* Until the session samples the cgroup; EOF: the parent gave up. */
        if (read(go_fd, &c, 1) != 1)
                _exit(EXIT_FAILURE);
        execvp(command[0], command);
        r = -errno;
        (void) write(status_fd, &r, sizeof(r));
        _exit(r == -ENOENT ? 127 : 126);
}

/* The first RECORD_TOP_FUNCTIONS functions with self samples (the list
 * also holds callers that only have total samples). */
static bool top_function_wanted(const cJSON *f, int *n) {
        if (*n >= RECORD_TOP_FUNCTIONS ||
            !(cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(f, "self")) > 0))
                return false;
        (*n)++;
        return true;
}

static void print_top_functions(const char *dir, cJSON *json_out) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        cJSON *j, *top, *f, *samples;
        int n = 0;

        if (isempty_str(dir) || asprintf(&path, "%s/summary.json", dir) < 0)
                return;
        if (read_full_file(path, &text, NULL) < 0) {
                if (!json_out)
                        printf("(No summary.json: the profile's formats do not include json.)\n");
                return;
        }
        j = cJSON_Parse(text);
        if (!j)
                return;
        top = cJSON_GetObjectItemCaseSensitive(j, "topFunctions");
        samples = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "samples"), "total");
        if (json_out) {
                cJSON_AddNumberToObject(json_out, "samples", cJSON_GetNumberValue(samples));
                cJSON *a = cJSON_AddArrayToObject(json_out, "topFunctions");
                cJSON_ArrayForEach (f, top) {
                        if (!top_function_wanted(f, &n))
                                continue;
                        cJSON *o = cJSON_CreateObject();
                        cJSON_AddStringToObject(
                                o, "name",
                                strempty(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "name"))));
                        cJSON_AddNumberToObject(
                                o, "self",
                                cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(f, "self")));
                        cJSON_AddNumberToObject(
                                o, "selfPercent",
                                cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(f, "selfPercent")));
                        cJSON_AddItemToArray(a, o);
                }
        } else {
                if (cJSON_IsNumber(samples))
                        printf("Samples: %.0f\n", samples->valuedouble);
                printf("\nTop functions (self):\n");
                cJSON_ArrayForEach (f, top) {
                        if (!top_function_wanted(f, &n))
                                continue;
                        printf("  %6.2f%%  %6.0f  %s\n",
                               cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(f, "selfPercent")),
                               cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(f, "self")),
                               strna(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f, "name"))));
                }
                if (n == 0)
                        printf("  (no samples)\n");
        }
        cJSON_Delete(j);
}

static int cmd_record(sd_bus *bus, char **command) {
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_free_ char *root = NULL, *rel = NULL, *target = NULL, *profile = NULL, *id = NULL;
        _cleanup_close_ int root_fd = -EBADF, cg_fd = -EBADF;
        int go[2] = { -EBADF, -EBADF }, st[2] = { -EBADF, -EBADF };
        Record rec = { .bus = bus, .pid = -1 };
        sigset_t mask, old_mask;
        sd_id128_t rnd;
        int r, ret = EXIT_FAILURE, child_error = 0;
        ssize_t n;

        if (arg_options & OPT_FREQUENCY) {
                r = profile_for_frequency(bus, &profile);
                if (r != 0)
                        return r;
        } else if (arg_profile && !(profile = strdup(arg_profile)))
                return log_oom(), EXIT_FAILURE;

        /* The transient cgroup: <root>/cgprof-record.slice/record-<pid>-<random>. */
        r = cg_find_unified_root(NULL, &root);
        if (r < 0)
                return log_error_errno(r, "record needs a cgroup v2 hierarchy: %m"), EXIT_FAILURE;
        root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return log_error_errno(errno, "Failed to open %s: %m", root), EXIT_FAILURE;
        (void) sd_id128_randomize(&rnd);
        if (asprintf(&rel, RECORD_SLICE "/record-%d-%08" PRIx32, (int) getpid(), (uint32_t) rnd.qwords[0]) <
                    0 ||
            asprintf(&target, "cgroup:%s", rel) < 0)
                return log_oom(), EXIT_FAILURE;
        /* The last record to end removes the slice: another one may do so
         * between our two mkdir()s (ENOENT), then we make it again. */
        for (unsigned attempt = 0;; attempt++) {
                if (mkdirat(root_fd, RECORD_SLICE, 0755) < 0 && errno != EEXIST)
                        return log_error_errno(errno, "Failed to create the cgroup %s/%s: %m", root,
                                               RECORD_SLICE),
                               EXIT_FAILURE;
                if (mkdirat(root_fd, rel, 0755) >= 0)
                        break;
                if (errno != ENOENT || attempt >= RECORD_SLICE_ATTEMPTS)
                        return log_error_errno(errno, "Failed to create the cgroup %s/%s: %m", root, rel),
                               EXIT_FAILURE;
        }
        cg_fd = openat(root_fd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cg_fd < 0) {
                log_error_errno(errno, "Failed to open the cgroup %s/%s: %m", root, rel);
                goto remove_cgroup;
        }

        /* Signals are taken by the event loop from here on; the child gets
         * the old mask back before exec. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &mask, &old_mask) < 0 || pipe2(go, O_CLOEXEC) < 0 ||
            pipe2(st, O_CLOEXEC) < 0) {
                log_error_errno(errno, "Failed to set up the command: %m");
                goto remove_cgroup;
        }
        fflush(NULL);
        rec.pid = fork();
        if (rec.pid < 0) {
                log_error_errno(errno, "Failed to fork: %m");
                goto remove_cgroup;
        }
        if (rec.pid == 0) {
                go[1] = safe_close(go[1]);
                st[0] = safe_close(st[0]);
                record_child(cg_fd, go[0], st[1], &old_mask, command);
        }
        go[0] = safe_close(go[0]);
        st[1] = safe_close(st[1]);

        n = read(st[0], &child_error, sizeof(child_error));
        if (n != sizeof(child_error) || child_error < 0) {
                log_error_errno(n == sizeof(child_error) ? child_error : EIO,
                                "Failed to move the command into the cgroup %s: %m", rel);
                goto reap;
        }

        /* The agent learns of the new cgroup through inotify, maybe after
         * our call: retry NotFound for a bounded time (not a poll of state
         * we wait on, a race with one event we know is coming). */
        for (uint64_t waited = 0;; waited += RECORD_START_RETRY_STEP_USEC) {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
                const char *s;

                /* Until stopped: we stop it when the command exits, or at
                 * --duration with our own timer. */
                r = call(bus, "StartSession", &error, &reply, "sst", target, strempty(profile),
                         SESSION_UNTIL_STOPPED_USEC);
                if (r < 0 && sd_bus_error_has_name(&error, CGPROF_ERROR_NOT_FOUND) &&
                    waited < RECORD_START_RETRY_USEC) {
                        (void) usleep(RECORD_START_RETRY_STEP_USEC);
                        continue;
                }
                if (r < 0) {
                        ret = call_failed("Failed to start the session", &error, r);
                        goto reap;
                }
                if (sd_bus_message_read(reply, "s", &s) < 0 || !(id = strdup(s))) {
                        log_error("Failed to parse the reply.");
                        goto reap;
                }
                break;
        }
        rec.session_id = id;
        rec.cgroup = rel;

        /* Go. EOF on the status pipe: exec succeeded. */
        if (write(go[1], "x", 1) != 1) {
                log_error_errno(errno, "Failed to release the command: %m");
                goto stop;
        }
        go[1] = safe_close(go[1]);
        n = read(st[0], &child_error, sizeof(child_error));
        if (n == sizeof(child_error)) {
                log_error_errno(child_error, "Failed to execute %s: %m", command[0]);
                goto stop;
        }

        if ((r = sd_event_new(&event)) < 0 ||
            (r = sd_event_add_child(event, NULL, rec.pid, WEXITED, on_record_child, &rec)) < 0 ||
            (r = sd_event_add_signal(event, NULL, SIGINT, on_record_signal, &rec)) < 0 ||
            (r = sd_event_add_signal(event, NULL, SIGTERM, on_record_signal, &rec)) < 0 ||
            (r = sd_event_add_signal(event, NULL, SIGHUP, on_record_signal, &rec)) < 0 ||
            (arg_duration_usec > 0 &&
             (r = sd_event_add_time_relative(event, NULL, CLOCK_MONOTONIC, arg_duration_usec, 0,
                                             on_record_duration, &rec)) < 0) ||
            (r = sd_bus_attach_event(bus, event, SD_EVENT_PRIORITY_NORMAL)) < 0) {
                log_error_errno(r, "Failed to set up the event loop: %m");
                goto stop;
        }
        r = sd_event_loop(event);
        if (r < 0) {
                log_error_errno(r, "Event loop failed: %m");
                goto stop;
        }
        rec.pid = -1; /* reaped by the child source */
        ret = EXIT_SUCCESS;

stop:
        (void) sd_bus_detach_event(bus);
        r = record_stop(&rec);
        if (ret == EXIT_SUCCESS)
                ret = r;
reap:
        go[1] = safe_close(go[1]);
        if (rec.pid > 0) {
                /* Not released (EOF ends it), or failed: wait for it. */
                if (waitid(P_PID, rec.pid, &rec.status, WEXITED) < 0)
                        log_warning_errno(errno, "Failed to wait for the command, ignoring: %m");
        }
remove_cgroup:
        safe_close(go[0]), safe_close(go[1]), safe_close(st[0]), safe_close(st[1]);
        if (unlinkat(root_fd, rel, AT_REMOVEDIR) < 0)
                log_warning_errno(errno, "Failed to remove the cgroup %s/%s%s: %m", root, rel,
                                  errno == EBUSY ? " (processes the command left behind run in it)" : "");
        /* And the slice, if this was its last record (EBUSY: others run). */
        else if (unlinkat(root_fd, RECORD_SLICE, AT_REMOVEDIR) < 0 && errno != EBUSY && errno != ENOENT)
                log_debug_errno(errno, "Failed to remove the cgroup %s/%s, ignoring: %m", root,
                                RECORD_SLICE);

        if (ret != EXIT_SUCCESS) {
                free(rec.report_dir);
                return ret;
        }

        bool signalled = rec.status.si_code == CLD_KILLED || rec.status.si_code == CLD_DUMPED;
        if (arg_json) {
                cJSON *o = cJSON_CreateObject();
                if (o) {
                        cJSON_AddStringToObject(o, "session", id);
                        cJSON_AddStringToObject(o, "cgroup", rel);
                        cJSON_AddStringToObject(o, "reportDir", strempty(rec.report_dir));
                        if (signalled)
                                cJSON_AddStringToObject(o, "signal", strsignal(rec.status.si_status));
                        else
                                cJSON_AddNumberToObject(o, "exitStatus", rec.status.si_status);
                        print_top_functions(rec.report_dir, o);
                }
                free(rec.report_dir);
                return print_json(o);
        }
        if (signalled)
                printf("\n%s was killed by signal %s.\n", command[0], strsignal(rec.status.si_status));
        else if (rec.status.si_status != 0)
                printf("\n%s exited with status %d.\n", command[0], rec.status.si_status);
        printf("\nSession %s on cgroup %s\n", id, rel);
        printf("Report: %s\n", isempty_str(rec.report_dir) ? "(none written)" : rec.report_dir);
        print_top_functions(rec.report_dir, NULL);
        free(rec.report_dir);
        return EXIT_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* report (no agent needed) */

static int parse_formats(const char *arg) {
        _cleanup_free_ char *copy = strdup(arg);
        char *save = NULL;

        if (!copy)
                return log_oom();
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                ReportFormat f = report_format_from_string(t);
                if (f < 0)
                        return log_error_errno(
                                EINVAL,
                                "--format: unknown format '%s' (folded, json, pprof, svg, speedscope).", t);
                arg_formats |= 1u << f;
        }
        return 0;
}

static int cmd_report(sd_bus *bus, char **args) {
        _cleanup_free_ char *error = NULL, *path = strdup(args[0]);
        _cleanup_close_ int fd = -EBADF;
        unsigned formats = arg_formats ?: (1u << _REPORT_FORMAT_MAX) - 1;
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

/* ------------------------------------------------------------------------ */

static const Verb verbs[] = {
        { "status", 0, 0, 0, true, NULL, cmd_status, "status" },
        { "targets", 0, 0, 0, true, NULL, cmd_targets, "targets" },
        { "sessions", 0, 0, 0, true, NULL, cmd_sessions, "sessions" },
        { "check", 1, 1, 0, true, verify_check, cmd_check, "check NAMESPACE/POD[/CONTAINER]" },
        { "start", 0, 0, OPT_POD | OPT_CONTAINER | OPT_CGROUP | OPT_PROFILE | OPT_DURATION, true,
          verify_start, cmd_start,
          "start (--pod NAMESPACE/POD [--container NAME] | --cgroup PATH) [--profile P] [--duration D]" },
        { "stop", 0, 1, OPT_ALL, true, verify_stop, cmd_stop, "stop ID|--all" },
        { "reports", 0, 0, OPT_SINCE | OPT_FILTER, true, NULL, cmd_reports,
          "reports [--since T] [--filter F]" },
        { "record", 1, UINT_MAX, OPT_PROFILE | OPT_FREQUENCY | OPT_DURATION, true, NULL, cmd_record,
          "record [--profile P] [--frequency F] [--duration D] -- COMMAND [ARGS...]" },
        { "report", 1, 1, OPT_FORMAT, false, NULL, cmd_report, "report DIR [--format FORMAT]" },
};

static const Verb *find_verb(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (streq(verbs[i].name, name))
                        return verbs + i;
        return NULL;
}

/* --since: a duration ago ("1h") or a UNIX time in seconds. */
static int parse_since(const char *s, uint64_t *ret) {
        uint64_t d;

        if (*s && strspn(s, "0123456789") == strlen(s)) {
                errno = 0;
                unsigned long long v = strtoull(s, NULL, 10);
                if (errno != 0 || v > UINT64_MAX / USEC_PER_SEC)
                        return -ERANGE;
                *ret = (uint64_t) v * USEC_PER_SEC;
                return 0;
        }
        int r = parse_duration(s, &d);
        if (r < 0)
                return r;
        uint64_t now = now_realtime_usec();
        *ret = d < now ? now - d : 0;
        return 0;
}

static int parse_argv(int argc, char *argv[]) {
        enum {
                ARG_VERSION = 0x100,
                ARG_BUS_SOCKET,
                ARG_SYSTEM,
                ARG_JSON,
                ARG_FORMAT,
                ARG_POD,
                ARG_CONTAINER,
                ARG_CGROUP,
                ARG_PROFILE,
                ARG_DURATION,
                ARG_ALL,
                ARG_SINCE,
                ARG_FILTER,
                ARG_FREQUENCY,
        };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "bus-socket", required_argument, NULL, ARG_BUS_SOCKET },
                { "system", no_argument, NULL, ARG_SYSTEM },
                { "json", no_argument, NULL, ARG_JSON },
                { "format", required_argument, NULL, ARG_FORMAT },
                { "pod", required_argument, NULL, ARG_POD },
                { "container", required_argument, NULL, ARG_CONTAINER },
                { "cgroup", required_argument, NULL, ARG_CGROUP },
                { "profile", required_argument, NULL, ARG_PROFILE },
                { "duration", required_argument, NULL, ARG_DURATION },
                { "all", no_argument, NULL, ARG_ALL },
                { "since", required_argument, NULL, ARG_SINCE },
                { "filter", required_argument, NULL, ARG_FILTER },
                { "frequency", required_argument, NULL, ARG_FREQUENCY },
                {},
        };
        int c, r;

        /* Options may come after the command (permuted); "--" ends them, so
         * record's COMMAND keeps its own. */
        opterr = 0; /* our messages, not getopt's */
        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("cgprofctl %s\n", CGPROF_VERSION);
                        return 0;
                case ARG_BUS_SOCKET:
                        arg_bus_socket = optarg;
                        break;
                case ARG_SYSTEM:
                        arg_system = true;
                        break;
                case ARG_JSON:
                        arg_json = true;
                        break;
                case ARG_FORMAT:
                        arg_options |= OPT_FORMAT;
                        if (parse_formats(optarg) < 0)
                                return -usage_error(NULL, "Invalid --format.");
                        break;
                case ARG_POD:
                        arg_options |= OPT_POD;
                        arg_pod = optarg;
                        break;
                case ARG_CONTAINER:
                        arg_options |= OPT_CONTAINER;
                        arg_container = optarg;
                        break;
                case ARG_CGROUP:
                        arg_options |= OPT_CGROUP;
                        arg_cgroup = optarg;
                        break;
                case ARG_PROFILE:
                        arg_options |= OPT_PROFILE;
                        if (!*optarg)
                                return -usage_error(NULL, "--profile: empty profile name.");
                        arg_profile = optarg;
                        break;
                case ARG_DURATION:
                        arg_options |= OPT_DURATION;
                        r = parse_duration(optarg, &arg_duration_usec);
                        if (r < 0)
                                return -usage_error(
                                        NULL,
                                        "--duration: invalid duration '%s' (e.g. 500ms, 10s, 5m, 1h; "
                                        "0: until stopped).",
                                        optarg);
                        break;
                case ARG_ALL:
                        arg_options |= OPT_ALL;
                        arg_all = true;
                        break;
                case ARG_SINCE:
                        arg_options |= OPT_SINCE;
                        if (parse_since(optarg, &arg_since_usec) < 0)
                                return -usage_error(
                                        NULL,
                                        "--since: '%s' is neither a duration (e.g. 1h, 30m) nor a "
                                        "UNIX time in seconds.",
                                        optarg);
                        break;
                case ARG_FILTER:
                        arg_options |= OPT_FILTER;
                        arg_filter = optarg;
                        break;
                case ARG_FREQUENCY: {
                        char *end;
                        arg_options |= OPT_FREQUENCY;
                        errno = 0;
                        unsigned long long v = strtoull(optarg, &end, 10);
                        if (errno != 0 || end == optarg || *end || optarg[0] == '-' || v == 0 ||
                            v > CONFIG_FREQUENCY_MAX)
                                return -usage_error(NULL,
                                                    "--frequency: '%s' is not a frequency in Hz (1..%d).",
                                                    optarg, CONFIG_FREQUENCY_MAX);
                        arg_frequency = v;
                        break;
                }
                case '?':
                        if (optopt >= ARG_VERSION || (optopt > 0 && strchr("h", optopt)))
                                return -usage_error(NULL, "Option '%s' needs an argument.",
                                                    argv[optind - 1]);
                        if (optopt > 0)
                                return -usage_error(NULL, "Unknown option '-%c'.", optopt);
                        return -usage_error(NULL, "Unknown option '%s'.", argv[optind - 1]);
                default:
                        return -usage_error(NULL, "Unhandled option.");
                }

        if (arg_system && arg_bus_socket)
                return -usage_error(NULL, "--system and --bus-socket exclude each other.");
        return 1;
}

static int run(int argc, char *argv[]) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        const Verb *verb = NULL;
        unsigned n_args;
        int r;

        log_open("cgprofctl");
        r = parse_argv(argc, argv);
        if (r <= 0)
                return r == 0 ? EXIT_SUCCESS : EXIT_USAGE;

        if (optind >= argc)
                return usage_error(NULL, "Missing command.");
        verb = find_verb(argv[optind]);
        if (!verb)
                return usage_error(NULL, "Unknown command '%s'.", argv[optind]);

        n_args = (unsigned) (argc - optind - 1);
        if (n_args < verb->min_args)
                return usage_error(verb, "%s: missing argument.", verb->name);
        if (n_args > verb->max_args)
                return usage_error(verb, "%s: unexpected argument '%s'.", verb->name,
                                   argv[optind + 1 + verb->max_args]);
        for (size_t i = 0; i < ELEMENTSOF(option_names); i++)
                if ((arg_options & (1u << i)) && !(verb->options & (1u << i)))
                        return usage_error(verb, "%s: %s does not apply.", verb->name, option_names[i]);

        if (verb->verify) {
                r = verb->verify(argv + optind + 1);
                if (r != 0)
                        return r;
        }
        if (verb->bus) {
                r = connect_agent(&bus);
                if (r != 0)
                        return r;
        }
        return verb->run(bus, argv + optind + 1);
}

int main(int argc, char *argv[]) {
        int r = run(argc, argv);

        free(arg_target);
        free(arg_namespace);
        free(arg_pod_name);
        free(arg_container_name);
        return r;
}
