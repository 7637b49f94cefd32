/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The HTTP listener of the config's "http" (http-server.h) and its routes:
 * /metrics (metrics.c). Read at start only. */
#include "exposition.h"
#include "http-server.h"
#include "log.h"
#include "manager-http.h"
#include "manager-pull.h"
#include "metrics.h"

/* The http room's state (http-deps.h). */
struct HttpRoom {
        HttpRoomDeps deps;
        HttpServer *server; /* NULL: no listener */
        ManagerPull *pull; /* NULL: no pulls served */
};

int http_room_new(const HttpRoomDeps *deps, HttpRoom **ret) {
        HttpRoom *room = calloc(1, sizeof(*room));

        if (!room)
                return -ENOMEM;
        room->deps = *deps;
        *ret = room;
        return 0;
}

HttpRoom *http_room_free(HttpRoom *room) {
        if (!room)
                return NULL;
        manager_http_stop(room);
        free(room);
        return NULL;
}

void http_room_session_ended(HttpRoom *room, const char *id, const char *report_dirs, int error) {
        if (room)
                manager_pull_session_ended(room->pull, id, report_dirs, error);
}

static int on_metrics(const char *path, HttpResponse *ret, void *userdata) {
        HttpRoom *room = userdata;
        int r;

        r = metrics_exposition(room->deps.metrics, room->server, room->pull, &ret->body, &ret->size);
        if (r < 0)
                return r;
        ret->status = 200;
        ret->content_type = METRICS_CONTENT_TYPE;
        return 0;
}

int manager_http_start(HttpRoom *room) {
        const Config *c = room->deps.config(room->deps.userdata);
        HttpServerOptions o;
        int r;

        if (!c || !c->http.listen)
                return 0;
        o = (HttpServerOptions){
                .listen = c->http.listen,
                .max_connections = c->http.max_connections,
                .max_connections_per_client = c->http.max_connections_per_client,
                .timeout_sec = (unsigned) (c->http.timeout_usec / USEC_PER_SEC),
                .tls_cert_file = c->http.tls_cert_file,
                .tls_key_file = c->http.tls_key_file,
                .tls_priorities = c->http.tls_priorities ?: CONFIG_HTTP_DEFAULT_TLS_PRIORITIES,
                /* No Kubernetes, no token: only local programs (http-guard.h). */
                .local = !kube_room_enabled(room->deps.kube) && config_http_is_local(c),
                .allowed_hosts = c->http.allowed_hosts,
        };
        r = http_server_new(room->deps.event, &o, &room->server);
        if (r < 0)
                return log_error_errno(r, "Failed to listen on %s (http.listen), no /metrics: %m",
                                       c->http.listen);
        r = http_server_add_route(room->server, "/metrics", on_metrics, room);
        if (r < 0) {
                room->server = http_server_free(room->server);
                return log_error_errno(r, "Failed to serve /metrics: %m");
        }
        log_info("Serving /metrics on %s%s (at most %u connections, %u s idle timeout).", c->http.listen,
                 o.tls_cert_file ? " over TLS" : "", o.max_connections, o.timeout_sec);
        return manager_pull_start(room->server, &room->deps, &room->pull);
}

/* The keys of "http" that the pulls read at start: audiences and limits. */
static bool http_limits_equal(const Config *a, const Config *b) {
        size_t n = strv_length(a->http.token_audiences);

        if (n != strv_length(b->http.token_audiences))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!streq(a->http.token_audiences[i], b->http.token_audiences[i]))
                        return false;
        return a->http.review_rate_limit.per_second == b->http.review_rate_limit.per_second &&
               a->http.review_rate_limit.burst == b->http.review_rate_limit.burst &&
               a->http.pull_rate_limit.per_second == b->http.pull_rate_limit.per_second &&
               a->http.pull_rate_limit.burst == b->http.pull_rate_limit.burst;
}

void manager_http_reload(HttpRoom *room, const Config *new_config) {
        const Config *c = room->deps.config(room->deps.userdata);
        const char *a = c ? c->http.listen : NULL, *b = new_config->http.listen;

        if (!streq_ptr(a, b) ||
            (c && (c->http.max_connections != new_config->http.max_connections ||
                   c->http.timeout_usec != new_config->http.timeout_usec ||
                   c->http.max_connections_per_client != new_config->http.max_connections_per_client ||
                   c->http.pprof != new_config->http.pprof ||
                   !streq_ptr(c->http.tls_cert_file, new_config->http.tls_cert_file) ||
                   !streq_ptr(c->http.tls_key_file, new_config->http.tls_key_file) ||
                   !streq_ptr(c->http.tls_priorities, new_config->http.tls_priorities) ||
                   !http_limits_equal(c, new_config))))
                log_warning("The config's \"http\" changed: it applies when cgprofd restarts.");
}

void manager_http_stop(HttpRoom *room) {
        manager_pull_stop(&room->pull);
        room->server = http_server_free(room->server);
}
