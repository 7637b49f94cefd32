/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libmicrohttpd on sd-event: see http-server.h. */
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "http-guard.h"
#include "http-server.h"
#include "http-slots.h"
#include "http-tls.h"
#include "log.h"
#include "socket-address.h"

typedef struct HttpRoute {
        char *path;
        HttpHandler handler;
        HttpAsyncHandler async_handler;
        void *userdata;
} HttpRoute;

struct HttpRequest {
        HttpServer *server;
        struct MHD_Connection *connection;
        HttpRequest *prev, *next; /* in server->requests */
        char *path;
        bool head; /* HEAD, not GET */
        bool in_handler; /* the handler's call is running: a reply is queued on return */
        bool suspended;
        bool replied, queued;
        unsigned status;
        const char *content_type;
        char *body;
        size_t size;
        int fd; /* the answer is this file's bytes (size of them), when >= 0 */
        char *headers[HTTP_REQUEST_HEADERS_MAX][2]; /* more headers of the answer: name, value */
        size_t n_headers;
        HttpRequestCancel cancel;
        void *cancel_userdata;
        sd_event_source *hangup; /* the client's end of file, while suspended */
};

struct HttpServer {
        sd_event *event;
        struct MHD_Daemon *daemon;
        sd_event_source *io, *timer;
        unsigned max_connections;
        HttpRoute routes[HTTP_SERVER_ROUTES_MAX];
        size_t n_routes;
        HttpRequest *requests; /* asynchronous ones, until their connection completes */
        HttpTls *tls;
        /* A listener that asks no token (http-guard.h): no page's request;
         * on TCP, a Host that names it (port, and allowed_hosts besides
         * the loopback names). */
        bool guard, guard_host;
        unsigned port;
        char **allowed_hosts;
        char *unix_path; /* the socket file, removed when the listener goes */
        HttpServerStats stats;
        uint64_t events; /* connections opened and closed, requests begun: what a run did besides I/O */
        HttpSlots slots; /* the connections (http-slots.h) */
        sd_event_source *head_timer; /* the next head deadline */
};

static void mhd_log(void *cls, const char *fmt, va_list ap) {
        _cleanup_free_ char *s = NULL;

        if (vasprintf(&s, fmt, ap) < 0)
                return;
        /* MHD's messages end with a newline. */
        s[strcspn(s, "\n")] = 0;
        log_debug("http: %s", s);
}

static void http_server_arm(HttpServer *s, bool stalled);

/* MHD does everything that is ready (accepts, reads, answers, writes,
 * closes idle connections) without blocking, then says when it wants to
 * run again. */
static unsigned http_server_connections(HttpServer *s) {
        const union MHD_DaemonInfo *i = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_CURRENT_CONNECTIONS);
        return i ? i->num_connections : 0;
}

static void http_server_run(HttpServer *s) {
        unsigned limit = s->max_connections + HTTP_SERVER_SLOTS_HEADROOM;
        bool full = http_server_connections(s) >= limit;
        uint64_t events = s->events;
        HttpTlsIo io = {};

        http_tls_io_begin(&io);
        if (MHD_run(s->daemon) != MHD_YES)
                log_debug("http: MHD_run() failed.");
        http_tls_io_end();
        /* At the limit MHD takes the listening socket out of its epoll
         * set, and puts it back at the start of its next run: when this run
         * freed a slot, that next run is now, or connections waiting in the
         * backlog would wait for an event that never comes. */
        if (full && http_server_connections(s) < limit && MHD_run(s->daemon) != MHD_YES)
                log_debug("http: MHD_run() failed.");
        /* Over TLS: a run that only read nothing (http-tls.h) and did
         * nothing else did not make MHD's "run again at once" true. */
        http_server_arm(s, s->tls && io.again > 0 && io.moved == 0 && s->events == events);
}

/* 'stalled': the last run found only TLS handshakes waiting for bytes
 * that have not come (http-tls.h). MHD says 0 for as long as they wait;
 * their bytes will wake the epoll fd (the io source) when they come, so
 * the timer only has to serve MHD's timeouts (of seconds): at most every
 * HTTP_SERVER_STALL_MSEC instead of at once. */
static void http_server_arm(HttpServer *s, bool stalled) {
        MHD_UNSIGNED_LONG_LONG msec;

        if (MHD_get_timeout(s->daemon, &msec) != MHD_YES) {
                (void) sd_event_source_set_enabled(s->timer, SD_EVENT_OFF);
                return;
        }
        if (msec == 0 && stalled) {
                msec = HTTP_SERVER_STALL_MSEC;
                s->stats.stalled_runs++;
        }
        if (sd_event_source_set_time_relative(s->timer, MIN(msec, (MHD_UNSIGNED_LONG_LONG) 3600000) *
                                                                USEC_PER_MSEC) < 0 ||
            sd_event_source_set_enabled(s->timer, SD_EVENT_ONESHOT) < 0)
                log_warning("http: failed to arm the timer, idle connections may stay longer.");
}

/* What the server keeps of a connection (its socket context). */
typedef struct HttpConn {
        HttpSlot slot; /* in the server's slots until taken back or closed */
        bool in_slots;
        bool bad_escape; /* its request's line had a %00 (unescape()) */
} HttpConn;

/* Takes a connection back: out of the slots, its socket shut down; MHD
 * finds it closed at its next run and frees it (on_connection(CLOSED)). */
static void conn_drop(HttpServer *s, HttpConn *conn) {
        http_slots_remove(&s->slots, &conn->slot);
        conn->in_slots = false;
        (void) shutdown(conn->slot.fd, SHUT_RDWR);
}

static void head_timer_arm(HttpServer *s) {
        uint64_t at = http_slots_next_expiry(&s->slots, HTTP_SERVER_HEAD_DEADLINE_USEC);

        if (at == UINT64_MAX) {
                (void) sd_event_source_set_enabled(s->head_timer, SD_EVENT_OFF);
                return;
        }
        if (sd_event_source_set_time(s->head_timer, at) < 0 ||
            sd_event_source_set_enabled(s->head_timer, SD_EVENT_ONESHOT) < 0)
                log_warning("http: failed to arm the head deadline's timer.");
}

/* Connections that waited HTTP_SERVER_HEAD_DEADLINE_USEC for a request's
 * head go, however slowly its bytes came (each resets MHD's idle timeout:
 * slowloris). */
static int on_head_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        HttpServer *s = userdata;
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        HttpSlot *slot;

        while ((slot = http_slots_oldest_waiting(&s->slots, NULL)) &&
               slot->since + HTTP_SERVER_HEAD_DEADLINE_USEC <= now) {
                conn_drop(s, (HttpConn *) slot);
                s->stats.head_timeouts++;
        }
        head_timer_arm(s);
        return 0;
}

/* A new connection past max_connections: the one that has waited longest
 * for its head goes, so that a new client (a scrape) always gets in. When
 * all of them serve requests, MHD's own limit (max_connections plus
 * HTTP_SERVER_SLOTS_HEADROOM) applies. */
static void slots_make_room(HttpServer *s, const HttpConn *new) {
        HttpSlot *victim;

        while (s->slots.n > s->max_connections &&
               (victim = http_slots_oldest_waiting(&s->slots, &new->slot))) {
                conn_drop(s, (HttpConn *) victim);
                s->stats.evicted++;
        }
}

static HttpConn *conn_of(struct MHD_Connection *c) {
        const union MHD_ConnectionInfo *i = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        return i ? i->socket_context : NULL;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
        HttpServer *s = cls;
        HttpConn *conn;

        s->events++;
        if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
                conn = *socket_context;
                if (conn && conn->in_slots) {
                        http_slots_remove(&s->slots, &conn->slot);
                        head_timer_arm(s);
                }
                free(conn);
                *socket_context = NULL;
                return;
        }
        conn = *socket_context =
                calloc(1, sizeof(HttpConn)); /* NULL: its checks are skipped, not its request */
        if (conn) {
                const union MHD_ConnectionInfo *fd =
                        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

                if (fd && fd->connect_fd >= 0) {
                        http_slots_add(&s->slots, &conn->slot, fd->connect_fd, now_usec(CLOCK_MONOTONIC));
                        conn->in_slots = true;
                        slots_make_room(s, conn);
                        head_timer_arm(s);
                }
        }
        if (s->tls) {
                const union MHD_ConnectionInfo *i =
                        MHD_get_connection_info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION);

                if (i && i->tls_session)
                        http_tls_io_attach(i->tls_session);
        }
}

/* MHD's unescaping of the path and the query, noting a %00: decoded, it
 * would end the C string early ("summary.json%00.x" read as
 * "summary.json"), so such a request is refused (on_request()). */
static size_t unescape(void *cls, struct MHD_Connection *c, char *text) {
        HttpConn *conn = conn_of(c);

        for (const char *p = text; (p = strchr(p, '%')); p++)
                if (p[1] == '0' && p[2] == '0' && conn)
                        conn->bad_escape = true;
        return MHD_http_unescape(text);
}

static int on_io(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        http_server_run(userdata);
        return 0;
}

static int on_timer(sd_event_source *source, uint64_t usec, void *userdata) {
        http_server_run(userdata);
        return 0;
}

static enum MHD_Result reply(HttpServer *s, struct MHD_Connection *c, HttpRequest *req, unsigned status,
                             const char *content_type, char *body, size_t size) {
        struct MHD_Response *r;
        enum MHD_Result ret;

        if (req && req->fd >= 0) {
                /* Streamed from the file (sendfile() without TLS), a
                 * buffer at a time: memory does not grow with its size. */
                free(body);
                r = MHD_create_response_from_fd64(req->size, req->fd);
                if (r)
                        req->fd = -EBADF; /* MHD closes it */
        } else {
                r = MHD_create_response_from_buffer(size, body, MHD_RESPMEM_MUST_FREE);
                if (!r)
                        free(body);
        }
        if (!r)
                return MHD_NO; /* MHD closes the connection */
        (void) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        for (size_t i = 0; req && i < req->n_headers; i++)
                (void) MHD_add_response_header(r, req->headers[i][0], req->headers[i][1]);
        if (status == MHD_HTTP_METHOD_NOT_ALLOWED && !MHD_get_response_header(r, MHD_HTTP_HEADER_ALLOW))
                (void) MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
        if (status == MHD_HTTP_UNAUTHORIZED)
                (void) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
        ret = MHD_queue_response(c, status, r);
        MHD_destroy_response(r);
        s->stats.requests++;
        if (status >= 400)
                s->stats.errors++;
        return ret;
}

static enum MHD_Result reply_text(HttpServer *s, struct MHD_Connection *c, unsigned status,
                                  const char *text) {
        char *body = strdup(text);

        if (!body)
                return MHD_NO;
        return reply(s, c, NULL, status, "text/plain; charset=utf-8", body, strlen(body));
}

static void request_free(HttpRequest *req) {
        HttpServer *s = req->server;

        if (req->prev)
                req->prev->next = req->next;
        else
                s->requests = req->next;
        if (req->next)
                req->next->prev = req->prev;
        req->hangup = sd_event_source_disable_unref(req->hangup);
        for (size_t i = 0; i < req->n_headers; i++) {
                free(req->headers[i][0]);
                free(req->headers[i][1]);
        }
        safe_close(req->fd);
        free(req->body);
        free(req->path);
        free(req);
}

static enum MHD_Result request_queue(HttpRequest *req) {
        req->queued = true;
        return reply(req->server, req->connection, req, req->status, req->content_type, TAKE_PTR(req->body),
                     req->size);
}

static const HttpRoute *route_find(HttpServer *s, const char *url) {
        for (size_t i = 0; i < s->n_routes; i++)
                if (streq(url, s->routes[i].path))
                        return &s->routes[i];
        for (size_t i = 0; i < s->n_routes; i++) {
                const char *p = s->routes[i].path;
                size_t n = strlen(p);

                if (s->routes[i].async_handler && n > 1 && p[n - 1] == '/' && strncmp(url, p, n) == 0)
                        return &s->routes[i];
        }
        return NULL;
}

/* The client hung up while its request waited: its owner forgets it, and
 * the answer that resumes the connection lets MHD find the socket closed
 * and free the connection. */
static int on_hangup(sd_event_source *source, int fd, uint32_t revents, void *userdata) {
        HttpRequest *req = userdata;
        HttpRequestCancel cancel = req->cancel;

        req->hangup = sd_event_source_disable_unref(req->hangup);
        req->cancel = NULL;
        req->server->stats.abandoned++;
        log_debug("http: the client of %s hung up before its answer.", req->path);
        if (cancel)
                cancel(req->cancel_userdata, HTTP_CANCEL_CLIENT_GONE);
        (void) http_request_reply_text(req, HTTP_STATUS_CLIENT_CLOSED_REQUEST, "The client hung up.\n");
        return 0;
}

/* Watches the suspended request's socket for the client's end of file (in
 * the loop's epoll set: MHD's own does not watch a suspended connection).
 * Without it (no fd, no memory) the request still ends with its answer. */
static void watch_hangup(HttpRequest *req) {
        const union MHD_ConnectionInfo *i =
                MHD_get_connection_info(req->connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        int r;

        if (!i || i->connect_fd < 0)
                return;
        r = sd_event_add_io(req->server->event, &req->hangup, i->connect_fd, EPOLLRDHUP, on_hangup, req);
        if (r < 0) {
                log_debug_errno(r, "http: cannot watch the connection of %s for a hang-up: %m", req->path);
                return;
        }
        (void) sd_event_source_set_description(req->hangup, "http-hangup");
}

static enum MHD_Result on_request_async(HttpServer *s, struct MHD_Connection *c, const char *url,
                                        const char *method, const HttpRoute *route, void **con_cls) {
        HttpRequest *req;
        int r;

        req = calloc(1, sizeof(*req));
        if (!req)
                return MHD_NO;
        req->server = s;
        req->connection = c;
        req->fd = -EBADF;
        req->head = streq(method, MHD_HTTP_METHOD_HEAD);
        req->path = strdup(url);
        if (!req->path) {
                free(req);
                return MHD_NO;
        }
        req->next = s->requests;
        if (s->requests)
                s->requests->prev = req;
        s->requests = req;
        *con_cls = req; /* freed when the connection completes the request */

        req->in_handler = true;
        r = route->async_handler(req, route->userdata);
        req->in_handler = false;
        if (r < 0 && !req->replied) {
                log_warning_errno(r, "http: failed to answer %s: %m", url);
                (void) http_request_reply_text(req, MHD_HTTP_INTERNAL_SERVER_ERROR, "Internal error.\n");
        }
        if (req->replied)
                return request_queue(req);
        MHD_suspend_connection(c);
        req->suspended = true;
        s->stats.suspended++;
        watch_hangup(req);
        return MHD_YES;
}

/* Why a request is refused before its route: its status (its text in
 * *ret_text), 0 when it may go on, or REFUSED_BY_MHD when MHD answers it. */
#define REFUSED_BY_MHD 1U
static unsigned request_refusal(HttpServer *s, struct MHD_Connection *c, const char *method,
                                const char **ret_text) {
        HttpConn *conn = conn_of(c);
        const char *length = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);

        if (conn && conn->bad_escape) {
                conn->bad_escape = false;
                *ret_text = "A NUL byte (%00) in the request is refused.\n";
                return MHD_HTTP_BAD_REQUEST;
        }
        /* A listener that asks no token: a page of a browser on the host
         * must not reach it (http-guard.h). */
        if (s->guard &&
            http_request_is_from_page(MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin"),
                                      MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-Fetch-Site"))) {
                *ret_text = "Requests from web pages are refused.\n";
                return MHD_HTTP_FORBIDDEN;
        }
        if (s->guard_host &&
            !http_host_is_allowed(MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST),
                                  s->port, s->allowed_hosts)) {
                *ret_text = "The Host header does not name this listener (127.0.0.1, localhost, [::1] or "
                            "http.allowedHosts).\n";
                return MHD_HTTP_FORBIDDEN;
        }
        if (!streq(method, MHD_HTTP_METHOD_GET) && !streq(method, MHD_HTTP_METHOD_HEAD)) {
                *ret_text = "Method not allowed.\n";
                return MHD_HTTP_METHOD_NOT_ALLOWED;
        }
        /* A body is refused before it is read; "Content-Length: 0" is none,
         * and one that is not a number MHD answered itself (400) before
         * calling us (libmicrohttpd 0.9.75 then writes its status line and
         * headers twice, and closes: its bug, out of our reach; docs/pull.md). */
        if (length && length[strspn(length, "0123456789")] != 0)
                return REFUSED_BY_MHD;
        if ((length && length[strspn(length, "0")] != 0) ||
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
                *ret_text = "No request body is accepted.\n";
                return MHD_HTTP_CONTENT_TOO_LARGE;
        }
        return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls) {
        HttpServer *s = cls;
        HttpResponse resp = {};
        const HttpRoute *route;
        const char *text = NULL;
        HttpConn *conn = conn_of(c);
        unsigned status;
        int r;

        s->events++;
        /* Its head is in: the connection serves a request now. */
        if (conn && conn->in_slots && !conn->slot.busy) {
                http_slots_set_busy(&s->slots, &conn->slot, true, 0);
                head_timer_arm(s);
        }
        if (*con_cls) {
                /* A suspended request, resumed by its reply. */
                HttpRequest *req = *con_cls;

                if (req->replied && !req->queued)
                        return request_queue(req);
                return MHD_YES;
        }

        /* Answered on the first call, with the headers: a request with a
         * body is refused before its body is read. */
        status = request_refusal(s, c, method, &text);
        if (status == REFUSED_BY_MHD)
                return MHD_YES;
        if (status > 0)
                return reply_text(s, c, status, text);

        route = route_find(s, url);
        if (!route)
                return reply_text(s, c, MHD_HTTP_NOT_FOUND, "Not found.\n");
        if (route->async_handler)
                return on_request_async(s, c, url, method, route, con_cls);
        r = route->handler(url, &resp, route->userdata);
        if (r < 0) {
                free(resp.body);
                log_warning_errno(r, "http: failed to answer %s: %m", url);
                return reply_text(s, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "Internal error.\n");
        }
        return reply(s, c, NULL, resp.status ?: MHD_HTTP_OK,
                     resp.content_type ?: "text/plain; charset=utf-8", resp.body, resp.size);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
        HttpServer *s = cls;
        HttpRequest *req = *con_cls;
        HttpConn *conn = conn_of(c);

        /* Waiting for the next request's head (keep-alive), from now. */
        if (conn && conn->in_slots && conn->slot.busy) {
                http_slots_set_busy(&s->slots, &conn->slot, false, now_usec(CLOCK_MONOTONIC));
                head_timer_arm(s);
        }

        if (!req)
                return;
        *con_cls = NULL;
        if (!req->replied && req->cancel)
                req->cancel(req->cancel_userdata, HTTP_CANCEL_SERVER_GONE);
        if (req->suspended)
                req->server->stats.suspended--;
        request_free(req);
}

const char *http_request_path(const HttpRequest *req) {
        return req->path;
}

bool http_request_is_head(const HttpRequest *req) {
        return req->head;
}

const char *http_request_query(const HttpRequest *req, const char *key) {
        return req->in_handler ? MHD_lookup_connection_value(req->connection, MHD_GET_ARGUMENT_KIND, key)
                               : NULL;
}

typedef struct UnknownQuery {
        const char *const *allowed;
        const char *unknown;
} UnknownQuery;

static enum MHD_Result on_query_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        UnknownQuery *u = cls;

        for (const char *const *a = u->allowed; *a; a++)
                if (streq(*a, key))
                        return MHD_YES;
        u->unknown = key;
        return MHD_NO;
}

static enum MHD_Result on_valueless_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                        const char *value) {
        if (value)
                return MHD_YES;
        *(const char **) cls = key;
        return MHD_NO;
}

const char *http_request_valueless_query(const HttpRequest *req) {
        const char *key = NULL;

        if (req->in_handler)
                (void) MHD_get_connection_values(req->connection, MHD_GET_ARGUMENT_KIND, on_valueless_arg,
                                                 &key);
        return key;
}

typedef struct HeaderCount {
        const char *name;
        unsigned n;
} HeaderCount;

static enum MHD_Result on_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        HeaderCount *h = cls;

        if (strcasecmp(key, h->name) == 0)
                h->n++;
        return MHD_YES;
}

unsigned http_request_header_count(const HttpRequest *req, const char *name) {
        HeaderCount h = { .name = name };

        if (req->in_handler)
                (void) MHD_get_connection_values(req->connection, MHD_HEADER_KIND, on_header, &h);
        return h.n;
}

const char *http_request_unknown_query(const HttpRequest *req, const char *const *allowed) {
        UnknownQuery u = { .allowed = allowed };

        if (!req->in_handler)
                return NULL;
        (void) MHD_get_connection_values(req->connection, MHD_GET_ARGUMENT_KIND, on_query_arg, &u);
        return u.unknown;
}

const char *http_request_header(const HttpRequest *req, const char *name) {
        return req->in_handler ? MHD_lookup_connection_value(req->connection, MHD_HEADER_KIND, name) : NULL;
}

const struct sockaddr *http_request_client_address(const HttpRequest *req) {
        const union MHD_ConnectionInfo *i =
                req && req->connection
                        ? MHD_get_connection_info(req->connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS)
                        : NULL;

        return i ? i->client_addr : NULL;
}

int http_request_reply(HttpRequest *req, unsigned status, const char *content_type, char *body,
                       size_t size) {
        if (!req || req->replied) {
                free(body);
                return -EALREADY;
        }
        req->replied = true;
        req->status = status;
        req->content_type = content_type;
        req->body = body;
        req->size = body || req->fd >= 0 ? size : 0;
        req->cancel = NULL;
        req->hangup = sd_event_source_disable_unref(req->hangup);
        if (req->suspended) {
                /* The next MHD_run() calls on_request() again, which queues it:
                 * run it now (MHD's ITC does not wake its epoll fd in the
                 * external-epoll mode of 0.9.75). */
                req->suspended = false;
                req->server->stats.suspended--;
                MHD_resume_connection(req->connection);
                /* And run MHD soon, whatever its epoll fd says. */
                (void) sd_event_source_set_time_relative(req->server->timer, 0);
                (void) sd_event_source_set_enabled(req->server->timer, SD_EVENT_ONESHOT);
        }
        return 0;
}

int http_request_add_header(HttpRequest *req, const char *name, const char *value) {
        char *n, *v;

        if (!req || req->replied || !name || !value)
                return -EINVAL;
        if (req->n_headers >= HTTP_REQUEST_HEADERS_MAX)
                return -E2BIG;
        n = strdup(name);
        v = strdup(value);
        if (!n || !v) {
                free(n);
                free(v);
                return -ENOMEM;
        }
        req->headers[req->n_headers][0] = n;
        req->headers[req->n_headers][1] = v;
        req->n_headers++;
        return 0;
}

int http_request_reply_fd(HttpRequest *req, unsigned status, const char *content_type, int fd,
                          uint64_t size) {
        if (!req || req->replied) {
                safe_close(fd);
                return -EALREADY;
        }
        req->fd = fd;
        return http_request_reply(req, status, content_type, NULL, size);
}

int http_request_reply_text(HttpRequest *req, unsigned status, const char *text) {
        char *body = strdup(text);

        if (!body) {
                (void) http_request_reply(req, MHD_HTTP_INTERNAL_SERVER_ERROR, "text/plain; charset=utf-8",
                                          NULL, 0);
                return -ENOMEM;
        }
        return http_request_reply(req, status, "text/plain; charset=utf-8", body, strlen(body));
}

void http_request_set_cancel(HttpRequest *req, HttpRequestCancel cancel, void *userdata) {
        req->cancel = cancel;
        req->cancel_userdata = userdata;
}

/* A Unix socket is made owner-only (0600: the agent runs as root): file
 * permissions are its authentication. A socket file left by a previous
 * run is replaced; anything else at that path is not. */
static int bind_unix(int fd, const struct sockaddr_un *u, socklen_t len) {
        struct stat st;
        mode_t old;
        int r;

        if (lstat(u->sun_path, &st) >= 0) {
                if (!S_ISSOCK(st.st_mode))
                        return -EEXIST;
                if (unlink(u->sun_path) < 0)
                        return -errno;
        }
        old = umask(0177);
        r = bind(fd, (const struct sockaddr *) u, len);
        umask(old);
        return r < 0 ? -errno : 0;
}

static int listen_socket(const char *address) {
        _cleanup_close_ int fd = -EBADF;
        struct sockaddr_storage sa;
        socklen_t len;
        int one = 1, r;

        if (socket_address_parse(address, &sa, &len, NULL) < 0)
                return -EINVAL;
        fd = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
                return -errno;
        if (sa.ss_family == AF_UNIX) {
                r = bind_unix(fd, (const struct sockaddr_un *) &sa, len);
                if (r < 0)
                        return r;
                if (listen(fd, 64) < 0)
                        return -errno;
                return TAKE_FD(fd);
        }
        (void) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (sa.ss_family == AF_INET6)
                (void) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *) &sa, len) < 0)
                return -errno;
        if (listen(fd, 64) < 0)
                return -errno;
        return TAKE_FD(fd);
}

int http_server_new(sd_event *event, const HttpServerOptions *opts, HttpServer **ret) {
        _cleanup_(http_server_freep) HttpServer *s = NULL;
        _cleanup_close_ int fd = -EBADF;
        const union MHD_DaemonInfo *info;
        int r;

        if (!event || !opts || !opts->listen || opts->max_connections == 0 || opts->timeout_sec == 0)
                return -EINVAL;
        if (!opts->tls_cert_file != !opts->tls_key_file)
                return -EINVAL;
        s = calloc(1, sizeof(HttpServer));
        if (!s)
                return -ENOMEM;
        s->event = sd_event_ref(event);
        s->max_connections = opts->max_connections;

        if (opts->tls_cert_file) {
                _cleanup_free_ char *error = NULL;

                if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES ||
                    MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK) != MHD_YES)
                        return log_error_errno(-EOPNOTSUPP,
                                               "http: libmicrohttpd was built without TLS (GnuTLS).");
                r = http_tls_new(event, opts->tls_cert_file, opts->tls_key_file, &s->tls, &error);
                if (r < 0)
                        return log_error_errno(r, "http: failed to load the TLS certificate and key: %s",
                                               error ?: strerror(-r));
        }

        fd = listen_socket(opts->listen);
        if (fd < 0)
                return fd;
        if (opts->local) {
                struct sockaddr_storage sa;
                socklen_t len;

                s->guard = true;
                if (socket_address_parse(opts->listen, &sa, &len, NULL) >= 0 && sa.ss_family != AF_UNIX) {
                        s->guard_host = true;
                        s->port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *) &sa)->sin6_port
                                                                 : ((struct sockaddr_in *) &sa)->sin_port);
                }
                s->allowed_hosts = strv_copy(opts->allowed_hosts);
                if (!s->allowed_hosts)
                        return -ENOMEM;
        }
        if (strncmp(opts->listen, "unix:", 5) == 0 && !(s->unix_path = strdup(opts->listen + 5)))
                return -ENOMEM;

        /* No MHD_USE_INTERNAL_POLLING_THREAD: MHD runs when we call it.
         * MHD_USE_EPOLL: it keeps its sockets in one epoll fd, ours to
         * watch. The listening socket is ours (bound above): MHD takes it
         * and closes it in MHD_stop_daemon(). */
        /* MHD_ALLOW_SUSPEND_RESUME: asynchronous answers (its ITC, an
         * eventfd in the same epoll set, wakes us on a resume). TLS:
         * GnuTLS asks http_tls_retrieve() for the credentials at each
         * handshake, so a reloaded pair needs no restart. */
        s->daemon = MHD_start_daemon(
                MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME | (s->tls ? MHD_USE_TLS : 0), 0,
                NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
                opts->max_connections + HTTP_SERVER_SLOTS_HEADROOM, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                opts->max_connections_per_client, MHD_OPTION_CONNECTION_TIMEOUT, opts->timeout_sec,
                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t) HTTP_SERVER_MEMORY_LIMIT,
                MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
                MHD_OPTION_UNESCAPE_CALLBACK, unescape, s,
                /* RFC 7230 as a server must: Host in HTTP/1.1, no space in the target. */
                MHD_OPTION_STRICT_FOR_CLIENT, 1, s->tls ? MHD_OPTION_HTTPS_PRIORITIES : MHD_OPTION_END,
                opts->tls_priorities, MHD_OPTION_HTTPS_CERT_CALLBACK, http_tls_retrieve, MHD_OPTION_END);
        if (!s->daemon)
                return -EIO; /* MHD logged why */
        TAKE_FD(fd);

        info = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_EPOLL_FD);
        if (!info || info->epoll_fd < 0)
                return -EIO;
        r = sd_event_add_io(event, &s->io, info->epoll_fd, EPOLLIN, on_io, s);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(s->io, "http");
        r = sd_event_add_time_relative(event, &s->timer, CLOCK_MONOTONIC, 0, 10 * USEC_PER_MSEC, on_timer,
                                       s);
        if (r < 0)
                return r;
        r = sd_event_add_time(event, &s->head_timer, CLOCK_MONOTONIC, UINT64_MAX, 100 * USEC_PER_MSEC,
                              on_head_timer, s);
        if (r < 0)
                return r;
        (void) sd_event_source_set_enabled(s->head_timer, SD_EVENT_OFF);
        (void) sd_event_source_set_description(s->head_timer, "http-head-deadline");
        (void) sd_event_source_set_description(s->timer, "http-timer");
        http_server_arm(s, false);
        *ret = TAKE_PTR(s);
        return 0;
}

HttpServer *http_server_free(HttpServer *s) {
        if (!s)
                return NULL;
        s->io = sd_event_source_disable_unref(s->io);
        s->timer = sd_event_source_disable_unref(s->timer);
        s->head_timer = sd_event_source_disable_unref(s->head_timer);
        if (s->daemon) {
                /* Suspended requests: their owners forget them, MHD closes them. */
                for (HttpRequest *req = s->requests; req; req = req->next)
                        if (!req->replied) {
                                if (req->cancel)
                                        req->cancel(req->cancel_userdata, HTTP_CANCEL_SERVER_GONE);
                                req->cancel = NULL;
                                (void) http_request_reply_text(req, MHD_HTTP_SERVICE_UNAVAILABLE,
                                                               "The agent is stopping.\n");
                        }
                MHD_stop_daemon(s->daemon);
        }
        while (s->requests)
                request_free(s->requests);
        s->tls = http_tls_free(s->tls);
        strv_free(s->allowed_hosts);
        if (s->unix_path) {
                (void) unlink(s->unix_path);
                free(s->unix_path);
        }
        for (size_t i = 0; i < s->n_routes; i++)
                free(s->routes[i].path);
        sd_event_unref(s->event);
        free(s);
        return NULL;
}

static int route_add(HttpServer *s, const char *path, HttpHandler handler, HttpAsyncHandler async_handler,
                     void *userdata) {
        if (!s || !path || path[0] != '/' || (!handler == !async_handler))
                return -EINVAL;
        for (size_t i = 0; i < s->n_routes; i++)
                if (streq(s->routes[i].path, path))
                        return -EEXIST;
        if (s->n_routes >= HTTP_SERVER_ROUTES_MAX)
                return -E2BIG;
        s->routes[s->n_routes] = (HttpRoute){
                .path = strdup(path),
                .handler = handler,
                .async_handler = async_handler,
                .userdata = userdata,
        };
        if (!s->routes[s->n_routes].path)
                return -ENOMEM;
        s->n_routes++;
        return 0;
}

int http_server_add_route(HttpServer *s, const char *path, HttpHandler handler, void *userdata) {
        return route_add(s, path, handler, NULL, userdata);
}

int http_server_add_async_route(HttpServer *s, const char *path, HttpAsyncHandler handler, void *userdata) {
        return route_add(s, path, NULL, handler, userdata);
}

bool http_server_is_tls(const HttpServer *s) {
        return s && s->tls;
}

void http_server_stats(const HttpServer *s, HttpServerStats *ret) {
        *ret = s ? s->stats : (HttpServerStats){};
        if (s)
                ret->tls_reloads = http_tls_reloads(s->tls);
}
