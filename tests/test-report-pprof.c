/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <zlib.h>

#include "profile.pb-c.h"
#include "report.h"
#include "profile-fixture.h"
#include "tests.h"

#define process(d, pid, comm) fixture_process(d, pid, comm, NULL)

#define KERNEL_START UINT64_C(0xffff800000000000)
#define PERIOD_999 UINT64_C(1001001) /* 1e9 / 999, rounded */

typedef Perftools__Profiles__Profile PbProfile;

static uint32_t mapping(ProfileData *d, const char *file, uint64_t start, uint64_t limit,
                        const char *build_id, bool kernel) {
        uint32_t i;

        ASSERT_OK(profile_data_intern_mapping(d, file, start, limit, 0, build_id, kernel, &i));
        return i;
}

static uint32_t location(ProfileData *d, uint64_t address, uint32_t m, uint32_t f) {
        uint32_t i;

        ASSERT_OK(profile_data_intern_location(d, address, m, f, &i));
        return i;
}

/* Frames user main (app), work (libc), query (db, no address), kernel
 * do_syscall_64 and an unresolved "[kernel]"; processes app (100) and db
 * (200); stacks with and without locations, and one without frames. */
typedef struct Fixture {
        ProfileData *d;
        uint32_t main_, work, query, sys, kunknown;
        uint32_t m_app, m_libc, m_kernel;
        uint32_t l_main, l_work, l_sys, l_kunknown;
        uint32_t app, db;
} Fixture;

static void fixture_build(Fixture *x) {
        ProfileData *d = profile_data_new();

        ASSERT_NOT_NULL(d);
        x->d = d;
        x->app = process(d, 100, "app");
        x->db = process(d, 200, "db");

        x->main_ = frame(d, "main", "app", FRAME_USER);
        x->work = frame(d, "work", "libc.so.6", FRAME_USER);
        x->query = frame(d, "query", "db", FRAME_USER);
        x->sys = frame(d, "do_syscall_64", "[kernel.kallsyms]", FRAME_KERNEL);
        x->kunknown = frame(d, "[kernel]", "[kernel.kallsyms]", FRAME_UNKNOWN);

        /* The library first: the writer puts the main binary first, as pprof wants. */
        x->m_libc = mapping(d, "/usr/lib/x86_64-linux-gnu/libc.so.6", 0x7f0000000000, 0x7f0000200000, NULL,
                            false);
        x->m_app = mapping(d, "/usr/bin/app", 0x400000, 0x500000, "abcdef01", false);
        x->m_kernel = mapping(d, "[kernel.kallsyms]", KERNEL_START, UINT64_MAX, NULL, true);

        x->l_main = location(d, 0x401234, x->m_app, x->main_);
        x->l_work = location(d, 0x7f0000001000, x->m_libc, x->work);
        x->l_sys = location(d, 0xffffffff81000010, x->m_kernel, x->sys);
        x->l_kunknown = location(d, 0xffffffff82000020, x->m_kernel, x->kunknown);

        ASSERT_OK(profile_data_add_stack_full(d, x->app, (uint32_t[]){ x->main_, x->work, x->sys },
                                              (uint32_t[]){ x->l_main, x->l_work, x->l_sys }, 3, false, 5));
        ASSERT_OK(profile_data_add_stack_full(d, x->app, (uint32_t[]){ x->main_, x->work },
                                              (uint32_t[]){ x->l_main, x->l_work }, 2, false, 3));
        ASSERT_OK(profile_data_add_stack_full(d, x->db, (uint32_t[]){ x->main_, x->kunknown },
                                              (uint32_t[]){ x->l_main, x->l_kunknown }, 2, true, 1));
        /* No addresses (as read from folded output). */
        ASSERT_OK(profile_data_add_stack(d, x->db, (uint32_t[]){ x->main_, x->query }, 2, 4));
        /* No frames at all. */
        ASSERT_OK(profile_data_add_stack(d, x->app, NULL, 0, 2));
        /* No samples: left out. */
        ASSERT_OK(profile_data_add_stack(d, x->db, (uint32_t[]){ x->query }, 1, 0));
}

static const ReportSummaryInfo test_info = {
        .session_id = "0123456789abcdef0123456789abcdef",
        .profile = "default",
        .target = "app",
        .cgroup = "system.slice/app.service",
        .namespace = "prod",
        .container = "app-container",
        .start_usec = UINT64_C(1700000000000000),
        .end_usec = UINT64_C(1700000010000000),
        .frequency = 999,
        .event = "cpu-clock",
};

static void write_pprof(const ProfileData *d, const ReportSummaryInfo *info, uint8_t **ret,
                        size_t *ret_size) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        f = open_memstream(&buf, &size);
        ASSERT_NOT_NULL(f);
        ASSERT_OK(report_write_pprof(f, d, info));
        ASSERT_EQ(fclose(f), 0);
        ASSERT_NOT_NULL(buf);
        *ret = (uint8_t *) buf;
        *ret_size = size;
}

static uint8_t *gunzip(const uint8_t *data, size_t size, size_t *ret_size) {
        size_t allocated = 65536;
        uint8_t *out = malloc(allocated);
        z_stream z = {};
        int zr;

        ASSERT_NOT_NULL(out);
        ASSERT_EQ(inflateInit2(&z, 15 + 16), Z_OK); /* gzip only */
        z.next_in = (Bytef *) data;
        z.avail_in = (uInt) size;
        for (;;) {
                if (z.total_out == allocated) {
                        allocated *= 2;
                        out = realloc(out, allocated);
                        ASSERT_NOT_NULL(out);
                }
                z.next_out = out + z.total_out;
                z.avail_out = (uInt) (allocated - z.total_out);
                zr = inflate(&z, Z_NO_FLUSH);
                if (zr == Z_STREAM_END)
                        break;
                ASSERT_EQ(zr, Z_OK);
        }
        *ret_size = z.total_out;
        inflateEnd(&z);
        return out;
}

static uint8_t *gzip(const uint8_t *data, size_t size, size_t *ret_size) {
        z_stream z = {};
        uint8_t *out;
        size_t bound;

        ASSERT_EQ(deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
        bound = deflateBound(&z, size) + 32;
        out = malloc(bound);
        ASSERT_NOT_NULL(out);
        z.next_in = (Bytef *) data;
        z.avail_in = (uInt) size;
        z.next_out = out;
        z.avail_out = (uInt) bound;
        ASSERT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
        *ret_size = z.total_out;
        deflateEnd(&z);
        return out;
}

static PbProfile *decode(const uint8_t *gz, size_t size) {
        _cleanup_free_ uint8_t *raw = NULL;
        PbProfile *p;
        size_t n;

        ASSERT_TRUE(size > 2);
        ASSERT_EQ(gz[0], 0x1f); /* gzip magic */
        ASSERT_EQ(gz[1], 0x8b);
        raw = gunzip(gz, size, &n);
        p = perftools__profiles__profile__unpack(NULL, n, raw);
        ASSERT_NOT_NULL(p);
        return p;
}

static const char *str(const PbProfile *p, int64_t i) {
        ASSERT_TRUE(i >= 0 && (size_t) i < p->n_string_table);
        return p->string_table[i];
}

static const Perftools__Profiles__Location *find_location(const PbProfile *p, uint64_t id) {
        for (size_t i = 0; i < p->n_location; i++)
                if (p->location[i]->id == id)
                        return p->location[i];
        ASSERT_TRUE(!"no such location");
        return NULL;
}

static const Perftools__Profiles__Mapping *find_mapping(const PbProfile *p, uint64_t id) {
        for (size_t i = 0; i < p->n_mapping; i++)
                if (p->mapping[i]->id == id)
                        return p->mapping[i];
        return NULL;
}

static const Perftools__Profiles__Function *find_function(const PbProfile *p, uint64_t id) {
        for (size_t i = 0; i < p->n_function; i++)
                if (p->function[i]->id == id)
                        return p->function[i];
        ASSERT_TRUE(!"no such function");
        return NULL;
}

static const char *location_name(const PbProfile *p, const Perftools__Profiles__Location *l) {
        const Perftools__Profiles__Function *fn;

        ASSERT_EQ(l->n_line, 1);
        fn = find_function(p, l->line[0]->function_id);
        ASSERT_STREQ(str(p, fn->name), str(p, fn->system_name));
        return str(p, fn->name);
}

/* The sample's frames, leaf first, as "name;name;...". */
static char *sample_names(const PbProfile *p, const Perftools__Profiles__Sample *s) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        ASSERT_NOT_NULL(f);
        for (size_t i = 0; i < s->n_location_id; i++)
                fprintf(f, "%s%s", i > 0 ? ";" : "", location_name(p, find_location(p, s->location_id[i])));
        ASSERT_EQ(fclose(f), 0);
        return buf;
}

static const Perftools__Profiles__Label *find_label(const PbProfile *p, const Perftools__Profiles__Sample *s,
                                                    const char *key) {
        for (size_t i = 0; i < s->n_label; i++)
                if (streq(str(p, s->label[i]->key), key))
                        return s->label[i];
        return NULL;
}

static const Perftools__Profiles__Sample *find_sample(const PbProfile *p, const char *names, int64_t pid) {
        for (size_t i = 0; i < p->n_sample; i++) {
                _cleanup_free_ char *n = sample_names(p, p->sample[i]);
                const Perftools__Profiles__Label *l = find_label(p, p->sample[i], "pid");

                ASSERT_NOT_NULL(l);
                if (streq(n, names) && l->num == pid)
                        return p->sample[i];
        }
        fprintf(stderr, "no sample %s of pid %" PRIi64 "\n", names, pid);
        ASSERT_TRUE(false);
        return NULL;
}

TEST(write_fields) {
        _cleanup_free_ uint8_t *gz = NULL;
        const Perftools__Profiles__Sample *s;
        const Perftools__Profiles__Location *l;
        const Perftools__Profiles__Mapping *m;
        const Perftools__Profiles__Label *lb;
        Fixture x = {};
        bool seen_session = false, seen_event = false;
        PbProfile *p;
        size_t size;

        fixture_build(&x);
        write_pprof(x.d, &test_info, &gz, &size);
        p = decode(gz, size);

        ASSERT_TRUE(p->n_string_table > 0);
        ASSERT_STREQ(p->string_table[0], "");

        ASSERT_EQ(p->n_sample_type, 2);
        ASSERT_STREQ(str(p, p->sample_type[0]->type), "samples");
        ASSERT_STREQ(str(p, p->sample_type[0]->unit), "count");
        ASSERT_STREQ(str(p, p->sample_type[1]->type), "cpu");
        ASSERT_STREQ(str(p, p->sample_type[1]->unit), "nanoseconds");
        ASSERT_NOT_NULL(p->period_type);
        ASSERT_STREQ(str(p, p->period_type->type), "cpu");
        ASSERT_STREQ(str(p, p->period_type->unit), "nanoseconds");
        ASSERT_EQ(p->period, PERIOD_999);
        ASSERT_STREQ(str(p, p->default_sample_type), "cpu");
        ASSERT_EQ(p->time_nanos, INT64_C(1700000000000000000));
        ASSERT_EQ(p->duration_nanos, INT64_C(10000000000));

        for (size_t i = 0; i < p->n_comment; i++) {
                const char *c = str(p, p->comment[i]);

                seen_session |= streq(c, "cgprof session 0123456789abcdef0123456789abcdef");
                seen_event |= streq(c, "event cpu-clock");
        }
        ASSERT_TRUE(seen_session && seen_event);

        /* Five stacks with samples, the one without is left out. */
        ASSERT_EQ(p->n_sample, 5);
        for (size_t i = 0; i < p->n_sample; i++) {
                ASSERT_EQ(p->sample[i]->n_value, 2);
                ASSERT_EQ(p->sample[i]->value[1], p->sample[i]->value[0] * (int64_t) PERIOD_999);
        }

        /* Leaf first, with the addresses and mappings of the locations. */
        s = find_sample(p, "do_syscall_64;work;main", 100);
        ASSERT_EQ(s->value[0], 5);
        ASSERT_EQ(s->value[1], 5 * PERIOD_999);
        l = find_location(p, s->location_id[0]);
        ASSERT_EQ(l->address, UINT64_C(0xffffffff81000010));
        m = find_mapping(p, l->mapping_id);
        ASSERT_NOT_NULL(m);
        ASSERT_STREQ(str(p, m->filename), "[kernel.kallsyms]");
        ASSERT_EQ(m->memory_start, KERNEL_START);
        ASSERT_EQ(m->memory_limit, UINT64_MAX);
        ASSERT_TRUE(m->has_functions);
        l = find_location(p, s->location_id[1]);
        ASSERT_EQ(l->address, UINT64_C(0x7f0000001000));
        m = find_mapping(p, l->mapping_id);
        ASSERT_STREQ(str(p, m->filename), "/usr/lib/x86_64-linux-gnu/libc.so.6");
        ASSERT_STREQ(str(p, m->build_id), "");
        l = find_location(p, s->location_id[2]);
        ASSERT_EQ(l->address, 0x401234);
        m = find_mapping(p, l->mapping_id);
        ASSERT_STREQ(str(p, m->filename), "/usr/bin/app");
        ASSERT_STREQ(str(p, m->build_id), "abcdef01");
        ASSERT_EQ(m->memory_start, 0x400000);
        ASSERT_EQ(m->memory_limit, 0x500000);

        /* Labels. */
        lb = find_label(p, s, "pid");
        ASSERT_EQ(lb->num, 100);
        ASSERT_STREQ(str(p, find_label(p, s, "comm")->str), "app");
        ASSERT_STREQ(str(p, find_label(p, s, "cgroup")->str), "system.slice/app.service");
        ASSERT_STREQ(str(p, find_label(p, s, "namespace")->str), "prod");
        ASSERT_STREQ(str(p, find_label(p, s, "container")->str), "app-container");
        ASSERT_NULL(find_label(p, s, "pod"));

        s = find_sample(p, "work;main", 100);
        ASSERT_EQ(s->value[0], 3);
        s = find_sample(p, "[kernel];main", 200);
        ASSERT_EQ(s->value[0], 1);
        ASSERT_STREQ(str(p, find_label(p, s, "comm")->str), "db");
        l = find_location(p, s->location_id[0]);
        ASSERT_STREQ(str(p, find_mapping(p, l->mapping_id)->filename), "[kernel.kallsyms]");

        /* Without addresses: one location per frame, address 0, no mapping. */
        s = find_sample(p, "query;main", 200);
        ASSERT_EQ(s->value[0], 4);
        for (size_t i = 0; i < s->n_location_id; i++) {
                l = find_location(p, s->location_id[i]);
                ASSERT_EQ(l->address, 0);
                ASSERT_EQ(l->mapping_id, 0);
        }

        /* Without frames: no locations. */
        s = find_sample(p, "", 100);
        ASSERT_EQ(s->value[0], 2);
        ASSERT_EQ(s->n_location_id, 0);

        /* The main binary first; ids in order. */
        ASSERT_EQ(p->n_mapping, 3);
        ASSERT_STREQ(str(p, p->mapping[0]->filename), "/usr/bin/app");
        for (size_t i = 0; i < p->n_mapping; i++)
                ASSERT_EQ(p->mapping[i]->id, i + 1);

        /* Every id that is referenced resolves. */
        for (size_t i = 0; i < p->n_location; i++)
                ASSERT_TRUE(p->location[i]->mapping_id == 0 || find_mapping(p, p->location[i]->mapping_id));

        perftools__profiles__profile__free_unpacked(p, NULL);
        profile_data_free(x.d);
}

TEST(write_kernel_without_mapping) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new(), *back = NULL;
        _cleanup_free_ uint8_t *gz = NULL;
        ReportSummaryInfo info = { .cgroup = "test" }; /* frequency unknown: period 1 */
        const Perftools__Profiles__Sample *s;
        const Perftools__Profiles__Location *l;
        const Perftools__Profiles__Mapping *m;
        uint32_t app, main_, sys;
        PbProfile *p;
        size_t size;

        app = process(d, 7, "app");
        main_ = frame(d, "main", "app", FRAME_USER);
        sys = frame(d, "do_syscall_64", "[kernel.kallsyms]", FRAME_KERNEL);
        ASSERT_OK(profile_data_add_stack(d, app, (uint32_t[]){ main_, sys }, 2, 6));

        write_pprof(d, &info, &gz, &size);
        p = decode(gz, size);

        ASSERT_EQ(p->period, 1);
        ASSERT_EQ(p->n_sample, 1);
        s = p->sample[0];
        ASSERT_EQ(s->value[0], 6);
        ASSERT_EQ(s->value[1], 6);
        ASSERT_EQ(s->n_location_id, 2);
        l = find_location(p, s->location_id[0]);
        ASSERT_STREQ(location_name(p, l), "do_syscall_64");
        m = find_mapping(p, l->mapping_id);
        ASSERT_NOT_NULL(m);
        ASSERT_STREQ(str(p, m->filename), "[kernel.kallsyms]");
        l = find_location(p, s->location_id[1]);
        ASSERT_STREQ(location_name(p, l), "main");
        ASSERT_EQ(l->mapping_id, 0);
        ASSERT_EQ(p->n_mapping, 1);
        ASSERT_STREQ(str(p, find_label(p, s, "cgroup")->str), "test");
        ASSERT_NULL(find_label(p, s, "namespace"));
        perftools__profiles__profile__free_unpacked(p, NULL);

        ASSERT_OK(report_read_pprof(gz, size, &back));
        ASSERT_EQ(back->n_stacks, 1);
        ASSERT_EQ(back->stacks[0].n_frames, 2);
        ASSERT_EQ(back->frames[back->stacks[0].frames[0]].kind, FRAME_USER);
        ASSERT_STREQ(back->frames[back->stacks[0].frames[1]].name, "do_syscall_64");
        ASSERT_EQ(back->frames[back->stacks[0].frames[1]].kind, FRAME_KERNEL);
        ASSERT_STREQ(back->frames[back->stacks[0].frames[1]].module, "[kernel.kallsyms]");
}

TEST(write_empty) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new(), *back = NULL;
        _cleanup_free_ uint8_t *gz = NULL;
        PbProfile *p;
        size_t size;

        /* No info at all, no samples: still a valid profile. */
        write_pprof(d, NULL, &gz, &size);
        p = decode(gz, size);
        ASSERT_EQ(p->n_sample, 0);
        ASSERT_EQ(p->n_sample_type, 2);
        ASSERT_EQ(p->period, 1);
        ASSERT_STREQ(p->string_table[0], "");
        perftools__profiles__profile__free_unpacked(p, NULL);

        ASSERT_OK(report_read_pprof(gz, size, &back));
        ASSERT_EQ(back->n_stacks, 0);
        ASSERT_EQ(back->n_processes, 0);
}

/* "comm[pid];frame;frame" of a stack, root first, kernel frames marked. */
static char *stack_key(const ProfileData *d, const ProfileStack *s) {
        char *buf = NULL;
        size_t size = 0;
        FILE *f = open_memstream(&buf, &size);

        ASSERT_NOT_NULL(f);
        fprintf(f, "%s[%d]", d->processes[s->process].comm, (int) d->processes[s->process].pid);
        for (uint32_t i = 0; i < s->n_frames; i++) {
                const Frame *fr = d->frames + s->frames[i];

                fprintf(f, ";%s%s", fr->name, fr->kind == FRAME_KERNEL ? "_[k]" : "");
                if (s->locations)
                        fprintf(f, "@%" PRIx64, d->locations[s->locations[i]].address);
        }
        ASSERT_EQ(fclose(f), 0);
        return buf;
}

static uint64_t stack_count(const ProfileData *d, const char *key) {
        uint64_t n = 0;

        for (size_t i = 0; i < d->n_stacks; i++) {
                _cleanup_free_ char *k = stack_key(d, d->stacks + i);

                if (streq(k, key))
                        n += d->stacks[i].count;
        }
        return n;
}

TEST(round_trip) {
        _cleanup_(profile_data_freep) ProfileData *back = NULL;
        _cleanup_free_ uint8_t *gz = NULL;
        const ProfileStack *s = NULL;
        Fixture x = {};
        size_t size;

        fixture_build(&x);
        write_pprof(x.d, &test_info, &gz, &size);
        ASSERT_OK(report_read_pprof(gz, size, &back));

        ASSERT_EQ(profile_data_total(back), profile_data_total(x.d));
        ASSERT_EQ(back->n_processes, 2);
        ASSERT_EQ(back->processes[0].pid, 100);
        ASSERT_STREQ(back->processes[0].comm, "app");
        ASSERT_NULL(back->processes[0].cmdline);
        ASSERT_EQ(back->processes[0].samples, 10);
        ASSERT_EQ(back->processes[1].pid, 200);
        ASSERT_STREQ(back->processes[1].comm, "db");
        ASSERT_EQ(back->processes[1].samples, 5);

        /* Every stack with samples comes back, with its addresses. */
        for (size_t i = 0; i < x.d->n_stacks; i++) {
                const ProfileStack *o = x.d->stacks + i;
                _cleanup_free_ char *k = stack_key(x.d, o);

                if (o->count == 0)
                        continue;
                if (!o->locations && o->n_frames > 0) {
                        /* Written with synthesized locations at address 0. */
                        free(k);
                        k = NULL;
                        ASSERT_TRUE(asprintf(&k, "db[200];main@0;query@0") > 0);
                }
                fprintf(stderr, "%s %" PRIu64 "\n", k, o->count);
                ASSERT_EQ(stack_count(back, k), o->count);
        }
        ASSERT_EQ(back->n_stacks, 5);

        /* Frames: kinds and modules from the mappings. */
        for (size_t i = 0; i < back->n_stacks; i++)
                if (back->stacks[i].n_frames == 3)
                        s = back->stacks + i;
        ASSERT_NOT_NULL(s);
        ASSERT_STREQ(back->frames[s->frames[0]].name, "main");
        ASSERT_STREQ(back->frames[s->frames[0]].module, "app");
        ASSERT_EQ(back->frames[s->frames[0]].kind, FRAME_USER);
        ASSERT_STREQ(back->frames[s->frames[1]].module, "libc.so.6");
        ASSERT_STREQ(back->frames[s->frames[2]].name, "do_syscall_64");
        ASSERT_STREQ(back->frames[s->frames[2]].module, "[kernel.kallsyms]");
        ASSERT_EQ(back->frames[s->frames[2]].kind, FRAME_KERNEL);
        ASSERT_EQ(back->locations[s->locations[2]].address, UINT64_C(0xffffffff81000010));

        /* Mappings, with build IDs. */
        ASSERT_EQ(back->n_mappings, 3);
        ASSERT_STREQ(back->mappings[0].file, "/usr/bin/app");
        ASSERT_STREQ(back->mappings[0].build_id, "abcdef01");
        ASSERT_EQ(back->mappings[0].start, 0x400000);
        ASSERT_EQ(back->mappings[0].limit, 0x500000);
        ASSERT_NULL(back->mappings[1].build_id);
        ASSERT_STREQ(back->mappings[2].file, "[kernel.kallsyms]");
        ASSERT_TRUE(back->mappings[2].kernel);

        /* "[kernel]": unresolved, in the kernel mapping. */
        for (size_t i = 0; i < back->n_frames; i++)
                if (streq(back->frames[i].name, "[kernel]")) {
                        ASSERT_EQ(back->frames[i].kind, FRAME_UNKNOWN);
                        ASSERT_STREQ(back->frames[i].module, "[kernel.kallsyms]");
                }

        profile_data_free(x.d);
}

/* A Go program: main.main (main.go:70) calls main.goGamma, into which
 * main.gammaStep is inlined: at 0x401010 the chain is gammaStep (main.go:31)
 * inlined into goGamma (main.go:56). A second stack ends in goGamma alone at
 * another address. */
TEST(write_inline) {
        _cleanup_(profile_data_freep) ProfileData *d = profile_data_new(), *back = NULL;
        _cleanup_free_ uint8_t *gz = NULL;
        const Perftools__Profiles__Location *l;
        PbProfile *p;
        const Perftools__Profiles__Function *fn;
        uint32_t app, m, f_main, f_gamma, f_step, l_main, l_gamma, l_step, l_gamma2;
        size_t size, n_chain = 0;

        ASSERT_NOT_NULL(d);
        app = process(d, 100, "app");
        ASSERT_OK(
                profile_data_intern_frame_full(d, "main.main", "app", "/src/main.go", FRAME_USER, &f_main));
        ASSERT_OK(profile_data_intern_frame_full(d, "main.goGamma", "app", "/src/main.go", FRAME_USER,
                                                 &f_gamma));
        ASSERT_OK(profile_data_intern_frame_full(d, "main.gammaStep", "app", "/src/main.go", FRAME_USER,
                                                 &f_step));
        m = mapping(d, "/usr/bin/app", 0x400000, 0x500000, NULL, false);
        ASSERT_OK(profile_data_intern_location_full(d, 0x401100, m, f_main, 70, PROFILE_NONE, &l_main));
        ASSERT_OK(profile_data_intern_location_full(d, 0x401010, m, f_gamma, 56, PROFILE_NONE, &l_gamma));
        ASSERT_OK(profile_data_intern_location_full(d, 0x401010, m, f_step, 31, l_gamma, &l_step));
        ASSERT_OK(profile_data_intern_location_full(d, 0x401020, m, f_gamma, 58, PROFILE_NONE, &l_gamma2));
        ASSERT_OK(profile_data_add_stack_full(d, app, (uint32_t[]){ f_main, f_gamma, f_step },
                                              (uint32_t[]){ l_main, l_gamma, l_step }, 3, false, 7));
        ASSERT_OK(profile_data_add_stack_full(d, app, (uint32_t[]){ f_main, f_gamma },
                                              (uint32_t[]){ l_main, l_gamma2 }, 2, false, 2));

        write_pprof(d, &test_info, &gz, &size);
        p = decode(gz, size);
        ASSERT_NOT_NULL(p);

        /* Functions carry their file. */
        fn = find_function(p, f_step + 1);
        ASSERT_STREQ(str(p, fn->name), "main.gammaStep");
        ASSERT_STREQ(str(p, fn->filename), "/src/main.go");

        /* The chain is one Location with two Lines, innermost first; the
         * physical function's part of it has no Location of its own. */
        ASSERT_EQ(p->n_location, 3);
        for (size_t i = 0; i < p->n_location; i++)
                ASSERT_TRUE(p->location[i]->id != l_gamma + 1);
        l = find_location(p, l_step + 1);
        ASSERT_NOT_NULL(l);
        ASSERT_EQ(l->address, 0x401010);
        ASSERT_EQ(l->n_line, 2);
        ASSERT_EQ(l->line[0]->function_id, f_step + 1);
        ASSERT_EQ(l->line[0]->line, 31);
        ASSERT_EQ(l->line[1]->function_id, f_gamma + 1);
        ASSERT_EQ(l->line[1]->line, 56);
        l = find_location(p, l_main + 1);
        ASSERT_EQ(l->n_line, 1);
        ASSERT_EQ(l->line[0]->line, 70);

        /* Samples: leaf first, the chain's Location once. */
        for (size_t i = 0; i < p->n_sample; i++) {
                const Perftools__Profiles__Sample *s = p->sample[i];

                if (s->value[0] == 7) {
                        ASSERT_EQ(s->n_location_id, 2);
                        ASSERT_EQ(s->location_id[0], l_step + 1);
                        ASSERT_EQ(s->location_id[1], l_main + 1);
                        n_chain++;
                } else {
                        ASSERT_EQ(s->n_location_id, 2);
                        ASSERT_EQ(s->location_id[0], l_gamma2 + 1);
                }
        }
        ASSERT_EQ(n_chain, 1);
        perftools__profiles__profile__free_unpacked(p, NULL);

        /* Read back: the same frames, files, lines and chain. */
        ASSERT_OK(report_read_pprof(gz, size, &back));
        ASSERT_EQ(back->n_stacks, 2);
        for (size_t i = 0; i < back->n_stacks; i++) {
                const ProfileStack *s = back->stacks + i;
                const ProfileLocation *loc;

                if (s->count != 7)
                        continue;
                ASSERT_EQ(s->n_frames, 3);
                ASSERT_STREQ(back->frames[s->frames[0]].name, "main.main");
                ASSERT_STREQ(back->frames[s->frames[1]].name, "main.goGamma");
                ASSERT_STREQ(back->frames[s->frames[2]].name, "main.gammaStep");
                ASSERT_STREQ(back->frames[s->frames[2]].file, "/src/main.go");
                loc = back->locations + s->locations[2];
                ASSERT_EQ(loc->line, 31);
                ASSERT_EQ(loc->inlined_into, s->locations[1]);
                ASSERT_EQ(back->locations[s->locations[1]].line, 56);
                ASSERT_EQ(back->locations[s->locations[1]].inlined_into, PROFILE_NONE);
                ASSERT_EQ(back->locations[s->locations[1]].address, 0x401010);
        }
}

/* ---- Malformed input ---------------------------------------------------- */

/* A small valid profile built with the generated code, to break one field at a time. */
typedef struct Hand {
        PbProfile p;
        Perftools__Profiles__ValueType vt[2], *vtp[2];
        Perftools__Profiles__Mapping m, *mp;
        Perftools__Profiles__Function fn, *fnp;
        Perftools__Profiles__Line line, *linep;
        Perftools__Profiles__Location loc, *locp;
        Perftools__Profiles__Label label[2], *labelp[2];
        Perftools__Profiles__Sample s, *sp;
        int64_t values[2];
        uint64_t location_id;
        char *strings[9];
} Hand;

static void hand_init(Hand *h) {
        static const char *const strings[] = { "",       "samples", "count", "cpu", "nanoseconds",
                                               "/bin/x", "f",       "pid",   "comm" };

        *h = (Hand){};
        perftools__profiles__profile__init(&h->p);
        for (size_t i = 0; i < ELEMENTSOF(strings); i++)
                h->strings[i] = (char *) strings[i];
        h->p.n_string_table = ELEMENTSOF(strings);
        h->p.string_table = h->strings;

        for (size_t i = 0; i < 2; i++) {
                perftools__profiles__value_type__init(&h->vt[i]);
                h->vt[i].type = i == 0 ? 1 : 3;
                h->vt[i].unit = i == 0 ? 2 : 4;
                h->vtp[i] = &h->vt[i];
        }
        h->p.n_sample_type = 2;
        h->p.sample_type = h->vtp;

        perftools__profiles__mapping__init(&h->m);
        h->m.id = 1;
        h->m.filename = 5;
        h->mp = &h->m;
        h->p.n_mapping = 1;
        h->p.mapping = &h->mp;

        perftools__profiles__function__init(&h->fn);
        h->fn.id = 1;
        h->fn.name = 6;
        h->fnp = &h->fn;
        h->p.n_function = 1;
        h->p.function = &h->fnp;

        perftools__profiles__line__init(&h->line);
        h->line.function_id = 1;
        h->linep = &h->line;
        perftools__profiles__location__init(&h->loc);
        h->loc.id = 1;
        h->loc.mapping_id = 1;
        h->loc.address = 0x1000;
        h->loc.n_line = 1;
        h->loc.line = &h->linep;
        h->locp = &h->loc;
        h->p.n_location = 1;
        h->p.location = &h->locp;

        for (size_t i = 0; i < 2; i++) {
                perftools__profiles__label__init(&h->label[i]);
                h->labelp[i] = &h->label[i];
        }
        h->label[0].key = 7;
        h->label[0].num = 42;
        h->label[1].key = 8;
        h->label[1].str = 5;

        perftools__profiles__sample__init(&h->s);
        h->values[0] = 3;
        h->values[1] = 3000;
        h->s.n_value = 2;
        h->s.value = h->values;
        h->location_id = 1;
        h->s.n_location_id = 1;
        h->s.location_id = &h->location_id;
        h->s.n_label = 2;
        h->s.label = h->labelp;
        h->sp = &h->s;
        h->p.n_sample = 1;
        h->p.sample = &h->sp;
}

static int hand_read(const Hand *h, ProfileData **ret) {
        _cleanup_free_ uint8_t *raw = NULL, *gz = NULL;
        size_t n, gz_size;

        n = perftools__profiles__profile__get_packed_size(&h->p);
        raw = malloc(MAX(n, (size_t) 1));
        ASSERT_NOT_NULL(raw);
        ASSERT_EQ(perftools__profiles__profile__pack(&h->p, raw), n);
        gz = gzip(raw, n, &gz_size);
        return report_read_pprof(gz, gz_size, ret);
}

static void assert_bad(const Hand *h) {
        ProfileData *d = NULL;

        ASSERT_ERROR(hand_read(h, &d), EBADMSG);
        ASSERT_NULL(d);
}

TEST(read_hand_made) {
        _cleanup_(profile_data_freep) ProfileData *d = NULL;
        Hand h;

        hand_init(&h);
        ASSERT_OK(hand_read(&h, &d));
        ASSERT_EQ(d->n_stacks, 1);
        ASSERT_EQ(d->stacks[0].count, 3);
        ASSERT_EQ(d->n_processes, 1);
        ASSERT_EQ(d->processes[0].pid, 42);
        ASSERT_STREQ(d->processes[0].comm, "/bin/x");
        ASSERT_STREQ(d->frames[d->stacks[0].frames[0]].name, "f");
        ASSERT_STREQ(d->frames[d->stacks[0].frames[0]].module, "x");
        ASSERT_EQ(d->locations[d->stacks[0].locations[0]].address, 0x1000);
}

TEST(read_malformed) {
        Hand h;

        hand_init(&h);
        h.m.filename = 9; /* string index out of range */
        assert_bad(&h);

        hand_init(&h);
        h.fn.name = -1;
        assert_bad(&h);

        hand_init(&h);
        h.label[1].str = 100;
        assert_bad(&h);

        hand_init(&h);
        h.label[0].key = 1000;
        assert_bad(&h);

        hand_init(&h);
        h.vt[1].unit = 77;
        assert_bad(&h);

        hand_init(&h);
        h.strings[0] = (char *) "x"; /* string_table[0] must be "" */
        assert_bad(&h);

        hand_init(&h);
        h.p.n_string_table = 0;
        assert_bad(&h);

        hand_init(&h);
        h.loc.mapping_id = 2; /* no such mapping */
        assert_bad(&h);

        hand_init(&h);
        h.line.function_id = 5; /* no such function */
        assert_bad(&h);

        hand_init(&h);
        h.location_id = 9; /* no such location */
        assert_bad(&h);

        hand_init(&h);
        h.m.id = 0; /* ids are nonzero */
        assert_bad(&h);

        hand_init(&h);
        h.s.n_value = 1; /* as many values as sample types */
        assert_bad(&h);

        hand_init(&h);
        h.values[0] = -1;
        assert_bad(&h);

        hand_init(&h);
        h.label[0].num = -5; /* pid */
        assert_bad(&h);

        hand_init(&h);
        h.p.n_sample_type = 0;
        h.s.n_value = 0;
        assert_bad(&h);
}

TEST(read_duplicate_ids) {
        Perftools__Profiles__Location loc2, *locs[2];
        Hand h;

        hand_init(&h);
        loc2 = h.loc;
        locs[0] = &h.loc;
        locs[1] = &loc2;
        h.p.n_location = 2;
        h.p.location = locs;
        assert_bad(&h);
}

TEST(read_garbage) {
        _cleanup_free_ uint8_t *gz = NULL, *junk_gz = NULL;
        ProfileData *d = NULL;
        uint8_t junk[4096];
        uint32_t seed = 12345;
        Fixture x = {};
        size_t size, junk_gz_size;

        fixture_build(&x);
        write_pprof(x.d, &test_info, &gz, &size);

        /* Truncated gzip. */
        for (size_t cut = 0; cut < size; cut += MAX(size / 37, (size_t) 1))
                ASSERT_ERROR(report_read_pprof(gz, cut, &d), EBADMSG);
        ASSERT_ERROR(report_read_pprof(gz, size - 1, &d), EBADMSG);
        ASSERT_NULL(d);

        /* Random bytes, raw and gzipped. */
        for (size_t i = 0; i < sizeof(junk); i++) {
                seed = seed * 1103515245 + 12345;
                junk[i] = (uint8_t) (seed >> 16);
        }
        ASSERT_ERROR(report_read_pprof(junk, sizeof(junk), &d), EBADMSG);
        junk_gz = gzip(junk, sizeof(junk), &junk_gz_size);
        ASSERT_ERROR(report_read_pprof(junk_gz, junk_gz_size, &d), EBADMSG);

        /* A gzipped nothing: no string table. */
        free(junk_gz);
        junk_gz = gzip(junk, 0, &junk_gz_size);
        ASSERT_ERROR(report_read_pprof(junk_gz, junk_gz_size, &d), EBADMSG);
        ASSERT_NULL(d);

        profile_data_free(x.d);
}

/* Flipped bytes in a valid protobuf: any answer is fine, but no crash, leak
 * or undefined behaviour (the sanitizer build watches). */
TEST(read_mutations) {
        _cleanup_free_ uint8_t *gz = NULL, *raw = NULL, *copy = NULL;
        uint32_t seed = 42;
        size_t size, n;
        unsigned ok = 0, bad = 0;
        Fixture x = {};

        fixture_build(&x);
        write_pprof(x.d, &test_info, &gz, &size);
        raw = gunzip(gz, size, &n);
        copy = malloc(n);
        ASSERT_NOT_NULL(copy);

        for (unsigned i = 0; i < 3000; i++) {
                _cleanup_free_ uint8_t *m = NULL;
                ProfileData *d = NULL;
                size_t m_size;
                int r;

                memcpy(copy, raw, n);
                for (unsigned k = 0; k < 1 + i % 4; k++) {
                        seed = seed * 1103515245 + 12345;
                        copy[(seed >> 8) % n] ^= (uint8_t) (1u << ((seed >> 4) % 8));
                }
                m = gzip(copy, i % 10 == 0 ? (seed >> 3) % n : n, &m_size);
                r = report_read_pprof(m, m_size, &d);
                if (r >= 0) {
                        ASSERT_NOT_NULL(d);
                        ok++;
                        profile_data_free(d);
                } else {
                        ASSERT_NULL(d);
                        bad++;
                }
        }
        fprintf(stderr, "mutations: %u read, %u rejected\n", ok, bad);
        ASSERT_TRUE(bad > 0);

        profile_data_free(x.d);
}

DEFINE_TEST_MAIN
