/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cgprofctl's shared pieces: the context every verb gets (the command
 * line's options, the verb, what its verify step parsed, the agent's
 * connection), the verb table's entries, and the verbs of each ctl-*.c.
 *
 * Every verb returns an exit status, having logged what went wrong:
 * 0 ok, 1 failure, 2 usage (or an argument the agent refused), 3 not found. */
#pragma once

#include <systemd/sd-bus.h>

#include <stdbool.h>
#include <stdint.h>

#include "macro.h"

#define DEFAULT_BUS_SOCKET "/run/cgprof/bus"
#define EXIT_USAGE 2
#define EXIT_NOT_FOUND 3

/* StartSession's duration 0 means "the profile's duration", so "until
 * stopped" is asked for as a duration longer than any session: 100 years. The
 * agent never reaches it; it shows as "until stopped" here. */
#define SESSION_UNTIL_STOPPED_USEC (100ULL * 365 * 24 * 3600 * USEC_PER_SEC)

/* record: the transient cgroups, below the cgroup v2 root. */
#define RECORD_SLICE "cgprof-record.slice"

/* Options that only some verbs take. */
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
        OPT_BY = 1u << 10,
} Option;

typedef struct Verb Verb;

typedef struct Ctl {
        /* The command line's options (parse_argv()). */
        const char *bus_socket; /* NULL: DEFAULT_BUS_SOCKET */
        bool system;
        bool json;
        unsigned options; /* the Options given */
        unsigned formats; /* --format: 1 << ReportFormat; 0: all */
        const char *pod, *container, *cgroup, *profile, *filter;
        uint64_t duration_usec, since_usec, frequency;
        bool all;
        bool by_rank; /* report --by rank */

        /* The verb being run, and what its verify step parsed before connecting. */
        const Verb *verb;
        char *target; /* start: "pod:NS/POD[/C]" or "cgroup:PATH" */
        char *namespace, *pod_name, *container_name; /* check */

        sd_bus *bus; /* the agent, for verbs with .bus */
} Ctl;

void ctl_done(Ctl *c);

struct Verb {
        const char *name;
        unsigned min_args, max_args;
        unsigned options; /* the Options it takes */
        bool bus;
        int (*verify)(Ctl *c, char **args); /* checks the arguments before connecting */
        int (*run)(Ctl *c, char **args);
        const char *usage;
};

/* Logs a usage error and the verb's usage line (v NULL: a pointer to
 * --help); returns EXIT_USAGE. */
int usage_error(const Verb *v, const char *fmt, ...) _printf_(2, 3);

/* Splits "NS/POD" or "NS/POD/CONTAINER" (with_container); no part empty. */
int parse_pod_ref(const char *arg, bool with_container, char **ret_ns, char **ret_pod, char **ret_container);

/* ctl-status.c: the agent and its configuration. */
int verb_status(Ctl *c, char **args);
int verb_targets(Ctl *c, char **args);
int verify_check(Ctl *c, char **args);
int verb_check(Ctl *c, char **args);

/* ctl-sessions.c: on-demand sessions. */
int verb_sessions(Ctl *c, char **args);
int verify_start(Ctl *c, char **args);
int verb_start(Ctl *c, char **args);
int verify_stop(Ctl *c, char **args);
int verb_stop(Ctl *c, char **args);

/* ctl-reports.c: written reports. */
int verb_reports(Ctl *c, char **args);
int verb_report(Ctl *c, char **args);

/* ctl-record.c: run a command in a new cgroup and profile it. */
int verb_record(Ctl *c, char **command);
