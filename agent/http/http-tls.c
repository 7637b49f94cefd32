/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The listener's TLS credentials, reloaded when their files change: see http-tls.h. */
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "fileio.h"
#include "http-tls.h"
#include "log.h"

#define HTTP_TLS_CHAIN_MAX 16U
#define HTTP_TLS_RETIRED_MAX 16U

typedef struct HttpTlsCreds {
        gnutls_pcert_st pcerts[HTTP_TLS_CHAIN_MAX];
        unsigned n_pcerts;
        gnutls_privkey_t key;
} HttpTlsCreds;

typedef struct FileId {
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtime;
} FileId;

struct HttpTls {
        sd_event_source *timer;
        char *cert_file, *key_file;
        FileId cert_id, key_id; /* of the files last tried */
        HttpTlsCreds *creds;
        /* Credentials replaced by a reload: a connection that shook hands
         * with them may still point at them (GnuTLS keeps the pointers of
         * the retrieve callback). Kept, at most HTTP_TLS_RETIRED_MAX. */
        HttpTlsCreds *retired[HTTP_TLS_RETIRED_MAX];
        unsigned n_retired, reloads, refused;
};

/* libmicrohttpd's certificate callback has no user data: one listener per agent. */
static HttpTls *current_tls = NULL;

static HttpTlsCreds *creds_free(HttpTlsCreds *c) {
        if (!c)
                return NULL;
        for (unsigned i = 0; i < c->n_pcerts; i++)
                gnutls_pcert_deinit(&c->pcerts[i]);
        if (c->key)
                gnutls_privkey_deinit(c->key);
        free(c);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpTlsCreds *, creds_free);

static void erase_free(char *s, size_t n) {
        if (!s)
                return;
        explicit_bzero(s, n);
        free(s);
}

static int creds_load(const char *cert_file, const char *key_file, HttpTlsCreds **ret, char **ret_error) {
        _cleanup_(creds_freep) HttpTlsCreds *c = NULL;
        _cleanup_free_ char *cert = NULL;
        char *key = NULL;
        size_t cert_size = 0, key_size = 0;
        gnutls_datum_t d;
        gnutls_pubkey_t pub = NULL;
        gnutls_datum_t a = {}, b = {};
        unsigned n = HTTP_TLS_CHAIN_MAX;
        int r, g;

        r = read_full_file_max(AT_FDCWD, cert_file, HTTP_TLS_FILE_MAX, &cert, &cert_size);
        if (r < 0)
                return asprintf(ret_error, "%s: %s", cert_file, strerror(-r)) < 0 ? -ENOMEM : r;
        r = read_full_file_max(AT_FDCWD, key_file, HTTP_TLS_FILE_MAX, &key, &key_size);
        if (r < 0)
                return asprintf(ret_error, "%s: %s", key_file, strerror(-r)) < 0 ? -ENOMEM : r;

        c = calloc(1, sizeof(*c));
        if (!c) {
                erase_free(key, key_size);
                return -ENOMEM;
        }
        d = (gnutls_datum_t){ .data = (unsigned char *) cert, .size = (unsigned) cert_size };
        g = gnutls_pcert_list_import_x509_raw(c->pcerts, &n, &d, GNUTLS_X509_FMT_PEM, 0);
        if (g < 0 || n == 0) {
                erase_free(key, key_size);
                return asprintf(ret_error, "%s: not a PEM certificate (chain): %s", cert_file,
                                g < 0 ? gnutls_strerror(g) : "no certificate") < 0
                               ? -ENOMEM
                               : -EINVAL;
        }
        c->n_pcerts = n;
        g = gnutls_privkey_init(&c->key);
        if (g >= 0) {
                d = (gnutls_datum_t){ .data = (unsigned char *) key, .size = (unsigned) key_size };
                g = gnutls_privkey_import_x509_raw(c->key, &d, GNUTLS_X509_FMT_PEM, NULL, 0);
        }
        erase_free(key, key_size);
        if (g < 0)
                return asprintf(ret_error, "%s: not a PEM private key: %s", key_file, gnutls_strerror(g)) < 0
                               ? -ENOMEM
                               : -EINVAL;

        /* The key must be the certificate's: compare the public keys. */
        g = gnutls_pubkey_init(&pub);
        if (g >= 0)
                g = gnutls_pubkey_import_privkey(pub, c->key, 0, 0);
        if (g >= 0)
                g = gnutls_pubkey_export2(pub, GNUTLS_X509_FMT_DER, &a);
        if (g >= 0)
                g = gnutls_pubkey_export2(c->pcerts[0].pubkey, GNUTLS_X509_FMT_DER, &b);
        if (pub)
                gnutls_pubkey_deinit(pub);
        bool same = g >= 0 && a.size == b.size && memcmp(a.data, b.data, a.size) == 0;
        gnutls_free(a.data);
        gnutls_free(b.data);
        if (!same)
                return asprintf(ret_error, "%s: not the private key of the certificate in %s", key_file,
                                cert_file) < 0
                               ? -ENOMEM
                               : -EINVAL;
        *ret = TAKE_PTR(c);
        return 0;
}

static void file_id(const char *path, FileId *ret) {
        struct stat st;

        if (stat(path, &st) < 0) {
                *ret = (FileId){};
                return;
        }
        *ret = (FileId){ .dev = st.st_dev, .ino = st.st_ino, .size = st.st_size, .mtime = st.st_mtim };
}

static bool file_id_eq(const FileId *a, const FileId *b) {
        return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
               a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

int http_tls_check(HttpTls *t) {
        _cleanup_free_ char *error = NULL;
        HttpTlsCreds *c = NULL;
        FileId cert_id, key_id;
        int r;

        file_id(t->cert_file, &cert_id);
        file_id(t->key_file, &key_id);
        if (file_id_eq(&cert_id, &t->cert_id) && file_id_eq(&key_id, &t->key_id))
                return 0;
        t->cert_id = cert_id;
        t->key_id = key_id;

        r = creds_load(t->cert_file, t->key_file, &c, &error);
        if (r < 0) {
                t->refused++;
                /* Once per change of the files: a half-written pair loads at the next check. */
                log_warning("http: the new TLS certificate or key does not load, keeping the last one: %s",
                            error ?: strerror(-r));
                return r;
        }
        if (t->n_retired == HTTP_TLS_RETIRED_MAX) {
                creds_free(t->retired[0]);
                memmove(t->retired, t->retired + 1, (HTTP_TLS_RETIRED_MAX - 1) * sizeof(t->retired[0]));
                t->n_retired--;
        }
        t->retired[t->n_retired++] = t->creds;
        t->creds = c;
        t->reloads++;
        log_info("http: loaded the new TLS certificate %s and key %s.", t->cert_file, t->key_file);
        return 1;
}

static int on_check_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        (void) http_tls_check(userdata);
        (void) sd_event_source_set_time_relative(s, HTTP_TLS_CHECK_USEC);
        (void) sd_event_source_set_enabled(s, SD_EVENT_ON);
        return 0;
}

int http_tls_new(sd_event *event, const char *cert_file, const char *key_file, HttpTls **ret,
                 char **ret_error) {
        _cleanup_(http_tls_freep) HttpTls *t = NULL;
        int r;

        if (!event || !cert_file || !key_file || !ret)
                return -EINVAL;
        if (current_tls)
                return -EBUSY;
        t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->cert_file = strdup(cert_file);
        t->key_file = strdup(key_file);
        if (!t->cert_file || !t->key_file)
                return -ENOMEM;
        file_id(cert_file, &t->cert_id);
        file_id(key_file, &t->key_id);
        r = creds_load(cert_file, key_file, &t->creds, ret_error);
        if (r < 0)
                return r;
        r = sd_event_add_time_relative(event, &t->timer, CLOCK_MONOTONIC, HTTP_TLS_CHECK_USEC,
                                       USEC_PER_SEC / 10, on_check_timer, t);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(t->timer, "http-tls-check");
        current_tls = t;
        *ret = TAKE_PTR(t);
        return 0;
}

HttpTls *http_tls_free(HttpTls *t) {
        if (!t)
                return NULL;
        if (current_tls == t)
                current_tls = NULL;
        sd_event_source_disable_unref(t->timer);
        creds_free(t->creds);
        for (unsigned i = 0; i < t->n_retired; i++)
                creds_free(t->retired[i]);
        free(t->cert_file);
        free(t->key_file);
        free(t);
        return NULL;
}

int http_tls_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                      const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length, gnutls_pcert_st **pcert,
                      unsigned int *pcert_length, gnutls_privkey_t *privkey) {
        if (!current_tls || !current_tls->creds)
                return -1;
        *pcert = current_tls->creds->pcerts;
        *pcert_length = current_tls->creds->n_pcerts;
        *privkey = current_tls->creds->key;
        return 0;
}

unsigned http_tls_reloads(const HttpTls *t) {
        return t ? t->reloads : 0;
}

/* Where the transport's counts go during an MHD_run() (one loop, one thread). */
static HttpTlsIo *current_io = NULL;

static ssize_t io_pull(gnutls_transport_ptr_t t, void *buf, size_t size) {
        ssize_t n = recv((int) (intptr_t) t, buf, size, 0);

        if (current_io) {
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
                        current_io->again++;
                else
                        current_io->moved++;
        }
        return n; /* errno as recv() left it: GnuTLS reads it */
}

static ssize_t io_push(gnutls_transport_ptr_t t, const void *buf, size_t size) {
        ssize_t n = send((int) (intptr_t) t, buf, size, MSG_NOSIGNAL);

        if (current_io && !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)))
                current_io->moved++;
        return n;
}

void http_tls_io_attach(gnutls_session_t session) {
        gnutls_transport_set_pull_function(session, io_pull);
        gnutls_transport_set_pull_timeout_function(session, gnutls_system_recv_timeout);
        gnutls_transport_set_push_function(session, io_push);
}

void http_tls_io_begin(HttpTlsIo *io) {
        current_io = io;
}

void http_tls_io_end(void) {
        current_io = NULL;
}
