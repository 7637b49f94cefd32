/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "control-deps.h"

/* manager-bus.c: the D-Bus API of bus-api.h, on the private socket and,
 * when there is one, the system bus. */
int manager_bus_listen(ControlRoom *room);
int manager_bus_connect_system(ControlRoom *room);
/* Closes the connections and the socket (room NULL: nothing). */
void manager_bus_close(ControlRoom *room);
/* SessionStarted / SessionEnded on every connection (report_dir NULL: none). */
void manager_bus_session_started(ControlRoom *room, Session *s);
void manager_bus_session_ended(ControlRoom *room, const char *id, const char *reason, const char *report_dir,
                               uint64_t samples);
