/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The control operations behind the D-Bus API (bus-api.h): the targets, the
 * sessions and the reports; whether a pod is targeted and why (not); starting
 * and stopping sessions on request; the machineConfig as it is. No D-Bus
 * here: manager-bus.c only marshals, so this can be called (and tested)
 * without a bus. Every operation is synchronous and bounded: it runs on the
 * event loop between two events. */
#include <fcntl.h>
#include <stdarg.h>
#include <sys/stat.h>

#include "cgroup-util.h"
#include "fileio.h"
#include "kube-target.h"
#include "log.h"
#include "machine-config.h"
#include "control-room.h"
#include "kube.h"
#include "machine.h"
#include "manager-control.h"
#include "sessions.h"

static ConfigRef *control_config(ControlRoom *room) {
        return room->deps.config(room->deps.userdata);
}

const Target control_on_demand_target = {
        .name = (char *) "on-demand",
};

static bool isempty(const char *s) {
        return !s || !s[0];
}

/* Sets *ret_error (when non-NULL) to the formatted message and returns r
 * (-ENOMEM when the message cannot be allocated). */
_printf_(3, 4) static int control_error(char **ret_error, int r, const char *fmt, ...) {
        va_list ap;
        char *s;

        if (!ret_error)
                return r;
        va_start(ap, fmt);
        if (vasprintf(&s, fmt, ap) < 0) {
                va_end(ap);
                return -ENOMEM;
        }
        va_end(ap);
        free(*ret_error);
        *ret_error = s;
        return r;
}

/* ---- targets ---- */

static const char *target_kind(const Target *t) {
        bool pod = kube_target_is_pod_rule(t);

        if (pod && t->cgroup_patterns)
                return "pod+cgroup";
        return pod ? "pod" : "cgroup";
}

void control_targets_free(ControlTarget *l, size_t n) {
        for (size_t i = 0; l && i < n; i++)
                free(l[i].owned);
        free(l);
}

typedef struct TargetList {
        ControlTarget *list;
        size_t n;
        int error;
} TargetList;

static int target_list_add(TargetList *l, ControlTarget t) {
        ControlTarget *n = reallocarray(l->list, l->n + 1, sizeof(ControlTarget));
        if (!n) {
                free(t.owned);
                return -ENOMEM;
        }
        l->list = n;
        l->list[l->n++] = t;
        return 0;
}

/* A namespace's ProfileConfigs' targets. */
static void add_rule_set_targets(TargetList *l, const KubeRuleSet *set) {
        for (size_t s = 0; s < set->n_scopes; s++) {
                const Config *c = set->scopes[s].config;
                for (size_t i = 0; i < c->n_targets; i++) {
                        const Target *t = &c->targets[i];
                        const Profile *p = NULL;
                        char *name;

                        /* The merged rule, when the target made it into the merge. */
                        for (size_t k = 0; k < set->rules.n_rules; k++)
                                if (set->rules.rules[k].target == t)
                                        p = set->rules.rules[k].profile;
                        if (asprintf(&name, "%s (ProfileConfig %s/%s)", t->name, set->namespace,
                                     set->scopes[s].name) < 0) {
                                l->error = -ENOMEM;
                                return;
                        }
                        l->error = target_list_add(l, (ControlTarget){
                                                              .name = name,
                                                              .owned = name,
                                                              .profile = p ? p->name : "",
                                                              .kind = "pod",
                                                              .disabled = t->disabled || !p,
                                                      });
                        if (l->error < 0)
                                return;
                }
        }
}

/* The namespaces' targets, in namespace order. */
static int add_rule_sets_targets(ControlRoom *room, TargetList *l) {
        _cleanup_free_ KubeRuleSet **sets = NULL;
        size_t n = 0;
        int r;

        r = kube_room_rule_sets(room->deps.kube, &sets, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n && l->error >= 0; i++)
                add_rule_set_targets(l, sets[i]);
        return l->error;
}

int control_list_targets(ControlRoom *room, ControlTarget **ret, size_t *ret_n) {
        const Config *c = control_config(room)->config;
        TargetList l = {};
        int r = 0;

        for (size_t i = 0; r >= 0 && i < c->n_targets; i++) {
                const Target *t = &c->targets[i];
                r = target_list_add(&l, (ControlTarget){
                                                .name = t->name,
                                                .profile = config_target_profile(c, t)->name,
                                                .kind = target_kind(t),
                                                .disabled = t->disabled,
                                        });
        }
        if (r >= 0)
                r = target_list_add(&l,
                                    (ControlTarget){
                                            .name = kube_default_target.name,
                                            .profile = config_target_profile(c, &kube_default_target)->name,
                                            .kind = "default",
                                            .disabled = !c->enable_default,
                                    });
        if (r >= 0)
                r = add_rule_sets_targets(room, &l);
        if (r < 0) {
                control_targets_free(l.list, l.n);
                return r;
        }
        *ret = l.list;
        *ret_n = l.n;
        return 0;
}

/* ---- sessions ---- */

int control_list_sessions(ControlRoom *room, ControlSession **ret, size_t *ret_n) {
        ControlSession *list;
        size_t n_sessions;
        Session *const *sessions = room->deps.sessions(room->deps.userdata, &n_sessions);

        list = calloc(MAX(n_sessions, 1U), sizeof(ControlSession));
        if (!list)
                return -ENOMEM;
        for (size_t i = 0; i < n_sessions; i++) {
                const Session *s = sessions[i];
                bool running = s->state == SESSION_RUNNING;
                list[i] = (ControlSession){
                        .id = s->id_string,
                        .state = session_state_to_string(s->state),
                        .target = s->target->name,
                        .profile = s->profile->name,
                        .namespace = strempty(s->namespace),
                        .pod = strempty(s->pod),
                        .container = strempty(s->container),
                        .cgroup = s->cgroup,
                        .start_usec = running ? s->start_realtime : 0,
                        .duration_usec = s->duration_usec,
                        .samples = profile_data_total(s->data),
                };
        }
        *ret = list;
        *ret_n = n_sessions;
        return 0;
}

static Session *session_find(ControlRoom *room, const char *id) {
        return room->deps.session_find(room->deps.userdata, id);
}

int control_stop_session(ControlRoom *room, const char *id, SessionEndedFunc callback, void *userdata,
                         char **ret_error) {
        Session *s = isempty(id) ? NULL : session_find(room, id);

        if (!s)
                return control_error(ret_error, -ENOENT, "No session %s on this agent.", strempty(id));
        (void) session_end_notify(s, "stopped", callback, userdata);
        return 0;
}

typedef struct StopAll StopAll;
typedef struct StopAllItem {
        StopAll *all;
        bool ended; /* session_end_notify() was called for it */
        char *dirs; /* its report directories, "" when none (once written) */
} StopAllItem;
struct StopAll {
        ManagerStoppedAllFunc callback;
        void *userdata;
        StopAllItem *items;
        size_t n_items;
        size_t n_left; /* sessions not written yet, plus one while they are being ended */
};

static void stop_all_unref(StopAll *a) {
        char **dirs;
        size_t n = 0;

        if (--a->n_left > 0)
                return;
        dirs = calloc(a->n_items + 1, sizeof(char *));
        for (size_t i = 0; i < a->n_items; i++) {
                if (dirs && a->items[i].ended)
                        dirs[n++] = TAKE_PTR(a->items[i].dirs) ?: strdup("");
                free(a->items[i].dirs);
        }
        a->callback(a->userdata, dirs);
        free(a->items);
        free(a);
}

static void on_stopped_one(void *userdata, const char *session_id, const char *report_dirs, int error) {
        StopAllItem *item = userdata;

        /* A failure is in the journal. */
        item->dirs = strdup(error < 0 ? "" : strempty(report_dirs));
        stop_all_unref(item->all);
}

int control_stop_all_sessions(ControlRoom *room, ManagerStoppedAllFunc callback, void *userdata) {
        _cleanup_strv_free_ char **ids = NULL;
        StopAll *a;
        size_t n = 0, n_sessions;
        Session *const *sessions = room->deps.sessions(room->deps.userdata, &n_sessions);

        /* By ID: ending one session must not leave us with a stale pointer to another. */
        ids = calloc(n_sessions + 1, sizeof(char *));
        if (!ids)
                return -ENOMEM;
        for (size_t i = 0; i < n_sessions; i++)
                if (sessions[i]->state == SESSION_RUNNING) {
                        ids[n] = strdup(sessions[i]->id_string);
                        if (!ids[n])
                                return -ENOMEM;
                        n++;
                }

        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->items = calloc(MAX(n, (size_t) 1), sizeof(StopAllItem));
        if (!a->items) {
                free(a);
                return -ENOMEM;
        }
        a->n_items = n;
        a->callback = callback;
        a->userdata = userdata;
        a->n_left = 1;
        for (size_t i = 0; i < n; i++) {
                Session *s = session_find(room, ids[i]);
                a->items[i].all = a;
                if (!s || s->state != SESSION_RUNNING)
                        continue;
                a->items[i].ended = true;
                a->n_left++;
                /* A few per loop iteration (as many as 5 ms allow). */
                if (manager_end_session_soon(room->deps.sessions_room, s, "stopped", on_stopped_one,
                                             &a->items[i]) < 0)
                        (void) session_end_notify(s, "stopped", on_stopped_one, &a->items[i]);
        }
        stop_all_unref(a);
        return 0;
}

/* ---- check ---- */

void control_check_done(ControlCheck *c) {
        free(c->reasons);
        for (char **i = c->owned; i && *i; i++)
                free(*i);
        free(c->owned);
        *c = (ControlCheck){};
}

static const KubeContainer *pod_find_container(const KubePod *pod, const char *name) {
        for (size_t i = 0; i < pod->n_containers; i++)
                if (streq(pod->containers[i].name, name))
                        return &pod->containers[i];
        return NULL;
}

/* The pod's first container (the first regular one), as Check() decides by it. */
static const KubeContainer *pod_first_container(const KubePod *pod) {
        for (size_t i = 0; i < pod->n_containers; i++)
                if (pod->containers[i].kind == KUBE_CONTAINER_REGULAR)
                        return &pod->containers[i];
        return pod->n_containers > 0 ? &pod->containers[0] : NULL;
}

/* The pod's first running regular container (StartSession without a container). */
static const KubeContainer *pod_first_running_container(const KubePod *pod) {
        for (size_t i = 0; i < pod->n_containers; i++) {
                const KubeContainer *kc = &pod->containers[i];
                if (kc->kind == KUBE_CONTAINER_REGULAR && kc->running && kc->id)
                        return kc;
        }
        return NULL;
}

/* What kube_target_matches() could not decide yet, in its order. */
static const char *undecided_reason(const Target *t, const KubeNamespace *ns, const char *container,
                                    const char *cgroup) {
        if (t->cgroup_patterns && !cgroup)
                return "cgroupPatterns: the container's cgroup is not known on this node yet";
        if (t->namespace_selector && !ns)
                return "namespaceSelector: the namespace is not known yet";
        if (t->containers && !container)
                return "containers: the container's name is not known yet";
        return "not decided yet";
}

/* Why target t does not select the container (NULL: it does). */
static const char *target_reason(const Target *t, const KubeNamespace *ns, const KubePod *pod,
                                 const char *container, const char *cgroup) {
        const char *reason = NULL;

        if (!kube_target_is_pod_rule(t)) {
                /* A host rule: it applies to a container's cgroup when no pod rule decides. */
                if (t->disabled)
                        return "the target is disabled";
                if (!cgroup)
                        return "cgroupPatterns: the container's cgroup is not known on this node yet";
                if (!target_matches_cgroup(t, cgroup))
                        return "cgroupPatterns do not match the container's cgroup";
                return NULL;
        }
        switch (kube_target_matches(t, ns, pod, container, cgroup, &reason)) {
        case KUBE_MATCH_NO:
                return reason ?: "does not match";
        case KUBE_MATCH_UNDECIDED:
                return undecided_reason(t, ns, container, cgroup);
        default:
                return NULL;
        }
}

static const char *enable_default_reason(const Config *c, const KubeNamespace *ns, const KubePod *pod) {
        const char *label;

        if (!c->enable_default)
                return "enableDefault is off";
        label = kube_labels_get(pod->labels, KUBE_PROFILE_LABEL);
        if (streq_ptr(label, "disabled"))
                return "enableDefault: the pod opted out (" KUBE_PROFILE_LABEL "=disabled)";
        if (streq_ptr(label, "enabled"))
                return NULL;
        if (!ns)
                return "enableDefault: the namespace is not known yet";
        if (streq_ptr(kube_labels_get(ns->labels, KUBE_PROFILE_LABEL), "enabled"))
                return NULL;
        return "enableDefault: neither the namespace nor the pod is labelled " KUBE_PROFILE_LABEL "=enabled";
}

/* The pod of this node by namespace and name, or NotFound. */
static int find_pod(ControlRoom *room, const char *namespace, const char *name, const KubePod **ret,
                    char **ret_error) {
        const KubePod *pod;

        if (!kube_room_enabled(room->deps.kube))
                return control_error(ret_error, -ENOENT,
                                     "Kubernetes is not enabled on this agent (--no-kubernetes, or not in a "
                                     "cluster): it knows no pod.");
        pod = kube_room_pod_by_name(room->deps.kube, namespace, name);
        if (!pod) {
                if (!kube_room_pods_synced(room->deps.kube))
                        return control_error(
                                ret_error, -ENOENT,
                                "Pod %s/%s is not known: the pods of node %s are not listed yet.", namespace,
                                name, room->deps.node_name);
                return control_error(ret_error, -ENOENT, "Pod %s/%s is not on node %s.", namespace, name,
                                     room->deps.node_name);
        }
        *ret = pod;
        return 0;
}

/* Keeps a string alive in c->owned; returns it (NULL on OOM). */
static const char *check_own(ControlCheck *c, size_t *n_owned, char *s) {
        char **l;

        if (!s)
                return NULL;
        l = reallocarray(c->owned, *n_owned + 2, sizeof(char *));
        if (!l) {
                free(s);
                return NULL;
        }
        c->owned = l;
        c->owned[(*n_owned)++] = s;
        c->owned[*n_owned] = NULL;
        return s;
}

int control_check(ControlRoom *room, const char *namespace, const char *pod_name, const char *container,
                  ControlCheck *ret, char **ret_error) {
        _cleanup_(control_check_done) ControlCheck check = {};
        const Config *c = control_config(room)->config;
        const KubeContainer *kc = NULL;
        const KubeNamespace *ns;
        const Target *chosen = NULL;
        const Profile *chosen_profile = NULL;
        const char *chosen_name = NULL;
        ControlCgroup cs;
        const KubePod *pod;
        KubeRuleSet *set;
        SessionRule rule = {};
        const char *cname, *cgroup, *reason;
        KubeMatch match;
        size_t n = 0, n_owned = 0;
        int r;

        if (isempty(namespace) || isempty(pod_name))
                return control_error(ret_error, -EINVAL, "A namespace and a pod name are needed.");
        r = find_pod(room, namespace, pod_name, &pod, ret_error);
        if (r < 0)
                return r;
        if (!isempty(container)) {
                kc = pod_find_container(pod, container);
                if (!kc)
                        return control_error(ret_error, -ENOENT, "Pod %s/%s has no container %s.", namespace,
                                             pod_name, container);
        } else
                kc = pod_first_container(pod);

        cname = kc ? kc->name : NULL;
        cgroup = kc && kc->id && room->deps.cgroup_find_container(room->deps.userdata, pod->uid, kc->id, &cs)
                         ? cs.path
                         : NULL;
        ns = kube_room_namespace(room->deps.kube, pod->namespace);
        set = kube_room_rule_set(room->deps.kube, pod->namespace);

        /* The agent's own decision (manager_pod_reconcile_container()): pod rules
         * (the cluster config's and the namespace's ProfileConfigs') and
         * enableDefault, else host rules on the container's cgroup. */
        match = kube_room_match(room->deps.kube, ns, pod, cname, cgroup, &rule);
        if (match == KUBE_MATCH_YES) {
                chosen = rule.target;
                chosen_profile = rule.profile;
                for (size_t i = 0; i < set->rules.n_rules; i++)
                        if (set->rules.rules[i].target == chosen)
                                chosen_name = check_own(&check, &n_owned,
                                                        kube_rule_display_name(set, &set->rules.rules[i]));
        } else if (match == KUBE_MATCH_NO && cgroup) {
                chosen = room->deps.host_target(room->deps.userdata, cgroup);
                chosen_profile = chosen ? config_target_profile(c, chosen) : NULL;
        }

        check.reasons = calloc(c->n_targets + set->rules.n_rules + 2, sizeof(ControlReason));
        if (!check.reasons)
                return -ENOMEM;
        if (!kube_room_rules_ready(room->deps.kube))
                check.reasons[n++] = (ControlReason){
                        .target = "ProfileConfigs",
                        .reason = "the ProfileConfig objects are not listed yet: no pod rule is decided",
                };
        /* Host rules first (config order), then the pod rules of the namespace. */
        for (size_t i = 0; i < c->n_targets; i++) {
                const Target *t = &c->targets[i];
                if (t == chosen || kube_target_is_pod_rule(t))
                        continue;
                reason = target_reason(t, ns, pod, cname, cgroup);
                if (reason)
                        check.reasons[n++] = (ControlReason){ .target = t->name, .reason = reason };
        }
        for (size_t i = 0; i < set->rules.n_rules; i++) {
                const KubeRule *x = &set->rules.rules[i];
                const char *name;

                if (x->target == chosen)
                        continue;
                reason = kube_rule_reason(x, set->scopes, ns, pod, cname, cgroup);
                if (!reason && x->disabled_by == KUBE_SCOPE_CLUSTER)
                        reason = target_reason(x->target, ns, pod, cname, cgroup);
                if (!reason)
                        continue;
                if (x->disabled_by != KUBE_SCOPE_CLUSTER) {
                        char *t;
                        if (asprintf(&t, "the target is disabled in namespace %s by ProfileConfig %s",
                                     pod->namespace, set->scopes[x->disabled_by].name) < 0)
                                return -ENOMEM;
                        reason = check_own(&check, &n_owned, t);
                }
                name = check_own(&check, &n_owned, kube_rule_display_name(set, x));
                if (!name || !reason)
                        return -ENOMEM;
                check.reasons[n++] = (ControlReason){ .target = name, .reason = reason };
        }
        if (chosen != &kube_default_target) {
                reason = enable_default_reason(c, ns, pod);
                if (reason)
                        check.reasons[n++] =
                                (ControlReason){ .target = kube_default_target.name, .reason = reason };
        }

        check.targeted = chosen != NULL;
        check.target = chosen ? (chosen_name ?: chosen->name) : "";
        check.profile = chosen_profile ? chosen_profile->name : "";
        check.n_reasons = n;
        *ret = check;
        check = (ControlCheck){};
        return 0;
}

/* ---- start ---- */

void control_target_spec_done(ControlTargetSpec *s) {
        free(s->namespace);
        free(s->pod);
        free(s->container);
        free(s->cgroup);
        *s = (ControlTargetSpec){};
}

/* Splits s at '/' into at most max non-empty parts; -EINVAL otherwise. */
static int split_parts(const char *s, char **parts, size_t min, size_t max, size_t *ret_n) {
        const char *p = s;
        size_t n = 0;

        for (;;) {
                const char *slash = strchr(p, '/');
                size_t len = slash ? (size_t) (slash - p) : strlen(p);
                if (len == 0 || n == max)
                        return -EINVAL;
                parts[n] = strndup(p, len);
                if (!parts[n])
                        return -ENOMEM;
                n++;
                if (!slash)
                        break;
                p = slash + 1;
        }
        if (n < min)
                return -EINVAL;
        *ret_n = n;
        return 0;
}

int control_target_spec_parse(const char *s, ControlTargetSpec *ret, char **ret_error) {
        _cleanup_(control_target_spec_done) ControlTargetSpec spec = {};
        int r;

        if (!s)
                s = "";
        if (strncmp(s, "pod:", 4) == 0) {
                char *parts[3] = {};
                size_t n = 0;

                r = split_parts(s + 4, parts, 2, 3, &n);
                if (r < 0) {
                        for (size_t i = 0; i < ELEMENTSOF(parts); i++)
                                free(parts[i]);
                        if (r == -ENOMEM)
                                return r;
                        return control_error(ret_error, -EINVAL,
                                             "Invalid target \"%s\": expected pod:NAMESPACE/POD or "
                                             "pod:NAMESPACE/POD/CONTAINER.",
                                             s);
                }
                spec.kind = CONTROL_TARGET_POD;
                spec.namespace = parts[0];
                spec.pod = parts[1];
                spec.container = parts[2];
        } else if (strncmp(s, "cgroup:", 7) == 0) {
                spec.kind = CONTROL_TARGET_CGROUP;
                r = cgroup_path_normalize(s + 7, &spec.cgroup);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        return control_error(
                                ret_error, -EINVAL,
                                "Invalid target \"%s\": expected cgroup:PATH, a cgroup below the "
                                "root (not the root itself) without \".\", \"..\" or empty "
                                "components.",
                                s);
        } else
                return control_error(ret_error, -EINVAL,
                                     "Invalid target \"%s\": expected pod:NAMESPACE/POD[/CONTAINER] or "
                                     "cgroup:PATH.",
                                     s);
        *ret = spec;
        spec = (ControlTargetSpec){};
        return 0;
}

/* The cgroup of a pod's container (named, or the first running one). */
static int resolve_pod_container(ControlRoom *room, const ControlTargetSpec *spec, const KubePod **ret_pod,
                                 const KubeContainer **ret_container, ControlCgroup *ret_cgroup,
                                 char **ret_error) {
        const KubeContainer *kc;
        const KubePod *pod;
        int r;

        r = find_pod(room, spec->namespace, spec->pod, &pod, ret_error);
        if (r < 0)
                return r;
        if (spec->container) {
                kc = pod_find_container(pod, spec->container);
                if (!kc)
                        return control_error(ret_error, -ENOENT, "Pod %s/%s has no container %s.",
                                             spec->namespace, spec->pod, spec->container);
                if (kc->terminated)
                        return control_error(ret_error, -ENOENT, "Container %s of pod %s/%s has exited.",
                                             kc->name, spec->namespace, spec->pod);
                if (!kc->id)
                        return control_error(ret_error, -ENOENT,
                                             "Container %s of pod %s/%s has not started (the pod's status "
                                             "gives it no container ID yet).",
                                             kc->name, spec->namespace, spec->pod);
        } else {
                kc = pod_first_running_container(pod);
                if (!kc)
                        return control_error(ret_error, -ENOENT, "Pod %s/%s has no running container.",
                                             spec->namespace, spec->pod);
        }
        if (!room->deps.cgroup_find_container(room->deps.userdata, pod->uid, kc->id, ret_cgroup))
                return control_error(ret_error, -ENOENT,
                                     "The cgroup of container %s of pod %s/%s (ID %.12s) is not known on "
                                     "node %s.",
                                     kc->name, spec->namespace, spec->pod, kc->id, room->deps.node_name);
        *ret_pod = pod;
        *ret_container = kc;
        return 0;
}

/* The rule that selects the cgroup now, as the agent decides; false: none. */
static bool rule_for(ControlRoom *room, const ControlCgroup *c, const KubePod *pod, const KubeContainer *kc,
                     SessionRule *ret) {
        if (pod) {
                KubeMatch match = kube_room_match(room->deps.kube,
                                                  kube_room_namespace(room->deps.kube, pod->namespace), pod,
                                                  kc ? kc->name : NULL, c->path, ret);
                if (match == KUBE_MATCH_YES)
                        return true;
                if (match == KUBE_MATCH_UNDECIDED)
                        return false;
        }
        *ret = (SessionRule){ .target = room->deps.host_target(room->deps.userdata, c->path) };
        return ret->target;
}

int control_start_session(ControlRoom *room, const char *target, const char *profile_name,
                          uint64_t duration_usec, char **ret_id, char **ret_error) {
        _cleanup_(control_target_spec_done) ControlTargetSpec spec = {};
        _cleanup_(session_freep) Session *s = NULL;
        const Profile *profile = NULL;
        const KubeContainer *kc = NULL;
        const KubePod *pod = NULL;
        SessionRule rule = {};
        ControlCgroup cgroup = {}, *c = &cgroup;
        char *id;
        int r;

        r = control_target_spec_parse(target, &spec, ret_error);
        if (r < 0)
                return r;
        if (!isempty(profile_name)) {
                profile = config_find_profile(control_config(room)->config, profile_name);
                if (!profile)
                        return control_error(ret_error, -EINVAL, "No profile named %s in the configuration.",
                                             profile_name);
        }
        if (!room->deps.can_start(room->deps.userdata))
                return control_error(ret_error, -ESHUTDOWN, "The agent is stopping.");

        if (spec.kind == CONTROL_TARGET_POD) {
                r = resolve_pod_container(room, &spec, &pod, &kc, c, ret_error);
                if (r < 0)
                        return r;
        } else {
                if (!room->deps.cgroup_find(room->deps.userdata, spec.cgroup, c))
                        return control_error(ret_error, -ENOENT, "No cgroup %s below %s.", spec.cgroup,
                                             room->deps.cgroup_root(room->deps.userdata));
                /* A container's cgroup: with its pod's metadata, when the pod's status names it. */
                if (c->container && kube_room_enabled(room->deps.kube)) {
                        pod = kube_room_pod(room->deps.kube, c->pod_uid);
                        kc = pod ? kube_pod_find_container_id(pod, c->container_id) : NULL;
                        if (!kc)
                                pod = NULL;
                }
        }

        if (c->session) {
                Session *armed = c->session;

                if (armed->state == SESSION_RUNNING)
                        return control_error(ret_error, -EBUSY, "Session %s is already profiling cgroup %s.",
                                             armed->id_string, c->path);
                if (!profile || streq(profile->name, armed->profile->name)) {
                        /* Start the armed (manual) session. */
                        if (duration_usec > 0)
                                armed->duration_usec = duration_usec;
                        r = session_start_manual(armed);
                        if (r < 0) {
                                room->deps.session_failed(room->deps.userdata, "start");
                                return control_error(ret_error, r,
                                                     "Failed to start session %s on cgroup %s: %s",
                                                     armed->id_string, c->path, strerror(-r));
                        }
                        id = strdup(armed->id_string);
                        if (!id)
                                return -ENOMEM;
                        *ret_id = id;
                        return 0;
                }
                /* Another profile than the armed session's: it gives way. */
                session_end(armed, "replaced");
        }

        if (!rule_for(room, c, pod, kc, &rule))
                rule = (SessionRule){ .target = &control_on_demand_target };
        SessionKube kube = {};
        if (pod)
                kube = (SessionKube){
                        .namespace = pod->namespace,
                        .pod = pod->name,
                        .pod_uid = pod->uid,
                        .container = kc->name,
                        .container_id = c->container_id,
                        .labels = pod->labels,
                };
        r = session_new_rule(room->deps.sessions_room, control_config(room), &rule, c->path,
                             pod ? &kube : NULL, &s);
        if (r < 0) {
                room->deps.session_failed(room->deps.userdata, "create");
                return control_error(ret_error, r, "Failed to create a session for cgroup %s: %s", c->path,
                                     strerror(-r));
        }
        if (profile) {
                s->profile = profile; /* from control_config(room), which the session holds */
                s->namespaced_output = false;
        }
        s->duration_usec = duration_usec > 0 ? duration_usec : s->profile->duration_usec;

        /* The manager owns it from here, started or not. */
        Session *launched = TAKE_PTR(s);
        r = room->deps.launch_session(room->deps.userdata, launched);
        if (r < 0)
                return control_error(ret_error, r, "Failed to start profiling cgroup %s: %s", c->path,
                                     strerror(-r));
        id = strdup(launched->id_string);
        if (!id)
                return -ENOMEM;
        *ret_id = id;
        return 0;
}

/* ---- reports ---- */

/* ---- machine config, status ---- */

void control_sysctls_free(ControlSysctl *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(s[i].current);
        free(s);
}

int control_machine_config(ControlRoom *room, ControlSysctl **ret, size_t *ret_n) {
        const MachineWants *w = machine_room_wants(room->deps.machine);
        ControlSysctl *list;

        /* What applies on this node (the entries its labels select). */
        list = calloc(MAX(w->n, 1U), sizeof(ControlSysctl));
        if (!list)
                return -ENOMEM;
        for (size_t i = 0; i < w->n; i++) {
                _cleanup_free_ char *path = NULL, *value = NULL;

                list[i].name = w->items[i].name;
                list[i].wanted = w->items[i].value;
                if (sysctl_path(room->deps.sysctl_root, w->items[i].name, &path) >= 0)
                        (void) read_one_line_file(path, &value);
                list[i].current = value ? TAKE_PTR(value) : strdup("");
                if (!list[i].current) {
                        control_sysctls_free(list, i);
                        return -ENOMEM;
                }
        }
        *ret = list;
        *ret_n = w->n;
        return 0;
}
