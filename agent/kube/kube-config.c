/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Where the Kubernetes API is and how to authenticate to it: in-cluster
 * (service account) or from a kubeconfig file.
 *
 * A kubeconfig is YAML (or JSON, which is YAML): libyaml's loader turns it
 * into a tree of mapping, sequence and scalar nodes (aliases become shared
 * nodes, never copies), and we read only the few paths we need:
 *
 *   current-context
 *   contexts[name=C].context.{cluster,user}
 *   clusters[name].cluster.{server,certificate-authority[-data],insecure-skip-tls-verify}
 *   users[name].user.{token,tokenFile,client-certificate[-data],client-key[-data]} */

#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <yaml.h>

#include "fileio.h"
#include "kube-client.h"

#define DEFAULT_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define KUBECONFIG_MAX (16U * 1024U * 1024U)

/* base64 (RFC 4648, standard alphabet), ignoring whitespace (PEM and
 * kubeconfig data wrap lines). Returns a NUL-terminated buffer. */
static int base64_decode(const char *in, char **ret, size_t *ret_size) {
        _cleanup_free_ char *out = NULL;
        size_t n = strlen(in), len = 0;
        unsigned acc = 0, bits = 0, pad = 0, digits = 0;

        out = malloc(n / 4 * 3 + 4);
        if (!out)
                return -ENOMEM;

        for (const char *p = in; *p; p++) {
                unsigned char ch = (unsigned char) *p;
                unsigned v;

                if (strchr(" \t\r\n", ch))
                        continue;
                if (ch == '=') {
                        pad++;
                        continue;
                }
                if (pad > 0) /* data after padding */
                        return -EINVAL;

                if (ch >= 'A' && ch <= 'Z')
                        v = ch - 'A';
                else if (ch >= 'a' && ch <= 'z')
                        v = ch - 'a' + 26;
                else if (ch >= '0' && ch <= '9')
                        v = ch - '0' + 52;
                else if (ch == '+')
                        v = 62;
                else if (ch == '/')
                        v = 63;
                else
                        return -EINVAL;

                digits++;
                acc = (acc << 6) | v;
                bits += 6;
                if (bits >= 8) {
                        bits -= 8;
                        out[len++] = (char) ((acc >> bits) & 0xff);
                }
        }

        /* Groups of 4: 2 or 3 digits in the last one (with or without
         * padding), never 1; padding only completes the last group. */
        if (digits % 4 == 1 || pad > 2 || (pad > 0 && (digits + pad) % 4 != 0))
                return -EINVAL;
        /* Leftover bits must be zero (canonical encoding). */
        if ((acc & ((1U << bits) - 1)) != 0)
                return -EINVAL;

        out[len] = 0;
        if (ret_size)
                *ret_size = len;
        *ret = TAKE_PTR(out);
        return 0;
}

static yaml_node_t *yaml_get(yaml_document_t *d, yaml_node_t *map, const char *key) {
        if (!map || map->type != YAML_MAPPING_NODE)
                return NULL;
        for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
                yaml_node_t *k = yaml_document_get_node(d, p->key);
                if (k && k->type == YAML_SCALAR_NODE && streq((const char *) k->data.scalar.value, key))
                        return yaml_document_get_node(d, p->value);
        }
        return NULL;
}

/* A scalar's text; NULL for anything else, and for YAML's null ("", "~", "null"
 * as plain scalars). */
static const char *yaml_scalar(yaml_node_t *n) {
        const char *s;

        if (!n || n->type != YAML_SCALAR_NODE)
                return NULL;
        s = (const char *) n->data.scalar.value;
        if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
            (s[0] == 0 || streq(s, "~") || streq(s, "null") || streq(s, "Null") || streq(s, "NULL")))
                return NULL;
        return s;
}

static const char *yaml_get_scalar(yaml_document_t *d, yaml_node_t *map, const char *key) {
        return yaml_scalar(yaml_get(d, map, key));
}

/* The 'what' (cluster, context, user) named 'name' of a kubeconfig list:
 * "clusters: [ {name: N, cluster: {...}} ]". */
static yaml_node_t *yaml_find_named(yaml_document_t *d, yaml_node_t *root, const char *list,
                                    const char *what, const char *name) {
        yaml_node_t *seq = yaml_get(d, root, list);

        if (!seq || seq->type != YAML_SEQUENCE_NODE)
                return NULL;
        for (yaml_node_item_t *i = seq->data.sequence.items.start; i < seq->data.sequence.items.top; i++) {
                yaml_node_t *e = yaml_document_get_node(d, *i);
                if (streq_ptr(yaml_get_scalar(d, e, "name"), name)) {
                        yaml_node_t *v = yaml_get(d, e, what);
                        /* "user: {}" and a bare "user:" are both an empty entry. */
                        return v ?: e;
                }
        }
        return NULL;
}

static bool yaml_true(yaml_node_t *n) {
        const char *s = yaml_scalar(n);
        return s && (streq(s, "true") || streq(s, "True") || streq(s, "TRUE") || streq(s, "yes") ||
                     streq(s, "on"));
}

typedef struct Loader {
        const char *path;
        char *dir;
        char *error;
        yaml_document_t doc;
} Loader;

static int fail(Loader *l, int r, const char *fmt, ...) _printf_(3, 4);
static int fail(Loader *l, int r, const char *fmt, ...) {
        _cleanup_free_ char *m = NULL;
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(&m, fmt, ap) < 0)
                m = NULL;
        va_end(ap);

        free(l->error);
        if (!m || asprintf(&l->error, "kubeconfig %s: %s", l->path, m) < 0)
                l->error = NULL;
        return r;
}

/* A file path from the kubeconfig, relative to its directory, that must be
 * readable. */
static int resolve_file(Loader *l, const char *what, const char *name, const char *key, const char *value,
                        char **ret) {
        _cleanup_free_ char *p = NULL;

        if (value[0] == '/')
                p = strdup(value);
        else if (asprintf(&p, "%s/%s", l->dir, value) < 0)
                p = NULL;
        if (!p)
                return -ENOMEM;

        if (access(p, R_OK) < 0) {
                int r = negative_errno();
                return fail(l, r, "%s \"%s\": %s %s: %s", what, name, key, p, strerror(-r));
        }

        *ret = TAKE_PTR(p);
        return 0;
}

static int decode_data(Loader *l, const char *what, const char *name, const char *key, const char *value,
                       char **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t size;
        int r;

        r = base64_decode(value, &buf, &size);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || size == 0)
                return fail(l, -EINVAL, "%s \"%s\": %s is not valid base64", what, name, key);
        if (memchr(buf, 0, size))
                return fail(l, -EINVAL, "%s \"%s\": %s is not PEM text", what, name, key);

        *ret = TAKE_PTR(buf);
        return 0;
}

/* PEM text of the node given inline (data_key, base64, into *data) or else
 * as a file (file_key, its resolved path into *file); neither: nothing. */
static int load_pem(Loader *l, yaml_node_t *node, const char *what, const char *name, const char *data_key,
                    const char *file_key, char **data, char **file) {
        const char *s;

        s = yaml_get_scalar(&l->doc, node, data_key);
        if (s)
                return decode_data(l, what, name, data_key, s, data);
        s = yaml_get_scalar(&l->doc, node, file_key);
        if (s)
                return resolve_file(l, what, name, file_key, s, file);
        return 0;
}

/* yaml_find_named(), or -ENOENT with "WHAT "NAME" not found". */
static int find_named(Loader *l, yaml_node_t *root, const char *list, const char *what, const char *name,
                      yaml_node_t **ret) {
        *ret = yaml_find_named(&l->doc, root, list, what, name);
        if (!*ret)
                return fail(l, -ENOENT, "%s \"%s\" not found", what, name);
        return 0;
}

static int load_cluster(Loader *l, yaml_node_t *root, const char *name, KubeConfig *c) {
        yaml_document_t *d = &l->doc;
        yaml_node_t *cl;
        const char *s;
        size_t scheme;
        int r;

        r = find_named(l, root, "clusters", "cluster", name, &cl);
        if (r < 0)
                return r;

        if (yaml_true(yaml_get(d, cl, "insecure-skip-tls-verify")))
                return fail(l, -EPERM,
                            "cluster \"%s\": insecure-skip-tls-verify is refused (TLS is always verified); "
                            "give certificate-authority or certificate-authority-data",
                            name);

        s = yaml_get_scalar(d, cl, "server");
        if (!s)
                return fail(l, -EINVAL, "cluster \"%s\" has no server", name);
        /* With a host: "https://" alone would become "https:" once its '/' are dropped. */
        scheme = strncmp(s, "https://", 8) == 0 ? 8 : strncmp(s, "http://", 7) == 0 ? 7 : 0;
        if (scheme == 0 || s[scheme] == 0 || s[scheme] == '/')
                return fail(l, -EINVAL,
                            "cluster \"%s\": server \"%s\" is not an https:// (or http://) URL with a host",
                            name, s);
        c->server = strdup(s);
        if (!c->server)
                return -ENOMEM;
        for (size_t n = strlen(c->server); n > 0 && c->server[n - 1] == '/'; n--)
                c->server[n - 1] = 0;

        return load_pem(l, cl, "cluster", name, "certificate-authority-data", "certificate-authority",
                        &c->ca_data, &c->ca_file);
}

static int load_user(Loader *l, yaml_node_t *root, const char *name, KubeConfig *c) {
        yaml_document_t *d = &l->doc;
        yaml_node_t *u;
        const char *s;
        int r;

        r = find_named(l, root, "users", "user", name, &u);
        if (r < 0)
                return r;

        if (yaml_get(d, u, "exec") && yaml_get(d, u, "exec")->type == YAML_MAPPING_NODE)
                return fail(l, -EOPNOTSUPP, "user \"%s\": exec credential plugins are not supported", name);
        if (yaml_get(d, u, "auth-provider") && yaml_get(d, u, "auth-provider")->type == YAML_MAPPING_NODE)
                return fail(l, -EOPNOTSUPP, "user \"%s\": auth-provider plugins are not supported", name);
        if (yaml_get_scalar(d, u, "username") || yaml_get_scalar(d, u, "password"))
                return fail(l, -EOPNOTSUPP, "user \"%s\": basic authentication is not supported", name);

        s = yaml_get_scalar(d, u, "token");
        if (s) {
                c->token = strdup(s);
                if (!c->token)
                        return -ENOMEM;
        }
        s = yaml_get_scalar(d, u, "tokenFile");
        if (s) {
                r = resolve_file(l, "user", name, "tokenFile", s, &c->token_file);
                if (r < 0)
                        return r;
        }

        r = load_pem(l, u, "user", name, "client-certificate-data", "client-certificate",
                     &c->client_cert_data, &c->client_cert_file);
        if (r < 0)
                return r;
        r = load_pem(l, u, "user", name, "client-key-data", "client-key", &c->client_key_data,
                     &c->client_key_file);
        if (r < 0)
                return r;

        bool cert = c->client_cert_data || c->client_cert_file,
             key = c->client_key_data || c->client_key_file;
        if (cert != key)
                return fail(l, -EINVAL, "user \"%s\": a client %s without a client %s", name,
                            cert ? "certificate" : "key", cert ? "key" : "certificate");

        return 0;
}

int kube_config_from_kubeconfig(const char *path, const char *context, KubeConfig **ret, char **ret_error) {
        _cleanup_(kube_config_freep) KubeConfig *c = NULL;
        _cleanup_free_ char *buf = NULL, *dir_buf = NULL;
        Loader l = { .path = path };
        yaml_parser_t parser;
        bool have_doc = false;
        yaml_node_t *root, *ctx;
        const char *name, *cluster, *user;
        size_t size;
        int r;

        if (ret_error)
                *ret_error = NULL;
        if (!path || !ret)
                return -EINVAL;

        r = read_full_file_max(AT_FDCWD, path, KUBECONFIG_MAX, &buf, &size);
        if (r < 0) {
                r = fail(&l, r, "%s", strerror(-r));
                goto finish;
        }

        dir_buf = strdup(path);
        if (!dir_buf) {
                r = -ENOMEM;
                goto finish;
        }
        l.dir = dirname(dir_buf);

        if (!yaml_parser_initialize(&parser)) {
                r = -ENOMEM;
                goto finish;
        }
        yaml_parser_set_input_string(&parser, (const unsigned char *) buf, size);
        if (!yaml_parser_load(&parser, &l.doc)) {
                r = fail(&l, -EBADMSG, "invalid YAML at line %zu: %s", parser.problem_mark.line + 1,
                         strna(parser.problem));
                yaml_parser_delete(&parser);
                goto finish;
        }
        yaml_parser_delete(&parser);
        have_doc = true;

        root = yaml_document_get_root_node(&l.doc);
        if (!root || root->type != YAML_MAPPING_NODE) {
                r = fail(&l, -EINVAL, "not a kubeconfig (no mapping at the top)");
                goto finish;
        }

        name = context ?: yaml_get_scalar(&l.doc, root, "current-context");
        if (!name) {
                r = fail(&l, -ENOENT, "no current-context, and no context given");
                goto finish;
        }
        r = find_named(&l, root, "contexts", "context", name, &ctx);
        if (r < 0)
                goto finish;
        cluster = yaml_get_scalar(&l.doc, ctx, "cluster");
        if (!cluster) {
                r = fail(&l, -EINVAL, "context \"%s\" has no cluster", name);
                goto finish;
        }
        user = yaml_get_scalar(&l.doc, ctx, "user");

        c = calloc(1, sizeof(*c));
        if (!c) {
                r = -ENOMEM;
                goto finish;
        }

        r = load_cluster(&l, root, cluster, c);
        if (r < 0)
                goto finish;
        if (user) { /* no user: no credentials (e.g. a kubectl proxy) */
                r = load_user(&l, root, user, c);
                if (r < 0)
                        goto finish;
        }

        *ret = TAKE_PTR(c);
        r = 0;

finish:
        if (have_doc)
                yaml_document_delete(&l.doc);
        if (r < 0 && r != -ENOMEM && !l.error)
                (void) fail(&l, r, "%s", strerror(-r));
        if (ret_error && r < 0)
                *ret_error = TAKE_PTR(l.error);
        free(l.error);
        return r;
}

int kube_config_in_cluster(const char *sa_dir, KubeConfig **ret) {
        _cleanup_(kube_config_freep) KubeConfig *c = NULL;
        _cleanup_free_ char *token = NULL;
        const char *host, *port;
        int r;

        if (!ret)
                return -EINVAL;

        host = getenv("KUBERNETES_SERVICE_HOST");
        port = getenv("KUBERNETES_SERVICE_PORT");
        if (!host || !host[0] || !port || !port[0])
                return -ENXIO;

        if (!sa_dir)
                sa_dir = DEFAULT_SA_DIR;

        c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;

        /* An IPv6 address is bracketed in a URL. */
        if (asprintf(&c->server, strchr(host, ':') && host[0] != '[' ? "https://[%s]:%s" : "https://%s:%s",
                     host, port) < 0) {
                c->server = NULL;
                return -ENOMEM;
        }
        if (asprintf(&c->token_file, "%s/token", sa_dir) < 0) {
                c->token_file = NULL;
                return -ENOMEM;
        }
        if (asprintf(&c->ca_file, "%s/ca.crt", sa_dir) < 0) {
                c->ca_file = NULL;
                return -ENOMEM;
        }

        /* Both must be there now; the token is re-read for each request. */
        r = read_full_file_max(AT_FDCWD, c->token_file, 64 * 1024, &token, NULL);
        if (r < 0)
                return r;
        explicit_bzero(token, strlen(token));
        if (access(c->ca_file, R_OK) < 0)
                return negative_errno();

        *ret = TAKE_PTR(c);
        return 0;
}
