/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cgprofctl record: runs a command in a new cgroup below RECORD_SLICE,
 * profiles it until it exits (or for --duration), then prints the report
 * directory and the top functions. SIGINT/SIGTERM/SIGHUP are passed on to
 * the command. */
#include <cjson/cJSON.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>
#include <systemd/sd-id128.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bus-api.h"
#include "cgroup-util.h"
#include "config.h"
#include "ctl-bus.h"
#include "ctl-output.h"
#include "ctl.h"
#include "fileio.h"
#include "log.h"

/* Tries to make a record's cgroup while other records remove the slice. */
#define RECORD_SLICE_ATTEMPTS 8U
/* How long to retry StartSession while the agent has not yet seen the
 * cgroup we just created (its inotify event may still be queued). */
#define RECORD_START_RETRY_USEC (5 * USEC_PER_SEC)
#define RECORD_START_RETRY_STEP_USEC (20 * USEC_PER_MSEC)
#define RECORD_TOP_FUNCTIONS 10

/* The profile --frequency asks for, from the agent's config file (the API
 * has no ad-hoc frequency). Returns 0 or an exit status. */
static int profile_for_frequency(const Ctl *ctl, char **ret_profile) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_free_ char *path = NULL, *err = NULL;
        int r;

        r = sd_bus_get_property_string(ctl->bus, ctl_destination(ctl), CGPROF_BUS_PATH, CGPROF_BUS_INTERFACE,
                                       "ConfigPath", &error, &path);
        if (r < 0)
                return call_failed(&error, r, "Failed to get the agent's config path");
        r = config_load_file(path, &c, &err);
        if (r < 0) {
                log_error("--frequency: cannot read the agent's profiles: %s", err ?: strerror(-r));
                return EXIT_FAILURE;
        }
        for (size_t i = 0; i < c->n_profiles; i++) {
                const Profile *p = c->profiles + i;
                if (ctl->profile && !streq(p->name, ctl->profile))
                        continue;
                if (p->frequency == ctl->frequency) {
                        *ret_profile = strdup(p->name);
                        return *ret_profile ? 0 : (log_oom(), EXIT_FAILURE);
                }
                if (ctl->profile) {
                        log_error("--frequency %" PRIu64 ": profile \"%s\" samples at %" PRIu64 " Hz.",
                                  ctl->frequency, p->name, p->frequency);
                        return EXIT_USAGE;
                }
        }
        if (ctl->profile) {
                log_error("--profile: no profile \"%s\" in %s.", ctl->profile, path);
                return EXIT_USAGE;
        }

        _cleanup_free_ char *list = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&list, &size);
        if (!f)
                return log_oom(), EXIT_FAILURE;
        for (size_t i = 0; i < c->n_profiles; i++)
                fprintf(f, "%s%s %" PRIu64 " Hz", i ? ", " : "", c->profiles[i].name,
                        c->profiles[i].frequency);
        fclose(f);
        log_error("--frequency %" PRIu64 ": no profile of the agent (%s) samples at that frequency "
                  "(it has: %s). Add one to the config, or choose one with --profile.",
                  ctl->frequency, path, strempty(list));
        return EXIT_USAGE;
}

typedef struct Record {
        const Ctl *ctl;
        pid_t pid;
        siginfo_t status;
        const char *session_id;
        const char *cgroup;
        char *report_dir;
        bool stopped;
        int stop_result; /* exit status of record_stop() */
} Record;

static void record_done(Record *rec) {
        free(rec->report_dir);
}

/* The report a session ended by the agent itself wrote (it stopped, or the
 * session failed): found by ListReports. Returns 0 or an exit status. */
static int record_find_report(Record *rec) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_free_ char *filter = NULL;
        ReportInfo ri;
        int r;

        if (asprintf(&filter, "cgroup:%s", rec->cgroup) < 0)
                return log_oom(), EXIT_FAILURE;
        r = ctl_call(rec->ctl, "ListReports", &error, &reply, "st", filter, (uint64_t) 0);
        if (r < 0)
                return call_failed(&error, r, "Failed to list the reports");
        r = report_list_enter(reply);
        while (r >= 0 && (r = report_list_read(reply, &ri)) > 0)
                if (streq(ri.session, rec->session_id)) {
                        rec->report_dir = strdup(ri.dir);
                        return rec->report_dir ? 0 : (log_oom(), EXIT_FAILURE);
                }
        if (r < 0)
                return log_error_errno(r, "Failed to parse the reports: %m"), EXIT_FAILURE;
        log_error("The agent ended session %s and wrote no report.", rec->session_id);
        return EXIT_NOT_FOUND;
}

/* Returns 0 or an exit status. Sets rec->report_dir. */
static int record_stop(Record *rec) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *dir;
        int r;

        if (rec->stopped)
                return rec->stop_result;
        rec->stopped = true;
        r = ctl_call_stop(rec->ctl, "StopSession", &error, &reply, "s", rec->session_id);
        if (r < 0 && sd_bus_error_has_name(&error, CGPROF_ERROR_NOT_FOUND)) {
                log_info("The agent ended session %s already.", rec->session_id);
                return (rec->stop_result = record_find_report(rec));
        }
        if (r < 0)
                return (rec->stop_result = call_failed(&error, r, "Failed to stop the session"));
        r = sd_bus_message_read(reply, "s", &dir);
        if (r < 0)
                return (rec->stop_result = reply_parse_failed(r));
        rec->report_dir = strdup(dir);
        if (!rec->report_dir)
                return (rec->stop_result = (log_oom(), EXIT_FAILURE));
        return 0;
}

static int on_record_child(sd_event_source *s, const siginfo_t *si, void *userdata) {
        Record *rec = userdata;
        rec->status = *si;
        /* Detach first: an attached bus is closed when its loop exits. */
        (void) sd_bus_detach_event(rec->ctl->bus);
        return sd_event_exit(sd_event_source_get_event(s), 0);
}

static int on_record_signal(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Record *rec = userdata;
        /* A terminal's ^C (SI_KERNEL) reaches the child's process group
         * already; only pass on what was sent to us alone (kill, timeout). */
        if (si->ssi_code != SI_KERNEL)
                (void) kill(rec->pid, (int) si->ssi_signo);
        return 0;
}

static int on_record_duration(sd_event_source *s, uint64_t usec, void *userdata) {
        Record *rec = userdata;
        if (record_stop(rec) == 0)
                log_info("Profiling stopped after the requested duration; waiting for the command to exit.");
        return 0;
}

static _Noreturn void record_child(int cgroup_fd, int go_fd, int status_fd, const sigset_t *mask,
                                   char **command) {
        char c;
        int r;

        (void) sigprocmask(SIG_SETMASK, mask, NULL);
        r = cg_attach_fd(cgroup_fd, 0);
        (void) write(status_fd, &r, sizeof(r));
        if (r < 0)
                _exit(EXIT_FAILURE);
        /* Until the session samples the cgroup; EOF: the parent gave up. */
        if (read(go_fd, &c, 1) != 1)
                _exit(EXIT_FAILURE);
        execvp(command[0], command);
        r = -errno;
        (void) write(status_fd, &r, sizeof(r));
        _exit(r == -ENOENT ? 127 : 126);
}

/* The first RECORD_TOP_FUNCTIONS functions with self samples (the list
 * also holds callers that only have total samples). */
static bool top_function_wanted(const cJSON *f, int *n) {
        if (*n >= RECORD_TOP_FUNCTIONS || !(json_number(f, "self") > 0))
                return false;
        (*n)++;
        return true;
}

static void print_top_functions(const char *dir, cJSON *json_out) {
        _cleanup_free_ char *path = NULL, *text = NULL;
        cJSON *j, *top, *f, *samples;
        int n = 0;

        if (isempty_str(dir) || asprintf(&path, "%s/summary.json", dir) < 0)
                return;
        if (read_full_file(path, &text, NULL) < 0) {
                if (!json_out)
                        printf("(No summary.json: the profile's formats do not include json.)\n");
                return;
        }
        j = cJSON_Parse(text);
        if (!j)
                return;
        top = cJSON_GetObjectItemCaseSensitive(j, "topFunctions");
        samples = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "samples"), "total");
        if (json_out) {
                cJSON_AddNumberToObject(json_out, "samples", cJSON_GetNumberValue(samples));
                cJSON *a = cJSON_AddArrayToObject(json_out, "topFunctions");
                cJSON_ArrayForEach (f, top) {
                        if (!top_function_wanted(f, &n))
                                continue;
                        cJSON *o = cJSON_CreateObject();
                        cJSON_AddStringToObject(o, "name", strempty(json_string(f, "name")));
                        cJSON_AddNumberToObject(o, "self", json_number(f, "self"));
                        cJSON_AddNumberToObject(o, "selfPercent", json_number(f, "selfPercent"));
                        cJSON_AddItemToArray(a, o);
                }
        } else {
                if (cJSON_IsNumber(samples))
                        printf("Samples: %.0f\n", samples->valuedouble);
                printf("\nTop functions (self):\n");
                cJSON_ArrayForEach (f, top) {
                        if (!top_function_wanted(f, &n))
                                continue;
                        printf("  %6.2f%%  %6.0f  %s\n", json_number(f, "selfPercent"),
                               json_number(f, "self"), strna(json_string(f, "name")));
                }
                if (n == 0)
                        printf("  (no samples)\n");
        }
        cJSON_Delete(j);
}

/* Makes the cgroup rel below the root (open as root_fd). Returns 0 or an
 * exit status. */
static int record_cgroup_create(int root_fd, const char *root, const char *rel) {
        /* The last record to end removes the slice: another one may do so
         * between our two mkdir()s (ENOENT), then we make it again. */
        for (unsigned attempt = 0;; attempt++) {
                if (mkdirat(root_fd, RECORD_SLICE, 0755) < 0 && errno != EEXIST)
                        return log_error_errno(errno, "Failed to create the cgroup %s/%s: %m", root,
                                               RECORD_SLICE),
                               EXIT_FAILURE;
                if (mkdirat(root_fd, rel, 0755) >= 0)
                        return 0;
                if (errno != ENOENT || attempt >= RECORD_SLICE_ATTEMPTS)
                        return log_error_errno(errno, "Failed to create the cgroup %s/%s: %m", root, rel),
                               EXIT_FAILURE;
        }
}

/* Removes the cgroup rel, and the slice if this was its last record. */
static void record_cgroup_remove(int root_fd, const char *root, const char *rel) {
        if (unlinkat(root_fd, rel, AT_REMOVEDIR) < 0)
                log_warning_errno(errno, "Failed to remove the cgroup %s/%s%s: %m", root, rel,
                                  errno == EBUSY ? " (processes the command left behind run in it)" : "");
        /* EBUSY: other records run. */
        else if (unlinkat(root_fd, RECORD_SLICE, AT_REMOVEDIR) < 0 && errno != EBUSY && errno != ENOENT)
                log_debug_errno(errno, "Failed to remove the cgroup %s/%s, ignoring: %m", root,
                                RECORD_SLICE);
}

/* Starts a session of target until stopped: we stop it when the command
 * exits, or at --duration with our own timer. Returns 0 or an exit status. */
static int record_start_session(const Ctl *c, const char *target, const char *profile, char **ret_id) {
        /* The agent learns of the new cgroup through inotify, maybe after
         * our call: retry NotFound for a bounded time (not a poll of state
         * we wait on, a race with one event we know is coming). */
        for (uint64_t waited = 0;; waited += RECORD_START_RETRY_STEP_USEC) {
                _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
                _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
                const char *s;
                int r;

                r = ctl_call(c, "StartSession", &error, &reply, "sst", target, strempty(profile),
                             SESSION_UNTIL_STOPPED_USEC);
                if (r < 0 && sd_bus_error_has_name(&error, CGPROF_ERROR_NOT_FOUND) &&
                    waited < RECORD_START_RETRY_USEC) {
                        (void) usleep(RECORD_START_RETRY_STEP_USEC);
                        continue;
                }
                if (r < 0)
                        return call_failed(&error, r, "Failed to start the session");
                if (sd_bus_message_read(reply, "s", &s) < 0 || !(*ret_id = strdup(s))) {
                        log_error("Failed to parse the reply.");
                        return EXIT_FAILURE;
                }
                return 0;
        }
}

/* What the command did, where its report is, and its top functions. */
static int record_print(const Ctl *c, const Record *rec, const char *command) {
        bool signalled = rec->status.si_code == CLD_KILLED || rec->status.si_code == CLD_DUMPED;

        if (c->json) {
                cJSON *o = cJSON_CreateObject();
                if (o) {
                        cJSON_AddStringToObject(o, "session", rec->session_id);
                        cJSON_AddStringToObject(o, "cgroup", rec->cgroup);
                        cJSON_AddStringToObject(o, "reportDir", strempty(rec->report_dir));
                        if (signalled)
                                cJSON_AddStringToObject(o, "signal", strsignal(rec->status.si_status));
                        else
                                cJSON_AddNumberToObject(o, "exitStatus", rec->status.si_status);
                        print_top_functions(rec->report_dir, o);
                }
                return print_json(o);
        }
        if (signalled)
                printf("\n%s was killed by signal %s.\n", command, strsignal(rec->status.si_status));
        else if (rec->status.si_status != 0)
                printf("\n%s exited with status %d.\n", command, rec->status.si_status);
        printf("\nSession %s on cgroup %s\n", rec->session_id, rec->cgroup);
        printf("Report: %s\n", isempty_str(rec->report_dir) ? "(none written)" : rec->report_dir);
        print_top_functions(rec->report_dir, NULL);
        return EXIT_SUCCESS;
}

/* The transient cgroup, below the root: cgprof-record.slice/record-<pid>-<random>, and the target that
 * names it. */
static int record_cgroup_name(char **ret_rel, char **ret_target) {
        _cleanup_free_ char *rel = NULL, *target = NULL;
        sd_id128_t rnd;

        (void) sd_id128_randomize(&rnd);
        if (asprintf(&rel, RECORD_SLICE "/record-%d-%08" PRIx32, (int) getpid(), (uint32_t) rnd.qwords[0]) <
                    0 ||
            asprintf(&target, "cgroup:%s", rel) < 0)
                return -ENOMEM;
        *ret_rel = TAKE_PTR(rel);
        *ret_target = TAKE_PTR(target);
        return 0;
}

/* Signals are taken by the event loop from here on; the child gets the old mask back before exec. */
static int record_block_signals(sigset_t *ret_old) {
        sigset_t mask;

        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGHUP);
        return sigprocmask(SIG_BLOCK, &mask, ret_old);
}

/* Go (closing *go_fd). EOF on the status pipe: exec succeeded. */
static int record_release(int *go_fd, int st_fd, const char *command) {
        int child_error = 0;

        if (write(*go_fd, "x", 1) != 1)
                return log_error_errno(errno, "Failed to release the command: %m");
        *go_fd = safe_close(*go_fd);
        if (read(st_fd, &child_error, sizeof(child_error)) == sizeof(child_error))
                return log_error_errno(child_error, "Failed to execute %s: %m", command);
        return 0;
}

/* Runs the loop until the command exits (or a signal, or --duration, stops the session); *event is
 * the caller's, freed after the bus lets go of it. */
static int record_loop(Ctl *c, Record *rec, sd_event **event) {
        int r;

        if ((r = sd_event_new(event)) < 0 ||
            (r = sd_event_add_child(*event, NULL, rec->pid, WEXITED, on_record_child, rec)) < 0 ||
            (r = sd_event_add_signal(*event, NULL, SIGINT, on_record_signal, rec)) < 0 ||
            (r = sd_event_add_signal(*event, NULL, SIGTERM, on_record_signal, rec)) < 0 ||
            (r = sd_event_add_signal(*event, NULL, SIGHUP, on_record_signal, rec)) < 0 ||
            (c->duration_usec > 0 &&
             (r = sd_event_add_time_relative(*event, NULL, CLOCK_MONOTONIC, c->duration_usec, 0,
                                             on_record_duration, rec)) < 0) ||
            (r = sd_bus_attach_event(c->bus, *event, SD_EVENT_PRIORITY_NORMAL)) < 0)
                return log_error_errno(r, "Failed to set up the event loop: %m");
        r = sd_event_loop(*event);
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m");
        return 0;
}

int verb_record(Ctl *c, char **command) {
        _cleanup_(sd_event_unrefp) sd_event *event = NULL;
        _cleanup_free_ char *root = NULL, *rel = NULL, *target = NULL, *profile = NULL, *id = NULL;
        _cleanup_close_ int root_fd = -EBADF, cg_fd = -EBADF;
        int go[2] = { -EBADF, -EBADF }, st[2] = { -EBADF, -EBADF };
        _cleanup_(record_done) Record rec = { .ctl = c, .pid = -1 };
        sigset_t old_mask;
        int r, ret = EXIT_FAILURE, child_error = 0;
        ssize_t n;

        if (c->options & OPT_FREQUENCY) {
                r = profile_for_frequency(c, &profile);
                if (r != 0)
                        return r;
        } else if (c->profile && !(profile = strdup(c->profile)))
                return log_oom(), EXIT_FAILURE;

        /* The transient cgroup: <root>/cgprof-record.slice/record-<pid>-<random>. */
        r = cg_find_unified_root(NULL, &root);
        if (r < 0)
                return log_error_errno(r, "record needs a cgroup v2 hierarchy: %m"), EXIT_FAILURE;
        root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return log_error_errno(errno, "Failed to open %s: %m", root), EXIT_FAILURE;
        if (record_cgroup_name(&rel, &target) < 0)
                return log_oom(), EXIT_FAILURE;
        r = record_cgroup_create(root_fd, root, rel);
        if (r != 0)
                return r;
        cg_fd = openat(root_fd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cg_fd < 0) {
                log_error_errno(errno, "Failed to open the cgroup %s/%s: %m", root, rel);
                goto remove_cgroup;
        }

        if (record_block_signals(&old_mask) < 0 || pipe2(go, O_CLOEXEC) < 0 || pipe2(st, O_CLOEXEC) < 0) {
                log_error_errno(errno, "Failed to set up the command: %m");
                goto remove_cgroup;
        }
        fflush(NULL);
        rec.pid = fork();
        if (rec.pid < 0) {
                log_error_errno(errno, "Failed to fork: %m");
                goto remove_cgroup;
        }
        if (rec.pid == 0) {
                go[1] = safe_close(go[1]);
                st[0] = safe_close(st[0]);
                record_child(cg_fd, go[0], st[1], &old_mask, command);
        }
        go[0] = safe_close(go[0]);
        st[1] = safe_close(st[1]);

        n = read(st[0], &child_error, sizeof(child_error));
        if (n != sizeof(child_error) || child_error < 0) {
                log_error_errno(n == sizeof(child_error) ? child_error : EIO,
                                "Failed to move the command into the cgroup %s: %m", rel);
                goto reap;
        }

        r = record_start_session(c, target, profile, &id);
        if (r != 0) {
                ret = r;
                goto reap;
        }
        rec.session_id = id;
        rec.cgroup = rel;

        if (record_release(&go[1], st[0], command[0]) < 0 || record_loop(c, &rec, &event) < 0)
                goto stop;
        rec.pid = -1; /* reaped by the child source */
        ret = EXIT_SUCCESS;

stop:
        (void) sd_bus_detach_event(c->bus);
        r = record_stop(&rec);
        if (ret == EXIT_SUCCESS)
                ret = r;
reap:
        go[1] = safe_close(go[1]);
        if (rec.pid > 0) {
                /* Not released (EOF ends it), or failed: wait for it. */
                if (waitid(P_PID, rec.pid, &rec.status, WEXITED) < 0)
                        log_warning_errno(errno, "Failed to wait for the command, ignoring: %m");
        }
remove_cgroup:
        safe_close(go[0]), safe_close(go[1]), safe_close(st[0]), safe_close(st[1]);
        record_cgroup_remove(root_fd, root, rel);
        if (ret != EXIT_SUCCESS)
                return ret;
        return record_print(c, &rec, command[0]);
}
