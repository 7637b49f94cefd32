/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <systemd/sd-event.h>

#include "macro.h"

/* The HTTP listener's certificate and key (PEM files), handed to GnuTLS
 * through libmicrohttpd's certificate callback at each handshake, so that
 * new files apply to new connections without restarting the listener:
 * the files are stat()ed every HTTP_TLS_CHECK_USEC (device, inode, size,
 * mtime: a Kubernetes Secret volume swaps a symlink, a host edits in
 * place) and, when they changed and load, replace the credentials in
 * use. A pair that does not load (a half-written file, a key that does not
 * match) is refused: the last good one stays, and a warning says why (at
 * most once per change). Reading two small files on the loop, every few
 * seconds, is the only I/O. */

#define HTTP_TLS_CHECK_USEC (2 * USEC_PER_SEC)
#define HTTP_TLS_FILE_MAX (1024U * 1024U)

typedef struct HttpTls HttpTls;

/* Loads the pair now (-EINVAL with *ret_error saying why when it does not load). */
int http_tls_new(sd_event *event, const char *cert_file, const char *key_file, HttpTls **ret,
                 char **ret_error);
HttpTls *http_tls_free(HttpTls *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpTls *, http_tls_free);

/* For MHD_OPTION_HTTPS_CERT_CALLBACK: gnutls_certificate_retrieve_function2.
 * The HttpTls is found through a thread-free global (one listener per agent). */
int http_tls_retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                      const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length, gnutls_pcert_st **pcert,
                      unsigned int *pcert_length, gnutls_privkey_t *privkey);

/* Reloads now if the files changed (what the timer does). 1: reloaded, 0: unchanged, < 0: refused. */
int http_tls_check(HttpTls *t);
/* How many times new files were loaded, and refused. */
unsigned http_tls_reloads(const HttpTls *t);

/* The TLS transport of a connection, counted: libmicrohttpd 0.9.75 lets
 * GnuTLS read the socket itself during a handshake, so it never sees the
 * EAGAIN that ends a read, keeps the connection marked readable, and
 * answers MHD_get_timeout() with 0 until the handshake completes or the
 * connection times out: a client that sends part of a TLS record and waits
 * would have the loop run MHD at once, again and again (100 % of a core).
 * GnuTLS reads and writes through these functions instead (recv() and
 * send(MSG_NOSIGNAL), as its own do), and counts, for the MHD_run() in
 * progress, the reads that found nothing (EAGAIN) and the reads and
 * writes that moved bytes (or found an end or an error). A run whose
 * every read found nothing and that moved nothing is a stalled one
 * (http-server.c: its "0" is not believed). */
typedef struct HttpTlsIo {
        uint64_t again; /* reads that found nothing */
        uint64_t moved; /* reads and writes that did something */
} HttpTlsIo;

/* Sets the session's pull, pull-timeout and push functions (its transport
 * stays the socket's fd, as MHD set it). */
void http_tls_io_attach(gnutls_session_t session);
/* Counts go to 'io' until http_tls_io_end() (NULL: counted nowhere). */
void http_tls_io_begin(HttpTlsIo *io);
void http_tls_io_end(void);
