/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cgprofctl: the control CLI of cgprofd, a client of the D-Bus API in
 * bus-api.h over the agent's private socket (or the system bus).
 *
 * This file: the help, the options, and the verb table that dispatches to
 * the verbs of ctl-status.c, ctl-sessions.c, ctl-reports.c and ctl-record.c.
 * Every verb returns an exit status, having logged what went wrong:
 * 0 ok, 1 failure, 2 usage (or an argument the agent refused), 3 not found. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bus-api.h"
#include "cgprof-version.h"
#include "config.h"
#include "ctl-bus.h"
#include "ctl-output.h"
#include "ctl.h"
#include "duration.h"
#include "log.h"
#include "report.h"

static const char *const option_names[] = {
        "--pod",   "--container", "--cgroup",    "--profile", "--duration", "--all",
        "--since", "--filter",    "--frequency", "--format",  "--by",
};

static const Verb verbs[] = {
        { "status", 0, 0, 0, true, NULL, verb_status, "status" },
        { "targets", 0, 0, 0, true, NULL, verb_targets, "targets" },
        { "sessions", 0, 0, 0, true, NULL, verb_sessions, "sessions" },
        { "check", 0, 1, 0, true, verify_check, verb_check, "check [NAMESPACE/POD[/CONTAINER]]" },
        { "start", 0, 0, OPT_POD | OPT_CONTAINER | OPT_CGROUP | OPT_PROFILE | OPT_DURATION, true,
          verify_start, verb_start,
          "start (--pod NAMESPACE/POD [--container NAME] | --cgroup PATH) [--profile P] [--duration D]" },
        { "stop", 0, 1, OPT_ALL, true, verify_stop, verb_stop, "stop ID|--all" },
        { "reports", 0, 0, OPT_SINCE | OPT_FILTER, true, NULL, verb_reports,
          "reports [--since T] [--filter F]" },
        { "record", 1, UINT_MAX, OPT_PROFILE | OPT_FREQUENCY | OPT_DURATION, true, NULL, verb_record,
          "record [--profile P] [--frequency F] [--duration D] -- COMMAND [ARGS...]" },
        { "report", 1, UINT_MAX, OPT_FORMAT | OPT_BY, false, NULL, verb_report,
          "report DIR [--format FORMAT] | report --by rank DIR..." },
};

static const Verb *find_verb(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(verbs); i++)
                if (streq(verbs[i].name, name))
                        return verbs + i;
        return NULL;
}

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
               "  check                      Show machineConfig on this node: per sysctl the\n"
               "                             desired value, the entry (and nodeSelector) that\n"
               "                             wants it, the actual value and its state\n"
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
               "                             (from its profile.pb.gz, else profile.folded)\n"
               "  report --by rank DIR...    One view across the ranks of a distributed job,\n"
               "                             from one or more report directories\n\n"
               "Options:\n"
               "  -h --help                  Show this help\n"
               "     --version               Show the version\n"
               "     --bus-socket PATH       The agent's control socket (default: %3$s)\n"
               "     --system                Talk to %4$s on the system bus instead\n"
               "     --json                  Print JSON (camelCase keys, as the D-Bus results)\n"
               "     --format FORMAT         With report: folded, json, pprof, svg, speedscope\n"
               "                             (repeatable or comma-separated; default: all)\n"
               "     --by rank               With report: per rank, then where ranks differ\n\n"
               "Only root may control cgprofd. Exit status: 0 ok, 1 failure, 2 usage or an\n"
               "argument the agent refused (e.g. an unknown profile), 3 not found (pod,\n"
               "container, cgroup, session or report directory).\n",
               program_invocation_short_name, RECORD_SLICE, DEFAULT_BUS_SOCKET, CGPROF_BUS_NAME);
}

int usage_error(const Verb *v, const char *fmt, ...) {
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

int parse_pod_ref(const char *arg, bool with_container, char **ret_ns, char **ret_pod,
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
        uint64_t now = now_usec(CLOCK_REALTIME);
        *ret = d < now ? now - d : 0;
        return 0;
}

static int parse_formats(const char *arg, unsigned *formats) {
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
                *formats |= 1u << f;
        }
        return 0;
}

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
        ARG_BY,
};

static const struct option long_options[] = {
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
        { "by", required_argument, NULL, ARG_BY },
        {},
};

/* --frequency: a frequency in Hz, 1..CONFIG_FREQUENCY_MAX. */
static int parse_frequency(const char *s, uint64_t *ret) {
        char *end;

        errno = 0;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno != 0 || end == s || *end || s[0] == '-' || v == 0 || v > CONFIG_FREQUENCY_MAX)
                return -EINVAL;
        *ret = v;
        return 0;
}

/* The session and report options (those a verb takes or refuses, in
 * c->options); 0, or -EXIT_USAGE having logged why. */
static int parse_verb_option(int opt, const char *arg, Ctl *c) {
        switch (opt) {
        case ARG_FORMAT:
                c->options |= OPT_FORMAT;
                if (parse_formats(arg, &c->formats) < 0)
                        return -usage_error(NULL, "Invalid --format.");
                return 0;
        case ARG_POD:
                c->options |= OPT_POD;
                c->pod = arg;
                return 0;
        case ARG_CONTAINER:
                c->options |= OPT_CONTAINER;
                c->container = arg;
                return 0;
        case ARG_CGROUP:
                c->options |= OPT_CGROUP;
                c->cgroup = arg;
                return 0;
        case ARG_PROFILE:
                c->options |= OPT_PROFILE;
                if (!*arg)
                        return -usage_error(NULL, "--profile: empty profile name.");
                c->profile = arg;
                return 0;
        case ARG_DURATION:
                c->options |= OPT_DURATION;
                if (parse_duration(arg, &c->duration_usec) < 0)
                        return -usage_error(NULL,
                                            "--duration: invalid duration '%s' (e.g. 500ms, 10s, 5m, 1h; "
                                            "0: until stopped).",
                                            arg);
                return 0;
        case ARG_ALL:
                c->options |= OPT_ALL;
                c->all = true;
                return 0;
        case ARG_SINCE:
                c->options |= OPT_SINCE;
                if (parse_since(arg, &c->since_usec) < 0)
                        return -usage_error(NULL,
                                            "--since: '%s' is neither a duration (e.g. 1h, 30m) nor a "
                                            "UNIX time in seconds.",
                                            arg);
                return 0;
        case ARG_FILTER:
                c->options |= OPT_FILTER;
                c->filter = arg;
                return 0;
        case ARG_BY:
                c->options |= OPT_BY;
                if (!streq(arg, "rank"))
                        return -usage_error(NULL, "--by: '%s' is not a view (rank).", arg);
                c->by_rank = true;
                return 0;
        case ARG_FREQUENCY:
                c->options |= OPT_FREQUENCY;
                if (parse_frequency(arg, &c->frequency) < 0)
                        return -usage_error(NULL, "--frequency: '%s' is not a frequency in Hz (1..%d).", arg,
                                            CONFIG_FREQUENCY_MAX);
                return 0;
        default:
                return -usage_error(NULL, "Unhandled option.");
        }
}

/* getopt_long() returned '?': an unknown option, or one missing its
 * argument. Returns -EXIT_USAGE, having logged which. */
static int bad_option(char *argv[]) {
        if (optopt >= ARG_VERSION || (optopt > 0 && strchr("h", optopt)))
                return -usage_error(NULL, "Option '%s' needs an argument.", argv[optind - 1]);
        if (optopt > 0)
                return -usage_error(NULL, "Unknown option '-%c'.", optopt);
        return -usage_error(NULL, "Unknown option '%s'.", argv[optind - 1]);
}

/* Returns 1 to go on with the command at argv[optind], 0 when done (--help,
 * --version), or -EXIT_USAGE having logged why. */
static int parse_argv(int argc, char *argv[], Ctl *c) {
        int opt, r;

        /* Options may come after the command (permuted); "--" ends them, so
         * record's COMMAND keeps its own. */
        opterr = 0; /* our messages, not getopt's */
        while ((opt = getopt_long(argc, argv, "h", long_options, NULL)) >= 0)
                switch (opt) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("cgprofctl %s\n", CGPROF_VERSION);
                        return 0;
                case ARG_BUS_SOCKET:
                        c->bus_socket = optarg;
                        break;
                case ARG_SYSTEM:
                        c->system = true;
                        break;
                case ARG_JSON:
                        c->json = true;
                        break;
                case '?':
                        return bad_option(argv);
                default:
                        r = parse_verb_option(opt, optarg, c);
                        if (r < 0)
                                return r;
                }

        if (c->system && c->bus_socket)
                return -usage_error(NULL, "--system and --bus-socket exclude each other.");
        return 1;
}

void ctl_done(Ctl *c) {
        sd_bus_flush_close_unref(c->bus);
        free(c->target);
        free(c->namespace);
        free(c->pod_name);
        free(c->container_name);
}

static int run(int argc, char *argv[]) {
        _cleanup_(ctl_done) Ctl c = {};
        unsigned n_args;
        int r;

        log_open("cgprofctl");
        r = parse_argv(argc, argv, &c);
        if (r <= 0)
                return r == 0 ? EXIT_SUCCESS : EXIT_USAGE;

        if (optind >= argc)
                return usage_error(NULL, "Missing command.");
        c.verb = find_verb(argv[optind]);
        if (!c.verb)
                return usage_error(NULL, "Unknown command '%s'.", argv[optind]);

        n_args = (unsigned) (argc - optind - 1);
        if (n_args < c.verb->min_args)
                return usage_error(c.verb, "%s: missing argument.", c.verb->name);
        if (n_args > c.verb->max_args)
                return usage_error(c.verb, "%s: unexpected argument '%s'.", c.verb->name,
                                   argv[optind + 1 + c.verb->max_args]);
        for (size_t i = 0; i < ELEMENTSOF(option_names); i++)
                if ((c.options & (1u << i)) && !(c.verb->options & (1u << i)))
                        return usage_error(c.verb, "%s: %s does not apply.", c.verb->name, option_names[i]);

        if (c.verb->verify) {
                r = c.verb->verify(&c, argv + optind + 1);
                if (r != 0)
                        return r;
        }
        if (c.verb->bus) {
                r = ctl_connect(&c);
                if (r != 0)
                        return r;
        }
        return c.verb->run(&c, argv + optind + 1);
}

int main(int argc, char *argv[]) {
        return run(argc, argv);
}
