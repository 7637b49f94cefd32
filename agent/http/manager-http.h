/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "http-deps.h"

/* The http room's state (HttpRoom): made with what it needs from above
 * (HttpRoomDeps, http-deps.h), listening only once started. Freeing it
 * stops it. */
int http_room_new(const HttpRoomDeps *deps, HttpRoom **ret);
HttpRoom *http_room_free(HttpRoom *room);

/* Listens on the config's http.listen (if any) and serves /metrics. A
 * listener that cannot be made is logged, and the agent goes on without
 * it. */
int manager_http_start(HttpRoom *room);
/* A reload cannot move the listener: says so when "http" changed. */
void manager_http_reload(HttpRoom *room, const Config *new_config);
void manager_http_stop(HttpRoom *room);

/* A session ended (its report written, or error): answers the pull that
 * started it, if any (manager-pull.h). */
void http_room_session_ended(HttpRoom *room, const char *id, const char *report_dirs, int error);
