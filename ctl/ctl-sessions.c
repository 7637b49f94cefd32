/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cgprofctl sessions, start, stop: on-demand sessions and their progress. */
#include <cjson/cJSON.h>
#include <systemd/sd-id128.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus-api.h"
#include "cgroup-util.h"
#include "ctl-bus.h"
#include "ctl-output.h"
#include "ctl.h"
#include "fileio.h"
#include "log.h"

/* One entry of a ListSessions reply. */
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

/* Returns 0 or an exit status. An optional listing that fails is empty
 * (logged at debug level): what needs it only less, the call after it says
 * why when the agent cannot be reached. */
static int list_sessions(Ctl *c, bool optional, SessionList *ret) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        SessionList l = {};
        int r;

        r = ctl_call(c, "ListSessions", &error, &l.reply, "");
        if (r < 0 && optional) {
                log_debug("Failed to list sessions, going on without: %s",
                          sd_bus_error_is_set(&error) ? strna(error.message) : strerror(-r));
                *ret = (SessionList){};
                return 0;
        }
        if (r < 0)
                return call_failed(&error, r, "Failed to list sessions");
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
                if (optional) {
                        log_debug_errno(r, "Failed to parse the sessions, going on without: %m");
                        *ret = (SessionList){};
                        return 0;
                }
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

static char *session_what(const SessionInfo *s) {
        return format_profiled(s->namespace, s->pod, s->container, s->cgroup);
}

static bool duration_unlimited(uint64_t usec) {
        return usec == 0 || usec >= SESSION_UNTIL_STOPPED_USEC;
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
        char elapsed[TIMESPAN_MAX], remaining[TIMESPAN_MAX], samples[UINT64_DECIMAL_MAX];
        uint64_t rem = session_remaining(s, now);

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
        snprintf(samples, sizeof(samples), "%" PRIu64, s->samples);

        return table_add(t, s->id, s->state, s->target, s->profile, what, elapsed, remaining, samples);
}

static int print_sessions(const Ctl *c, const SessionInfo *items, size_t n) {
        uint64_t now = now_usec(CLOCK_REALTIME);

        if (c->json) {
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
        if (table_add(&t, "ID", "STATE", "TARGET", "PROFILE", "PROFILING", "ELAPSED", "REMAINING",
                      "SAMPLES") < 0)
                return log_oom(), EXIT_FAILURE;
        for (size_t i = 0; i < n; i++)
                if (sessions_table_add(&t, items + i, now) < 0)
                        return log_oom(), EXIT_FAILURE;
        table_print(&t);
        return EXIT_SUCCESS;
}

int verb_sessions(Ctl *c, char **args) {
        _cleanup_(session_list_done) SessionList l = {};
        int r;

        r = list_sessions(c, false, &l);
        if (r != 0)
                return r;
        return print_sessions(c, l.items, l.n);
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

static uint64_t requested_duration(const Ctl *c) {
        if (!(c->options & OPT_DURATION))
                return 0; /* the profile's */
        return c->duration_usec == 0 ? SESSION_UNTIL_STOPPED_USEC : c->duration_usec;
}

/* Returns 0 or an exit status; *ret_id is the new session's ID. */
static int start_session(Ctl *c, const char *target, const char *profile, uint64_t duration_usec,
                         char **ret_id) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *id;
        int r;

        r = ctl_call(c, "StartSession", &error, &reply, "sst", target, strempty(profile), duration_usec);
        if (r < 0)
                return call_failed(&error, r, "Failed to start a session of %s", target);
        r = sd_bus_message_read(reply, "s", &id);
        if (r < 0)
                return reply_parse_failed(r);
        *ret_id = strdup(id);
        if (!*ret_id)
                return log_oom(), EXIT_FAILURE;
        return 0;
}

int verify_start(Ctl *c, char **args) {
        const Verb *v = c->verb;
        int r;

        if (!!c->pod == !!c->cgroup)
                return usage_error(v, "start: needs either --pod NAMESPACE/POD or --cgroup PATH.");
        if (c->container && !c->pod)
                return usage_error(v, "start: --container needs --pod.");
        if (c->pod) {
                _cleanup_free_ char *ns = NULL, *pod = NULL;
                r = parse_pod_ref(c->pod, false, &ns, &pod, NULL);
                if (r == -ENOMEM)
                        return log_oom(), EXIT_FAILURE;
                if (r < 0)
                        return usage_error(v, "start: --pod '%s' is not NAMESPACE/POD.", c->pod);
                if (c->container && (!*c->container || strchr(c->container, '/')))
                        return usage_error(v, "start: --container '%s' is not a container name.",
                                           c->container);
                if (asprintf(&c->target, "pod:%s/%s%s%s", ns, pod, c->container ? "/" : "",
                             strempty(c->container)) < 0)
                        return log_oom(), EXIT_FAILURE;
        } else {
                _cleanup_free_ char *rel = NULL;
                if (cgroup_relative(c->cgroup, &rel) < 0)
                        return log_oom(), EXIT_FAILURE;
                if (asprintf(&c->target, "cgroup:%s", rel) < 0)
                        return log_oom(), EXIT_FAILURE;
        }
        return 0;
}

int verb_start(Ctl *c, char **args) {
        _cleanup_(session_list_done) SessionList l = {};
        _cleanup_free_ char *id = NULL;
        const char *target = c->target;
        const SessionInfo *s;
        int r;

        r = start_session(c, target, c->profile, requested_duration(c), &id);
        if (r != 0)
                return r;

        /* Its progress (a session of a short duration may be gone already). */
        r = list_sessions(c, true, &l);
        s = r == 0 ? session_list_find(&l, id) : NULL;
        if (c->json) {
                if (s)
                        return print_json(session_to_json(s, now_usec(CLOCK_REALTIME)));
                cJSON *o = cJSON_CreateObject();
                if (o)
                        cJSON_AddStringToObject(o, "id", id);
                return print_json(o);
        }
        printf("Started session %s of %s.\n", id, target);
        if (s) {
                char buf[TIMESPAN_MAX];
                uint64_t rem = session_remaining(s, now_usec(CLOCK_REALTIME));
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
                *ret = u64_from_double(total->valuedouble);
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

int verify_stop(Ctl *c, char **args) {
        if (c->all == !!args[0])
                return usage_error(c->verb, "stop: needs a session ID or --all (not both).");
        if (!c->all && (strlen(args[0]) == 0 || strlen(args[0]) > SD_ID128_STRING_MAX - 1 ||
                        strspn(args[0], "0123456789abcdef") != strlen(args[0])))
                return usage_error(c->verb,
                                   "stop: '%s' is not a session ID (32 hexadecimal digits, or a prefix).",
                                   args[0]);
        return 0;
}

/* stop --all: every session, as listed before. Returns an exit status. */
static int stop_all(Ctl *c, const SessionList *l, uint64_t now) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *item;
        cJSON *a = NULL;
        size_t n = 0;
        int r;

        r = ctl_call_stop(c, "StopAllSessions", &error, &reply, "");
        if (r < 0)
                return call_failed(&error, r, "Failed to stop the sessions");
        if (c->json && !(a = cJSON_CreateArray()))
                return log_oom(), EXIT_FAILURE;
        for (size_t i = 0; !c->json && i < l->n; i++) {
                _cleanup_free_ char *what = session_what(l->items + i);
                char buf[TIMESPAN_MAX];
                printf("Stopped session %s (%s) after %s.\n", l->items[i].id, strna(what),
                       format_timespan(session_elapsed(l->items + i, now), buf, sizeof(buf)));
        }
        r = sd_bus_message_enter_container(reply, 'a', "s");
        while (r >= 0 && (r = sd_bus_message_read(reply, "s", &item)) > 0) {
                uint64_t samples;
                n++;
                if (c->json)
                        cJSON_AddItemToArray(a, cJSON_CreateString(item));
                else if (report_samples(item, &samples))
                        printf("Report: %s (%" PRIu64 " samples)\n", item, samples);
                else
                        printf("Report: %s\n", isempty_str(item) ? "(none written)" : item);
        }
        if (r < 0) {
                cJSON_Delete(a);
                return reply_parse_failed(r);
        }
        if (c->json)
                return print_json(a);
        printf("Stopped %zu session%s.\n", n, n == 1 ? "" : "s");
        return EXIT_SUCCESS;
}

int verb_stop(Ctl *c, char **args) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(session_list_done) SessionList l = {};
        uint64_t now = now_usec(CLOCK_REALTIME);
        const char *id, *dir;
        int r;

        /* What they did so far; the stop itself reports only the directory.
         * A whole ID, or --all, needs no more from the listing: whatever is
         * in it (a name) cannot stop a stop. */
        r = list_sessions(c, c->all || strlen(args[0]) == SD_ID128_STRING_MAX - 1, &l);
        if (r != 0)
                return r;
        if (c->all)
                return stop_all(c, &l, now);

        r = resolve_session(&l, args[0], &id);
        if (r != 0)
                return r;
        const SessionInfo *s = session_list_find(&l, id);

        r = ctl_call_stop(c, "StopSession", &error, &reply, "s", id);
        if (r < 0)
                return call_failed(&error, r, "Failed to stop session %s", id);
        r = sd_bus_message_read(reply, "s", &dir);
        if (r < 0)
                return reply_parse_failed(r);
        uint64_t samples = s ? s->samples : 0;
        bool have_samples = report_samples(dir, &samples) || s;

        if (c->json) {
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
