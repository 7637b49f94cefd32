/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Owns: the sessions (running and armed), their samples and symbols, their end, checkpoints, the reports
 * written on the report worker and retried, and the reports of reportDir: their index (listings, lookups)
 * and their retention. The reports side and the checkpoint registry are a SessionsRoom of its own, opaque
 * above (sessions-deps.h); the sessions' list, slots and end queue are still the Manager's.
 * May call: the sampling and base rooms (sampling.h, base.h), common/; above it, what SessionsRoomDeps and
 * SessionEvents give (manager-rooms.c); and for now, from session*.c, the Manager (manager.h).
 * Called by: the Manager (drains, starts and ends sessions), the kube, control and http rooms. */
#pragma once

#include "checkpoint.h"
#include "control-report.h"
#include "manager-reports.h"
#include "report-index.h"
#include "report-list.h"
#include "report-retry.h"
#include "session.h"
#include "session-events.h"
#include "sessions-deps.h"
