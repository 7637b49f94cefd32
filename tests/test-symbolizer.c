/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "elf-symtab.h"
#include "symbolizer.h"
#include "elf-test.h"
#include "tests.h"

static const char *env_or_skip(const char *name) {
        const char *v = getenv(name);

        if (!v || access(v, R_OK) < 0)
                TEST_SKIP("%s not set or not readable (run through meson test)", name);
        return v;
}

static const char *basename_of(const char *path) {
        const char *s = strrchr(path, '/');
        return s ? s + 1 : path;
}

/* ---- a child process to symbolize ---- */

typedef struct Child {
        bool started; /* a zero-initialized Child owns nothing (not even fd 0) */
        pid_t pid;
        int stdin_fd;
        FILE *out;
        char names[8][64];
        uint64_t addrs[8];
        size_t n;
} Child;

/* Starts argv and reads its "NAME 0xADDR" lines up to "ready PID". */
static void child_start(Child *c, char *const argv[]) {
        int in[2], out[2];
        _cleanup_free_ char *line = NULL;
        size_t alloc = 0;

        *c = (Child){ .started = true, .stdin_fd = -EBADF };
        ASSERT_EQ(pipe2(in, O_CLOEXEC), 0);
        ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);

        c->pid = fork();
        ASSERT_TRUE(c->pid >= 0);
        if (c->pid == 0) {
                (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (dup2(in[0], STDIN_FILENO) < 0 || dup2(out[1], STDOUT_FILENO) < 0)
                        _exit(127);
                execv(argv[0], argv);
                _exit(127);
        }
        close(in[0]);
        close(out[1]);
        c->stdin_fd = in[1];
        c->out = fdopen(out[0], "re");
        ASSERT_NOT_NULL(c->out);

        for (;;) {
                char name[64];
                uint64_t addr;

                ASSERT_TRUE(getline(&line, &alloc, c->out) > 0);
                if (strncmp(line, "ready ", 6) == 0)
                        break;
                ASSERT_EQ(sscanf(line, "%63s %" SCNx64, name, &addr), 2);
                ASSERT_TRUE(c->n < ELEMENTSOF(c->names));
                snprintf(c->names[c->n], sizeof(c->names[c->n]), "%s", name);
                c->addrs[c->n++] = addr;
        }
}

static uint64_t child_addr(const Child *c, const char *name) {
        for (size_t i = 0; i < c->n; i++)
                if (streq(c->names[i], name))
                        return c->addrs[i];
        fprintf(stderr, "child did not print %s\n", name);
        abort();
}

/* Ends the child and reaps it: its PID is gone afterwards. */
static void child_stop(Child *c) {
        if (!c->started)
                return;
        if (c->pid > 0) {
                (void) kill(c->pid, SIGKILL);
                (void) waitpid(c->pid, NULL, 0);
                c->pid = 0;
        }
        c->stdin_fd = safe_close(c->stdin_fd);
        if (c->out) {
                fclose(c->out);
                c->out = NULL;
        }
}

static void fixture_wait_start(Child *c, const char *path) {
        char *argv[] = { (char *) path, (char *) "--wait", NULL };

        child_start(c, argv);
}

/* ---- an oracle, independent of the code under test ---- */

typedef struct OracleSym {
        uint64_t value, size;
        uint64_t seg_vaddr, seg_offset; /* the PT_LOAD holding it */
} OracleSym;

static bool oracle_elf(Elf *elf, const char *name, OracleSym *ret) {
        size_t phnum;

        if (!test_elf_find_symbol(elf, name, &ret->value, &ret->size))
                return false;

        ASSERT_EQ(elf_getphdrnum(elf, &phnum), 0);
        for (size_t i = 0; i < phnum; i++) {
                GElf_Phdr p;

                ASSERT_NOT_NULL(gelf_getphdr(elf, (int) i, &p));
                if (p.p_type == PT_LOAD && ret->value >= p.p_vaddr && ret->value < p.p_vaddr + p.p_filesz) {
                        ret->seg_vaddr = p.p_vaddr;
                        ret->seg_offset = p.p_offset;
                        return true;
                }
        }
        return false;
}

static bool oracle_symbol(const char *path, const char *name, OracleSym *ret) {
        _cleanup_close_ int fd = -EBADF;
        bool found;
        Elf *elf;

        elf = test_elf_open(path, &fd);
        found = oracle_elf(elf, name, ret);
        elf_end(elf);
        return found;
}

/* The runtime address of a symbol of 'path' in process pid: its file offset,
 * found in an executable mapping of that file in /proc/PID/maps. */
static uint64_t runtime_address(pid_t pid, const char *path, const char *name) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        char maps[64], real[PATH_MAX];
        OracleSym o;
        uint64_t file_off;
        size_t alloc = 0;

        ASSERT_TRUE(oracle_symbol(path, name, &o));
        file_off = o.value - o.seg_vaddr + o.seg_offset;
        ASSERT_NOT_NULL(realpath(path, real));

        snprintf(maps, sizeof(maps), "/proc/%d/maps", (int) pid);
        f = fopen(maps, "re");
        ASSERT_NOT_NULL(f);
        while (getline(&line, &alloc, f) > 0) {
                uint64_t start, end, pgoff;
                char perms[8];
                int pos = 0;

                if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*u %n", &start, &end, perms,
                           &pgoff, &pos) < 4 ||
                    pos == 0 || perms[2] != 'x')
                        continue;
                line[strcspn(line, "\n")] = '\0';
                if (!streq(line + pos, real))
                        continue;
                if (file_off >= pgoff && file_off - pgoff < end - start)
                        return start + file_off - pgoff;
        }
        fprintf(stderr, "%s not mapped in PID %d\n", name, (int) pid);
        abort();
}

/* ---- temporary directories ---- */

static void rm_rf(const char *path) {
        char cmd[PATH_MAX + 32];

        if (!path || !path[0] || strncmp(path, "/tmp/test-symbolizer.", 21) != 0)
                return;
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
        (void) system(cmd);
}

typedef struct TmpDir {
        char path[64];
} TmpDir;

static void tmp_dir_done(TmpDir *t) {
        rm_rf(t->path);
}

static void tmp_dir_make(TmpDir *t) {
        snprintf(t->path, sizeof(t->path), "/tmp/test-symbolizer.XXXXXX");
        ASSERT_NOT_NULL(mkdtemp(t->path));
}

static void copy_file(const char *from, const char *to, mode_t mode) {
        _cleanup_close_ int in = -EBADF, out = -EBADF;
        char buf[65536];
        ssize_t n;

        in = open(from, O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(in >= 0);
        out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        ASSERT_TRUE(out >= 0);
        while ((n = read(in, buf, sizeof(buf))) > 0)
                ASSERT_EQ(write(out, buf, (size_t) n), n);
        ASSERT_EQ(n, 0);
}

static void write_file(const char *path, const char *contents) {
        FILE *f = fopen(path, "we");

        ASSERT_NOT_NULL(f);
        ASSERT_TRUE(fputs(contents, f) >= 0);
        ASSERT_EQ(fclose(f), 0);
}

/* ---- tests ---- */

static void assert_resolves(Symbolizer *s, ProcessMaps *m, uint64_t addr, const char *name,
                            const char *module, uint64_t offset) {
        ResolvedFrame f = { .name = "unset" };

        ASSERT_OK(symbolizer_resolve_user(s, m, addr, &f));
        ASSERT_STREQ(f.name, name);
        ASSERT_STREQ(f.module, module);
        ASSERT_EQ(f.offset, offset);
}

TEST(resolve_live_then_after_exit) {
        const char *path = env_or_skip("CGPROF_ELF_FIXTURE");
        _cleanup_(symbolizer_freep) Symbolizer *s = NULL;
        _cleanup_(process_maps_freep) ProcessMaps *m = NULL;
        _cleanup_(child_stop) Child c = {};
        static const char *const names[] = {
                "fixture_alpha",
                "fixture_beta",
                "fixture_static_gamma",
                "fixture_static_delta",
        };
        const char *module = basename_of(path);
        ProcessMaps *gone = NULL;
        ResolvedFrame f;
        pid_t pid;

        ASSERT_OK(symbolizer_new(NULL, &s));
        fixture_wait_start(&c, path);
        pid = c.pid;

        ASSERT_OK(symbolizer_capture(s, pid, &m));
        ASSERT_NOT_NULL(m);

        /* The ELF's own vaddr plus the load base from the maps (PIE) is the
         * address the process itself reports. */
        ASSERT_EQ(runtime_address(pid, path, "fixture_alpha"), child_addr(&c, "fixture_alpha"));
        ASSERT_EQ(runtime_address(pid, path, "fixture_static_gamma"),
                  child_addr(&c, "fixture_static_gamma"));

        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                uint64_t addr = child_addr(&c, names[i]);

                ASSERT_TRUE(process_maps_covers(m, addr));
                assert_resolves(s, m, addr, names[i], module, 0);
                assert_resolves(s, m, addr + 3, names[i], module, 3);
        }

        /* A libc frame. */
        ASSERT_OK(symbolizer_resolve_user(s, m, child_addr(&c, "getpid") + 1, &f));
        ASSERT_NOT_NULL(f.name);
        ASSERT_TRUE(strstr(f.name, "getpid") != NULL);
        ASSERT_STREQ(f.module, "libc.so.6");
        ASSERT_EQ(f.offset, 1);

        /* The process exits (and is reaped): a new capture fails, a refresh
         * keeps the snapshot, and the snapshot still symbolizes. */
        child_stop(&c);
        ASSERT_EQ(kill(pid, 0), -1);
        ASSERT_ERROR(symbolizer_capture(s, pid, &gone), ESRCH);
        ASSERT_NULL(gone);
        ASSERT_ERROR(symbolizer_refresh(s, m), ESRCH);
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                assert_resolves(s, m, child_addr(&c, names[i]) + 1, names[i], module, 1);
        ASSERT_OK(symbolizer_resolve_user(s, m, child_addr(&c, "getpid"), &f));
        ASSERT_STREQ(f.module, "libc.so.6");
        ASSERT_TRUE(f.name && strstr(f.name, "getpid"));
}

/* A C++ process: its functions and a libstdc++ one resolve to demangled
 * names (the addresses from the fixture's .symtab, by mangled name). */
TEST(cxx_demangled) {
        const char *path = getenv("CGPROF_ELF_FIXTURE_CXX");
        _cleanup_(symbolizer_freep) Symbolizer *s = NULL;
        _cleanup_(process_maps_freep) ProcessMaps *m = NULL;
        _cleanup_(child_stop) Child c = {};
        char *argv[] = { (char *) path, (char *) "--wait", NULL };
        static const struct {
                const char *mangled, *shown;
        } fns[] = {
                { "_ZN2ns6WidgetIiE4spinEv", "ns::Widget<int>::spin()" },
                { "_ZNK2ns6WidgetIiEeqERKS1_", "ns::Widget<int>::operator==(ns::Widget<int> const&) const" },
                { "_ZN2ns5twiceIlEET_S1_", "ns::twice<long>(long)" },
        };
        const char *module;
        ResolvedFrame f;

        if (!path || access(path, X_OK) < 0)
                TEST_SKIP_PREREQ("CGPROF_ELF_FIXTURE_CXX not set (no C++ compiler)");

        module = basename_of(path);
        ASSERT_OK(symbolizer_new(NULL, &s));
        child_start(&c, argv);
        ASSERT_OK(symbolizer_capture(s, c.pid, &m));

        for (size_t i = 0; i < ELEMENTSOF(fns); i++) {
                uint64_t addr = runtime_address(c.pid, path, fns[i].mangled);

                assert_resolves(s, m, addr, fns[i].shown, module, 0);
                assert_resolves(s, m, addr + 4, fns[i].shown, module, 4);
        }

        /* libstdc++ (.dynsym only, or a debug file's .symtab). */
        ASSERT_OK(symbolizer_resolve_user(s, m, child_addr(&c, "steady_clock_now"), &f));
        ASSERT_STREQ(f.name, "std::chrono::_V2::steady_clock::now()");
        ASSERT_TRUE(strncmp(f.module, "libstdc++.so", 12) == 0);
        ASSERT_EQ(f.offset, 0);
}

TEST(unresolved) {
        const char *path = env_or_skip("CGPROF_ELF_FIXTURE");
        _cleanup_(symbolizer_freep) Symbolizer *s = NULL;
        _cleanup_(process_maps_freep) ProcessMaps *m = NULL;
        _cleanup_(child_stop) Child c = {};
        ResolvedFrame f;

        ASSERT_OK(symbolizer_new(NULL, &s));
        fixture_wait_start(&c, path);
        ASSERT_OK(symbolizer_capture(s, c.pid, &m));

        /* Not mapped at all. */
        ASSERT_FALSE(process_maps_covers(m, 0x10));
        ASSERT_OK(symbolizer_resolve_user(s, m, 0x10, &f));
        ASSERT_NULL(f.name);
        ASSERT_NULL(f.module);
        ASSERT_EQ(f.offset, 0x10);

        ASSERT_ERROR(symbolizer_capture(s, 0, &m), EINVAL);
        ASSERT_ERROR(symbolizer_resolve_user(s, NULL, 0x10, &f), EINVAL);
}

TEST(stripped_binary_with_debug_dir) {
        const char *stripped = env_or_skip("CGPROF_ELF_FIXTURE_STRIPPED");
        const char *debug = env_or_skip("CGPROF_ELF_FIXTURE_DEBUG");
        _cleanup_(tmp_dir_done) TmpDir t = {}, empty = {};
        _cleanup_(elf_symtab_freep) ElfSymtab *e = NULL;
        _cleanup_close_ int fd = -EBADF;
        char dir[PATH_MAX], file[PATH_MAX + 128];
        const char *bid, *module = basename_of(stripped);

        fd = open(stripped, O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(elf_symtab_load(fd, &e));
        bid = elf_symtab_build_id(e);
        ASSERT_NOT_NULL(bid);
        ASSERT_FALSE(elf_symtab_has_full_symtab(e));

        /* <tmp>/.build-id/xx/yyyy.debug, as a -dbgsym package lays it out. */
        tmp_dir_make(&t);
        tmp_dir_make(&empty);
        snprintf(dir, sizeof(dir), "%s/.build-id", t.path);
        ASSERT_EQ(mkdir(dir, 0755), 0);
        snprintf(dir, sizeof(dir), "%s/.build-id/%.2s", t.path, bid);
        ASSERT_EQ(mkdir(dir, 0755), 0);
        snprintf(file, sizeof(file), "%s/%s.debug", dir, bid + 2);
        copy_file(debug, file, 0644);

        for (int with_debug = 0; with_debug <= 1; with_debug++) {
                SymbolizerOptions opts = { .debug_dir = with_debug ? t.path : empty.path };
                _cleanup_(symbolizer_freep) Symbolizer *s = NULL;
                _cleanup_(process_maps_freep) ProcessMaps *m = NULL;
                _cleanup_(child_stop) Child c = {};
                uint64_t gamma, alpha;
                ResolvedFrame f;

                ASSERT_OK(symbolizer_new(&opts, &s));
                fixture_wait_start(&c, stripped);
                ASSERT_OK(symbolizer_capture(s, c.pid, &m));
                gamma = child_addr(&c, "fixture_static_gamma");
                alpha = child_addr(&c, "fixture_alpha");

                if (with_debug) {
                        assert_resolves(s, m, gamma + 5, "fixture_static_gamma", module, 5);
                        assert_resolves(s, m, alpha, "fixture_alpha", module, 0);
                } else {
                        /* Only .dynsym: neither static nor exported
                         * functions of an executable are there. */
                        ASSERT_OK(symbolizer_resolve_user(s, m, gamma + 5, &f));
                        ASSERT_NULL(f.name);
                        ASSERT_STREQ(f.module, module);
                        /* The file offset, for offline symbolization. */
                        ASSERT_TRUE(f.offset > 0 && f.offset < gamma);
                }
        }
}

/* debuginfod as the symbolizer sees it: a disk cache that has the debug
 * file or not, and requests whose answers the test gives. */
typedef struct FakeDebuginfod {
        const char *debug_path; /* what the cache holds once 'arrived' */
        const char *build_id;
        bool arrived;
        int request_result;
        unsigned requests, opens;
} FakeDebuginfod;

static int fake_open_cached(void *userdata, const char *build_id) {
        FakeDebuginfod *f = userdata;

        f->opens++;
        ASSERT_STREQ(build_id, f->build_id);
        if (!f->arrived)
                return -ENOENT;
        return open(f->debug_path, O_RDONLY | O_CLOEXEC);
}

static int fake_request(void *userdata, const char *build_id) {
        FakeDebuginfod *f = userdata;

        f->requests++;
        ASSERT_STREQ(build_id, f->build_id);
        return f->request_result;
}

static void assert_source(Symbolizer *s, ProcessMaps *m, uint64_t addr, const char *source) {
        ResolvedFrame f = {};

        ASSERT_OK(symbolizer_resolve_user(s, m, addr, &f));
        ASSERT_STREQ(f.symbols_source, source);
}

TEST(debuginfod) {
        const char *stripped = env_or_skip("CGPROF_ELF_FIXTURE_STRIPPED");
        const char *debug = env_or_skip("CGPROF_ELF_FIXTURE_DEBUG");
        _cleanup_(tmp_dir_done) TmpDir empty = {};
        _cleanup_(elf_symtab_freep) ElfSymtab *e = NULL;
        _cleanup_close_ int fd = -EBADF;
        const char *module = basename_of(stripped), *source_before;

        fd = open(stripped, O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(elf_symtab_load(fd, &e));
        ASSERT_NOT_NULL(elf_symtab_build_id(e));
        source_before = elf_symbols_source_to_string(elf_symtab_symbols_source(e));
        tmp_dir_make(&empty);

        /* Asked for once, pending, then arrived: the file takes its symbols,
         * and frames unresolved before resolve now. */
        {
                FakeDebuginfod fake = { .debug_path = debug, .build_id = elf_symtab_build_id(e) };
                SymbolizerOptions opts = { .debug_dir = empty.path };
                _cleanup_(symbolizer_freep) Symbolizer *s = NULL;
                _cleanup_(process_maps_freep) ProcessMaps *m = NULL, *m2 = NULL;
                _cleanup_(child_stop) Child c = {}, c2 = {};
                _cleanup_free_ char *pending = NULL;
                uint64_t gamma;
                ResolvedFrame f;

                ASSERT_OK(symbolizer_new(&opts, &s));
                symbolizer_set_debuginfod(s,
                                          &(SymbolizerDebuginfod){ fake_open_cached, fake_request, &fake });
                fixture_wait_start(&c, stripped);
                ASSERT_OK(symbolizer_capture(s, c.pid, &m));
                ASSERT_EQ(fake.requests, 1);
                ASSERT_EQ(fake.opens, 1); /* the disk cache first */
                gamma = child_addr(&c, "fixture_static_gamma");
                ASSERT_OK(symbolizer_resolve_user(s, m, gamma + 5, &f));
                ASSERT_NULL(f.name);
                ASSERT_TRUE(asprintf(&pending, "%s (debuginfod pending)", source_before) >= 0);
                ASSERT_STREQ(f.symbols_source, pending);
                ASSERT_EQ(symbolizer_generation(s), 0);

                /* Another process of the same file: cached, still pending, not asked again. */
                fixture_wait_start(&c2, stripped);
                ASSERT_OK(symbolizer_capture(s, c2.pid, &m2));
                ASSERT_EQ(fake.requests, 1);

                /* Another build ID's answer changes nothing. */
                ASSERT_EQ(symbolizer_debuginfod_done(s, "00112233", 0), 0);
                ASSERT_EQ(symbolizer_generation(s), 0);

                fake.arrived = true;
                ASSERT_EQ(symbolizer_debuginfod_done(s, fake.build_id, 0), 1);
                ASSERT_EQ(symbolizer_generation(s), 1);
                assert_resolves(s, m, gamma + 5, "fixture_static_gamma", module, 5);
                assert_source(s, m, gamma + 5, "debuginfod");
                assert_source(s, m2, child_addr(&c2, "fixture_static_gamma"), "debuginfod");
                /* A second answer finds nobody waiting. */
                ASSERT_EQ(symbolizer_debuginfod_done(s, fake.build_id, 0), 0);
                ASSERT_EQ(symbolizer_generation(s), 1);
        }

        /* Already in the disk cache: used at once, nothing asked. */
        {
                FakeDebuginfod fake = { .debug_path = debug,
                                        .build_id = elf_symtab_build_id(e),
                                        .arrived = true };
                SymbolizerOptions opts = { .debug_dir = empty.path };
                _cleanup_(symbolizer_freep) Symbolizer *s = NULL;
                _cleanup_(process_maps_freep) ProcessMaps *m = NULL;
                _cleanup_(child_stop) Child c = {};

                ASSERT_OK(symbolizer_new(&opts, &s));
                symbolizer_set_debuginfod(s,
                                          &(SymbolizerDebuginfod){ fake_open_cached, fake_request, &fake });
                fixture_wait_start(&c, stripped);
                ASSERT_OK(symbolizer_capture(s, c.pid, &m));
                ASSERT_EQ(fake.requests, 0);
                assert_resolves(s, m, child_addr(&c, "fixture_alpha"), "fixture_alpha", module, 0);
                assert_source(s, m, child_addr(&c, "fixture_alpha"), "debuginfod");
                ASSERT_EQ(symbolizer_generation(s), 0); /* nothing resolved before changed */
        }

        /* Not taken (a full queue): asked again at the next capture; no
         * server has it: never again; a failure: asked again later. */
        {
                FakeDebuginfod fake = { .debug_path = debug,
                                        .build_id = elf_symtab_build_id(e),
                                        .request_result = -ENOBUFS };
                SymbolizerOptions opts = { .debug_dir = empty.path };
                _cleanup_(symbolizer_freep) Symbolizer *s = NULL;
                _cleanup_(process_maps_freep) ProcessMaps *m1 = NULL, *m2 = NULL, *m3 = NULL, *m4 = NULL,
                                                          *m5 = NULL;
                _cleanup_(child_stop) Child c = {};

                ASSERT_OK(symbolizer_new(&opts, &s));
                symbolizer_set_debuginfod(s,
                                          &(SymbolizerDebuginfod){ fake_open_cached, fake_request, &fake });
                fixture_wait_start(&c, stripped);
                ASSERT_OK(symbolizer_capture(s, c.pid, &m1));
                ASSERT_EQ(fake.requests, 1);
                assert_source(s, m1, child_addr(&c, "fixture_alpha"), source_before);
                fake.request_result = 0;
                ASSERT_OK(symbolizer_capture(s, c.pid, &m2));
                ASSERT_EQ(fake.requests, 2);
                ASSERT_EQ(symbolizer_debuginfod_done(s, fake.build_id, -ETIME), 0);
                assert_source(s, m2, child_addr(&c, "fixture_alpha"), source_before);
                ASSERT_OK(symbolizer_capture(s, c.pid, &m3));
                ASSERT_EQ(fake.requests, 3);
                ASSERT_EQ(symbolizer_debuginfod_done(s, fake.build_id, -ENOENT), 0);
                ASSERT_OK(symbolizer_capture(s, c.pid, &m4));
                ASSERT_EQ(fake.requests, 3);
                /* Known missing when asked: the same. */
                symbolizer_set_debuginfod(s, NULL);
                ASSERT_OK(symbolizer_capture(s, c.pid, &m5));
                ASSERT_EQ(fake.requests, 3);
                ASSERT_EQ(symbolizer_generation(s), 0);
        }
}

TEST(deleted_binary) {
        const char *path = env_or_skip("CGPROF_ELF_FIXTURE");
        _cleanup_(tmp_dir_done) TmpDir t = {};
        _cleanup_(symbolizer_freep) Symbolizer *s = NULL;
        _cleanup_(process_maps_freep) ProcessMaps *m = NULL;
        _cleanup_(child_stop) Child c = {};
        char copy[PATH_MAX];

        if (geteuid() != 0)
                TEST_SKIP("/proc/PID/map_files needs root");

        tmp_dir_make(&t);
        snprintf(copy, sizeof(copy), "%s/upgraded-binary", t.path);
        copy_file(path, copy, 0755);
        fixture_wait_start(&c, copy);
        /* Removed (an upgrade, a cleanup) while it runs. */
        ASSERT_EQ(unlink(copy), 0);

        ASSERT_OK(symbolizer_new(NULL, &s));
        ASSERT_OK(symbolizer_capture(s, c.pid, &m));
        assert_resolves(s, m, child_addr(&c, "fixture_static_delta") + 2, "fixture_static_delta",
                        "upgraded-binary", 2);
}

TEST(cache_shared_and_bounded) {
        const char *path = env_or_skip("CGPROF_ELF_FIXTURE");
        const char *workload = env_or_skip("CGPROF_WORKLOAD");
        SymbolizerOptions opts = { .max_files = 1 };
        _cleanup_(symbolizer_freep) Symbolizer *s = NULL;
        _cleanup_(child_stop) Child a = {}, b = {}, w = {};
        ProcessMaps *ma = NULL, *mb = NULL, *mw = NULL;
        char *wargv[] = { (char *) workload, (char *) "--seconds", (char *) "3", NULL };
        size_t n_a, n_all;

        ASSERT_OK(symbolizer_new(&opts, &s));
        ASSERT_EQ(symbolizer_cached_files(s), 0);

        fixture_wait_start(&a, path);
        ASSERT_OK(symbolizer_capture(s, a.pid, &ma));
        n_a = symbolizer_cached_files(s);
        /* The fixture, libc, the dynamic loader: referenced, so all kept
         * whatever max_files says. */
        ASSERT_TRUE(n_a >= 3);

        /* The same binary again: nothing new to load. */
        fixture_wait_start(&b, path);
        ASSERT_OK(symbolizer_capture(s, b.pid, &mb));
        ASSERT_EQ(symbolizer_cached_files(s), n_a);

        /* Another binary: one more file (its libc and loader are shared). */
        child_start(&w, wargv);
        ASSERT_OK(symbolizer_capture(s, w.pid, &mw));
        n_all = symbolizer_cached_files(s);
        ASSERT_EQ(n_all, n_a + 1);

        /* Resolution works through each snapshot. */
        assert_resolves(s, ma, child_addr(&a, "fixture_alpha"), "fixture_alpha", basename_of(path), 0);
        assert_resolves(s, mb, child_addr(&b, "fixture_beta") + 1, "fixture_beta", basename_of(path), 1);

        /* Dropping the snapshots leaves at most max_files unreferenced. */
        process_maps_free(mw);
        /* The workload's own file is the one unreferenced entry: kept. */
        ASSERT_EQ(symbolizer_cached_files(s), n_all);
        process_maps_free(ma);
        /* b still holds the fixture, libc and the loader. */
        ASSERT_EQ(symbolizer_cached_files(s), n_all);
        process_maps_free(mb);
        ASSERT_TRUE(symbolizer_cached_files(s) <= 1);

        /* And the cache still works after evictions. */
        ASSERT_OK(symbolizer_capture(s, a.pid, &ma));
        assert_resolves(s, ma, child_addr(&a, "fixture_alpha") + 7, "fixture_alpha", basename_of(path), 7);
        process_maps_free(ma);
        ASSERT_TRUE(symbolizer_cached_files(s) <= 1);
}

TEST(snapshot_outlives_symbolizer) {
        const char *path = env_or_skip("CGPROF_ELF_FIXTURE");
        _cleanup_(process_maps_freep) ProcessMaps *m = NULL;
        _cleanup_(child_stop) Child c = {};
        Symbolizer *s = NULL;

        ASSERT_OK(symbolizer_new(NULL, &s));
        fixture_wait_start(&c, path);
        ASSERT_OK(symbolizer_capture(s, c.pid, &m));
        s = symbolizer_free(s);
        ASSERT_NULL(s);

        /* The snapshot keeps its files: resolution needs no Symbolizer. */
        assert_resolves(NULL, m, child_addr(&c, "fixture_alpha") + 1, "fixture_alpha", basename_of(path), 1);
}

TEST(refresh_sees_new_mappings) {
        /* A fake proc root: maps listing the fixture at an address of our
         * choosing, a stat, and no map_files (so the path, through root/, is
         * used). */
        const char *path = env_or_skip("CGPROF_ELF_FIXTURE");
        _cleanup_(tmp_dir_done) TmpDir t = {};
        _cleanup_(symbolizer_freep) Symbolizer *s = NULL;
        _cleanup_(process_maps_freep) ProcessMaps *m = NULL;
        char dir[128], file[256], stat[256], real[PATH_MAX], maps[3 * PATH_MAX];
        const uint64_t base1 = 0x100000000ULL, base2 = 0x200000000ULL;
        uint64_t pgoff, alpha_off, len;
        OracleSym o;
        SymbolizerOptions opts = {};
        ProcessMaps *gone = NULL;
        ResolvedFrame f;

        ASSERT_TRUE(oracle_symbol(path, "fixture_alpha", &o));
        alpha_off = o.value - o.seg_vaddr + o.seg_offset;
        pgoff = o.seg_offset & ~UINT64_C(0xfff);
        len = ((alpha_off - pgoff + o.size) | 0xfff) + 1;
        ASSERT_NOT_NULL(realpath(path, real));

        tmp_dir_make(&t);
        snprintf(dir, sizeof(dir), "%s/4242", t.path);
        ASSERT_EQ(mkdir(dir, 0755), 0);
        snprintf(file, sizeof(file), "%s/root", dir);
        ASSERT_EQ(symlink("/", file), 0);
        snprintf(stat, sizeof(stat), "%s/stat", dir);
        write_file(stat, "4242 (my (odd) comm) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 "
                         "123456 1000000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n");
        snprintf(file, sizeof(file), "%s/maps", dir);
        snprintf(maps, sizeof(maps),
                 "%" PRIx64 "-%" PRIx64 " r--p 00000000 00:00 0          %s\n"
                 "%" PRIx64 "-%" PRIx64 " r-xp %08" PRIx64 " 00:00 0          %s\n"
                 "7f0000000000-7f0000001000 rwxp 00000000 00:00 0 \n",
                 base1 - 0x1000, base1, real, base1, base1 + len, pgoff, real);
        write_file(file, maps);

        opts.proc_root = t.path;
        ASSERT_OK(symbolizer_new(&opts, &s));
        ASSERT_OK(symbolizer_capture(s, 4242, &m));

        ASSERT_FALSE(process_maps_covers(m, base1 - 0x800)); /* not executable */
        assert_resolves(s, m, base1 + alpha_off - pgoff + 2, "fixture_alpha", basename_of(path), 2);

        /* Anonymous executable memory (JIT): covered, nameless. */
        ASSERT_TRUE(process_maps_covers(m, 0x7f0000000010ULL));
        ASSERT_OK(symbolizer_resolve_user(s, m, 0x7f0000000010ULL, &f));
        ASSERT_NULL(f.name);
        ASSERT_NULL(f.module);
        ASSERT_EQ(f.offset, 0x7f0000000010ULL);

        /* A dlopen(): the same file mapped again elsewhere. */
        ASSERT_FALSE(process_maps_covers(m, base2 + alpha_off - pgoff));
        snprintf(maps + strlen(maps), sizeof(maps) - strlen(maps),
                 "%" PRIx64 "-%" PRIx64 " r-xp %08" PRIx64 " 00:00 0          %s (deleted)\n", base2,
                 base2 + len, pgoff, real);
        write_file(file, maps);
        ASSERT_OK(symbolizer_refresh(s, m));
        ASSERT_TRUE(process_maps_covers(m, base2 + alpha_off - pgoff));
        /* Deleted and no map_files: not opened by path (it could be another file). */
        ASSERT_OK(symbolizer_resolve_user(s, m, base2 + alpha_off - pgoff, &f));
        ASSERT_NULL(f.name);
        ASSERT_STREQ(f.module, basename_of(path));
        assert_resolves(s, m, base1 + alpha_off - pgoff, "fixture_alpha", basename_of(path), 0);
        ASSERT_EQ(symbolizer_cached_files(s), 1);

        /* The PID now belongs to another process (another start time):
         * refresh keeps the snapshot. */
        write_file(stat, "4242 (other) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 "
                         "999999 1000000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n");
        ASSERT_ERROR(symbolizer_refresh(s, m), ESRCH);
        ASSERT_TRUE(process_maps_covers(m, base2 + alpha_off - pgoff));

        /* The process is gone: the same. */
        ASSERT_EQ(unlink(file), 0);
        ASSERT_EQ(unlink(stat), 0);
        ASSERT_ERROR(symbolizer_refresh(s, m), ESRCH);
        assert_resolves(s, m, base1 + alpha_off - pgoff, "fixture_alpha", basename_of(path), 0);
        ASSERT_ERROR(symbolizer_capture(s, 4242, &gone), ESRCH);
        ASSERT_NULL(gone);
}

/* The [vdso] mapping of pid (0: ours): its start, and its size. */
static uint64_t vdso_of(pid_t pid, size_t *ret_size) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        char path[64];
        size_t alloc = 0;

        snprintf(path, sizeof(path), "/proc/%d/maps", pid > 0 ? (int) pid : (int) getpid());
        f = fopen(path, "re");
        ASSERT_NOT_NULL(f);
        while (getline(&line, &alloc, f) > 0) {
                uint64_t a, b;

                if (sscanf(line, "%" SCNx64 "-%" SCNx64, &a, &b) == 2 && strstr(line, " [vdso]")) {
                        *ret_size = (size_t) (b - a);
                        return a;
                }
        }
        abort();
}

TEST(vdso) {
        _cleanup_(symbolizer_freep) Symbolizer *s = NULL;
        _cleanup_(process_maps_freep) ProcessMaps *m = NULL;
        _cleanup_(process_maps_freep) ProcessMaps *mc = NULL;
        _cleanup_(child_stop) Child c = {};
        const char *fixture = getenv("CGPROF_ELF_FIXTURE");
        unsigned long base = getauxval(AT_SYSINFO_EHDR);
        const char *names[] = { "__vdso_clock_gettime", "__vdso_gettimeofday", "__vdso_time" };
        uint64_t child_base = 0;
        ResolvedFrame f;
        size_t size;
        Elf *elf;
        bool checked = false;

        if (base == 0)
                TEST_SKIP("no vDSO");
        ASSERT_EQ(vdso_of(0, &size), base);
        ASSERT_OK(symbolizer_new(NULL, &s));
        ASSERT_OK(symbolizer_capture(s, getpid(), &m));
        ASSERT_TRUE(process_maps_covers(m, base));
        if (fixture && access(fixture, X_OK) >= 0) {
                /* Another process's vDSO, elsewhere in its address space. */
                fixture_wait_start(&c, fixture);
                ASSERT_OK(symbolizer_capture(s, c.pid, &mc));
                child_base = vdso_of(c.pid, &size);
        }

        ASSERT_TRUE(elf_version(EV_CURRENT) != EV_NONE);
        elf = elf_memory((char *) base, size);
        ASSERT_NOT_NULL(elf);
        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                OracleSym o;
                uint64_t off;

                if (!oracle_elf(elf, names[i], &o))
                        continue;
                off = o.value - o.seg_vaddr + o.seg_offset;
                ASSERT_OK(symbolizer_resolve_user(s, m, base + off + 1, &f));
                ASSERT_STREQ(f.module, "[vdso]");
                ASSERT_NOT_NULL(f.name);
                /* An alias (clock_gettime) may name it. */
                ASSERT_TRUE(strstr(f.name, names[i] + strlen("__vdso_")) != NULL);
                ASSERT_EQ(f.offset, 1);
                if (mc) {
                        ResolvedFrame g;

                        ASSERT_OK(symbolizer_resolve_user(s, mc, child_base + off + 1, &g));
                        ASSERT_STREQ(g.module, "[vdso]");
                        ASSERT_STREQ(g.name, f.name);
                        ASSERT_EQ(g.offset, 1);
                }
                checked = true;
        }
        elf_end(elf);
        ASSERT_TRUE(checked);
}

TEST(kernel) {
        _cleanup_(tmp_dir_done) TmpDir t = {};
        _cleanup_(symbolizer_freep) Symbolizer *s = NULL, *missing = NULL;
        SymbolizerOptions opts = {};
        char file[PATH_MAX];
        ResolvedFrame f;

        tmp_dir_make(&t);
        snprintf(file, sizeof(file), "%s/kallsyms", t.path);
        write_file(file, "ffffffff81000000 T _text\n"
                         "ffffffff81200000 T schedule\n"
                         "ffffffff81300000 D jiffies\n"
                         "ffffffffc0001000 t ext4_get_block\t[ext4]\n"
                         "ffffffffc0100000 t xfs_bmap\t[xfs]\n");
        opts.kallsyms_path = file;
        ASSERT_OK(symbolizer_new(&opts, &s));

        ASSERT_OK(symbolizer_resolve_kernel(s, 0xffffffff81200010ULL, &f));
        ASSERT_STREQ(f.name, "schedule");
        ASSERT_STREQ(f.module, "[kernel.kallsyms]");
        ASSERT_EQ(f.offset, 0x10);

        ASSERT_OK(symbolizer_resolve_kernel(s, 0xffffffffc0001004ULL, &f));
        ASSERT_STREQ(f.name, "ext4_get_block");
        ASSERT_STREQ(f.module, "[ext4]");
        ASSERT_EQ(f.offset, 4);
        ASSERT_OK(symbolizer_resolve_kernel(s, 0xffffffffc0100000ULL, &f));
        ASSERT_STREQ(f.module, "[xfs]");
        ASSERT_OK(symbolizer_resolve_kernel(s, 0xffffffffc0001008ULL, &f));
        ASSERT_STREQ(f.module, "[ext4]");

        ASSERT_OK(symbolizer_resolve_kernel(s, 0x1000, &f));
        ASSERT_NULL(f.name);
        ASSERT_STREQ(f.module, "[kernel.kallsyms]");
        ASSERT_EQ(f.offset, 0x1000);

        /* No kallsyms: unnamed kernel frames, not an error. */
        snprintf(file, sizeof(file), "%s/none", t.path);
        ASSERT_OK(symbolizer_new(&opts, &missing));
        ASSERT_OK(symbolizer_resolve_kernel(missing, 0xffffffff81200010ULL, &f));
        ASSERT_NULL(f.name);
        ASSERT_STREQ(f.module, "[kernel.kallsyms]");
}

TEST(kernel_misses_do_not_reload) {
        _cleanup_(tmp_dir_done) TmpDir t = {};
        _cleanup_(symbolizer_freep) Symbolizer *s = NULL;
        SymbolizerOptions opts = {};
        char kallsyms[PATH_MAX], modules[PATH_MAX];
        ResolvedFrame f;

        tmp_dir_make(&t);
        snprintf(kallsyms, sizeof(kallsyms), "%s/kallsyms", t.path);
        snprintf(modules, sizeof(modules), "%s/modules", t.path);
        write_file(kallsyms, "ffffffff81000000 T _text\n"
                             "ffffffff81200000 T schedule\n");
        write_file(modules, "ext4 1040384 1 - Live 0xffffffffc0001000\n");
        opts.kallsyms_path = kallsyms;
        opts.modules_path = modules;
        ASSERT_OK(symbolizer_new(&opts, &s));
        ASSERT_EQ(symbolizer_kernel_loads(s), 0);

        /* Addresses in no symbol (below the first one here; in BPF code or
         * section gaps on a real kernel) stay unnamed, and cost no reload. */
        for (unsigned i = 0; i < 5000; i++) {
                ASSERT_OK(symbolizer_resolve_kernel(s, 0xffffffff80000000ULL + i * 16, &f));
                ASSERT_NULL(f.name);
                ASSERT_STREQ(f.module, "[kernel.kallsyms]");
                ASSERT_OK(symbolizer_resolve_kernel(s, 0xffffffff81200000ULL + i, &f));
                ASSERT_STREQ(f.name, "schedule");
        }
        ASSERT_EQ(symbolizer_kernel_loads(s), 1);
}

TEST(kernel_reload_on_module_change) {
        _cleanup_(tmp_dir_done) TmpDir t = {};
        _cleanup_(symbolizer_freep) Symbolizer *s = NULL;
        SymbolizerOptions opts = {};
        char kallsyms[PATH_MAX], modules[PATH_MAX];
        ResolvedFrame f;

        tmp_dir_make(&t);
        snprintf(kallsyms, sizeof(kallsyms), "%s/kallsyms", t.path);
        snprintf(modules, sizeof(modules), "%s/modules", t.path);
        write_file(kallsyms, "ffffffff81000000 T _text\n"
                             "ffffffffc0001000 t ext4_get_block\t[ext4]\n");
        write_file(modules, "ext4 1040384 1 - Live 0xffffffffc0001000\n");
        opts.kallsyms_path = kallsyms;
        opts.modules_path = modules;
        opts.kernel_check_usec = 1; /* compare the modules at every call a microsecond apart */
        ASSERT_OK(symbolizer_new(&opts, &s));

        ASSERT_OK(symbolizer_resolve_kernel(s, 0xffffffffc0100004ULL, &f));
        ASSERT_STREQ(f.name, "ext4_get_block");
        ASSERT_STREQ(f.module, "[ext4]");
        ASSERT_EQ(symbolizer_kernel_loads(s), 1);

        /* kallsyms alone changing (a BPF program, say) reloads nothing... */
        write_file(kallsyms, "ffffffff81000000 T _text\n"
                             "ffffffffc0001000 t ext4_get_block\t[ext4]\n"
                             "ffffffffc0100000 t xfs_bmap\t[xfs]\n");
        ASSERT_EQ(usleep(2000), 0);
        ASSERT_OK(symbolizer_resolve_kernel(s, 0xffffffffc0100004ULL, &f));
        ASSERT_STREQ(f.name, "ext4_get_block");
        ASSERT_EQ(symbolizer_kernel_loads(s), 1);

        /* ...a module loading does. */
        write_file(modules, "xfs 2000000 0 - Live 0xffffffffc0100000\n"
                            "ext4 1040384 1 - Live 0xffffffffc0001000\n");
        ASSERT_EQ(usleep(2000), 0);
        ASSERT_OK(symbolizer_resolve_kernel(s, 0xffffffffc0100004ULL, &f));
        ASSERT_STREQ(f.name, "xfs_bmap");
        ASSERT_STREQ(f.module, "[xfs]");
        ASSERT_EQ(f.offset, 4);
        ASSERT_EQ(symbolizer_kernel_loads(s), 2);
        ASSERT_OK(symbolizer_resolve_kernel(s, 0xffffffffc0001008ULL, &f));
        ASSERT_STREQ(f.name, "ext4_get_block");
        ASSERT_STREQ(f.module, "[ext4]");
        ASSERT_EQ(symbolizer_kernel_loads(s), 2);
}

static void append_file(const char *path, const char *contents) {
        FILE *f = fopen(path, "ae");

        ASSERT_NOT_NULL(f);
        ASSERT_TRUE(fputs(contents, f) >= 0);
        ASSERT_EQ(fclose(f), 0);
}

/* A jitdump file with one JIT_CODE_LOAD, in our byte order. */
static void write_jitdump(const char *path, uint64_t addr, uint64_t size, const char *name) {
        uint32_t hdr[6] = { 0x4A695444, 1, 40, 62, 0, 7 },
                 rec[2] = { 0, (uint32_t) (16 + 40 + strlen(name) + 1) };
        uint64_t hdr2[2] = { 0, 0 }, ts = 0, ids = 0, load[4] = { addr, addr, size, 1 };
        FILE *f = fopen(path, "we");

        ASSERT_NOT_NULL(f);
        ASSERT_EQ(fwrite(hdr, sizeof(hdr), 1, f), 1);
        ASSERT_EQ(fwrite(hdr2, sizeof(hdr2), 1, f), 1);
        ASSERT_EQ(fwrite(rec, sizeof(rec), 1, f), 1);
        ASSERT_EQ(fwrite(&ts, sizeof(ts), 1, f), 1);
        ASSERT_EQ(fwrite(&ids, sizeof(ids), 1, f), 1); /* pid, tid */
        ASSERT_EQ(fwrite(load, sizeof(load), 1, f), 1);
        ASSERT_EQ(fwrite(name, strlen(name) + 1, 1, f), 1);
        ASSERT_EQ(fclose(f), 0);
}

static void assert_jit(Symbolizer *s, ProcessMaps *m, uint64_t addr, const char *name, uint64_t offset,
                       const char *path, const char *source) {
        ResolvedFrame f = { .name = "unset" };

        ASSERT_OK(symbolizer_resolve_user(s, m, addr, &f));
        ASSERT_STREQ(f.name, name);
        ASSERT_STREQ(f.module, path ? "[jit]" : NULL);
        ASSERT_STREQ(f.path, path);
        ASSERT_STREQ(f.symbols_source, source);
        if (name)
                ASSERT_EQ(f.offset, offset);
}

TEST(jit_maps_in_namespace) {
        /* A fake proc root: PID 4243 is PID 7 in its own namespace, and its
         * root has its own /tmp with perf-7.map; the perf-4243.map next to
         * it is not its file. */
        _cleanup_(tmp_dir_done) TmpDir t = {};
        _cleanup_(symbolizer_freep) Symbolizer *s = NULL;
        _cleanup_(process_maps_freep) ProcessMaps *m = NULL;
        char dir[128], file[256], status[256], stat[256], map[256], maps[1024];
        SymbolizerOptions opts = {};

        tmp_dir_make(&t);
        snprintf(dir, sizeof(dir), "%s/4243", t.path);
        ASSERT_EQ(mkdir(dir, 0755), 0);
        snprintf(stat, sizeof(stat), "%s/stat", dir);
        write_file(stat, "4243 (node) S 1 4243 4243 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 "
                         "123456 1000000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n");
        snprintf(status, sizeof(status), "%s/status", dir);
        write_file(status,
                   "Name:\tnode\nTgid:\t4243\nPid:\t4243\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\n"
                   "NSpid:\t4243\t7\nNSsid:\t4243\t1\n");
        snprintf(file, sizeof(file), "%s/root", dir);
        ASSERT_EQ(mkdir(file, 0755), 0);
        snprintf(file, sizeof(file), "%s/root/tmp", dir);
        ASSERT_EQ(mkdir(file, 0755), 0);
        snprintf(file, sizeof(file), "%s/root/work", dir);
        ASSERT_EQ(mkdir(file, 0755), 0);
        snprintf(file, sizeof(file), "%s/root/tmp/perf-4243.map", dir);
        write_file(file, "7f0000000000 1000 wrong file\n");
        snprintf(map, sizeof(map), "%s/root/tmp/perf-7.map", dir);
        write_file(map, "7f0000000000 100 JS:*hotAlpha /app/app.js:2:18\n"
                        "0x00007f0000000100 0x80 long Hot.hotBeta(long)\n"
                        "7f00000002"); /* being written */
        snprintf(file, sizeof(file), "%s/root/work/jit-7.dump", dir);
        write_jitdump(file, 0x7f0000000800, 0x40, "Lambda.run()V");
        snprintf(file, sizeof(file), "%s/maps", dir);
        snprintf(maps, sizeof(maps),
                 "7f0000000000-7f0000001000 rwxp 00000000 00:00 0 \n"
                 "7f0000002000-7f0000003000 r-xp 00000000 00:00 0          [anon:stubs]\n"
                 "7f1000000000-7f1000001000 r-xp 00000000 00:00 0          /work/jit-7.dump\n");
        write_file(file, maps);

        opts.proc_root = t.path;
        ASSERT_OK(symbolizer_new(&opts, &s));
        ASSERT_OK(symbolizer_capture(s, 4243, &m));

        symbolizer_begin_pass(s);
        assert_jit(s, m, 0x7f0000000010, "JS:*hotAlpha /app/app.js:2:18", 0x10, "/tmp/perf-7.map",
                   "perf map");
        assert_jit(s, m, 0x7f000000017f, "long Hot.hotBeta(long)", 0x7f, "/tmp/perf-7.map", "perf map");
        /* The mapped jitdump comes first. */
        assert_jit(s, m, 0x7f0000000804, "Lambda.run()V", 4, "/work/jit-7.dump", "jitdump");
        /* Unnamed JIT code, in a mapping or in none: "[jit]", the file. */
        assert_jit(s, m, 0x7f0000000900, NULL, 0, "/work/jit-7.dump", "jitdump");
        assert_jit(s, m, 0x7f2000000000, NULL, 0, "/work/jit-7.dump", "jitdump");
        assert_jit(s, m, 0x7f0000002010, NULL, 0, "/work/jit-7.dump", "jitdump");

        /* The map grows: read at the next pass, not before. */
        append_file(map, "00 40 JS:*hotGamma /app/app.js:4:18\n");
        assert_jit(s, m, 0x7f0000000210, NULL, 0, "/work/jit-7.dump", "jitdump");
        symbolizer_begin_pass(s);
        assert_jit(s, m, 0x7f0000000210, "JS:*hotGamma /app/app.js:4:18", 0x10, "/tmp/perf-7.map",
                   "perf map");
        /* Recompiled over hotAlpha's start: the later line wins. */
        append_file(map, "7f0000000000 20 JS:*hotAlpha2 /app/app.js:2:18\n");
        symbolizer_begin_pass(s);
        assert_jit(s, m, 0x7f0000000010, "JS:*hotAlpha2 /app/app.js:2:18", 0x10, "/tmp/perf-7.map",
                   "perf map");
        assert_jit(s, m, 0x7f0000000020, "JS:*hotAlpha /app/app.js:2:18", 0x20, "/tmp/perf-7.map",
                   "perf map");

        /* Rewritten (jcmd Compiler.perfmap again): read again from the
         * start; what it no longer lists stays until overwritten. */
        write_file(map, "7f0000000000 20 JS:*hotAlpha3 /app/app.js:2:18\n"
                        "7f0000000400 20 JS:*rewritten /app/app.js:9:1\n");
        symbolizer_begin_pass(s);
        assert_jit(s, m, 0x7f0000000010, "JS:*hotAlpha3 /app/app.js:2:18", 0x10, "/tmp/perf-7.map",
                   "perf map");
        assert_jit(s, m, 0x7f0000000410, "JS:*rewritten /app/app.js:9:1", 0x10, "/tmp/perf-7.map",
                   "perf map");
        assert_jit(s, m, 0x7f0000000210, "JS:*hotGamma /app/app.js:4:18", 0x10, "/tmp/perf-7.map",
                   "perf map");
        /* Rewritten longer, new code in the middle: noticed too. */
        write_file(map, "7f0000000000 20 JS:*hotAlpha4 /app/app.js:2:18\n"
                        "7f0000000100 20 JS:*inserted /app/app.js:3:1\n"
                        "7f0000000400 20 JS:*rewritten /app/app.js:9:1\n"
                        "7f0000000500 20 JS:*more /app/app.js:10:1\n");
        symbolizer_begin_pass(s);
        assert_jit(s, m, 0x7f0000000010, "JS:*hotAlpha4 /app/app.js:2:18", 0x10, "/tmp/perf-7.map",
                   "perf map");
        assert_jit(s, m, 0x7f0000000510, "JS:*more /app/app.js:10:1", 0x10, "/tmp/perf-7.map", "perf map");
        assert_jit(s, m, 0x7f0000000110, "JS:*inserted /app/app.js:3:1", 0x10, "/tmp/perf-7.map",
                   "perf map");

        /* The process exits: what was read stays; the open file is still
         * read for what it gained. */
        ASSERT_EQ(unlink(stat), 0);
        ASSERT_EQ(unlink(status), 0);
        append_file(map, "7f0000000500 10 late\n");
        ASSERT_EQ(unlink(map), 0);
        symbolizer_begin_pass(s);
        assert_jit(s, m, 0x7f0000000010, "JS:*hotAlpha4 /app/app.js:2:18", 0x10, "/tmp/perf-7.map",
                   "perf map");
        assert_jit(s, m, 0x7f0000000504, "late", 4, "/tmp/perf-7.map", "perf map");

        /* Without a Symbolizer (it is gone), still resolved. */
        s = symbolizer_free(s);
        assert_jit(NULL, m, 0x7f0000000804, "Lambda.run()V", 4, "/work/jit-7.dump", "jitdump");
}

TEST(jit_maps_no_symlinks) {
        /* A perf map that is a symlink, and a /tmp that is one: neither is
         * followed, and the process's anonymous code stays unnamed. */
        _cleanup_(tmp_dir_done) TmpDir t = {};
        _cleanup_(symbolizer_freep) Symbolizer *s = NULL;
        char dir[128], file[256], target[256];
        SymbolizerOptions opts = {};

        tmp_dir_make(&t);
        opts.proc_root = t.path;
        ASSERT_OK(symbolizer_new(&opts, &s));
        for (int pid = 4244; pid <= 4245; pid++) {
                _cleanup_(process_maps_freep) ProcessMaps *m = NULL;

                snprintf(dir, sizeof(dir), "%s/%d", t.path, pid);
                ASSERT_EQ(mkdir(dir, 0755), 0);
                snprintf(file, sizeof(file), "%s/stat", dir);
                write_file(
                        file,
                        "1 (node) S 1 1 1 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 "
                        "123456 1000000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n");
                snprintf(file, sizeof(file), "%s/status", dir);
                write_file(file, "Name:\tnode\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nGroups:\nNSpid:\t1\n");
                snprintf(file, sizeof(file), "%s/maps", dir);
                write_file(file, "7f0000000000-7f0000001000 rwxp 00000000 00:00 0 \n");
                snprintf(file, sizeof(file), "%s/root", dir);
                ASSERT_EQ(mkdir(file, 0755), 0);
                snprintf(target, sizeof(target), "%s/elsewhere", dir);
                ASSERT_EQ(mkdir(target, 0755), 0);
                snprintf(file, sizeof(file), "%s/elsewhere/perf-1.map", dir);
                write_file(file, "7f0000000000 100 secret\n");
                if (pid == 4244) {
                        snprintf(file, sizeof(file), "%s/root/tmp", dir);
                        ASSERT_EQ(mkdir(file, 0755), 0);
                        snprintf(target, sizeof(target), "%s/elsewhere/perf-1.map", dir);
                        snprintf(file, sizeof(file), "%s/root/tmp/perf-1.map", dir);
                } else
                        snprintf(file, sizeof(file), "%s/root/tmp", dir);
                ASSERT_EQ(symlink(target, file), 0);

                ASSERT_OK(symbolizer_capture(s, pid, &m));
                symbolizer_begin_pass(s);
                assert_jit(s, m, 0x7f0000000010, NULL, 0, NULL, "none");
        }
}

TEST(jit_maps_unreadable) {
        /* A perf map the process's owner could not read (a hard link or a
         * bind mount to someone else's file): not read, the code stays
         * unnamed; once the owner could read it, it is read. */
        _cleanup_(tmp_dir_done) TmpDir t = {};
        _cleanup_(symbolizer_freep) Symbolizer *s = NULL;
        _cleanup_(process_maps_freep) ProcessMaps *m = NULL;
        char dir[128], file[256], map[256], status[512];
        SymbolizerOptions opts = {};
        unsigned other = (unsigned) getuid() + 1; /* not the files' owner, not root */

        tmp_dir_make(&t);
        opts.proc_root = t.path;
        ASSERT_OK(symbolizer_new(&opts, &s));
        snprintf(dir, sizeof(dir), "%s/4246", t.path);
        ASSERT_EQ(mkdir(dir, 0755), 0);
        snprintf(file, sizeof(file), "%s/stat", dir);
        write_file(file, "1 (node) S 1 1 1 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 "
                         "123456 1000000 100 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n");
        snprintf(file, sizeof(file), "%s/status", dir);
        snprintf(status, sizeof(status),
                 "Name:\tnode\nUid:\t%u\t%u\t%u\t%u\nGid:\t%u\t%u\t%u\t%u\nGroups:\t%u\n"
                 "NSpid:\t1\n",
                 other, other, other, other, other, other, other, other, other);
        write_file(file, status);
        snprintf(file, sizeof(file), "%s/maps", dir);
        write_file(file, "7f0000000000-7f0000001000 rwxp 00000000 00:00 0 \n");
        snprintf(file, sizeof(file), "%s/root", dir);
        ASSERT_EQ(mkdir(file, 0755), 0);
        snprintf(file, sizeof(file), "%s/root/tmp", dir);
        ASSERT_EQ(mkdir(file, 01777), 0);
        snprintf(map, sizeof(map), "%s/root/tmp/perf-1.map", dir);
        write_file(map, "7f0000000000 100 secret\n");
        ASSERT_EQ(chmod(map, 0600), 0);

        ASSERT_OK(symbolizer_capture(s, 4246, &m));
        symbolizer_begin_pass(s);
        assert_jit(s, m, 0x7f0000000010, NULL, 0, NULL, "none");

        /* Readable, in a /tmp it could not search: not read either. */
        ASSERT_EQ(chmod(map, 0644), 0);
        ASSERT_EQ(chmod(file, 0700), 0);
        symbolizer_begin_pass(s);
        assert_jit(s, m, 0x7f0000000010, NULL, 0, NULL, "none");

        ASSERT_EQ(chmod(file, 01777), 0);
        symbolizer_begin_pass(s);
        assert_jit(s, m, 0x7f0000000010, "secret", 0x10, "/tmp/perf-1.map", "perf map");
}

DEFINE_TEST_MAIN
