/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <bpf/bpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "offcpu-threads.h"

static int thread_compare(const void *a, const void *b) {
        const OffCpuThread *x = a, *y = b;

        if (x->t.pid != y->t.pid)
                return x->t.pid < y->t.pid ? -1 : 1;
        return (x->tid > y->tid) - (x->tid < y->tid);
}

/* Calls f on each key of the map (listed first: f may delete the key it
 * is given). Stops at f's first error. */
static int threads_foreach(int fd, int (*f)(int fd, const struct cgprof_thread_key *k, void *userdata),
                           void *userdata) {
        _cleanup_free_ struct cgprof_thread_key *keys = calloc(CGPROF_MAX_THREADS, sizeof(*keys));
        size_t n = 0;
        int r;

        if (!keys)
                return -ENOMEM;
        while (n < CGPROF_MAX_THREADS &&
               bpf_map_get_next_key(fd, n == 0 ? NULL : &keys[n - 1], &keys[n]) == 0)
                n++;
        for (size_t i = 0; i < n; i++) {
                r = f(fd, &keys[i], userdata);
                if (r < 0)
                        return r;
        }
        return 0;
}

typedef struct ReadCtx {
        uint32_t slot;
        OffCpuThread *threads;
        size_t n, allocated;
} ReadCtx;

static int read_one(int fd, const struct cgprof_thread_key *k, void *userdata) {
        ReadCtx *c = userdata;
        OffCpuThread t = { .tid = k->tid };

        if (k->session != c->slot)
                return 0;
        if (bpf_map_lookup_elem(fd, k, &t.t) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (c->n == c->allocated) {
                size_t a = MAX(c->allocated * 2, (size_t) 16);
                OffCpuThread *n = reallocarray(c->threads, a, sizeof(OffCpuThread));
                if (!n)
                        return -ENOMEM;
                c->threads = n;
                c->allocated = a;
        }
        t.t.comm[sizeof(t.t.comm) - 1] = 0;
        c->threads[c->n++] = t;
        return 0;
}

int offcpu_threads_read(int fd, uint32_t slot, OffCpuThread **ret, size_t *ret_n) {
        ReadCtx c = { .slot = slot };
        int r;

        r = threads_foreach(fd, read_one, &c);
        if (r < 0) {
                free(c.threads);
                return r;
        }
        if (c.n > 0)
                qsort(c.threads, c.n, sizeof(OffCpuThread), thread_compare);
        *ret = c.threads;
        *ret_n = c.n;
        return 0;
}

static int forget_one(int fd, const struct cgprof_thread_key *k, void *userdata) {
        const uint32_t *slot = userdata;

        if (k->session == *slot && bpf_map_delete_elem(fd, k) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

int offcpu_threads_forget(int fd, uint32_t slot) {
        return threads_foreach(fd, forget_one, &slot);
}

int offcpu_thread_name(int fd, uint32_t slot, uint32_t tid, char ret[static 16]) {
        struct cgprof_thread_key k = { .session = slot, .tid = tid };
        struct cgprof_thread t;

        if (bpf_map_lookup_elem(fd, &k, &t) < 0)
                return -errno;
        memcpy(ret, t.comm, 16);
        ret[15] = 0;
        return 0;
}
