/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* machineConfig on this node: the entries the node's labels select,
 * applied, repaired, restored when deselected (see manager-machine.h). */
#include "fileio.h"
#include "base.h"
#include "log.h"
#include "machine-config.h"
#include "machine-select.h"
#include "manager-machine.h"
#include "http.h"

/* The last change of a sysctl (for check). */
struct MachineLast {
        char *name;
        MachineChange change;
};

/* What a change callback needs to say where a change comes from. */
typedef struct MachineApplyContext {
        Manager *m;
        const MachineWants *previous; /* the wanted set before this apply */
        MachineCause cause;
        bool stopping;
} MachineApplyContext;

static void machine_last_set(Manager *m, const char *name, MachineChange change) {
        struct MachineLast *n;

        for (size_t i = 0; i < m->n_machine_last; i++)
                if (streq(m->machine_last[i].name, name)) {
                        m->machine_last[i].change = change;
                        return;
                }
        n = reallocarray(m->machine_last, m->n_machine_last + 1, sizeof(*n));
        if (!n)
                return (void) log_oom();
        m->machine_last = n;
        n[m->n_machine_last] = (struct MachineLast){ .name = strdup(name), .change = change };
        if (!n[m->n_machine_last].name)
                return (void) log_oom();
        m->n_machine_last++;
}

static const struct MachineLast *machine_last_get(Manager *m, const char *name) {
        for (size_t i = 0; i < m->n_machine_last; i++)
                if (streq(m->machine_last[i].name, name))
                        return &m->machine_last[i];
        return NULL;
}

static const char *change_reason(const MachineApplyContext *ctx, MachineChange change, bool scoped) {
        if (ctx->stopping)
                return "the agent stops";
        switch (change) {
        case MACHINE_CHANGE_APPLY:
                if (ctx->cause == MACHINE_CAUSE_LABELS)
                        return scoped ? "the node's labels select it" : NULL;
                return NULL;
        case MACHINE_CHANGE_RESTORE:
                if (ctx->cause == MACHINE_CAUSE_LABELS)
                        return "the node's labels no longer select it";
                if (ctx->cause == MACHINE_CAUSE_CONFIG)
                        return "the configuration no longer sets it for this node";
                return NULL;
        default:
                return NULL;
        }
}

static void on_machine_change(const char *name, const char *old_value, const char *new_value,
                              MachineChange change, void *userdata) {
        MachineApplyContext *ctx = userdata;
        Manager *m = ctx->m;
        _cleanup_free_ char *entry = NULL;
        const MachineWant *w;

        /* The entry that wants it now, or (restored) the one that wanted it. */
        w = machine_wants_find(change == MACHINE_CHANGE_RESTORE ? ctx->previous : &m->machine_wants, name);
        if (w)
                entry = machine_entry_path(w->entry);

        JournalMachineFields f = {
                .node = m->node_name,
                .entry = entry,
                .selector = w ? w->selector : NULL,
                .reason = change_reason(ctx, change, w && w->selector),
        };
        journal_machine_change(name, old_value, new_value, change, &f);
        metrics_machine_change(m, name, change);
        machine_last_set(m, name, change);
}

/* The labels entries are matched against, and whether they are known. */
static Labels machine_labels(Manager *m, bool *ret_known) {
        if (m->machine_host) {
                *ret_known = true;
                return m->config->config->node_labels;
        }
        *ret_known = m->node_read;
        return m->node_labels;
}

void manager_machine_apply(Manager *m, MachineCause cause) {
        _cleanup_(machine_wants_done) MachineWants previous = {}, wants = {};
        _cleanup_free_ MachineSetting *settings = NULL;
        bool known;
        Labels labels = machine_labels(m, &known);
        int r;

        r = machine_wants_select(m->config->config, labels, known, &wants);
        if (r >= 0)
                r = machine_wants_settings(&wants, &settings);
        if (r < 0)
                return (void) log_error_errno(r, "Failed to compute the machineConfig of node %s: %m",
                                              m->node_name);

        previous = m->machine_wants;
        m->machine_wants = wants;
        wants = (MachineWants){};

        MachineApplyContext ctx = { .m = m, .previous = &previous, .cause = cause };
        r = machine_config_apply_keep(m->state_dir, m->opts.sysctl_root, settings, m->machine_wants.n,
                                      m->machine_wants.pending, cause != MACHINE_CAUSE_TIMER,
                                      on_machine_change, &ctx);
        if (r < 0)
                log_error_errno(r, "Failed to apply machineConfig: %m");
}

static int on_machine_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        manager_machine_apply(m, MACHINE_CAUSE_TIMER);
        return manager_rearm(m, s, m->config->config->machine_config_interval_usec, "machineConfig");
}

size_t manager_machine_n_scoped(Manager *m) {
        const Config *c = m->config->config;
        size_t n = 0;

        for (size_t i = 0; i < c->n_machine_config; i++)
                if (c->machine_config[i].node_selector)
                        n++;
        return n;
}

int manager_machine_start(Manager *m) {
        int r;

        if (m->opts.no_kubernetes)
                m->machine_host = true;

        /* First: perf_event_paranoid and friends may be what lets us sample. */
        manager_machine_apply(m, MACHINE_CAUSE_CONFIG);
        r = sd_event_add_time_relative(m->event, &m->machine_timer, CLOCK_MONOTONIC,
                                       m->config->config->machine_config_interval_usec, USEC_PER_SEC,
                                       on_machine_timer, m);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the machineConfig timer: %m");
        (void) sd_event_source_set_description(m->machine_timer, "machine-config");
        return 0;
}

void manager_machine_host_mode(Manager *m) {
        if (m->machine_host)
                return;
        m->machine_host = true;
        manager_machine_apply(m, MACHINE_CAUSE_LABELS);
}

static bool labels_equal(Labels a, Labels b) {
        size_t n = strv_length(a);

        if (n != strv_length(b))
                return false;
        for (size_t i = 0; i + 1 < n; i += 2) {
                bool found = false;

                for (size_t k = 0; k + 1 < n; k += 2)
                        if (streq(a[i], b[k])) {
                                found = streq(a[i + 1], b[k + 1]);
                                break;
                        }
                if (!found)
                        return false;
        }
        return true;
}

void manager_machine_node_labels(Manager *m, char **labels) {
        _cleanup_strv_free_ char **l = labels;
        _cleanup_free_ char *text = NULL;
        bool first = !m->node_read, was_deleted = m->node_deleted;

        m->node_deleted = false;
        if (!first && labels_equal(m->node_labels, l)) {
                if (was_deleted)
                        log_notice("Node %s is back.", m->node_name);
                return;
        }
        (void) labels_to_string(l, &text);
        strv_free(m->node_labels);
        m->node_labels = TAKE_PTR(l);
        m->node_read = true;
        if (first)
                log_notice("Read Node %s, labels {%s}: the machineConfig entries it selects apply now.",
                           m->node_name, strna(text));
        else
                log_notice("Node %s's labels changed to {%s}: machineConfig computed again.", m->node_name,
                           strna(text));
        if (m->machine_host)
                return; /* nodeLabels decide */
        manager_machine_apply(m, MACHINE_CAUSE_LABELS);
}

void manager_machine_node_deleted(Manager *m) {
        _cleanup_free_ char *text = NULL;

        if (m->node_deleted)
                return;
        m->node_deleted = true;
        if (!m->node_read) {
                log_warning("Node %s does not exist: only the machineConfig entries without nodeSelector "
                            "apply.",
                            m->node_name);
                return;
        }
        (void) labels_to_string(m->node_labels, &text);
        log_warning("Node %s was deleted: machineConfig keeps going by its last known labels {%s}.",
                    m->node_name, strna(text));
}

void manager_machine_restore(Manager *m) {
        _cleanup_(machine_wants_done) MachineWants none = {};
        int r;

        if (!m->config || !m->config->config->restore_machine_config)
                return;
        MachineApplyContext ctx = { .m = m, .previous = &m->machine_wants, .stopping = true };
        r = machine_config_restore(m->state_dir, m->opts.sysctl_root, on_machine_change, &ctx);
        if (r < 0)
                log_error_errno(r, "Failed to restore machineConfig: %m");
}

void manager_machine_free(Manager *m) {
        m->machine_timer = sd_event_source_disable_unref(m->machine_timer);
        machine_wants_done(&m->machine_wants);
        ARRAY_CLEAR(m->machine_last, m->n_machine_last, free(_e->name));
        m->node_labels = strv_free(m->node_labels);
}

/* ---- check and status ---- */

static const char *labels_source(Manager *m) {
        if (m->machine_host)
                return m->config->config->node_labels ? "nodeLabels" : "none (a host without nodeLabels)";
        if (!m->node_read)
                return m->node_deleted ? "none (the Node does not exist)" : "none (the Node not read yet)";
        return m->node_deleted ? "node (deleted: its last known labels)" : "node";
}

void control_machine_check_done(ControlMachineCheck *c) {
        for (size_t i = 0; i < c->n_sysctls; i++) {
                ControlMachineSysctl *s = &c->sysctls[i];
                free(s->name);
                free(s->desired);
                free(s->entry);
                free(s->selector);
                free(s->actual);
        }
        free(c->sysctls);
        free(c->labels);
        *c = (ControlMachineCheck){};
}

static bool check_has(const ControlMachineCheck *c, const char *name) {
        for (size_t i = 0; i < c->n_sysctls; i++)
                if (streq(c->sysctls[i].name, name))
                        return true;
        return false;
}

static int check_add(Manager *m, ControlMachineCheck *c, const char *name) {
        const MachineWant *w = machine_wants_find(&m->machine_wants, name);
        const struct MachineLast *last = machine_last_get(m, name);
        _cleanup_free_ char *path = NULL;
        ControlMachineSysctl *s, *n;

        if (check_has(c, name))
                return 0;
        n = reallocarray(c->sysctls, c->n_sysctls + 1, sizeof(*n));
        if (!n)
                return -ENOMEM;
        c->sysctls = n;
        s = &n[c->n_sysctls++];
        *s = (ControlMachineSysctl){};

        if (sysctl_path(m->opts.sysctl_root, name, &path) >= 0)
                (void) read_one_line_file(path, &s->actual);
        if (!s->actual)
                s->actual = strdup("");
        s->name = strdup(name);
        s->desired = strdup(w ? w->value : "");
        s->entry = w ? machine_entry_path(w->entry) : strdup("");
        s->selector = strdup(w && w->selector ? w->selector : "");
        if (!s->actual || !s->name || !s->desired || !s->entry || !s->selector)
                return -ENOMEM;

        s->state = machine_sysctl_state(&m->machine_wants, name, s->actual[0] ? s->actual : NULL,
                                        last ? last->change : _MACHINE_CHANGE_MAX);
        return 0;
}

int manager_machine_check(Manager *m, ControlMachineCheck *ret) {
        _cleanup_(control_machine_check_done) ControlMachineCheck c = {};
        const Config *cfg = m->config->config;
        bool known;
        Labels labels = machine_labels(m, &known);
        int r;

        r = labels_to_string(labels, &c.labels);
        if (r < 0)
                return r;
        c.labels_source = labels_source(m);
        /* Every sysctl an entry names (config order), then those changed
         * earlier that no entry names any more. */
        for (size_t i = 0; i < cfg->n_machine_config; i++) {
                r = check_add(m, &c, cfg->machine_config[i].name);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < m->n_machine_last; i++) {
                r = check_add(m, &c, m->machine_last[i].name);
                if (r < 0)
                        return r;
        }
        *ret = c;
        c = (ControlMachineCheck){};
        return 0;
}

int manager_machine_status(Manager *m, cJSON *j) {
        _cleanup_(control_machine_check_done) ControlMachineCheck c = {};
        cJSON *o, *a;
        int r;

        r = manager_machine_check(m, &c);
        if (r < 0)
                return r;
        o = cJSON_AddObjectToObject(j, "machineConfig");
        if (!o)
                return -ENOMEM;
        cJSON_AddStringToObject(o, "node", strempty(m->node_name));
        cJSON_AddStringToObject(o, "labelsSource", c.labels_source);
        cJSON_AddStringToObject(o, "labels", c.labels);
        cJSON_AddBoolToObject(o, "nodeRead", m->machine_host || m->node_read);
        cJSON_AddBoolToObject(o, "nodeDeleted", m->node_deleted);
        if (!m->machine_host && !m->node_read)
                cJSON_AddStringToObject(
                        o, "note", "the Node has not been read: only entries without nodeSelector apply");
        a = cJSON_AddArrayToObject(o, "sysctls");
        if (!a)
                return -ENOMEM;
        for (size_t i = 0; i < c.n_sysctls; i++) {
                const ControlMachineSysctl *s = &c.sysctls[i];
                cJSON *x = cJSON_CreateObject();

                if (!x)
                        return -ENOMEM;
                cJSON_AddStringToObject(x, "name", s->name);
                cJSON_AddStringToObject(x, "desired", s->desired);
                cJSON_AddStringToObject(x, "entry", s->entry);
                cJSON_AddStringToObject(x, "nodeSelector", s->selector);
                cJSON_AddStringToObject(x, "actual", s->actual);
                cJSON_AddStringToObject(x, "state", s->state);
                cJSON_AddItemToArray(a, x);
        }
        return 0;
}
