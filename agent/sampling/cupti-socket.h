/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdint.h>

#include <systemd/sd-event.h>

#include "cupti-wire.h"
#include "macro.h"

/* The agent's end of the CUPTI library's socket (docs/gpu.md, kernel
 * durations): a Unix datagram socket, read on the event loop without
 * blocking. Each datagram is decoded (cupti-wire.h) and handed on with the
 * sender's pid as the kernel tells it (SO_PASSCRED: SCM_CREDENTIALS), never
 * the pid its header claims: a process cannot send records as another. */

#define CUPTI_SOCKET_DEFAULT "/run/cgprof/cupti.sock"

typedef struct CuptiSocket CuptiSocket;

/* A datagram's records: pid is the sender's (in the agent's PID namespace). */
typedef void (*CuptiSocketFunc)(uint32_t pid, const CuptiWireHeader *h, const CuptiWireKernel *k, size_t n,
                                void *userdata);

typedef struct CuptiSocketStats {
        uint64_t datagrams; /* decoded and handed on */
        uint64_t refused; /* not a datagram of the wire format, or without credentials */
        uint64_t claimed_other_pid; /* the header's pid was not the sender's (handed on as the sender's) */
} CuptiSocketStats;

/* Binds path (its directory made if missing; a stale socket replaced),
 * writable by every user: the pods that opted in send as whatever user
 * they run as. */
int cupti_socket_new(sd_event *event, const char *path, CuptiSocketFunc cb, void *userdata,
                     CuptiSocket **ret);
CuptiSocket *cupti_socket_free(CuptiSocket *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(CuptiSocket *, cupti_socket_free);

/* Reads the datagrams waiting now (at most a bounded number). Returns how
 * many were read, or a negative errno. */
int cupti_socket_read(CuptiSocket *c);
void cupti_socket_stats(const CuptiSocket *c, CuptiSocketStats *ret);
