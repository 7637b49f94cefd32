/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <stdlib.h>

#include "config-ref.h"

static void config_ref_free(ConfigRef *c) {
        config_free(c->config);
        free(c);
}

DEFINE_TRIVIAL_REF_UNREF_FUNC(ConfigRef, config, config_ref_free);

int config_ref_new(Config *config, ConfigRef **ret) {
        ConfigRef *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->n_ref = 1;
        c->config = config;
        *ret = c;
        return 0;
}

static void rule_set_free(KubeRuleSet *s) {
        kube_rules_done(&s->rules);
        for (size_t i = 0; i < s->n_scopes; i++) {
                config_unref(s->scope_configs[i]);
                free(s->scope_names[i]);
        }
        free(s->scope_configs);
        free(s->scope_names);
        free(s->scopes);
        config_unref(s->cluster);
        free(s->namespace);
        free(s);
}

DEFINE_TRIVIAL_REF_UNREF_FUNC(KubeRuleSet, kube_rule_set, rule_set_free);
