/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A fake /proc for tests of /proc/PID/maps readers: ROOT/PID/maps. */

#include <stdio.h>
#include <sys/stat.h>

#include "tests.h"

static inline void write_proc_maps(const char *root, int pid, const char *text) {
        _cleanup_free_ char *dir = NULL, *path = NULL;
        ASSERT_TRUE(asprintf(&dir, "%s/%d", root, pid) > 0);
        (void) mkdir(dir, 0755);
        ASSERT_TRUE(asprintf(&path, "%s/maps", dir) > 0);
        FILE *f = fopen(path, "we");
        ASSERT_NOT_NULL(f);
        fputs(text, f);
        ASSERT_EQ(fclose(f), 0);
}
