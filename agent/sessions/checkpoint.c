/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Checkpoints and the recovery of interrupted reports (see checkpoint.h).
 *
 * What a checkpoint costs: it is written on the event loop, like a final
 * report today: every format of the session's data so far, each file
 * through a temporary name, fsynced and renamed (common/profile/report.c), plus
 * the registry entry when a directory is new. The loop is held for that
 * long once per interval per session (logged at debug level, the longest
 * in `status` → checkpoints.maxMsec); that is why the interval is at least
 * 1 s and 5 min by default. */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <time.h>

#include "cgroup-util.h"
#include "fileio.h"
#include "base.h"
#include "log.h"
#include "checkpoint.h"
#include "checkpoint-parse.h"
#include "report-retry.h"
#include "report-writer.h"
#include "session.h"
#include "sessions-room.h"

#define REGISTRY_ENTRY_MAX (1024U * 1024U)
#define SUMMARY_MAX (64U * 1024U * 1024U)

static void cjson_deletep(cJSON **j) {
        cJSON_Delete(*j);
}
#define _cleanup_cjson_ _cleanup_(cjson_deletep)

/* ---- the registry ---- */

/* The session's entry: {"session", "bootId", "cgroup", "reportDir", "dirs"}. */
static int registry_write(Session *s) {
        SessionsRoom *room = s->room;
        _cleanup_cjson_ cJSON *j = cJSON_CreateObject();
        _cleanup_free_ char *text = NULL;
        char boot[SD_ID128_STRING_MAX] = "";
        sd_id128_t b;
        cJSON *dirs;

        if (!j)
                return -ENOMEM;
        if (sd_id128_get_boot(&b) >= 0)
                sd_id128_to_string(b, boot);
        if (!cJSON_AddStringToObject(j, "session", s->id_string) ||
            !cJSON_AddStringToObject(j, "bootId", boot) ||
            !cJSON_AddStringToObject(j, "cgroup", s->cgroup) ||
            !cJSON_AddStringToObject(j, "reportDir", s->checkpoint_report_dir) ||
            !(dirs = cJSON_AddArrayToObject(j, "dirs")))
                return -ENOMEM;
        for (char **d = s->checkpoint_dirs; d && *d; d++) {
                cJSON *x = cJSON_CreateString(*d);
                if (!x)
                        return -ENOMEM;
                cJSON_AddItemToArray(dirs, x);
        }
        text = cJSON_PrintUnformatted(j);
        if (!text)
                return -ENOMEM;
        return write_string_file_atomic_at(room->checkpoint_dir_fd, s->id_string, text);
}

/* Adds the units' directories to the session's entry (written when one is
 * new, before any file of it: a crash in between leaves an entry whose
 * directory has no summary.json, which recovery only tidies). */
static int registry_update(Session *s, const SessionReportUnit *units, size_t n_units) {
        SessionsRoom *room = s->room;
        bool changed = false;

        if (room->checkpoint_dir_fd < 0)
                return -EBADF;
        if (!s->checkpoint_report_dir ||
            !streq(s->checkpoint_report_dir, sessions_room_report_dir(room, NULL))) {
                /* First checkpoint, or reportDir changed by a reload: the
                 * directories written before are below the old one, and
                 * will be replaced by the final report below the new one
                 * anyway; the entry names the new ones only. */
                char *d = strdup(sessions_room_report_dir(room, NULL));
                if (!d)
                        return -ENOMEM;
                free(s->checkpoint_report_dir);
                s->checkpoint_report_dir = d;
                s->checkpoint_dirs = strv_free(s->checkpoint_dirs);
                changed = true;
        }
        for (size_t i = 0; i < n_units; i++) {
                size_t n = strv_length(s->checkpoint_dirs);
                bool found = false;
                for (size_t k = 0; k < n && !found; k++)
                        found = streq(s->checkpoint_dirs[k], units[i].dir);
                if (found)
                        continue;
                char **l = reallocarray(s->checkpoint_dirs, n + 2, sizeof(char *));
                if (!l)
                        return -ENOMEM;
                s->checkpoint_dirs = l;
                l[n] = strdup(units[i].dir);
                l[n + 1] = NULL;
                if (!l[n])
                        return -ENOMEM;
                changed = true;
        }
        return changed ? registry_write(s) : 0;
}

void session_checkpoint_done(Session *s) {
        SessionsRoom *room = s->room;

        s->checkpoint_timer = sd_event_source_disable_unref(s->checkpoint_timer);
        if (!s->checkpoint_report_dir || room->checkpoint_dir_fd < 0)
                return;
        if (unlinkat(room->checkpoint_dir_fd, s->id_string, 0) < 0 && errno != ENOENT)
                log_warning_errno(errno, "Failed to remove %s/%s/%s: %m", room->deps.state_dir,
                                  CHECKPOINT_REGISTRY_DIR, s->id_string);
}

void session_checkpoint_discard(Session *s) {
        int report_dir_fd;
        const char *report_dir = sessions_room_report_dir(s->room, &report_dir_fd);

        if (s->checkpoint_report_dir && report_dir_fd >= 0 && streq(s->checkpoint_report_dir, report_dir))
                for (char **d = s->checkpoint_dirs; d && *d; d++) {
                        _cleanup_close_ int dfd =
                                openat(report_dir_fd, *d, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                        if (dfd < 0)
                                continue;
                        for (ReportFormat f = 0; f < _REPORT_FORMAT_MAX; f++)
                                (void) unlinkat(dfd, report_format_info(f)->file, 0);
                        for (const char *const *x = report_extra_files; *x; x++)
                                (void) unlinkat(dfd, *x, 0);
                        (void) unlinkat(report_dir_fd, *d, AT_REMOVEDIR);
                }
        session_checkpoint_done(s);
}

/* ---- writing ---- */

/* A checkpoint's writes are done: counted, and logged when how it went
 * changed. The session may have ended meanwhile (its final report, queued
 * behind, replaces the checkpoint anyway). */
static void on_checkpoint_written(SessionsRoom *room, ReportBatch *b, void *userdata) {
        _cleanup_free_ char *id = userdata;
        uint64_t usec = now_usec(CLOCK_MONOTONIC) - b->job.submitted_usec;
        size_t written = 0;
        Session *s = NULL;
        int error = 0;

        s = room->deps.session_find(room->deps.userdata, id);
        for (size_t i = 0; i < b->n_writes; i++) {
                ReportWrite *w = b->writes[i];
                if (w->error >= 0) {
                        written++;
                        continue;
                }
                if (error == 0 && (!s || w->error != s->checkpoint_error))
                        log_warning_errno(w->error, "Failed to write the checkpoint %s of session %s: %m",
                                          strna(w->full), id);
                if (error == 0)
                        error = w->error;
        }
        room->checkpoints.usec_last = usec;
        room->checkpoints.usec_max = MAX(room->checkpoints.usec_max, usec);
        if (error < 0)
                room->checkpoints.failed++;
        else
                room->checkpoints.written++;
        log_debug("Session %s: checkpoint of %zu reports, %zu written in %.1f ms.", id, b->n_writes, written,
                  (double) usec / 1000.0);
        if (!s)
                return;
        s->checkpoint_writing = false;
        if (error >= 0 && s->checkpoint_error < 0)
                log_info("Session %s: checkpoints are written again.", s->id_string);
        s->checkpoint_error = error;
}

int session_checkpoint(Session *s) {
        SessionsRoom *room = s->room;
        _cleanup_(sampler_session_stats_done) SamplerSessionStats st = {};
        _cleanup_(report_batch_freep) ReportBatch *b = NULL;
        SessionReportUnit *units = NULL;
        size_t n_units = 0;
        ReportSummaryInfo info;
        TemplateVars vars;
        char node_buf[256], *id;
        int r;

        if (s->state != SESSION_RUNNING)
                return 0;
        if (s->checkpoint_writing) {
                /* The last one is still being written (a slow disk): this
                 * one is skipped, the next comes an interval later. */
                log_debug("Session %s: the last checkpoint is still being written, skipping one.",
                          s->id_string);
                return 0;
        }
        /* What the drains (every second) brought: a checkpoint does not
         * drain, nor resolve frames late (that replaces the session's
         * data); the final report does both. */
        (void) sampler_session_stats(room->sampler, s->slot, &st);
        (void) sampler_session_stats_threads(room->sampler, s->slot, &st);
        /* The drains read an idle cgroup's CPU time only every few seconds. */
        uint64_t u;
        if (!s->cpu_usage_final && cg_read_cpu_usage_usec(s->cgroup_fd, &u) >= 0)
                s->cpu_usage_last = u;
        session_report_info(s, &st, NULL, "cpu.stat", now_usec(CLOCK_REALTIME), &info);
        session_report_vars(s, node_buf, &vars);

        id = strdup(s->id_string);
        if (!id)
                return log_oom();
        r = report_batch_new(room, on_checkpoint_written, id, &b);
        if (r < 0) {
                free(id);
                return log_oom();
        }
        r = session_report_units(s, &vars, &units, &n_units);
        if (r >= 0)
                r = registry_update(s, units, n_units);
        /* The session goes on sampling into its data while the worker
         * writes: each write gets a copy of its own. */
        for (size_t i = 0; r >= 0 && i < n_units; i++) {
                ProfileData *d;
                ReportWrite *w;

                if (units[i].owned) {
                        d = units[i].data;
                        units[i].owned = false;
                } else {
                        _cleanup_free_ uint32_t *all =
                                calloc(MAX(s->data->n_processes, (size_t) 1), sizeof(uint32_t));
                        if (!all) {
                                r = -ENOMEM;
                                break;
                        }
                        for (size_t k = 0; k < s->data->n_processes; k++)
                                all[k] = (uint32_t) k;
                        d = profile_data_of_processes(s->data, all, s->data->n_processes);
                        if (!d) {
                                r = -ENOMEM;
                                break;
                        }
                }
                units[i].data = NULL;
                r = report_write_new(units[i].dir, s->profile->formats | s->extra_formats, d, &info, &w);
                if (r >= 0)
                        r = report_batch_add(b, w);
        }
        session_report_units_free(units, n_units);
        if (r < 0) {
                if (r != s->checkpoint_error)
                        log_warning_errno(r, "Failed to write a checkpoint of session %s: %m", s->id_string);
                s->checkpoint_error = r;
                room->checkpoints.failed++;
                return r;
        }
        s->checkpoint_writing = true;
        report_batch_submit(TAKE_PTR(b));
        return 0;
}

static int on_checkpoint_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        Session *s = userdata;
        int r;

        (void) session_checkpoint(s);
        r = sd_event_source_set_time_relative(source, s->profile->checkpoint_interval_usec);
        if (r >= 0)
                r = sd_event_source_set_enabled(source, SD_EVENT_ON);
        if (r < 0)
                /* Not fatal: the session goes on, its report is written at its end. */
                log_error_errno(r,
                                "Session %s: failed to re-arm the checkpoint timer, no more checkpoints: %m",
                                s->id_string);
        return 0;
}

int session_checkpoint_arm(Session *s) {
        SessionsRoom *room = s->room;
        uint64_t interval = s->profile->checkpoint_interval_usec;
        int r;

        /* A session that ends before its first checkpoint never writes one. */
        if (interval == 0 || (s->duration_usec > 0 && s->duration_usec <= interval) ||
            room->checkpoint_dir_fd < 0)
                return 0;
        r = sd_event_add_time_relative(room->deps.event, &s->checkpoint_timer, CLOCK_MONOTONIC, interval,
                                       100 * USEC_PER_MSEC, on_checkpoint_timer, s);
        if (r < 0)
                return log_warning_errno(
                        r, "Session %s: failed to set up the checkpoint timer, no checkpoints: %m",
                        s->id_string);
        (void) sd_event_source_set_description(s->checkpoint_timer, "session-checkpoint");
        return 0;
}

/* ---- recovery at start ---- */

/* The report directory 'dir' below 'root': no symlink, no way out. */
static int open_beneath(int root, const char *dir) {
        struct open_how how = {
                .flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
        };
        int fd = (int) syscall(SYS_openat2, root, dir, &how, sizeof(how));
        return fd < 0 ? negative_errno() : fd;
}

/* Removes the writers' temporary files (".#NAME.XXXXXX") of a crashed run. */
static unsigned remove_temporary_files(int dfd) {
        _cleanup_close_ int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        unsigned n = 0;
        DIR *d;

        if (fd < 0 || !(d = fdopendir(fd)))
                return 0;
        TAKE_FD(fd);
        for (struct dirent *de; (de = readdir(d));)
                if (strncmp(de->d_name, ".#", 2) == 0 && de->d_type == DT_REG &&
                    unlinkat(dfd, de->d_name, 0) >= 0)
                        n++;
        closedir(d);
        return n;
}

static const char *interrupted_reason(const CheckpointEntry *entry) {
        char now[SD_ID128_STRING_MAX] = "";
        sd_id128_t b;

        if (sd_id128_get_boot(&b) >= 0)
                sd_id128_to_string(b, now);
        if (*entry->boot_id && *now && !streq(entry->boot_id, now))
                return "the node restarted while the session ran";
        return "cgprofd stopped without ending the session (killed or crashed)";
}

/* Marks one report directory of a registry entry; true when it was marked. */
static bool recover_dir(SessionsRoom *room, int root, const char *root_path, const char *dir,
                        const CheckpointEntry *entry, const char *session) {
        _cleanup_close_ int dfd = -EBADF;
        _cleanup_free_ char *text = NULL, *full = NULL;
        _cleanup_(checkpoint_marked_done) CheckpointMarked marked = {};
        const char *reason = interrupted_reason(entry);
        unsigned tmp;
        size_t size;
        int r;

        if (asprintf(&full, "%s/%s", root_path, dir) < 0)
                return log_oom(), false;
        dfd = open_beneath(root, dir);
        if (dfd < 0) {
                if (dfd != -ENOENT)
                        log_warning_errno(dfd, "Failed to open the checkpointed report %s, ignoring: %m",
                                          full);
                return false;
        }
        tmp = remove_temporary_files(dfd);
        if (tmp > 0)
                log_info("Removed %u temporary files of an interrupted write in %s.", tmp, full);

        r = read_regular_file_max(dfd, "summary.json", SUMMARY_MAX, &text, &size);
        if (r == -ENOENT) {
                /* No checkpoint got written there (or a failed write took it): tidy up. */
                (void) unlinkat(root, dir, AT_REMOVEDIR);
                return false;
        }
        if (r < 0) {
                log_warning_errno(r, "Failed to read %s/summary.json, ignoring: %m", full);
                return false;
        }
        r = checkpoint_summary_mark_interrupted(text, size, reason, &marked);
        if (r == -ENOMEM)
                return log_oom(), false;
        if (r == 0)
                return false; /* a final report (written before the crash), or already marked */
        r = write_string_file_atomic_at(dfd, "summary.json", marked.text);
        if (r < 0) {
                log_warning_errno(r, "Failed to mark the interrupted report %s: %m", full);
                return false;
        }

        journal_report_interrupted(
                &(JournalReportFields){
                        .session = session,
                        .report = full,
                        .reason = reason,
                        .cgroup = marked.cgroup,
                        .checkpoint = marked.end ?: "unknown",
                },
                "Found the interrupted report %s of session %s: %s; it holds the %" PRIu64
                " samples up to its last checkpoint (%s), marked \"interrupted\": true.",
                full, session, reason, marked.samples, marked.end ?: "unknown");
        return true;
}

static void recover_entry(SessionsRoom *room, const char *name) {
        _cleanup_free_ char *text = NULL;
        _cleanup_(checkpoint_entry_done) CheckpointEntry entry = {};
        _cleanup_close_ int root = -EBADF;
        size_t size;
        int r;

        r = read_regular_file_max(room->checkpoint_dir_fd, name, REGISTRY_ENTRY_MAX, &text, &size);
        if (r < 0)
                log_warning_errno(r, "Failed to read the checkpoint entry %s/%s/%s, removing it: %m",
                                  room->deps.state_dir, CHECKPOINT_REGISTRY_DIR, name);
        else if ((r = checkpoint_entry_parse(text, size, &entry)) == -ENOMEM)
                log_oom();
        else if (r < 0)
                log_warning("The checkpoint entry %s/%s/%s is malformed, removing it.", room->deps.state_dir,
                            CHECKPOINT_REGISTRY_DIR, name);
        else if ((root = open(entry.report_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
                log_warning_errno(errno, "Failed to open %s for the checkpoints of session %s: %m",
                                  entry.report_dir, name);
        else
                for (char **d = entry.dirs; *d; d++)
                        if (recover_dir(room, root, entry.report_dir, *d, &entry, name))
                                room->checkpoints.interrupted++;
        if (unlinkat(room->checkpoint_dir_fd, name, 0) < 0)
                log_warning_errno(errno, "Failed to remove %s/%s/%s: %m", room->deps.state_dir,
                                  CHECKPOINT_REGISTRY_DIR, name);
}

void manager_checkpoint_setup(SessionsRoom *room) {
        _cleanup_free_ char *path = NULL;
        _cleanup_close_ int fd = -EBADF;
        DIR *d;
        int r;

        if (asprintf(&path, "%s/%s", room->deps.state_dir, CHECKPOINT_REGISTRY_DIR) < 0)
                return (void) log_oom();
        r = mkdir_p(path, 0700);
        if (r >= 0 && (room->checkpoint_dir_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
                r = negative_errno();
        if (r < 0)
                return (void) log_error_errno(r, "Failed to open %s, sessions will write no checkpoints: %m",
                                              path);

        fd = openat(room->checkpoint_dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0 || !(d = fdopendir(fd)))
                return (void) log_error_errno(errno, "Failed to list %s: %m", path);
        TAKE_FD(fd);
        for (struct dirent *de; (de = readdir(d));) {
                if (de->d_name[0] == '.') {
                        /* A registry write the crash cut short. */
                        if (strncmp(de->d_name, ".#", 2) == 0)
                                (void) unlinkat(room->checkpoint_dir_fd, de->d_name, 0);
                        continue;
                }
                recover_entry(room, de->d_name);
        }
        closedir(d);
        if (room->checkpoints.interrupted > 0)
                log_notice("Marked %" PRIu64 " reports of sessions the last run never ended as interrupted.",
                           room->checkpoints.interrupted);
}
