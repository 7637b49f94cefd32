/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "manager.h"

/* Listens on the config's http.listen (if any) and serves /metrics. A
 * listener that cannot be made is logged, and the agent goes on without
 * it. */
int manager_http_start(Manager *m);
/* A reload cannot move the listener: says so when "http" changed. */
void manager_http_reload(Manager *m, const Config *new_config);
void manager_http_stop(Manager *m);
