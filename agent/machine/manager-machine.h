/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <cjson/cJSON.h>
#include <systemd/sd-event.h>

#include "config.h"
#include "machine-config.h"
#include "machine-select.h"
#include "macro.h"

/* manager-machine.c: machineConfig on this node. The entries that apply
 * are those without nodeSelector and those whose nodeSelector matches the
 * node's labels: the agent's own Node's (manager-node.c), or "nodeLabels"
 * on a host without Kubernetes. Whenever the config or the labels change
 * the wanted set is computed again: newly selected entries are applied
 * (originals saved first), deselected ones restored; each change is a
 * journal entry naming the node, the sysctl, both values and the entry.
 * Drift is repaired every machineConfigInterval. Until the Node has been
 * read once, only entries without nodeSelector apply, and the sysctls only
 * scoped entries set are left as they are. */

typedef enum MachineCause {
        MACHINE_CAUSE_CONFIG, /* the config was (re)loaded */
        MACHINE_CAUSE_LABELS, /* the node's labels changed, or were read the first time */
        MACHINE_CAUSE_TIMER, /* the drift check */
        _MACHINE_CAUSE_MAX,
} MachineCause;

/* The room's state: the wanted set, the last changes, the Node's labels,
 * the drift timer and the Node watch (machine-room.h, inside the room). */
typedef struct MachineRoom MachineRoom;

/* What the room needs from the rooms above it, which it does not call:
 * the Manager fills it in (manager-rooms.c). */
typedef struct MachineRoomDeps {
        sd_event *event;
        const char *node_name;
        const char *state_dir; /* where the originals of the sysctls are saved */
        const char *sysctl_root; /* NULL: /proc/sys */
        bool host; /* no Kubernetes (--no-kubernetes): the config's nodeLabels are the labels */
        /* The config now: it changes on reload (never NULL once loaded). */
        const Config *(*config)(void *userdata);
        /* A sysctl was changed (/metrics counts them); may be NULL. */
        void (*changed)(void *userdata, const char *sysctl, MachineChange change);
        /* The drift timer cannot be armed again: the agent stops (logged here). */
        void (*fatal)(void *userdata, int error);
        void *userdata;
} MachineRoomDeps;

/* The strings of deps are copied. */
int machine_room_new(const MachineRoomDeps *deps, MachineRoom **ret);
MachineRoom *machine_room_free(MachineRoom *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(MachineRoom *, machine_room_free);

/* The first apply and the drift timer. */
int machine_room_start(MachineRoom *r);
/* Computes the wanted set and applies it. */
void machine_room_apply(MachineRoom *r, MachineCause cause);
/* The config was reloaded: applied again, the drift timer set to its interval. */
void machine_room_config_changed(MachineRoom *r);
/* There is no Kubernetes: the labels are the config's nodeLabels. */
void machine_room_host_mode(MachineRoom *r);
/* At exit, with restoreMachineConfig: every saved original written back. */
void machine_room_restore(MachineRoom *r);
/* The entries that apply now. */
const MachineWants *machine_room_wants(MachineRoom *r);

/* Per sysctl, what `cgprofctl check` shows (CheckMachineConfig()). */
typedef struct ControlMachineSysctl {
        char *name;
        char *desired; /* "" when no entry wants it on this node */
        char *entry; /* "machineConfig[N]", or "" */
        char *selector; /* its nodeSelector, "" when none */
        char *actual; /* "" when it cannot be read */
        const char *
                state; /* "applied", "drifted", "refused", "restored", "not selected", "waiting for the node's labels" */
} ControlMachineSysctl;

typedef struct ControlMachineCheck {
        char *labels; /* "a=b,c=d" */
        const char *labels_source; /* "node", "node (deleted)", "nodeLabels", "none" */
        ControlMachineSysctl *sysctls;
        size_t n_sysctls;
} ControlMachineCheck;

void control_machine_check_done(ControlMachineCheck *c);
int machine_room_check(MachineRoom *r, ControlMachineCheck *ret);

/* The "machineConfig" object of GetStatus. */
int machine_room_status(MachineRoom *r, cJSON *j);
