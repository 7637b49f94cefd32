/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <bpf/btf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "macro.h"
#include "offcpu-probe.h"

static bool btf_has_tracepoint(const struct btf *btf, const char *tp) {
        char name[64];

        /* A tracepoint's BTF-typed program attaches to its btf_trace_* type. */
        snprintf(name, sizeof(name), "btf_trace_%s", tp);
        return btf__find_by_name_kind(btf, name, BTF_KIND_TYPEDEF) >= 0;
}

int offcpu_probe_btf(const struct btf *btf, const char **ret_missing, OffcpuRecordAt *ret_at) {
        *ret_missing = NULL;
        *ret_at = _OFFCPU_RECORD_AT_INVALID;
        if (!btf_has_tracepoint(btf, "sched_switch")) {
                *ret_missing = "sched_switch";
                return -EOPNOTSUPP;
        }
        if (btf__find_by_name_kind(btf, OFFCPU_TASK_WORK_KFUNC, BTF_KIND_FUNC) >= 0) {
                *ret_at = OFFCPU_RECORD_AT_TASK_WORK;
                return 0;
        }
        if (!btf_has_tracepoint(btf, "sys_exit")) {
                *ret_missing = "sys_exit";
                return -EOPNOTSUPP;
        }
        *ret_at = OFFCPU_RECORD_AT_SYS_EXIT;
        return 0;
}

int offcpu_probe(char **ret_reason, OffcpuRecordAt *ret_at) {
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
        r = offcpu_probe_btf(btf, &missing, ret_at);
        btf__free(btf);
        if (r < 0 && asprintf(ret_reason,
                              "off-CPU profiling needs the BTF-typed %s tracepoint, which this kernel lacks",
                              missing) < 0)
                return -ENOMEM;
        return r;
}

const char *offcpu_record_at_to_string(OffcpuRecordAt at) {
        switch (at) {
        case OFFCPU_RECORD_AT_TASK_WORK:
                return "task-work";
        case OFFCPU_RECORD_AT_SYS_EXIT:
                return "sys_exit";
        default:
                return "none";
        }
}
