/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <inttypes.h>
#include <stdarg.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>

#include "journal.h"
#include "log.h"

#define JOURNAL_SOCKET "/run/systemd/journal/socket"
#define MAX_FIELDS 20

bool journal_available(void) {
        return access(JOURNAL_SOCKET, W_OK) >= 0;
}

typedef struct Fields {
        struct iovec iov[MAX_FIELDS];
        char *buf[MAX_FIELDS];
        size_t n;
} Fields;

static void fields_done(Fields *f) {
        for (size_t i = 0; i < f->n; i++)
                free(f->buf[i]);
        f->n = 0;
}

static void fields_add(Fields *f, const char *name, const char *value) {
        char *s;
        if (!value || f->n >= MAX_FIELDS)
                return;
        if (asprintf(&s, "%s=%s", name, value) < 0)
                return;
        f->buf[f->n] = s;
        f->iov[f->n] = (struct iovec){ .iov_base = s, .iov_len = strlen(s) };
        f->n++;
}

/* Several named values at once (NULL values are left out). */
typedef struct Field {
        const char *name, *value;
} Field;
static void fields_add_all(Fields *f, const Field *l, size_t n) {
        for (size_t i = 0; i < n; i++)
                fields_add(f, l[i].name, l[i].value);
}
#define FIELDS_ADD(f, ...)                                \
        fields_add_all(f, (const Field[]){ __VA_ARGS__ }, \
                       sizeof((const Field[]){ __VA_ARGS__ }) / sizeof(Field))

static void fields_add_u64(Fields *f, const char *name, uint64_t v) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%" PRIu64, v);
        fields_add(f, name, buf);
}

/* One kind of entry: its MESSAGE_ID and its CGPROF_EVENT, the first two
 * fields. Each family of entries has a table of them, by event. */
typedef struct EntryKind {
        const char *id, *event;
} EntryKind;

static void fields_add_kind(Fields *f, const EntryKind *k) {
        fields_add(f, "MESSAGE_ID", k->id);
        fields_add(f, "CGPROF_EVENT", k->event);
}

/* The MESSAGE= text of an entry (NULL: out of memory; the entry goes
 * without it). */
static char *format_message(const char *format, va_list ap) {
        char *m;
        return vasprintf(&m, format, ap) < 0 ? NULL : m;
}

/* ... of a function's format and its variadic arguments. */
#define FORMAT_MESSAGE(format)                          \
        ({                                              \
                va_list _ap;                            \
                va_start(_ap, format);                  \
                char *_m = format_message(format, _ap); \
                va_end(_ap);                            \
                _m;                                     \
        })

/* Sends the entry to journald, or prints MESSAGE and the CGPROF_ fields to stderr. */
static void fields_send(Fields *f, int priority, const char *message) {
        char prio[2] = { (char) ('0' + priority), 0 };

        fields_add(f, "MESSAGE", message);
        fields_add(f, "PRIORITY", prio);
        fields_add(f, "SYSLOG_IDENTIFIER", program_invocation_short_name);

        if (journal_available()) {
                int r = sd_journal_sendv(f->iov, (int) f->n);
                if (r >= 0)
                        return;
                log_debug_errno(r, "Failed to send journal entry, logging to stderr: %m");
        }

        /* stderr fallback: the message, then the structured fields. */
        char line[4096];
        size_t l = 0;
        l += snprintf(line + l, sizeof(line) - l, "%s", message);
        for (size_t i = 0; i < f->n && l < sizeof(line); i++)
                if (strncmp(f->buf[i], "CGPROF_", 7) == 0)
                        l += snprintf(line + l, sizeof(line) - l, " %s", f->buf[i]);
        log_full(priority, "%s", line);
}

void journal_session(JournalSessionEvent ev, const JournalSessionFields *sf, const char *format, ...) {
        static const EntryKind kinds[_JOURNAL_SESSION_EVENT_MAX] = {
                [JOURNAL_SESSION_START] = { CGPROF_MESSAGE_SESSION_START, "start" },
                [JOURNAL_SESSION_END] = { CGPROF_MESSAGE_SESSION_END, "end" },
                [JOURNAL_SESSION_FAILURE] = { CGPROF_MESSAGE_SESSION_FAILURE, "failure" },
        };
        _cleanup_free_ char *message = FORMAT_MESSAGE(format);
        Fields f = {};

        fields_add_kind(&f, &kinds[ev]);
        FIELDS_ADD(&f, { "CGPROF_SESSION", sf->session }, { "CGPROF_PROFILE", sf->profile },
                   { "CGPROF_TARGET", sf->target }, { "CGPROF_NAMESPACE", sf->namespace },
                   { "CGPROF_POD", sf->pod }, { "CGPROF_CONTAINER", sf->container },
                   { "CGPROF_CGROUP", sf->cgroup }, { "CGPROF_PROFILE_CONFIG", sf->profile_config });
        if (ev == JOURNAL_SESSION_END) {
                fields_add(&f, "CGPROF_REPORT", sf->report);
                fields_add_u64(&f, "CGPROF_SAMPLES", sf->samples);
                fields_add_u64(&f, "CGPROF_LOST", sf->lost);
                if (sf->offcpu) {
                        fields_add_u64(&f, "CGPROF_OFFCPU_RECORDED", sf->offcpu_recorded);
                        fields_add_u64(&f, "CGPROF_OFFCPU_SHORT", sf->offcpu_short);
                        fields_add_u64(&f, "CGPROF_OFFCPU_LOST", sf->offcpu_lost);
                }
        }
        if (ev == JOURNAL_SESSION_FAILURE && sf->error != 0) {
                fields_add_u64(&f, "ERRNO", (uint64_t) -sf->error);
        }

        fields_send(&f, ev == JOURNAL_SESSION_FAILURE ? LOG_ERR : LOG_INFO,
                    message ?: "cgprof session event");
        fields_done(&f);
}

void journal_machine_change(const char *name, const char *old_value, const char *new_value,
                            MachineChange change, const JournalMachineFields *mf) {
        static const char *const ids[_MACHINE_CHANGE_MAX] = {
                [MACHINE_CHANGE_APPLY] = CGPROF_MESSAGE_MACHINE_APPLY,
                [MACHINE_CHANGE_DRIFT] = CGPROF_MESSAGE_MACHINE_DRIFT,
                [MACHINE_CHANGE_RESTORE] = CGPROF_MESSAGE_MACHINE_RESTORE,
        };
        static const JournalMachineFields none = {};
        _cleanup_free_ char *message = NULL, *origin = NULL;
        Fields f = {};

        /* A refusal is logged where the apply fails (and counted in /metrics). */
        if (change < 0 || change >= _MACHINE_CHANGE_MAX || !ids[change])
                return;
        if (!mf)
                mf = &none;

        /* " on node N (machineConfig[0], nodeSelector a=b: the node's labels changed)" */
        if (mf->node || mf->entry || mf->reason)
                (void) asprintf(&origin, "%s%s%s%s%s%s%s%s%s", mf->node ? " on node " : "",
                                strempty(mf->node), mf->entry || mf->reason ? " (" : "", strempty(mf->entry),
                                mf->selector ? ", nodeSelector " : "", strempty(mf->selector),
                                mf->entry && mf->reason ? ": " : "", strempty(mf->reason),
                                mf->entry || mf->reason ? ")" : "");

        switch (change) {
        case MACHINE_CHANGE_APPLY:
                (void) asprintf(&message, "Set %s to %s (was %s)%s.", name, new_value, old_value,
                                strempty(origin));
                break;
        case MACHINE_CHANGE_DRIFT:
                (void) asprintf(&message, "%s drifted to %s, set back to %s%s.", name, old_value, new_value,
                                strempty(origin));
                break;
        default:
                (void) asprintf(&message, "Restored %s to %s (was %s)%s.", name, new_value, old_value,
                                strempty(origin));
                break;
        }

        /* The CGPROF_EVENT of a change is its name ("apply", "drift", "restore"). */
        fields_add_kind(&f, &(const EntryKind){ ids[change], machine_change_to_string(change) });
        FIELDS_ADD(&f, { "CGPROF_SYSCTL", name }, { "CGPROF_OLD_VALUE", old_value },
                   { "CGPROF_NEW_VALUE", new_value }, { "CGPROF_NODE", strempty(mf->node) },
                   { "CGPROF_MACHINE_ENTRY", mf->entry }, { "CGPROF_NODE_SELECTOR", mf->selector });
        fields_send(&f, change == MACHINE_CHANGE_DRIFT ? LOG_WARNING : LOG_NOTICE,
                    message ?: "machineConfig change");
        fields_done(&f);
}

void journal_profile_config(JournalProfileConfigEvent ev, const JournalProfileConfigFields *pf,
                            const char *message) {
        static const EntryKind kinds[_JOURNAL_PROFILE_CONFIG_EVENT_MAX] = {
                [JOURNAL_PROFILE_CONFIG_REJECTED] = { CGPROF_MESSAGE_PROFILE_CONFIG_REJECTED,
                                                      "profileconfig-rejected" },
                [JOURNAL_PROFILE_CONFIG_CONFLICT] = { CGPROF_MESSAGE_PROFILE_CONFIG_CONFLICT,
                                                      "profileconfig-conflict" },
                [JOURNAL_PROFILE_CONFIG_APPLIED] = { CGPROF_MESSAGE_PROFILE_CONFIG_APPLIED,
                                                     "profileconfig-applied" },
        };
        Fields f = {};

        if (ev < 0 || ev >= _JOURNAL_PROFILE_CONFIG_EVENT_MAX)
                return;
        fields_add_kind(&f, &kinds[ev]);
        FIELDS_ADD(&f, { "CGPROF_NAMESPACE", pf->namespace }, { "CGPROF_PROFILE_CONFIG", pf->name },
                   { "CGPROF_ERROR", pf->error }, { "CGPROF_TARGET", pf->target },
                   { "CGPROF_CONFLICT_WITH", pf->conflict_with }, { "CGPROF_CHANGE", pf->change });
        fields_send(&f, ev == JOURNAL_PROFILE_CONFIG_APPLIED ? LOG_NOTICE : LOG_WARNING,
                    message ?: "ProfileConfig event");
        fields_done(&f);
}

/* A report's entry: the fields it has (NULL ones left out). */
static void report_entry(const EntryKind *kind, int priority, const JournalReportFields *rf,
                         const char *message) {
        Fields f = {};

        fields_add_kind(&f, kind);
        fields_add(&f, "CGPROF_SESSION", rf->session);
        fields_add(&f, "CGPROF_REPORT", rf->report);
        fields_add(&f, "CGPROF_REASON", rf->reason);
        fields_add(&f, "CGPROF_CHECKPOINT", rf->checkpoint);
        fields_add(&f, "CGPROF_CGROUP", rf->cgroup);
        fields_send(&f, priority, message);
        fields_done(&f);
}

void journal_report_interrupted(const JournalReportFields *rf, const char *format, ...) {
        _cleanup_free_ char *message = FORMAT_MESSAGE(format);

        report_entry(&(const EntryKind){ CGPROF_MESSAGE_REPORT_INTERRUPTED, "report-interrupted" },
                     LOG_WARNING, rf, message ?: "interrupted report");
}

void journal_report_removed(const JournalReportFields *rf, const char *format, ...) {
        _cleanup_free_ char *message = FORMAT_MESSAGE(format);

        report_entry(&(const EntryKind){ CGPROF_MESSAGE_REPORT_REMOVED, "report-removed" }, LOG_INFO, rf,
                     message ?: "report removed");
}
