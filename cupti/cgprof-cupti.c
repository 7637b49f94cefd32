/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cgprof's CUPTI injection library (docs/gpu.md, part 2: kernel durations).
 * A pod opts in with CUDA_INJECTION64_PATH=/path/to/libcgprof-cupti.so: the
 * CUDA driver loads it into the workload and calls InitializeInjection().
 * It
 *  - calls cgprof_cupti_launch(correlation ID) at the entry of every launch
 *    API (CUPTI's runtime and driver callbacks), a function that does
 *    nothing: the agent's uprobe on it takes the CPU stack and the ID;
 *  - records kernel activity (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: GPU
 *    start and end, device, stream, correlation ID) and sends it to the
 *    agent as datagrams (cupti-wire.h) on the Unix socket
 *    $CGPROF_CUPTI_SOCKET (default /run/cgprof/cupti.sock), never blocking
 *    the workload: a datagram the socket cannot take now is dropped and
 *    counted.
 * Without a GPU (or a driver) CUPTI's calls fail and the library does
 * nothing; what runs on a GPU was not run in this repository's CI. */
#include <cupti.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "cupti-wire.h"

/* The kernel record of the CUPTI it is built with: CUDA 13's, or CUDA 12's
 * (built on a GPU node against the PyTorch wheels' CUPTI: scripts/gpu-check
 * CUPTI_BUILD=1). The fields read are in both. */
#if CUPTI_API_VERSION >= 130000
typedef CUpti_ActivityKernel10 KernelRecord;
#else
typedef CUpti_ActivityKernel9 KernelRecord;
#endif

#define BUFFER_SIZE (1u << 20)
#define DEFAULT_SOCKET "/run/cgprof/cupti.sock"

static int sock_fd = -1;
static struct sockaddr_un sock_addr;
static atomic_uint dropped;

/* The launch's correlation ID where the agent's uprobe reads it (its first
 * argument). Exported, never inlined, never optimized out. */
__attribute__((noinline, visibility("default"))) void cgprof_cupti_launch(uint32_t correlation) {
        /* A nop first: the kernel emulates it at the uprobe (a lone ret
         * would be single-stepped out of line: a second trap). */
        __asm__ volatile("nop" : : "r"(correlation) : "memory");
}

static void send_kernels(const CuptiWireKernel *k, size_t n) {
        uint8_t buf[CUPTI_WIRE_MAX_SIZE];
        CuptiWireHeader h = { .pid = (uint32_t) getpid(), .dropped = atomic_exchange(&dropped, 0) };
        int len = cupti_wire_encode(&h, k, n, buf, sizeof(buf));

        if (len < 0 || sock_fd < 0)
                return;
        if (sendto(sock_fd, buf, (size_t) len, MSG_DONTWAIT | MSG_NOSIGNAL, (struct sockaddr *) &sock_addr,
                   sizeof(sock_addr)) < 0)
                atomic_fetch_add(&dropped, (unsigned) n);
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
        *buffer = aligned_alloc(8, BUFFER_SIZE);
        *size = *buffer ? BUFFER_SIZE : 0;
        *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream_id, uint8_t *buffer, size_t size,
                                      size_t valid) {
        CuptiWireKernel k[CUPTI_WIRE_MAX_KERNELS];
        CUpti_Activity *rec = NULL;
        size_t n = 0, lost = 0;

        while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
                const KernelRecord *a = (const KernelRecord *) rec;

                if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
                    rec->kind != CUPTI_ACTIVITY_KIND_KERNEL)
                        continue;
                k[n++] = (CuptiWireKernel){ .start_ns = a->start,
                                            .end_ns = a->end >= a->start ? a->end : a->start,
                                            .stream = a->streamId,
                                            .correlation = a->correlationId,
                                            .device = a->deviceId };
                if (n == CUPTI_WIRE_MAX_KERNELS) {
                        send_kernels(k, n);
                        n = 0;
                }
        }
        if (n > 0)
                send_kernels(k, n);
        if (cuptiActivityGetNumDroppedRecords(ctx, stream_id, &lost) == CUPTI_SUCCESS && lost > 0)
                atomic_fetch_add(&dropped, (unsigned) lost);
        free(buffer);
}

static void CUPTIAPI on_api(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId cbid,
                            const void *data) {
        const CUpti_CallbackData *cb = data;

        if (cb->callbackSite == CUPTI_API_ENTER)
                cgprof_cupti_launch(cb->correlationId);
}

static void flush_at_exit(void) {
        cuptiActivityFlushAll(1);
}

static int subscribe(void) {
        static const CUpti_CallbackId runtime[] = {
                CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000,
                CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_ptsz_v7000,
                CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_v11060,
                CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernelExC_ptsz_v11060,
                CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_v9000,
                CUPTI_RUNTIME_TRACE_CBID_cudaLaunchCooperativeKernel_ptsz_v9000,
                CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000,
                CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000,
        };
        static const CUpti_CallbackId driver[] = {
                CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,   CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
                CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
                CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,    CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
        };
        CUpti_SubscriberHandle subscriber;

        if (cuptiSubscribe(&subscriber, (CUpti_CallbackFunc) on_api, NULL) != CUPTI_SUCCESS)
                return -1;
        for (size_t i = 0; i < sizeof(runtime) / sizeof(runtime[0]); i++)
                cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API, runtime[i]);
        for (size_t i = 0; i < sizeof(driver) / sizeof(driver[0]); i++)
                cuptiEnableCallback(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API, driver[i]);
        return 0;
}

/* Called by the CUDA driver (CUDA_INJECTION64_PATH). Returns 1: loaded. */
__attribute__((visibility("default"))) int InitializeInjection(void) {
        const char *path = getenv("CGPROF_CUPTI_SOCKET");

        if (!path || !*path)
                path = DEFAULT_SOCKET;
        if (strlen(path) < sizeof(sock_addr.sun_path)) {
                sock_addr.sun_family = AF_UNIX;
                strcpy(sock_addr.sun_path, path);
                sock_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        }
        if (subscribe() < 0 ||
            cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
            cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
                fprintf(stderr, "cgprof-cupti: CUPTI is not usable here, not recording kernels.\n");
                return 1;
        }
        atexit(flush_at_exit);
        return 1;
}
