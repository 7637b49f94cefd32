/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Owns: the HTTP listener (libmicrohttpd, TLS, authorization by TokenReview), /metrics and profiles over
 * HTTP (pull).
 * May call: the sessions, kube and base rooms (their faces), common/ (metrics, kube); what it
 * needs of the Manager comes in HttpRoomDeps and MetricsDeps (http-deps.h), which manager-rooms.c fills.
 * Called by: the Manager (starts and stops the listener; what the sessions and machine rooms announce,
 * through their callbacks in manager-rooms.c: /metrics, the pull waiters). */
#pragma once

#include "http-deps.h"
#include "manager-http.h"
#include "manager-pull.h"
#include "metrics.h"
