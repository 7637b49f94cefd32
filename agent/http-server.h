/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-event.h>

#include "macro.h"

/* The agent's HTTP listener: GNU libmicrohttpd in its external-epoll mode
 * on the agent's sd-event loop. MHD's epoll fd is an io source and MHD's
 * timeout a timer; both call MHD_run(), which does what is ready without
 * blocking. No thread, no blocking call: a slow or silent client only
 * holds one of the 'max_connections' connections until it is idle for
 * 'timeout_sec'; a request's line and headers must fit in
 * HTTP_SERVER_MEMORY_LIMIT (else 431/414); only GET and HEAD without a
 * body are served (405, 413).
 *
 * Routes map an exact path to a handler that answers at once (on the
 * loop). Other paths get 404. Routes are added by their owners
 * (manager-http.c: /metrics), so that more (e.g. profiles) can share the
 * listener. */

#define HTTP_SERVER_MEMORY_LIMIT (32U * 1024U)
#define HTTP_SERVER_ROUTES_MAX 16U

typedef struct HttpServer HttpServer;

typedef struct HttpServerOptions {
        const char *listen; /* "ADDRESS:PORT" (socket-address.h) */
        unsigned max_connections;
        unsigned timeout_sec;
} HttpServerOptions;

/* A handler's answer: status, content type (static) and body (malloc()ed,
 * taken by the server). */
typedef struct HttpResponse {
        unsigned status;
        const char *content_type;
        char *body;
        size_t size;
} HttpResponse;

typedef int (*HttpHandler)(const char *path, HttpResponse *ret, void *userdata);

typedef struct HttpServerStats {
        uint64_t requests; /* answered, any status */
        uint64_t errors; /* 4xx and 5xx among them */
} HttpServerStats;

/* Binds and listens (-EADDRINUSE and friends), and serves from 'event'. */
int http_server_new(sd_event *event, const HttpServerOptions *opts, HttpServer **ret);
HttpServer *http_server_free(HttpServer *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpServer *, http_server_free);

/* path: exact, e.g. "/metrics". -EEXIST when taken, -E2BIG past HTTP_SERVER_ROUTES_MAX. */
int http_server_add_route(HttpServer *s, const char *path, HttpHandler handler, void *userdata);

void http_server_stats(const HttpServer *s, HttpServerStats *ret);
