/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Owns: the HTTP listener (libmicrohttpd, TLS, authorization by TokenReview), /metrics and profiles over
 * HTTP (pull).
 * May call: the control, sessions, kube and base rooms (their faces), common/ (metrics, kube); and for now
 * the Manager (manager.h).
 * Called by: the Manager (starts and stops the listener) and, for now, the sessions and machine rooms
 * (metrics, pull waiters: the KNOWN entries of scripts/check-rooms). */
#pragma once

#include "manager-http.h"
#include "manager-pull.h"
#include "metrics.h"
