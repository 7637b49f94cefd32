/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Owns: the sessions (running and armed), their samples and symbols, their end, checkpoints, the reports
 * written on the report worker and retried, and the reports of reportDir: their index (listings, lookups)
 * and their retention, the distributed jobs of the sessions and their job reports (job-registry.h,
 * session-jobs.h); its state is a SessionsRoom, opaque above (sessions-deps.h).
 * May call: the sampling and base rooms (sampling.h, base.h), common/; above it, only what SessionsRoomDeps
 * and SessionEvents give (the Manager fills them in, manager-rooms.c: its session indexes, drains, events).
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
