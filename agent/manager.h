/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "cgroup-watch.h"
#include "config.h"
#include "kube-client.h"
#include "kube-object.h"
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
        bool container;     /* a Kubernetes container's cgroup (see kube-cgroup.h) */
        char pod_uid[37];
        char container_id[65];
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
        const char *kubeconfig;       /* NULL: in-cluster configuration */
        unsigned kube_idle_sec;       /* silent watch timeout (0: default) */
        unsigned kube_backoff_max_msec; /* reconnect backoff cap (0: default) */
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

        /* Kubernetes (manager-kube.c) */
        KubeClient *kube;
        char *kube_server;
        KubeWatch *kube_pod_watch, *kube_ns_watch;
        void *kube_pods;       /* tsearch: pods of this node by UID */
        void *kube_namespaces; /* tsearch: namespaces by name */
        uint64_t kube_sync_generation, kube_ns_generation;
        bool kube_pods_synced, kube_ns_synced;

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
/* reason: why it ended; "duration" and "stopped" mark the cgroup done (no
 * automatic restart), other endings (untargeted, pod-deleted...) do not. */
void manager_remove_session(Manager *m, Session *s, const char *reason);
/* Points every known cgroup at or below 'path' to the deepest running session. */
void manager_assign_cgroups_below(Manager *m, const char *path);

/* Starts or ends the session a cgroup needs now (pod rules for container
 * cgroups when Kubernetes is on, else host rules). */
void manager_reconcile_cgroup(Manager *m, CgroupState *c);

/* manager-kube.c */
int manager_kube_start(Manager *m);
void manager_kube_free(Manager *m);
bool manager_kube_reconcile_container(Manager *m, CgroupState *c);
const KubePod *manager_kube_pod(Manager *m, const char *uid);
const KubeNamespace *manager_kube_namespace(Manager *m, const char *name);

/* Status as a JSON document (for the bus API). */
char *manager_status_json(Manager *m);

/* manager-bus.c */
int manager_bus_listen(Manager *m);
int manager_kube_status(Manager *m, cJSON *j);
void manager_bus_close(Manager *m);
