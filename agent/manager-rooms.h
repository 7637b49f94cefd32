/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "kube.h"
#include "machine.h"
#include "manager.h"
#include "sessions.h"

/* How the rooms below hear of each other without calling upward: the
 * tables of callbacks the Manager gives them (manager-rooms.c). */

/* Creates the machine room (m->machine), with what it needs from the
 * Manager: the event loop, the node, the config, /metrics. */
int manager_machine_new(Manager *m);

/* Creates the kube room (m->kube), with what it needs from the Manager: the
 * event loop, the node, the options, the config; and what it announces:
 * pods changed (manager-pods.c), the client is up (the machine room's Node
 * watch). */
int manager_kube_new(Manager *m);

/* Creates the sessions room's own state (m->sessions_room), with what it
 * needs from the Manager: the event loop, the state directory, the node,
 * reportDir, the config, the cgroup root, whether the agent is stopping,
 * drains, and the Manager's indexes of the sessions; and what it
 * announces: reports written, and a session's start and end (to the bus,
 * the pull waiters and /metrics). */
int manager_sessions_room_new(Manager *m);

/* Creates the http room's counters (m->metrics), with what /metrics reads
 * of the Manager and the other rooms (MetricsDeps); after the sessions and
 * kube rooms. */
int manager_metrics_new(Manager *m);

/* Creates the http room's state (m->http_room), with what the listener and
 * the pulls need (HttpRoomDeps): the event loop, the node, the sessions and
 * kube rooms, the metrics, the config, reportDir, sessions found, started
 * and stopped, the ListReports limit; after manager_metrics_new(). */
int manager_http_room_new(Manager *m);

/* Creates the control room's own state (m->control), with what it needs
 * from the Manager: what GetStatus reports. */
int manager_control_room_new(Manager *m);
