/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <cjson/cJSON.h>
#include <systemd/sd-event.h>

#include "macro.h"

/* A Kubernetes API client on the sd-event loop: libcurl's multi socket
 * interface, whose sockets and timeout become sd-event io and time sources.
 * No blocking call, no thread. TLS is always verified. */

typedef struct KubeConfig {
        char *server; /* "https://10.0.0.1:443" */
        char *ca_file; /* PEM file, or NULL */
        char *ca_data; /* PEM text (kubeconfig certificate-authority-data, decoded), or NULL */
        char *token; /* bearer token, or NULL */
        char *token_file; /* re-read when it changes (projected tokens rotate), or NULL */
        char *client_cert_file, *client_key_file; /* client certificate auth, or NULL */
        char *client_cert_data, *client_key_data; /* PEM text, or NULL */
} KubeConfig;

KubeConfig *kube_config_free(KubeConfig *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(KubeConfig *, kube_config_free);

/* In-cluster: KUBERNETES_SERVICE_HOST/_PORT and the service account's token
 * and CA under /var/run/secrets/kubernetes.io/serviceaccount/ (sa_dir NULL).
 * -ENXIO when not in a cluster. */
int kube_config_in_cluster(const char *sa_dir, KubeConfig **ret);
/* A kubeconfig file (YAML, libyaml): the current context (or 'context'),
 * its cluster (server, certificate-authority[-data]) and user (token,
 * tokenFile, client-certificate[-data], client-key[-data]). Relative paths
 * are relative to the file's directory. Errors name what is wrong in
 * *ret_error ("kubeconfig /x: context \"foo\" not found"). */
int kube_config_from_kubeconfig(const char *path, const char *context, KubeConfig **ret, char **ret_error);

typedef struct KubeClient KubeClient;
typedef struct KubeRequest KubeRequest;

int kube_client_new(sd_event *e, KubeConfig *config /* owned on success */, KubeClient **ret);
KubeClient *kube_client_free(KubeClient *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(KubeClient *, kube_client_free);

/* Streaming GET of server + path_and_query. on_data gets the body as it
 * arrives (any split), on_done once at the end: the HTTP status (0 when no
 * response) and a negative errno for transport errors (-ETIMEDOUT when the
 * stream stalled: no byte for stall_sec seconds, 0 = no stall check;
 * -ECONNREFUSED, -EPROTO for TLS failures...). After on_done the request is
 * freed by the client. Returning < 0 from on_data aborts the request
 * (on_done then gets that error). */
typedef int (*KubeDataCallback)(KubeRequest *r, const char *data, size_t size, void *userdata);
typedef void (*KubeDoneCallback)(KubeRequest *r, long http_status, int error, void *userdata);

int kube_client_get(KubeClient *c, const char *path_and_query, unsigned stall_sec, KubeDataCallback on_data,
                    KubeDoneCallback on_done, void *userdata, KubeRequest **ret);
/* The same for a POST of a JSON body (copied), e.g. a TokenReview. */
int kube_client_post(KubeClient *c, const char *path, const char *json_body, unsigned stall_sec,
                     KubeDataCallback on_data, KubeDoneCallback on_done, void *userdata, KubeRequest **ret);
/* Cancels a request: on_done is NOT called. */
void kube_request_cancel(KubeRequest *r);

/* Added by the client's implementation. on_data only ever sees the body of a
 * 2xx response; the body of any other (a Status object) is kept, up to 64
 * KiB, and can be read in on_done. Callbacks may start and cancel requests
 * (also their own); they must not free the client. */
long kube_request_get_status(const KubeRequest *r); /* HTTP status so far, 0 before headers */
const char *kube_request_get_error_body(const KubeRequest *r); /* NUL-terminated, or NULL */
const char *kube_request_get_url(const KubeRequest *r);
/* During on_done: curl's description of a transport error ("SSL certificate
 * problem: ..."), or "". */
const char *kube_request_get_error_message(const KubeRequest *r);
sd_event *kube_client_get_event(KubeClient *c);

/* A list+watch of one resource collection, e.g. "/api/v1/pods" with the
 * field selector "spec.nodeName=node1", or "/api/v1/namespaces".
 *
 * LIST with pagination (limit/continue), then WATCH from the list's
 * resourceVersion with allowWatchBookmarks=true, tracking resourceVersion
 * from every event and bookmark. A 410 Gone (HTTP status or ERROR event
 * with code 410) relists. Any other error, a cut stream, or a silent one
 * (no byte for idle_sec) reconnects with exponential backoff and jitter
 * (from the last resourceVersion). Watch streams are parsed incrementally
 * (newline-delimited JSON events, split anywhere across reads); an event
 * that is malformed or larger than max_event_bytes is logged with context
 * and skipped.
 *
 * Reporting: each (re)list calls sync_begin, then event(KUBE_EVENT_ADDED)
 * for every listed object, then vanished() for every object the consumer knew
 * that the list did not report (deleted while nobody watched), then synced.
 * Watch events follow. The watch does that bookkeeping: it remembers the
 * key of every object the consumer kept (event() returned true) until a
 * DELETED event or vanished() says it is no more. */

typedef enum KubeEventType {
        KUBE_EVENT_ADDED,
        KUBE_EVENT_MODIFIED,
        KUBE_EVENT_DELETED,
        _KUBE_EVENT_TYPE_MAX,
} KubeEventType;

/* How vanished() names an object: the key the consumer keeps it by. */
typedef enum KubeWatchKey {
        KUBE_WATCH_KEY_NAME, /* "NAMESPACE/NAME", or "NAME" for an object without a namespace */
        KUBE_WATCH_KEY_UID, /* metadata.uid */
} KubeWatchKey;

typedef struct KubeWatchCallbacks {
        void (*sync_begin)(void *userdata);
        /* Returns whether the consumer keeps the object (an ADDED or
         * MODIFIED one: it is its latest version now). An object it keeps
         * and the next (re)list does not report has vanished(). Ignored for
         * DELETED. */
        bool (*event)(KubeEventType type, const cJSON *object, void *userdata);
        /* Optional: an object the consumer kept that the last (re)list did
         * not report, by its key. Called after the list's events, in key
         * order (strcmp()), before synced. */
        void (*vanished)(const char *key, void *userdata);
        KubeWatchKey key; /* what vanished() gets */
        void (*synced)(void *userdata);
        /* Optional: a LIST answered with an HTTP error (e.g. 404: the resource
         * is not installed, 403: not allowed). The watch retries with backoff
         * either way; returning true means the consumer has said what it
         * means, and the watch only logs the failure at debug level. */
        bool (*list_failed)(long http_status, const char *message, void *userdata);
} KubeWatchCallbacks;

typedef struct KubeWatchOptions {
        unsigned idle_sec; /* silent stream timeout (0: 300) */
        unsigned timeout_sec; /* watch timeoutSeconds asked of the server (0: 1800) */
        unsigned backoff_min_msec; /* 0: 200 */
        unsigned backoff_max_msec; /* 0: 30000 */
        unsigned page_size; /* LIST limit (0: 500) */
        size_t max_event_bytes; /* 0: 16 MiB */
} KubeWatchOptions;

typedef struct KubeWatch KubeWatch;

int kube_watch_new(KubeClient *c, const char *path, const char *field_selector, const KubeWatchOptions *opts,
                   const KubeWatchCallbacks *cb, void *userdata, KubeWatch **ret);
/* Starts listing (asynchronously). */
int kube_watch_start(KubeWatch *w);
KubeWatch *kube_watch_free(KubeWatch *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(KubeWatch *, kube_watch_free);

/* State for status output and tests. */
typedef struct KubeWatchStats {
        const char *resource_version;
        bool synced; /* listed and watching */
        uint64_t relists; /* lists after the first (410s) */
        uint64_t reconnects; /* watch reconnects after errors */
        uint64_t events; /* watch events handled */
        uint64_t skipped; /* malformed or oversized events */
        int last_error; /* negative errno or -HTTP status... 0 when fine */
        uint64_t gone; /* HTTP 410 Gone (a watch's resourceVersion, a list's continue token) */
        uint64_t last_event_usec; /* CLOCK_MONOTONIC of the last list, event or bookmark; 0: none yet */
} KubeWatchStats;
void kube_watch_stats(const KubeWatch *w, KubeWatchStats *ret);
/* The stats as an object named name in parent (the agent's status). */
int kube_watch_stats_json(const KubeWatch *w, cJSON *parent, const char *name);
