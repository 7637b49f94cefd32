/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <bpf/btf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "offcpu-probe.h"

int offcpu_probe_btf(const struct btf *btf, const char **ret_missing) {
        /* A tracepoint's BTF-typed program attaches to its btf_trace_* type. */
        static const char *const needed[] = { "sched_switch", "sys_exit" };

        for (size_t i = 0; i < ELEMENTSOF(needed); i++) {
                char name[64];

                snprintf(name, sizeof(name), "btf_trace_%s", needed[i]);
                if (btf__find_by_name_kind(btf, name, BTF_KIND_TYPEDEF) < 0) {
                        *ret_missing = needed[i];
                        return -EOPNOTSUPP;
                }
        }
        *ret_missing = NULL;
        return 0;
}

int offcpu_probe(char **ret_reason) {
        const char *missing;
        struct btf *btf;
        int r;

        btf = btf__load_vmlinux_btf();
        if (!btf) {
                r = -errno;
                if (asprintf(ret_reason, "off-CPU profiling needs the kernel's BTF (%s)", strerror(-r)) < 0)
                        return -ENOMEM;
                return -EOPNOTSUPP;
        }
        r = offcpu_probe_btf(btf, &missing);
        btf__free(btf);
        if (r < 0 && asprintf(ret_reason,
                              "off-CPU profiling needs the BTF-typed %s tracepoint, which this kernel lacks",
                              missing) < 0)
                return -ENOMEM;
        return r;
}
