/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* What the CUPTI injection library (cgprof-cupti.c, loaded into a workload
 * through CUDA_INJECTION64_PATH: docs/gpu.md, part 2) hands the agent: the
 * kernels that ran, with their GPU start and end, device, stream and the
 * correlation ID CUPTI gave their launch, as Unix datagrams. One datagram:
 * a header, then up to CUPTI_WIRE_MAX_KERNELS records, all little-endian
 * fixed-width fields; the kernel's name is not sent (the agent names the
 * kernel from the launch it joins by correlation ID). Pure encoding and
 * decoding here, no CUPTI: unit-tested without a GPU (test-cupti-wire.c). */

#define CUPTI_WIRE_MAGIC 0x43475055u /* "UPGC" */
#define CUPTI_WIRE_VERSION 1
#define CUPTI_WIRE_MAX_KERNELS 128

typedef struct CuptiWireKernel {
        uint64_t start_ns, end_ns; /* GPU timestamps (CUPTI's clock) */
        uint64_t stream;
        uint32_t correlation; /* of the launch (CUPTI's runtime or driver API callback) */
        uint32_t device;
} CuptiWireKernel;

typedef struct CuptiWireHeader {
        uint32_t magic;
        uint16_t version;
        uint16_t n; /* records after the header */
        uint32_t pid; /* the sender */
        uint32_t dropped; /* records CUPTI dropped since the last datagram */
} CuptiWireHeader;

#define CUPTI_WIRE_MAX_SIZE (sizeof(CuptiWireHeader) + CUPTI_WIRE_MAX_KERNELS * sizeof(CuptiWireKernel))

/* Encodes n (at most CUPTI_WIRE_MAX_KERNELS) records into buf (size bytes);
 * returns the datagram's size, or -EINVAL / -ENOBUFS. */
int cupti_wire_encode(const CuptiWireHeader *h, const CuptiWireKernel *k, size_t n, void *buf, size_t size);

/* Decodes a datagram: the header into *h, its records into k (room for
 * max); returns the number of records, or -EBADMSG for a datagram that is
 * not one (wrong magic, version, size, or a record that ends before it
 * starts). */
int cupti_wire_decode(const void *buf, size_t len, CuptiWireHeader *h, CuptiWireKernel *k, size_t max);
