/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* KubeClient against a tiny HTTP/1.1 server on loopback that runs on the
 * same sd-event loop: streaming, errors, stalls, and callbacks that start
 * and cancel requests from inside on_data and on_done. */

#include <netinet/in.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "kube-client.h"
#include "tests.h"

typedef struct Server Server;
typedef struct Conn Conn;
struct Conn {
        Server *srv;
        int fd;
        sd_event_source *io, *timer;
        char req[4096];
        size_t n;
        unsigned chunks;
        Conn *next;
};

struct Server {
        sd_event *event;
        int fd;
        uint16_t port;
        sd_event_source *io;
        Conn *conns;
        unsigned n_requests;
};

static void conn_close(Conn *c) {
        c->io = sd_event_source_disable_unref(c->io);
        c->timer = sd_event_source_disable_unref(c->timer);
        c->fd = safe_close(c->fd);
}

static void send_str(Conn *c, const char *s) {
        if (c->fd >= 0 && send(c->fd, s, strlen(s), MSG_NOSIGNAL) < 0)
                conn_close(c);
}

static int on_stream_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Conn *c = userdata;
        char buf[64];

        snprintf(buf, sizeof(buf), "line %u\n", c->chunks++);
        char chunk[128];
        snprintf(chunk, sizeof(chunk), "%zx\r\n%s\r\n", strlen(buf), buf);
        send_str(c, chunk);
        if (c->fd >= 0)
                (void) sd_event_source_set_time(s, usec + 20 * USEC_PER_MSEC);
        return 0;
}

static void conn_respond(Server *srv, Conn *c) {
        char path[256] = "";

        srv->n_requests++;
        ASSERT_EQ(sscanf(c->req, "GET %255s ", path), 1);

        if (streq(path, "/once")) {
                send_str(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello");
                conn_close(c);
        } else if (streq(path, "/gone")) {
                const char *body = "{\"kind\":\"Status\",\"code\":410,\"message\":\"too old\"}";
                char buf[512];
                snprintf(buf, sizeof(buf),
                         "HTTP/1.1 410 Gone\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                         "Connection: close\r\n\r\n%s",
                         strlen(body), body);
                send_str(c, buf);
                conn_close(c);
        } else if (streq(path, "/stream") || streq(path, "/silent")) {
                send_str(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
                if (streq(path, "/stream")) {
                        uint64_t now;
                        ASSERT_OK(sd_event_now(srv->event, CLOCK_MONOTONIC, &now));
                        ASSERT_OK(sd_event_add_time(srv->event, &c->timer, CLOCK_MONOTONIC, now, 1,
                                                    on_stream_timer, c));
                        ASSERT_OK(sd_event_source_set_enabled(c->timer, SD_EVENT_ON));
                }
        } else {
                send_str(c, "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                conn_close(c);
        }
}

static int on_conn_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Conn *c = userdata;
        ssize_t k;

        k = recv(fd, c->req + c->n, sizeof(c->req) - 1 - c->n, 0);
        if (k <= 0) {
                conn_close(c);
                return 0;
        }
        c->n += (size_t) k;
        c->req[c->n] = 0;
        if (strstr(c->req, "\r\n\r\n")) {
                (void) sd_event_source_set_enabled(c->io, SD_EVENT_OFF);
                conn_respond(c->srv, c);
        }
        return 0;
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Server *srv = userdata;
        int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0)
                return 0;
        Conn *c = calloc(1, sizeof(*c));
        ASSERT_NOT_NULL(c);
        c->fd = cfd;
        c->srv = srv;
        c->next = srv->conns;
        srv->conns = c;
        ASSERT_OK(sd_event_add_io(srv->event, &c->io, cfd, EPOLLIN, on_conn_io, c));
        return 0;
}

static void server_start(Server *srv, sd_event *e) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t l = sizeof(sa);

        *srv = (Server){ .event = e };
        srv->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        ASSERT_TRUE(srv->fd >= 0);
        ASSERT_OK(bind(srv->fd, (struct sockaddr *) &sa, sizeof(sa)));
        ASSERT_OK(listen(srv->fd, 16));
        ASSERT_OK(getsockname(srv->fd, (struct sockaddr *) &sa, &l));
        srv->port = ntohs(sa.sin_port);
        ASSERT_OK(sd_event_add_io(e, &srv->io, srv->fd, EPOLLIN, on_accept, srv));
}

static void server_stop(Server *srv) {
        srv->io = sd_event_source_disable_unref(srv->io);
        srv->fd = safe_close(srv->fd);
        while (srv->conns) {
                Conn *c = srv->conns;
                srv->conns = c->next;
                conn_close(c);
                free(c);
        }
}

/* The test's state, shared by all callbacks. */
typedef struct T {
        sd_event *event;
        KubeClient *client;
        Server *srv;
        KubeRequest *a, *b, *c;
        unsigned a_data, b_data, c_data;
        unsigned a_done, b_done, c_done;
        long c_status;
        int a_error, b_error, c_error;
        char c_body[64];
        int pending; /* requests still to finish before the loop exits */
} T;

static void setup(T *t, sd_event *e, Server *srv, uint16_t port) {
        KubeConfig *cfg = calloc(1, sizeof(*cfg));
        ASSERT_NOT_NULL(cfg);
        ASSERT_TRUE(asprintf(&cfg->server, "http://127.0.0.1:%u/", port) > 0);
        cfg->token = strdup("t0k3n");
        *t = (T){ .event = e, .srv = srv };
        ASSERT_OK(kube_client_new(e, cfg, &t->client));
}

static void done_one(T *t) {
        if (--t->pending == 0)
                ASSERT_OK(sd_event_exit(t->event, 0));
}

static int on_c_data(KubeRequest *r, const char *data, size_t size, void *userdata) {
        T *t = userdata;
        t->c_data++;
        strncat(t->c_body, data, MIN(size, sizeof(t->c_body) - strlen(t->c_body) - 1));
        return 0;
}

static void on_c_done(KubeRequest *r, long status, int error, void *userdata) {
        T *t = userdata;
        t->c_done++;
        t->c_status = status;
        t->c_error = error;
        t->c = NULL;
        done_one(t);
}

static void on_never_done(KubeRequest *r, long status, int error, void *userdata) {
        ASSERT_TRUE(!"on_done of a cancelled request");
}

/* A's first data: cancel A itself, start C (from inside curl). */
static int on_a_data_cancel_self(KubeRequest *r, const char *data, size_t size, void *userdata) {
        T *t = userdata;
        t->a_data++;
        ASSERT_TRUE(t->a_data == 1);
        kube_request_cancel(r);
        t->a = NULL;
        ASSERT_OK(kube_client_get(t->client, "/once", 5, on_c_data, on_c_done, t, &t->c));
        return 0;
}

TEST(cancel_self_and_start_from_on_data) {
        sd_event *e = NULL;
        Server srv;
        T t;

        ASSERT_OK(sd_event_new(&e));
        server_start(&srv, e);
        setup(&t, e, &srv, srv.port);
        t.pending = 1;
        ASSERT_OK(kube_client_get(t.client, "/stream", 5, on_a_data_cancel_self, on_never_done, &t, &t.a));
        ASSERT_OK(sd_event_loop(e));
        ASSERT_EQ(t.a_data, 1);
        ASSERT_EQ(t.c_done, 1);
        ASSERT_EQ(t.c_status, 200);
        ASSERT_EQ(t.c_error, 0);
        ASSERT_STREQ(t.c_body, "hello");
        kube_client_free(t.client);
        server_stop(&srv);
        sd_event_unref(e);
}

/* A aborts itself by returning an error, after cancelling B; B never
 * reports. */
static int on_b_data(KubeRequest *r, const char *data, size_t size, void *userdata) {
        T *t = userdata;
        t->b_data++;
        return 0;
}

static int on_a_data_cancel_other(KubeRequest *r, const char *data, size_t size, void *userdata) {
        T *t = userdata;
        t->a_data++;
        if (t->b_data == 0)
                return 0; /* wait until B streams too */
        kube_request_cancel(t->b);
        t->b = NULL;
        return -ENOTRECOVERABLE;
}

static void on_a_done(KubeRequest *r, long status, int error, void *userdata) {
        T *t = userdata;
        t->a_done++;
        t->a_error = error;
        t->a = NULL;
        /* From on_done: start another one, and cancel it at once, and start a third. */
        KubeRequest *x;
        ASSERT_OK(kube_client_get(t->client, "/stream", 5, on_b_data, on_never_done, t, &x));
        kube_request_cancel(x);
        ASSERT_OK(kube_client_get(t->client, "/once", 5, on_c_data, on_c_done, t, &t->c));
        done_one(t);
}

TEST(cancel_other_and_abort) {
        sd_event *e = NULL;
        Server srv;
        T t;

        ASSERT_OK(sd_event_new(&e));
        server_start(&srv, e);
        setup(&t, e, &srv, srv.port);
        t.pending = 2;
        ASSERT_OK(kube_client_get(t.client, "/stream", 5, on_a_data_cancel_other, on_a_done, &t, &t.a));
        ASSERT_OK(kube_client_get(t.client, "/stream", 5, on_b_data, on_never_done, &t, &t.b));
        ASSERT_OK(sd_event_loop(e));
        ASSERT_EQ(t.a_done, 1);
        ASSERT_EQ(t.a_error, -ENOTRECOVERABLE);
        ASSERT_TRUE(t.b_data >= 1);
        ASSERT_EQ(t.c_done, 1);
        ASSERT_STREQ(t.c_body, "hello");
        kube_client_free(t.client);
        server_stop(&srv);
        sd_event_unref(e);
}

static int on_data_unexpected(KubeRequest *r, const char *data, size_t size, void *userdata) {
        ASSERT_TRUE(!"on_data for an error response");
        return 0;
}

static void on_gone_done(KubeRequest *r, long status, int error, void *userdata) {
        T *t = userdata;
        t->c_status = status;
        t->c_error = error;
        ASSERT_STREQ(kube_request_get_error_body(r),
                     "{\"kind\":\"Status\",\"code\":410,\"message\":\"too old\"}");
        ASSERT_EQ(kube_request_get_status(r), 410);
        t->c_done++;
        done_one(t);
}

TEST(error_status_body) {
        sd_event *e = NULL;
        Server srv;
        T t;

        ASSERT_OK(sd_event_new(&e));
        server_start(&srv, e);
        setup(&t, e, &srv, srv.port);
        t.pending = 1;
        ASSERT_OK(kube_client_get(t.client, "/gone", 5, on_data_unexpected, on_gone_done, &t, NULL));
        ASSERT_OK(sd_event_loop(e));
        ASSERT_EQ(t.c_done, 1);
        ASSERT_EQ(t.c_status, 410);
        ASSERT_EQ(t.c_error, 0);
        kube_client_free(t.client);
        server_stop(&srv);
        sd_event_unref(e);
}

TEST(stall) {
        sd_event *e = NULL;
        Server srv;
        T t;
        uint64_t t0, t1;

        ASSERT_OK(sd_event_new(&e));
        server_start(&srv, e);
        setup(&t, e, &srv, srv.port);
        t.pending = 1;
        ASSERT_OK(sd_event_now(e, CLOCK_MONOTONIC, &t0));
        ASSERT_OK(kube_client_get(t.client, "/silent", 1, on_c_data, on_c_done, &t, &t.c));
        ASSERT_OK(sd_event_loop(e));
        ASSERT_OK(sd_event_now(e, CLOCK_MONOTONIC, &t1));
        ASSERT_EQ(t.c_done, 1);
        ASSERT_EQ(t.c_error, -ETIMEDOUT);
        ASSERT_EQ(t.c_status, 200);
        fprintf(stderr, "  stalled after %" PRIu64 " ms\n", (t1 - t0) / USEC_PER_MSEC);
        ASSERT_TRUE(t1 - t0 >= 1 * USEC_PER_SEC);
        ASSERT_TRUE(t1 - t0 < 2 * USEC_PER_SEC);
        kube_client_free(t.client);
        server_stop(&srv);
        sd_event_unref(e);
}

TEST(refused_and_free_in_flight) {
        sd_event *e = NULL;
        Server srv;
        T t;

        ASSERT_OK(sd_event_new(&e));
        server_start(&srv, e);
        uint16_t port = srv.port;
        server_stop(&srv); /* nobody listens there now */
        setup(&t, e, &srv, port);
        t.pending = 1;
        ASSERT_OK(kube_client_get(t.client, "/once", 5, on_c_data, on_c_done, &t, &t.c));
        ASSERT_OK(sd_event_loop(e));
        ASSERT_EQ(t.c_error, -ECONNREFUSED);
        ASSERT_EQ(t.c_status, 0);
        kube_client_free(t.client);
        sd_event_unref(e);

        /* Freeing the client with requests in flight: no callback, no leak. */
        ASSERT_OK(sd_event_new(&e));
        server_start(&srv, e);
        setup(&t, e, &srv, srv.port);
        ASSERT_OK(kube_client_get(t.client, "/stream", 5, on_b_data, on_never_done, &t, NULL));
        ASSERT_OK(kube_client_get(t.client, "/silent", 5, on_b_data, on_never_done, &t, NULL));
        for (unsigned i = 0; i < 50 && t.b_data < 3; i++)
                ASSERT_OK(sd_event_run(e, 100 * USEC_PER_MSEC));
        ASSERT_TRUE(t.b_data >= 3);
        kube_client_free(t.client);
        server_stop(&srv);
        sd_event_unref(e);
}

DEFINE_TEST_MAIN
