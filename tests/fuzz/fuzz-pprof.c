/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for what `cgprofctl report` reads
 * (common/profile/report-pprof.c: profile.pb.gz, ours or another tool's;
 * common/profile/report-folded.c: profile.folded) and the writers it then runs on what was read.
 *
 * The input's first byte says what the rest is: 'P' a pprof Profile
 * message, compressed here (so that mutations hit the protobuf, not
 * zlib's checksums); 'F' a folded profile; anything else, the input whole
 * is a profile.pb.gz file. Reading succeeds or fails with a negative errno
 * (-EBADMSG, -E2BIG, -ENOMEM). What was read is rendered in every format;
 * written as pprof and read again, it keeps its samples.
 * Built by tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include <zlib.h>

#include "fuzz.h"
#include "report.h"

static void check_data(const ProfileData *d) {
        for (size_t i = 0; i < d->n_stacks; i++) {
                const ProfileStack *st = &d->stacks[i];

                CHECK(st->process < d->n_processes);
                for (size_t k = 0; k < st->n_frames; k++) {
                        CHECK(st->frames[k] < d->n_frames);
                        if (st->locations)
                                CHECK(st->locations[k] < d->n_locations);
                }
        }
        for (size_t i = 0; i < d->n_frames; i++)
                CHECK(d->frames[i].name && d->frames[i].kind < _FRAME_KIND_MAX);
        for (size_t i = 0; i < d->n_locations; i++) {
                const ProfileLocation *l = &d->locations[i];

                CHECK(l->frame < d->n_frames);
                CHECK(l->mapping == PROFILE_NONE || l->mapping < d->n_mappings);
                CHECK(l->inlined_into == PROFILE_NONE || l->inlined_into < d->n_locations);
        }
}

static void render(const ProfileData *d) {
        static const char *const formats[] = { "profile.folded", "profile.pb.gz", NULL };
        uint64_t per_cpu[2] = { profile_data_total(d), 0 };
        ReportSummaryInfo info = {
                .session_id = "0123456789abcdef0123456789abcdef",
                .profile = "default",
                .target = "fuzz",
                .cgroup = "system.slice/fuzz.service",
                .start_usec = 1700000000000000,
                .end_usec = 1700000020000000,
                .frequency = 99,
                .event = "cpu-clock",
                .requested_event = "cpu-clock",
                .attach_mode = "cgroup",
                .end_reason = "duration",
                .samples_per_cpu = per_cpu,
                .n_cpus = 2,
                .cpu_usage_usec = 20000000,
                .report_dir = "/var/lib/cgprof/reports/fuzz",
                .formats = formats,
        };

        for (ReportFormat f = 0; f < _REPORT_FORMAT_MAX; f++) {
                _cleanup_(fclosep) FILE *out = fopen("/dev/null", "we");
                const ReportFormatInfo *fi = report_format_info(f);
                int r;

                CHECK(out && fi);
                r = fi->write(out, d, &info);
                CHECK(r == 0 || fuzz_is_errno(r)); /* -EOVERFLOW for counts too large, ... */
        }
}

/* Writes d as pprof and reads it back: the same samples. */
static void round_trip(const ProfileData *d) {
        _cleanup_(profile_data_freep) ProfileData *again = NULL;
        _cleanup_free_ char *buf = NULL;
        size_t n = 0;
        FILE *f;
        int r;

        f = open_memstream(&buf, &n);
        CHECK(f);
        r = report_write_pprof(f, d, NULL);
        CHECK(fclose(f) == 0);
        if (r < 0) {
                CHECK(r == -ENOMEM || r == -E2BIG || r == -EINVAL);
                return;
        }
        r = report_read_pprof(buf, n, &again);
        CHECK(r == 0 || r == -ENOMEM);
        if (r < 0)
                return;
        check_data(again);
        CHECK(profile_data_total(again) == profile_data_total(d));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_(profile_data_freep) ProfileData *d = NULL;
        _cleanup_free_ uint8_t *z = NULL;
        int r;

        if (size == 0)
                return 0;

        if (data[0] == 'F') {
                _cleanup_(fclosep) FILE *f = fmemopen((void *) (data + 1), size - 1, "r");

                if (size == 1)
                        return 0;
                CHECK(f);
                r = report_read_folded(f, &d);
        } else if (data[0] == 'P') {
                uLongf zsize = compressBound(size - 1);

                z = malloc(zsize);
                CHECK(z);
                CHECK(compress2(z, &zsize, data + 1, size - 1, 1) == Z_OK);
                r = report_read_pprof(z, zsize, &d);
        } else
                r = report_read_pprof(data, size, &d);
        if (r < 0) {
                CHECK(fuzz_is_errno(r) && !d);
                return 0;
        }
        CHECK(d);
        check_data(d);
        render(d);
        round_trip(d);
        return 0;
}
