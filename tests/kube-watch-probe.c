/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Runs one KubeWatch on an sd-event loop and prints what it sees, one JSON
 * object per line (flushed), for the Kubernetes client's integration test:
 *
 *   {"sync":"begin"}
 *   {"event":"ADDED"|"MODIFIED"|"DELETED","name":N,"namespace":NS|null,"rv":RV,"uid":UID}
 *   {"vanished":"NS/NAME"|"NAME"}  (an object the list did not report again, before "done")
 *   {"sync":"done","rv":RV}
 *   {"stats":{"rv":RV,"synced":B,"relists":N,"reconnects":N,"events":N,"skipped":N,"lastError":N}}
 *     (every second, and once more at the end)
 *
 * Runs until SIGTERM/SIGINT, or until --exit-after-events events were
 * printed, then exits 0. A bad kubeconfig (or other start-up error) is a
 * message on stderr and exit status 1. Logs go to stderr
 * (--log-level=debug or $CGPROF_LOG_LEVEL for the state transitions). */

#include <getopt.h>
#include <limits.h>
#include <signal.h>

#include <cjson/cJSON.h>
#include <systemd/sd-event.h>

#include "kube-client.h"
#include "log.h"

static const char *arg_kubeconfig = NULL;
static const char *arg_context = NULL;
static const char *arg_path = NULL;
static const char *arg_field_selector = NULL;
static KubeWatchOptions arg_opts = {};
static uint64_t arg_exit_after_events = 0;

typedef struct Probe {
        sd_event *event;
        KubeWatch *watch;
        uint64_t printed_events;
} Probe;

static void print_json(cJSON *j) {
        char *s = j ? cJSON_PrintUnformatted(j) : NULL;

        if (!s) {
                log_oom();
                cJSON_Delete(j);
                return;
        }
        fputs(s, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        free(s);
        cJSON_Delete(j);
}

static void add_string_or_null(cJSON *j, const char *key, const char *value) {
        if (value)
                cJSON_AddStringToObject(j, key, value);
        else
                cJSON_AddNullToObject(j, key);
}

static void print_stats(Probe *p) {
        KubeWatchStats s;
        cJSON *j = cJSON_CreateObject(), *o = cJSON_CreateObject();

        kube_watch_stats(p->watch, &s);
        if (!j || !o) {
                cJSON_Delete(j);
                cJSON_Delete(o);
                log_oom();
                return;
        }
        add_string_or_null(o, "rv", s.resource_version);
        cJSON_AddBoolToObject(o, "synced", s.synced);
        cJSON_AddNumberToObject(o, "relists", (double) s.relists);
        cJSON_AddNumberToObject(o, "reconnects", (double) s.reconnects);
        cJSON_AddNumberToObject(o, "events", (double) s.events);
        cJSON_AddNumberToObject(o, "skipped", (double) s.skipped);
        cJSON_AddNumberToObject(o, "lastError", s.last_error);
        cJSON_AddItemToObject(j, "stats", o);
        print_json(j);
}

static void on_sync_begin(void *userdata) {
        cJSON *j = cJSON_CreateObject();
        if (j)
                cJSON_AddStringToObject(j, "sync", "begin");
        print_json(j);
}

static const char *meta_string(const cJSON *object, const char *key) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(object, "metadata");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool on_event(KubeEventType type, const cJSON *object, void *userdata) {
        static const char *const names[_KUBE_EVENT_TYPE_MAX] = {
                [KUBE_EVENT_ADDED] = "ADDED",
                [KUBE_EVENT_MODIFIED] = "MODIFIED",
                [KUBE_EVENT_DELETED] = "DELETED",
        };
        Probe *p = userdata;
        cJSON *j;

        if (arg_exit_after_events > 0 && p->printed_events >= arg_exit_after_events)
                return false; /* exiting: the rest of this read is not reported */

        j = cJSON_CreateObject();
        if (j) {
                cJSON_AddStringToObject(j, "event", names[type]);
                add_string_or_null(j, "name", meta_string(object, "name"));
                add_string_or_null(j, "namespace", meta_string(object, "namespace"));
                add_string_or_null(j, "rv", meta_string(object, "resourceVersion"));
                add_string_or_null(j, "uid", meta_string(object, "uid"));
        }
        print_json(j);

        p->printed_events++;
        if (arg_exit_after_events > 0 && p->printed_events >= arg_exit_after_events)
                (void) sd_event_exit(p->event, 0);
        return true; /* kept: the watch says it vanished when a relist does not list it */
}

static void on_vanished(const char *key, void *userdata) {
        cJSON *j = cJSON_CreateObject();

        if (j)
                cJSON_AddStringToObject(j, "vanished", key);
        print_json(j);
}

static void on_synced(void *userdata) {
        Probe *p = userdata;
        KubeWatchStats s;
        cJSON *j = cJSON_CreateObject();

        kube_watch_stats(p->watch, &s);
        if (j) {
                cJSON_AddStringToObject(j, "sync", "done");
                add_string_or_null(j, "rv", s.resource_version);
        }
        print_json(j);
}

static int on_stats_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        print_stats(userdata);
        (void) sd_event_source_set_time(s, usec + USEC_PER_SEC);
        return 0;
}

static int parse_uint(const char *s, const char *name, uint64_t max, uint64_t *ret) {
        char *end;
        unsigned long long v;

        errno = 0;
        v = strtoull(s, &end, 10);
        if (errno != 0 || end == s || *end || s[0] == '-' || v > max) {
                fprintf(stderr, "Invalid %s: %s\n", name, s);
                return -EINVAL;
        }
        *ret = v;
        return 0;
}

static int parse_argv(int argc, char *argv[]) {
        enum {
                ARG_KUBECONFIG = 0x100,
                ARG_CONTEXT,
                ARG_PATH,
                ARG_FIELD_SELECTOR,
                ARG_IDLE_SEC,
                ARG_TIMEOUT_SEC,
                ARG_BACKOFF_MIN_MSEC,
                ARG_BACKOFF_MAX_MSEC,
                ARG_PAGE_SIZE,
                ARG_MAX_EVENT_BYTES,
                ARG_EXIT_AFTER_EVENTS,
                ARG_LOG_LEVEL,
        };
        static const struct option options[] = {
                { "kubeconfig", required_argument, NULL, ARG_KUBECONFIG },
                { "context", required_argument, NULL, ARG_CONTEXT },
                { "path", required_argument, NULL, ARG_PATH },
                { "field-selector", required_argument, NULL, ARG_FIELD_SELECTOR },
                { "idle-sec", required_argument, NULL, ARG_IDLE_SEC },
                { "timeout-sec", required_argument, NULL, ARG_TIMEOUT_SEC },
                { "backoff-min-msec", required_argument, NULL, ARG_BACKOFF_MIN_MSEC },
                { "backoff-max-msec", required_argument, NULL, ARG_BACKOFF_MAX_MSEC },
                { "page-size", required_argument, NULL, ARG_PAGE_SIZE },
                { "max-event-bytes", required_argument, NULL, ARG_MAX_EVENT_BYTES },
                { "exit-after-events", required_argument, NULL, ARG_EXIT_AFTER_EVENTS },
                { "log-level", required_argument, NULL, ARG_LOG_LEVEL },
                { "help", no_argument, NULL, 'h' },
                {}
        };
        uint64_t v;
        int c, r;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        printf("%s --kubeconfig FILE [--context NAME] --path PATH [--field-selector SEL]\n"
                               "        [--idle-sec N] [--timeout-sec N] [--backoff-min-msec N] "
                               "[--backoff-max-msec N]\n"
                               "        [--page-size N] [--max-event-bytes N] [--exit-after-events N] "
                               "[--log-level LEVEL]\n",
                               program_invocation_short_name);
                        exit(EXIT_SUCCESS);
                case ARG_KUBECONFIG:
                        arg_kubeconfig = optarg;
                        break;
                case ARG_CONTEXT:
                        arg_context = optarg;
                        break;
                case ARG_PATH:
                        arg_path = optarg;
                        break;
                case ARG_FIELD_SELECTOR:
                        arg_field_selector = optarg;
                        break;
                case ARG_IDLE_SEC:
                        if (parse_uint(optarg, "--idle-sec", UINT_MAX, &v) < 0)
                                return -EINVAL;
                        arg_opts.idle_sec = (unsigned) v;
                        break;
                case ARG_TIMEOUT_SEC:
                        if (parse_uint(optarg, "--timeout-sec", UINT_MAX, &v) < 0)
                                return -EINVAL;
                        arg_opts.timeout_sec = (unsigned) v;
                        break;
                case ARG_BACKOFF_MIN_MSEC:
                        if (parse_uint(optarg, "--backoff-min-msec", UINT_MAX, &v) < 0)
                                return -EINVAL;
                        arg_opts.backoff_min_msec = (unsigned) v;
                        break;
                case ARG_BACKOFF_MAX_MSEC:
                        if (parse_uint(optarg, "--backoff-max-msec", UINT_MAX, &v) < 0)
                                return -EINVAL;
                        arg_opts.backoff_max_msec = (unsigned) v;
                        break;
                case ARG_PAGE_SIZE:
                        if (parse_uint(optarg, "--page-size", UINT_MAX, &v) < 0)
                                return -EINVAL;
                        arg_opts.page_size = (unsigned) v;
                        break;
                case ARG_MAX_EVENT_BYTES:
                        if (parse_uint(optarg, "--max-event-bytes", SIZE_MAX, &v) < 0)
                                return -EINVAL;
                        arg_opts.max_event_bytes = (size_t) v;
                        break;
                case ARG_EXIT_AFTER_EVENTS:
                        r = parse_uint(optarg, "--exit-after-events", UINT64_MAX, &arg_exit_after_events);
                        if (r < 0)
                                return r;
                        break;
                case ARG_LOG_LEVEL:
                        r = log_level_from_string(optarg);
                        if (r < 0) {
                                fprintf(stderr, "Invalid --log-level: %s\n", optarg);
                                return -EINVAL;
                        }
                        log_set_max_level(r);
                        break;
                default:
                        return -EINVAL;
                }
        }

        if (optind < argc) {
                fprintf(stderr, "Unexpected argument: %s\n", argv[optind]);
                return -EINVAL;
        }
        if (!arg_kubeconfig || !arg_path) {
                fprintf(stderr, "--kubeconfig and --path are required.\n");
                return -EINVAL;
        }
        if (arg_path[0] != '/') {
                fprintf(stderr, "--path must start with '/': %s\n", arg_path);
                return -EINVAL;
        }
        return 0;
}

static int run(int argc, char *argv[]) {
        _cleanup_(kube_config_freep) KubeConfig *config = NULL;
        _cleanup_(kube_client_freep) KubeClient *client = NULL;
        _cleanup_free_ char *error = NULL;
        sd_event_source *stats_timer = NULL;
        Probe p = {};
        uint64_t now;
        int r;

        const char *level = getenv("CGPROF_LOG_LEVEL");
        if (level && log_level_from_string(level) >= 0)
                log_set_max_level(log_level_from_string(level));
        log_open("kube-watch-probe");

        r = parse_argv(argc, argv);
        if (r < 0)
                return r;

        r = kube_config_from_kubeconfig(arg_kubeconfig, arg_context, &config, &error);
        if (r < 0) {
                fprintf(stderr, "%s\n", error ?: strerror(-r));
                return r;
        }

        r = sd_event_default(&p.event);
        if (r < 0)
                return log_error_errno(r, "Failed to get an event loop: %m");

        sigset_t ss;
        sigemptyset(&ss);
        sigaddset(&ss, SIGTERM);
        sigaddset(&ss, SIGINT);
        if (sigprocmask(SIG_BLOCK, &ss, NULL) < 0) {
                r = log_error_errno(errno, "Failed to block signals: %m");
                goto finish;
        }
        r = sd_event_add_signal(p.event, NULL, SIGTERM, NULL, NULL);
        if (r >= 0)
                r = sd_event_add_signal(p.event, NULL, SIGINT, NULL, NULL);
        if (r < 0) {
                log_error_errno(r, "Failed to watch signals: %m");
                goto finish;
        }

        r = kube_client_new(p.event, config, &client);
        if (r < 0) {
                log_error_errno(r, "Failed to create the Kubernetes client: %m");
                goto finish;
        }
        config = NULL; /* owned by the client now */

        const KubeWatchCallbacks cb = {
                .sync_begin = on_sync_begin,
                .event = on_event,
                .vanished = on_vanished,
                .key = KUBE_WATCH_KEY_NAME,
                .synced = on_synced,
        };
        r = kube_watch_new(client, arg_path, arg_field_selector, &arg_opts, &cb, &p, &p.watch);
        if (r < 0) {
                log_error_errno(r, "Failed to create the watch of %s: %m", arg_path);
                goto finish;
        }

        r = sd_event_now(p.event, CLOCK_MONOTONIC, &now);
        if (r >= 0)
                r = sd_event_add_time(p.event, &stats_timer, CLOCK_MONOTONIC, now + USEC_PER_SEC, 0,
                                      on_stats_timer, &p);
        if (r >= 0)
                r = sd_event_source_set_enabled(stats_timer, SD_EVENT_ON);
        if (r < 0) {
                log_error_errno(r, "Failed to add the stats timer: %m");
                goto finish;
        }

        r = kube_watch_start(p.watch);
        if (r < 0) {
                log_error_errno(r, "Failed to start the watch of %s: %m", arg_path);
                goto finish;
        }

        r = sd_event_loop(p.event);
        if (r < 0)
                log_error_errno(r, "Event loop failed: %m");
        print_stats(&p);

finish:
        sd_event_source_disable_unref(stats_timer);
        p.watch = kube_watch_free(p.watch);
        client = kube_client_free(client);
        sd_event_unref(p.event);
        return r;
}

int main(int argc, char *argv[]) {
        return run(argc, argv) < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
