/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Owns: the worker thread that runs jobs off the event loop, the journal entries, the cgroup tree watch.
 * May call: common/ (base, machine) and libsystemd; nothing of the agent.
 * Called by: every room above (sampling, sessions, kube, machine, http, control) and the Manager. */
#pragma once

#include "cgroup-watch.h"
#include "journal.h"
#include "worker.h"
