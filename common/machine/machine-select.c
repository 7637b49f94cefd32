/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include "machine-select.h"

static void machine_want_done(MachineWant *w) {
        free(w->name);
        free(w->value);
        free(w->selector);
        *w = (MachineWant){};
}

void machine_wants_done(MachineWants *w) {
        if (!w)
                return;
        for (size_t i = 0; i < w->n; i++)
                machine_want_done(&w->items[i]);
        free(w->items);
        strv_free(w->pending);
        *w = (MachineWants){};
}

const MachineWant *machine_wants_find(const MachineWants *w, const char *name) {
        for (size_t i = 0; w && name && i < w->n; i++)
                if (streq(w->items[i].name, name))
                        return &w->items[i];
        return NULL;
}

char *machine_entry_path(size_t entry) {
        char *p;

        if (asprintf(&p, "machineConfig[%zu]", entry) < 0)
                return NULL;
        return p;
}

static bool strv_has(char *const *l, const char *s) {
        for (; l && *l; l++)
                if (streq(*l, s))
                        return true;
        return false;
}

static int strv_add(char ***l, const char *s) {
        size_t n = strv_length(*l);
        char **nl = realloc(*l, (n + 2) * sizeof(char *));

        if (!nl)
                return -ENOMEM;
        *l = nl;
        nl[n] = strdup(s);
        nl[n + 1] = NULL;
        return nl[n] ? 0 : -ENOMEM;
}

int machine_wants_select(const Config *c, Labels labels, bool labels_known, MachineWants *ret) {
        _cleanup_(machine_wants_done) MachineWants w = {};
        int r;

        if (!c || !ret)
                return -EINVAL;
        if (c->n_machine_config > 0) {
                w.items = calloc(c->n_machine_config, sizeof(MachineWant));
                if (!w.items)
                        return -ENOMEM;
        }

        for (size_t i = 0; i < c->n_machine_config; i++) {
                const MachineSetting *s = &c->machine_config[i];
                MachineWant *n;

                if (s->node_selector && !labels_known)
                        continue;
                if (!label_selector_matches(s->node_selector, labels))
                        continue;
                if (machine_wants_find(&w, s->name))
                        return -EEXIST; /* not from a validated config */

                n = &w.items[w.n++];
                n->entry = i;
                n->name = strdup(s->name);
                n->value = strdup(s->value);
                if (!n->name || !n->value)
                        return -ENOMEM;
                if (s->node_selector) {
                        r = label_selector_to_string(s->node_selector, &n->selector);
                        if (r < 0)
                                return r;
                }
        }

        if (!labels_known)
                for (size_t i = 0; i < c->n_machine_config; i++) {
                        const char *name = c->machine_config[i].name;

                        if (machine_wants_find(&w, name) || strv_has(w.pending, name))
                                continue;
                        r = strv_add(&w.pending, name);
                        if (r < 0)
                                return r;
                }

        *ret = w;
        w = (MachineWants){};
        return 0;
}

int machine_wants_settings(const MachineWants *w, MachineSetting **ret) {
        MachineSetting *s = calloc(w->n + 1, sizeof(MachineSetting));

        if (!s)
                return -ENOMEM;
        for (size_t i = 0; i < w->n; i++)
                s[i] = (MachineSetting){ .name = w->items[i].name, .value = w->items[i].value };
        *ret = s;
        return 0;
}

const char *machine_sysctl_state(const MachineWants *w, const char *name, const char *actual,
                                 MachineChange last) {
        const MachineWant *want = machine_wants_find(w, name);

        if (want) {
                if (actual && machine_value_equal(actual, want->value))
                        return "applied";
                return last == MACHINE_CHANGE_REFUSED ? "refused" : "drifted";
        }
        if (w && strv_has(w->pending, name))
                return "waiting for the node's labels";
        return last == MACHINE_CHANGE_RESTORE ? "restored" : "not selected";
}
