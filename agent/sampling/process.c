/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <libproc2/pids.h>

#include "process.h"

struct ProcessReader {
        struct pids_info *info;
};

enum {
        ITEM_CMD,
        ITEM_CMDLINE
};
static enum pids_item items[] = { PIDS_CMD, PIDS_CMDLINE };

int process_reader_new(ProcessReader **ret) {
        ProcessReader *p = calloc(1, sizeof(*p));
        int r;

        if (!p)
                return -ENOMEM;
        r = procps_pids_new(&p->info, items, (int) ELEMENTSOF(items));
        if (r < 0) {
                free(p);
                return r;
        }
        *ret = p;
        return 0;
}

ProcessReader *process_reader_free(ProcessReader *p) {
        if (!p)
                return NULL;
        procps_pids_unref(&p->info);
        free(p);
        return NULL;
}

int process_reader_read(ProcessReader *p, pid_t pid, char **ret_comm, char **ret_cmdline) {
        unsigned these = (unsigned) pid;
        struct pids_fetch *f;

        f = procps_pids_select(p->info, &these, 1, PIDS_SELECT_PID);
        if (!f)
                return errno > 0 ? -errno : -ESRCH;
        if (f->counts->total < 1 || !f->stacks[0])
                return -ESRCH;

        const char *comm = PIDS_VAL(ITEM_CMD, str, f->stacks[0], p->info);
        const char *cmdline = PIDS_VAL(ITEM_CMDLINE, str, f->stacks[0], p->info);
        char *c = strdup(comm ?: "?");
        char *l = NULL;
        if (cmdline && cmdline[0] && !streq(cmdline, "-"))
                l = strdup(cmdline);
        else if (asprintf(&l, "[%s]", comm ?: "?") < 0)
                l = NULL;
        if (!c || !l) {
                free(c);
                free(l);
                return -ENOMEM;
        }
        *ret_comm = c;
        *ret_cmdline = l;
        return 0;
}
