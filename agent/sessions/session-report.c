/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A session's report, as written at its end and at each checkpoint: the
 * metadata (ReportSummaryInfo) and the directories the output template
 * names (one, or one per process group). report-writer.c writes them. */
#include <fcntl.h>
#include <inttypes.h>

#include "fileio.h"
#include "log.h"
#include "session.h"
#include "sessions-room.h"
#include "template.h"

const char *session_output(Session *s) {
        if (s->output)
                return s->output;
        if (s->namespaced_output) {
                if (asprintf(&s->output, "{NAMESPACE}/%s",
                             s->profile->output ?: TEMPLATE_POD_NAMESPACED_DEFAULT) < 0)
                        s->output = NULL;
        } else
                s->output = strdup(s->profile->output
                                           ?: (s->pod ? TEMPLATE_POD_DEFAULT : TEMPLATE_HOST_DEFAULT));
        return s->output;
}

void session_report_info(Session *s, const SamplerSessionStats *st, const char *reason,
                         const char *usage_source, uint64_t end_usec, ReportSummaryInfo *ret) {
        SessionsRoom *room = s->room;

        *ret = (ReportSummaryInfo){
                .session_id = s->id_string,
                .profile = s->profile->name,
                .target = s->target->name,
                .profile_config = s->profile_config,
                .cgroup = s->cgroup,
                .namespace = s->namespace,
                .pod = s->pod,
                .container = s->container,
                .container_id = s->container_id,
                .node = room->deps.node_name,
                .start_usec = s->start_realtime,
                .end_usec = end_usec,
                .frequency = s->profile->frequency,
                .event = s->event,
                .requested_event = s->profile->event,
                .event_fallback_reason = s->event_fallback,
                .attach_mode = sampler_mode_to_string(sampler_mode(room->sampler)),
                .end_reason = reason,
                .partial = !reason,
                .samples_per_cpu = st->per_cpu,
                .n_cpus = st->n_cpus,
                .lost = st->lost + s->stack_lost,
                .excluded = s->excluded,
                .collisions = st->collisions,
                .cpu_usage_usec = s->cpu_usage_last - s->cpu_usage_start,
                .cpu_usage_source = usage_source,
                .unsymbolized_frames = s->frames_unsymbolized,
                .total_frames = s->frames_total,
                .unwind = s->unwind,
                .python = s->python,
        };
        ret->unwind.mode = unwind_mode_to_string(s->profile->unwind);
        ret->python.enabled = s->profile->python_frames;
        ret->offcpu = (ReportOffCpuInfo){
                .enabled = s->profile->events & PROFILE_EVENT_OFFCPU,
                .unavailable = s->offcpu_unavailable,
                .min_usec = s->profile->offcpu_min_usec,
                .probability = s->profile->offcpu_probability,
                .recorded = st->offcpu_recorded,
                .recorded_ns = st->offcpu_recorded_ns,
                .short_waits = st->offcpu_short,
                .short_ns = st->offcpu_short_ns,
                .lost = st->offcpu_lost,
                .lost_ns = st->offcpu_lost_ns,
                .excluded_ns = s->offcpu_excluded_ns,
                .runqueue = st->offcpu_runqueue,
                .runqueue_ns = st->offcpu_runqueue_ns,
                .record_at = s->offcpu_unavailable ? NULL : s->offcpu_record_at,
                .recorded_late = st->offcpu_late,
        };
        if (ret->offcpu.enabled)
                session_report_threads(s, st, &ret->offcpu);
        ret->folded_rank_root = s->profile->folded_rank_root;
        ret->job_labels = s->job_labels;
        ret->cuda_probes = s->cuda_probes;
        session_cuda_time_info(s, &ret->cuda_time);
        for (size_t i = 0; i < ELEMENTSOF(ret->rank_categories); i++)
                ret->rank_categories[i] = s->profile->rank_categories[i];
}

void session_report_vars(Session *s, char node_buf[static 256], TemplateVars *ret) {
        snprintf(node_buf, 256, "%s", strempty(s->room->deps.node_name));
        *ret = (TemplateVars){
                .namespace = s->namespace,
                .pod = s->pod,
                .container = s->container,
                .container_id = s->container_id,
                .cgroup = s->cgroup,
                .node = node_buf,
                .profile = s->profile->name,
                .timestamp_ms = s->start_realtime / USEC_PER_MSEC,
                /* One per session: its checkpoints and its final report
                 * name the same directories. */
                .uid = s->report_uid,
        };
}

void session_report_units_free(SessionReportUnit *u, size_t n) {
        for (size_t i = 0; u && i < n; i++) {
                free(u[i].dir);
                if (u[i].owned)
                        profile_data_free(u[i].data);
        }
        free(u);
}

int session_report_units(Session *s, const TemplateVars *vars_in, SessionReportUnit **ret, size_t *ret_n) {
        TemplateVars vars = *vars_in;
        SessionReportUnit *units = NULL;
        size_t n_units = 0;
        int r = 0;

        if (!session_output(s))
                return -ENOMEM;

        if (!template_is_per_process(session_output(s))) {
                units = calloc(1, sizeof(*units));
                if (!units)
                        return -ENOMEM;
                r = template_expand(session_output(s), &vars, &units[0].dir);
                if (r < 0) {
                        free(units);
                        return r;
                }
                units[0].data = s->data;
                *ret = units;
                *ret_n = 1;
                return 0;
        }

        /* One report per directory the template names: processes that name
         * the same one (the same name and PID, a program before and after
         * exec(); or a template without {PROCESS_ID}) share it, never
         * overwrite each other. A process's directory depends on its own
         * name and PID only, so the directories of a checkpoint are the
         * final report's too. */
        size_t n_procs = s->data->n_processes;
        _cleanup_free_ char **rels = calloc(MAX(n_procs, (size_t) 1), sizeof(char *));
        _cleanup_free_ uint32_t *group = calloc(MAX(n_procs, (size_t) 1), sizeof(uint32_t));
        _cleanup_free_ bool *taken = calloc(MAX(n_procs, (size_t) 1), sizeof(bool));
        units = calloc(MAX(n_procs, (size_t) 1), sizeof(*units));
        if (!rels || !group || !taken || !units)
                r = -ENOMEM;
        for (size_t i = 0; i < n_procs && r >= 0; i++) {
                const ProfileProcess *pp = &s->data->processes[i];
                _cleanup_free_ char *pid = NULL, *rank = NULL;
                if (pp->samples == 0)
                        continue;
                if (asprintf(&pid, "%d", (int) pp->pid) < 0 ||
                    (pp->job.rank >= 0 ? asprintf(&rank, "%" PRIi32, pp->job.rank)
                                       : asprintf(&rank, "none")) < 0) {
                        r = -ENOMEM;
                        break;
                }
                vars.process_name = pp->comm;
                vars.process_id = pid;
                /* {RANK}: a rank's process and its workers share a report;
                 * a process of no rank is "none". */
                vars.rank = rank;
                r = template_expand(session_output(s), &vars, &rels[i]);
        }
        for (size_t i = 0; i < n_procs && r >= 0; i++) {
                size_t n_group = 0;
                if (!rels[i] || taken[i])
                        continue; /* no samples, or in an earlier one's group */
                for (size_t k = i; k < n_procs; k++)
                        if (rels[k] && !taken[k] && streq(rels[k], rels[i])) {
                                group[n_group++] = (uint32_t) k;
                                taken[k] = true;
                        }
                units[n_units].data = profile_data_of_processes(s->data, group, n_group);
                if (!units[n_units].data) {
                        r = -ENOMEM;
                        break;
                }
                units[n_units].owned = true;
                units[n_units++].dir = TAKE_PTR(rels[i]);
        }
        for (size_t i = 0; rels && i < n_procs; i++)
                free(rels[i]);
        if (r < 0) {
                session_report_units_free(units, n_units);
                return r;
        }
        *ret = units;
        *ret_n = n_units;
        return 0;
}
