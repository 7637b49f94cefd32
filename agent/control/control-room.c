/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The control room's own state: made and freed (see control-deps.h). */
#include <errno.h>
#include <stdlib.h>

#include "control-room.h"

int control_room_new(const ControlDeps *deps, ControlRoom **ret) {
        ControlRoom *c = calloc(1, sizeof(*c));

        if (!c)
                return -ENOMEM;
        c->deps = *deps;
        c->bus_listen_fd = -EBADF;
        *ret = c;
        return 0;
}

ControlRoom *control_room_free(ControlRoom *c) {
        free(c);
        return NULL;
}
