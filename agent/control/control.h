/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Owns: the D-Bus API (the private socket and the system bus; bus-api.h is its protocol, which cgprofctl
 * shares), the control operations behind it and the status document; its state is a ControlRoom
 * (control-deps.h; opaque above the room).
 * May call: the sessions, kube, machine and base rooms (their faces), common/; what it needs of the
 * Manager comes in ControlDeps (manager-rooms.c fills it).
 * Called by: the Manager (makes the room, listens, closes; session started and ended signals through
 * the sessions room's SessionEvents) and the http room (pull starts and stops sessions, through
 * manager_start_session() and manager_stop_session()). */
#pragma once

#include "control-deps.h"
#include "manager-bus.h"
#include "manager-control.h"
