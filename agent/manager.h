/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "cgroup-watch.h"
#include "config.h"
#include "process.h"
#include "sampler.h"
#include "symbolizer.h"

#define DEFAULT_STATE_DIR "/var/lib/cgprof/state"
#define DEFAULT_BUS_SOCKET "/run/cgprof/bus"
#define DRAIN_INTERVAL_USEC (1 * USEC_PER_SEC)

typedef struct Session Session;

/* A loaded config, shared by the manager and the sessions started under it:
 * a session keeps the profile it started with across reloads. */
typedef struct ConfigRef {
        unsigned n_ref;
        Config *config;
} ConfigRef;

ConfigRef *config_ref(ConfigRef *c);
ConfigRef *config_unref(ConfigRef *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(ConfigRef *, config_unref);

/* A cgroup the manager knows about and what it did with it. */
typedef struct CgroupState {
        char *path;
        Session *session; /* running or armed session for this cgroup, if any */
        bool done; /* a session for it ended: do not start another automatically */
} CgroupState;

typedef struct ManagerOptions {
        const char *config_path;
        const char *state_dir;
        const char *bus_socket;
        const char *node_name;
        SamplerMode attach_mode;
        bool no_kubernetes;
} ManagerOptions;

typedef struct Manager {
        sd_event *event;
        ManagerOptions opts;
        char *node_name;
        char *config_path;
        char *state_dir;
        char *bus_socket;

        ConfigRef *config;
        int report_dir_fd;
        char *report_dir;

        char *cgroup_root;
        int cgroup_root_fd;
        CgroupWatch *cgroup_watch;
        void *cgroups; /* tsearch: CgroupState by path */

        Sampler *sampler;
        Symbolizer *symbolizer;
        ProcessReader *process_reader;

        Session *sessions_by_slot[CGPROF_MAX_SESSIONS];
        Session **sessions; /* running and armed sessions */
        size_t n_sessions;
        uint64_t sessions_started, sessions_ended, sessions_failed;

        sd_event_source *drain_timer;
        sd_event_source *machine_timer;
        sd_event_source *proc_events;
        sd_event_source *sigterm, *sigint, *sighup;

        int bus_listen_fd;
        sd_event_source *bus_accept;
        sd_bus **bus_clients;
        size_t n_bus_clients;

        uint64_t drain_seq; /* incremented on every drain */
        uint64_t start_usec;
        bool stopping;
} Manager;

int manager_new(const ManagerOptions *opts, Manager **ret);
Manager *manager_free(Manager *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(Manager *, manager_free);

int manager_startup(Manager *m);
int manager_run(Manager *m);

/* Drains the sampler maps into the sessions (twice: everything recorded so far). */
int manager_drain(Manager *m, bool full);

/* Session bookkeeping, used by session.c. */
int manager_add_session(Manager *m, Session *s);
void manager_remove_session(Manager *m, Session *s);
/* Points every known cgroup at or below 'path' to the deepest running session. */
void manager_assign_cgroups_below(Manager *m, const char *path);

/* Status as a JSON document (for the bus API). */
char *manager_status_json(Manager *m);

/* manager-bus.c */
int manager_bus_listen(Manager *m);
void manager_bus_close(Manager *m);
