/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "cgroup-util.h"
#include "fileio.h"
#include "sessions.h"
#include "base.h"
#include "kube-cgroup.h"
#include "log.h"
#include "machine-config.h"
#include "manager.h"
#include "kube.h"
#include "machine.h"
#include "control.h"
#include "http.h"
#include "manager-pods.h"
#include "manager-rooms.h"
#include "sampling.h"

/* ---- cgroup table ---- */

static CgroupState *cgroup_state_find(Manager *m, const char *path) {
        return cgroup_state_map_get(&m->cgroups, path);
}

CgroupState *manager_cgroup_find(Manager *m, const char *path) {
        return cgroup_state_find(m, path);
}

/* A pod's status names its containers' IDs, and anyone who may write a
 * pod's status in their namespace can name any ID there, another
 * namespace's container's included: the ID alone is not proof. The cgroup
 * is the pod's only when its own path says it belongs to the pod (its pod
 * UID, kube-cgroup.h), which the kubelet wrote and no API client can. */
CgroupState *manager_cgroup_find_container(Manager *m, const char *pod_uid, const char *container_id) {
        if (!pod_uid || !pod_uid[0] || !container_id || !container_id[0])
                return NULL;
        for (CgroupState *c = cgroup_state_map_get(&m->cgroups_by_container, container_id); c;
             c = c->same_container_next)
                if (strcasecmp(c->pod_uid, pod_uid) == 0)
                        return c;
        return NULL;
}

static int cgroup_state_path_cmp(const void *a, const void *b) {
        return strcmp((*(CgroupState *const *) a)->path, (*(CgroupState *const *) b)->path);
}

void cgroup_states_sort(CgroupState **l, size_t n) {
        if (n > 1)
                qsort(l, n, sizeof(CgroupState *), cgroup_state_path_cmp);
}

static void cgroup_state_free(CgroupState *c) {
        free(c->path);
        free(c);
}

/* Indexes a container cgroup by its container ID and its pod's UID. */
static int cgroup_index_container(Manager *m, CgroupState *c) {
        PodCgroups *p;
        size_t i;
        int r;

        /* Cgroups with one container ID (never seen, but nothing prevents it) are
         * chained in path order: the first is the one found. */
        CgroupState **prev = NULL, *head = cgroup_state_map_get(&m->cgroups_by_container, c->container_id);
        if (!head || strcmp(c->path, head->path) < 0) {
                r = cgroup_state_map_replace(&m->cgroups_by_container, c->container_id, c, NULL);
                if (r < 0)
                        return r;
                c->same_container_next = head;
        } else {
                for (prev = &head->same_container_next; *prev && strcmp((*prev)->path, c->path) < 0;
                     prev = &(*prev)->same_container_next)
                        ;
                c->same_container_next = *prev;
                *prev = c;
        }

        p = pod_cgroups_map_get(&m->pod_cgroups, c->pod_uid);
        if (!p) {
                p = calloc(1, sizeof(*p));
                if (!p)
                        return -ENOMEM;
                memcpy(p->pod_uid, c->pod_uid, sizeof(p->pod_uid));
                r = pod_cgroups_map_put(&m->pod_cgroups, p->pod_uid, p);
                if (r < 0) {
                        free(p);
                        return r;
                }
        }
        if (p->n_cgroups == p->n_allocated) {
                size_t n = MAX(p->n_allocated * 2, (size_t) 4);
                CgroupState **l = reallocarray(p->cgroups, n, sizeof(CgroupState *));
                if (!l)
                        return -ENOMEM;
                p->cgroups = l;
                p->n_allocated = n;
        }
        /* In path order. */
        for (i = p->n_cgroups; i > 0 && strcmp(p->cgroups[i - 1]->path, c->path) > 0; i--)
                p->cgroups[i] = p->cgroups[i - 1];
        p->cgroups[i] = c;
        p->n_cgroups++;
        return 0;
}

static void pod_cgroups_free(PodCgroups *p) {
        free(p->cgroups);
        free(p);
}

static void cgroup_unindex_container(Manager *m, CgroupState *c) {
        PodCgroups *p = pod_cgroups_map_get(&m->pod_cgroups, c->pod_uid);
        CgroupState *head = cgroup_state_map_get(&m->cgroups_by_container, c->container_id);

        if (head == c) {
                if (c->same_container_next)
                        (void) cgroup_state_map_replace(&m->cgroups_by_container, c->container_id,
                                                        c->same_container_next, NULL);
                else
                        (void) cgroup_state_map_remove(&m->cgroups_by_container, c->container_id);
        } else if (head)
                for (CgroupState **prev = &head->same_container_next; *prev;
                     prev = &(*prev)->same_container_next)
                        if (*prev == c) {
                                *prev = c->same_container_next;
                                break;
                        }
        c->same_container_next = NULL;

        for (size_t i = 0; p && i < p->n_cgroups; i++)
                if (p->cgroups[i] == c) {
                        memmove(p->cgroups + i, p->cgroups + i + 1,
                                (p->n_cgroups - i - 1) * sizeof(CgroupState *));
                        p->n_cgroups--;
                        break;
                }
        if (p && p->n_cgroups == 0) {
                (void) pod_cgroups_map_remove(&m->pod_cgroups, p->pod_uid);
                pod_cgroups_free(p);
        }
}

/* The cgroup tables, emptied (manager_free()). */
static void cgroup_tables_free(Manager *m) {
        session_map_clear(&m->sessions_by_id, NULL);
        pod_cgroups_map_clear(&m->pod_cgroups, pod_cgroups_free);
        cgroup_state_map_clear(&m->cgroups_by_container, NULL);
        cgroup_state_map_clear(&m->cgroups, cgroup_state_free);
}

/* The running session owning path: its own, or the nearest ancestor's. */
static Session *session_for_path(Manager *m, const char *path) {
        _cleanup_free_ char *p = strdup(path);
        if (!p)
                return NULL;
        for (;;) {
                CgroupState *c = cgroup_state_find(m, p);
                if (c && c->session && c->session->state == SESSION_RUNNING)
                        return c->session;
                char *slash = strrchr(p, '/');
                if (!slash)
                        return NULL;
                *slash = 0;
        }
}

/* Drops a cgroup's entry from the BPF cgroups map. */
static void cgroup_state_unmap(Manager *m, CgroupState *c) {
        if (!c || c->bpf_cgroup_id == 0 || !m->sampler)
                return;
        (void) sampler_cgroup_set(m->sampler, c->bpf_cgroup_id, 0);
        c->bpf_cgroup_id = 0;
}

static void assign_one(const char *path, void *userdata) {
        Manager *m = userdata;
        CgroupState *c = cgroup_state_find(m, path);
        uint64_t id;
        Session *s;
        int r;

        if (m->cgroup_root_fd < 0)
                return;
        if (cg_get_id_at(m->cgroup_root_fd, path[0] ? path : "", &id) < 0) {
                /* Removed already: its ID cannot be looked up any more, the one
                 * recorded when it was mapped is deleted. */
                cgroup_state_unmap(m, c);
                return;
        }
        s = session_for_path(m, path);
        r = sampler_cgroup_set(m->sampler, id, s ? s->slot : 0);
        if (c && r >= 0)
                c->bpf_cgroup_id = s ? id : 0;
}

void manager_assign_cgroups_below(Manager *m, const char *path) {
        if (!m->cgroup_watch)
                return;
        cgroup_watch_foreach_below(m->cgroup_watch, path, assign_one, m);
}

/* ---- sessions ---- */

Session *manager_session_find(Manager *m, const char *id) {
        return id ? session_map_get(&m->sessions_by_id, id) : NULL;
}

int manager_add_session(Manager *m, Session *s) {
        Session **n = reallocarray(m->sessions, m->n_sessions + 1, sizeof(Session *));
        if (!n)
                return -ENOMEM;
        m->sessions = n;
        int r = session_map_put(&m->sessions_by_id, s->id_string, s);
        if (r < 0)
                return r;
        m->sessions[m->n_sessions++] = s;
        CgroupState *c = cgroup_state_find(m, s->cgroup);
        if (c)
                c->session = s;
        return 0;
}

void manager_session_slot(Manager *m, Session *s, bool taken) {
        if (s->slot == 0 || s->slot >= CGPROF_MAX_SESSIONS)
                return;
        if (taken)
                m->sessions_by_slot[s->slot] = s;
        else if (m->sessions_by_slot[s->slot] == s)
                m->sessions_by_slot[s->slot] = NULL;
}

void manager_remove_session(Manager *m, Session *s, const char *reason) {
        for (size_t i = 0; i < m->n_sessions; i++)
                if (m->sessions[i] == s) {
                        memmove(m->sessions + i, m->sessions + i + 1,
                                (m->n_sessions - i - 1) * sizeof(Session *));
                        m->n_sessions--;
                        break;
                }
        (void) session_map_remove_value(&m->sessions_by_id, s->id_string, s);
        CgroupState *c = cgroup_state_find(m, s->cgroup);
        if (c && c->session == s) {
                c->session = NULL;
                c->done = streq_ptr(reason, "duration") || streq_ptr(reason, "stopped");
        }
        manager_session_slot(m, s, false);
}

/* A host cgroup matches a target when the target has cgroupPatterns, one of
 * them matches, and it has no Kubernetes condition (those never hold for a
 * bare cgroup: conditions are ANDed). */
static const Target *host_target_for(const Config *c, const char *path) {
        for (size_t i = 0; i < c->n_targets; i++) {
                const Target *t = &c->targets[i];
                if (t->disabled || !t->cgroup_patterns)
                        continue;
                if (t->namespace_selector || t->pod_selector || t->pod_name_patterns || t->owner ||
                    t->containers)
                        continue;
                if (target_matches_cgroup(t, path))
                        return t;
        }
        return NULL;
}

const Target *manager_host_target(Manager *m, const char *path) {
        return m->config ? host_target_for(m->config->config, path) : NULL;
}

/* ---- starting sessions, and starting them again when fds return ---- */

#define FD_RETRY_USEC (2 * USEC_PER_SEC)

static void fd_starved_set(Manager *m, CgroupState *c, bool starved) {
        if (c->fd_starved == starved)
                return;
        c->fd_starved = starved;
        if (starved)
                m->sessions_fd_starved++;
        else if (m->sessions_fd_starved > 0)
                m->sessions_fd_starved--;
}

/* The known cgroups (those waiting for fds: starved_only), in path order. */
static size_t cgroup_list(Manager *m, bool starved_only, CgroupState ***ret) {
        CgroupState **l =
                malloc(MAX(cgroup_state_map_size(&m->cgroups), (size_t) 1) * sizeof(CgroupState *));
        CgroupState *c;
        size_t n = 0;

        if (!l) {
                *ret = NULL;
                return 0;
        }
        HASHMAP_FOREACH (c, cgroup_state_map, &m->cgroups)
                if (!starved_only || c->fd_starved)
                        l[n++] = c;
        cgroup_states_sort(l, n);
        *ret = l;
        return n;
}

static int on_fd_retry(sd_event_source *source, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        _cleanup_free_ CgroupState **l = NULL;
        size_t n = cgroup_list(m, true, &l);

        log_debug("Trying %zu cgroup(s) again whose sessions lacked file descriptors.", n);
        for (size_t i = 0; i < n; i++) {
                fd_starved_set(m, l[i], false);
                manager_reconcile_cgroup(m, l[i]);
        }
        return 0;
}

void manager_session_failed(Manager *m, const char *path, int r) {
        CgroupState *c = cgroup_state_find(m, path);
        int k, enabled = SD_EVENT_OFF;

        if (!c || (r != -EMFILE && r != -ENFILE) || m->stopping)
                return;
        if (!c->fd_starved)
                log_notice("Profiling cgroup %s waits for file descriptors (%s): trying again every %u s.",
                           path, strerror(-r), (unsigned) (FD_RETRY_USEC / USEC_PER_SEC));
        fd_starved_set(m, c, true);
        /* One timer for all, armed while some cgroup waits. */
        if (!m->fd_retry_timer) {
                k = sd_event_add_time_relative(m->event, &m->fd_retry_timer, CLOCK_MONOTONIC, FD_RETRY_USEC,
                                               100 * USEC_PER_MSEC, on_fd_retry, m);
                if (k < 0)
                        return (void) log_warning_errno(k, "Failed to arm the fd retry timer, ignoring: %m");
                (void) sd_event_source_set_description(m->fd_retry_timer, "fd-retry");
                return;
        }
        (void) sd_event_source_get_enabled(m->fd_retry_timer, &enabled);
        if (enabled == SD_EVENT_OFF &&
            (sd_event_source_set_time_relative(m->fd_retry_timer, FD_RETRY_USEC) < 0 ||
             sd_event_source_set_enabled(m->fd_retry_timer, SD_EVENT_ONESHOT) < 0))
                log_warning("Failed to re-arm the fd retry timer, ignoring.");
}

int manager_launch_session(Manager *m, Session *s, bool manual, const char *what) {
        _cleanup_(session_freep) Session *owned = s;
        _cleanup_free_ char *path = strdup(s->cgroup);
        CgroupState *c;
        int r;

        if (!path)
                return log_oom();
        if (m->stopping)
                return -ESHUTDOWN; /* nothing starts once the agent stops (owned frees it) */
        r = manager_add_session(m, s);
        if (r < 0)
                return log_oom();
        r = manual ? session_start_manual(s) : session_start(s);
        if (r < 0) {
                manager_count_session_failed(m, "start");
                if (what)
                        log_warning_errno(r, "Failed to start profiling %s: %m", what);
                manager_remove_session(m, s, "failed");
                if (!manual)
                        manager_session_failed(m, path, r);
                return r;
        }
        TAKE_PTR(owned);
        c = cgroup_state_find(m, path);
        if (c)
                fd_starved_set(m, c, false);
        return 0;
}

static void start_host_session(Manager *m, CgroupState *c, const Target *t) {
        _cleanup_free_ char *what = NULL;
        Session *s = NULL;
        int r;

        r = session_new(m->sessions_room, m->config, t, c->path, NULL, &s);
        if (r < 0) {
                manager_count_session_failed(m, "create");
                log_warning_errno(r, "Failed to create a session for cgroup %s (target %s), ignoring: %m",
                                  c->path, t->name);
                return manager_session_failed(m, c->path, r);
        }
        if (asprintf(&what, "cgroup %s (target %s)", c->path, t->name) < 0)
                what = NULL;
        (void) manager_launch_session(m, s, false, what ?: c->path);
}

void manager_reconcile_cgroup(Manager *m, CgroupState *c) {
        const Target *t;

        if (m->stopping || !m->config || !m->sampler || c->path[0] == 0)
                return;
        /* Started on request: it runs until its duration, a stop, or its cgroup goes away. */
        if (c->session && c->session->requested)
                return;
        /* Pod rules first for a container's cgroup; host rules otherwise. */
        if (c->container && kube_room_enabled(m->kube) && manager_pod_reconcile_container(m, c))
                return;

        t = host_target_for(m->config->config, c->path);
        if (c->session) {
                if (!c->session->pod && !t)
                        session_end(c->session, "untargeted");
                return;
        }
        if (t && !c->done)
                start_host_session(m, c, t);
}

static void on_cgroup(const char *path, bool added, void *userdata) {
        Manager *m = userdata;
        CgroupState *c = cgroup_state_find(m, path);

        if (added) {
                if (!c) {
                        c = calloc(1, sizeof(*c));
                        if (!c || !(c->path = strdup(path)) ||
                            cgroup_state_map_put(&m->cgroups, c->path, c) < 0) {
                                if (c)
                                        free(c->path);
                                free(c);
                                return (void) log_oom();
                        }
                }
                log_debug("cgroup appeared: %s", path[0] ? path : "/");
                KubeCgroupInfo info;
                if (!c->container && kube_cgroup_parse(path, &info) > 0) {
                        c->container = true;
                        memcpy(c->pod_uid, info.pod_uid, sizeof(c->pod_uid));
                        memcpy(c->container_id, info.container_id, sizeof(c->container_id));
                        if (cgroup_index_container(m, c) < 0)
                                log_oom();
                }
                /* A new child of a profiled cgroup is profiled too. */
                if (m->sampler && session_for_path(m, path))
                        assign_one(path, m);
                manager_reconcile_cgroup(m, c);
                return;
        }

        log_debug("cgroup removed: %s", path[0] ? path : "/");
        if (!c)
                return;
        if (c->session)
                session_end(c->session, "cgroup-removed");
        /* A removed cgroup's ID is never used again: its entry goes, whoever
         * owned it (this session or an enclosing one). */
        cgroup_state_unmap(m, c);
        fd_starved_set(m, c, false);
        if (c->container)
                cgroup_unindex_container(m, c);
        (void) cgroup_state_map_remove_value(&m->cgroups, c->path, c);
        cgroup_state_free(c);
}

/* Re-evaluates every known cgroup against the targets (after a reload). */
static void manager_retarget(Manager *m) {
        _cleanup_free_ CgroupState **l = NULL;
        size_t n = cgroup_list(m, false, &l);

        for (size_t i = 0; i < n; i++)
                manager_reconcile_cgroup(m, l[i]);
}

/* ---- sampling ---- */

/* An event, its process's mappings read (in the maps cache): unwind
 * tables first, then the symbols of the process. */
static void on_proc_event_ready(const struct cgprof_proc_event *e, const char *comm,
                                const JobIdentity *identity, void *userdata) {
        Manager *m = userdata;

        log_debug("Process event %u for PID %u (exec %u, %s), %.1f ms after it started.", e->kind, e->pid,
                  e->exec_id, comm, (double) (now_usec(CLOCK_MONOTONIC) * 1000 - e->start_time) / 1e6);
        if (e->kind == CGPROF_PROC_EVENT_MAPPINGS) {
                /* The walker met an address its mappings do not hold. */
                (void) unwinder_process_reload(m->unwinder, (pid_t) e->pid, e->start_time, 0);
                /* A libpython the dynamic loader mapped after exec(). */
                if (e->session < CGPROF_MAX_SESSIONS && m->sessions_by_slot[e->session])
                        session_python_recheck(m->sessions_by_slot[e->session], e->pid, e->start_time,
                                               e->exec_id);
                return;
        }
        if (e->session >= CGPROF_MAX_SESSIONS || !m->sessions_by_slot[e->session])
                return;
        Session *s = m->sessions_by_slot[e->session];
        if (e->kind == PROC_EVENT_REFRESH) {
                session_refresh_process(s, e->pid, e->start_time, e->exec_id);
                return;
        }
        session_on_process(s, e, comm, identity);
        session_capture_pending(s);
}

/* From the ring buffer: the process's mappings are read off the loop, then
 * on_proc_event_ready() runs (in the order of the events). */
static void on_proc_event(const struct cgprof_proc_event *e, const char *comm, void *userdata) {
        Manager *m = userdata;

        if (m->proc_event_queue)
                proc_event_queue_add(m->proc_event_queue, e, comm);
        else {
                proc_maps_cache_clear(m->maps_cache);
                on_proc_event_ready(e, comm, NULL, m);
        }
}

void manager_refresh_process_soon(Manager *m, uint32_t session_slot, uint32_t pid, uint64_t start_time,
                                  uint32_t exec_id) {
        struct cgprof_proc_event e = {
                .start_time = start_time,
                .pid = pid,
                .session = session_slot,
                .kind = PROC_EVENT_REFRESH,
                .exec_id = exec_id,
        };
        on_proc_event(&e, "", m);
}

/* Process events are taken from the ring buffer and queued (their
 * mappings are read off the loop, proc-event-queue.h). From the ring
 * buffer's io source, as many as PROC_EVENTS_BUDGET_USEC allow: the rest
 * in the next loop iterations (the fd stays readable), the drain and the
 * bus in between. A drain takes them all (budget 0) and waits for their
 * mappings: its samples need them. */
#define PROC_EVENTS_BUDGET_USEC (10 * USEC_PER_MSEC)

/* Returns 1 when events are left for the next iteration. */
static int manager_proc_events(Manager *m, uint64_t budget_usec) {
        int r = sampler_proc_events_consume(m->sampler,
                                            budget_usec > 0 ? now_usec(CLOCK_MONOTONIC) + budget_usec : 0);
        if (r < 0)
                log_warning_errno(r, "Failed to read process events, ignoring: %m");
        return r > 0;
}

static int on_proc_events_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        /* Events go first, while a short-lived process can still be
         * captured; but a burst takes turns with the other handlers (the
         * bus, the API watches), instead of starving them. */
        int more = manager_proc_events(userdata, PROC_EVENTS_BUDGET_USEC);
        (void) sd_event_source_set_priority(s,
                                            more ? SD_EVENT_PRIORITY_NORMAL : SD_EVENT_PRIORITY_IMPORTANT);
        return 0;
}

static void on_sample_resolve(const struct cgprof_sample_key *key, uint64_t count, const SamplerStack *user,
                              const SamplerStack *kernel, const SamplerStack *python, bool stack_lost,
                              void *userdata) {
        Manager *m = userdata;
        if (key->session >= CGPROF_MAX_SESSIONS || !m->sessions_by_slot[key->session])
                return;
        session_on_sample(m->sessions_by_slot[key->session], key, count, user, kernel, python, stack_lost);
}

/* A sample waits while its process's event is queued (its mappings are
 * being read), unless its session is ending: the report takes it now. */
static bool sample_waits(const struct cgprof_sample_key *key, void *userdata) {
        Manager *m = userdata;
        Session *s = key->session < CGPROF_MAX_SESSIONS ? m->sessions_by_slot[key->session] : NULL;
        return s && s->state != SESSION_ENDED && proc_event_queue_pid_pending(m->proc_event_queue, key->pid);
}

static void on_sample(const struct cgprof_sample_key *key, uint64_t count, const SamplerStack *user,
                      const SamplerStack *kernel, const SamplerStack *python, bool stack_lost,
                      void *userdata) {
        Manager *m = userdata;
        if (sample_waits(key, m) &&
            sample_park_add(&m->sample_park, key, count, user, kernel, python, stack_lost) >= 0)
                return;
        on_sample_resolve(key, count, user, kernel, python, stack_lost, m);
}

int manager_drain(Manager *m, bool full) {
        uint64_t start = timing_now();
        int r = 0;

        /* New processes first: their events are queued, and their samples
         * wait (parked) until their mappings are read. */
        (void) manager_proc_events(m, 0);
        for (size_t i = 0; i < m->n_sessions; i++)
                session_capture_pending(m->sessions[i]);
        for (int i = 0; i < (full ? 2 : 1); i++) {
                sessions_room_drain_begin(m->sessions_room);
                symbolizer_begin_pass(m->symbolizer);
                if (i == 0)
                        /* Samples parked before, whose process is ready now
                         * (or whose session is ending). */
                        sample_park_replay(&m->sample_park, sample_waits, on_sample_resolve, m);
                r = sampler_drain(m->sampler, on_sample, m);
                if (r < 0) {
                        log_error_errno(r, "Failed to drain the sample maps: %m");
                        break;
                }
        }
        (void) timing_add(&m->drain_timing, start);
        return r;
}

/* Handlers return 0: sd-event disables a source whose handler fails, for
 * good. A periodic timer that cannot be armed again would stop its work
 * silently, so that one is fatal. */
int manager_rearm(Manager *m, sd_event_source *s, uint64_t usec, const char *what) {
        int r = sd_event_source_set_time_relative(s, usec);
        if (r >= 0)
                r = sd_event_source_set_enabled(s, SD_EVENT_ON);
        if (r < 0) {
                log_error_errno(r, "Failed to re-arm the %s timer, stopping the agent: %m", what);
                manager_fatal(m, r);
        }
        return 0;
}

/* A drain waits while process events are left from a burst in the ring
 * buffer (their samples need their mappings; the samples wait in the BPF
 * maps), in steps
 * of DRAIN_POSTPONE_USEC, at most DRAIN_POSTPONE_MAX times in a row: the
 * loop stays responsive, and the drain still comes. */
#define DRAIN_POSTPONE_USEC (100 * USEC_PER_MSEC)
#define DRAIN_POSTPONE_MAX 50U

static int on_drain_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;

        if (m->drains_postponed < DRAIN_POSTPONE_MAX && manager_proc_events(m, PROC_EVENTS_BUDGET_USEC)) {
                m->drains_postponed++;
                return manager_rearm(m, s, DRAIN_POSTPONE_USEC, "drain");
        }
        m->drains_postponed = 0;
        (void) manager_drain(m, false);
        for (size_t i = 0; i < m->n_sessions; i++)
                session_tick(m->sessions[i]);
        unwinder_tick(m->unwinder);
        /* Sessions ended since the last time: give the memory their
         * profiles and process maps held back to the system (glibc keeps
         * freed heap otherwise), at most every 10 s. */
        SessionsCounts counts;
        sessions_room_counts(m->sessions_room, &counts);
        uint64_t over = counts.ended + counts.failed + counts.discarded, now = timing_now();
        if (over != m->trimmed_at_sessions && now - m->trimmed_usec >= 10 * USEC_PER_SEC) {
                m->trimmed_at_sessions = over;
                m->trimmed_usec = now;
                (void) malloc_trim(0);
        }
        return manager_rearm(m, s, DRAIN_INTERVAL_USEC, "drain");
}

/* ---- config ---- */

/* reportDir, made if missing, and checked as sshd's StrictModes checks
 * its files: who can write there (or above it) could plant a summary.json
 * for a session, or change a report before it is read. */
static int manager_open_report_dir(Manager *m, const Config *c, char **ret_error) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *where = NULL;
        const char *dir = c->report_dir, *why = NULL;
        int r;

        r = mkdir_p(dir, 0755);
        if (r < 0)
                return r;
        r = path_check_trusted(dir, geteuid(), &why, &where);
        if (r == -EPERM) {
                if (c->report_dir_strict_modes) {
                        if (asprintf(ret_error,
                                     "reportDir: %s is %s: whoever can write there could plant or change "
                                     "reports (\"reportDirStrictModes\": false allows it)",
                                     where, why) < 0)
                                *ret_error = NULL;
                        return r;
                }
                log_warning("reportDir: %s is %s: whoever can write there could plant or change reports "
                            "(reportDirStrictModes is false).",
                            where, why);
        } else if (r < 0)
                return r;
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        char *d = strdup(dir);
        if (!d)
                return -ENOMEM;
        free(m->report_dir);
        m->report_dir = d;
        safe_close(m->report_dir_fd);
        m->report_dir_fd = TAKE_FD(fd);
        return 0;
}

/* Records the outcome of a (re)load: "ok" or the message. */
static void manager_set_last_config_load(Manager *m, const char *message) {
        char *s = strdup(message);
        if (!s)
                return (void) log_oom();
        free(m->last_config_load);
        m->last_config_load = s;
}

static int manager_load_config(Manager *m, bool initial, char **ret_error) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_free_ char *error = NULL, *message = NULL;
        ConfigRef *ref;
        int r;

        r = config_load_file(m->config_path, &c, &error);
        if (r < 0) {
                /* Read errors already start with the path; validation errors with the key path. */
                if (error && strncmp(error, m->config_path, strlen(m->config_path)) == 0)
                        message = strdup(error);
                else if (asprintf(&message, "%s: %s", m->config_path, error ?: strerror(-r)) < 0)
                        message = NULL;
                if (!message)
                        return log_oom();
                log_error_errno(r, "Invalid configuration %s%s", message,
                                initial ? "" : " (keeping the last good one)");
        } else {
                r = manager_open_report_dir(m, c, &message);
                if (r < 0) {
                        if (!message && asprintf(&message, "Failed to open report directory %s: %s",
                                                 c->report_dir, strerror(-r)) < 0)
                                return log_oom();
                        log_error_errno(r, "%s%s", message,
                                        initial ? "" : " (keeping the last good configuration)");
                }
        }
        if (r < 0) {
                manager_set_last_config_load(m, message);
                if (ret_error)
                        *ret_error = TAKE_PTR(message);
                return r;
        }

        if (!initial)
                manager_http_reload(m->http_room, c);
        r = config_ref_new(TAKE_PTR(c), &ref);
        if (r < 0)
                return log_oom();
        config_unref(m->config);
        m->config = ref;
        /* ProfileConfigs are merged with (and may name profiles of) the cluster config. */
        r = kube_room_rules_reload(m->kube);
        if (r < 0)
                return log_oom();
        manager_set_last_config_load(m, "ok");
        log_info("Loaded configuration %s: %zu profiles, %zu targets.", m->config_path,
                 ref->config->n_profiles, ref->config->n_targets);
        return 0;
}

static bool strv_equal_or_empty(char *const *a, char *const *b) {
        size_t n = strv_length(a);

        if (n != strv_length(b))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!streq(a[i], b[i]))
                        return false;
        return true;
}

int manager_reload(Manager *m, char **ret_error) {
        int r;

        (void) sd_notify(false, "RELOADING=1");
        r = manager_load_config(m, false, ret_error);
        if (r >= 0 && !strv_equal_or_empty(m->config->config->debuginfod_urls, m->debuginfod_urls))
                log_notice("debuginfodUrls changed: the agent keeps the servers it started with until it "
                           "restarts.");
        if (r >= 0) {
                machine_room_config_changed(m->machine);
                manager_retarget(m);
                manager_reports_config_changed(m->sessions_room);
        }
        (void) sd_notify(false, "READY=1");
        return r;
}

static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        (void) manager_reload(userdata, NULL);
        return 0;
}

/* ---- debuginfod ---- */

static int debuginfod_open_cached(void *userdata, const char *build_id) {
        return debuginfod_fetcher_open_cached(userdata, build_id);
}

static int debuginfod_request(void *userdata, const char *build_id) {
        return debuginfod_fetcher_request(userdata, build_id);
}

static void on_debuginfod_fetched(DebuginfodFetcher *f, const char *build_id, int result, uint64_t usec,
                                  void *userdata) {
        Manager *m = userdata;
        int n;

        if (result == -ENOENT)
                log_debug("No debuginfod server has the debug file of build ID %s.", build_id);
        else if (result < 0)
                log_info_errno(result,
                               "Failed to fetch the debug file of build ID %s from debuginfod, ignoring: %m",
                               build_id);
        n = symbolizer_debuginfod_done(m->symbolizer, build_id, result);
        if (result >= 0)
                log_info(
                        "Debug file of build ID %s from debuginfod (%.1f ms): symbols for %d loaded file%s.",
                        build_id, (double) usec / 1000.0, MAX(n, 0), n == 1 ? "" : "s");
}

/* debuginfodUrls, read at start: the fetcher sets libdebuginfod's
 * environment, so this runs before any other thread exists (libcurl's
 * resolver threads come with the Kubernetes client, later). */
static int manager_setup_debuginfod(Manager *m) {
        _cleanup_free_ char *cache_dir = NULL;
        char **urls = m->config->config->debuginfod_urls;
        int r;

        if (strv_length(urls) == 0)
                return 0;
        if (asprintf(&cache_dir, "%s/debuginfod", m->state_dir) < 0)
                return log_oom();
        m->debuginfod_urls = calloc(strv_length(urls) + 1, sizeof(char *));
        if (!m->debuginfod_urls)
                return log_oom();
        for (size_t i = 0; urls[i]; i++)
                if (!(m->debuginfod_urls[i] = strdup(urls[i])))
                        return log_oom();

        r = debuginfod_fetcher_new(m->event,
                                   &(DebuginfodFetcherOptions){ .urls = urls, .cache_dir = cache_dir },
                                   on_debuginfod_fetched, m, &m->debuginfod);
        if (r < 0)
                return log_warning_errno(r, "Failed to set up debuginfod (cache %s), continuing without: %m",
                                         cache_dir);
        symbolizer_set_debuginfod(m->symbolizer, &(SymbolizerDebuginfod){
                                                         .open_cached = debuginfod_open_cached,
                                                         .request = debuginfod_request,
                                                         .userdata = m->debuginfod,
                                                 });
        log_info("Fetching the debug files of stripped binaries from %zu debuginfod server%s "
                 "(cache %s, at most %" PRIu64 " MiB).",
                 strv_length(urls), strv_length(urls) == 1 ? "" : "s", cache_dir,
                 debuginfod_fetcher_cache_max_bytes(m->debuginfod) >> 20);
        return 0;
}

/* ---- lifecycle ---- */

static void manager_stop(Manager *m, int code) {
        if (m->stopping)
                return;
        m->stopping = true;
        m->stopping_since = now_usec(CLOCK_MONOTONIC);
        (void) sd_notify(false, "STOPPING=1");
        /* Reports waiting to be written again: one last attempt, before the
         * sessions end (a session's report that fails now is not retried). */
        manager_report_retry_flush(m->sessions_room);
        log_info("Stopping: ending %zu sessions.", m->n_sessions);
        m->exit_code = code;
        /* A few per loop iteration; the loop goes on (the watchdog, the
         * bus) until they are ended and the worker has written every
         * report. */
        for (size_t i = m->n_sessions; i > 0; i--)
                if (manager_end_session_soon(m->sessions_room, m->sessions[i - 1], "agent-stopped", NULL,
                                             NULL) < 0) {
                        log_oom();
                        session_end(m->sessions[i - 1], "agent-stopped");
                }
        manager_reports_written(m);
}

void manager_reports_written(Manager *m) {
        if (!m->stopping || m->n_sessions > 0 || worker_pending(sessions_room_worker(m->sessions_room)) > 0)
                return;
        if (sd_event_get_state(m->event) == SD_EVENT_FINISHED)
                return;
        log_info("Stopped: the last reports were written %.1f ms after the agent began to stop; the "
                 "longest event loop dispatch meanwhile took %.1f ms (the longest in CPU time %.1f ms).",
                 (double) (now_usec(CLOCK_MONOTONIC) - m->stopping_since) / 1000.0,
                 (double) m->loop.stopping_usec_max / 1000.0,
                 (double) m->loop.stopping_cpu_usec_max / 1000.0);
        (void) sd_event_exit(m->event, m->exit_code);
}

void manager_fatal(Manager *m, int error) {
        manager_stop(m, -abs(error ?: EIO));
}

static int on_sigterm(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        manager_stop(userdata, 0);
        return 0;
}

int manager_new(const ManagerOptions *opts, Manager **ret) {
        _cleanup_(manager_freep) Manager *m = NULL;
        int r;

        m = calloc(1, sizeof(*m));
        if (!m)
                return -ENOMEM;
        m->opts = *opts;
        m->report_dir_fd = -EBADF;
        m->cgroup_root_fd = -EBADF;
        m->config_path = strdup(opts->config_path);
        m->state_dir = strdup(opts->state_dir ?: DEFAULT_STATE_DIR);
        m->bus_socket = strdup(opts->bus_socket ?: DEFAULT_BUS_SOCKET);
        if (!m->config_path || !m->state_dir || !m->bus_socket)
                return -ENOMEM;
        if (opts->node_name)
                m->node_name = strdup(opts->node_name);
        else {
                char host[256] = {};
                (void) gethostname(host, sizeof(host) - 1);
                m->node_name = strdup(host);
        }
        if (!m->node_name)
                return -ENOMEM;

        r = sd_event_default(&m->event);
        if (r < 0)
                return r;
        r = manager_sessions_room_new(m);
        if (r < 0)
                return r;
        r = manager_machine_new(m);
        if (r < 0)
                return r;
        r = manager_kube_new(m);
        if (r < 0)
                return r;
        r = manager_metrics_new(m);
        if (r < 0)
                return r;
        r = manager_http_room_new(m);
        if (r < 0)
                return r;
        r = manager_control_room_new(m);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(m);
        return 0;
}

/* SIGTERM and SIGINT stop the agent, SIGHUP reloads the config. */
static int manager_setup_signals(Manager *m) {
        sigset_t mask;
        int r;

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        r = sd_event_add_signal(m->event, &m->sigterm, SIGTERM, on_sigterm, m);
        if (r >= 0)
                r = sd_event_add_signal(m->event, &m->sigint, SIGINT, on_sigterm, m);
        if (r >= 0)
                r = sd_event_add_signal(m->event, &m->sighup, SIGHUP, on_sighup, m);
        if (r < 0)
                return log_error_errno(r, "Failed to set up signal handlers: %m");
        return 0;
}

/* What names the frames: the process reader, the maps cache, the
 * symbolizer (with debuginfod) and the kernel's symbols. */
static int manager_setup_symbols(Manager *m) {
        int r;

        r = process_reader_new(&m->process_reader);
        if (r < 0)
                return log_error_errno(r, "Failed to set up libproc2: %m");
        m->maps_cache = proc_maps_cache_new();
        if (!m->maps_cache)
                return log_oom();
        r = symbolizer_new(NULL, &m->symbolizer);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the symbolizer: %m");
        symbolizer_set_maps_cache(m->symbolizer, m->maps_cache);
        (void) manager_setup_debuginfod(m);
        /* Kernel symbols now, once (~40 ms for 120k symbols), rather than
         * in the first drain of the first session. */
        ResolvedFrame rf;
        (void) symbolizer_resolve_kernel(m->symbolizer, 0, &rf);
        return 0;
}

/* What samples: the BPF sampler, the unwinder and the Python frame walk
 * on its maps, the process events and the drain timer. */
static int manager_setup_sampler(Manager *m) {
        int r;

        SamplerOptions sampler_opts = {
                .mode = m->opts.attach_mode,
                .unwind_rows = (uint32_t) m->config->config->unwind_table_rows,
                .bench_variant = m->opts.bench_variant,
                .no_offcpu = m->opts.no_offcpu,
        };
        r = sampler_new(&sampler_opts, on_proc_event, m, &m->sampler);
        if (r < 0)
                return log_error_errno(r, "Failed to load the BPF sampler: %m");
        SamplerUnwindMaps unwind_maps;
        sampler_unwind_maps(m->sampler, &unwind_maps);
        r = unwinder_new(m->event, &unwind_maps, &m->unwinder);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the unwinder: %m");
        unwinder_set_maps_cache(m->unwinder, m->maps_cache);
        int py_procs_fd, py_threads_fd;
        sampler_python_maps(m->sampler, &py_procs_fd, &py_threads_fd);
        r = python_new(py_procs_fd, py_threads_fd, NULL, &m->python);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the Python frame walk: %m");
        python_set_maps_cache(m->python, m->maps_cache);
        r = proc_event_queue_new(m->event, m->maps_cache, "/proc", on_proc_event_ready, m,
                                 &m->proc_event_queue);
        if (r < 0)
                return log_error_errno(r, "Failed to start the thread that reads process mappings: %m");
        r = sd_event_add_io(m->event, &m->proc_events, sampler_proc_events_fd(m->sampler), EPOLLIN,
                            on_proc_events_io, m);
        if (r < 0)
                return log_error_errno(r, "Failed to watch process events: %m");
        /* Process events before anything else: a short-lived process must be captured while alive. */
        (void) sd_event_source_set_priority(m->proc_events, SD_EVENT_PRIORITY_IMPORTANT);

        r = sd_event_add_time_relative(m->event, &m->drain_timer, CLOCK_MONOTONIC, DRAIN_INTERVAL_USEC,
                                       10 * USEC_PER_MSEC, on_drain_timer, m);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the drain timer: %m");
        (void) sd_event_source_set_description(m->drain_timer, "drain");
        return 0;
}

/* The cgroup v2 hierarchy: --cgroup-root's, or the one this process sees. */
static int manager_open_cgroup_root(Manager *m) {
        int r;

        if (m->opts.cgroup_root) {
                /* --cgroup-root: e.g. the host's hierarchy mounted into a container. */
                struct statfs sfs;

                m->cgroup_root = strdup(m->opts.cgroup_root);
                if (!m->cgroup_root)
                        return log_oom();
                m->cgroup_root_fd = open(m->cgroup_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (m->cgroup_root_fd < 0)
                        return log_error_errno(errno, "--cgroup-root: failed to open %s: %m",
                                               m->cgroup_root);
                if (fstatfs(m->cgroup_root_fd, &sfs) < 0)
                        return log_error_errno(errno, "--cgroup-root: failed to statfs %s: %m",
                                               m->cgroup_root);
                if (sfs.f_type != CGROUP2_SUPER_MAGIC)
                        return log_error_errno(ENOTDIR, "--cgroup-root: %s is not a cgroup v2 mount.",
                                               m->cgroup_root);
        } else {
                r = cg_find_unified_root(NULL, &m->cgroup_root);
                if (r < 0)
                        return log_error_errno(
                                r, "Failed to find the cgroup v2 mount in /proc/self/mountinfo: %m");
                m->cgroup_root_fd = open(m->cgroup_root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (m->cgroup_root_fd < 0)
                        return log_error_errno(errno, "Failed to open %s: %m", m->cgroup_root);
        }
        log_info("cgroup v2 hierarchy at %s.", m->cgroup_root);
        return 0;
}

int manager_startup(Manager *m) {
        int r;

        m->start_usec = now_usec(CLOCK_REALTIME);
        m->start_monotonic = now_usec(CLOCK_MONOTONIC);

        r = manager_load_config(m, true, NULL);
        if (r < 0)
                return r;

        r = mkdir_p(m->state_dir, 0700);
        if (r < 0)
                return log_error_errno(r, "Failed to create state directory %s: %m", m->state_dir);
        /* Reports a crashed run left partial (before any session starts). */
        manager_checkpoint_setup(m->sessions_room);

        r = manager_setup_signals(m);
        if (r < 0)
                return r;

        r = sessions_room_start_worker(m->sessions_room);
        if (r < 0)
                return log_error_errno(r, "Failed to start the thread that writes reports: %m");
        /* The report index's walk is the worker's first job. */
        r = manager_reports_start(m->sessions_room);
        if (r < 0)
                return log_error_errno(r, "Failed to set up the report index: %m");

        /* machineConfig first: perf_event_paranoid and friends may be what lets us sample. */
        r = machine_room_start(m->machine);
        if (r < 0)
                return r;

        r = manager_setup_symbols(m);
        if (r < 0)
                return r;
        r = manager_setup_sampler(m);
        if (r < 0)
                return r;
        sessions_room_set_sampling(m->sessions_room, &(SessionsSampling){
                                                             .sampler = m->sampler,
                                                             .unwinder = m->unwinder,
                                                             .python = m->python,
                                                             .symbolizer = m->symbolizer,
                                                             .process_reader = m->process_reader,
                                                     });

        r = manager_open_cgroup_root(m);
        if (r < 0)
                return r;

        /* Scans existing cgroups (starting sessions for matching ones) and watches for new ones. */
        r = cgroup_watch_new(m->event, m->cgroup_root, on_cgroup, m, &m->cgroup_watch);
        if (r < 0)
                return log_error_errno(r, "Failed to watch the cgroup tree at %s: %m", m->cgroup_root);
        /* Sessions started during the scan could not see their descendants yet. */
        for (size_t i = 0; i < m->n_sessions; i++)
                manager_assign_cgroups_below(m, m->sessions[i]->cgroup);

        /* Kubernetes: pods and namespaces join the container cgroups as they are listed. */
        r = kube_room_start(m->kube);
        if (r < 0)
                return r;
        if (!kube_room_enabled(m->kube))
                machine_room_host_mode(m->machine);

        r = manager_bus_listen(m->control);
        if (r < 0)
                log_warning_errno(r, "Failed to listen on %s, cgprofctl will not reach this agent: %m",
                                  m->bus_socket);
        (void) manager_bus_connect_system(m->control);
        {
                _cleanup_free_ char *error = NULL;

                /* What "http" may do depends on the mode, known only now. */
                r = config_check_http_mode(m->config->config, kube_room_enabled(m->kube), &error);
                if (r < 0)
                        return log_error_errno(r, "%s: %s", m->config_path, error ?: strerror(-r));
        }
        (void) manager_http_start(m->http_room);

        r = sd_event_set_watchdog(m->event, true);
        if (r < 0)
                log_warning_errno(r, "Failed to enable watchdog pings, ignoring: %m");

        log_info("cgprofd running: %zu cgroups watched, %zu sessions, attach mode %s.",
                 cgroup_watch_count(m->cgroup_watch), m->n_sessions,
                 sampler_mode_to_string(m->opts.attach_mode));
        (void) sd_notify(false, "READY=1\nSTATUS=Profiling.");
        return 0;
}

/* sd_event_loop(), measuring how long each dispatch (one event's handler,
 * and what it set off) keeps the loop from everything else: the watchdog,
 * the API watches, the drain. cgprofctl status shows the longest. */
static int manager_loop(Manager *m) {
        int r, code;

        for (;;) {
                r = sd_event_get_state(m->event);
                if (r < 0)
                        return r;
                if (r == SD_EVENT_FINISHED)
                        break;
                r = sd_event_prepare(m->event);
                if (r == 0)
                        r = sd_event_wait(m->event, UINT64_MAX);
                if (r < 0)
                        return r;
                if (r > 0) {
                        /* Wall time, what the others wait; and this
                         * thread's CPU time: the handler's own work, without
                         * the time the scheduler gave to other tasks. */
                        uint64_t start = timing_now(), cpu_start = now_usec(CLOCK_THREAD_CPUTIME_ID);
                        uint64_t usec, cpu_usec, sec;
                        unsigned slot;

                        r = sd_event_dispatch(m->event);
                        /* What the next handler reads of /proc/PID/maps is read anew. */
                        proc_maps_cache_clear(m->maps_cache);
                        usec = timing_now() - start;
                        cpu_usec = now_usec(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
                        sec = start / USEC_PER_SEC;
                        slot = (unsigned) (sec % LOOP_RECENT_SEC);
                        if (m->loop.recent_sec[slot] != sec) {
                                m->loop.recent_sec[slot] = sec;
                                m->loop.recent_usec_max[slot] = m->loop.recent_cpu_usec_max[slot] = 0;
                        }
                        m->loop.recent_usec_max[slot] = MAX(m->loop.recent_usec_max[slot], usec);
                        m->loop.recent_cpu_usec_max[slot] = MAX(m->loop.recent_cpu_usec_max[slot], cpu_usec);
                        if (m->stopping) {
                                m->loop.stopping_usec_max = MAX(m->loop.stopping_usec_max, usec);
                                m->loop.stopping_cpu_usec_max = MAX(m->loop.stopping_cpu_usec_max, cpu_usec);
                        }
                        m->loop.dispatches++;
                        histogram_observe(&m->loop.dispatch_histogram, usec);
                        m->loop.dispatch_usec_total += usec;
                        m->loop.dispatch_usec_max = MAX(m->loop.dispatch_usec_max, usec);
                        m->loop.dispatch_cpu_usec_max = MAX(m->loop.dispatch_cpu_usec_max, cpu_usec);
                        if (usec >= 50 * USEC_PER_MSEC) {
                                m->loop.dispatches_over_50ms++;
                                log_debug("An event loop dispatch took %.1f ms (%.1f ms of its CPU time).",
                                          (double) usec / 1000.0, (double) cpu_usec / 1000.0);
                        }
                        if (r < 0)
                                return r;
                }
        }
        r = sd_event_get_exit_code(m->event, &code);
        return r < 0 ? r : code;
}

int manager_run(Manager *m) {
        int r = manager_loop(m);
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m");

        machine_room_restore(m->machine);
        return 0;
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        /* Reports still being written (the loop failed): finished, and
         * announced while everything they announce to is still here. */
        m->http_room = http_room_free(m->http_room); /* no more scrapes of what is freed below */
        sessions_room_flush(m->sessions_room);
        /* The sessions left did not end: no job report from their jobs. */
        sessions_room_jobs_drop(m->sessions_room);
        while (m->n_sessions > 0) {
                Session *s = m->sessions[--m->n_sessions];
                session_free(s);
        }
        sessions_room_stop_worker(m->sessions_room);
        manager_end_queue_free(m->sessions_room);
        free(m->sessions);
        manager_bus_close(m->control);
        m->control = control_room_free(m->control);
        machine_room_node_stop(m->machine); /* watches through the kube room's client */
        m->kube = kube_room_free(m->kube);
        cgroup_watch_free(m->cgroup_watch);
        cgroup_tables_free(m);
        m->sessions_room = sessions_room_free(m->sessions_room);
        sd_event_source_disable_unref(m->drain_timer);
        sd_event_source_disable_unref(m->fd_retry_timer);
        m->machine = machine_room_free(m->machine);
        sd_event_source_disable_unref(m->proc_events);
        proc_event_queue_free(m->proc_event_queue);
        sample_park_done(&m->sample_park);
        sd_event_source_disable_unref(m->sigterm);
        sd_event_source_disable_unref(m->sigint);
        sd_event_source_disable_unref(m->sighup);
        unwinder_free(m->unwinder);
        python_free(m->python);
        sampler_free(m->sampler);
        debuginfod_fetcher_free(m->debuginfod); /* before the symbolizer its answers go to */
        strv_free(m->debuginfod_urls);
        symbolizer_free(m->symbolizer);
        proc_maps_cache_free(m->maps_cache);
        process_reader_free(m->process_reader);
        config_unref(m->config);
        free(m->last_config_load);
        safe_close(m->report_dir_fd);
        free(m->report_dir);
        free(m->cgroup_root);
        safe_close(m->cgroup_root_fd);
        free(m->config_path);
        free(m->state_dir);
        free(m->bus_socket);
        free(m->node_name);
        m->metrics = manager_metrics_free(m->metrics);
        sd_event_unref(m->event);
        free(m);
        return NULL;
}

void manager_count_session_failed(Manager *m, const char *reason) {
        sessions_room_count_failed(m->sessions_room);
        metrics_session_failed(m->metrics, reason);
}

uint64_t manager_uptime_usec(Manager *m) {
        return m->start_monotonic > 0 ? now_usec(CLOCK_MONOTONIC) - m->start_monotonic : 0;
}
