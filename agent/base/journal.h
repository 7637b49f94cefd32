/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "machine-config.h"

/* Structured journal entries: one per session start, end and failure, and
 * one per machine-config change, each kind with a fixed MESSAGE_ID (see
 * systemd/cgprof.catalog). Without a journal socket they go to stderr. */

#define CGPROF_MESSAGE_SESSION_START "22a9421dda4449b4a16d369fcaece6bf"
#define CGPROF_MESSAGE_SESSION_END "1a54d886fa99449d8c335898f05aa9fe"
#define CGPROF_MESSAGE_SESSION_FAILURE "67da3839196441e9bd8eab33f19bd0ae"
#define CGPROF_MESSAGE_MACHINE_APPLY "30bae784dc024758944a1b223fbeff2d"
#define CGPROF_MESSAGE_MACHINE_DRIFT "8d1df35c14ec4855af996675b8b01149"
#define CGPROF_MESSAGE_MACHINE_RESTORE "43b5e54dc6a144ee89f3469a3b47b339"
/* ProfileConfig objects (per-namespace config): one refused (invalid, or
 * setting what only the cluster config may set), two enabled targets with one
 * name in one namespace, and one applied (added, changed or removed). Fields:
 * CGPROF_NAMESPACE, CGPROF_PROFILE_CONFIG (the object's name), CGPROF_ERROR
 * (refused), CGPROF_TARGET and CGPROF_CONFLICT_WITH (conflict). */
#define CGPROF_MESSAGE_PROFILE_CONFIG_REJECTED "f02b317d7be0429abbeaa4ce2895425e"
#define CGPROF_MESSAGE_PROFILE_CONFIG_CONFLICT "118590780f49455881fd19ee20b04b5c"
#define CGPROF_MESSAGE_PROFILE_CONFIG_APPLIED "b542ca79f46749e088770e629ff03d2a"

/* A report a session wrote as a checkpoint, found at start still partial:
 * the run that wrote it never ended the session (agent/sessions/checkpoint.c).
 * Fields: CGPROF_SESSION, CGPROF_REPORT (its directory), CGPROF_REASON,
 * CGPROF_CHECKPOINT (when it was written) and CGPROF_CGROUP when known. */
#define CGPROF_MESSAGE_REPORT_INTERRUPTED "529501c43b304964bae605e34f599195"
/* A report removed by reportRetention (agent/manager-reports.c). Fields:
 * CGPROF_SESSION, CGPROF_REPORT (its directory), CGPROF_REASON ("age",
 * "count" or "bytes") and CGPROF_CGROUP. */
#define CGPROF_MESSAGE_REPORT_REMOVED "55484d78af6b4b7db546fb74f628be32"

typedef enum JournalSessionEvent {
        JOURNAL_SESSION_START,
        JOURNAL_SESSION_END,
        JOURNAL_SESSION_FAILURE,
        _JOURNAL_SESSION_EVENT_MAX,
} JournalSessionEvent;

typedef struct JournalSessionFields {
        const char *session;
        const char *profile;
        const char *target;
        const char *namespace;
        const char *pod;
        const char *container;
        const char *cgroup;
        const char *profile_config; /* the ProfileConfig the target or profile comes from, or NULL */
        const char *report; /* report directory, END only */
        uint64_t samples; /* END only */
        uint64_t lost; /* END only */
        bool offcpu; /* END only: the profile follows off-CPU time, and: */
        uint64_t offcpu_recorded, offcpu_short, offcpu_lost; /* waits recorded, under offCpuMinUsec, lost */
        int error; /* FAILURE only: negative errno */
} JournalSessionFields;

/* Whether entries go to journald (its socket exists) rather than stderr. */
bool journal_available(void);

void journal_session(JournalSessionEvent ev, const JournalSessionFields *f, const char *format, ...)
        _printf_(3, 4);
/* Where a machineConfig change comes from: the node, the entry
 * ("machineConfig[2]") that wants the sysctl (APPLY, DRIFT) or no longer
 * does (RESTORE; NULL when the agent stops or a reload removed it), its
 * nodeSelector (kubectl text, NULL: none), and why, in words (NULL: none). */
typedef struct JournalMachineFields {
        const char *node; /* never NULL */
        const char *entry;
        const char *selector;
        const char *reason;
} JournalMachineFields;

/* Fields CGPROF_SYSCTL, CGPROF_OLD_VALUE, CGPROF_NEW_VALUE and CGPROF_NODE
 * always (the catalog may use them); CGPROF_MACHINE_ENTRY and
 * CGPROF_NODE_SELECTOR when known. */
void journal_machine_change(const char *name, const char *old_value, const char *new_value,
                            MachineChange change, const JournalMachineFields *mf);

typedef enum JournalProfileConfigEvent {
        JOURNAL_PROFILE_CONFIG_REJECTED,
        JOURNAL_PROFILE_CONFIG_CONFLICT,
        JOURNAL_PROFILE_CONFIG_APPLIED,
        _JOURNAL_PROFILE_CONFIG_EVENT_MAX,
} JournalProfileConfigEvent;

typedef struct JournalProfileConfigFields {
        const char *namespace;
        const char *name; /* the ProfileConfig object */
        const char *error; /* REJECTED */
        const char *target; /* CONFLICT: the target left out */
        const char *conflict_with; /* CONFLICT: the object that keeps it */
        const char *change; /* APPLIED: "added", "changed", "removed" */
} JournalProfileConfigFields;

/* CGPROF_SESSION-less entries about ProfileConfig objects; message is the MESSAGE. */
void journal_profile_config(JournalProfileConfigEvent ev, const JournalProfileConfigFields *pf,
                            const char *message);

typedef struct JournalReportFields {
        const char *session;
        const char *report; /* its directory */
        const char *reason;
        const char *cgroup; /* may be NULL */
        const char *checkpoint; /* the time of the checkpoint (RFC 3339), may be NULL */
} JournalReportFields;

void journal_report_interrupted(const JournalReportFields *rf, const char *format, ...) _printf_(2, 3);
void journal_report_removed(const JournalReportFields *rf, const char *format, ...) _printf_(2, 3);
