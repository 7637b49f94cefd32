/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ProfileConfig objects (cgprof.io/v1, namespaced): a cluster-wide
 * list+watch, each object's spec parsed with config_parse_namespaced(), and
 * per namespace a KubeRuleSet that merges them with the cluster config
 * (kube_rules_build()). A ProfileConfig only ever reaches pods of its own
 * namespace: the rule set of namespace N is built from N's objects only, and
 * only pods of N are matched against it.
 *
 * An object whose new version is invalid keeps its last good version (if
 * any) and the error is logged and kept for the status. Every change is a
 * journal entry; so is every target left out of a merge (two enabled
 * targets with one name in one namespace), naming both objects. The agent
 * has no write access to the API, so it reports there, not as Events. */
#include "base.h"
#include "kube-target.h"
#include "log.h"
#include "manager.h"
#include "manager-kube.h"
#include "manager-profileconfig.h"

#define PROFILE_CONFIG_PATH "/apis/cgprof.io/v1/profileconfigs"

struct ProfileConfigState {
        char *key; /* "namespace/name" */
        char *namespace, *name;
        char *created; /* metadata.creationTimestamp: RFC 3339 in UTC, sorts as text */
        char *resource_version;
        cJSON *spec; /* the last spec seen, parsed again when the cluster config changes */
        ConfigRef *config; /* the last good version, NULL when none */
        char *error; /* why the last version seen was refused, NULL when it applies */
};

static void pc_free(ProfileConfigState *s) {
        if (!s)
                return;
        free(s->key);
        free(s->namespace);
        free(s->name);
        free(s->created);
        free(s->resource_version);
        cJSON_Delete(s->spec);
        config_unref(s->config);
        free(s->error);
        free(s);
}

static void rule_set_unref_void(KubeRuleSet *s) {
        kube_rule_set_unref(s);
}

char *kube_rule_display_name(const KubeRuleSet *set, const KubeRule *rule) {
        char *s;

        if (rule->target_scope == KUBE_SCOPE_CLUSTER)
                return strdup(rule->target->name);
        if (asprintf(&s, "%s (ProfileConfig %s)", rule->target->name, set->scopes[rule->target_scope].name) <
            0)
                return NULL;
        return s;
}

/* ---- the objects of a namespace ---- */

static int by_key(const void *a, const void *b) {
        return strcmp((*(ProfileConfigState *const *) a)->key, (*(ProfileConfigState *const *) b)->key);
}

/* The objects of a namespace (NULL: all), in key order ("namespace/name"). */
static int collect(Manager *m, const char *namespace, ProfileConfigState ***ret, size_t *ret_n) {
        ProfileConfigState **list, *s;
        size_t n = 0;

        list = reallocarray(NULL, MAX(profile_config_state_map_size(&m->kube_pcs), (size_t) 1),
                            sizeof(ProfileConfigState *));
        if (!list)
                return -ENOMEM;
        HASHMAP_FOREACH (s, profile_config_state_map, &m->kube_pcs)
                if (!namespace || streq(s->namespace, namespace))
                        list[n++] = s;
        if (n > 1)
                qsort(list, n, sizeof(ProfileConfigState *), by_key);
        *ret = list;
        *ret_n = n;
        return 0;
}

/* Oldest first; the name breaks ties (objects created in the same second). */
static int by_age(const void *a, const void *b) {
        const ProfileConfigState *x = *(ProfileConfigState *const *) a,
                                 *y = *(ProfileConfigState *const *) b;
        int k = strcmp(strempty(x->created), strempty(y->created));
        return k != 0 ? k : strcmp(x->name, y->name);
}

static int rule_set_new(Manager *m, const char *namespace, ProfileConfigState **objects, size_t n,
                        KubeRuleSet **ret) {
        _cleanup_(kube_rule_set_unrefp) KubeRuleSet *s = NULL;
        int r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->n_ref = 1;
        s->cluster = config_ref(m->config);
        if (namespace && !(s->namespace = strdup(namespace)))
                return -ENOMEM;
        if (n > 0) {
                s->scopes = calloc(n, sizeof(KubeScope));
                s->scope_configs = calloc(n, sizeof(ConfigRef *));
                s->scope_names = calloc(n, sizeof(char *));
                if (!s->scopes || !s->scope_configs || !s->scope_names)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                s->scope_names[i] = strdup(objects[i]->name);
                if (!s->scope_names[i])
                        return -ENOMEM;
                s->scope_configs[i] = config_ref(objects[i]->config);
                s->scopes[i] =
                        (KubeScope){ .name = s->scope_names[i], .config = objects[i]->config->config };
                s->n_scopes = i + 1;
        }
        r = kube_rules_build(m->config->config, namespace ?: "", s->scopes, s->n_scopes, &s->rules);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

static KubeRuleSet *rule_set_find(Manager *m, const char *namespace) {
        return kube_rule_set_map_get(&m->kube_rule_sets, namespace);
}

static void log_rule_errors(const KubeRuleSet *s) {
        for (size_t i = 0; i < s->rules.n_errors; i++) {
                const KubeRuleError *e = &s->rules.errors[i];
                JournalProfileConfigFields f = {
                        .namespace = s->namespace,
                        .name = e->scope >= 0 ? s->scopes[e->scope].name : NULL,
                        .target = e->target,
                        .conflict_with = e->conflict_with,
                };
                journal_profile_config(JOURNAL_PROFILE_CONFIG_CONFLICT, &f, e->message);
        }
}

/* Builds the rule set of a namespace again from its objects (that have a
 * good version); a namespace left without any falls back to the cluster set. */
static int rebuild_namespace(Manager *m, const char *namespace) {
        _cleanup_free_ ProfileConfigState **all = NULL;
        _cleanup_free_ char *ns = strdup(namespace);
        KubeRuleSet *old, *s = NULL;
        size_t n_all, n = 0;
        int r;

        if (!ns)
                return -ENOMEM;
        r = collect(m, ns, &all, &n_all);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n_all; i++)
                if (all[i]->config)
                        all[n++] = all[i];
        if (n > 1) /* all is NULL when the namespace has no object left */
                qsort(all, n, sizeof(*all), by_age);

        old = kube_rule_set_map_remove(&m->kube_rule_sets, ns);
        kube_rule_set_unref(old);
        if (n == 0)
                return 0;

        r = rule_set_new(m, ns, all, n, &s);
        if (r < 0)
                return r;
        r = kube_rule_set_map_put(&m->kube_rule_sets, s->namespace, s);
        if (r < 0) {
                kube_rule_set_unref(s);
                return r;
        }
        log_rule_errors(s);
        return 0;
}

KubeRuleSet *manager_kube_rule_set(Manager *m, const char *namespace) {
        KubeRuleSet *s = namespace ? rule_set_find(m, namespace) : NULL;
        return s ?: m->kube_cluster_rules;
}

bool manager_kube_rules_ready(Manager *m) {
        return !m->kube_pc_watch || m->kube_pcs_synced || m->kube_pcs_unavailable != 0;
}

KubeMatch manager_kube_match(Manager *m, const KubeNamespace *ns, const KubePod *pod, const char *container,
                             const char *cgroup, SessionRule *ret) {
        KubeRuleSet *s = manager_kube_rule_set(m, pod->namespace);
        const KubeRule *rule = NULL;
        KubeMatch match;

        if (!s)
                return KUBE_MATCH_NO;
        if (!manager_kube_rules_ready(m))
                return KUBE_MATCH_UNDECIDED;
        match = kube_rules_find(&s->rules, ns, pod, container, cgroup, &rule);
        if (match == KUBE_MATCH_YES && ret)
                *ret = (SessionRule){
                        .target = rule->target,
                        .profile = rule->profile,
                        .rule_set = s,
                        .profile_config = rule->target_scope >= 0    ? s->scopes[rule->target_scope].name
                                          : rule->profile_scope >= 0 ? s->scopes[rule->profile_scope].name
                                                                     : NULL,
                        .namespaced_output = rule->profile_scope >= 0,
                };
        return match;
}

/* Sessions of pods in a namespace (NULL: every namespace) follow the new rules. */
static void reconcile(Manager *m, const char *namespace) {
        manager_kube_reconcile_namespace(m, namespace);
}

/* Every namespace with objects, each once (collect() is in key order). */
static int rebuild_all(Manager *m) {
        _cleanup_free_ ProfileConfigState **all = NULL;
        size_t n;
        int r;

        r = collect(m, NULL, &all, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                if (i == 0 || !streq(all[i]->namespace, all[i - 1]->namespace)) {
                        r = rebuild_namespace(m, all[i]->namespace);
                        if (r < 0)
                                return r;
                }
        return 0;
}

int manager_kube_rules_reload(Manager *m) {
        _cleanup_free_ ProfileConfigState **all = NULL;
        KubeRuleSet *cluster = NULL;
        size_t n;
        int r;

        if (!m->config)
                return 0;
        r = rule_set_new(m, NULL, NULL, 0, &cluster);
        if (r < 0)
                return r;
        kube_rule_set_unref(m->kube_cluster_rules);
        m->kube_cluster_rules = cluster;

        /* Objects may name the cluster's profiles: parse them again. */
        r = collect(m, NULL, &all, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                ProfileConfigState *s = all[i];
                _cleanup_(config_freep) Config *c = NULL;
                _cleanup_free_ char *error = NULL;
                ConfigRef *ref;

                if (!s->spec)
                        continue;
                r = config_parse_namespaced(s->spec, "spec", m->config->config, &c, &error);
                if (r == -ENOMEM)
                        return r;
                free(s->error);
                s->error = NULL;
                if (r < 0) {
                        s->error = TAKE_PTR(error);
                        log_warning("ProfileConfig %s: %s (after the cluster config changed; %s).", s->key,
                                    strna(s->error),
                                    s->config ? "keeping its last good version" : "it does not apply");
                        continue;
                }
                r = config_ref_new(TAKE_PTR(c), &ref);
                if (r < 0)
                        return r;
                config_unref(s->config);
                s->config = ref;
        }
        return rebuild_all(m);
}

/* ---- the watch ---- */

static ProfileConfigState *pc_find(Manager *m, const char *key) {
        return profile_config_state_map_get(&m->kube_pcs, key);
}

static const char *json_string(const cJSON *o, const char *key) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
        return cJSON_IsString(j) ? j->valuestring : NULL;
}

static void pc_gone(Manager *m, ProfileConfigState *s) {
        _cleanup_free_ char *ns = strdup(s->namespace), *msg = NULL;
        JournalProfileConfigFields f = { .namespace = s->namespace, .name = s->name, .change = "removed" };

        if (asprintf(&msg, "ProfileConfig %s removed: its targets and profiles no longer apply.", s->key) >=
            0)
                journal_profile_config(JOURNAL_PROFILE_CONFIG_APPLIED, &f, msg);
        (void) profile_config_state_map_remove_value(&m->kube_pcs, s->key, s);
        pc_free(s);
        if (!ns)
                return (void) log_oom();
        if (rebuild_namespace(m, ns) < 0)
                return (void) log_oom();
        reconcile(m, ns);
}

/* Returns whether the object is kept (the watch then says when a relist no longer reports it). */
static bool on_pc_event(KubeEventType type, const cJSON *object, void *userdata) {
        Manager *m = userdata;
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_free_ char *key = NULL, *error = NULL, *msg = NULL;
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(object, "metadata");
        const cJSON *spec = cJSON_GetObjectItemCaseSensitive(object, "spec");
        const char *namespace = json_string(meta, "namespace"), *name = json_string(meta, "name");
        ProfileConfigState *s;
        bool added = false;
        int r;

        if (!namespace || !name) {
                log_warning("Skipping a ProfileConfig the API sent without metadata.namespace or "
                            "metadata.name.");
                return false;
        }
        if (asprintf(&key, "%s/%s", namespace, name) < 0) {
                log_oom();
                return false;
        }
        s = pc_find(m, key);

        if (type == KUBE_EVENT_DELETED) {
                if (s)
                        pc_gone(m, s);
                return false;
        }

        if (!s) {
                s = calloc(1, sizeof(*s));
                if (!s || !(s->key = strdup(key)) || !(s->namespace = strdup(namespace)) ||
                    !(s->name = strdup(name)) || profile_config_state_map_put(&m->kube_pcs, s->key, s) < 0) {
                        pc_free(s);
                        log_oom();
                        return false;
                }
                added = true;
        }
        if (json_string(meta, "resourceVersion") && s->resource_version &&
            streq(json_string(meta, "resourceVersion"), s->resource_version))
                return true; /* the same version again (a relist) */
        free(s->resource_version);
        s->resource_version = strdup(strempty(json_string(meta, "resourceVersion")));
        free(s->created);
        s->created = strdup(strempty(json_string(meta, "creationTimestamp")));
        cJSON_Delete(s->spec);
        s->spec = spec ? cJSON_Duplicate(spec, true) : NULL;
        if (!s->resource_version || !s->created || (spec && !s->spec)) {
                log_oom();
                return true;
        }

        if (!spec)
                r = -EINVAL, error = strdup("spec: required key is missing");
        else
                r = config_parse_namespaced(spec, "spec", m->config->config, &c, &error);
        if (r == -ENOMEM) {
                log_oom();
                return true;
        }
        free(s->error);
        s->error = NULL;
        if (r < 0) {
                JournalProfileConfigFields f = { .namespace = namespace, .name = name, .error = error };

                if (asprintf(&msg, "ProfileConfig %s refused: %s (%s).", key, strna(error),
                             s->config ? "its last good version still applies" : "it does not apply") >= 0)
                        journal_profile_config(JOURNAL_PROFILE_CONFIG_REJECTED, &f, msg);
                s->error = TAKE_PTR(error);
                return true; /* nothing changed */
        }

        ConfigRef *ref;
        r = config_ref_new(TAKE_PTR(c), &ref);
        if (r < 0) {
                log_oom();
                return true;
        }
        config_unref(s->config);
        s->config = ref;

        JournalProfileConfigFields f = { .namespace = namespace,
                                         .name = name,
                                         .change = added ? "added" : "changed" };
        if (asprintf(&msg, "ProfileConfig %s %s: %zu profiles, %zu targets for the pods of namespace %s.",
                     key, added ? "added" : "changed", ref->config->n_profiles, ref->config->n_targets,
                     namespace) >= 0)
                journal_profile_config(JOURNAL_PROFILE_CONFIG_APPLIED, &f, msg);

        /* The first list is merged once, when complete (on_pc_synced()). */
        if (!m->kube_pcs_synced)
                return true;
        if (rebuild_namespace(m, namespace) < 0) {
                log_oom();
                return true;
        }
        reconcile(m, namespace);
        return true;
}

/* Deleted while the watch was down: the relist did not report it. */
static void on_pc_vanished(const char *key, void *userdata) {
        Manager *m = userdata;
        ProfileConfigState *s = pc_find(m, key);

        if (s)
                pc_gone(m, s);
}

static void on_pc_synced(void *userdata) {
        Manager *m = userdata;

        if (!m->kube_pcs_synced || m->kube_pcs_unavailable)
                log_info("Listed the ProfileConfig objects: watching them.");
        if (!m->kube_pcs_synced && rebuild_all(m) < 0)
                return (void) log_oom();
        m->kube_pcs_synced = true;
        m->kube_pcs_unavailable = 0;
        reconcile(m, NULL);
}

static bool on_pc_list_failed(long status, const char *message, void *userdata) {
        Manager *m = userdata;

        if (status != 404 && status != 403)
                return false;
        if (m->kube_pcs_unavailable != status) {
                if (status == 404)
                        log_notice("The ProfileConfig resource (cgprof.io/v1) is not installed: only the "
                                   "cluster config applies. Will look again.");
                else
                        log_warning(
                                "Not allowed to list ProfileConfig objects (HTTP 403: %s): only the "
                                "cluster config applies. Grant get/list/watch on profileconfigs.cgprof.io "
                                "(see manifests/base/rbac.yaml). Will try again.",
                                strna(message));
        }
        bool first = m->kube_pcs_unavailable == 0 && !m->kube_pcs_synced;
        m->kube_pcs_unavailable = status;
        if (first)
                reconcile(m, NULL); /* pods waited for the ProfileConfigs */
        return true;
}

int manager_kube_pc_start(Manager *m, KubeClient *client, const KubeWatchOptions *opts) {
        static const KubeWatchCallbacks cb = {
                .event = on_pc_event,
                .vanished = on_pc_vanished,
                .key = KUBE_WATCH_KEY_NAME,
                .synced = on_pc_synced,
                .list_failed = on_pc_list_failed,
        };
        int r;

        r = kube_watch_new(client, PROFILE_CONFIG_PATH, NULL, opts, &cb, m, &m->kube_pc_watch);
        if (r < 0)
                return r;
        return kube_watch_start(m->kube_pc_watch);
}

void manager_kube_pc_free(Manager *m) {
        m->kube_pc_watch = kube_watch_free(m->kube_pc_watch);
        profile_config_state_map_clear(&m->kube_pcs, pc_free);
        kube_rule_set_map_clear(&m->kube_rule_sets, rule_set_unref_void);
        m->kube_cluster_rules = kube_rule_set_unref(m->kube_cluster_rules);
}

int manager_kube_pc_status(Manager *m, cJSON *kube) {
        _cleanup_free_ ProfileConfigState **all = NULL;
        cJSON *list, *o;
        size_t n;
        int r;

        o = cJSON_AddObjectToObject(kube, "profileConfigWatch");
        if (!o)
                return -ENOMEM;
        KubeWatchStats st = {};
        kube_watch_stats(m->kube_pc_watch, &st);
        cJSON_AddBoolToObject(o, "synced", st.synced);
        cJSON_AddNumberToObject(o, "unavailable", (double) m->kube_pcs_unavailable);
        cJSON_AddStringToObject(o, "resourceVersion", strempty(st.resource_version));
        cJSON_AddNumberToObject(o, "events", (double) st.events);

        list = cJSON_AddArrayToObject(kube, "profileConfigs");
        if (!list)
                return -ENOMEM;
        r = collect(m, NULL, &all, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                const ProfileConfigState *s = all[i];
                cJSON *p = cJSON_CreateObject();
                if (!p || !cJSON_AddItemToArray(list, p))
                        return -ENOMEM;
                cJSON_AddStringToObject(p, "namespace", s->namespace);
                cJSON_AddStringToObject(p, "name", s->name);
                cJSON_AddStringToObject(p, "state", !s->error ? "applied" : s->config ? "stale" : "refused");
                if (s->error)
                        cJSON_AddStringToObject(p, "error", s->error);
                cJSON_AddNumberToObject(p, "targets", s->config ? (double) s->config->config->n_targets : 0);
                cJSON_AddNumberToObject(p, "profiles",
                                        s->config ? (double) s->config->config->n_profiles : 0);
                KubeRuleSet *rs = rule_set_find(m, s->namespace);
                cJSON *errs = cJSON_AddArrayToObject(p, "conflicts");
                if (!errs)
                        return -ENOMEM;
                for (size_t k = 0; rs && k < rs->rules.n_errors; k++) {
                        const KubeRuleError *e = &rs->rules.errors[k];
                        if (e->scope >= 0 && streq(rs->scopes[e->scope].name, s->name))
                                cJSON_AddItemToArray(errs, cJSON_CreateString(e->message));
                }
        }
        return 0;
}
