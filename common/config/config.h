/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <cjson/cJSON.h>
#include <regex.h>

#include "macro.h"
#include "report-format.h"
#include "selector.h"

/* The agent's configuration: the JSON document of docs/configuration.md
 * ("the contract"). Parsing validates every key; an error names the key
 * path, e.g. "profiles[1].frequency: must be 1..100000". Pure logic: no I/O
 * besides config_load_file(), no logging above debug. */

#define CONFIG_DEFAULT_REPORT_DIR "/var/lib/cgprof/reports"
#define CONFIG_DEFAULT_MACHINE_CONFIG_INTERVAL_USEC (30 * USEC_PER_SEC)
#define CONFIG_DEFAULT_PROFILE_NAME "default"
#define CONFIG_DEFAULT_EVENT "cpu-clock"
#define CONFIG_DEFAULT_FREQUENCY 99
#define CONFIG_DEFAULT_DURATION_USEC (20 * USEC_PER_SEC)
/* A running session writes its report so far this often (0: never). */
#define CONFIG_DEFAULT_CHECKPOINT_INTERVAL_USEC (5 * 60 * USEC_PER_SEC)
#define CONFIG_MIN_CHECKPOINT_INTERVAL_USEC (1 * USEC_PER_SEC)
#define CONFIG_FREQUENCY_MAX 100000

typedef enum ProfileStart {
        PROFILE_START_AUTO,
        PROFILE_START_MANUAL,
        _PROFILE_START_MAX,
        _PROFILE_START_INVALID = -EINVAL,
} ProfileStart;

/* How user stacks are walked (the profile's "unwind"). */
typedef enum UnwindMode {
        UNWIND_AUTO, /* unwind tables (.eh_frame) where a mapping has one, frame pointers elsewhere */
        UNWIND_FRAME_POINTER, /* the kernel's frame-pointer walk only */
        UNWIND_DWARF, /* unwind tables only: a frame without one ends the stack */
        _UNWIND_MODE_MAX,
        _UNWIND_MODE_INVALID = -EINVAL,
} UnwindMode;

const char *unwind_mode_to_string(UnwindMode m);
UnwindMode unwind_mode_from_string(const char *s);

/* Rows (compact cells, 4 bytes each: bpf/unwind.h) of unwind tables the
 * agent may load, all files together: the budget its shards grow to (1 MiB
 * each, created as tables come). The default, 64 MiB, holds a CUDA PyTorch
 * library set (4-6 M rows) for a few distinct images. */
#define CONFIG_DEFAULT_UNWIND_TABLE_ROWS (UINT64_C(1) << 24)
#define CONFIG_UNWIND_TABLE_ROWS_MIN 4096
#define CONFIG_UNWIND_TABLE_ROWS_MAX (UINT64_C(1) << 26) /* 256 MiB */
/* debuginfodUrls: at most this many servers, each URL at most this long. */
#define CONFIG_DEBUGINFOD_URLS_MAX 16
#define CONFIG_DEBUGINFOD_URL_LENGTH_MAX 1024 /* config.c says "1024" in its error */
/* machineConfig: at most this many entries, and labels, conditions and
 * values in one nodeSelector (two entries for one sysctl are compared). */
#define CONFIG_MACHINE_CONFIG_MAX 64
#define CONFIG_NODE_SELECTOR_VALUES_MAX 64
/* "http": the metrics listener's defaults and limits. */
#define CONFIG_HTTP_DEFAULT_MAX_CONNECTIONS 64U
#define CONFIG_HTTP_DEFAULT_MAX_CONNECTIONS_PER_CLIENT 16U
#define CONFIG_HTTP_ALLOWED_HOSTS_MAX 16
#define CONFIG_HTTP_TOKEN_AUDIENCES_MAX 16 /* KUBE_REVIEW_AUDIENCES_MAX */
/* "http.reviewRateLimit": the requests of one client address that need the
 * API server's reviews (a token or a decision not cached), and
 * "http.pullRateLimit": the profile pulls of one user (docs/pull.md). A
 * scraper of a whole node (the kubelet's 110 pods at most) every 10 s asks
 * 11 a second on average, all at once at worst: well within both. */
#define CONFIG_HTTP_DEFAULT_REVIEWS_PER_SECOND 20.0
#define CONFIG_HTTP_DEFAULT_REVIEW_BURST 200U
#define CONFIG_HTTP_DEFAULT_PULLS_PER_SECOND 20.0
#define CONFIG_HTTP_DEFAULT_PULL_BURST 120U
#define CONFIG_HTTP_RATE_MAX 1000000U /* perSecond and burst at most */

/* A token bucket: burst at once, then per_second (0: no limit). */
typedef struct ConfigRateLimit {
        double per_second;
        unsigned burst;
} ConfigRateLimit;
/* "http.tlsPriorities" by default (a GnuTLS priority string): TLS 1.2 and
 * 1.3 only, forward-secret key exchange (ECDHE, DHE) and AEAD ciphers
 * only: no static RSA, no CBC, no TLS 1.0/1.1. */
#define CONFIG_HTTP_DEFAULT_TLS_PRIORITIES                                                               \
        "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-RSA:-PSK:-DHE-PSK:-RSA-PSK:-ECDHE-PSK:-CIPHER-ALL:" \
        "+CHACHA20-POLY1305:+AES-256-GCM:+AES-128-GCM:-MAC-ALL:+AEAD"
/* "reportRetention": the report directory's budget by default (0 in the
 * config: no bound of that kind). */
#define CONFIG_RETENTION_DEFAULT_MAX_REPORTS 10000U
#define CONFIG_RETENTION_DEFAULT_MAX_BYTES (4ULL << 30)
#define CONFIG_RETENTION_DEFAULT_MAX_AGE_USEC (30ULL * 24 * 3600 * USEC_PER_SEC)
#define CONFIG_HTTP_MAX_CONNECTIONS_MAX 1024U
#define CONFIG_HTTP_DEFAULT_TIMEOUT_USEC (10 * USEC_PER_SEC)

const char *profile_start_to_string(ProfileStart s);
ProfileStart profile_start_from_string(const char *s);

typedef struct Pattern {
        char *source; /* as written in the config */
        regex_t regex; /* compiled, REG_EXTENDED|REG_NOSUB */
} Pattern;

/* What a profile samples ("events"). */
#define PROFILE_EVENT_CPU (1u << 0) /* where threads run: perf samples */
#define PROFILE_EVENT_OFFCPU (1u << 1) /* where and how long threads wait: sched_switch */
#define CONFIG_OFFCPU_MIN_USEC_DEFAULT 1000U
#define CONFIG_OFFCPU_MIN_USEC_MAX (60ULL * USEC_PER_SEC)

typedef struct Profile {
        char *name;
        char *event; /* "cpu-clock" (default), "task-clock", "cycles", "instructions", ... */
        uint64_t frequency; /* Hz, 1..100000 */
        uint64_t duration_usec; /* 0: until stopped */
        /* A running session writes its report so far (marked partial) this
         * often, replacing the last one; 0: never. */
        uint64_t checkpoint_interval_usec;
        ProfileStart start;
        bool kernel_stacks;
        bool python_frames; /* walk the Python frames of CPython processes (default true) */
        /* profile.folded: a ranked process's stacks under "rank N" (default false) */
        bool folded_rank_root;
        /* summary.json byRank: more patterns per category (communication,
         * dataLoading, compute; report-by-rank.h), NULL-terminated sources
         * checked as includePatterns are; NULL: none. */
        char **rank_categories[3];
        UnwindMode unwind;
        unsigned events; /* "events": bit mask of PROFILE_EVENT_CPU, PROFILE_EVENT_OFFCPU */
        uint64_t offcpu_min_usec; /* "offCpuMinUsec": shorter waits are counted, not stacked */
        double offcpu_probability; /* "offCpuProbability": share of blocking switches followed (0..1] */
        /* "gpu": {"launches": true}: count CUDA kernel launches (uprobes on
         * the CUDA runtime's and driver's launch calls) under the CPU stack
         * that made them (default false; docs/gpu.md). */
        bool gpu_launches;
        /* "gpu": {"durations": true}: the GPU time of each kernel under the
         * CPU stack that launched it, from the CUPTI injection library a pod
         * opted in to (uprobe on cgprof_cupti_launch, records on the agent's
         * Unix socket; default false; docs/gpu.md). */
        bool gpu_durations;
        unsigned formats; /* bit mask of 1u << ReportFormat */
        char *output; /* template relative to reportDir, NULL: default by target kind */
        Pattern *include_patterns; /* default: one pattern ".*" */
        size_t n_include_patterns;
        Pattern *exclude_patterns;
        size_t n_exclude_patterns;
} Profile;

typedef struct OwnerRef {
        char *kind; /* e.g. "DaemonSet"; NULL: any */
        char *name; /* NULL: any */
} OwnerRef;

typedef struct Target {
        char *name;
        char *profile_ref; /* NULL: the config's defaultProfileRef */
        LabelSelector *namespace_selector; /* NULL: not set */
        LabelSelector *pod_selector; /* NULL: not set */
        Pattern *pod_name_patterns; /* POSIX extended regexes on the pod name */
        size_t n_pod_name_patterns;
        OwnerRef *owner; /* NULL: not set */
        char **containers; /* strv; NULL: not set */
        char **cgroup_patterns; /* strv of fnmatch() globs; NULL: not set */
        bool disabled;
} Target;

typedef struct MachineSetting {
        char *name; /* sysctl name, e.g. "kernel.perf_event_paranoid" (allow-listed) */
        char *value;
        /* The nodes it applies to, by their labels; NULL: every node. No
         * two entries for one sysctl can match one node (refused at load). */
        LabelSelector *node_selector;
} MachineSetting;

typedef struct Config {
        char *report_dir; /* absolute path */
        /* Refuse a reportDir that group or others may write, or one below
         * such a directory (not sticky), as sshd's StrictModes (default true). */
        bool report_dir_strict_modes;
        MachineSetting *machine_config;
        size_t n_machine_config;
        bool restore_machine_config; /* default true */
        uint64_t machine_config_interval_usec; /* default 30s, > 0 */
        /* "nodeLabels": the host's labels for machineConfig nodeSelectors
         * without Kubernetes (strv key, value, ...); NULL: not set. */
        char **node_labels;
        bool enable_default; /* default false */
        uint64_t unwind_table_rows; /* default CONFIG_DEFAULT_UNWIND_TABLE_ROWS; read at start only */
        /* debuginfod servers (http:// or https:// URLs) asked for the debug
         * files of stripped binaries; NULL or empty: none (the default). Read
         * at start only. */
        char **debuginfod_urls;
        /* "reportRetention": the oldest reports (by start time) are removed
         * while reportDir holds more than max_reports reports or max_bytes
         * bytes of them, and reports older than max_age_usec go; 0: no
         * bound of that kind. */
        struct {
                uint64_t max_reports, max_bytes, max_age_usec;
        } report_retention;
        /* "http": the HTTP listener (/metrics), read at start only. listen
         * NULL: none (the default). */
        struct {
                char *listen; /* "ADDRESS:PORT" (socket-address.h) */
                unsigned max_connections; /* default CONFIG_HTTP_DEFAULT_MAX_CONNECTIONS */
                /* From one IP address; default CONFIG_HTTP_DEFAULT_MAX_CONNECTIONS_PER_CLIENT, 0: no limit. */
                unsigned max_connections_per_client;
                uint64_t timeout_usec; /* idle connections are closed after this; whole seconds, >= 1s */
                bool pprof; /* profiles over HTTP (docs/pull.md); default false */
                char *tls_cert_file, *tls_key_file; /* PEM files (absolute paths), both or neither */
                char *tls_priorities; /* GnuTLS priority string; NULL: CONFIG_HTTP_DEFAULT_TLS_PRIORITIES */
                /* Without Kubernetes, on loopback: the host names the
                 * listener answers to besides 127.0.0.1, localhost and [::1]. */
                char **allowed_hosts;
                /* Without Kubernetes: pulls of any cgroup, not only those
                 * the targets select (default false). */
                bool pull_any_cgroup;
                /* With Kubernetes: the audiences a bearer token must be
                 * valid for (TokenReview's spec.audiences); NULL: the API
                 * server's own. */
                char **token_audiences;
                ConfigRateLimit review_rate_limit; /* per client address */
                ConfigRateLimit pull_rate_limit; /* per user (without Kubernetes: per address) */
        } http;
        char *default_profile_ref; /* default "default" */
        Profile *profiles; /* always contains the profile default_profile_ref names */
        size_t n_profiles;
        Target *targets;
        size_t n_targets;
} Config;

/* Parses and validates a config document. On error returns a negative errno
 * (-EINVAL for invalid content, -ENOMEM) and, if ret_error is non-NULL,
 * a malloc()ed message that starts with the key path ("profiles[1].frequency:
 * must be 1..100000"; "$: not valid JSON near line 3" for syntax errors). */
int config_parse(const char *json, Config **ret, char **ret_error);
/* Same for a file; read errors are reported as "<path>: <strerror>". */
int config_load_file(const char *path, Config **ret, char **ret_error);
/* What "http" may do in the agent's mode: with Kubernetes, "pprof" needs
 * TLS; without, "pprof" listens on a loopback address only. -EINVAL with
 * a message naming the key path ("http.tlsCertFile: ...") otherwise. */
/* Whether http.listen is a Unix socket or a loopback address. */
bool config_http_is_local(const Config *c);
int config_check_http_mode(const Config *c, bool kubernetes, char **ret_error);
/* The spec of a ProfileConfig object (cgprof.io/v1, docs/configuration.md
 * "Per-namespace configuration"): profiles, defaultProfileRef and targets
 * only. Keys only the cluster config may set (reportDir, machineConfig,
 * ...), targets with namespaceSelector or cgroupPatterns and outputs with
 * %{ENV} are refused with a message naming them. profileRef and
 * defaultProfileRef may name a profile of 'cluster' (the config in force).
 * Errors start with 'path' (e.g. "spec"). The result has no reportDir, no
 * machineConfig, and default_profile_ref NULL when the spec sets none; its
 * profileRefs are resolved with kube_rules_build(). */
int config_parse_namespaced(const cJSON *spec, const char *path, const Config *cluster, Config **ret,
                            char **ret_error);
Config *config_free(Config *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(Config *, config_free);

const Profile *config_find_profile(const Config *c, const char *name);
/* The profile a target uses (its profileRef, or the default). Never NULL for a
 * validated config. */
const Profile *config_target_profile(const Config *c, const Target *t);

/* Whether a sysctl name is in the machineConfig allow-list. */
bool machine_setting_allowed(const char *name);

/* Whether a command line passes the profile's include/exclude patterns: at
 * least one includePattern and no excludePattern matches (unanchored search
 * in the whole string; NULL is ""). */
bool profile_process_wanted(const Profile *p, const char *cmdline);

/* Glob match of a cgroup path (relative to the cgroup root, no leading '/')
 * against a target's cgroupPatterns: fnmatch(FNM_PATHNAME), so '*' does not
 * cross '/'. False when the target has no cgroupPatterns. */
bool target_matches_cgroup(const Target *t, const char *cgroup_path);
