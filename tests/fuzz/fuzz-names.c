/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for the names a workload or a node gives the agent (a
 * cgroup's, a process's, the node's: any bytes but NUL) on their way out
 * through the agent's three outputs, each of which wants valid UTF-8:
 *
 *   - D-Bus (agent/control/bus-valid.c, as manager-bus.c appends them):
 *     sd-bus refuses a string that is not UTF-8 or has a noncharacter
 *     (U+FDD0..U+FDEF, U+xFFFE, U+xFFFF), and a reply it cannot build
 *     fails the whole call;
 *   - JSON: the /reports and /targets answers (a cJSON text made valid
 *     after it is printed, as manager-pull.c does) and a report's files
 *     (report_valid_info(), as report_write_dir() does, then the writers);
 *   - Prometheus' exposition (common/metrics/exposition.c: cgprof_info's
 *     node, the profile label).
 *
 * The input is up to three names separated by NUL bytes: a cgroup, a
 * process (comm) and a node (a name left out is the first one). Each
 * output must be accepted (sd-bus reads the sealed message back: it checks
 * every string; cJSON parses the JSON; the exposition's line reads back)
 * and carry each name as utf8_make_valid() makes it: unchanged when valid,
 * each invalid byte U+FFFD (on D-Bus each byte of a noncharacter too, as
 * utf8_make_valid_bus() makes it). And a name sd-bus refuses as it is must be
 * exactly a name that is not (utf8_is_valid_bus()).
 * Built by tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include <cjson/cJSON.h>
#include <sys/socket.h>

#include "bus-valid.h"
#include "exposition.h"
#include "fuzz.h"
#include "report.h"
#include "template.h"

#define SESSION_ID "0123456789abcdef0123456789abcdef"

typedef struct Names {
        const char *cgroup, *comm, *node; /* as they came */
        char *cgroup_valid, *comm_valid, *node_valid; /* as every output must carry them */
        char *cgroup_bus, *comm_bus, *node_bus; /* D-Bus: the noncharacters too made U+FFFD */
} Names;

/* A bus that is enough for sd-bus to make messages: one end of a socket
 * pair, started (authenticating: nothing is ever sent on it). */
static sd_bus *fuzz_bus(void) {
        static sd_bus *bus = NULL;
        int fds[2];

        if (bus)
                return bus;
        CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
        CHECK(sd_bus_new(&bus) >= 0);
        CHECK(sd_bus_set_fd(bus, fds[0], fds[0]) >= 0);
        CHECK(sd_bus_start(bus) >= 0);
        return bus;
}

static sd_bus_message *new_message(void) {
        sd_bus_message *m = NULL;

        CHECK(sd_bus_message_new_signal(fuzz_bus(), &m, "/io/cgprof/Agent1", "io.cgprof.Agent1",
                                        "SessionStarted") >= 0);
        return m;
}

static void check_read_string(sd_bus_message *m, const char *want) {
        const char *s = NULL;

        CHECK(sd_bus_message_read(m, "s", &s) > 0);
        CHECK(utf8_is_valid(s));
        CHECK(streq(s, want));
}

static void check_dbus(const Names *n) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = new_message(), *raw = new_message();
        char *strv[] = { (char *) n->cgroup, (char *) n->node, NULL };
        const char *sig = NULL;
        uint64_t t = 0;

        /* sd-bus itself refuses exactly the names that are not UTF-8 or
         * have a noncharacter. */
        CHECK((sd_bus_message_append(raw, "s", n->cgroup) >= 0) == utf8_is_valid_bus(n->cgroup));

        /* As manager-bus.c appends them: a session (SessionStarted's and
         * ListSessions' strings), an array of structs, a variant, a strv. */
        CHECK(bus_append_valid(m, "sssssss", SESSION_ID, "target", "profile", "", "", "", n->cgroup) >= 0);
        CHECK(bus_append_valid(m, "a(st)", 2u, n->comm, (uint64_t) 1, n->node, (uint64_t) 2) >= 0);
        CHECK(bus_append_valid(m, "bv", 1, "s", n->node) >= 0);
        CHECK(bus_append_strv_valid(m, strv) >= 0);
        /* A wrong signature is refused, not guessed. */
        CHECK(bus_append_valid(m, "(", n->cgroup) == -EINVAL);

        /* Sealed, as sending does, and read back: sd-bus checks each string. */
        CHECK(sd_bus_message_seal(m, 1, 0) >= 0);
        CHECK(sd_bus_message_rewind(m, true) >= 0);
        check_read_string(m, SESSION_ID);
        check_read_string(m, "target");
        check_read_string(m, "profile");
        for (int i = 0; i < 3; i++)
                check_read_string(m, "");
        check_read_string(m, n->cgroup_bus);
        CHECK(sd_bus_message_enter_container(m, 'a', "(st)") > 0);
        CHECK(sd_bus_message_enter_container(m, 'r', "st") > 0);
        check_read_string(m, n->comm_bus);
        CHECK(sd_bus_message_read(m, "t", &t) > 0 && t == 1);
        CHECK(sd_bus_message_exit_container(m) >= 0);
        CHECK(sd_bus_message_enter_container(m, 'r', "st") > 0);
        check_read_string(m, n->node_bus);
        CHECK(sd_bus_message_read(m, "t", &t) > 0 && t == 2);
        CHECK(sd_bus_message_exit_container(m) >= 0);
        CHECK(sd_bus_message_exit_container(m) >= 0);
        int b = 0;
        CHECK(sd_bus_message_read(m, "b", &b) > 0 && b == 1);
        CHECK(sd_bus_message_peek_type(m, NULL, &sig) > 0 && streq(sig, "s"));
        CHECK(sd_bus_message_enter_container(m, 'v', "s") > 0);
        check_read_string(m, n->node_bus);
        CHECK(sd_bus_message_exit_container(m) >= 0);
        CHECK(sd_bus_message_enter_container(m, 'a', "s") > 0);
        check_read_string(m, n->cgroup_bus);
        check_read_string(m, n->node_bus);
        CHECK(sd_bus_message_exit_container(m) >= 0);
        CHECK(sd_bus_message_at_end(m, true) > 0);

        /* An error reply's message, which names the cgroup. */
        _cleanup_(sd_bus_error_free) sd_bus_error e = SD_BUS_ERROR_NULL;
        CHECK(bus_error_set_valid(&e, "io.cgprof.Error.AlreadyRunning", n->cgroup) < 0);
        CHECK(streq(e.name, "io.cgprof.Error.AlreadyRunning") && streq(e.message, n->cgroup_bus));
}

/* A report of the listing, as /reports answers it (manager-pull.c's report_json()). */
static cJSON *report_object(const char *ns, const char *pod, const char *cgroup) {
        cJSON *o = cJSON_CreateObject();

        CHECK(o);
        CHECK(cJSON_AddStringToObject(o, "session", SESSION_ID));
        CHECK(cJSON_AddStringToObject(o, "namespace", ns));
        CHECK(cJSON_AddStringToObject(o, "pod", pod));
        CHECK(cJSON_AddStringToObject(o, "container", ""));
        CHECK(cJSON_AddStringToObject(o, "cgroup", cgroup));
        CHECK(cJSON_AddNumberToObject(o, "samples", 1));
        return o;
}

static const char *json_string(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        CHECK(cJSON_IsString(v));
        return v->valuestring;
}

static void check_json_answer(const Names *n) {
        cJSON *raw = cJSON_CreateArray(), *valid = cJSON_CreateArray(), *back;
        _cleanup_free_ char *text = NULL, *want = NULL;

        CHECK(raw && valid);
        CHECK(cJSON_AddItemToArray(raw, report_object(n->node, n->comm, n->cgroup)));
        CHECK(cJSON_AddItemToArray(valid, report_object(n->node_valid, n->comm_valid, n->cgroup_valid)));
        /* The text made valid after printing is the text of the names made valid. */
        text = utf8_make_valid_take(cJSON_PrintUnformatted(raw));
        want = cJSON_PrintUnformatted(valid);
        CHECK(text && want);
        CHECK(utf8_is_valid(text));
        CHECK(streq(text, want));
        back = cJSON_Parse(text);
        CHECK(back);
        CHECK(streq(json_string(cJSON_GetArrayItem(back, 0), "cgroup"), n->cgroup_valid));
        CHECK(streq(json_string(cJSON_GetArrayItem(back, 0), "namespace"), n->node_valid));
        cJSON_Delete(back);
        cJSON_Delete(raw);
        cJSON_Delete(valid);
}

/* Runs a report writer into memory. */
static char *write_format(ReportFormat f, const ProfileData *d, const ReportSummaryInfo *info,
                          size_t *ret_n) {
        char *buf = NULL;
        size_t n = 0;
        FILE *out = open_memstream(&buf, &n);
        int r;

        CHECK(out);
        r = report_format_info(f)->write(out, d, info);
        CHECK(fclose(out) == 0);
        CHECK(r == 0);
        *ret_n = n;
        return buf;
}

static void check_report(const Names *n) {
        static const char *const formats[] = { "summary.json", NULL };
        _cleanup_(report_valid_info_done) ReportValidInfo valid = {};
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        uint64_t per_cpu[1] = { 3 };
        ReportSummaryInfo info = {
                .session_id = SESSION_ID,
                .profile = "default",
                .target = n->comm,
                .cgroup = n->cgroup,
                .namespace = n->node,
                .pod = n->comm,
                .container = n->cgroup,
                .node = n->node,
                .start_usec = 1700000000000000,
                .end_usec = 1700000001000000,
                .frequency = 99,
                .event = "cpu-clock",
                .attach_mode = "cgroup",
                .end_reason = "stopped",
                .samples_per_cpu = per_cpu,
                .n_cpus = 1,
                .report_dir = n->cgroup,
                .formats = formats,
        };
        uint32_t p, fr;

        CHECK(d);
        CHECK(profile_data_add_process(d, 42, n->comm, n->cgroup, &p) == 0);
        CHECK(profile_data_intern_frame(d, n->comm, n->node, FRAME_USER, &fr) == 0);
        CHECK(profile_data_add_stack(d, p, &fr, 1, 3) == 0);
        CHECK(report_valid_info(&info, &valid) == 0);
        CHECK(streq(valid.info.cgroup, n->cgroup_valid) && streq(valid.info.node, n->node_valid));
        CHECK(valid.info.formats == formats && valid.info.samples_per_cpu == per_cpu);

        for (ReportFormat f = 0; f < _REPORT_FORMAT_MAX; f++) {
                _cleanup_free_ char *text = NULL;
                size_t size = 0;

                text = write_format(f, d, &valid.info, &size);
                if (f == REPORT_FORMAT_PPROF)
                        continue; /* binary: its strings are the same names */
                CHECK(text && strlen(text) == size);
                CHECK(utf8_is_valid(text));
                if (f == REPORT_FORMAT_JSON) {
                        cJSON *j = cJSON_Parse(text);

                        CHECK(j);
                        CHECK(streq(json_string(j, "cgroup"), n->cgroup_valid));
                        CHECK(streq(json_string(j, "node"), n->node_valid));
                        const cJSON *procs = cJSON_GetObjectItemCaseSensitive(j, "processes");
                        CHECK(cJSON_GetArraySize(procs) == 1);
                        CHECK(streq(json_string(cJSON_GetArrayItem(procs, 0), "comm"), n->comm_valid));
                        cJSON_Delete(j);
                }
                if (f == REPORT_FORMAT_SPEEDSCOPE)
                        cJSON_Delete(({
                                cJSON *j = cJSON_Parse(text);
                                CHECK(j);
                                j;
                        }));
        }
}

/* The value of label in the exposition's line, unescaped; NULL if absent. */
static char *label_value(const char *line, const char *label) {
        _cleanup_free_ char *key = NULL;
        const char *p;
        char *v, *o;

        CHECK(asprintf(&key, "%s=\"", label) > 0);
        p = strstr(line, key);
        if (!p)
                return NULL;
        p += strlen(key);
        v = o = malloc(strlen(p) + 1);
        CHECK(v);
        for (; *p && *p != '"'; p++) {
                if (*p == '\\') {
                        p++;
                        CHECK(*p == '\\' || *p == '"' || *p == 'n');
                        *o++ = *p == 'n' ? '\n' : *p;
                } else {
                        CHECK(*p != '\n');
                        *o++ = *p;
                }
        }
        CHECK(*p == '"');
        *o = 0;
        return v;
}

static void check_exposition(const Names *n) {
        _cleanup_(metrics_writer_freep) MetricsWriter *w = NULL;
        _cleanup_free_ char *text = NULL, *node = NULL, *profile = NULL;
        size_t size = 0;
        const char *line;

        CHECK(metrics_writer_new(&w) == 0);
        metrics_family(w, "cgprof_info", METRIC_GAUGE,
                       "The agent's version, node and attach mode (value 1).");
        metrics_sample(
                w, METRICS_LABELS({ "version", "0" }, { "node", n->node }, { "attach_mode", "cgroup" }), 1);
        metrics_family(w, "cgprof_samples_total", METRIC_COUNTER, "Samples collected, by profile.");
        metrics_sample_u64(w, METRICS_LABELS({ "profile", n->cgroup }), 3);
        CHECK(metrics_writer_finish(w, &text, &size) == 0);
        CHECK(strlen(text) == size);
        CHECK(utf8_is_valid(text));

        line = strstr(text, "\ncgprof_info{");
        CHECK(line);
        node = label_value(line + 1, "node");
        CHECK(node && streq(node, n->node_valid));
        line = strstr(text, "\ncgprof_samples_total{");
        CHECK(line);
        profile = label_value(line + 1, "profile");
        CHECK(profile && streq(profile, n->cgroup_valid));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = fuzz_strndup(data, size);
        const char *parts[3] = { text, NULL, NULL };
        Names n;

        /* Up to three names, separated by NULs. */
        for (size_t i = 1, k = strlen(text); i < 3 && k < size; i++) {
                parts[i] = text + k + 1;
                k += 1 + strlen(parts[i]);
        }
        n = (Names){
                .cgroup = parts[0],
                .comm = parts[1] ?: parts[0],
                .node = parts[2] ?: parts[0],
        };
        n.cgroup_valid = utf8_make_valid(n.cgroup);
        n.comm_valid = utf8_make_valid(n.comm);
        n.node_valid = utf8_make_valid(n.node);
        CHECK(n.cgroup_valid && n.comm_valid && n.node_valid);
        n.cgroup_bus = utf8_make_valid_bus(n.cgroup);
        n.comm_bus = utf8_make_valid_bus(n.comm);
        n.node_bus = utf8_make_valid_bus(n.node);
        CHECK(n.cgroup_bus && n.comm_bus && n.node_bus);
        CHECK(utf8_is_valid(n.cgroup_valid));
        CHECK(utf8_is_valid(n.cgroup) == streq(n.cgroup, n.cgroup_valid));

        check_dbus(&n);
        check_json_answer(&n);
        check_report(&n);
        check_exposition(&n);

        free(n.cgroup_valid);
        free(n.comm_valid);
        free(n.node_valid);
        free(n.cgroup_bus);
        free(n.comm_bus);
        free(n.node_bus);
        return 0;
}
