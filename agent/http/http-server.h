/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <sys/socket.h>
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
/* How soon MHD runs again after a run that only found TLS handshakes
 * waiting (http-tls.h), instead of at once. */
#define HTTP_SERVER_STALL_MSEC 250U
/* How long a connection may take to send a request's line and headers,
 * however slowly (each byte resets libmicrohttpd's idle timeout). */
#define HTTP_SERVER_HEAD_DEADLINE_USEC (10 * USEC_PER_SEC)
/* Connections libmicrohttpd accepts beyond max_connections: past
 * max_connections the one that has waited longest for its head is taken
 * back (http-slots.h); these are for when all of them serve requests. */
#define HTTP_SERVER_SLOTS_HEADROOM 16U
/* The status of a request whose client hung up before its answer (nginx's
 * 499: counted among the errors, never read by anyone). */
#define HTTP_STATUS_CLIENT_CLOSED_REQUEST 499U

typedef struct HttpServer HttpServer;

typedef struct HttpServerOptions {
        const char *listen; /* "ADDRESS:PORT" (socket-address.h) */
        unsigned max_connections;
        unsigned max_connections_per_client; /* from one address (0: no limit); not on a Unix socket */
        unsigned timeout_sec;
        /* HTTPS (GnuTLS through libmicrohttpd): both or neither. Reloaded
         * when the files change (http-tls.h), without a restart. */
        const char *tls_cert_file, *tls_key_file;
        const char *tls_priorities; /* GnuTLS priority string (checked by the config) */
        /* A listener that asks no token (a loopback address or a Unix
         * socket, without Kubernetes): requests of web pages refused, and
         * on TCP a Host other than the loopback names and allowed_hosts
         * (NULL-terminated, may be NULL) too (http-guard.h). */
        bool local;
        char *const *allowed_hosts;
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

/* A request whose answer may come later: an asynchronous handler gets it,
 * reads what it needs of it (path, query, headers: only during the
 * handler's call) and either replies at once or keeps it and replies
 * later, from any event of the loop. Until then the connection is
 * suspended (MHD_suspend_connection(): no timeout, no event); the reply
 * resumes it. If the client hangs up first (the connection's socket reads
 * end of file: EPOLLRDHUP, watched while the request waits; a client that
 * only half-closes its side counts as gone, as Go's net/http server
 * counts it), or the listener goes away, the cancel callback (if set) is
 * called with the reason and the request must be forgotten. */
typedef struct HttpRequest HttpRequest;
typedef int (*HttpAsyncHandler)(HttpRequest *req, void *userdata);
typedef enum HttpCancelReason {
        HTTP_CANCEL_CLIENT_GONE,
        HTTP_CANCEL_SERVER_GONE,
} HttpCancelReason;
typedef void (*HttpRequestCancel)(void *userdata, HttpCancelReason reason);

const char *http_request_path(const HttpRequest *req);
bool http_request_is_head(const HttpRequest *req);
/* A decoded query argument, or NULL. */
const char *http_request_query(const HttpRequest *req, const char *key);
/* The name of a query argument not in 'allowed' (NULL-terminated), or NULL. */
const char *http_request_unknown_query(const HttpRequest *req, const char *const *allowed);
const char *http_request_header(const HttpRequest *req, const char *name);
/* The first query argument without a value ("?seconds", no '='), or NULL. */
const char *http_request_valueless_query(const HttpRequest *req);
/* How many times the request has the header (name: any case). */
unsigned http_request_header_count(const HttpRequest *req, const char *name);
/* The client's address (MHD_CONNECTION_INFO_CLIENT_ADDRESS: AF_INET,
 * AF_INET6, AF_UNIX), valid while the request is; NULL when unknown. */
const struct sockaddr *http_request_client_address(const HttpRequest *req);
/* Takes 'body' (malloc()ed; freed on failure too). The request is done with
 * for its caller after this. */
int http_request_reply(HttpRequest *req, unsigned status, const char *content_type, char *body, size_t size);
int http_request_reply_text(HttpRequest *req, unsigned status, const char *text);
/* The answer is a file's first 'size' bytes, streamed (takes fd, closed on failure too). */
int http_request_reply_fd(HttpRequest *req, unsigned status, const char *content_type, int fd,
                          uint64_t size);
/* A header of the answer besides Content-Type (at most HTTP_REQUEST_HEADERS_MAX), before the reply. */
#define HTTP_REQUEST_HEADERS_MAX 4U
int http_request_add_header(HttpRequest *req, const char *name, const char *value);
void http_request_set_cancel(HttpRequest *req, HttpRequestCancel cancel, void *userdata);

typedef struct HttpServerStats {
        uint64_t requests; /* answered, any status */
        uint64_t errors; /* 4xx and 5xx among them */
        uint64_t suspended; /* requests waiting for their answer now */
        uint64_t abandoned; /* waiting requests whose client hung up */
        uint64_t tls_reloads; /* new certificate/key pairs loaded */
        uint64_t stalled_runs; /* runs that found only TLS handshakes waiting for bytes (http-tls.h) */
        uint64_t evicted; /* connections waiting for a head taken back for a new one (http-slots.h) */
        uint64_t head_timeouts; /* connections that waited HTTP_SERVER_HEAD_DEADLINE_USEC for a head */
} HttpServerStats;

/* Binds and listens (-EADDRINUSE and friends), and serves from 'event'. */
int http_server_new(sd_event *event, const HttpServerOptions *opts, HttpServer **ret);
HttpServer *http_server_free(HttpServer *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpServer *, http_server_free);

/* path: exact, e.g. "/metrics". -EEXIST when taken, -E2BIG past HTTP_SERVER_ROUTES_MAX. */
int http_server_add_route(HttpServer *s, const char *path, HttpHandler handler, void *userdata);
/* An asynchronous route: path exact, or every path that starts with it
 * when it ends with '/' ("/reports/"). Exact routes are matched first. */
int http_server_add_async_route(HttpServer *s, const char *path, HttpAsyncHandler handler, void *userdata);
bool http_server_is_tls(const HttpServer *s);

void http_server_stats(const HttpServer *s, HttpServerStats *ret);
