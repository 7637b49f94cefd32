/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "http-auth.h"
#include "http-deps.h"
#include "http-server.h"

/* Profiles pulled over HTTP (docs/pull.md), on the config's "http"
 * listener when "pprof" is true:
 *
 *   GET /debug/pprof/profile?seconds=N&namespace=NS&pod=POD[&container=C]
 *   GET /debug/pprof/profile?seconds=N&cgroup=PATH
 *       an on-demand session of N seconds, answered with its profile.pb.gz;
 *   GET /targets[?namespace=NS]   the pods of this node (JSON);
 *   GET /reports[?namespace=NS]   the reports on disk (JSON);
 *   GET /reports/ID/FILE          a file of the report of session ID.
 *
 * With Kubernetes every request needs a bearer token, reviewed by the API
 * server (http-auth.h); without, the listener is on loopback only and
 * nothing is asked (config_check_http_mode()). Requests wait for their
 * answer suspended, never holding the loop. */

/* A file served is opened on the report worker and streamed from it on
 * the loop (libmicrohttpd's fd responses): memory per download is a
 * buffer, whatever the file's size. */
#define PULL_PENDING_MAX 64U
/* /reports: reports per page, by default and at most (?limit=). */
#define PULL_REPORTS_PAGE 1000U
#define PULL_REPORTS_PAGE_MAX 10000U
/* Users (without Kubernetes: addresses) whose pulls are counted (http.pullRateLimit). */
#define PULL_USERS_MAX 4096U

typedef struct ManagerPull ManagerPull;

/* Adds the routes to http (when the config asks for them), and sets *ret
 * to the pulls' state, which the routes find there (the slot outlives
 * them: the room's); deps: the room's, which outlive the pulls. */
int manager_pull_start(HttpServer *http, const HttpRoomDeps *deps, ManagerPull **ret);
/* Answers what is left and sets *slot to NULL (the routes answer 404). */
void manager_pull_stop(ManagerPull **slot);
/* For /metrics. */
typedef struct PullStats {
        bool kubernetes; /* tokens reviewed: auth is counted */
        HttpAuthStats auth;
        uint64_t pulls_limited; /* 429: too many pulls by one user */
} PullStats;
void manager_pull_stats(ManagerPull *pull, PullStats *ret);
/* A session ended (session-end.c): answers the request that started it, if any. */
void manager_pull_session_ended(ManagerPull *pull, const char *id, const char *report_dirs, int error);
