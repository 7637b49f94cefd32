/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Owns: the D-Bus API (the private socket and the system bus; bus-api.h is its protocol, which cgprofctl
 * shares), the control operations behind it and the status document.
 * May call: the sessions, kube, machine and base rooms (their faces), common/; and for now the Manager.
 * Called by: the Manager (listens, closes), the http room (pull starts and stops sessions) and, for now,
 * the sessions room (session started and ended signals: the KNOWN entries of scripts/check-rooms). */
#pragma once

#include "control-deps.h"
#include "manager-bus.h"
#include "manager-control.h"
