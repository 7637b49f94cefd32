/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "manager.h"

/* manager-bus.c: the D-Bus API of bus-api.h, on the private socket and,
 * when there is one, the system bus. */
int manager_bus_listen(Manager *m);
int manager_bus_connect_system(Manager *m);
void manager_bus_close(Manager *m);
/* SessionStarted / SessionEnded on every connection (report_dir NULL: none). */
void manager_bus_session_started(Manager *m, Session *s);
void manager_bus_session_ended(Manager *m, const char *id, const char *reason, const char *report_dir,
                               uint64_t samples);
