/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "config.h"

/* machineConfig: perf-related sysctls. The original value of each setting is
 * saved in STATE_DIR/machine-config.json before the first write, so that a
 * crash and restart still restores the true originals. The file also records
 * the kernel boot ID: one saved in an earlier boot is stale (the kernel reset
 * the sysctls) and its originals are taken afresh from the node. */

#define MACHINE_CONFIG_STATE_FILE "machine-config.json"
#define MACHINE_CONFIG_SYSCTL_ROOT "/proc/sys" /* also what sysctl_root == NULL means */

typedef enum MachineChange {
        MACHINE_CHANGE_APPLY, /* set because the config asks for it */
        MACHINE_CHANGE_DRIFT, /* someone changed it; set back */
        MACHINE_CHANGE_RESTORE, /* original value written back */
        MACHINE_CHANGE_REFUSED, /* could not be set: a name or value refused, or the write failed */
        _MACHINE_CHANGE_MAX,
} MachineChange;

const char *machine_change_to_string(MachineChange c);

typedef void (*MachineChangeCallback)(const char *name, const char *old_value, const char *new_value,
                                      MachineChange change, void *userdata);

/* Sysctl name -> path below sysctl_root ("kernel.perf_event_paranoid" ->
 * "<root>/kernel/perf_event_paranoid"). Refuses names that are not
 * allow-listed or contain '/' or "..": -EINVAL for a malformed name (only
 * [a-z0-9_.] is allowed), -EPERM for one not in the allow-list. */
int sysctl_path(const char *sysctl_root, const char *name, char **ret);

/* Whether two sysctl values are the same, whitespace runs folded and
 * leading/trailing whitespace ignored ("4096\t8192" == "4096 8192 "). */
bool machine_value_equal(const char *a, const char *b);

/* Brings the sysctls to the settings: saves originals first, writes values
 * that differ, reports each write through cb with MACHINE_CHANGE_APPLY when
 * 'initial' is true, MACHINE_CHANGE_DRIFT otherwise, and each setting it
 * could not make with MACHINE_CHANGE_REFUSED (old_value NULL when it was
 * not read). Settings saved in the
 * state file that are no longer in 'settings' are restored (RESTORE) and
 * dropped from it. Values compare with whitespace runs folded. Keeps going
 * after a failing setting and returns the first error. sysctl_root is
 * "/proc/sys" except in tests. */
int machine_config_apply(const char *state_dir, const char *sysctl_root, const MachineSetting *settings,
                         size_t n_settings, bool initial, MachineChangeCallback cb, void *userdata);

/* The same, but the saved sysctls named in 'keep' (strv, may be NULL) are
 * left alone even though 'settings' does not name them: neither written
 * nor restored (machineConfig entries that wait for the node's labels). */
int machine_config_apply_keep(const char *state_dir, const char *sysctl_root, const MachineSetting *settings,
                              size_t n_settings, char *const *keep, bool initial, MachineChangeCallback cb,
                              void *userdata);

/* Writes every saved original back and removes the state file. */
int machine_config_restore(const char *state_dir, const char *sysctl_root, MachineChangeCallback cb,
                           void *userdata);
