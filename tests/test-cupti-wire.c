/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The CUPTI injection library's datagrams (cupti/cupti-wire.h): what a
 * workload's library sends is what the agent reads, and a datagram that is
 * not one is refused. No GPU, no CUPTI: the encoding only. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cupti-wire.h"
#include "tests.h"

static const CuptiWireKernel kernels[] = {
        { .start_ns = 1000, .end_ns = 4000, .stream = 7, .correlation = 42, .device = 0 },
        { .start_ns = 5000, .end_ns = 5000, .stream = 0, .correlation = 43, .device = 1 },
};

TEST(round_trip) {
        uint8_t buf[CUPTI_WIRE_MAX_SIZE];
        CuptiWireHeader h = { .pid = 1234, .dropped = 3 }, out;
        CuptiWireKernel k[4];
        int len = cupti_wire_encode(&h, kernels, 2, buf, sizeof(buf));

        ASSERT_EQ(len, (int) (sizeof(CuptiWireHeader) + 2 * sizeof(CuptiWireKernel)));
        ASSERT_EQ(cupti_wire_decode(buf, (size_t) len, &out, k, 4), 2);
        ASSERT_EQ(out.pid, 1234);
        ASSERT_EQ(out.dropped, 3);
        ASSERT_EQ(k[0].end_ns - k[0].start_ns, 3000);
        ASSERT_EQ(k[1].correlation, 43);
        ASSERT_EQ(k[1].device, 1);
        ASSERT_TRUE(memcmp(k, kernels, sizeof(kernels)) == 0);
}

TEST(empty_and_full) {
        uint8_t buf[CUPTI_WIRE_MAX_SIZE];
        CuptiWireKernel many[CUPTI_WIRE_MAX_KERNELS + 1] = {}, k[CUPTI_WIRE_MAX_KERNELS];
        CuptiWireHeader h = {}, out;
        int len;

        len = cupti_wire_encode(&h, NULL, 0, buf, sizeof(buf));
        ASSERT_EQ(cupti_wire_decode(buf, (size_t) len, &out, NULL, 0), 0);
        len = cupti_wire_encode(&h, many, CUPTI_WIRE_MAX_KERNELS, buf, sizeof(buf));
        ASSERT_EQ(len, (int) CUPTI_WIRE_MAX_SIZE);
        ASSERT_EQ(cupti_wire_decode(buf, (size_t) len, &out, k, CUPTI_WIRE_MAX_KERNELS),
                  CUPTI_WIRE_MAX_KERNELS);
        ASSERT_EQ(cupti_wire_encode(&h, many, CUPTI_WIRE_MAX_KERNELS + 1, buf, sizeof(buf)), -EINVAL);
        ASSERT_EQ(cupti_wire_encode(&h, many, 2, buf, sizeof(CuptiWireHeader) + 1), -ENOBUFS);
}

TEST(refused) {
        uint8_t buf[CUPTI_WIRE_MAX_SIZE];
        CuptiWireHeader h = {}, out;
        CuptiWireKernel k[4], bad = { .start_ns = 10, .end_ns = 5 };
        int len = cupti_wire_encode(&h, kernels, 2, buf, sizeof(buf));

        /* Truncated, too long, short of room, wrong magic or version. */
        ASSERT_EQ(cupti_wire_decode(buf, (size_t) len - 1, &out, k, 4), -EBADMSG);
        ASSERT_EQ(cupti_wire_decode(buf, (size_t) len + 1, &out, k, 4), -EBADMSG);
        ASSERT_EQ(cupti_wire_decode(buf, (size_t) len, &out, k, 1), -EBADMSG);
        ASSERT_EQ(cupti_wire_decode(buf, 3, &out, k, 4), -EBADMSG);
        buf[0] ^= 1;
        ASSERT_EQ(cupti_wire_decode(buf, (size_t) len, &out, k, 4), -EBADMSG);
        buf[0] ^= 1;
        buf[4] = 9;
        ASSERT_EQ(cupti_wire_decode(buf, (size_t) len, &out, k, 4), -EBADMSG);
        /* A kernel that ends before it starts. */
        len = cupti_wire_encode(&h, &bad, 1, buf, sizeof(buf));
        ASSERT_EQ(cupti_wire_decode(buf, (size_t) len, &out, k, 4), -EBADMSG);
}

TEST(datagram) {
        /* Through a datagram socket, as the library sends and the agent reads. */
        uint8_t buf[CUPTI_WIRE_MAX_SIZE], in[CUPTI_WIRE_MAX_SIZE + 1];
        CuptiWireHeader h = { .pid = 1 }, out;
        CuptiWireKernel k[4];
        int fds[2], len;
        ssize_t n;

        ASSERT_OK(socketpair(AF_UNIX, SOCK_DGRAM, 0, fds));
        len = cupti_wire_encode(&h, kernels, 2, buf, sizeof(buf));
        ASSERT_EQ(send(fds[0], buf, (size_t) len, 0), len);
        n = recv(fds[1], in, sizeof(in), 0);
        ASSERT_EQ(n, len);
        ASSERT_EQ(cupti_wire_decode(in, (size_t) n, &out, k, 4), 2);
        close(fds[0]);
        close(fds[1]);
}

DEFINE_TEST_MAIN
