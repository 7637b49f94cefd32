/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "control-deps.h"
#include "sessions.h"

/* manager-control.c: what the control API does, without D-Bus (the bus
 * file only marshals). Operations that can fail return a negative errno and
 * a malloc()ed message in *ret_error: -ENOENT (not found), -EBUSY (a session
 * already runs), -EINVAL (invalid argument); anything else is a failure.
 * Borrowed strings stay valid until the event loop runs again. */

/* The target of sessions started on request for a cgroup no rule selects. */
extern const Target control_on_demand_target;

typedef struct ControlTarget {
        const char *name, *profile;
        const char *kind; /* "pod", "cgroup", "pod+cgroup", "default" (enableDefault) */
        bool disabled;
        char *owned; /* what name points to, when it is not the config's */
} ControlTarget;
/* The config's targets in order, then enableDefault (disabled when off),
 * then the ProfileConfigs' targets, named "NAME (ProfileConfig NS/OBJECT)". */
int control_list_targets(ControlRoom *room, ControlTarget **ret, size_t *ret_n);
void control_targets_free(ControlTarget *l, size_t n);

typedef struct ControlSession {
        const char *id, *state, *target, *profile; /* state: "running" or "armed" */
        const char *namespace, *pod, *container, *cgroup; /* "" for a host cgroup */
        uint64_t start_usec; /* CLOCK_REALTIME, 0 when armed */
        uint64_t duration_usec; /* 0: until stopped */
        uint64_t samples; /* recorded so far */
} ControlSession;
int control_list_sessions(ControlRoom *room, ControlSession **ret, size_t *ret_n);

typedef struct ControlReason {
        const char *target, *reason;
} ControlReason;
typedef struct ControlCheck {
        bool targeted;
        const char *target, *profile; /* "" when not targeted */
        ControlReason *reasons; /* every target that does not select it, with its failed condition */
        size_t n_reasons;
        char **owned; /* strv: strings the above point to */
} ControlCheck;
void control_check_done(ControlCheck *c);
/* Whether a pod's container (container "": the pod's first container) is
 * targeted, by which rule, and why the other rules do not select it. */
int control_check(ControlRoom *room, const char *namespace, const char *pod, const char *container,
                  ControlCheck *ret, char **ret_error);

typedef enum ControlTargetKind {
        CONTROL_TARGET_POD,
        CONTROL_TARGET_CGROUP,
} ControlTargetKind;
typedef struct ControlTargetSpec {
        ControlTargetKind kind;
        char *namespace, *pod, *container; /* pod: container NULL when not given */
        char *cgroup; /* cgroup: normalized, relative to the cgroup root, never the root */
} ControlTargetSpec;
void control_target_spec_done(ControlTargetSpec *s);
/* Parses "pod:NAMESPACE/POD", "pod:NAMESPACE/POD/CONTAINER" or
 * "cgroup:PATH" (leading and trailing '/' dropped; no empty, "." or ".."
 * component; not the root). -EINVAL with a message otherwise. */
int control_target_spec_parse(const char *s, ControlTargetSpec *ret, char **ret_error);

/* Starts a session now (see StartSession in bus-api.h); profile "" or
 * NULL: the target's; duration_usec 0: the profile's. */
int control_start_session(ControlRoom *room, const char *target, const char *profile, uint64_t duration_usec,
                          char **ret_id, char **ret_error);
/* Ends a session (running or armed) as "stopped"; once its report is
 * written, the callback gets its directories (NULL when it wrote none) or
 * the error. -ENOENT with a message when there is no such session (no
 * callback then). */
int control_stop_session(ControlRoom *room, const char *id, SessionEndedFunc callback, void *userdata,
                         char **ret_error);
/* Ends every running session (armed ones stay armed); once every report is
 * written, the callback gets one entry per session ("" when it wrote no
 * report), and owns the list. */
typedef void (*ManagerStoppedAllFunc)(void *userdata, char **report_dirs);
int control_stop_all_sessions(ControlRoom *room, ManagerStoppedAllFunc callback, void *userdata);

/* Listings of reports: report-list.h (the sessions room). */

typedef struct ControlSysctl {
        const char *name, *wanted;
        char *current; /* "" when it cannot be read */
} ControlSysctl;
int control_machine_config(ControlRoom *room, ControlSysctl **ret, size_t *ret_n);
void control_sysctls_free(ControlSysctl *s, size_t n);
