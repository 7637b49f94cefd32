/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>

#include "kube-client.h"
#include "tests.h"

/* "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n" */
#define CA_PEM "-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n"
#define CA_B64 "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNBCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"
/* "cert-pem\n", "key-pem\n" */
#define CERT_B64 "Y2VydC1wZW0K"
#define KEY_B64 "a2V5LXBlbQo="

static char *mkdtemp_test(void) {
        char *d = strdup("/tmp/test-kube-config.XXXXXX");
        ASSERT_NOT_NULL(d);
        ASSERT_NOT_NULL(mkdtemp(d));
        return d;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(p);
}

static void rm_rf(char *d) {
        ASSERT_OK(nftw(d, rm_one, 16, FTW_DEPTH | FTW_PHYS));
        free(d);
}

static void write_file(const char *dir, const char *name, const char *content) {
        _cleanup_free_ char *p = NULL;
        ASSERT_TRUE(asprintf(&p, "%s/%s", dir, name) > 0);
        FILE *f = fopen(p, "we");
        ASSERT_NOT_NULL(f);
        fputs(content, f);
        ASSERT_EQ(fclose(f), 0);
}

static char *path_in(const char *dir, const char *name) {
        char *p;
        ASSERT_TRUE(asprintf(&p, "%s/%s", dir, name) > 0);
        return p;
}

/* Two clusters, three users, three contexts, like kubectl writes. */
static const char kubeconfig[] = "apiVersion: v1\n"
                                 "kind: Config\n"
                                 "preferences: {}\n"
                                 "current-context: dev\n"
                                 "clusters:\n"
                                 "- name: dev-cluster\n"
                                 "  cluster:\n"
                                 "    server: https://127.0.0.1:6443/\n"
                                 "    certificate-authority: ca.crt\n"
                                 "- name: prod-cluster\n"
                                 "  cluster:\n"
                                 "    server: \"https://[fd00::1]:443\"\n"
                                 "    certificate-authority-data: " CA_B64 "\n"
                                 "- name: noserver\n"
                                 "  cluster:\n"
                                 "    certificate-authority: ca.crt\n"
                                 "- name: insecure\n"
                                 "  cluster:\n"
                                 "    server: https://10.0.0.1\n"
                                 "    insecure-skip-tls-verify: true\n"
                                 "users:\n"
                                 "- name: dev-user\n"
                                 "  user:\n"
                                 "    token: s3cr3t\n"
                                 "- name: prod-user\n"
                                 "  user:\n"
                                 "    client-certificate-data: " CERT_B64 "\n"
                                 "    client-key-data: " KEY_B64 "\n"
                                 "- name: file-user\n"
                                 "  user:\n"
                                 "    tokenFile: sub/token\n"
                                 "    client-certificate: /abs/does-not-matter-here\n"
                                 "- name: files-user\n"
                                 "  user:\n"
                                 "    client-certificate: sub/client.crt\n"
                                 "    client-key: sub/client.key\n"
                                 "- name: exec-user\n"
                                 "  user:\n"
                                 "    exec:\n"
                                 "      command: aws\n"
                                 "contexts:\n"
                                 "- name: dev\n"
                                 "  context:\n"
                                 "    cluster: dev-cluster\n"
                                 "    user: dev-user\n"
                                 "    namespace: default\n"
                                 "- name: prod\n"
                                 "  context: {cluster: prod-cluster, user: prod-user}\n"
                                 "- name: tokenfile\n"
                                 "  context:\n"
                                 "    cluster: dev-cluster\n"
                                 "    user: files-user\n"
                                 "- name: nouser\n"
                                 "  context:\n"
                                 "    cluster: prod-cluster\n"
                                 "- name: ghost-user\n"
                                 "  context:\n"
                                 "    cluster: dev-cluster\n"
                                 "    user: ghost\n"
                                 "- name: ghost-cluster\n"
                                 "  context:\n"
                                 "    cluster: ghost\n"
                                 "    user: dev-user\n"
                                 "- name: no-server\n"
                                 "  context:\n"
                                 "    cluster: noserver\n"
                                 "- name: insecure\n"
                                 "  context:\n"
                                 "    cluster: insecure\n"
                                 "- name: exec\n"
                                 "  context:\n"
                                 "    cluster: dev-cluster\n"
                                 "    user: exec-user\n"
                                 "- name: tf\n"
                                 "  context:\n"
                                 "    cluster: dev-cluster\n"
                                 "    user: tf-user\n";

static char *setup(void) {
        char *d = mkdtemp_test();
        _cleanup_free_ char *sub = path_in(d, "sub");
        ASSERT_OK(mkdir(sub, 0755));
        write_file(d, "ca.crt", CA_PEM);
        write_file(d, "sub/client.crt", "cert\n");
        write_file(d, "sub/client.key", "key\n");
        write_file(d, "sub/token", "tok\n");
        write_file(d, "config", kubeconfig);
        return d;
}

static int load(const char *dir, const char *context, KubeConfig **ret, char **ret_error) {
        _cleanup_free_ char *p = path_in(dir, "config");
        return kube_config_from_kubeconfig(p, context, ret, ret_error);
}

/* The error message names the file and what is wrong. */
static void assert_error(const char *dir, const char *context, int err, const char *what) {
        _cleanup_(kube_config_freep) KubeConfig *c = NULL;
        _cleanup_free_ char *e = NULL, *p = path_in(dir, "config");
        int r = load(dir, context, &c, &e);
        ASSERT_EQ(r, -err);
        ASSERT_NULL(c);
        ASSERT_NOT_NULL(e);
        fprintf(stderr, "  %s -> %s\n", strna(context), e);
        ASSERT_TRUE(strncmp(e, "kubeconfig ", 11) == 0);
        ASSERT_NOT_NULL(strstr(e, p));
        ASSERT_NOT_NULL(strstr(e, what));
}

TEST(current_context) {
        char *d = setup();
        _cleanup_(kube_config_freep) KubeConfig *c = NULL;
        _cleanup_free_ char *e = NULL, *ca = path_in(d, "ca.crt");

        ASSERT_OK(load(d, NULL, &c, &e));
        ASSERT_NULL(e);
        ASSERT_STREQ(c->server, "https://127.0.0.1:6443"); /* trailing / dropped */
        ASSERT_STREQ(c->ca_file, ca); /* relative to the kubeconfig */
        ASSERT_NULL(c->ca_data);
        ASSERT_STREQ(c->token, "s3cr3t");
        ASSERT_NULL(c->token_file);
        ASSERT_NULL(c->client_cert_file);
        ASSERT_NULL(c->client_cert_data);
        rm_rf(d);
}

TEST(explicit_context_data) {
        char *d = setup();
        _cleanup_(kube_config_freep) KubeConfig *c = NULL;

        ASSERT_OK(load(d, "prod", &c, NULL));
        ASSERT_STREQ(c->server, "https://[fd00::1]:443");
        ASSERT_NULL(c->ca_file);
        ASSERT_STREQ(c->ca_data, CA_PEM);
        ASSERT_STREQ(c->client_cert_data, "cert-pem\n");
        ASSERT_STREQ(c->client_key_data, "key-pem\n");
        ASSERT_NULL(c->client_cert_file);
        ASSERT_NULL(c->token);
        rm_rf(d);
}

TEST(relative_files) {
        char *d = setup();
        _cleanup_(kube_config_freep) KubeConfig *c = NULL;
        _cleanup_free_ char *crt = path_in(d, "sub/client.crt"), *key = path_in(d, "sub/client.key");

        ASSERT_OK(load(d, "tokenfile", &c, NULL));
        ASSERT_STREQ(c->client_cert_file, crt);
        ASSERT_STREQ(c->client_key_file, key);
        ASSERT_NULL(c->client_cert_data);
        rm_rf(d);
}

TEST(token_file) {
        char *d = setup();
        _cleanup_(kube_config_freep) KubeConfig *c = NULL;
        _cleanup_free_ char *tok = path_in(d, "sub/token");
        _cleanup_free_ char *cfg = NULL;

        /* A kubeconfig in a subdirectory, referring to ../ */
        ASSERT_TRUE(asprintf(&cfg, "current-context: x\n"
                                   "clusters: [{name: c, cluster: {server: 'https://h:1', "
                                   "certificate-authority: ../ca.crt}}]\n"
                                   "users: [{name: u, user: {tokenFile: token}}]\n"
                                   "contexts: [{name: x, context: {cluster: c, user: u}}]\n") > 0);
        write_file(d, "sub/config", cfg);
        _cleanup_free_ char *p = path_in(d, "sub/config"), *ca = path_in(d, "sub/../ca.crt");
        ASSERT_OK(kube_config_from_kubeconfig(p, NULL, &c, NULL));
        ASSERT_STREQ(c->server, "https://h:1");
        ASSERT_STREQ(c->token_file, tok);
        ASSERT_STREQ(c->ca_file, ca);
        ASSERT_NULL(c->token);
        rm_rf(d);
}

TEST(no_user) {
        char *d = setup();
        _cleanup_(kube_config_freep) KubeConfig *c = NULL;

        ASSERT_OK(load(d, "nouser", &c, NULL));
        ASSERT_STREQ(c->server, "https://[fd00::1]:443");
        ASSERT_NULL(c->token);
        ASSERT_NULL(c->client_cert_data);
        rm_rf(d);
}

TEST(errors) {
        char *d = setup();

        assert_error(d, "nope", ENOENT, "context \"nope\" not found");
        assert_error(d, "ghost-user", ENOENT, "user \"ghost\" not found");
        assert_error(d, "ghost-cluster", ENOENT, "cluster \"ghost\" not found");
        assert_error(d, "no-server", EINVAL, "cluster \"noserver\" has no server");
        assert_error(d, "insecure", EPERM, "insecure-skip-tls-verify");
        assert_error(d, "exec", EOPNOTSUPP, "exec");
        assert_error(d, "tf", ENOENT, "user \"tf-user\" not found");
        rm_rf(d);
}

TEST(missing_files) {
        char *d = mkdtemp_test();
        _cleanup_(kube_config_freep) KubeConfig *c = NULL;
        _cleanup_free_ char *e = NULL, *p = path_in(d, "config");

        /* The file itself. */
        ASSERT_ERROR(kube_config_from_kubeconfig(p, NULL, &c, &e), ENOENT);
        ASSERT_NOT_NULL(strstr(e, p));
        free(e);
        e = NULL;

        /* A CA file that is not there. */
        write_file(
                d, "config",
                "current-context: x\n"
                "clusters: [{name: c, cluster: {server: 'https://h:1', certificate-authority: nope.crt}}]\n"
                "contexts: [{name: x, context: {cluster: c}}]\n");
        ASSERT_ERROR(kube_config_from_kubeconfig(p, NULL, &c, &e), ENOENT);
        fprintf(stderr, "  %s\n", e);
        ASSERT_NOT_NULL(strstr(e, "certificate-authority"));
        ASSERT_NOT_NULL(strstr(e, "nope.crt"));
        free(e);
        e = NULL;

        /* No current-context. */
        write_file(d, "config", "clusters: []\n");
        ASSERT_ERROR(kube_config_from_kubeconfig(p, NULL, &c, &e), ENOENT);
        ASSERT_NOT_NULL(strstr(e, "current-context"));
        free(e);
        e = NULL;

        /* Bad base64. */
        write_file(d, "config",
                   "current-context: x\n"
                   "clusters: [{name: c, cluster: {server: 'https://h:1', certificate-authority-data: "
                   "'a$b'}}]\n"
                   "contexts: [{name: x, context: {cluster: c}}]\n");
        ASSERT_ERROR(kube_config_from_kubeconfig(p, NULL, &c, &e), EINVAL);
        ASSERT_NOT_NULL(strstr(e, "base64"));
        free(e);
        e = NULL;

        /* A server without a host ("https://" became "https:"). */
        static const char *const hostless[] = { "https://", "http:///", "https:///api" };
        for (size_t i = 0; i < ELEMENTSOF(hostless); i++) {
                _cleanup_free_ char *doc = NULL;

                ASSERT_TRUE(asprintf(&doc,
                                     "current-context: x\n"
                                     "clusters: [{name: c, cluster: {server: '%s'}}]\n"
                                     "contexts: [{name: x, context: {cluster: c}}]\n",
                                     hostless[i]) > 0);
                write_file(d, "config", doc);
                ASSERT_ERROR(kube_config_from_kubeconfig(p, NULL, &c, &e), EINVAL);
                ASSERT_NOT_NULL(strstr(e, "URL with a host"));
                free(e);
                e = NULL;
        }
        /* A client certificate without its key. */
        write_file(d, "config",
                   "current-context: x\n"
                   "clusters: [{name: c, cluster: {server: 'https://h:1'}}]\n"
                   "users: [{name: u, user: {client-certificate-data: " CERT_B64 "}}]\n"
                   "contexts: [{name: x, context: {cluster: c, user: u}}]\n");
        ASSERT_ERROR(kube_config_from_kubeconfig(p, NULL, &c, &e), EINVAL);
        ASSERT_NOT_NULL(strstr(e, "client key"));
        free(e);
        e = NULL;

        /* Not YAML. */
        write_file(d, "config", "a: [b\n");
        ASSERT_ERROR(kube_config_from_kubeconfig(p, NULL, &c, &e), EBADMSG);
        fprintf(stderr, "  %s\n", e);
        ASSERT_NOT_NULL(strstr(e, "YAML"));
        free(e);
        e = NULL;

        /* Not a mapping; an empty file. */
        write_file(d, "config", "- a\n");
        ASSERT_ERROR(kube_config_from_kubeconfig(p, NULL, &c, &e), EINVAL);
        free(e);
        e = NULL;
        write_file(d, "config", "");
        ASSERT_ERROR(kube_config_from_kubeconfig(p, NULL, &c, &e), EINVAL);
        free(e);
        e = NULL;

        rm_rf(d);
}

/* JSON is YAML: kubeconfigs written as JSON load too; anchors are followed. */
TEST(json_and_anchors) {
        char *d = mkdtemp_test();
        _cleanup_(kube_config_freep) KubeConfig *c = NULL, *c2 = NULL;
        _cleanup_free_ char *p = path_in(d, "config");

        write_file(d, "config",
                   "{\"current-context\":\"x\",\"clusters\":[{\"name\":\"c\",\"cluster\":{\"server\":"
                   "\"https://h:2\","
                   "\"certificate-authority-data\":\"" CA_B64
                   "\"}}],\"users\":[{\"name\":\"u\",\"user\":{\"token\":"
                   "\"t\"}}],\"contexts\":[{\"name\":\"x\",\"context\":{\"cluster\":\"c\",\"user\":\"u\"}}]}"
                   "\n");
        ASSERT_OK(kube_config_from_kubeconfig(p, NULL, &c, NULL));
        ASSERT_STREQ(c->server, "https://h:2");
        ASSERT_STREQ(c->ca_data, CA_PEM);
        ASSERT_STREQ(c->token, "t");

        write_file(d, "config",
                   "current-context: y\n"
                   "clusters:\n"
                   "- name: c\n"
                   "  cluster: &cl\n"
                   "    server: https://h:3\n"
                   "- name: d\n"
                   "  cluster: *cl\n"
                   "contexts: [{name: y, context: {cluster: d}}]\n");
        ASSERT_OK(kube_config_from_kubeconfig(p, NULL, &c2, NULL));
        ASSERT_STREQ(c2->server, "https://h:3");
        rm_rf(d);
}

/* base64 as kubectl writes it, and as people paste it: unpadded, wrapped. */
TEST(base64_forms) {
        char *d = mkdtemp_test();
        _cleanup_(kube_config_freep) KubeConfig *c = NULL;
        _cleanup_free_ char *p = path_in(d, "config");

        write_file(d, "config",
                   "current-context: x\n"
                   "clusters:\n"
                   "- name: c\n"
                   "  cluster:\n"
                   "    server: https://h:4\n"
                   "    certificate-authority-data: |\n"
                   "      LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCkNB\n"
                   "      Ci0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K\n"
                   "users: [{name: u, user: {client-certificate-data: Y2VydC1wZW0K, client-key-data: "
                   "a2V5LXBlbQo}}]\n"
                   "contexts: [{name: x, context: {cluster: c, user: u}}]\n");
        ASSERT_OK(kube_config_from_kubeconfig(p, NULL, &c, NULL));
        ASSERT_STREQ(c->ca_data, CA_PEM);
        ASSERT_STREQ(c->client_cert_data, "cert-pem\n");
        ASSERT_STREQ(c->client_key_data, "key-pem\n"); /* no padding */
        rm_rf(d);
}

TEST(in_cluster) {
        char *d = mkdtemp_test();
        _cleanup_(kube_config_freep) KubeConfig *c = NULL, *c6 = NULL;
        _cleanup_free_ char *tok = path_in(d, "token"), *ca = path_in(d, "ca.crt");

        ASSERT_OK(unsetenv("KUBERNETES_SERVICE_HOST"));
        ASSERT_OK(unsetenv("KUBERNETES_SERVICE_PORT"));
        ASSERT_ERROR(kube_config_in_cluster(d, &c), ENXIO);
        ASSERT_OK(setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1));
        ASSERT_ERROR(kube_config_in_cluster(d, &c), ENXIO);
        ASSERT_OK(setenv("KUBERNETES_SERVICE_PORT", "443", 1));

        /* Not mounted: the files are missing. */
        ASSERT_ERROR(kube_config_in_cluster(d, &c), ENOENT);
        write_file(d, "token", "abc\n");
        ASSERT_ERROR(kube_config_in_cluster(d, &c), ENOENT);
        write_file(d, "ca.crt", CA_PEM);

        ASSERT_OK(kube_config_in_cluster(d, &c));
        ASSERT_STREQ(c->server, "https://10.96.0.1:443");
        ASSERT_STREQ(c->token_file, tok);
        ASSERT_STREQ(c->ca_file, ca);
        ASSERT_NULL(c->ca_data);

        ASSERT_OK(setenv("KUBERNETES_SERVICE_HOST", "fd00:10:96::1", 1));
        ASSERT_OK(kube_config_in_cluster(d, &c6));
        ASSERT_STREQ(c6->server, "https://[fd00:10:96::1]:443");

        ASSERT_OK(unsetenv("KUBERNETES_SERVICE_HOST"));
        ASSERT_OK(unsetenv("KUBERNETES_SERVICE_PORT"));
        rm_rf(d);
}

DEFINE_TEST_MAIN
