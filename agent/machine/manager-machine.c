/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* machineConfig on this node: the entries the node's labels select,
 * applied, repaired, restored when deselected (see manager-machine.h). */
#include "fileio.h"
#include "base.h"
#include "log.h"
#include "machine-config.h"
#include "machine-room.h"
#include "machine-select.h"
#include "manager-machine.h"
#include "manager-node.h"

/* What a change callback needs to say where a change comes from. */
typedef struct MachineApplyContext {
        MachineRoom *room;
        const MachineWants *previous; /* the wanted set before this apply */
        MachineCause cause;
        bool stopping;
} MachineApplyContext;

static void machine_last_set(MachineRoom *room, const char *name, MachineChange change) {
        MachineLast *n;

        for (size_t i = 0; i < room->n_last; i++)
                if (streq(room->last[i].name, name)) {
                        room->last[i].change = change;
                        return;
                }
        n = reallocarray(room->last, room->n_last + 1, sizeof(*n));
        if (!n)
                return (void) log_oom();
        room->last = n;
        n[room->n_last] = (MachineLast){ .name = strdup(name), .change = change };
        if (!n[room->n_last].name)
                return (void) log_oom();
        room->n_last++;
}

static const MachineLast *machine_last_get(MachineRoom *room, const char *name) {
        for (size_t i = 0; i < room->n_last; i++)
                if (streq(room->last[i].name, name))
                        return &room->last[i];
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
        MachineRoom *room = ctx->room;
        _cleanup_free_ char *entry = NULL;
        const MachineWant *w;

        /* The entry that wants it now, or (restored) the one that wanted it. */
        w = machine_wants_find(change == MACHINE_CHANGE_RESTORE ? ctx->previous : &room->wants, name);
        if (w)
                entry = machine_entry_path(w->entry);

        JournalMachineFields f = {
                .node = room->deps.node_name,
                .entry = entry,
                .selector = w ? w->selector : NULL,
                .reason = change_reason(ctx, change, w && w->selector),
        };
        journal_machine_change(name, old_value, new_value, change, &f);
        if (room->deps.changed)
                room->deps.changed(room->deps.userdata, name, change);
        machine_last_set(room, name, change);
}

/* The labels entries are matched against, and whether they are known. */
static Labels machine_labels(MachineRoom *room, bool *ret_known) {
        if (room->host) {
                *ret_known = true;
                return machine_room_config(room)->node_labels;
        }
        *ret_known = room->node_read;
        return room->node_labels;
}

void machine_room_apply(MachineRoom *room, MachineCause cause) {
        _cleanup_(machine_wants_done) MachineWants previous = {}, wants = {};
        _cleanup_free_ MachineSetting *settings = NULL;
        bool known;
        Labels labels = machine_labels(room, &known);
        int r;

        r = machine_wants_select(machine_room_config(room), labels, known, &wants);
        if (r >= 0)
                r = machine_wants_settings(&wants, &settings);
        if (r < 0)
                return (void) log_error_errno(r, "Failed to compute the machineConfig of node %s: %m",
                                              room->deps.node_name);

        previous = room->wants;
        room->wants = wants;
        wants = (MachineWants){};

        MachineApplyContext ctx = { .room = room, .previous = &previous, .cause = cause };
        r = machine_config_apply_keep(room->deps.state_dir, room->deps.sysctl_root, settings, room->wants.n,
                                      room->wants.pending, cause != MACHINE_CAUSE_TIMER, on_machine_change,
                                      &ctx);
        if (r < 0)
                log_error_errno(r, "Failed to apply machineConfig: %m");
}

static int on_machine_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        MachineRoom *room = userdata;
        int r;

        machine_room_apply(room, MACHINE_CAUSE_TIMER);
        r = sd_event_source_set_time_relative(s, machine_room_config(room)->machine_config_interval_usec);
        if (r >= 0)
                r = sd_event_source_set_enabled(s, SD_EVENT_ON);
        if (r < 0) {
                log_error_errno(r, "Failed to re-arm the %s timer, stopping the agent: %m", "machineConfig");
                room->deps.fatal(room->deps.userdata, r);
        }
        return 0;
}

size_t machine_room_n_scoped(MachineRoom *room) {
        const Config *c = machine_room_config(room);
        size_t n = 0;

        for (size_t i = 0; i < c->n_machine_config; i++)
                if (c->machine_config[i].node_selector)
                        n++;
        return n;
}

int machine_room_start(MachineRoom *room) {
        int r;

        /* First: perf_event_paranoid and friends may be what lets us sample. */
        machine_room_apply(room, MACHINE_CAUSE_CONFIG);
        r = sd_event_add_time_relative(room->deps.event, &room->timer, CLOCK_MONOTONIC,
                                       machine_room_config(room)->machine_config_interval_usec, USEC_PER_SEC,
                                       on_machine_timer, room);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the machineConfig timer: %m");
        (void) sd_event_source_set_description(room->timer, "machine-config");
        return 0;
}

void machine_room_host_mode(MachineRoom *room) {
        if (room->host)
                return;
        room->host = true;
        machine_room_apply(room, MACHINE_CAUSE_LABELS);
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

void machine_room_node_labels(MachineRoom *room, char **labels) {
        _cleanup_strv_free_ char **l = labels;
        _cleanup_free_ char *text = NULL;
        bool first = !room->node_read, was_deleted = room->node_deleted;

        room->node_deleted = false;
        if (!first && labels_equal(room->node_labels, l)) {
                if (was_deleted)
                        log_notice("Node %s is back.", room->deps.node_name);
                return;
        }
        (void) labels_to_string(l, &text);
        strv_free(room->node_labels);
        room->node_labels = TAKE_PTR(l);
        room->node_read = true;
        if (first)
                log_notice("Read Node %s, labels {%s}: the machineConfig entries it selects apply now.",
                           room->deps.node_name, strna(text));
        else
                log_notice("Node %s's labels changed to {%s}: machineConfig computed again.",
                           room->deps.node_name, strna(text));
        if (room->host)
                return; /* nodeLabels decide */
        machine_room_apply(room, MACHINE_CAUSE_LABELS);
}

void machine_room_node_deleted(MachineRoom *room) {
        _cleanup_free_ char *text = NULL;

        if (room->node_deleted)
                return;
        room->node_deleted = true;
        if (!room->node_read) {
                log_warning("Node %s does not exist: only the machineConfig entries without nodeSelector "
                            "apply.",
                            room->deps.node_name);
                return;
        }
        (void) labels_to_string(room->node_labels, &text);
        log_warning("Node %s was deleted: machineConfig keeps going by its last known labels {%s}.",
                    room->deps.node_name, strna(text));
}

void machine_room_restore(MachineRoom *room) {
        _cleanup_(machine_wants_done) MachineWants none = {};
        int r;

        if (!room || !machine_room_config(room) || !machine_room_config(room)->restore_machine_config)
                return;
        MachineApplyContext ctx = { .room = room, .previous = &room->wants, .stopping = true };
        r = machine_config_restore(room->deps.state_dir, room->deps.sysctl_root, on_machine_change, &ctx);
        if (r < 0)
                log_error_errno(r, "Failed to restore machineConfig: %m");
}

int machine_room_new(const MachineRoomDeps *deps, MachineRoom **ret) {
        _cleanup_(machine_room_freep) MachineRoom *room = NULL;

        if (!deps->event || !deps->node_name || !deps->state_dir || !deps->config || !deps->fatal)
                return -EINVAL;
        room = calloc(1, sizeof(*room));
        if (!room)
                return -ENOMEM;
        room->deps = *deps;
        room->deps.node_name = room->deps.state_dir = room->deps.sysctl_root = NULL;
        room->deps.event = sd_event_ref(deps->event);
        room->host = deps->host;
        if (!(room->deps.node_name = strdup(deps->node_name)) ||
            !(room->deps.state_dir = strdup(deps->state_dir)) ||
            (deps->sysctl_root && !(room->deps.sysctl_root = strdup(deps->sysctl_root))))
                return -ENOMEM;
        *ret = TAKE_PTR(room);
        return 0;
}

MachineRoom *machine_room_free(MachineRoom *room) {
        if (!room)
                return NULL;
        machine_room_node_stop(room);
        room->timer = sd_event_source_disable_unref(room->timer);
        machine_wants_done(&room->wants);
        ARRAY_CLEAR(room->last, room->n_last, free(_e->name));
        strv_free(room->node_labels);
        free((char *) room->deps.node_name);
        free((char *) room->deps.state_dir);
        free((char *) room->deps.sysctl_root);
        sd_event_unref(room->deps.event);
        free(room);
        return NULL;
}

void machine_room_config_changed(MachineRoom *room) {
        machine_room_apply(room, MACHINE_CAUSE_CONFIG);
        if (room->timer)
                (void) sd_event_source_set_time_relative(
                        room->timer, machine_room_config(room)->machine_config_interval_usec);
}

const MachineWants *machine_room_wants(MachineRoom *room) {
        return &room->wants;
}

/* ---- check and status ---- */

static const char *labels_source(MachineRoom *room) {
        if (room->host)
                return machine_room_config(room)->node_labels ? "nodeLabels"
                                                              : "none (a host without nodeLabels)";
        if (!room->node_read)
                return room->node_deleted ? "none (the Node does not exist)"
                                          : "none (the Node not read yet)";
        return room->node_deleted ? "node (deleted: its last known labels)" : "node";
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

static int check_add(MachineRoom *room, ControlMachineCheck *c, const char *name) {
        const MachineWant *w = machine_wants_find(&room->wants, name);
        const MachineLast *last = machine_last_get(room, name);
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

        if (sysctl_path(room->deps.sysctl_root, name, &path) >= 0)
                (void) read_one_line_file(path, &s->actual);
        if (!s->actual)
                s->actual = strdup("");
        s->name = strdup(name);
        s->desired = strdup(w ? w->value : "");
        s->entry = w ? machine_entry_path(w->entry) : strdup("");
        s->selector = strdup(w && w->selector ? w->selector : "");
        if (!s->actual || !s->name || !s->desired || !s->entry || !s->selector)
                return -ENOMEM;

        s->state = machine_sysctl_state(&room->wants, name, s->actual[0] ? s->actual : NULL,
                                        last ? last->change : _MACHINE_CHANGE_MAX);
        return 0;
}

int machine_room_check(MachineRoom *room, ControlMachineCheck *ret) {
        _cleanup_(control_machine_check_done) ControlMachineCheck c = {};
        const Config *cfg = machine_room_config(room);
        bool known;
        Labels labels = machine_labels(room, &known);
        int r;

        r = labels_to_string(labels, &c.labels);
        if (r < 0)
                return r;
        c.labels_source = labels_source(room);
        /* Every sysctl an entry names (config order), then those changed
         * earlier that no entry names any more. */
        for (size_t i = 0; i < cfg->n_machine_config; i++) {
                r = check_add(room, &c, cfg->machine_config[i].name);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < room->n_last; i++) {
                r = check_add(room, &c, room->last[i].name);
                if (r < 0)
                        return r;
        }
        *ret = c;
        c = (ControlMachineCheck){};
        return 0;
}

int machine_room_status(MachineRoom *room, cJSON *j) {
        _cleanup_(control_machine_check_done) ControlMachineCheck c = {};
        cJSON *o, *a;
        int r;

        r = machine_room_check(room, &c);
        if (r < 0)
                return r;
        o = cJSON_AddObjectToObject(j, "machineConfig");
        if (!o)
                return -ENOMEM;
        cJSON_AddStringToObject(o, "node", strempty(room->deps.node_name));
        cJSON_AddStringToObject(o, "labelsSource", c.labels_source);
        cJSON_AddStringToObject(o, "labels", c.labels);
        cJSON_AddBoolToObject(o, "nodeRead", room->host || room->node_read);
        cJSON_AddBoolToObject(o, "nodeDeleted", room->node_deleted);
        if (!room->host && !room->node_read)
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
