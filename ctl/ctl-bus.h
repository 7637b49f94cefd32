/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cgprofctl's side of the D-Bus API in bus-api.h: connecting to the agent
 * (its private socket, or the system bus), calling its methods, and turning
 * a failed call into a message and an exit status. */
#pragma once

#include <systemd/sd-bus.h>

#include "ctl.h"

/* Connects c->bus to the agent. Returns 0 or an exit status. */
int ctl_connect(Ctl *c);

/* The agent's bus name to call: NULL on its private socket. */
const char *ctl_destination(const Ctl *c);

/* A method call with sd-bus's default timeout (25 s). */
int ctl_call(const Ctl *c, const char *method, sd_bus_error *error, sd_bus_message **reply,
             const char *types, ...);

/* A method call that stops sessions: the agent writes their reports before
 * it answers. */
int ctl_call_stop(const Ctl *c, const char *method, sd_bus_error *error, sd_bus_message **reply,
                  const char *types, ...);

/* The exit status for a failed method call, having logged it with the
 * formatted context ("Failed to stop session X"). */
int call_failed(const sd_bus_error *error, int r, const char *fmt, ...) _printf_(3, 4);

/* Logs that a reply could not be read; returns EXIT_FAILURE. */
int reply_parse_failed(int r);

/* One entry of a ListReports reply; the strings belong to the reply. */
typedef struct ReportInfo {
        const char *session, *dir, *namespace, *pod, *container, *cgroup;
        uint64_t start_usec, samples;
} ReportInfo;

/* Enters a ListReports reply's array. Returns >= 0 or -errno. */
int report_list_enter(sd_bus_message *reply);

/* Reads the next report of a ListReports reply: 1, 0 at its end, or -errno. */
int report_list_read(sd_bus_message *reply, ReportInfo *ret);
