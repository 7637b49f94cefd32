/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <cjson/cJSON.h>

#include "manager.h"

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

/* How many machineConfig entries have a nodeSelector. */
size_t manager_machine_n_scoped(Manager *m);
/* The first apply and the drift timer. */
int manager_machine_start(Manager *m);
/* Computes the wanted set and applies it. */
void manager_machine_apply(Manager *m, MachineCause cause);
/* There is no Kubernetes: the labels are the config's nodeLabels. */
void manager_machine_host_mode(Manager *m);
/* The Node's labels (strv key, value, ...; taken). Applies when they
 * differ from the last known ones, or are the first. */
void manager_machine_node_labels(Manager *m, char **labels);
/* The Node was deleted (or vanished): its last known labels stay. */
void manager_machine_node_deleted(Manager *m);
/* At exit, with restoreMachineConfig: every saved original written back. */
void manager_machine_restore(Manager *m);
void manager_machine_free(Manager *m);

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
int manager_machine_check(Manager *m, ControlMachineCheck *ret);

/* The "machineConfig" object of GetStatus. */
int manager_machine_status(Manager *m, cJSON *j);
