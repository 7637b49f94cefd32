/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Owns: the BPF sampler and its maps, the unwind tables, CPython processes, process events and the
 * samples that wait for them, process names, the symbolizer (with JIT maps) and its debuginfod fetcher.
 * May call: the base room (base.h), common/ (config, symbols, profile, base) and the BPF headers.
 * Called by: the sessions room (a drain's samples, symbols) and the Manager (which starts and drains it). */
#pragma once

#include "cuda-probes.h"
#include "cupti-socket.h"
#include "debuginfod-fetcher.h"
#include "proc-event-queue.h"
#include "process.h"
#include "python.h"
#include "sample-park.h"
#include "sampler.h"
#include "symbolizer.h"
#include "unwinder.h"
