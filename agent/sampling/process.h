/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <sys/types.h>

#include "macro.h"

/* Reads a process's name and full command line with procps-ng's libproc2. */

typedef struct ProcessReader ProcessReader;

int process_reader_new(ProcessReader **ret);
ProcessReader *process_reader_free(ProcessReader *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(ProcessReader *, process_reader_free);

/* comm: the short name (stat's comm); cmdline: arguments joined by spaces, or
 * "[comm]" for a process without one (kernel threads, zombies). -ESRCH when
 * the process is gone. */
int process_reader_read(ProcessReader *p, pid_t pid, char **ret_comm, char **ret_cmdline);
