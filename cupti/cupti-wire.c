/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <string.h>

#include "cupti-wire.h"

_Static_assert(sizeof(CuptiWireHeader) == 16, "no padding in the header");
_Static_assert(sizeof(CuptiWireKernel) == 32, "no padding in a record");

/* x86-64 and arm64 are little-endian: the structs are the wire format. */
int cupti_wire_encode(const CuptiWireHeader *h, const CuptiWireKernel *k, size_t n, void *buf, size_t size) {
        CuptiWireHeader out;
        size_t len;

        if (!h || (n > 0 && !k) || !buf || n > CUPTI_WIRE_MAX_KERNELS)
                return -EINVAL;
        len = sizeof(out) + n * sizeof(*k);
        if (size < len)
                return -ENOBUFS;
        out = *h;
        out.magic = CUPTI_WIRE_MAGIC;
        out.version = CUPTI_WIRE_VERSION;
        out.n = (uint16_t) n;
        memcpy(buf, &out, sizeof(out));
        if (n > 0)
                memcpy((uint8_t *) buf + sizeof(out), k, n * sizeof(*k));
        return (int) len;
}

int cupti_wire_decode(const void *buf, size_t len, CuptiWireHeader *h, CuptiWireKernel *k, size_t max) {
        CuptiWireHeader in;

        if (!buf || !h || len < sizeof(in))
                return -EBADMSG;
        memcpy(&in, buf, sizeof(in));
        if (in.magic != CUPTI_WIRE_MAGIC || in.version != CUPTI_WIRE_VERSION ||
            in.n > CUPTI_WIRE_MAX_KERNELS || len != sizeof(in) + (size_t) in.n * sizeof(*k) || in.n > max ||
            (in.n > 0 && !k))
                return -EBADMSG;
        if (in.n > 0)
                memcpy(k, (const uint8_t *) buf + sizeof(in), (size_t) in.n * sizeof(*k));
        for (size_t i = 0; i < in.n; i++)
                if (k[i].end_ns < k[i].start_ns)
                        return -EBADMSG;
        *h = in;
        return in.n;
}
