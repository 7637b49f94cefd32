/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "config.h"
#include "machine-config.h"

/* Which machineConfig entries apply to this node: those without
 * nodeSelector, and those whose nodeSelector matches the node's labels.
 * Config loading guarantees at most one entry per sysctl matches any label
 * set, so the result has each sysctl once. Pure logic, no I/O. */

typedef struct MachineWant {
        char *name; /* the sysctl */
        char *value;
        size_t entry; /* its index in machineConfig */
        char *selector; /* its nodeSelector as kubectl writes it; NULL: none (every node) */
} MachineWant;

typedef struct MachineWants {
        MachineWant *items; /* in config order */
        size_t n;
        /* Labels not known yet (the Node not read): the sysctls that only
         * scoped entries set. Left as they are until the labels are known:
         * neither applied nor restored. strv, NULL when none. */
        char **pending;
} MachineWants;

/* labels_known false: the node's labels are not known yet, only entries
 * without nodeSelector apply. */
int machine_wants_select(const Config *c, Labels labels, bool labels_known, MachineWants *ret);
void machine_wants_done(MachineWants *w);
const MachineWant *machine_wants_find(const MachineWants *w, const char *name);
/* "machineConfig[2]" */
char *machine_entry_path(size_t entry);
/* The wants as settings for machine_config_apply(): the array is malloc()ed
 * (free() it), its strings are the wants'. */
int machine_wants_settings(const MachineWants *w, MachineSetting **ret);

/* What check shows for a sysctl on this node: "applied" (wanted, and the
 * actual value is the wanted one), "drifted" (wanted, someone changed it:
 * set back at the next check), "refused" (wanted, and its last write was
 * refused), "waiting for the node's labels" (only scoped entries set it and
 * the labels are not known yet), "restored" (no entry wants it any more:
 * its original was written back), "not selected" (no entry selects this
 * node for it; untouched). last: its last change, or _MACHINE_CHANGE_MAX
 * when none; actual NULL when it cannot be read. */
const char *machine_sysctl_state(const MachineWants *w, const char *name, const char *actual,
                                 MachineChange last);
