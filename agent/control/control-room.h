/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The control room's own state (opaque above the room: control-deps.h). */

#include "control-deps.h"

struct ControlRoom {
        ControlDeps deps;
};
