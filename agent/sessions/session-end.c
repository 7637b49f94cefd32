/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* How a session ends, in four steps:
 *   stop     sampling off, the kernel's last samples drained, late frames
 *            resolved, the slot and the cgroups given back (on the loop);
 *   collect  the report directories and their data, with a copy of the
 *            summary's metadata (on the loop);
 *   write    the reports, fsync()ed, on the report worker (off the loop);
 *   announce once written: failures to the retry queue, the checkpoint
 *            entry removed, the journal entry, the bus signal, the
 *            caller's callback; then the session is freed.
 * Between stop and announce the session is in no index of the Manager:
 * only its Ending holds it. */
#include <inttypes.h>

#include "cgroup-util.h"
#include "checkpoint.h"
#include "base.h"
#include "log.h"
#include "session-events.h"
#include "report-retry.h"
#include "report-writer.h"
#include "session-jobs.h"
#include "session.h"
#include "sessions-room.h"

typedef struct Ending {
        Session *s;
        char *reason;
        uint64_t samples, lost;
        uint64_t offcpu_recorded, offcpu_short, offcpu_lost;
        SessionEndedFunc callback;
        void *userdata;
} Ending;

static Ending *ending_free(Ending *e) {
        if (!e)
                return NULL;
        session_free(e->s);
        free(e->reason);
        free(e);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(Ending *, ending_free);

/* Sampling off, everything the kernel recorded drained, the slot released.
 * Sets *ret_usage_source (what the CPU time was read from) and *st. */
static void session_stop(Session *s, const char *reason, const char **ret_usage_source,
                         SamplerSessionStats *st) {
        SessionsRoom *room = s->room;
        uint64_t usage_now, usage_nsec;

        /* A provisional session that ends before its pod's status named the
         * container (it died at once, or the pod went first) is announced
         * now: every session that ends with a report has its start entry. */
        if (s->provisional)
                session_announce(s);

        (void) sampler_session_deactivate(room->sampler, s->slot);
        /* The cgroup's CPU time: from cpu.stat when it can still be read;
         * once the cgroup is removed only the counting perf events know. */
        *ret_usage_source = "cpu.stat";
        if (cg_read_cpu_usage_usec(s->cgroup_fd, &usage_now) >= 0)
                s->cpu_usage_last = usage_now;
        else if (s->cpu_usage_final)
                *ret_usage_source = "cpu.stat"; /* read when the cgroup emptied */
        else if (sampler_session_cpu_time(room->sampler, s->slot, &usage_nsec) >= 0) {
                s->cpu_usage_last = s->cpu_usage_start + usage_nsec / NSEC_PER_USEC;
                *ret_usage_source = "perf";
        } else
                *ret_usage_source = "cpu.stat (last reading before the cgroup was removed)";
        s->state = SESSION_ENDED;
        s->end_realtime = now_usec(CLOCK_REALTIME);
        s->timer = sd_event_source_disable_unref(s->timer);
        s->events_watch = sd_event_source_disable_unref(s->events_watch);
        s->checkpoint_timer = sd_event_source_disable_unref(s->checkpoint_timer);

        /* Everything the kernel recorded up to now. */
        (void) sessions_room_drain(room, true);

        (void) sampler_session_stats(room->sampler, s->slot, st);
        (void) sampler_session_stats_threads(room->sampler, s->slot, st);

        /* Frames whose symbols arrived since they were drained, or whose
         * mappings are read only now. */
        session_refresh_queued_now(s);
        session_resolve_late(s);

        /* Give the cgroups back to an enclosing session (if any), release the slot. */
        sessions_room_session_removed(room, s, reason);
        sessions_room_assign_cgroups_below(room, s->cgroup);
        sampler_session_close(room->sampler, s->slot);
}

/* The session's report directories as writes of a batch; the session's
 * data goes to its write (or to the per-process ones it was split in). */
static int session_collect(Session *s, const SamplerSessionStats *st, const char *reason,
                           const char *usage_source, ReportBatch *b) {
        ReportSummaryInfo info;
        TemplateVars vars;
        SessionReportUnit *units = NULL;
        size_t n_units = 0;
        char node_buf[256];
        int r;

        session_report_info(s, st, reason, usage_source, s->end_realtime, &info);
        session_report_vars(s, node_buf, &vars);
        r = session_report_units(s, &vars, &units, &n_units);
        for (size_t i = 0; r >= 0 && i < n_units; i++) {
                ReportWrite *w;
                ProfileData *d = units[i].data;

                if (units[i].owned)
                        units[i].owned = false;
                else
                        s->data = NULL; /* the unit held the session's own data */
                units[i].data = NULL;
                r = report_write_new(units[i].dir, s->profile->formats | s->extra_formats, d, &info, &w);
                if (r >= 0)
                        r = report_batch_add(b, w);
        }
        session_report_units_free(units, n_units);
        return r;
}

static void session_announce_end(Ending *e, const char *dirs, size_t n_queued, int r) {
        Session *s = e->s;
        SessionsRoom *room = s->room;
        JournalSessionFields f;

        /* The final report replaced the checkpoints (or waits to). */
        session_checkpoint_done(s);

        session_fields(s, &f);
        f.samples = e->samples;
        f.lost = e->lost;
        f.offcpu = s->profile->events & PROFILE_EVENT_OFFCPU;
        f.offcpu_recorded = e->offcpu_recorded;
        f.offcpu_short = e->offcpu_short;
        f.offcpu_lost = e->offcpu_lost;
        if (r < 0) {
                f.error = r;
                room->counts.failed++; /* and in /metrics: SessionEvents.ended() */
                journal_session(JOURNAL_SESSION_FAILURE, &f,
                                "Failed to write the report of session %s (cgroup %s): %s%s", s->id_string,
                                s->cgroup, strerror(-r),
                                n_queued > 0 ? " (it will be written again later)" : "");
        } else {
                /* No directory: nothing sampled, and nobody waits for the report. */
                const char *where =
                        dirs ? "report in " : "no report (nothing sampled, nobody waiting for it)";

                f.report = dirs;
                room->counts.ended++;
                if (s->pod)
                        journal_session(
                                JOURNAL_SESSION_END, &f,
                                "Finished profiling container %s of pod %s/%s (session %s, %s): %" PRIu64
                                " samples, %" PRIu64 " lost; %s%s.",
                                strna(s->container), s->namespace, s->pod, s->id_string, e->reason,
                                f.samples, f.lost, where, strempty(dirs));
                else
                        journal_session(JOURNAL_SESSION_END, &f,
                                        "Finished profiling cgroup %s (session %s, %s): %" PRIu64
                                        " samples, %" PRIu64 " lost; %s%s.",
                                        s->cgroup, s->id_string, e->reason, f.samples, f.lost, where,
                                        strempty(dirs));
        }
        session_events_ended(room->deps.events, room->deps.userdata, s, e->reason, r < 0 ? NULL : dirs,
                             r < 0 ? r : 0, f.samples);
        if (e->callback)
                e->callback(e->userdata, s->id_string, r < 0 ? NULL : dirs, r);
        ending_free(e);
}

/* The batch was written: the directories that failed wait in the retry
 * queue with their data. */
static void on_session_written(SessionsRoom *room, ReportBatch *b, void *userdata) {
        Ending *e = userdata;
        _cleanup_free_ char *dirs = NULL;
        size_t n_queued = 0;
        int r = 0;

        for (size_t i = 0; i < b->n_writes; i++) {
                ReportWrite *w = b->writes[i];

                if (w->error < 0) {
                        log_warning_errno(w->error, "Failed to write the report %s: %m", strna(w->full));
                        if (r == 0)
                                r = w->error;
                        b->writes[i] = NULL;
                        if (manager_report_retry_add(room, w) > 0)
                                n_queued++;
                        continue;
                }
                char *n = NULL;
                if (asprintf(&n, "%s%s%s", strempty(dirs), dirs ? " " : "", w->full) < 0) {
                        r = -ENOMEM;
                        break;
                }
                free(dirs);
                dirs = n;
        }
        session_announce_end(e, dirs, n_queued, r);
}

int session_end_notify(Session *s, const char *reason, SessionEndedFunc callback, void *userdata) {
        SessionsRoom *room = s->room;
        _cleanup_(sampler_session_stats_done) SamplerSessionStats st = {};
        _cleanup_(report_batch_freep) ReportBatch *b = NULL;
        _cleanup_(ending_freep) Ending *e = NULL;
        const char *usage_source;
        int r;

        if (s->state != SESSION_RUNNING) {
                log_info("Session %s for cgroup %s ended before it started (%s).", s->id_string, s->cgroup,
                         reason);
                sessions_room_session_removed(room, s, reason);
                if (callback)
                        callback(userdata, s->id_string, NULL, 0);
                session_free(s);
                return 0;
        }

        e = calloc(1, sizeof(*e));
        if (e)
                e->reason = strdup(reason);
        if (!e || !e->reason) {
                /* Not even room to say how it went: stop sampling, drop it. */
                free(e);
                e = NULL;
                session_stop(s, reason, &usage_source, &st);
                session_events_stopped(room->deps.events, room->deps.userdata, s, &st);
                if (callback)
                        callback(userdata, s->id_string, NULL, -ENOMEM);
                session_free(s);
                return log_oom();
        }
        e->s = s;
        e->callback = callback;
        e->userdata = userdata;

        uint64_t t0 = now_usec(CLOCK_MONOTONIC), t1;
        session_stop(s, reason, &usage_source, &st);
        session_events_stopped(room->deps.events, room->deps.userdata, s, &st);
        e->samples = profile_data_total(s->data);
        e->lost = st.lost + s->stack_lost;
        e->offcpu_recorded = st.offcpu_recorded;
        e->offcpu_short = st.offcpu_short;
        e->offcpu_lost = st.offcpu_lost;
        t1 = now_usec(CLOCK_MONOTONIC);

        /* A pull whose client hung up before anything was sampled: a report
         * nobody asked for any more, of nothing, would only fill the disk
         * (one per abandoned request). */
        if (s->report_if_sampled && e->samples == 0 && profile_data_offcpu_total(s->data) == 0) {
                log_info(
                        "Session %s for cgroup %s ended (%s) with no samples and nobody waiting: no report.",
                        s->id_string, s->cgroup, reason);
                session_checkpoint_discard(s);
                session_announce_end(TAKE_PTR(e), NULL, 0, 0);
                return 0;
        }

        r = report_batch_new(room, on_session_written, e, &b);
        if (r >= 0)
                r = session_collect(s, &st, reason, usage_source, b);
        log_debug("Session %s: stopped in %.1f ms, its reports collected in %.1f ms.", s->id_string,
                  (double) (t1 - t0) / 1000.0, (double) (now_usec(CLOCK_MONOTONIC) - t1) / 1000.0);
        if (r < 0) {
                session_announce_end(TAKE_PTR(e), NULL, 0, r);
                return r;
        }
        /* The session's jobs take their processes' samples (copies). */
        session_jobs_contribute(s, b);
        TAKE_PTR(e);
        report_batch_submit(TAKE_PTR(b));
        return 0;
}

void session_end(Session *s, const char *reason) {
        (void) session_end_notify(s, reason, NULL, NULL);
}

void session_discard(Session *s) {
        SessionsRoom *room = s->room;

        log_debug("Session %s: cgroup %s is not a container of pod %s/%s (a pod sandbox), discarding.",
                  s->id_string, s->cgroup, strna(s->namespace), strna(s->pod));
        if (s->state == SESSION_RUNNING)
                (void) sampler_session_deactivate(room->sampler, s->slot);
        session_checkpoint_discard(s);
        sessions_room_session_removed(room, s, "discarded");
        sessions_room_assign_cgroups_below(room, s->cgroup);
        if (s->state == SESSION_RUNNING) {
                sampler_session_close(room->sampler, s->slot);
                room->counts.discarded++;
                session_events_stopped(room->deps.events, room->deps.userdata, s,
                                       NULL); /* what /metrics showed of it stays counted */
        }
        session_free(s);
}

/* ---- ending many: a few per loop iteration ---- */

struct SessionEndRequest {
        char *id;
        const char *reason; /* static */
        SessionEndedFunc callback;
        void *userdata;
};

static int on_end_queue(sd_event_source *source, void *userdata) {
        SessionsRoom *room = userdata;
        uint64_t start = now_usec(CLOCK_MONOTONIC);

        /* Each end drains and closes the session's perf events: within
         * the budget, then the loop serves the others and comes back. */
        while (room->end_queue_head < room->n_end_queue &&
               (room->end_queue_head == 0 || now_usec(CLOCK_MONOTONIC) - start < SESSION_END_BUDGET_USEC)) {
                SessionEndRequest *q = &room->end_queue[room->end_queue_head++];
                _cleanup_free_ char *id = TAKE_PTR(q->id);
                Session *s = sessions_room_session_find(room, id);

                if (s)
                        (void) session_end_notify(s, q->reason, q->callback, q->userdata);
                else if (q->callback)
                        /* Ended meanwhile, by something else. */
                        q->callback(q->userdata, id, NULL, 0);
        }
        if (room->end_queue_head < room->n_end_queue)
                return 0;
        free(room->end_queue);
        room->end_queue = NULL;
        room->n_end_queue = room->end_queue_head = 0;
        (void) sd_event_source_set_enabled(source, SD_EVENT_OFF);
        sessions_room_reports_written(room);
        return 0;
}

int manager_end_session_soon(SessionsRoom *room, const Session *s, const char *reason,
                             SessionEndedFunc callback, void *userdata) {
        SessionEndRequest *l;
        int r;

        if (!room->end_defer) {
                r = sd_event_add_defer(room->deps.event, &room->end_defer, on_end_queue, room);
                if (r < 0)
                        return r;
                (void) sd_event_source_set_description(room->end_defer, "session-end-queue");
                /* Below the drain and the bus: they go first. */
                (void) sd_event_source_set_priority(room->end_defer, SD_EVENT_PRIORITY_IDLE);
        }
        l = reallocarray(room->end_queue, room->n_end_queue + 1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        room->end_queue = l;
        l[room->n_end_queue] = (SessionEndRequest){
                .id = strdup(s->id_string),
                .reason = reason,
                .callback = callback,
                .userdata = userdata,
        };
        if (!l[room->n_end_queue].id)
                return -ENOMEM;
        room->n_end_queue++;
        return sd_event_source_set_enabled(room->end_defer, SD_EVENT_ON);
}

size_t manager_sessions_ending(const SessionsRoom *room) {
        return room->n_end_queue - room->end_queue_head;
}

void manager_end_queue_free(SessionsRoom *room) {
        if (!room)
                return;
        for (size_t i = room->end_queue_head; i < room->n_end_queue; i++)
                free(room->end_queue[i].id);
        free(room->end_queue);
        room->end_queue = NULL;
        room->n_end_queue = room->end_queue_head = 0;
        room->end_defer = sd_event_source_disable_unref(room->end_defer);
}
