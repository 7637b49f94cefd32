/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <cjson/cJSON.h>
#include <stdarg.h>

#include <fcntl.h>

#include "fileio.h"
#include "report-by-rank.h"
#include "report.h"
#include "profile-fixture.h"
#include "template.h"
#include "tests.h"

#define process fixture_process

/* Runs a writer into a memory buffer. */
static char *folded(const ProfileData *d) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        f = open_memstream(&buf, &size);
        ASSERT_NOT_NULL(f);
        ASSERT_OK(report_write_folded(f, d));
        ASSERT_EQ(fclose(f), 0);
        ASSERT_NOT_NULL(buf);
        return buf;
}

TEST(folded) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_free_ char *out = NULL;
        uint32_t p1, p2, p3, main_, work_a, work_b, sys, op, nl, opnew;

        p1 = process(d, 100, "app", "app --serve");
        p2 = process(d, 101, "app", "app --worker");
        p3 = process(d, 200, "db;x", "db");

        main_ = frame(d, "main", "app", FRAME_USER);
        work_a = frame(d, "work", "liba.so", FRAME_USER);
        work_b = frame(d, "work", "libb.so", FRAME_USER);
        sys = frame(d, "do_syscall_64", "[kernel.kallsyms]", FRAME_KERNEL);
        op = frame(d, "op;erator", "db", FRAME_USER);
        nl = frame(d, "a\nb\tc", "app", FRAME_USER);
        opnew = frame(d, "operator new(unsigned long)", "libstdc++.so.6", FRAME_USER);

        add(d, p1, 3, 2, main_, work_a);
        add(d, p2, 2, 2, main_, work_a); /* same comm, other process: merged */
        add(d, p1, 1, 2, main_, work_b); /* same name, other module: merged */
        add(d, p1, 1, 3, main_, work_a, sys);
        add(d, p3, 4, 2, main_, op);
        add(d, p1, 6, 0); /* no frames */
        add(d, p2, 1, 2, main_, nl);
        add(d, p1, 2, 2, main_, opnew);
        add(d, p2, 0, 1, main_); /* no samples: no line */

        out = folded(d);
        ASSERT_STREQ(out, "app 6\n"
                          "app;main;a_b_c 1\n"
                          "app;main;operator new(unsigned long) 2\n"
                          "app;main;work 6\n"
                          "app;main;work;do_syscall_64_[k] 1\n"
                          "db_x;main;op_erator 4\n");
}

/* Reading folded output back gives the same profile, by name. */
TEST(folded_read_round_trip) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new(), *back = NULL;
        _cleanup_free_ char *out = NULL, *again = NULL;
        uint32_t p1, p2, main_, work, sys, unk, vdso, cxx, rust;
        FILE *f;

        p1 = process(d, 100, "app", "app --serve");
        p2 = process(d, 101, "other", "other");
        main_ = frame(d, "main", "app", FRAME_USER);
        work = frame(d, "work loop", "liba.so", FRAME_USER);
        sys = frame(d, "do_syscall_64", "[kernel.kallsyms]", FRAME_KERNEL);
        unk = frame(d, "[libc.so.6]", "libc.so.6", FRAME_UNKNOWN);
        vdso = frame(d, "[vdso]", "[vdso]", FRAME_UNKNOWN);
        /* Demangled names: spaces, <>, &, (), brackets at the end. */
        cxx = frame(d, "std::vector<int, std::allocator<int> >::push_back(int const&) [clone .cold]", "app",
                    FRAME_USER);
        rust = frame(d, "<mycrate::shapes::Widget<u64> as mycrate::shapes::Area>::area", "app", FRAME_USER);
        add(d, p1, 3, 2, main_, work);
        add(d, p2, 5, 3, main_, cxx, rust);
        add(d, p1, 1, 3, main_, work, sys);
        add(d, p2, 4, 2, main_, unk);
        add(d, p2, 2, 2, main_, vdso);
        add(d, p1, 6, 0);

        out = folded(d);
        f = fmemopen(out, strlen(out), "r");
        ASSERT_NOT_NULL(f);
        ASSERT_OK(report_read_folded(f, &back));
        fclose(f);
        again = folded(back);
        ASSERT_STREQ(again, out);
        ASSERT_EQ(profile_data_total(back), profile_data_total(d));
        ASSERT_EQ(back->n_processes, 2);

        /* Kinds come back from the "_[k]" suffix and the brackets. */
        bool saw_kernel = false, saw_unknown = false, saw_cxx = false, saw_rust = false;
        for (size_t i = 0; i < back->n_frames; i++) {
                if (streq(back->frames[i].name, d->frames[cxx].name)) {
                        ASSERT_EQ(back->frames[i].kind, FRAME_USER);
                        saw_cxx = true;
                }
                if (streq(back->frames[i].name, d->frames[rust].name)) {
                        ASSERT_EQ(back->frames[i].kind, FRAME_USER);
                        saw_rust = true;
                }
                if (streq(back->frames[i].name, "do_syscall_64")) {
                        ASSERT_EQ(back->frames[i].kind, FRAME_KERNEL);
                        saw_kernel = true;
                }
                if (streq(back->frames[i].name, "[libc.so.6]")) {
                        ASSERT_EQ(back->frames[i].kind, FRAME_UNKNOWN);
                        ASSERT_STREQ(back->frames[i].module, "libc.so.6");
                        saw_unknown = true;
                }
        }
        ASSERT_TRUE(saw_kernel && saw_unknown && saw_cxx && saw_rust);
}

TEST(folded_read_malformed) {
        static const char *const bad[] = {
                "app;main\n", /* no count */
                "app;main x\n", /* not a number */
                " 5\n", /* no process */
                "app;main 99999999999999999999999\n",
                "app;main -1\n", /* not ULLONG_MAX */
                "app;main 18446744073709551615\n", /* more than pprof's int64 */
                "app;main 9223372036854775807\napp;x 1\n", /* a total beyond int64 */
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                ProfileData *d = NULL;
                FILE *f = fmemopen((void *) bad[i], strlen(bad[i]), "r");
                ASSERT_NOT_NULL(f);
                ASSERT_ERROR(report_read_folded(f, &d), EBADMSG);
                ASSERT_NULL(d);
                fclose(f);
        }
}

TEST(folded_order) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_free_ char *out = NULL;
        uint32_t p, ab, ab_c, ab0, abA, z, e;

        /* Bytewise order of the stack text, where a name that is a prefix of
         * another meets the ';' separator: '-' < '0' < ';' < 'A'. */
        p = process(d, 1, "s", NULL);
        abA = frame(d, "abA", NULL, FRAME_USER);
        z = frame(d, "z", NULL, FRAME_USER);
        ab = frame(d, "ab", NULL, FRAME_USER);
        ab0 = frame(d, "ab0", NULL, FRAME_USER);
        ab_c = frame(d, "ab-c", NULL, FRAME_USER);
        e = frame(d, "", NULL, FRAME_UNKNOWN);

        add(d, p, 1, 1, abA);
        add(d, p, 2, 2, ab, z);
        add(d, p, 3, 1, ab0);
        add(d, p, 4, 1, ab_c);
        add(d, p, 5, 1, ab);
        add(d, p, 6, 2, e, ab);

        out = folded(d);
        ASSERT_STREQ(out, "s;[unknown];ab 6\n"
                          "s;ab 5\n"
                          "s;ab-c 4\n"
                          "s;ab0 3\n"
                          "s;ab;z 2\n"
                          "s;abA 1\n");
}

TEST(folded_empty) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_free_ char *out = NULL;

        out = folded(d);
        ASSERT_STREQ(out, "");
}

TEST(folded_many) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_free_ char *out = NULL;
        uint32_t fr[16], st[6], p[4];
        size_t lines = 0;
        char *prev = NULL;

        /* 4 processes, two with the same comm: 3 × 16^4 distinct lines. */
        p[0] = process(d, 1, "a", NULL);
        p[1] = process(d, 2, "b", NULL);
        p[2] = process(d, 3, "c", NULL);
        p[3] = process(d, 4, "a", NULL);
        for (unsigned i = 0; i < 16; i++) {
                char name[8];
                snprintf(name, sizeof(name), "f%x", i);
                fr[i] = frame(d, name, NULL, i % 3 == 0 ? FRAME_KERNEL : FRAME_USER);
        }
        for (unsigned k = 0; k < 4; k++)
                for (unsigned i = 0; i < 65536; i++) {
                        st[0] = fr[i & 15];
                        st[1] = fr[(i >> 4) & 15];
                        st[2] = fr[(i >> 8) & 15];
                        st[3] = fr[(i >> 12) & 15];
                        ASSERT_OK(profile_data_add_stack(d, p[k], st, 4, 1));
                }

        out = folded(d);
        for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
                char *sp = strrchr(line, ' ');
                ASSERT_NOT_NULL(sp);
                ASSERT_STREQ(sp + 1, line[0] == 'a' ? "2" : "1");
                *sp = 0;
                if (prev)
                        ASSERT_TRUE(strcmp(prev, line) < 0);
                prev = line;
                lines++;
        }
        ASSERT_EQ(lines, 3 * 65536);
}

static cJSON *summary(const ProfileData *d, const ReportSummaryInfo *info) {
        _cleanup_free_ char *buf = NULL;
        size_t size = 0;
        cJSON *j;
        FILE *f;

        f = open_memstream(&buf, &size);
        ASSERT_NOT_NULL(f);
        ASSERT_OK(report_write_summary(f, d, info));
        ASSERT_EQ(fclose(f), 0);
        ASSERT_TRUE(size > 2);
        ASSERT_EQ(buf[size - 1], '\n');
        ASSERT_EQ(buf[size - 2], '}');

        j = cJSON_Parse(buf);
        ASSERT_NOT_NULL(j);
        return j;
}

static void cjson_deletep(cJSON **j) {
        cJSON_Delete(*j);
}

static const char *get_string(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        ASSERT_TRUE(cJSON_IsString(v));
        return v->valuestring;
}

static double get_number(const cJSON *o, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);

        if (!cJSON_IsNumber(v)) {
                fprintf(stderr, "\"%s\" is not a number\n", key);
                abort();
        }
        return v->valuedouble;
}

#define ASSERT_NUMBER(o, key, expected) ASSERT_TRUE(get_number(o, key) == (double) (expected))

static void build_profile(ProfileData *d) {
        uint32_t p1, p2, main_, fib, leaf, k;

        p1 = process(d, 300, "python3", "python3 train.py --epochs 3");
        p2 = process(d, 301, "python3", "python3 -c pass");
        main_ = frame(d, "main", "python3", FRAME_USER);
        fib = frame(d, "fib", "python3", FRAME_USER);
        leaf = frame(d, "[libc.so.6]", "libc.so.6", FRAME_UNKNOWN);
        k = frame(d, "do_syscall_64", "[kernel.kallsyms]", FRAME_KERNEL);

        /* total 3 + 1 + 1 + 1 + 1 = 7 (percentages that need rounding) */
        add(d, p1, 3, 3, main_, fib, fib);
        add(d, p1, 1, 3, main_, fib, leaf);
        add(d, p1, 1, 4, main_, fib, leaf, k);
        add(d, p2, 1, 1, main_);
        add(d, p2, 1, 2, main_, leaf);
}

TEST(summary) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_(cjson_deletep) cJSON *j = NULL;
        uint64_t per_cpu[] = { 3, 0, 4, 2 };
        const char *formats[] = { "profile.folded", "summary.json", NULL };
        const cJSON *samples, *array, *o;
        ReportSummaryInfo info = {
                .session_id = "0123456789abcdef0123456789abcdef",
                .profile = "default",
                .target = "labelled",
                .cgroup = "kubepods.slice/x.scope",
                .namespace = "ml",
                .pod = "trainer-0",
                .container = "main",
                .container_id = "abc123",
                .node = NULL,
                .start_usec = UINT64_C(1700000000123456),
                .end_usec = UINT64_C(1700000020623999),
                .frequency = 99,
                .event = "cpu-clock",
                .requested_event = "cycles",
                .event_fallback_reason = "cycles: not supported (ENOENT)",
                .attach_mode = "cgroup",
                .end_reason = "duration",
                .samples_per_cpu = per_cpu,
                .n_cpus = ELEMENTSOF(per_cpu),
                .lost = 2,
                .excluded = 5,
                .collisions = 1,
                .cpu_usage_usec = UINT64_C(15505000), /* 99 × 15.505 = 1534.995 → 1535 */
                .unsymbolized_frames = 3,
                .total_frames = 12,
                .report_dir = "/var/lib/cgprof/reports/ml/trainer-0/main/1700000000123_abcd1234",
                .formats = formats,
        };

        build_profile(d);
        j = summary(d, &info);

        ASSERT_STREQ(get_string(j, "session"), "0123456789abcdef0123456789abcdef");
        ASSERT_STREQ(get_string(j, "profile"), "default");
        ASSERT_STREQ(get_string(j, "target"), "labelled");
        ASSERT_STREQ(get_string(j, "cgroup"), "kubepods.slice/x.scope");
        ASSERT_STREQ(get_string(j, "namespace"), "ml");
        ASSERT_STREQ(get_string(j, "pod"), "trainer-0");
        ASSERT_STREQ(get_string(j, "container"), "main");
        ASSERT_STREQ(get_string(j, "containerId"), "abc123");
        ASSERT_NULL(cJSON_GetObjectItemCaseSensitive(j, "node"));

        ASSERT_STREQ(get_string(j, "start"), "2023-11-14T22:13:20.123Z");
        ASSERT_STREQ(get_string(j, "end"), "2023-11-14T22:13:40.623Z");
        ASSERT_NUMBER(j, "startUsec", UINT64_C(1700000000123456));
        ASSERT_NUMBER(j, "endUsec", UINT64_C(1700000020623999));
        ASSERT_TRUE(get_number(j, "durationSec") > 20.500542 && get_number(j, "durationSec") < 20.500544);
        ASSERT_NUMBER(j, "frequency", 99);
        ASSERT_STREQ(get_string(j, "event"), "cpu-clock");
        ASSERT_STREQ(get_string(j, "requestedEvent"), "cycles");
        ASSERT_STREQ(get_string(j, "eventFallback"), "cycles: not supported (ENOENT)");
        ASSERT_STREQ(get_string(j, "attachMode"), "cgroup");
        ASSERT_STREQ(get_string(j, "endReason"), "duration");

        samples = cJSON_GetObjectItemCaseSensitive(j, "samples");
        ASSERT_TRUE(cJSON_IsObject(samples));
        ASSERT_NUMBER(samples, "total", 7);
        ASSERT_NUMBER(samples, "kernel", 9);
        ASSERT_NUMBER(samples, "lost", 2);
        ASSERT_NUMBER(samples, "excluded", 5);
        ASSERT_NUMBER(samples, "expected", 1535);
        ASSERT_NUMBER(samples, "cpuUsageSec", 15.505);
        array = cJSON_GetObjectItemCaseSensitive(samples, "perCpu");
        ASSERT_TRUE(cJSON_IsArray(array));
        ASSERT_EQ(cJSON_GetArraySize(array), 4);
        for (int i = 0; i < 4; i++)
                ASSERT_TRUE(cJSON_GetArrayItem(array, i)->valuedouble == (double) per_cpu[i]);

        ASSERT_NUMBER(j, "uniqueStacks", 5);
        ASSERT_NUMBER(j, "collisions", 1);
        ASSERT_NUMBER(j, "unsymbolizedShare", 0.25);

        /* self: fib 3, [libc.so.6] 2, main 1, do_syscall_64 1;
         * total: main 7, fib 5, [libc.so.6] 3, do_syscall_64 1. */
        array = cJSON_GetObjectItemCaseSensitive(j, "topFunctions");
        ASSERT_TRUE(cJSON_IsArray(array));
        ASSERT_EQ(cJSON_GetArraySize(array), 4);

        o = cJSON_GetArrayItem(array, 0);
        ASSERT_STREQ(get_string(o, "name"), "fib");
        ASSERT_STREQ(get_string(o, "module"), "python3");
        ASSERT_STREQ(get_string(o, "kind"), "user");
        ASSERT_NUMBER(o, "self", 3);
        ASSERT_NUMBER(o, "selfPercent", 42.86); /* 3/7 = 42.857... */
        ASSERT_NUMBER(o, "total", 5);
        ASSERT_NUMBER(o, "totalPercent", 71.43); /* 5/7 = 71.428... */

        o = cJSON_GetArrayItem(array, 1);
        ASSERT_STREQ(get_string(o, "name"), "[libc.so.6]");
        ASSERT_STREQ(get_string(o, "kind"), "unknown");
        ASSERT_NUMBER(o, "self", 2);
        ASSERT_NUMBER(o, "selfPercent", 28.57);
        ASSERT_NUMBER(o, "total", 3);
        ASSERT_NUMBER(o, "totalPercent", 42.86);

        /* main and do_syscall_64 tie on self (1): main has the larger total. */
        o = cJSON_GetArrayItem(array, 2);
        ASSERT_STREQ(get_string(o, "name"), "main");
        ASSERT_NUMBER(o, "selfPercent", 14.29);
        ASSERT_NUMBER(o, "totalPercent", 100);

        o = cJSON_GetArrayItem(array, 3);
        ASSERT_STREQ(get_string(o, "name"), "do_syscall_64");
        ASSERT_STREQ(get_string(o, "module"), "[kernel.kallsyms]");
        ASSERT_STREQ(get_string(o, "kind"), "kernel");

        array = cJSON_GetObjectItemCaseSensitive(j, "processes");
        ASSERT_TRUE(cJSON_IsArray(array));
        ASSERT_EQ(cJSON_GetArraySize(array), 2);
        o = cJSON_GetArrayItem(array, 0);
        ASSERT_NUMBER(o, "pid", 300);
        ASSERT_STREQ(get_string(o, "comm"), "python3");
        ASSERT_STREQ(get_string(o, "cmdline"), "python3 train.py --epochs 3");
        ASSERT_NUMBER(o, "samples", 5);
        o = cJSON_GetArrayItem(array, 1);
        ASSERT_NUMBER(o, "pid", 301);
        ASSERT_NUMBER(o, "samples", 2);

        ASSERT_STREQ(get_string(j, "reportDir"), info.report_dir);
        array = cJSON_GetObjectItemCaseSensitive(j, "files");
        ASSERT_EQ(cJSON_GetArraySize(array), 2);
        ASSERT_STREQ(cJSON_GetArrayItem(array, 0)->valuestring, "profile.folded");
        ASSERT_STREQ(cJSON_GetArrayItem(array, 1)->valuestring, "summary.json");
}

/* Two ranks and a worker of rank 1 (job-identity.h): summary.json per
 * process and byRank, jobLabels, profile.folded's rank root. */
TEST(summary_ranks) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_(cjson_deletep) cJSON *j = NULL;
        char *labels[] = { (char *) "app",
                           (char *) "trainer",
                           (char *) "training.kubeflow.org/job-name",
                           (char *) "mnist",
                           (char *) "training.kubeflow.org/replica-index",
                           (char *) "1",
                           NULL };
        _cleanup_strv_free_ char **job_labels = NULL;
        JobIdentity r0 = JOB_IDENTITY_NONE, r1 = JOB_IDENTITY_NONE;
        uint32_t p0, p1, w1, step, comm, item, slow, other;
        const cJSON *by, *ranks, *o, *shares, *c;
        char *text = NULL;
        size_t size = 0;
        double sum = 0;
        FILE *f;

        ASSERT_OK(report_job_labels_copy(labels, &job_labels));
        ASSERT_STREQ(job_labels[0], "training.kubeflow.org/job-name");
        ASSERT_STREQ(job_labels[3], "1");
        ASSERT_NULL(job_labels[4]);
        ReportSummaryInfo info = { .session_id = "0123456789abcdef0123456789abcdef",
                                   .frequency = 100,
                                   .folded_rank_root = true,
                                   .job_labels = job_labels };

        p0 = process(d, 10, "python3", "python3 train.py");
        p1 = process(d, 11, "python3", "python3 train.py");
        w1 = process(d, 12, "python3", "python3 train.py");
        r0.rank = 0;
        r0.world_size = 2;
        r1.rank = 1;
        r1.world_size = 2;
        ASSERT_OK(profile_data_process_set_job(d, p0, &r0, JOB_ROLE_MAIN, 0));
        ASSERT_OK(profile_data_process_set_job(d, p1, &r1, JOB_ROLE_MAIN, 0));
        ASSERT_OK(profile_data_process_set_job(d, w1, &r1, JOB_ROLE_WORKER, 11));
        step = frame(d, "train_step", NULL, FRAME_PYTHON);
        comm = frame(d, "gloo::transport::tcp::Pair::recv", "libtorch_cpu.so", FRAME_USER);
        item = frame(d, "Synthetic.__getitem__", NULL, FRAME_PYTHON);
        slow = frame(d, "slow_augment", NULL, FRAME_PYTHON);
        other = frame(d, "main", NULL, FRAME_PYTHON);
        add(d, p0, 40, 2, other, step);
        add(d, p0, 60, 3, other, step, comm);
        add(d, p1, 40, 2, other, step);
        add(d, p1, 10, 3, other, step, comm);
        add(d, w1, 100, 2, item, slow);
        add(d, w1, 50, 1, other); /* a worker's sample: data loading */

        j = summary(d, &info);
        o = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "processes"), 0);
        ASSERT_NUMBER(o, "pid", 12); /* most samples first */
        ASSERT_NUMBER(o, "rank", 1);
        ASSERT_NUMBER(o, "worldSize", 2);
        ASSERT_STREQ(get_string(o, "role"), "worker");
        ASSERT_NUMBER(o, "parentPid", 11);
        ASSERT_NULL(cJSON_GetObjectItemCaseSensitive(o, "localRank"));
        ASSERT_STREQ(get_string(cJSON_GetObjectItemCaseSensitive(j, "jobLabels"),
                                "training.kubeflow.org/job-name"),
                     "mnist");
        ASSERT_NULL(
                cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "jobLabels"), "app"));

        by = cJSON_GetObjectItemCaseSensitive(j, "byRank");
        ASSERT_NOT_NULL(by);
        ranks = cJSON_GetObjectItemCaseSensitive(by, "ranks");
        ASSERT_EQ(cJSON_GetArraySize(ranks), 2);
        o = cJSON_GetArrayItem(ranks, 0);
        ASSERT_NUMBER(o, "rank", 0);
        ASSERT_NUMBER(o, "samples", 100);
        ASSERT_NUMBER(o, "cpuSeconds", 1);
        shares = cJSON_GetObjectItemCaseSensitive(o, "shares");
        ASSERT_NUMBER(shares, "communication", 60);
        ASSERT_NUMBER(shares, "other", 40);
        o = cJSON_GetArrayItem(ranks, 1);
        ASSERT_NUMBER(o, "rank", 1);
        ASSERT_NUMBER(o, "processes", 2);
        ASSERT_NUMBER(o, "workers", 1);
        shares = cJSON_GetObjectItemCaseSensitive(o, "shares");
        cJSON_ArrayForEach (c, shares)
                sum += c->valuedouble;
        ASSERT_TRUE(sum > 99.9 && sum < 100.1);
        ASSERT_NUMBER(shares, "dataLoading", 75);
        ASSERT_NUMBER(shares, "communication", 5);
        o = cJSON_GetObjectItemCaseSensitive(by, "straggler");
        ASSERT_NUMBER(o, "rank", 1);
        ASSERT_STREQ(get_string(o, "category"), "dataLoading");
        o = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(by, "differences"), 0);
        ASSERT_STREQ(get_string(o, "function"),
                     "Synthetic.__getitem__"); /* a tie with slow_augment: by name */
        ASSERT_NUMBER(o, "rank", 1);

        f = open_memstream(&text, &size);
        ASSERT_NOT_NULL(f);
        ASSERT_OK(report_write_folded_info(f, d, &info));
        ASSERT_EQ(fclose(f), 0);
        ASSERT_NOT_NULL(strstr(text, "rank 0;python3;main;train_step 40\n"));
        ASSERT_NOT_NULL(strstr(text, "rank 1;python3;Synthetic.__getitem__;slow_augment 100\n"));
        free(text);
        text = folded(d); /* without the option: comm first */
        ASSERT_NOT_NULL(strstr(text, "\npython3;main;train_step 80\n")
                                ?: strstr(text, "python3;main;train_step 80\n"));
        free(text);
}

/* Two pods of one job, each its own report (rank 0 and rank 1): one view
 * (cgprofctl report --by rank DIR DIR), with an extra pattern. */
TEST(by_rank_two_reports) {
        _cleanup_(profile_data_freep) ProfileData *a = profile_data_new(), *b = profile_data_new();
        _cleanup_(by_rank_freep) ByRank *br = NULL;
        _cleanup_(cjson_deletep) cJSON *j = NULL;
        char *extra[] = { (char *) "^horovod::", NULL }, *bad[] = { (char *) "(", NULL };
        RankPatterns patterns = { .extra = { [RANK_CATEGORY_COMMUNICATION] = extra } };
        JobIdentity r = JOB_IDENTITY_NONE;
        _cleanup_free_ char *error = NULL, *text = NULL;
        const cJSON *ranks, *o;
        size_t size = 0;
        uint32_t p;
        FILE *f;

        r.rank = 0;
        p = process(a, 10, "python3", "python3 train.py");
        ASSERT_OK(profile_data_process_set_job(a, p, &r, JOB_ROLE_MAIN, 0));
        add(a, p, 30, 2, frame(a, "train_step", NULL, FRAME_PYTHON),
            frame(a, "horovod::allreduce", NULL, FRAME_USER));
        add(a, p, 70, 1, frame(a, "train_step", NULL, FRAME_PYTHON));
        r.rank = 1;
        p = process(b, 10, "python3", "python3 train.py"); /* the same PID in another pod */
        ASSERT_OK(profile_data_process_set_job(b, p, &r, JOB_ROLE_MAIN, 0));
        add(b, p, 50, 2, frame(b, "train_step", NULL, FRAME_PYTHON),
            frame(b, "at::native::add", NULL, FRAME_USER));
        add(b, p, 10, 1, frame(b, "unranked?", NULL, FRAME_PYTHON));

        ASSERT_ERROR(by_rank_new(&(RankPatterns){ .extra = { [RANK_CATEGORY_COMPUTE] = bad } }, &br, &error),
                     EINVAL);
        ASSERT_STREQ(error, "compute: invalid pattern \"(\"");
        ASSERT_OK(by_rank_new(&patterns, &br, NULL));
        ASSERT_OK(by_rank_add(br, a, 100));
        ASSERT_OK(by_rank_add(br, b, 0)); /* no frequency: the view counts samples */
        ASSERT_EQ(by_rank_n_ranks(br), 2);
        ASSERT_OK(by_rank_json(br, &j));
        ranks = cJSON_GetObjectItemCaseSensitive(j, "ranks");
        o = cJSON_GetArrayItem(ranks, 0);
        ASSERT_NUMBER(o, "rank", 0);
        ASSERT_NUMBER(cJSON_GetObjectItemCaseSensitive(o, "shares"), "communication", 30);
        o = cJSON_GetArrayItem(ranks, 1);
        ASSERT_NUMBER(o, "rank", 1);
        ASSERT_NUMBER(o, "samples", 60);
        ASSERT_NUMBER(cJSON_GetObjectItemCaseSensitive(o, "shares"), "compute", 83.33);
        f = open_memstream(&text, &size);
        ASSERT_NOT_NULL(f);
        ASSERT_OK(by_rank_print(br, f));
        ASSERT_EQ(fclose(f), 0);
        ASSERT_NOT_NULL(strstr(text, "RANK"));
        ASSERT_NOT_NULL(strstr(text, "Straggler: rank"));
}

TEST(summary_minimal) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_(cjson_deletep) cJSON *j = NULL;
        const cJSON *samples;
        ReportSummaryInfo info = {
                .session_id = "00000000000000000000000000000000",
                .profile = "p",
                .target = "t",
                .cgroup = "system.slice/nginx.service",
                .start_usec = 5 * USEC_PER_SEC,
                .end_usec = 5 * USEC_PER_SEC,
                .frequency = 99,
                .event = "cpu-clock",
                .attach_mode = "cpu",
                .end_reason = "stopped",
        };

        j = summary(d, &info);

        /* No Kubernetes metadata on a host. */
        ASSERT_NULL(cJSON_GetObjectItemCaseSensitive(j, "namespace"));
        ASSERT_NULL(cJSON_GetObjectItemCaseSensitive(j, "pod"));
        ASSERT_NULL(cJSON_GetObjectItemCaseSensitive(j, "container"));
        ASSERT_NULL(cJSON_GetObjectItemCaseSensitive(j, "containerId"));
        ASSERT_NULL(cJSON_GetObjectItemCaseSensitive(j, "node"));

        ASSERT_STREQ(get_string(j, "start"), "1970-01-01T00:00:05.000Z");
        ASSERT_NUMBER(j, "durationSec", 0);
        ASSERT_STREQ(get_string(j, "requestedEvent"), "cpu-clock");
        ASSERT_TRUE(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "eventFallback")));
        ASSERT_NUMBER(j, "unsymbolizedShare", 0);
        ASSERT_NUMBER(j, "uniqueStacks", 0);

        samples = cJSON_GetObjectItemCaseSensitive(j, "samples");
        ASSERT_NUMBER(samples, "total", 0);
        ASSERT_NUMBER(samples, "kernel", 0);
        ASSERT_NUMBER(samples, "expected", 0);
        ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(samples, "perCpu")), 0);

        ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "topFunctions")), 0);
        ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "processes")), 0);
        ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(j, "files")), 0);
        ASSERT_TRUE(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "reportDir")));
}

static bool text_is_utf8(const char *s, size_t n) {
        return strlen(s) == n && utf8_is_valid(s);
}

/* A cgroup, node and process named with bytes that are not UTF-8 (a
 * delegated subtree lets anyone mkdir one): every format of the report
 * directory is valid UTF-8, each invalid byte U+FFFD, as the process names
 * and frames of profile data have them. */
TEST(write_dir_names_not_utf8) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_(cjson_deletep) cJSON *j = NULL;
        char dir[] = "/tmp/cgprof-test-report-XXXXXX";
        ReportSummaryInfo info = {
                .session_id = "0123456789abcdef0123456789abcdef",
                .profile = "p",
                .target = "t\xc3",
                .cgroup = "cgprof-test/probe-\xff\xfe",
                .node = "node-\xff",
                .namespace = "ns\xed\xa0\x80",
                .pod = "pod",
                .container = "c",
                .start_usec = 5 * USEC_PER_SEC,
                .end_usec = 6 * USEC_PER_SEC,
                .frequency = 99,
                .event = "cpu-clock",
                .attach_mode = "cpu",
                .end_reason = "stopped",
                .report_dir = "/reports/probe-\xff",
        };
        const char *files[] = { "summary.json", "profile.folded", "flame.svg", "profile.speedscope.json" };
        _cleanup_close_ int fd = -EBADF;
        uint32_t p, f;

        p = process(d, 300, "probe-\xff\xfe", "probe-\xff\xfe --x");
        f = frame(d, "main", "probe-\xff", FRAME_USER);
        add(d, p, 5, 1, f);
        ASSERT_NOT_NULL(mkdtemp(dir));
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(report_write_dir(fd, (1u << _REPORT_FORMAT_MAX) - 1, d, &info));
        /* The caller's names are its own still. */
        ASSERT_STREQ(info.cgroup, "cgprof-test/probe-\xff\xfe");
        ASSERT_NULL(info.formats);

        for (size_t i = 0; i < ELEMENTSOF(files); i++) {
                _cleanup_free_ char *text = NULL;
                size_t n = 0;

                ASSERT_OK(read_full_file_at(fd, files[i], &text, &n));
                if (!text_is_utf8(text, n)) {
                        fprintf(stderr, "%s is not valid UTF-8\n", files[i]);
                        abort();
                }
                if (streq(files[i], "summary.json")) {
                        j = cJSON_Parse(text);
                        ASSERT_NOT_NULL(j);
                }
                ASSERT_OK(unlinkat(fd, files[i], 0));
        }
        ASSERT_OK(unlinkat(fd, "profile.pb.gz", 0));
        ASSERT_OK(rmdir(dir));

        ASSERT_STREQ(get_string(j, "cgroup"), "cgprof-test/probe-\xef\xbf\xbd\xef\xbf\xbd");
        ASSERT_STREQ(get_string(j, "node"), "node-\xef\xbf\xbd");
        ASSERT_STREQ(get_string(j, "target"), "t\xef\xbf\xbd");
        ASSERT_STREQ(get_string(j, "namespace"), "ns\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
        ASSERT_STREQ(get_string(j, "reportDir"), "/reports/probe-\xef\xbf\xbd");
        const cJSON *procs = cJSON_GetObjectItemCaseSensitive(j, "processes");
        ASSERT_STREQ(get_string(cJSON_GetArrayItem(procs, 0), "comm"), "probe-\xef\xbf\xbd\xef\xbf\xbd");
}

/* summary.json as conversion reads it: counts out of a uint64_t's range are
 * 0 (not undefined casts), and an interrupted checkpoint stays one when
 * written again. */
TEST(summary_parse) {
        static const char text[] =
                "{\"session\":\"0123\",\"cgroup\":\"a/b\",\"profileConfig\":\"team/pc\","
                "\"startUsec\":1e30,\"endUsec\":-5,\"frequency\":99.9,\"collisions\":1e999,"
                "\"endReason\":null,\"partial\":true,\"interrupted\":true,\"interruptedReason\":\"killed\","
                "\"samples\":{\"perCpu\":[3,-1,1e300,\"x\",18446744073709551616],\"cpuUsageSec\":1e20}}";
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_(cjson_deletep) cJSON *tree = NULL, *j = NULL;
        _cleanup_free_ uint64_t *per_cpu = NULL;
        ReportSummaryInfo info = {};
        cJSON *bad = NULL;
        uint64_t *none = NULL;

        ASSERT_OK(report_summary_parse(text, strlen(text), &info, &tree, &per_cpu));
        ASSERT_STREQ(info.session_id, "0123");
        ASSERT_STREQ(info.cgroup, "a/b");
        ASSERT_STREQ(info.profile_config, "team/pc");
        ASSERT_NULL(info.end_reason);
        ASSERT_EQ(info.start_usec, 0U);
        ASSERT_EQ(info.end_usec, 0U);
        ASSERT_EQ(info.frequency, 99U);
        ASSERT_EQ(info.collisions, 0U);
        ASSERT_EQ(info.cpu_usage_usec, 0U);
        ASSERT_EQ(info.n_cpus, 5U);
        ASSERT_EQ(per_cpu[0], 3U);
        for (size_t i = 1; i < 5; i++)
                ASSERT_EQ(per_cpu[i], 0U);
        ASSERT_TRUE(info.partial && info.interrupted);
        ASSERT_STREQ(info.interrupted_reason, "killed");

        j = summary(d, &info);
        ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "partial")));
        ASSERT_TRUE(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "interrupted")));
        ASSERT_STREQ(get_string(j, "interruptedReason"), "killed");
        ASSERT_STREQ(get_string(j, "profileConfig"), "team/pc");

        ASSERT_ERROR(report_summary_parse("[1]", 3, &info, &bad, &none), EBADMSG);
        ASSERT_ERROR(report_summary_parse("{", 1, &info, &bad, &none), EBADMSG);
        ASSERT_NULL(bad);
        ASSERT_NULL(none);
}

/* An off-CPU session's "offCpu" and "wallClock", read back for
 * re-rendering and written again: the same objects. Absent: not enabled. */
TEST(summary_offcpu_read_back) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_(cjson_deletep) cJSON *j = NULL, *again = NULL, *none = NULL;
        _cleanup_free_ ReportThread *threads = NULL, *no_threads = NULL;
        ReportThread t[2] = {
                { .pid = 10,
                  .tid = 10,
                  .name = "main",
                  .oncpu_ns = 1500000000,
                  .offcpu_ns = 2250000000,
                  .unstacked_ns = 1000000,
                  .runqueue_ns = 3000000 },
                { .pid = 10, .tid = 12, .name = "ow-helper", .oncpu_ns = 7, .offcpu_ns = 4000000000 },
        };
        ReportSummaryInfo info = { .session_id = "s", .frequency = 99 }, back = info;

        info.offcpu = (ReportOffCpuInfo){ .enabled = true,
                                          .min_usec = 250,
                                          .probability = 0.5,
                                          .recorded = 241,
                                          .recorded_ns = 10862390247,
                                          .short_waits = 42,
                                          .short_ns = 1250405,
                                          .lost = 3,
                                          .lost_ns = 4000,
                                          .excluded_ns = 5000000,
                                          .runqueue = 55,
                                          .runqueue_ns = 4417998,
                                          .record_at = "task-work",
                                          .recorded_late = 2,
                                          .threads = t,
                                          .n_threads = 2 };
        j = summary(d, &info);
        ASSERT_OK(report_offcpu_from_json(j, &back.offcpu, &threads));
        ASSERT_TRUE(back.offcpu.enabled);
        ASSERT_NULL(back.offcpu.unavailable);
        ASSERT_EQ(back.offcpu.min_usec, 250U);
        ASSERT_TRUE(back.offcpu.probability == 0.5);
        ASSERT_EQ(back.offcpu.recorded, 241U);
        ASSERT_EQ(back.offcpu.recorded_ns, 10862390247U);
        ASSERT_EQ(back.offcpu.runqueue_ns, 4417998U);
        ASSERT_STREQ(back.offcpu.record_at, "task-work");
        ASSERT_EQ(back.offcpu.recorded_late, 2U);
        ASSERT_EQ(back.offcpu.n_threads, 2U);
        ASSERT_TRUE(back.offcpu.threads == threads);
        ASSERT_STREQ(threads[1].name, "ow-helper");
        ASSERT_EQ(threads[1].tid, 12U);
        ASSERT_EQ(threads[0].oncpu_ns, 1500000000U);
        ASSERT_EQ(threads[0].unstacked_ns, 1000000U);
        again = summary(d, &back);
        ASSERT_TRUE(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(j, "offCpu"),
                                  cJSON_GetObjectItemCaseSensitive(again, "offCpu"), true));
        ASSERT_TRUE(cJSON_Compare(cJSON_GetObjectItemCaseSensitive(j, "wallClock"),
                                  cJSON_GetObjectItemCaseSensitive(again, "wallClock"), true));

        /* A CPU-only session's summary: nothing enabled, no threads. */
        info.offcpu = (ReportOffCpuInfo){};
        back.offcpu = (ReportOffCpuInfo){};
        none = summary(d, &info);
        ASSERT_OK(report_offcpu_from_json(none, &back.offcpu, &no_threads));
        ASSERT_FALSE(back.offcpu.enabled);
        ASSERT_NULL(no_threads);
}

/* "mappings": where each user mapping's symbols came from, kept through a
 * per-process copy of the data; the kernel's mapping says nothing. */
TEST(summary_mapping_symbols) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_(profile_data_freep) ProfileData *p = NULL;
        _cleanup_(cjson_deletep) cJSON *j = NULL;
        uint32_t proc, f_user, f_kernel, m_user, m_kernel, locs[2], frames[2];
        const cJSON *a, *o;
        ReportSummaryInfo info = {
                .session_id = "00000000000000000000000000000000",
                .profile = "p",
                .target = "t",
                .cgroup = "c",
                .frequency = 99,
                .event = "cpu-clock",
                .attach_mode = "cgroup",
                .end_reason = "stopped",
        };

        ASSERT_NOT_NULL(d);
        ASSERT_OK(profile_data_add_process(d, 42, "app", "app", &proc));
        ASSERT_OK(profile_data_intern_frame(d, "hot_alpha", "app", FRAME_USER, &f_user));
        ASSERT_OK(profile_data_intern_frame(d, "schedule", "[kernel.kallsyms]", FRAME_KERNEL, &f_kernel));
        ASSERT_OK(profile_data_intern_mapping(d, "/usr/bin/app", 0x1000, 0x2000, 0, "abcd", false, &m_user));
        ASSERT_OK(profile_data_intern_mapping(d, "[kernel.kallsyms]", 0, UINT64_MAX, 0, NULL, true,
                                              &m_kernel));
        ASSERT_OK(profile_data_mapping_set_symbols(d, m_user, "minidebuginfo"));
        ASSERT_OK(profile_data_mapping_set_symbols(d, m_user, "dynsym")); /* kept: set once */
        ASSERT_OK(profile_data_mapping_set_symbols(d, m_user, NULL));
        ASSERT_ERROR(profile_data_mapping_set_symbols(d, 99, "symtab"), EINVAL);
        ASSERT_STREQ(d->mappings[m_user].symbols, "minidebuginfo");
        ASSERT_NULL(d->mappings[m_kernel].symbols);
        ASSERT_OK(profile_data_intern_location(d, 0x1234, m_user, f_user, &locs[0]));
        ASSERT_OK(profile_data_intern_location(d, 0xffffffff81000000, m_kernel, f_kernel, &locs[1]));
        frames[0] = f_user;
        frames[1] = f_kernel;
        ASSERT_OK(profile_data_add_stack_full(d, proc, frames, locs, 2, false, 7));

        p = profile_data_of_process(d, proc);
        ASSERT_NOT_NULL(p);
        ASSERT_EQ(p->n_mappings, 2);
        j = summary(p, &info);
        a = cJSON_GetObjectItemCaseSensitive(j, "mappings");
        ASSERT_EQ(cJSON_GetArraySize(a), 2);
        cJSON_ArrayForEach (o, a) {
                if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "kernel")))
                        ASSERT_NULL(cJSON_GetObjectItemCaseSensitive(o, "symbols"));
                else {
                        ASSERT_STREQ(get_string(o, "file"), "/usr/bin/app");
                        ASSERT_STREQ(get_string(o, "symbols"), "minidebuginfo");
                }
        }
}

TEST(summary_top_limit) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new();
        _cleanup_(cjson_deletep) cJSON *j = NULL;
        ReportSummaryInfo info = { .frequency = 1000, .cpu_usage_usec = UINT64_MAX };
        const cJSON *array;
        uint32_t p;

        p = process(d, 1, "x\xff", "x \xfe");
        for (unsigned i = 0; i < 30; i++) {
                char name[16];
                snprintf(name, sizeof(name), "fn%02u", i);
                add(d, p, i + 1, 1, frame(d, name, NULL, FRAME_USER));
        }

        j = summary(d, &info);
        array = cJSON_GetObjectItemCaseSensitive(j, "topFunctions");
        ASSERT_EQ(cJSON_GetArraySize(array), 20);
        ASSERT_STREQ(get_string(cJSON_GetArrayItem(array, 0), "name"), "fn29");
        ASSERT_TRUE(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(array, 0), "module")));

        /* Invalid UTF-8 never reaches the JSON. */
        array = cJSON_GetObjectItemCaseSensitive(j, "processes");
        ASSERT_STREQ(get_string(cJSON_GetArrayItem(array, 0), "comm"), "x\xef\xbf\xbd");

        /* frequency × usage beyond 2^64 does not wrap. */
        ASSERT_TRUE(get_number(cJSON_GetObjectItemCaseSensitive(j, "samples"), "expected") > 1.8e16);
}

DEFINE_TEST_MAIN
