/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cgprofctl: the control CLI of cgprofd, over its private D-Bus socket.
 * Exit codes: 0 ok, 1 failure, 2 usage, 3 not found. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <systemd/sd-bus.h>

#include <fcntl.h>

#include "cgprof-version.h"
#include "config.h"
#include "log.h"
#include "report.h"

#define DEFAULT_BUS_SOCKET "/run/cgprof/bus"
#define EXIT_USAGE 2
#define EXIT_NOT_FOUND 3

static const char *arg_bus_socket = DEFAULT_BUS_SOCKET;
static bool arg_json = false;
static unsigned arg_formats = 0;

static void help(void) {
        printf("%s [OPTIONS...] COMMAND\n\n"
               "Controls cgprofd.\n\n"
               "Commands:\n"
               "  status                 Show the agent's state\n"
               "  report DIR             Re-render a report directory in other formats\n"
               "                         (from its profile.pb.gz, else profile.folded)\n\n"
               "Options:\n"
               "  -h --help              Show this help\n"
               "     --version           Show the version\n"
               "     --bus-socket PATH   The agent's control socket (default: %s)\n"
               "     --json              Print JSON\n"
               "     --format FORMAT     With report: folded, json, pprof, svg, speedscope\n"
               "                         (repeatable or comma-separated; default: all)\n",
               program_invocation_short_name, DEFAULT_BUS_SOCKET);
}

static int connect_agent(sd_bus **ret) {
        _cleanup_free_ char *address = NULL;
        sd_bus *bus = NULL;
        int r;

        if (asprintf(&address, "unix:path=%s", arg_bus_socket) < 0)
                return log_oom();
        r = sd_bus_new(&bus);
        if (r < 0)
                return log_error_errno(r, "Failed to allocate a bus: %m");
        if ((r = sd_bus_set_address(bus, address)) < 0 || (r = sd_bus_start(bus)) < 0) {
                sd_bus_unref(bus);
                return log_error_errno(r, "Failed to connect to cgprofd at %s: %m", arg_bus_socket);
        }
        *ret = bus;
        return 0;
}

static void print_kv(const cJSON *j, const char *key, const char *label) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
        if (cJSON_IsString(v))
                printf("%18s: %s\n", label, v->valuestring);
        else if (cJSON_IsNumber(v))
                printf("%18s: %.15g\n", label, v->valuedouble);
        else if (cJSON_IsBool(v))
                printf("%18s: %s\n", label, cJSON_IsTrue(v) ? "yes" : "no");
}

static int cmd_status(sd_bus *bus) {
        sd_bus_error error = SD_BUS_ERROR_NULL;
        sd_bus_message *reply = NULL;
        const char *json;
        int r;

        r = sd_bus_call_method(bus, NULL, "/io/cgprof/Agent1", "io.cgprof.Agent1", "GetStatus", &error,
                               &reply, "");
        if (r < 0) {
                log_error("Failed to get the agent's status: %s", error.message ?: strerror(-r));
                sd_bus_error_free(&error);
                return r;
        }
        r = sd_bus_message_read(reply, "s", &json);
        if (r < 0) {
                sd_bus_message_unref(reply);
                return log_error_errno(r, "Failed to parse the reply: %m");
        }

        if (arg_json)
                printf("%s\n", json);
        else {
                cJSON *j = cJSON_Parse(json);
                if (!j) {
                        sd_bus_message_unref(reply);
                        return log_error_errno(EBADMSG, "The agent sent invalid JSON.");
                }
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
                const cJSON *sessions = cJSON_GetObjectItemCaseSensitive(j, "sessions"), *s;
                printf("%18s: %d\n", "Active sessions", cJSON_GetArraySize(sessions));
                cJSON_ArrayForEach (s, sessions) {
                        const cJSON *id = cJSON_GetObjectItem(s, "id"),
                                    *cg = cJSON_GetObjectItem(s, "cgroup"),
                                    *st = cJSON_GetObjectItem(s, "state"),
                                    *n = cJSON_GetObjectItem(s, "samples");
                        printf("%18s  %s %s %s (%.0f samples)\n", "", cJSON_GetStringValue(id),
                               cJSON_GetStringValue(st), cJSON_GetStringValue(cg), cJSON_GetNumberValue(n));
                }
                cJSON_Delete(j);
        }
        sd_bus_message_unref(reply);
        return 0;
}

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

static int cmd_report(const char *arg) {
        _cleanup_free_ char *error = NULL, *path = strdup(arg);
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

int main(int argc, char *argv[]) {
        enum {
                ARG_VERSION = 0x100,
                ARG_BUS_SOCKET,
                ARG_JSON,
                ARG_FORMAT
        };
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "bus-socket", required_argument, NULL, ARG_BUS_SOCKET },
                { "json", no_argument, NULL, ARG_JSON },
                { "format", required_argument, NULL, ARG_FORMAT },
                {},
        };
        sd_bus *bus = NULL;
        int c, r;

        log_open("cgprofctl");
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
                case ARG_JSON:
                        arg_json = true;
                        break;
                case ARG_FORMAT:
                        if (parse_formats(optarg) < 0)
                                return EXIT_USAGE;
                        break;
                default:
                        return EXIT_USAGE;
                }

        if (optind >= argc) {
                log_error("Missing command. See --help.");
                return EXIT_USAGE;
        }
        if (streq(argv[optind], "report")) {
                if (optind + 2 != argc) {
                        log_error("report takes one report directory. See --help.");
                        return EXIT_USAGE;
                }
                return cmd_report(argv[optind + 1]);
        }
        if (!streq(argv[optind], "status") || optind + 1 < argc) {
                log_error("Unknown command or argument '%s'. See --help.",
                          argv[optind + (streq(argv[optind], "status") ? 1 : 0)]);
                return EXIT_USAGE;
        }

        r = connect_agent(&bus);
        if (r < 0)
                return EXIT_FAILURE;
        r = cmd_status(bus);
        sd_bus_flush_close_unref(bus);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
