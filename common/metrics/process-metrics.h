/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "exposition.h"

/* The standard process metrics, as Prometheus' Go and Python clients write
 * them: process_cpu_seconds_total, process_resident_memory_bytes,
 * process_virtual_memory_bytes, process_start_time_seconds,
 * process_open_fds, process_max_fds. proc_dir: "/proc/self" (or another
 * process's directory, in tests). A value that cannot be read leaves its
 * family out. Reads procfs only: no blocking I/O. */
void process_metrics_write(MetricsWriter *w, const char *proc_dir);
