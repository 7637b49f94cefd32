/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The Kubernetes API client: libcurl's multi socket interface on sd-event.
 *
 * curl tells us which sockets to watch (CURLMOPT_SOCKETFUNCTION) and when to
 * call it back (CURLMOPT_TIMERFUNCTION); each socket becomes an sd-event io
 * source, the timeout one time source, and both hand their events back with
 * curl_multi_socket_action(). Finished transfers are read with
 * curl_multi_info_read() until it returns NULL.
 *
 * curl forbids calling the multi API (add/remove handle, socket_action) from
 * inside its own callbacks, and our users' on_data runs inside curl's write
 * callback. So while curl is running (c->in_curl), a new request is queued
 * (c->pending) and a cancelled one is only marked (r->cancelled; its write
 * callback then aborts it); both are settled right after
 * curl_multi_socket_action() returns. on_done runs outside of curl, from the
 * info_read loop, where starting and cancelling requests is direct. */

#include <curl/curl.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>

#include "cgprof-version.h"
#include "fileio.h"
#include "kube-client.h"
#include "log.h"

#define KUBE_USER_AGENT "cgprofd/" CGPROF_VERSION
#define KUBE_CONNECT_TIMEOUT_SEC 10L
#define KUBE_ERROR_BODY_MAX (64U * 1024U)
#define KUBE_TOKEN_MAX (64U * 1024U)

typedef struct KubeSocket KubeSocket;

struct KubeSocket {
        KubeClient *client;
        sd_event_source *io;
        curl_socket_t fd;
        KubeSocket *prev, *next;
};

struct KubeRequest {
        KubeClient *client;
        KubeRequest *prev, *next; /* in client->requests or client->pending */
        CURL *easy;
        struct curl_slist *headers;
        char *url;
        const char *method; /* "GET", "POST" */

        KubeDataCallback on_data;
        KubeDoneCallback on_done;
        void *userdata;

        bool added; /* in the multi handle */
        bool cancelled; /* cancelled while curl was running: removed after it returns */
        bool finishing; /* on_done is running: cancel is a no-op, the client frees it */
        int error; /* from on_data, for on_done */

        unsigned stall_sec; /* 0: no stall check */
        uint64_t last_activity; /* CLOCK_MONOTONIC of the last byte received */
        sd_event_source *stall_timer;

        long status; /* HTTP status, once the body starts */
        char *error_body; /* body of a non-2xx response, NUL-terminated */
        size_t error_body_size;

        char errbuf[CURL_ERROR_SIZE];
};

struct KubeClient {
        sd_event *event;
        KubeConfig *config;
        CURLM *multi;
        sd_event_source *timer;
        KubeSocket *sockets;
        KubeRequest *requests; /* added to the multi handle (or being cancelled) */
        KubeRequest *pending; /* created while curl was running: to add */
        unsigned in_curl; /* > 0 while curl calls us back */
        char *token; /* the last good token */
};

static bool curl_initialized = false;

KubeConfig *kube_config_free(KubeConfig *c) {
        if (!c)
                return NULL;
        free(c->server);
        free(c->ca_file);
        free(c->ca_data);
        erase_and_free(c->token);
        free(c->token_file);
        free(c->client_cert_file);
        free(c->client_key_file);
        free(c->client_cert_data);
        erase_and_free(c->client_key_data);
        free(c);
        return NULL;
}

/* Maps a finished transfer's curl code to a negative errno. */
static int curl_code_to_errno(CURLcode code) {
        switch (code) {
        case CURLE_OK:
                return 0;
        case CURLE_OUT_OF_MEMORY:
                return -ENOMEM;
        case CURLE_UNSUPPORTED_PROTOCOL:
        case CURLE_URL_MALFORMAT:
                return -EINVAL;
        case CURLE_COULDNT_RESOLVE_PROXY:
        case CURLE_COULDNT_RESOLVE_HOST:
                return -EHOSTUNREACH;
        case CURLE_COULDNT_CONNECT:
                return -ECONNREFUSED;
        case CURLE_OPERATION_TIMEDOUT: /* connect timeout, and the low-speed (stall) check */
                return -ETIMEDOUT;
        case CURLE_SSL_CONNECT_ERROR:
        case CURLE_SSL_ENGINE_NOTFOUND:
        case CURLE_SSL_ENGINE_SETFAILED:
        case CURLE_SSL_CERTPROBLEM:
        case CURLE_SSL_CIPHER:
        case CURLE_PEER_FAILED_VERIFICATION: /* also CURLE_SSL_CACERT */
        case CURLE_SSL_ENGINE_INITFAILED:
        case CURLE_SSL_CACERT_BADFILE:
        case CURLE_SSL_SHUTDOWN_FAILED:
        case CURLE_SSL_CRL_BADFILE:
        case CURLE_SSL_ISSUER_ERROR:
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        case CURLE_SSL_INVALIDCERTSTATUS:
        case CURLE_SSL_CLIENTCERT:
                return -EPROTO;
        case CURLE_WEIRD_SERVER_REPLY:
        case CURLE_BAD_CONTENT_ENCODING:
        case CURLE_HTTP2:
        case CURLE_HTTP3:
                return -EBADMSG;
        case CURLE_GOT_NOTHING:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_PARTIAL_FILE:
        case CURLE_HTTP2_STREAM:
                return -ECONNRESET;
        case CURLE_ABORTED_BY_CALLBACK:
                return -ECANCELED;
        case CURLE_TOO_MANY_REDIRECTS:
                return -ELOOP;
        case CURLE_FILESIZE_EXCEEDED:
                return -EFBIG;
        default:
                return -EIO;
        }
}

static void request_free(KubeRequest *r) {
        if (!r)
                return;
        sd_event_source_disable_unref(r->stall_timer);
        if (r->easy)
                curl_easy_cleanup(r->easy);
        curl_slist_free_all(r->headers); /* holds the token: curl copied nothing else of it */
        free(r->url);
        free(r->error_body);
        free(r);
}

/* Takes r out of the multi handle and off the client's lists. */
static void request_detach(KubeRequest *r) {
        KubeClient *c = r->client;

        if (r->added) {
                CURLMcode mc = curl_multi_remove_handle(c->multi, r->easy);
                if (mc != CURLM_OK)
                        log_debug("Failed to remove curl handle: %s", curl_multi_strerror(mc));
                r->added = false;
                LIST_REMOVE(c->requests, r);
        } else
                LIST_REMOVE(c->pending, r);
}

/* Settles what happened while curl was running: cancelled requests are
 * removed and freed, new ones added. */
static void client_flush(KubeClient *c) {
        KubeRequest *r, *next;

        if (c->in_curl > 0)
                return;

        for (r = c->requests; r; r = next) {
                next = r->next;
                if (r->cancelled) {
                        request_detach(r);
                        request_free(r);
                }
        }

        while ((r = c->pending)) {
                CURLMcode mc;

                LIST_REMOVE(c->pending, r);
                mc = curl_multi_add_handle(c->multi, r->easy);
                if (mc != CURLM_OK) {
                        /* Keep the promise that on_done is called: report it
                         * the way a transfer that failed at once would be. */
                        log_debug("Failed to add curl handle: %s", curl_multi_strerror(mc));
                        r->finishing = true;
                        if (r->on_done)
                                r->on_done(r, 0, -ENOMEM, r->userdata);
                        request_free(r);
                        continue;
                }
                r->added = true;
                LIST_PREPEND(c->requests, r);
        }
}

static void request_finish(KubeRequest *r, CURLcode code) {
        long status = 0;
        int error;

        (void) curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);

        if (code == CURLE_WRITE_ERROR && r->error < 0)
                error = r->error; /* on_data aborted it */
        else
                error = curl_code_to_errno(code);

        if (code != CURLE_OK)
                log_debug("%s %s: %s%s%s", r->method, r->url, curl_easy_strerror(code),
                          r->errbuf[0] ? ": " : "", r->errbuf);
        else
                log_debug("%s %s: HTTP %ld", r->method, r->url, status);

        request_detach(r);
        r->finishing = true;
        if (r->on_done)
                r->on_done(r, status, error, r->userdata);
        request_free(r);
}

/* Stall check: curl's low-speed check averages over a window of some
 * seconds, so it fires up to ~5 s late; this timer ends the request when no
 * byte came for exactly stall_sec. It is rescheduled lazily: a byte only
 * updates last_activity. */
static int on_stall_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        KubeRequest *r = userdata;
        KubeClient *c = r->client;
        uint64_t deadline = r->last_activity + r->stall_sec * USEC_PER_SEC, now = usec;

        (void) sd_event_now(c->event, CLOCK_MONOTONIC, &now);
        if (now < deadline) {
                (void) sd_event_source_set_time(s, deadline);
                (void) sd_event_source_set_enabled(s, SD_EVENT_ONESHOT);
                return 0;
        }

        if (r->cancelled) {
                request_detach(r);
                request_free(r);
                return 0;
        }
        snprintf(r->errbuf, sizeof(r->errbuf), "no data for %u s", r->stall_sec);
        request_finish(r, CURLE_OPERATION_TIMEDOUT);
        client_flush(c);
        return 0;
}

static void client_check_finished(KubeClient *c) {
        CURLMsg *msg;
        int left;

        /* Every finished transfer, not only the first: curl may complete
         * several in one call. */
        while ((msg = curl_multi_info_read(c->multi, &left))) {
                KubeRequest *r = NULL;

                if (msg->msg != CURLMSG_DONE)
                        continue;

                CURL *easy = msg->easy_handle;
                CURLcode code = msg->data.result;

                if (curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **) &r) != CURLE_OK || !r) {
                        log_debug("Finished curl handle without request, ignoring.");
                        continue;
                }

                if (r->cancelled) {
                        request_detach(r);
                        request_free(r);
                        continue;
                }

                request_finish(r, code);
        }
}

static void client_socket_action(KubeClient *c, curl_socket_t fd, int ev_bitmask) {
        CURLMcode mc;
        int running;

        c->in_curl++;
        mc = curl_multi_socket_action(c->multi, fd, ev_bitmask, &running);
        c->in_curl--;
        if (mc != CURLM_OK)
                log_debug("curl_multi_socket_action() failed: %s", curl_multi_strerror(mc));

        client_flush(c);
        /* on_done runs out here (in_curl is 0): what it starts or cancels
         * is added or removed directly. */
        client_check_finished(c);
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        KubeSocket *k = userdata;
        int action = 0;

        if (revents & EPOLLIN)
                action |= CURL_CSELECT_IN;
        if (revents & EPOLLOUT)
                action |= CURL_CSELECT_OUT;
        if (revents & (EPOLLERR | EPOLLHUP))
                action |= CURL_CSELECT_ERR;

        client_socket_action(k->client, fd, action);
        return 0;
}

static int on_curl_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
        KubeClient *c = userp;
        KubeSocket *k = socketp;
        uint32_t events = 0;
        int r;

        if (what == CURL_POLL_REMOVE) {
                if (k) {
                        sd_event_source_disable_unref(k->io);
                        LIST_REMOVE(c->sockets, k);
                        free(k); /* curl forgets the socket itself */
                }
                return 0;
        }

        if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
                events |= EPOLLIN;
        if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
                events |= EPOLLOUT;

        if (k) {
                r = sd_event_source_set_io_events(k->io, events);
                if (r >= 0)
                        r = sd_event_source_set_enabled(k->io, SD_EVENT_ON);
                if (r < 0) {
                        log_debug_errno(r, "Failed to update io source of curl socket %d: %m", fd);
                        return -1;
                }
                return 0;
        }

        k = calloc(1, sizeof(*k));
        if (!k)
                return -1;
        k->client = c;
        k->fd = fd;
        r = sd_event_add_io(c->event, &k->io, fd, events, on_io, k);
        if (r < 0) {
                log_debug_errno(r, "Failed to add io source for curl socket %d: %m", fd);
                free(k);
                return -1;
        }
        (void) sd_event_source_set_description(k->io, "kube-curl-io");
        if (curl_multi_assign(c->multi, fd, k) != CURLM_OK) {
                sd_event_source_disable_unref(k->io);
                free(k);
                return -1;
        }
        LIST_PREPEND(c->sockets, k);
        return 0;
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        client_socket_action(userdata, CURL_SOCKET_TIMEOUT, 0);
        return 0;
}

static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp) {
        KubeClient *c = userp;
        uint64_t now, when;
        int r;

        if (timeout_ms < 0)
                return c->timer ? (sd_event_source_set_enabled(c->timer, SD_EVENT_OFF) < 0 ? -1 : 0) : 0;

        r = sd_event_now(c->event, CLOCK_MONOTONIC, &now);
        if (r < 0)
                return -1;
        /* Round up: firing early would only make curl ask again. */
        when = now + (uint64_t) timeout_ms * USEC_PER_MSEC;

        if (c->timer) {
                r = sd_event_source_set_time(c->timer, when);
                if (r >= 0)
                        r = sd_event_source_set_enabled(c->timer, SD_EVENT_ONESHOT);
        } else {
                /* Accuracy 1 µs: 0 would mean sd-event's default, 250 ms of
                 * slack on every curl timeout (even "call me at once"). */
                r = sd_event_add_time(c->event, &c->timer, CLOCK_MONOTONIC, when, 1, on_timer, c);
                if (r >= 0)
                        (void) sd_event_source_set_description(c->timer, "kube-curl-timer");
        }
        if (r < 0) {
                log_debug_errno(r, "Failed to arm curl timer: %m");
                return -1;
        }
        return 0;
}

static char *strip(char *s) {
        size_t n;

        s += strspn(s, " \t\r\n");
        n = strlen(s);
        while (n > 0 && strchr(" \t\r\n", s[n - 1]))
                s[--n] = 0;
        return s;
}

/* Re-reads the token file (projected service account tokens rotate): cheap,
 * and requests are rare (a watch reconnect is one). Keeps the last good token
 * when the read fails. Returns the token to use, or NULL. */
static const char *client_token(KubeClient *c) {
        _cleanup_free_ char *buf = NULL;
        int r;

        if (!c->config->token_file)
                return c->config->token;

        r = read_full_file_max(AT_FDCWD, c->config->token_file, KUBE_TOKEN_MAX, &buf, NULL);
        if (r < 0)
                log_debug_errno(r, "Failed to read token file %s, keeping the last token: %m",
                                c->config->token_file);
        else {
                const char *t = strip(buf);
                if (t[0] == 0)
                        log_debug("Token file %s is empty, keeping the last token.", c->config->token_file);
                else if (!streq_ptr(t, c->token)) {
                        char *n = strdup(t);
                        if (n) {
                                if (c->token)
                                        log_debug("Token file %s changed, using the new token.",
                                                  c->config->token_file);
                                erase_and_free(c->token);
                                c->token = n;
                        }
                }
                explicit_bzero(buf, strlen(buf));
        }

        return c->token ?: c->config->token;
}

int kube_client_new(sd_event *e, KubeConfig *config, KubeClient **ret) {
        _cleanup_(kube_client_freep) KubeClient *c = NULL;

        if (!e || !config || !config->server || !ret)
                return -EINVAL;

        if (!curl_initialized) {
                if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                        return -EIO;
                curl_initialized = true;
        }

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->event = sd_event_ref(e);

        c->multi = curl_multi_init();
        if (!c->multi)
                return -ENOMEM;

        if (curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket) != CURLM_OK ||
            curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c) != CURLM_OK ||
            curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer) != CURLM_OK ||
            curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c) != CURLM_OK)
                return -EIO;

        /* Owned from here on: nothing below fails. */
        c->config = config;
        (void) client_token(c);

        *ret = TAKE_PTR(c);
        return 0;
}

KubeClient *kube_client_free(KubeClient *c) {
        KubeRequest *r;
        KubeSocket *k;

        if (!c)
                return NULL;

        /* Not from inside a callback of this client (the client would be
         * gone under curl's feet). */
        while ((r = c->requests)) {
                request_detach(r);
                request_free(r);
        }
        while ((r = c->pending)) {
                request_detach(r);
                request_free(r);
        }

        if (c->multi)
                curl_multi_cleanup(c->multi);

        /* Sockets curl did not say REMOVE for. */
        while ((k = c->sockets)) {
                LIST_REMOVE(c->sockets, k);
                sd_event_source_disable_unref(k->io);
                free(k);
        }

        sd_event_source_disable_unref(c->timer);
        sd_event_unref(c->event);
        kube_config_free(c->config);
        erase_and_free(c->token);
        free(c);
        return NULL;
}

static void request_touch(KubeRequest *r) {
        if (r->stall_timer)
                (void) sd_event_now(r->client->event, CLOCK_MONOTONIC, &r->last_activity);
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *userdata) {
        KubeRequest *r = userdata;

        if (r->cancelled)
                return 0;
        request_touch(r);
        return size * nmemb;
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *userdata) {
        KubeRequest *r = userdata;
        size_t n = size * nmemb;

        if (r->cancelled)
                return 0; /* any short count aborts the transfer */
        request_touch(r);

        if (r->status == 0)
                (void) curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &r->status);

        if (r->status < 200 || r->status > 299) {
                /* An error's body is a Status object: keep (the start of) it
                 * for kube_request_get_error_body(). */
                size_t m = MIN(n, KUBE_ERROR_BODY_MAX - r->error_body_size);
                if (m > 0) {
                        char *b = realloc(r->error_body, r->error_body_size + m + 1);
                        if (!b)
                                return 0;
                        memcpy(b + r->error_body_size, ptr, m);
                        r->error_body_size += m;
                        b[r->error_body_size] = 0;
                        r->error_body = b;
                }
                return n;
        }

        if (n == 0 || !r->on_data)
                return n;

        int k = r->on_data(r, ptr, n, r->userdata);
        if (r->cancelled) /* cancelled itself from on_data */
                return 0;
        if (k < 0) {
                r->error = k;
                return 0;
        }
        return n;
}

static int easy_set_blob(CURL *easy, CURLoption opt, const char *pem) {
        struct curl_blob blob = {
                .data = (void *) pem,
                .len = strlen(pem),
                .flags = CURL_BLOB_COPY,
        };
        return curl_easy_setopt(easy, opt, &blob) == CURLE_OK ? 0 : -EIO;
}

/* Sets up one transfer: TLS always verified, against the configured CA only
 * when one is configured (not the system's CAs too). */
static int request_setup(KubeClient *c, KubeRequest *r, unsigned stall_sec) {
        const KubeConfig *cfg = c->config;
        CURL *e = r->easy;
        const char *token;

#define SETOPT(opt, val)                                                     \
        do {                                                                 \
                if (curl_easy_setopt(e, opt, val) != CURLE_OK) {             \
                        log_debug("Failed to set %s on curl handle.", #opt); \
                        return -EIO;                                         \
                }                                                            \
        } while (0)

        SETOPT(CURLOPT_URL, r->url);
        SETOPT(CURLOPT_PRIVATE, r);
        SETOPT(CURLOPT_ERRORBUFFER, r->errbuf);
        SETOPT(CURLOPT_NOSIGNAL, 1L);
        SETOPT(CURLOPT_PROTOCOLS_STR, "https,http");
        SETOPT(CURLOPT_USERAGENT, KUBE_USER_AGENT);
        SETOPT(CURLOPT_WRITEFUNCTION, on_write);
        SETOPT(CURLOPT_WRITEDATA, r);
        SETOPT(CURLOPT_HEADERFUNCTION, on_header);
        SETOPT(CURLOPT_HEADERDATA, r);
        SETOPT(CURLOPT_FOLLOWLOCATION, 0L); /* never send the token elsewhere */
        SETOPT(CURLOPT_ACCEPT_ENCODING, ""); /* large lists come gzipped */
        SETOPT(CURLOPT_CONNECTTIMEOUT, KUBE_CONNECT_TIMEOUT_SEC);
        SETOPT(CURLOPT_TCP_KEEPALIVE, 1L);
        SETOPT(CURLOPT_TCP_KEEPIDLE, 30L);
        SETOPT(CURLOPT_TCP_KEEPINTVL, 10L);
        if (stall_sec > 0) {
                uint64_t now;
                int k;

                /* Both: curl's own check, and our exact timer (see on_stall_timer()). */
                SETOPT(CURLOPT_LOW_SPEED_LIMIT, 1L);
                SETOPT(CURLOPT_LOW_SPEED_TIME, (long) stall_sec);

                r->stall_sec = stall_sec;
                k = sd_event_now(c->event, CLOCK_MONOTONIC, &now);
                if (k < 0)
                        return k;
                r->last_activity = now;
                k = sd_event_add_time(c->event, &r->stall_timer, CLOCK_MONOTONIC,
                                      now + stall_sec * USEC_PER_SEC, USEC_PER_SEC / 10, on_stall_timer, r);
                if (k < 0)
                        return k;
                (void) sd_event_source_set_description(r->stall_timer, "kube-request-stall");
        }

        /* TLS: always verified. */
        SETOPT(CURLOPT_SSL_VERIFYPEER, 1L);
        SETOPT(CURLOPT_SSL_VERIFYHOST, 2L);
        if (cfg->ca_file || cfg->ca_data) {
                SETOPT(CURLOPT_CAPATH, NULL);
                SETOPT(CURLOPT_CAINFO, cfg->ca_file); /* NULL drops the system bundle for blobs */
                if (cfg->ca_data && easy_set_blob(e, CURLOPT_CAINFO_BLOB, cfg->ca_data) < 0)
                        return -EIO;
        }
        if (cfg->client_cert_file)
                SETOPT(CURLOPT_SSLCERT, cfg->client_cert_file);
        else if (cfg->client_cert_data && easy_set_blob(e, CURLOPT_SSLCERT_BLOB, cfg->client_cert_data) < 0)
                return -EIO;
        if (cfg->client_cert_file || cfg->client_cert_data)
                SETOPT(CURLOPT_SSLCERTTYPE, "PEM");
        if (cfg->client_key_file)
                SETOPT(CURLOPT_SSLKEY, cfg->client_key_file);
        else if (cfg->client_key_data && easy_set_blob(e, CURLOPT_SSLKEY_BLOB, cfg->client_key_data) < 0)
                return -EIO;
        if (cfg->client_key_file || cfg->client_key_data)
                SETOPT(CURLOPT_SSLKEYTYPE, "PEM");

        struct curl_slist *l = curl_slist_append(NULL, "Accept: application/json");
        if (!l)
                return -ENOMEM;
        r->headers = l;

        token = client_token(c);
        if (token) {
                _cleanup_free_ char *h = NULL;
                if (asprintf(&h, "Authorization: Bearer %s", token) < 0)
                        return -ENOMEM;
                l = curl_slist_append(r->headers, h);
                explicit_bzero(h, strlen(h));
                if (!l)
                        return -ENOMEM;
                r->headers = l;
        }
        SETOPT(CURLOPT_HTTPHEADER, r->headers);
#undef SETOPT
        return 0;
}

static int client_request(KubeClient *c, const char *path_and_query, const char *json_body,
                          unsigned stall_sec, KubeDataCallback on_data, KubeDoneCallback on_done,
                          void *userdata, KubeRequest **ret) {
        KubeRequest *r;
        const char *server;
        size_t n;
        int k;

        if (!c || !path_and_query || path_and_query[0] != '/')
                return -EINVAL;

        r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->client = c;
        r->method = json_body ? "POST" : "GET";
        r->on_data = on_data;
        r->on_done = on_done;
        r->userdata = userdata;

        server = c->config->server;
        n = strlen(server);
        while (n > 0 && server[n - 1] == '/')
                n--;
        if (asprintf(&r->url, "%.*s%s", (int) n, server, path_and_query) < 0) {
                r->url = NULL;
                request_free(r);
                return -ENOMEM;
        }

        r->easy = curl_easy_init();
        if (!r->easy) {
                request_free(r);
                return -ENOMEM;
        }

        k = request_setup(c, r, stall_sec);
        if (k >= 0 && json_body) {
                struct curl_slist *l = curl_slist_append(r->headers, "Content-Type: application/json");
                if (!l)
                        k = -ENOMEM;
                else {
                        r->headers = l;
                        if (curl_easy_setopt(r->easy, CURLOPT_HTTPHEADER, r->headers) != CURLE_OK ||
                            curl_easy_setopt(r->easy, CURLOPT_POSTFIELDSIZE, (long) strlen(json_body)) !=
                                    CURLE_OK ||
                            curl_easy_setopt(r->easy, CURLOPT_COPYPOSTFIELDS, json_body) != CURLE_OK)
                                k = -EIO;
                }
        }
        if (k < 0) {
                request_free(r);
                return k;
        }

        if (c->in_curl > 0)
                /* Called from on_data: curl must not be re-entered. */
                LIST_PREPEND(c->pending, r);
        else {
                CURLMcode mc = curl_multi_add_handle(c->multi, r->easy);
                if (mc != CURLM_OK) {
                        log_debug("Failed to add curl handle: %s", curl_multi_strerror(mc));
                        request_free(r);
                        return mc == CURLM_OUT_OF_MEMORY ? -ENOMEM : -EIO;
                }
                r->added = true;
                LIST_PREPEND(c->requests, r);
        }

        log_debug("%s %s", r->method, r->url);
        if (ret)
                *ret = r;
        return 0;
}

int kube_client_get(KubeClient *c, const char *path_and_query, unsigned stall_sec, KubeDataCallback on_data,
                    KubeDoneCallback on_done, void *userdata, KubeRequest **ret) {
        return client_request(c, path_and_query, NULL, stall_sec, on_data, on_done, userdata, ret);
}

int kube_client_post(KubeClient *c, const char *path, const char *json_body, unsigned stall_sec,
                     KubeDataCallback on_data, KubeDoneCallback on_done, void *userdata, KubeRequest **ret) {
        if (!json_body)
                return -EINVAL;
        return client_request(c, path, json_body, stall_sec, on_data, on_done, userdata, ret);
}

void kube_request_cancel(KubeRequest *r) {
        if (!r || r->cancelled || r->finishing)
                return;

        r->on_data = NULL;
        r->on_done = NULL;
        r->userdata = NULL;

        if (r->added && r->client->in_curl > 0) {
                /* Inside curl: mark it; its write callback aborts it and it
                 * is removed once curl returns. */
                r->cancelled = true;
                return;
        }

        request_detach(r);
        request_free(r);
}

long kube_request_get_status(const KubeRequest *r) {
        long status = 0;

        if (!r)
                return 0;
        if (r->status > 0)
                return r->status;
        (void) curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
        return status;
}

const char *kube_request_get_error_body(const KubeRequest *r) {
        return r ? r->error_body : NULL;
}

const char *kube_request_get_error_message(const KubeRequest *r) {
        return r ? r->errbuf : "";
}

const char *kube_request_get_url(const KubeRequest *r) {
        return r ? r->url : NULL;
}

sd_event *kube_client_get_event(KubeClient *c) {
        return c ? c->event : NULL;
}
