/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Owns: the HTTP listener (libmicrohttpd, TLS, authorization by TokenReview), /metrics and profiles over
 * HTTP (pull).
 * May call: the control, sessions, kube and base rooms (their faces), common/ (metrics, kube); and for now
 * the Manager (manager.h).
 * Called by: the Manager (starts and stops the listener; what the sessions and machine rooms announce,
 * through their callbacks in manager-rooms.c: /metrics, the pull waiters). */
#pragma once

#include "http-deps.h"
#include "manager-http.h"
#include "manager-pull.h"
#include "metrics.h"
