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
#include "kube-room.h"
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
static int collect(KubeRoom *room, const char *namespace, ProfileConfigState ***ret, size_t *ret_n) {
        ProfileConfigState **list, *s;
        size_t n = 0;

        list = reallocarray(NULL, MAX(profile_config_state_map_size(&room->pcs), (size_t) 1),
                            sizeof(ProfileConfigState *));
        if (!list)
                return -ENOMEM;
        HASHMAP_FOREACH (s, profile_config_state_map, &room->pcs)
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

static int rule_set_new(KubeRoom *room, const char *namespace, ProfileConfigState **objects, size_t n,
                        KubeRuleSet **ret) {
        _cleanup_(kube_rule_set_unrefp) KubeRuleSet *s = NULL;
        int r;

        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->n_ref = 1;
        s->cluster = config_ref(kube_room_config(room));
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
        r = kube_rules_build(kube_room_config(room)->config, namespace ?: "", s->scopes, s->n_scopes,
                             &s->rules);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(s);
        return 0;
}

static KubeRuleSet *rule_set_find(KubeRoom *room, const char *namespace) {
        return kube_rule_set_map_get(&room->rule_sets, namespace);
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
static int rebuild_namespace(KubeRoom *room, const char *namespace) {
        _cleanup_free_ ProfileConfigState **all = NULL;
        _cleanup_free_ char *ns = strdup(namespace);
        KubeRuleSet *old, *s = NULL;
        size_t n_all, n = 0;
        int r;

        if (!ns)
                return -ENOMEM;
        r = collect(room, ns, &all, &n_all);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n_all; i++)
                if (all[i]->config)
                        all[n++] = all[i];
        if (n > 1) /* all is NULL when the namespace has no object left */
                qsort(all, n, sizeof(*all), by_age);

        old = kube_rule_set_map_remove(&room->rule_sets, ns);
        kube_rule_set_unref(old);
        if (n == 0)
                return 0;

        r = rule_set_new(room, ns, all, n, &s);
        if (r < 0)
                return r;
        r = kube_rule_set_map_put(&room->rule_sets, s->namespace, s);
        if (r < 0) {
                kube_rule_set_unref(s);
                return r;
        }
        log_rule_errors(s);
        return 0;
}

KubeRuleSet *kube_room_rule_set(KubeRoom *room, const char *namespace) {
        KubeRuleSet *s = namespace ? rule_set_find(room, namespace) : NULL;
        return s ?: room->cluster_rules;
}

static int rule_set_namespace_cmp(const void *a, const void *b) {
        return strcmp((*(KubeRuleSet *const *) a)->namespace, (*(KubeRuleSet *const *) b)->namespace);
}

int kube_room_rule_sets(KubeRoom *room, KubeRuleSet ***ret, size_t *ret_n) {
        KubeRuleSet **sets, *set;
        size_t n = 0;

        sets = reallocarray(NULL, MAX(kube_rule_set_map_size(&room->rule_sets), (size_t) 1),
                            sizeof(KubeRuleSet *));
        if (!sets)
                return -ENOMEM;
        HASHMAP_FOREACH (set, kube_rule_set_map, &room->rule_sets)
                sets[n++] = set;
        if (n > 1)
                qsort(sets, n, sizeof(KubeRuleSet *), rule_set_namespace_cmp);
        *ret = sets;
        *ret_n = n;
        return 0;
}

bool kube_room_rules_ready(KubeRoom *room) {
        return !room->pc_watch || room->pcs_synced || room->pcs_unavailable != 0;
}

KubeMatch kube_room_match(KubeRoom *room, const KubeNamespace *ns, const KubePod *pod, const char *container,
                          const char *cgroup, SessionRule *ret) {
        KubeRuleSet *s = kube_room_rule_set(room, pod->namespace);
        const KubeRule *rule = NULL;
        KubeMatch match;

        if (!s)
                return KUBE_MATCH_NO;
        if (!kube_room_rules_ready(room))
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

/* Every namespace with objects, each once (collect() is in key order). */
static int rebuild_all(KubeRoom *room) {
        _cleanup_free_ ProfileConfigState **all = NULL;
        size_t n;
        int r;

        r = collect(room, NULL, &all, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++)
                if (i == 0 || !streq(all[i]->namespace, all[i - 1]->namespace)) {
                        r = rebuild_namespace(room, all[i]->namespace);
                        if (r < 0)
                                return r;
                }
        return 0;
}

int kube_room_rules_reload(KubeRoom *room) {
        _cleanup_free_ ProfileConfigState **all = NULL;
        KubeRuleSet *cluster = NULL;
        size_t n;
        int r;

        if (!kube_room_config(room))
                return 0;
        r = rule_set_new(room, NULL, NULL, 0, &cluster);
        if (r < 0)
                return r;
        kube_rule_set_unref(room->cluster_rules);
        room->cluster_rules = cluster;

        /* Objects may name the cluster's profiles: parse them again. */
        r = collect(room, NULL, &all, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                ProfileConfigState *s = all[i];
                _cleanup_(config_freep) Config *c = NULL;
                _cleanup_free_ char *error = NULL;
                ConfigRef *ref;

                if (!s->spec)
                        continue;
                r = config_parse_namespaced(s->spec, "spec", kube_room_config(room)->config, &c, &error);
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
        return rebuild_all(room);
}

/* ---- the watch ---- */

static ProfileConfigState *pc_find(KubeRoom *room, const char *key) {
        return profile_config_state_map_get(&room->pcs, key);
}

static const char *json_string(const cJSON *o, const char *key) {
        const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
        return cJSON_IsString(j) ? j->valuestring : NULL;
}

static void pc_gone(KubeRoom *room, ProfileConfigState *s) {
        _cleanup_free_ char *ns = strdup(s->namespace), *msg = NULL;
        JournalProfileConfigFields f = { .namespace = s->namespace, .name = s->name, .change = "removed" };

        if (asprintf(&msg, "ProfileConfig %s removed: its targets and profiles no longer apply.", s->key) >=
            0)
                journal_profile_config(JOURNAL_PROFILE_CONFIG_APPLIED, &f, msg);
        (void) profile_config_state_map_remove_value(&room->pcs, s->key, s);
        pc_free(s);
        if (!ns)
                return (void) log_oom();
        if (rebuild_namespace(room, ns) < 0)
                return (void) log_oom();
        kube_room_pods_changed(room, NULL, ns);
}

/* Returns whether the object is kept (the watch then says when a relist no longer reports it). */
static bool on_pc_event(KubeEventType type, const cJSON *object, void *userdata) {
        KubeRoom *room = userdata;
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
        s = pc_find(room, key);

        if (type == KUBE_EVENT_DELETED) {
                if (s)
                        pc_gone(room, s);
                return false;
        }

        if (!s) {
                s = calloc(1, sizeof(*s));
                if (!s || !(s->key = strdup(key)) || !(s->namespace = strdup(namespace)) ||
                    !(s->name = strdup(name)) || profile_config_state_map_put(&room->pcs, s->key, s) < 0) {
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
                r = config_parse_namespaced(spec, "spec", kube_room_config(room)->config, &c, &error);
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
        if (!room->pcs_synced)
                return true;
        if (rebuild_namespace(room, namespace) < 0) {
                log_oom();
                return true;
        }
        kube_room_pods_changed(room, NULL, namespace);
        return true;
}

/* Deleted while the watch was down: the relist did not report it. */
static void on_pc_vanished(const char *key, void *userdata) {
        KubeRoom *room = userdata;
        ProfileConfigState *s = pc_find(room, key);

        if (s)
                pc_gone(room, s);
}

static void on_pc_synced(void *userdata) {
        KubeRoom *room = userdata;

        if (!room->pcs_synced || room->pcs_unavailable)
                log_info("Listed the ProfileConfig objects: watching them.");
        if (!room->pcs_synced && rebuild_all(room) < 0)
                return (void) log_oom();
        room->pcs_synced = true;
        room->pcs_unavailable = 0;
        kube_room_pods_changed(room, NULL, NULL);
}

static bool on_pc_list_failed(long status, const char *message, void *userdata) {
        KubeRoom *room = userdata;

        if (status != 404 && status != 403)
                return false;
        if (room->pcs_unavailable != status) {
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
        bool first = room->pcs_unavailable == 0 && !room->pcs_synced;
        room->pcs_unavailable = status;
        if (first)
                kube_room_pods_changed(room, NULL, NULL); /* pods waited for the ProfileConfigs */
        return true;
}

int kube_room_pc_start(KubeRoom *room, const KubeWatchOptions *opts) {
        static const KubeWatchCallbacks cb = {
                .event = on_pc_event,
                .vanished = on_pc_vanished,
                .key = KUBE_WATCH_KEY_NAME,
                .synced = on_pc_synced,
                .list_failed = on_pc_list_failed,
        };
        int r;

        r = kube_watch_new(room->client, PROFILE_CONFIG_PATH, NULL, opts, &cb, room, &room->pc_watch);
        if (r < 0)
                return r;
        return kube_watch_start(room->pc_watch);
}

void kube_room_pc_free(KubeRoom *room) {
        room->pc_watch = kube_watch_free(room->pc_watch);
        profile_config_state_map_clear(&room->pcs, pc_free);
        kube_rule_set_map_clear(&room->rule_sets, rule_set_unref_void);
        room->cluster_rules = kube_rule_set_unref(room->cluster_rules);
}

int kube_room_pc_status(KubeRoom *room, cJSON *kube) {
        _cleanup_free_ ProfileConfigState **all = NULL;
        cJSON *list, *o;
        size_t n;
        int r;

        o = cJSON_AddObjectToObject(kube, "profileConfigWatch");
        if (!o)
                return -ENOMEM;
        KubeWatchStats st = {};
        kube_watch_stats(room->pc_watch, &st);
        cJSON_AddBoolToObject(o, "synced", st.synced);
        cJSON_AddNumberToObject(o, "unavailable", (double) room->pcs_unavailable);
        cJSON_AddStringToObject(o, "resourceVersion", strempty(st.resource_version));
        cJSON_AddNumberToObject(o, "events", (double) st.events);

        list = cJSON_AddArrayToObject(kube, "profileConfigs");
        if (!list)
                return -ENOMEM;
        r = collect(room, NULL, &all, &n);
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
                KubeRuleSet *rs = rule_set_find(room, s->namespace);
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
