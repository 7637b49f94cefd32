/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* List+watch of one Kubernetes collection, as agent/kube/kube-client.h describes.
 *
 *          start             last page                   normal close after >= 1 s
 *   IDLE ─────────> LISTING ──────────────> WATCHING ───────────┐ (timeoutSeconds):
 *                    │   ^  next page,        │   ^ ^            │ again from the
 *                    │   └─ expired continue  │   │ └────────────┘ last resourceVersion
 *             error  │                        │   │
 *                    v          error, idle   v   │ backoff elapsed
 *                  WAITING <─────────────── (any) ┘
 *                    │   410 Gone (HTTP or ERROR event): relist, at once the
 *                    └─> first time after a good event, else after the backoff
 *
 * Backoff: exponential with full jitter, uniform in [min, min(max, min·2^n)]
 * where n counts failures since the last good watch event (or bookmark).
 * The watch asks for timeoutSeconds below idle_sec, so a quiet collection on
 * a server without periodic bookmarks ends normally instead of stalling.
 *
 * All of it runs on the client's sd-event loop: the requests are the
 * client's, the backoff is one time source. The callbacks must not free the
 * watch. */

#include <inttypes.h>
#include <sys/random.h>
#include <time.h>

#include <curl/curl.h>

#include "hashmap.h"
#include "kube-client.h"
#include "log.h"

#define DEFAULT_IDLE_SEC 300U
#define DEFAULT_TIMEOUT_SEC 1800U
#define DEFAULT_BACKOFF_MIN_MSEC 200U
#define DEFAULT_BACKOFF_MAX_MSEC 30000U
#define DEFAULT_PAGE_SIZE 500U
#define DEFAULT_MAX_EVENT_BYTES ((size_t) 16U * 1024U * 1024U)
/* One LIST page (page_size objects) is held whole before it is parsed. */
#define LIST_PAGE_MAX ((size_t) 512U * 1024U * 1024U)
/* A watch the server closes sooner than this was not a normal timeout: back off. */
#define WATCH_MIN_LIFETIME_USEC (1 * USEC_PER_SEC)
#define LOG_CONTEXT_BYTES 200

static inline void cjson_deletep(cJSON **j) {
        cJSON_Delete(*j);
}

typedef enum WatchState {
        WATCH_IDLE,
        WATCH_LISTING,
        WATCH_WATCHING,
        WATCH_WAITING,
        _WATCH_STATE_MAX,
} WatchState;

static const char *const watch_state_table[_WATCH_STATE_MAX] = {
        [WATCH_IDLE] = "idle",
        [WATCH_LISTING] = "listing",
        [WATCH_WATCHING] = "watching",
        [WATCH_WAITING] = "waiting",
};

/* An object the consumer keeps, and the list that last reported it. */
typedef struct Known {
        char *key;
        uint64_t seen; /* a KubeWatch.generation */
} Known;

DEFINE_STRING_HASHMAP(KnownMap, known_map, Known);

struct KubeWatch {
        KubeClient *client;
        char *path;
        char *field_selector; /* URL-escaped, or NULL */
        KubeWatchOptions opts;
        KubeWatchCallbacks cb;
        void *userdata;

        WatchState state;
        KubeRequest *request;
        sd_event_source *timer;
        bool need_list; /* the next attempt lists (not yet listed, or 410 Gone) */
        unsigned attempts; /* failures since the last good event: the backoff exponent */

        /* The current LIST page's body, or the current watch line. */
        char *buf;
        size_t buf_size, buf_allocated;

        /* LIST */
        cJSON *items; /* accumulated over the pages */
        char *continue_token;
        char *list_rv;

        /* WATCH */
        bool skipping; /* inside an oversized event: drop up to its newline */
        uint64_t watch_started;
        int abort_error; /* why on_data aborted the watch */
        bool abort_relist; /* ... and that it needs a relist (ERROR 410) */

        char *rv;
        bool synced;
        uint64_t relists, reconnects, events, skipped;
        uint64_t gone, last_event_usec; /* 410s; the last list, event or bookmark (CLOCK_MONOTONIC) */
        int last_error;

        /* The relist bookkeeping (cb.vanished): what the consumer keeps, by key. */
        KnownMap known;
        uint64_t generation; /* lists so far */
};

static void watch_set_state(KubeWatch *w, WatchState s) {
        if (w->state == s)
                return;
        log_debug("kube watch %s: %s -> %s", w->path, watch_state_table[w->state], watch_state_table[s]);
        w->state = s;
}

static int set_str(char **p, const char *s) {
        char *n = NULL;

        if (s) {
                n = strdup(s);
                if (!n)
                        return -ENOMEM;
        }
        free(*p);
        *p = n;
        return 0;
}

static int buf_append(KubeWatch *w, const char *data, size_t size, size_t max) {
        if (size > max || w->buf_size > max - size)
                return -EFBIG;
        if (w->buf_size + size + 1 > w->buf_allocated) {
                size_t a = MAX(w->buf_allocated * 2, w->buf_size + size + 1);
                a = MAX(a, (size_t) 4096);
                char *b = realloc(w->buf, a);
                if (!b)
                        return -ENOMEM;
                w->buf = b;
                w->buf_allocated = a;
        }
        memcpy(w->buf + w->buf_size, data, size);
        w->buf_size += size;
        w->buf[w->buf_size] = 0;
        return 0;
}

static void buf_reset(KubeWatch *w, bool release) {
        w->buf_size = 0;
        if (w->buf)
                w->buf[0] = 0;
        if (release) {
                free(w->buf);
                w->buf = NULL;
                w->buf_allocated = 0;
        }
}

static const char *json_string(const cJSON *j, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static const char *object_rv(const cJSON *object) {
        return json_string(cJSON_GetObjectItemCaseSensitive(object, "metadata"), "resourceVersion");
}

static const char *object_name(const cJSON *object) {
        const char *n = json_string(cJSON_GetObjectItemCaseSensitive(object, "metadata"), "name");
        return n && n[0] ? n : NULL;
}

/* The first LOG_CONTEXT_BYTES bytes of what we could not use, printable:
 * control and non-ASCII bytes escaped as \xNN. */
#define LOG_CONTEXT_MAX (LOG_CONTEXT_BYTES * 4 + 4)
static const char *log_context(char buf[static LOG_CONTEXT_MAX], const char *data, size_t size) {
        size_t j = 0;

        for (size_t i = 0; i < MIN(size, (size_t) LOG_CONTEXT_BYTES) && data; i++) {
                unsigned char c = (unsigned char) data[i];
                if (c < ' ' || c >= 0x7f || c == '\\')
                        j += (size_t) snprintf(buf + j, LOG_CONTEXT_MAX - j, "\\x%02x", c);
                else
                        buf[j++] = (char) c;
        }
        if (size > LOG_CONTEXT_BYTES) {
                memcpy(buf + j, "...", 3);
                j += 3;
        }
        buf[j] = 0;
        return buf;
}

/* The message of a Status object (an error response's body), or NULL. */
static char *status_message(const char *body) {
        cJSON *j;
        char *m = NULL;

        if (!body)
                return NULL;
        j = cJSON_Parse(body);
        if (j) {
                const char *s = json_string(j, "message");
                if (s)
                        m = strdup(s);
                cJSON_Delete(j);
        }
        if (!m) { /* not a Status: the start of the body */
                char ctx[LOG_CONTEXT_MAX];
                m = strdup(log_context(ctx, body, strlen(body)));
        } else
                for (char *p = m; *p; p++)
                        if ((unsigned char) *p < ' ')
                                *p = ' ';
        return m;
}

static uint64_t random_u64(void) {
        uint64_t v;

        if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
                v = ((uint64_t) random() << 32) ^ (uint64_t) random();
        return v;
}

/* Exponential backoff with full jitter: uniform in [min, min(max, min·2^n)]. */
static uint64_t backoff_usec(KubeWatch *w) {
        uint64_t lo = w->opts.backoff_min_msec, hi = w->opts.backoff_max_msec, ceiling = lo;

        /* lo <= hi < 2^32: no overflow. */
        for (unsigned i = 0; i < w->attempts && ceiling < hi; i++)
                ceiling *= 2;
        ceiling = MIN(ceiling, hi);
        return (lo + (ceiling > lo ? random_u64() % (ceiling - lo + 1) : 0)) * USEC_PER_MSEC;
}

static int watch_start_list(KubeWatch *w);
static int watch_start_watch(KubeWatch *w);

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata);

/* Waits 'usec', then lists (w->need_list) or watches again. */
static void watch_schedule(KubeWatch *w, uint64_t usec) {
        sd_event *e = kube_client_get_event(w->client);
        uint64_t now;
        int r;

        watch_set_state(w, WATCH_WAITING);
        log_debug("kube watch %s: %s in %" PRIu64 " ms", w->path, w->need_list ? "listing" : "watching",
                  usec / USEC_PER_MSEC);

        r = sd_event_now(e, CLOCK_MONOTONIC, &now);
        if (r >= 0) {
                if (w->timer) {
                        r = sd_event_source_set_time(w->timer, now + usec);
                        if (r >= 0)
                                r = sd_event_source_set_enabled(w->timer, SD_EVENT_ONESHOT);
                } else {
                        r = sd_event_add_time(e, &w->timer, CLOCK_MONOTONIC, now + usec, USEC_PER_MSEC,
                                              on_timer, w);
                        if (r >= 0)
                                (void) sd_event_source_set_description(w->timer, "kube-watch-backoff");
                }
        }
        if (r < 0)
                /* Nothing would ever wake us: say so loudly. */
                log_error_errno(r, "kube watch %s: failed to arm the retry timer, watch stopped: %m",
                                w->path);
}

/* After a failure: back off, exponentially. */
static void watch_retry(KubeWatch *w) {
        uint64_t usec = backoff_usec(w);

        if (w->attempts < 64)
                w->attempts++;
        watch_schedule(w, usec);
}

static void watch_start_or_retry(KubeWatch *w) {
        int r = w->need_list ? watch_start_list(w) : watch_start_watch(w);
        if (r < 0) {
                log_warning_errno(r, "kube watch %s: failed to start a request: %m", w->path);
                w->last_error = r;
                watch_retry(w);
        }
}

static int on_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        watch_start_or_retry(userdata);
        return 0;
}

/* 410 Gone: our resourceVersion is too old, only a new list helps. The
 * first relist after a good event is immediate, repeated ones back off. */
static void watch_relist(KubeWatch *w) {
        w->need_list = true;
        w->synced = false;
        w->relists++;
        w->gone++;
        if (w->attempts == 0) {
                w->attempts++;
                watch_start_or_retry(w);
        } else
                watch_retry(w);
}

static void known_free(Known *k) {
        if (k) {
                free(k->key);
                free(k);
        }
}

/* The key vanished() would name the object by, or NULL (malloc()ed). */
static char *object_key(const KubeWatch *w, const cJSON *object) {
        const cJSON *meta = cJSON_GetObjectItemCaseSensitive(object, "metadata");
        const char *name = json_string(meta, "name"), *ns = json_string(meta, "namespace");
        char *key;

        if (w->cb.key == KUBE_WATCH_KEY_UID) {
                const char *uid = json_string(meta, "uid");
                return uid && uid[0] ? strdup(uid) : NULL;
        }
        if (!name)
                return NULL;
        if (!ns || !ns[0])
                return strdup(name);
        return asprintf(&key, "%s/%s", ns, name) < 0 ? NULL : key;
}

/* Hands an event to the consumer, and notes what it keeps. */
static void watch_dispatch(KubeWatch *w, KubeEventType type, const cJSON *object) {
        _cleanup_free_ char *key = NULL;
        bool kept = false;
        Known *k;

        if (w->cb.event)
                kept = w->cb.event(type, object, w->userdata);
        if (!w->cb.vanished)
                return;
        key = object_key(w, object);
        if (!key)
                return;
        if (type == KUBE_EVENT_DELETED) {
                known_free(known_map_remove(&w->known, key));
                return;
        }
        if (!kept)
                return; /* not stamped: the next list forgets it unless it keeps it then */
        k = known_map_get(&w->known, key);
        if (!k) {
                k = calloc(1, sizeof(*k));
                if (!k || known_map_put(&w->known, key, k) < 0) {
                        free(k);
                        log_oom();
                        return;
                }
                k->key = TAKE_PTR(key);
        }
        k->seen = w->generation;
}

static int known_cmp(const void *a, const void *b) {
        return strcmp((*(Known *const *) a)->key, (*(Known *const *) b)->key);
}

/* After a list: what the consumer keeps that the list did not report has vanished. */
static void watch_sweep(KubeWatch *w) {
        _cleanup_free_ Known **stale = NULL;
        size_t n = 0, allocated = 0;
        Known *k;

        if (!w->cb.vanished)
                return;
        HASHMAP_FOREACH (k, known_map, &w->known) {
                if (k->seen == w->generation)
                        continue;
                if (n == allocated) {
                        size_t a = MAX(allocated * 2, (size_t) 16);
                        Known **l = reallocarray(stale, a, sizeof(Known *));
                        if (!l) {
                                log_oom();
                                break;
                        }
                        stale = l;
                        allocated = a;
                }
                stale[n++] = k;
        }
        if (n > 1)
                qsort(stale, n, sizeof(Known *), known_cmp);
        for (size_t i = 0; i < n; i++) {
                (void) known_map_remove(&w->known, stale[i]->key);
                log_debug("kube watch %s: %s was not listed again: it vanished.", w->path, stale[i]->key);
                w->cb.vanished(stale[i]->key, w->userdata);
                known_free(stale[i]);
        }
}

static void list_reset(KubeWatch *w) {
        cJSON_Delete(w->items);
        w->items = NULL;
        free(w->continue_token);
        w->continue_token = NULL;
        free(w->list_rv);
        w->list_rv = NULL;
        buf_reset(w, true);
}

static int on_list_data(KubeRequest *r, const char *data, size_t size, void *userdata) {
        KubeWatch *w = userdata;
        int k = buf_append(w, data, size, LIST_PAGE_MAX);
        if (k == -EFBIG)
                log_warning("kube watch %s: LIST page larger than %zu bytes, giving up on it.", w->path,
                            LIST_PAGE_MAX);
        return k;
}

/* All pages are in: report them, then watch from the list's version. */
static void list_finish(KubeWatch *w) {
        cJSON *item;

        free(w->rv);
        w->rv = TAKE_PTR(w->list_rv);
        w->last_error = 0;
        w->need_list = false;

        log_debug("kube watch %s: listed %d objects at resourceVersion %s", w->path,
                  cJSON_GetArraySize(w->items), strna(w->rv));

        w->generation++;
        if (w->cb.sync_begin)
                w->cb.sync_begin(w->userdata);
        cJSON_ArrayForEach (item, w->items)
                watch_dispatch(w, KUBE_EVENT_ADDED, item);
        watch_sweep(w);
        w->synced = true;
        w->last_event_usec = now_usec(CLOCK_MONOTONIC);
        if (w->cb.synced)
                w->cb.synced(w->userdata);
        list_reset(w);

        watch_start_or_retry(w);
}

static void on_list_done(KubeRequest *r, long status, int error, void *userdata) {
        KubeWatch *w = userdata;
        _cleanup_free_ char *msg = NULL;
        cJSON *j = NULL, *items;
        const char *cont, *rv;
        int k;

        w->request = NULL;

        if (error < 0) {
                const char *m = kube_request_get_error_message(r);
                log_warning_errno(error, "kube watch %s: LIST failed: %m%s%s%s", w->path, m[0] ? " (" : "",
                                  m, m[0] ? ")" : "");
                w->last_error = error;
                goto retry;
        }

        if (status == 410 && w->continue_token) {
                /* The continue token expired (the snapshot it pins was
                 * compacted): the pages so far are stale, start over. */
                msg = status_message(kube_request_get_error_body(r));
                log_warning("kube watch %s: LIST continue token expired (HTTP 410: %s), listing again.",
                            w->path, strna(msg));
                w->gone++;
                list_reset(w);
                watch_start_or_retry(w);
                return;
        }

        if (status != 200) {
                msg = status_message(kube_request_get_error_body(r));
                if (w->cb.list_failed && w->cb.list_failed(status, msg, w->userdata))
                        log_debug("kube watch %s: LIST failed with HTTP %ld: %s", w->path, status,
                                  strna(msg));
                else
                        log_warning("kube watch %s: LIST failed with HTTP %ld: %s", w->path, status,
                                    strna(msg));
                w->last_error = status > 0 ? (int) -status : -EIO;
                goto retry;
        }

        j = cJSON_ParseWithLength(w->buf ?: "", w->buf_size);
        if (!j) {
                char ctx[LOG_CONTEXT_MAX];
                log_warning("kube watch %s: LIST response is not JSON: %s", w->path,
                            log_context(ctx, w->buf, w->buf_size));
                w->last_error = -EBADMSG;
                goto retry;
        }
        buf_reset(w, true);

        items = cJSON_GetObjectItemCaseSensitive(j, "items");
        if (!cJSON_IsArray(items) && !cJSON_IsNull(items)) {
                log_warning("kube watch %s: LIST response has no items.", w->path);
                w->last_error = -EBADMSG;
                goto retry;
        }
        if (!w->items) {
                w->items = cJSON_CreateArray();
                if (!w->items) {
                        w->last_error = log_oom();
                        goto retry;
                }
        }
        /* Move the items over, without copying. */
        while (cJSON_IsArray(items) && items->child) {
                cJSON *item = cJSON_DetachItemViaPointer(items, items->child);
                if (!cJSON_IsObject(item) || !object_name(item)) {
                        log_warning("kube watch %s: LIST item without metadata.name, skipping it.", w->path);
                        w->skipped++;
                        cJSON_Delete(item);
                        continue;
                }
                cJSON_AddItemToArray(w->items, item);
        }

        cJSON *meta = cJSON_GetObjectItemCaseSensitive(j, "metadata");
        rv = json_string(meta, "resourceVersion");
        cont = json_string(meta, "continue");
        if (set_str(&w->list_rv, rv) < 0 || set_str(&w->continue_token, cont && cont[0] ? cont : NULL) < 0) {
                w->last_error = log_oom();
                goto retry;
        }
        cJSON_Delete(j);
        j = NULL;

        if (w->continue_token) {
                log_debug("kube watch %s: %d objects so far, next page", w->path,
                          cJSON_GetArraySize(w->items));
                k = watch_start_list(w);
                if (k < 0) {
                        log_warning_errno(k, "kube watch %s: failed to request the next LIST page: %m",
                                          w->path);
                        w->last_error = k;
                        goto retry;
                }
                return;
        }

        if (!w->list_rv) {
                log_warning("kube watch %s: LIST response has no resourceVersion.", w->path);
                w->last_error = -EBADMSG;
                goto retry;
        }

        list_finish(w);
        return;

retry:
        cJSON_Delete(j);
        list_reset(w);
        w->need_list = true;
        watch_retry(w);
}

static int append_query(char **url, const char *sep, const char *key, const char *value, bool escape) {
        _cleanup_free_ char *n = NULL;
        char *e = NULL;

        if (escape) {
                e = curl_easy_escape(NULL, value, 0);
                if (!e)
                        return -ENOMEM;
        }
        int k = asprintf(&n, "%s%s%s=%s", *url, sep, key, e ?: value);
        curl_free(e);
        if (k < 0)
                return -ENOMEM;
        free(*url);
        *url = TAKE_PTR(n);
        return 0;
}

/* One parameter of a request's query: escape says whether to percent-encode
 * the value. A NULL value leaves the parameter out. */
typedef struct QueryParam {
        const char *key, *value;
        bool escape;
} QueryParam;

/* path?key=value&key=value... of the n params (the ones with a value). */
static int request_url(const char *path, const QueryParam *params, size_t n, char **ret) {
        _cleanup_free_ char *url = NULL;
        const char *sep = "?";
        int r;

        url = strdup(path);
        if (!url)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++) {
                if (!params[i].value)
                        continue;
                r = append_query(&url, sep, params[i].key, params[i].value, params[i].escape);
                if (r < 0)
                        return r;
                sep = "&";
        }
        *ret = TAKE_PTR(url);
        return 0;
}

static int watch_start_list(KubeWatch *w) {
        _cleanup_free_ char *url = NULL;
        char limit[32];
        int r;

        snprintf(limit, sizeof(limit), "%u", w->opts.page_size);
        const QueryParam params[] = {
                { "limit", limit },
                { "continue", w->continue_token, true },
                { "fieldSelector", w->field_selector },
        };
        r = request_url(w->path, params, ELEMENTSOF(params), &url);
        if (r < 0)
                return r;

        buf_reset(w, false);
        r = kube_client_get(w->client, url, w->opts.idle_sec, on_list_data, on_list_done, w, &w->request);
        if (r < 0)
                return r;

        log_debug("kube watch %s: LIST %s", w->path, url);
        watch_set_state(w, WATCH_LISTING);
        return 0;
}

/* One complete line of a watch stream: one event. Returns < 0 to end the
 * watch (w->abort_relist says whether to relist). */
static int watch_handle_line(KubeWatch *w, char *line, size_t size) {
        _cleanup_(cjson_deletep) cJSON *j = NULL;
        const char *type, *rv;
        cJSON *object;

        while (size > 0 && strchr(" \t\r", line[size - 1]))
                size--;
        if (size == 0 || strspn(line, " \t\r") == size)
                return 0; /* a blank line (keepalive) */

        j = cJSON_ParseWithLength(line, size);
        type = json_string(j, "type");
        object = cJSON_GetObjectItemCaseSensitive(j, "object");
        if (!j || !type || !cJSON_IsObject(object)) {
                char ctx[LOG_CONTEXT_MAX];
                log_warning("kube watch %s: malformed watch event, skipping it: %s", w->path,
                            log_context(ctx, line, size));
                w->skipped++;
                return 0;
        }

        if (streq(type, "ERROR")) {
                const cJSON *code = cJSON_GetObjectItemCaseSensitive(object, "code");
                const char *msg = json_string(object, "message"), *reason = json_string(object, "reason");
                /* An HTTP status: anything else (huge, negative, NaN) is no code. */
                long c = cJSON_IsNumber(code) && code->valuedouble >= 100 && code->valuedouble < 1000
                                 ? (long) code->valuedouble
                                 : 0;

                if (c == 410) {
                        log_warning("kube watch %s: resourceVersion %s is gone (%s: %s), listing again.",
                                    w->path, strna(w->rv), strna(reason), strna(msg));
                        w->abort_relist = true;
                        w->abort_error = -ESTALE;
                } else {
                        log_warning("kube watch %s: watch error %ld (%s: %s), reconnecting.", w->path, c,
                                    strna(reason), strna(msg));
                        w->abort_error = c > 0 ? (int) -c : -EIO;
                }
                return w->abort_error;
        }

        rv = object_rv(object);
        if (streq(type, "BOOKMARK")) {
                if (rv) {
                        log_debug("kube watch %s: bookmark at resourceVersion %s", w->path, rv);
                        if (set_str(&w->rv, rv) < 0)
                                return log_oom();
                }
                w->attempts = 0;
                w->last_error = 0;
                w->last_event_usec = now_usec(CLOCK_MONOTONIC);
                return 0;
        }

        KubeEventType t;
        if (streq(type, "ADDED"))
                t = KUBE_EVENT_ADDED;
        else if (streq(type, "MODIFIED"))
                t = KUBE_EVENT_MODIFIED;
        else if (streq(type, "DELETED"))
                t = KUBE_EVENT_DELETED;
        else {
                log_warning("kube watch %s: unknown watch event type \"%s\", skipping it.", w->path, type);
                w->skipped++;
                return 0;
        }

        if (!object_name(object)) {
                char ctx[LOG_CONTEXT_MAX];
                log_warning("kube watch %s: %s event for an object without metadata.name, skipping it: %s",
                            w->path, type, log_context(ctx, line, size));
                w->skipped++;
                return 0;
        }

        if (rv && set_str(&w->rv, rv) < 0)
                return log_oom();
        w->events++;
        w->last_event_usec = now_usec(CLOCK_MONOTONIC);
        w->attempts = 0;
        w->last_error = 0;
        watch_dispatch(w, t, object);
        return 0;
}

/* Newline-delimited JSON, split anywhere across reads. */
static int on_watch_data(KubeRequest *r, const char *data, size_t size, void *userdata) {
        KubeWatch *w = userdata;

        while (size > 0) {
                const char *nl = memchr(data, '\n', size);
                size_t n = nl ? (size_t) (nl - data) : size;
                int k;

                if (w->skipping) {
                        if (nl)
                                w->skipping = false;
                } else {
                        k = buf_append(w, data, n, w->opts.max_event_bytes);
                        if (k == -EFBIG) {
                                char ctx[LOG_CONTEXT_MAX];
                                log_warning(
                                        "kube watch %s: watch event larger than %zu bytes, skipping it: %s",
                                        w->path, w->opts.max_event_bytes,
                                        log_context(ctx, w->buf, w->buf_size));
                                w->skipped++;
                                buf_reset(w, true);
                                w->skipping = !nl;
                        } else if (k < 0)
                                return k;
                        else if (nl) {
                                k = watch_handle_line(w, w->buf, w->buf_size);
                                buf_reset(w, w->buf_allocated > 1024 * 1024);
                                if (k < 0)
                                        return k;
                        }
                }

                if (!nl)
                        break;
                size -= n + 1;
                data = nl + 1;
        }
        return 0;
}

static void on_watch_done(KubeRequest *r, long status, int error, void *userdata) {
        KubeWatch *w = userdata;
        _cleanup_free_ char *msg = NULL;
        uint64_t now = 0;

        w->request = NULL;
        buf_reset(w, true);
        w->skipping = false;

        if (w->abort_error < 0 && error == w->abort_error) {
                /* We ended it, for an ERROR event (logged). */
                bool relist = w->abort_relist;
                w->abort_error = 0;
                w->abort_relist = false;
                if (relist) {
                        watch_relist(w);
                        return;
                }
                w->last_error = error;
                w->reconnects++;
                watch_retry(w);
                return;
        }

        if (error < 0) {
                if (error == -ETIMEDOUT)
                        log_warning("kube watch %s: no data for %u s, reconnecting.", w->path,
                                    w->opts.idle_sec);
                else {
                        const char *m = kube_request_get_error_message(r);
                        log_warning_errno(error, "kube watch %s: watch failed, reconnecting: %m%s%s%s",
                                          w->path, m[0] ? " (" : "", m, m[0] ? ")" : "");
                }
                w->last_error = error;
                w->reconnects++;
                watch_retry(w);
                return;
        }

        if (status == 410) {
                msg = status_message(kube_request_get_error_body(r));
                log_warning("kube watch %s: resourceVersion %s is gone (HTTP 410: %s), listing again.",
                            w->path, strna(w->rv), strna(msg));
                watch_relist(w);
                return;
        }

        if (status != 200) {
                msg = status_message(kube_request_get_error_body(r));
                log_warning("kube watch %s: watch failed with HTTP %ld: %s", w->path, status, strna(msg));
                w->last_error = status > 0 ? (int) -status : -EIO;
                w->reconnects++;
                watch_retry(w);
                return;
        }

        (void) sd_event_now(kube_client_get_event(w->client), CLOCK_MONOTONIC, &now);
        if (now >= w->watch_started + WATCH_MIN_LIFETIME_USEC) {
                /* timeoutSeconds elapsed: carry on from where we are. */
                log_debug("kube watch %s: server closed the watch, watching again from resourceVersion %s",
                          w->path, strna(w->rv));
                watch_start_or_retry(w);
                return;
        }

        log_warning("kube watch %s: server closed the watch at once, reconnecting.", w->path);
        w->last_error = -ECONNRESET;
        w->reconnects++;
        watch_retry(w);
}

static int watch_start_watch(KubeWatch *w) {
        _cleanup_free_ char *url = NULL;
        char timeout[32];
        int r;

        /* Ask the server to end the watch before it could look stalled to
         * us: a quiet collection on a server that sends no periodic
         * bookmarks (before 1.21) must end normally, not in an idle timeout. */
        unsigned t = MIN(w->opts.timeout_sec, w->opts.idle_sec - MAX(w->opts.idle_sec / 10, 1U));
        snprintf(timeout, sizeof(timeout), "%u", MAX(t, 1U));
        const QueryParam params[] = {
                { "watch", "1" },
                { "resourceVersion", strempty(w->rv), true },
                { "allowWatchBookmarks", "true" },
                { "timeoutSeconds", timeout },
                { "fieldSelector", w->field_selector },
        };
        r = request_url(w->path, params, ELEMENTSOF(params), &url);
        if (r < 0)
                return r;

        buf_reset(w, true);
        w->skipping = false;
        w->abort_error = 0;
        w->abort_relist = false;
        r = kube_client_get(w->client, url, w->opts.idle_sec, on_watch_data, on_watch_done, w, &w->request);
        if (r < 0)
                return r;

        (void) sd_event_now(kube_client_get_event(w->client), CLOCK_MONOTONIC, &w->watch_started);
        log_debug("kube watch %s: WATCH %s", w->path, url);
        watch_set_state(w, WATCH_WATCHING);
        return 0;
}

int kube_watch_new(KubeClient *c, const char *path, const char *field_selector, const KubeWatchOptions *opts,
                   const KubeWatchCallbacks *cb, void *userdata, KubeWatch **ret) {
        _cleanup_(kube_watch_freep) KubeWatch *w = NULL;

        if (!c || !path || path[0] != '/' || strpbrk(path, "?#") || !cb || !ret)
                return -EINVAL;

        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->client = c;
        w->cb = *cb;
        w->userdata = userdata;
        w->need_list = true;
        if (opts)
                w->opts = *opts;
        if (w->opts.idle_sec == 0)
                w->opts.idle_sec = DEFAULT_IDLE_SEC;
        if (w->opts.timeout_sec == 0)
                w->opts.timeout_sec = DEFAULT_TIMEOUT_SEC;
        if (w->opts.backoff_min_msec == 0)
                w->opts.backoff_min_msec = DEFAULT_BACKOFF_MIN_MSEC;
        if (w->opts.backoff_max_msec == 0)
                w->opts.backoff_max_msec = DEFAULT_BACKOFF_MAX_MSEC;
        if (w->opts.backoff_max_msec < w->opts.backoff_min_msec)
                w->opts.backoff_max_msec = w->opts.backoff_min_msec;
        if (w->opts.page_size == 0)
                w->opts.page_size = DEFAULT_PAGE_SIZE;
        if (w->opts.max_event_bytes == 0)
                w->opts.max_event_bytes = DEFAULT_MAX_EVENT_BYTES;

        w->path = strdup(path);
        if (!w->path)
                return -ENOMEM;
        if (field_selector && field_selector[0]) {
                w->field_selector = curl_easy_escape(NULL, field_selector, 0);
                if (!w->field_selector)
                        return -ENOMEM;
        }

        *ret = TAKE_PTR(w);
        return 0;
}

int kube_watch_start(KubeWatch *w) {
        if (!w)
                return -EINVAL;
        if (w->state != WATCH_IDLE)
                return -EBUSY;
        w->need_list = true;
        return watch_start_list(w);
}

KubeWatch *kube_watch_free(KubeWatch *w) {
        if (!w)
                return NULL;
        kube_request_cancel(w->request);
        sd_event_source_disable_unref(w->timer);
        list_reset(w);
        free(w->path);
        curl_free(w->field_selector);
        free(w->rv);
        known_map_clear(&w->known, known_free);
        free(w);
        return NULL;
}

void kube_watch_stats(const KubeWatch *w, KubeWatchStats *ret) {
        if (!ret)
                return;
        if (!w) {
                *ret = (KubeWatchStats){};
                return;
        }
        *ret = (KubeWatchStats){
                .resource_version = w->rv,
                .synced = w->synced,
                .relists = w->relists,
                .reconnects = w->reconnects,
                .events = w->events,
                .skipped = w->skipped,
                .last_error = w->last_error,
                .gone = w->gone,
                .last_event_usec = w->last_event_usec,
        };
}

int kube_watch_stats_json(const KubeWatch *w, cJSON *parent, const char *name) {
        KubeWatchStats st;
        cJSON *o = cJSON_AddObjectToObject(parent, name);

        if (!o)
                return -ENOMEM;
        kube_watch_stats(w, &st);
        cJSON_AddBoolToObject(o, "synced", st.synced);
        cJSON_AddStringToObject(o, "resourceVersion", strempty(st.resource_version));
        cJSON_AddNumberToObject(o, "relists", (double) st.relists);
        cJSON_AddNumberToObject(o, "reconnects", (double) st.reconnects);
        cJSON_AddNumberToObject(o, "events", (double) st.events);
        cJSON_AddNumberToObject(o, "skipped", (double) st.skipped);
        cJSON_AddNumberToObject(o, "lastError", (double) st.last_error);
        cJSON_AddNumberToObject(o, "gone", (double) st.gone);
        return 0;
}
