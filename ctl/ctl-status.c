/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cgprofctl status, targets, check: the agent's state and configuration. */
#include <cjson/cJSON.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "ctl-bus.h"
#include "ctl-output.h"
#include "ctl.h"
#include "log.h"

typedef struct StatusField {
        const char *key, *label;
} StatusField;

/* GetStatus's members that print as "label: value", in order. */
static const StatusField status_fields[] = {
        { "version", "Version" },
        { "pid", "PID" },
        { "node", "Node" },
        { "config", "Config" },
        { "reportDir", "Reports" },
        { "cgroupRoot", "cgroup root" },
        { "attachMode", "Attach mode" },
        { "journal", "Journal" },
        { "offCpu", "Off-CPU" },
        { "uptimeSec", "Uptime (s)" },
        { "cgroupsWatched", "cgroups watched" },
        { "sessionsStarted", "Sessions started" },
        { "sessionsEnded", "Sessions ended" },
        { "sessionsFailed", "Sessions failed" },
        { "sessionsDiscarded", "Sessions discarded" },
        { "sessionsWaitingForFds", "Waiting for fds" },
};

/* GetStatus's timing objects: count, mean and longest. */
static const StatusField status_timings[] = {
        { "drains", "Drains" },
        { "reportWrites", "Report writes" },
};

static void print_status(const cJSON *j) {
        const cJSON *o, *s;

        for (size_t i = 0; i < ELEMENTSOF(status_fields); i++)
                print_kv(j, status_fields[i].key, status_fields[i].label);
        o = cJSON_GetObjectItemCaseSensitive(j, "eventLoop");
        if (cJSON_IsObject(o))
                printf("%18s: longest dispatch %.1f ms (%.1f ms in the last %.0f s), mean %.3f ms, %.0f "
                       "over "
                       "50 ms\n",
                       "Event loop", json_number(o, "dispatchMaxMsec"),
                       json_number(o, "dispatchMaxRecentMsec"), json_number(o, "recentSec"),
                       json_number(o, "dispatchMeanMsec"), json_number(o, "dispatchesOver50ms"));
        for (size_t i = 0; i < ELEMENTSOF(status_timings); i++) {
                o = cJSON_GetObjectItemCaseSensitive(j, status_timings[i].key);
                if (cJSON_IsObject(o))
                        printf("%18s: %.0f, mean %.2f ms, longest %.1f ms\n", status_timings[i].label,
                               json_number(o, "count"), json_number(o, "meanMsec"),
                               json_number(o, "maxMsec"));
        }
        o = cJSON_GetObjectItemCaseSensitive(j, "reportQueue");
        if (cJSON_IsObject(o))
                printf("%18s: %.0f directories being written (at most %.0f jobs queued, longest wait %.1f "
                       "ms), "
                       "%.0f written on the loop\n",
                       "Report queue", json_number(o, "directories"), json_number(o, "jobsMax"),
                       json_number(o, "waitMaxMsec"), json_number(o, "writtenOnLoop"));
        o = cJSON_GetObjectItemCaseSensitive(j, "reportRetries");
        if (cJSON_IsObject(o))
                printf("%18s: %.0f waiting, %.0f written late, %.0f dropped\n", "Report retries",
                       json_number(o, "pending"), json_number(o, "written"), json_number(o, "dropped"));
        o = cJSON_GetObjectItemCaseSensitive(j, "checkpoints");
        if (cJSON_IsObject(o))
                printf("%18s: %.0f written (longest %.1f ms), %.0f failed, %.0f interrupted found at "
                       "start\n",
                       "Checkpoints", json_number(o, "written"), json_number(o, "maxMsec"),
                       json_number(o, "failed"), json_number(o, "interruptedFound"));
        o = cJSON_GetObjectItemCaseSensitive(j, "debuginfod");
        if (cJSON_IsObject(o))
                printf("%18s: %.0f fetched, %.0f from cache, %.0f not found, %.0f failed, %.0f dropped, "
                       "%.0f pending\n",
                       "debuginfod", json_number(o, "fetched"), json_number(o, "fromCache"),
                       json_number(o, "notFound"), json_number(o, "failed"), json_number(o, "dropped"),
                       json_number(o, "pending"));
        o = cJSON_GetObjectItemCaseSensitive(j, "machineConfig");
        if (cJSON_IsObject(o)) {
                const cJSON *x;
                int applied = 0, n = 0;

                cJSON_ArrayForEach (x, cJSON_GetObjectItemCaseSensitive(o, "sysctls")) {
                        n++;
                        if (streq_ptr(json_string(x, "state"), "applied"))
                                applied++;
                }
                printf("%18s: %d of %d sysctls applied; labels from %s {%s}%s%s\n", "Machine config",
                       applied, n, strna(json_string(o, "labelsSource")), strempty(json_string(o, "labels")),
                       json_string(o, "note") ? ": " : "", strempty(json_string(o, "note")));
        }
        o = cJSON_GetObjectItemCaseSensitive(j, "sessions");
        printf("%18s: %d\n", "Active sessions", cJSON_GetArraySize(o));
        cJSON_ArrayForEach (s, o)
                printf("%18s  %s %s %s (%.0f samples)\n", "", json_string(s, "id"), json_string(s, "state"),
                       json_string(s, "cgroup"), json_number(s, "samples"));
}

int verb_status(Ctl *c, char **args) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *json;
        int r;

        r = ctl_call(c, "GetStatus", &error, &reply, "");
        if (r < 0)
                return call_failed(&error, r, "Failed to get the agent's status");
        r = sd_bus_message_read(reply, "s", &json);
        if (r < 0)
                return reply_parse_failed(r);

        if (c->json) {
                printf("%s\n", json);
                return EXIT_SUCCESS;
        }

        cJSON *j = cJSON_Parse(json);
        if (!j)
                return log_error("The agent sent invalid JSON."), EXIT_FAILURE;
        print_status(j);
        cJSON_Delete(j);
        return EXIT_SUCCESS;
}

int verb_targets(Ctl *c, char **args) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(table_done) Table t = { .n_columns = 4 };
        cJSON *a = NULL;
        const char *name, *profile, *kind;
        int disabled, r;

        r = ctl_call(c, "ListTargets", &error, &reply, "");
        if (r < 0)
                return call_failed(&error, r, "Failed to list targets");

        if (c->json && !(a = cJSON_CreateArray()))
                return log_oom(), EXIT_FAILURE;
        if (!c->json && table_add(&t, "TARGET", "PROFILE", "KIND", "DISABLED") < 0)
                return log_oom(), EXIT_FAILURE;

        r = sd_bus_message_enter_container(reply, 'a', "(sssb)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(sssb)", &name, &profile, &kind, &disabled)) > 0) {
                if (c->json) {
                        cJSON *o = cJSON_CreateObject();
                        if (!o) {
                                r = -ENOMEM;
                                break;
                        }
                        cJSON_AddStringToObject(o, "name", name);
                        cJSON_AddStringToObject(o, "profile", profile);
                        cJSON_AddStringToObject(o, "kind", kind);
                        cJSON_AddBoolToObject(o, "disabled", disabled);
                        cJSON_AddItemToArray(a, o);
                } else if ((r = table_add(&t, name, profile, kind, disabled ? "yes" : "no")) < 0)
                        break;
        }
        if (r < 0) {
                cJSON_Delete(a);
                return log_error_errno(r, "Failed to parse the targets: %m"), EXIT_FAILURE;
        }
        if (c->json)
                return print_json(a);
        if (!table_has_rows(&t))
                printf("No targets.\n");
        else
                table_print(&t);
        return EXIT_SUCCESS;
}

int verify_check(Ctl *c, char **args) {
        if (!args[0])
                return 0; /* machineConfig */
        int r = parse_pod_ref(args[0], true, &c->namespace, &c->pod_name, &c->container_name);
        if (r == -ENOMEM)
                return log_oom(), EXIT_FAILURE;
        if (r < 0)
                return usage_error(c->verb, "check: '%s' is not NAMESPACE/POD or NAMESPACE/POD/CONTAINER.",
                                   args[0]);
        return 0;
}

/* cgprofctl check (no argument): machineConfig on this node. */
/* What the agent's status says of off-CPU profiling ("available", or why
 * not); "unknown" from an agent that does not say. Points into a static
 * copy. */
static const char *offcpu_status(Ctl *c) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        static char buf[512];
        const char *json;
        cJSON *j, *o, *at;

        if (ctl_call(c, "GetStatus", &error, &reply, "") < 0 || sd_bus_message_read(reply, "s", &json) < 0)
                return "unknown";
        j = cJSON_Parse(json);
        o = cJSON_GetObjectItemCaseSensitive(j, "offCpu");
        at = cJSON_GetObjectItemCaseSensitive(j, "offCpuRecordAt");
        if (cJSON_IsString(o) && streq(o->valuestring, "available") && cJSON_IsString(at))
                snprintf(buf, sizeof(buf), "available (waits recorded %s)",
                         streq(at->valuestring, "task-work")
                                 ? "by a BPF task work as their thread returns to user mode"
                         : streq(at->valuestring, "sys_exit") ? "at the sys_exit tracepoint"
                                                              : at->valuestring);
        else
                snprintf(buf, sizeof(buf), "%s", cJSON_IsString(o) ? o->valuestring : "unknown");
        cJSON_Delete(j);
        return buf;
}

static int verb_check_machine(Ctl *c) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(table_done) Table t = { .n_columns = 5 };
        const char *node, *labels, *source, *name, *desired, *entry, *selector, *actual, *state;
        cJSON *j = NULL, *a = NULL;
        int r;

        r = ctl_call(c, "CheckMachineConfig", &error, &reply, "");
        if (r < 0)
                return call_failed(&error, r, "Failed to check machineConfig");
        r = sd_bus_message_read(reply, "sss", &node, &labels, &source);
        if (r < 0)
                return reply_parse_failed(r);

        if (c->json) {
                j = cJSON_CreateObject();
                if (!j)
                        return log_oom(), EXIT_FAILURE;
                cJSON_AddStringToObject(j, "node", node);
                cJSON_AddStringToObject(j, "labels", labels);
                cJSON_AddStringToObject(j, "labelsSource", source);
                a = cJSON_AddArrayToObject(j, "sysctls");
        } else {
                printf("Node %s, labels from %s: {%s}\n", node, source, labels);
                if (strncmp(source, "none", 4) == 0)
                        printf("Only the machineConfig entries without nodeSelector apply until the Node is "
                               "read.\n");
                if (table_add(&t, "SYSCTL", "DESIRED", "ENTRY (NODESELECTOR)", "ACTUAL", "STATE") < 0)
                        return log_oom(), EXIT_FAILURE;
        }

        r = sd_bus_message_enter_container(reply, 'a', "(ssssss)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(ssssss)", &name, &desired, &entry, &selector,
                                                  &actual, &state)) > 0) {
                if (c->json) {
                        cJSON *o = cJSON_CreateObject();
                        if (!o) {
                                r = -ENOMEM;
                                break;
                        }
                        cJSON_AddStringToObject(o, "name", name);
                        cJSON_AddStringToObject(o, "desired", desired);
                        cJSON_AddStringToObject(o, "entry", entry);
                        cJSON_AddStringToObject(o, "nodeSelector", selector);
                        cJSON_AddStringToObject(o, "actual", actual);
                        cJSON_AddStringToObject(o, "state", state);
                        cJSON_AddItemToArray(a, o);
                } else {
                        _cleanup_free_ char *who = NULL;

                        if (asprintf(&who, "%s%s%s%s", isempty_str(entry) ? "-" : entry,
                                     isempty_str(selector) ? "" : " (", selector,
                                     isempty_str(selector) ? "" : ")") < 0) {
                                r = -ENOMEM;
                                break;
                        }
                        r = table_add(&t, name, desired, who, isempty_str(actual) ? "?" : actual, state);
                        if (r < 0)
                                break;
                }
        }
        if (r < 0) {
                cJSON_Delete(j);
                return reply_parse_failed(r);
        }
        if (c->json) {
                cJSON_AddStringToObject(j, "offCpu", offcpu_status(c));
                return print_json(j);
        }
        if (table_has_rows(&t)) {
                printf("\n");
                table_print(&t);
        } else
                printf("No machineConfig.\n");
        printf("Off-CPU profiling: %s\n", offcpu_status(c));
        return EXIT_SUCCESS;
}

static int verb_check_pod(Ctl *c, char **args) {
        _cleanup_(sd_bus_error_free) sd_bus_error error = SD_BUS_ERROR_NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        _cleanup_(table_done) Table t = { .n_columns = 2 };
        const char *target, *profile, *rt, *reason, *what = args[0];
        cJSON *j = NULL, *reasons = NULL;
        int targeted, r;

        r = ctl_call(c, "Check", &error, &reply, "sss", c->namespace, c->pod_name, c->container_name);
        if (r < 0)
                return call_failed(&error, r, "Failed to check %s", what);
        r = sd_bus_message_read(reply, "bss", &targeted, &target, &profile);
        if (r < 0)
                return reply_parse_failed(r);

        if (c->json) {
                j = cJSON_CreateObject();
                if (!j)
                        return log_oom(), EXIT_FAILURE;
                cJSON_AddStringToObject(j, "namespace", c->namespace);
                cJSON_AddStringToObject(j, "pod", c->pod_name);
                cJSON_AddStringToObject(j, "container", c->container_name);
                cJSON_AddBoolToObject(j, "targeted", targeted);
                cJSON_AddStringToObject(j, "target", target);
                cJSON_AddStringToObject(j, "profile", profile);
                reasons = cJSON_AddArrayToObject(j, "reasons");
        } else {
                if (targeted)
                        printf("%s is targeted by target \"%s\" with profile \"%s\".\n", what, target,
                               profile);
                else
                        printf("%s is not targeted.\n", what);
                if (table_add(&t, targeted ? "OTHER TARGET" : "TARGET", "FAILED CONDITION") < 0)
                        return log_oom(), EXIT_FAILURE;
        }

        r = sd_bus_message_enter_container(reply, 'a', "(ss)");
        while (r >= 0 && (r = sd_bus_message_read(reply, "(ss)", &rt, &reason)) > 0) {
                if (c->json) {
                        cJSON *o = cJSON_CreateObject();
                        if (!o) {
                                r = -ENOMEM;
                                break;
                        }
                        cJSON_AddStringToObject(o, "target", rt);
                        cJSON_AddStringToObject(o, "reason", reason);
                        cJSON_AddItemToArray(reasons, o);
                } else if ((r = table_add(&t, rt, reason)) < 0)
                        break;
        }
        if (r < 0) {
                cJSON_Delete(j);
                return reply_parse_failed(r);
        }
        if (c->json)
                return print_json(j);
        if (table_has_rows(&t)) {
                printf("\n");
                table_print(&t);
        } else if (!targeted)
                printf("No target is configured.\n");
        return EXIT_SUCCESS;
}

int verb_check(Ctl *c, char **args) {
        if (!args[0])
                return verb_check_machine(c);
        return verb_check_pod(c, args);
}
