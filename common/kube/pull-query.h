/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

/* The arguments of a profile pulled over HTTP (docs/pull.md), checked
 * before anything is done with them: no I/O, fuzzed (fuzz-pull-query).
 *
 *   /debug/pprof/profile?seconds=N&namespace=NS&pod=POD[&container=C]
 *   /debug/pprof/profile?seconds=N&cgroup=PATH
 *
 * seconds: an integer PULL_SECONDS_MIN..PULL_SECONDS_MAX (default
 * PULL_SECONDS_DEFAULT, as Go's net/http/pprof). Names are Kubernetes
 * names (a namespace and a container: DNS labels; a pod: a DNS
 * subdomain); a cgroup is a path below the cgroup root (no "." or ".."
 * component, not the root). */

#define PULL_SECONDS_MIN 1U
#define PULL_SECONDS_MAX 300U
#define PULL_SECONDS_DEFAULT 10U

typedef struct PullQuery {
        unsigned seconds;
        char *namespace, *pod, *container; /* NULL for a cgroup */
        char *cgroup; /* normalized; NULL for a pod */
} PullQuery;

void pull_query_done(PullQuery *q);

/* get(key) returns the (decoded) value of a query argument, or NULL. -EINVAL with a message. */
typedef const char *(*PullQueryGet)(const char *key, void *userdata);
int pull_query_parse(PullQueryGet get, void *userdata, PullQuery *ret, char **ret_error);
/* "pod:NS/POD[/C]" or "cgroup:PATH", as the control API takes a target. */
int pull_query_target(const PullQuery *q, char **ret);

/* A Kubernetes name: a DNS label (63: [a-z0-9-], alphanumeric at both ends) or subdomain (253: labels and dots). */
bool kube_name_is_dns_label(const char *s);
bool kube_name_is_dns_subdomain(const char *s);
/* A session ID as the agent makes them: 32 lowercase hexadecimal digits. */
bool pull_session_id_is_valid(const char *s);
/* A report file that may be downloaded: one of the report formats' file names. */
bool pull_report_file_is_valid(const char *s);
