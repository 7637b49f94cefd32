/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "key-path.h"

int error_message(char **ret_error, int r, const char *fmt, ...) {
        va_list ap;

        if (ret_error) {
                va_start(ap, fmt);
                if (vasprintf(ret_error, fmt, ap) < 0)
                        *ret_error = NULL;
                va_end(ap);
        }
        return r;
}

int key_path_error(char **error, const char *path, const char *fmt, ...) {
        _cleanup_free_ char *msg = NULL;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vasprintf(&msg, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;

        free(*error);
        *error = NULL;
        if (asprintf(error, "%s: %s", path && *path ? path : "$", msg) < 0) {
                *error = NULL;
                return -ENOMEM;
        }
        return -EINVAL;
}

char *key_path_child(const char *parent, const char *key) {
        char *p;

        if (asprintf(&p, "%s%s%s", parent, *parent ? "." : "", key) < 0)
                return NULL;
        return p;
}

char *key_path_index(const char *parent, size_t i) {
        char *p;

        if (asprintf(&p, "%s[%zu]", parent, i) < 0)
                return NULL;
        return p;
}
