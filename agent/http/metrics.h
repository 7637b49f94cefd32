/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "counters.h"
#include "http-deps.h"
#include "machine-config.h"
#include "sampling.h"

/* The agent's Prometheus metrics (/metrics, docs/metrics.md): what the
 * Manager, the sessions, the sampler, the watches and the event loop
 * count, written in the text exposition format. The counters GetStatus
 * shows are read where it reads them; what it does not keep is counted
 * here: per-profile sample counters (sessions that ended, plus the
 * running ones, never going down), sessions by end and failure reason,
 * and machineConfig changes by sysctl. Everything is bounded: at most
 * METRICS_LABELS_MAX values per label, the rest as "_other". */

#define METRICS_LABELS_MAX 256U

/* The counters (metrics.c): the http room's own, opaque to the others. */
typedef struct ManagerMetrics ManagerMetrics;
typedef struct HttpServer HttpServer;
typedef struct ManagerPull ManagerPull;

/* Allocates the counters and gives the timings their histogram buckets
 * (deps: what /metrics reads, http-deps.h). The functions below take a
 * NULL ManagerMetrics (not made yet, or freed) and do nothing. */
int manager_metrics_init(const MetricsDeps *deps, ManagerMetrics **ret);
ManagerMetrics *manager_metrics_free(ManagerMetrics *x);

/* A session's counters, added to its profile's once it stopped (st: its
 * sampler stats; NULL when they were not read). */
void metrics_session_final(ManagerMetrics *x, Session *s, const SamplerSessionStats *st);
/* A session ended with its report written. */
void metrics_session_ended(ManagerMetrics *x, const char *reason);
/* A session failed ("create", "start", "report"; manager_count_session_failed()). */
void metrics_session_failed(ManagerMetrics *x, const char *reason);
void metrics_machine_change(ManagerMetrics *x, const char *sysctl, MachineChange change);
/* A pull request (/debug/pprof/profile, /targets, /reports...) answered with HTTP status 'code'. */
void metrics_pull_request(ManagerMetrics *x, const char *code);

/* The exposition, malloc()ed, with the listener's counts (http) and the
 * pulls' (pull: NULL when not served). */
int metrics_exposition(ManagerMetrics *x, HttpServer *http, ManagerPull *pull, char **ret, size_t *ret_size);
