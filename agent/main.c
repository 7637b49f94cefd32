/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <getopt.h>
#include <sys/resource.h>

#include "cgprof-version.h"
#include "log.h"
#include "manager.h"

static const char *arg_config = CGPROF_DEFAULT_CONFIG;
static const char *arg_state_dir = DEFAULT_STATE_DIR;
static const char *arg_bus_socket = DEFAULT_BUS_SOCKET;
static const char *arg_node_name = NULL;
static const char *arg_cgroup_root = NULL;
static const char *arg_sysctl_root = "/proc/sys";
static bool arg_check_config = false;
static bool arg_no_kubernetes = false;
static const char *arg_kubeconfig = NULL;
static unsigned arg_kube_idle_sec = 0;
static unsigned arg_kube_backoff_max_msec = 0;
/* The default is chosen by bench/overhead's numbers (docs/operations.md). */
static SamplerMode arg_attach_mode = SAMPLER_MODE_CGROUP;
/* --bench-bpf-variant (undocumented in --help: bench/bpf-variants only). */
static uint32_t arg_bench_variant = 0;
static bool arg_no_offcpu = false;
static const char *arg_cupti_socket = NULL;

static void help(void) {
        printf("%s [OPTIONS...]\n\n"
               "cgprof's node agent: profiles the CPU use of selected cgroups and containers.\n\n"
               "  -h --help               Show this help\n"
               "     --version            Show the version\n"
               "  -c --config FILE        Configuration file (default: %s)\n"
               "     --check-config       Validate the configuration file and exit\n"
               "     --state-dir DIR      State directory (default: %s)\n"
               "     --bus-socket PATH    Control socket for cgprofctl (default: %s)\n"
               "     --node-name NAME     Node name for {NODE} (default: $NODE_NAME or the host name)\n"
               "     --attach-mode MODE   'cpu' (one perf event per CPU, filtered in BPF) or\n"
               "                          'cgroup' (perf events scoped to each target cgroup) (default: "
               "cgroup)\n"
               "     --cgroup-root DIR    The cgroup v2 mount to use (default: found in\n"
               "                          /proc/self/mountinfo)\n"
               "     --sysctl-root DIR    Where machineConfig reads and writes sysctls\n"
               "                          (default: /proc/sys)\n"
               "     --no-offcpu          No off-CPU profiling on this node (profiles with\n"
               "                          \"events\": [\"offcpu\"] sample CPU only)\n"
               "     --cupti-socket PATH  Where the CUPTI library of opted-in pods sends kernel\n"
               "                          times (default: /run/cgprof/cupti.sock; \"\": none)\n"
               "     --no-kubernetes      Host mode: profile cgroups only, no Kubernetes API\n"
               "     --kubeconfig FILE    Reach the API server with a kubeconfig file\n"
               "                          (default: the in-cluster service account)\n"
               "     --kube-watch-idle SEC\n"
               "                          Reconnect a watch silent for SEC seconds (default: 300)\n"
               "     --kube-backoff-max MSEC\n"
               "                          Longest wait between reconnects (default: 30000)\n"
               "     --log-level LEVEL    debug, info, notice, warning, err (default: info)\n",
               program_invocation_short_name, CGPROF_DEFAULT_CONFIG, DEFAULT_STATE_DIR, DEFAULT_BUS_SOCKET);
}

/* The value of --NAME: a positive number up to a day's milliseconds. */
static int parse_positive(const char *name, const char *value, unsigned *ret) {
        char *end;
        unsigned long v = strtoul(value, &end, 10);

        if (*end || end == value || v == 0 || v > 86400000)
                return log_error_errno(EINVAL, "--%s: not a positive number: '%s'.", name, value);
        *ret = (unsigned) v;
        return 0;
}

/* The value of --NAME: an absolute path. */
static int parse_absolute(const char *name, const char *value, const char **ret) {
        if (value[0] != '/')
                return log_error_errno(EINVAL, "--%s: must be an absolute path, not '%s'.", name, value);
        *ret = value;
        return 0;
}

static int parse_bench_variant(const char *value) {
        const char *bad = NULL;

        if (sampler_bench_variant_from_string(value, &arg_bench_variant, &bad) < 0)
                return log_error_errno(EINVAL, "--bench-bpf-variant: unknown part '%.*s'.",
                                       (int) strcspn(bad, ","), bad);
        log_warning("Running a benchmark variant of the BPF program (%s): its profiles are not complete.",
                    value);
        return 0;
}

/* cgprofd's options (help() describes them). */
enum {
        ARG_VERSION = 0x100,
        ARG_STATE_DIR,
        ARG_BUS_SOCKET,
        ARG_NODE_NAME,
        ARG_ATTACH_MODE,
        ARG_NO_KUBERNETES,
        ARG_KUBECONFIG,
        ARG_KUBE_IDLE,
        ARG_KUBE_BACKOFF,
        ARG_LOG_LEVEL,
        ARG_CHECK_CONFIG,
        ARG_CGROUP_ROOT,
        ARG_SYSCTL_ROOT,
        ARG_BENCH_VARIANT,
        ARG_NO_OFFCPU,
        ARG_CUPTI_SOCKET,
};
static const struct option options[] = {
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, ARG_VERSION },
        { "config", required_argument, NULL, 'c' },
        { "state-dir", required_argument, NULL, ARG_STATE_DIR },
        { "bus-socket", required_argument, NULL, ARG_BUS_SOCKET },
        { "node-name", required_argument, NULL, ARG_NODE_NAME },
        { "attach-mode", required_argument, NULL, ARG_ATTACH_MODE },
        { "no-kubernetes", no_argument, NULL, ARG_NO_KUBERNETES },
        { "kubeconfig", required_argument, NULL, ARG_KUBECONFIG },
        { "kube-watch-idle", required_argument, NULL, ARG_KUBE_IDLE },
        { "kube-backoff-max", required_argument, NULL, ARG_KUBE_BACKOFF },
        { "log-level", required_argument, NULL, ARG_LOG_LEVEL },
        { "check-config", no_argument, NULL, ARG_CHECK_CONFIG },
        { "cgroup-root", required_argument, NULL, ARG_CGROUP_ROOT },
        { "sysctl-root", required_argument, NULL, ARG_SYSCTL_ROOT },
        { "bench-bpf-variant", required_argument, NULL, ARG_BENCH_VARIANT },
        { "no-offcpu", no_argument, NULL, ARG_NO_OFFCPU },
        { "cupti-socket", required_argument, NULL, ARG_CUPTI_SOCKET },
        {},
};

static int parse_argv(int argc, char *argv[]) {
        int c, r;

        while ((c = getopt_long(argc, argv, "hc:", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("cgprofd %s\n", CGPROF_VERSION);
                        return 0;
                case 'c':
                        arg_config = optarg;
                        break;
                case ARG_STATE_DIR:
                        arg_state_dir = optarg;
                        break;
                case ARG_BUS_SOCKET:
                        arg_bus_socket = optarg;
                        break;
                case ARG_NODE_NAME:
                        arg_node_name = optarg;
                        break;
                case ARG_ATTACH_MODE:
                        arg_attach_mode = sampler_mode_from_string(optarg);
                        if (arg_attach_mode < 0)
                                return log_error_errno(EINVAL,
                                                       "--attach-mode: must be 'cpu' or 'cgroup', not '%s'.",
                                                       optarg);
                        break;
                case ARG_NO_KUBERNETES:
                        arg_no_kubernetes = true;
                        break;
                case ARG_KUBECONFIG:
                        arg_kubeconfig = optarg;
                        break;
                case ARG_KUBE_IDLE:
                        r = parse_positive("kube-watch-idle", optarg, &arg_kube_idle_sec);
                        if (r < 0)
                                return r;
                        break;
                case ARG_KUBE_BACKOFF:
                        r = parse_positive("kube-backoff-max", optarg, &arg_kube_backoff_max_msec);
                        if (r < 0)
                                return r;
                        break;
                case ARG_LOG_LEVEL:
                        r = log_level_from_string(optarg);
                        if (r < 0)
                                return log_error_errno(EINVAL, "--log-level: unknown level '%s'.", optarg);
                        log_set_max_level(r);
                        break;
                case ARG_CHECK_CONFIG:
                        arg_check_config = true;
                        break;
                case ARG_CGROUP_ROOT:
                        r = parse_absolute("cgroup-root", optarg, &arg_cgroup_root);
                        if (r < 0)
                                return r;
                        break;
                case ARG_SYSCTL_ROOT:
                        r = parse_absolute("sysctl-root", optarg, &arg_sysctl_root);
                        if (r < 0)
                                return r;
                        break;
                case ARG_BENCH_VARIANT:
                        r = parse_bench_variant(optarg);
                        if (r < 0)
                                return r;
                        break;
                case ARG_NO_OFFCPU:
                        arg_no_offcpu = true;
                        break;
                case ARG_CUPTI_SOCKET:
                        if (*optarg && optarg[0] != '/')
                                return log_error_errno(-EINVAL, "--cupti-socket: not an absolute path: %s",
                                                       optarg);
                        arg_cupti_socket = optarg;
                        break;
                case '?':
                        return -EINVAL;
                default:
                        return -EINVAL;
                }

        if (optind < argc)
                return log_error_errno(EINVAL, "Unexpected argument '%s'.", argv[optind]);
        if (!arg_node_name)
                arg_node_name = getenv("NODE_NAME");
        return 1;
}

/* Each session holds a few fds per CPU (perf events, BPF links): with many
 * containers on a large node that is thousands. Raise the soft limit of open
 * files to the hard limit (we use no select(), so fds above 1024 are fine). */
static void bump_nofile(void) {
        struct rlimit rl;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
                return;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
                log_warning_errno(errno, "Failed to raise the open files limit, ignoring: %m");
        else
                log_debug("Raised the open files limit to %llu.", (unsigned long long) rl.rlim_cur);
}

/* --check-config: what a reload would say of the file, without starting
 * anything (for CI, and for a ConfigMap before it is applied). */
static int check_config(void) {
        _cleanup_(config_freep) Config *c = NULL;
        _cleanup_free_ char *error = NULL;
        int r;

        r = config_load_file(arg_config, &c, &error);
        if (r < 0) {
                /* Read errors already start with the path; validation errors with the key path. */
                if (error && strncmp(error, arg_config, strlen(arg_config)) == 0)
                        fprintf(stderr, "%s\n", error);
                else
                        fprintf(stderr, "%s: %s\n", arg_config, error ?: strerror(-r));
                return r;
        }
        /* The mode as the agent would find it: Kubernetes unless
         * --no-kubernetes, with --kubeconfig or in a cluster. */
        r = config_check_http_mode(
                c, !arg_no_kubernetes && (arg_kubeconfig || getenv("KUBERNETES_SERVICE_HOST")), &error);
        if (r < 0) {
                fprintf(stderr, "%s: %s\n", arg_config, error ?: strerror(-r));
                return r;
        }
        printf("%s: ok\n", arg_config);
        return 0;
}

static int run(int argc, char *argv[]) {
        _cleanup_(manager_freep) Manager *m = NULL;
        int r;

        log_open("cgprofd");
        r = parse_argv(argc, argv);
        if (r <= 0)
                return r;
        if (arg_check_config)
                return check_config();

        bump_nofile();

        ManagerOptions opts = {
                .config_path = arg_config,
                .state_dir = arg_state_dir,
                .cgroup_root = arg_cgroup_root,
                .sysctl_root = arg_sysctl_root,
                .bus_socket = arg_bus_socket,
                .node_name = arg_node_name,
                .attach_mode = arg_attach_mode,
                .no_kubernetes = arg_no_kubernetes,
                .kubeconfig = arg_kubeconfig,
                .kube_idle_sec = arg_kube_idle_sec,
                .kube_backoff_max_msec = arg_kube_backoff_max_msec,
                .bench_variant = arg_bench_variant,
                .no_offcpu = arg_no_offcpu,
                .cupti_socket = arg_cupti_socket,
        };
        r = manager_new(&opts, &m);
        if (r < 0)
                return log_error_errno(r, "Failed to allocate the manager: %m");

        r = manager_startup(m);
        if (r < 0)
                return r;

        return manager_run(m);
}

int main(int argc, char *argv[]) {
        int r = run(argc, argv);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
