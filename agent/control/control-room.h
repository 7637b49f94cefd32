/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The control room's own state (opaque above the room: control-deps.h). */

#include "control-deps.h"
#include "log.h"

struct ControlRoom {
        ControlDeps deps;

        /* The D-Bus API (manager-bus.c). */
        int bus_listen_fd;
        sd_event_source *bus_accept;
        sd_event_source *bus_accept_retry; /* re-enables bus_accept after EMFILE and friends */
        uint64_t bus_accept_backoff_usec;
        LogRateLimit bus_accept_log;
        sd_event_source *bus_post; /* processes what the connections already read (see manager-bus.c) */
        sd_bus **bus_clients;
        size_t n_bus_clients;
        sd_bus *system_bus; /* io.cgprof.Agent1 on the system bus, when there is one */
        bool system_bus_named; /* the name is ours: signals go there too */
};
