/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "elf-symtab.h"
#include "elf-test.h"
#include "tests.h"

static const char *env_or_skip(const char *name) {
        const char *v = getenv(name);

        if (!v || access(v, R_OK) < 0)
                TEST_SKIP("%s not set or not readable (run through meson test)", name);
        return v;
}

static ElfSymtab *load_path(const char *path) {
        _cleanup_close_ int fd = -EBADF;
        ElfSymtab *s = NULL;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(elf_symtab_load(fd, &s));
        ASSERT_NOT_NULL(s);
        return s;
}

/* The test's own reading of the ELF file (an oracle independent of the
 * code under test): a symbol's value and size, searched by name in .symtab
 * and .dynsym. Returns false when not found. */
static bool oracle_symbol(const char *path, const char *name, uint64_t *ret_value, uint64_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        bool found;
        Elf *elf;

        elf = test_elf_open(path, &fd);
        found = test_elf_find_symbol(elf, name, ret_value, ret_size);
        elf_end(elf);
        return found;
}

TEST(full_symtab) {
        const char *path = env_or_skip("CGPROF_ELF_FIXTURE");
        _cleanup_(elf_symtab_freep) ElfSymtab *s = load_path(path);
        static const char *const names[] = {
                "fixture_alpha", "fixture_beta", "fixture_static_gamma", "fixture_static_delta", "main",
        };
        const char *bid;
        uint64_t off;

        ASSERT_TRUE(elf_symtab_has_full_symtab(s));
        ASSERT_TRUE(elf_symtab_count(s) >= ELEMENTSOF(names));

        bid = elf_symtab_build_id(s);
        ASSERT_NOT_NULL(bid);
        ASSERT_EQ(strlen(bid), 40); /* sha1 */
        ASSERT_EQ(strspn(bid, "0123456789abcdef"), 40);

        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                uint64_t value, size;
                const char *n;

                ASSERT_TRUE(oracle_symbol(path, names[i], &value, &size));
                ASSERT_TRUE(size > 1);

                ASSERT_STREQ(elf_symtab_lookup(s, value, &off), names[i]);
                ASSERT_EQ(off, 0);
                ASSERT_STREQ(elf_symtab_lookup(s, value + 1, &off), names[i]);
                ASSERT_EQ(off, 1);
                ASSERT_STREQ(elf_symtab_lookup(s, value + size - 1, &off), names[i]);
                ASSERT_EQ(off, size - 1);

                /* Just past its end: some other function, or nothing. */
                n = elf_symtab_lookup(s, value + size, NULL);
                ASSERT_FALSE(streq_ptr(n, names[i]));
        }

        /* Below every symbol, and far above. */
        off = 4242;
        ASSERT_NULL(elf_symtab_lookup(s, 0, &off));
        ASSERT_NULL(elf_symtab_lookup(s, 1, &off));
        ASSERT_NULL(elf_symtab_lookup(s, UINT64_MAX, &off));
        ASSERT_EQ(off, 4242);
}

/* The end of the allocated section holding vaddr, per the oracle. */
static uint64_t oracle_section_end(const char *path, uint64_t vaddr) {
        _cleanup_close_ int fd = -EBADF;
        Elf_Scn *scn = NULL;
        uint64_t end = 0;
        Elf *elf;

        elf = test_elf_open(path, &fd);
        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr shdr;

                ASSERT_NOT_NULL(gelf_getshdr(scn, &shdr));
                if ((shdr.sh_flags & SHF_ALLOC) && vaddr >= shdr.sh_addr &&
                    vaddr < shdr.sh_addr + shdr.sh_size) {
                        end = shdr.sh_addr + shdr.sh_size;
                        break;
                }
        }
        elf_end(elf);
        ASSERT_TRUE(end > 0);
        return end;
}

TEST(unsized_symbols) {
        /* crti.o's _init and _fini are FUNC symbols of size 0, alone in
         * their sections: they reach to the end of the section, no further. */
        const char *path = env_or_skip("CGPROF_ELF_FIXTURE");
        _cleanup_(elf_symtab_freep) ElfSymtab *s = load_path(path);
        static const char *const names[] = { "_init", "_fini" };
        size_t checked = 0;

        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                uint64_t value, size, end, off;

                if (!oracle_symbol(path, names[i], &value, &size) || size != 0)
                        continue;
                end = oracle_section_end(path, value);
                ASSERT_STREQ(elf_symtab_lookup(s, value + 1, &off), names[i]);
                ASSERT_EQ(off, 1);
                ASSERT_STREQ(elf_symtab_lookup(s, end - 1, &off), names[i]);
                ASSERT_EQ(off, end - 1 - value);
                ASSERT_FALSE(streq_ptr(elf_symtab_lookup(s, end, NULL), names[i]));
                ASSERT_FALSE(streq_ptr(elf_symtab_lookup(s, end + 0x10000, NULL), names[i]));
                checked++;
        }
        if (checked == 0)
                fprintf(stderr, "no unsized _init/_fini in the fixture, nothing checked\n");
}

TEST(stripped_has_dynsym_only) {
        const char *path = env_or_skip("CGPROF_ELF_FIXTURE");
        const char *stripped_path = env_or_skip("CGPROF_ELF_FIXTURE_STRIPPED");
        _cleanup_(elf_symtab_freep) ElfSymtab *full = load_path(path);
        _cleanup_(elf_symtab_freep) ElfSymtab *stripped = load_path(stripped_path);
        uint64_t value, size;

        ASSERT_FALSE(elf_symtab_has_full_symtab(stripped));
        ASSERT_STREQ(elf_symtab_build_id(stripped), elf_symtab_build_id(full));
        /* Its .dynsym defines no function: no symbols at all. */
        ASSERT_EQ(elf_symtab_symbols_source(stripped), ELF_SYMBOLS_NONE);
        ASSERT_OK(elf_symtab_minidebuginfo_error(stripped));

        ASSERT_FALSE(oracle_symbol(stripped_path, "fixture_static_gamma", &value, &size));
        ASSERT_TRUE(oracle_symbol(path, "fixture_static_gamma", &value, &size));
        ASSERT_FALSE(streq_ptr(elf_symtab_lookup(stripped, value + 1, NULL), "fixture_static_gamma"));
        ASSERT_TRUE(oracle_symbol(path, "fixture_alpha", &value, &size));
        ASSERT_FALSE(streq_ptr(elf_symtab_lookup(stripped, value + 1, NULL), "fixture_alpha"));
}

TEST(debug_file) {
        const char *path = env_or_skip("CGPROF_ELF_FIXTURE");
        const char *stripped_path = env_or_skip("CGPROF_ELF_FIXTURE_STRIPPED");
        const char *debug_path = env_or_skip("CGPROF_ELF_FIXTURE_DEBUG");
        _cleanup_(elf_symtab_freep) ElfSymtab *stripped = load_path(stripped_path);
        _cleanup_(elf_symtab_freep) ElfSymtab *debug = load_path(debug_path);
        _cleanup_(elf_symtab_freep) ElfSymtab *full = load_path(path);
        uint64_t value, size, off, before, after;
        size_t n_debug;

        ASSERT_TRUE(elf_symtab_has_full_symtab(debug));
        ASSERT_NOT_NULL(elf_symtab_build_id(debug));
        ASSERT_STREQ(elf_symtab_build_id(debug), elf_symtab_build_id(stripped));
        ASSERT_STREQ(elf_symtab_build_id(debug), elf_symtab_build_id(full));
        ASSERT_EQ(elf_symtab_count(debug), elf_symtab_count(full));

        /* Segments of the stripped file, before and after. */
        ASSERT_TRUE(oracle_symbol(path, "fixture_static_gamma", &value, &size));
        ASSERT_OK(elf_symtab_offset_to_vaddr(stripped, 0, &before));

        n_debug = elf_symtab_count(debug);
        ASSERT_EQ(elf_symtab_symbols_source(debug), ELF_SYMBOLS_SYMTAB);
        ASSERT_OK(elf_symtab_take_symbols(stripped, debug));
        ASSERT_EQ(elf_symtab_count(stripped), n_debug);
        ASSERT_EQ(elf_symtab_symbols_source(stripped), ELF_SYMBOLS_DEBUG_FILE);
        ASSERT_STREQ(elf_symbols_source_to_string(elf_symtab_symbols_source(stripped)), "debug file");
        ASSERT_TRUE(elf_symtab_has_full_symtab(stripped));
        ASSERT_EQ(elf_symtab_count(debug), 0);
        /* One fetched from debuginfod says so. */
        ASSERT_OK(elf_symtab_set_symbols_source(stripped, ELF_SYMBOLS_DEBUGINFOD));
        ASSERT_STREQ(elf_symbols_source_to_string(elf_symtab_symbols_source(stripped)), "debuginfod");
        ASSERT_ERROR(elf_symtab_set_symbols_source(stripped, _ELF_SYMBOLS_SOURCE_MAX), EINVAL);
        ASSERT_OK(elf_symtab_set_symbols_source(stripped, ELF_SYMBOLS_DEBUG_FILE));

        ASSERT_STREQ(elf_symtab_lookup(stripped, value + 2, &off), "fixture_static_gamma");
        ASSERT_EQ(off, 2);
        ASSERT_TRUE(oracle_symbol(path, "fixture_static_delta", &value, &size));
        ASSERT_STREQ(elf_symtab_lookup(stripped, value, &off), "fixture_static_delta");
        ASSERT_EQ(off, 0);

        ASSERT_OK(elf_symtab_offset_to_vaddr(stripped, 0, &after));
        ASSERT_EQ(before, after);
        ASSERT_NOT_NULL(elf_symtab_build_id(stripped));
}

TEST(take_symbols_refuses_other_build) {
        const char *stripped_path = env_or_skip("CGPROF_ELF_FIXTURE_STRIPPED");
        const char *workload = env_or_skip("CGPROF_WORKLOAD");
        _cleanup_(elf_symtab_freep) ElfSymtab *stripped = load_path(stripped_path);
        _cleanup_(elf_symtab_freep) ElfSymtab *other = NULL;

        other = load_path(workload);
        ASSERT_NOT_NULL(elf_symtab_build_id(other));
        ASSERT_ERROR(elf_symtab_take_symbols(stripped, other), EINVAL);
        ASSERT_FALSE(elf_symtab_has_full_symtab(stripped));
        ASSERT_TRUE(elf_symtab_count(other) > 0);
}

/* PLT stubs, with objdump's synthetic "NAME@plt" labels (binutils) as the
 * oracle: every labelled stub is named the same, at its first byte and
 * inside it; the first stub of a section objdump gives no name of its own to
 * (PLT0, the lazy-binding push stubs of an IBT .plt) is named after its
 * section. Returns how many stubs were checked. */
static size_t check_plt(const char *path, const ElfSymtab *s) {
        _cleanup_free_ char *cmd = NULL;
        char line[512], section[64] = "";
        size_t checked = 0;
        bool first_in_section = false;
        FILE *f;

        ASSERT_TRUE(asprintf(&cmd, "objdump -d -j .plt -j .plt.sec -j .plt.got '%s'", path) > 0);
        f = popen(cmd, "r");
        ASSERT_NOT_NULL(f);
        while (fgets(line, sizeof(line), f)) {
                unsigned long long addr;
                char label[256];
                uint64_t off;

                if (sscanf(line, "Disassembly of section %63[^:]:", section) == 1) {
                        first_in_section = true;
                        continue;
                }
                if (sscanf(line, "%llx <%255[^>]>:", &addr, label) != 2)
                        continue;
                if (strstr(label, "@plt") && !strchr(label, '+') && !strchr(label, '-')) {
                        ASSERT_STREQ(elf_symtab_lookup(s, addr, &off), label);
                        ASSERT_EQ(off, 0);
                        ASSERT_STREQ(elf_symtab_lookup(s, addr + 5, &off), label);
                        ASSERT_EQ(off, 5);
                        checked++;
                } else if (first_in_section)
                        ASSERT_STREQ(elf_symtab_lookup(s, addr, NULL), section);
                first_in_section = false;
        }
        ASSERT_EQ(pclose(f), 0);
        return checked;
}

TEST(plt_stubs) {
#if !defined(__x86_64__)
        TEST_SKIP("PLT stubs are named per function on x86-64 only");
#endif
        const char *path = env_or_skip("CGPROF_ELF_FIXTURE");
        const char *stripped_path = env_or_skip("CGPROF_ELF_FIXTURE_STRIPPED");
        const char *debug_path = env_or_skip("CGPROF_ELF_FIXTURE_DEBUG");
        const char *ibt_path = env_or_skip("CGPROF_ELF_FIXTURE_IBT");
        _cleanup_(elf_symtab_freep) ElfSymtab *full = load_path(path);
        _cleanup_(elf_symtab_freep) ElfSymtab *stripped = load_path(stripped_path);
        _cleanup_(elf_symtab_freep) ElfSymtab *debug = load_path(debug_path);
        _cleanup_(elf_symtab_freep) ElfSymtab *ibt = load_path(ibt_path);
        size_t n;

        /* .plt (lazy binding) and .plt.got (__cxa_finalize), from .symtab's
         * file and from a stripped one: the names come from .dynsym. */
        n = check_plt(path, full);
        ASSERT_TRUE(n >= 8);
        ASSERT_EQ(check_plt(stripped_path, stripped), n);

        /* A separate debug file replaces the symbols, not the stubs. */
        ASSERT_OK(elf_symtab_take_symbols(stripped, debug));
        ASSERT_EQ(check_plt(path, stripped), n);

        /* IBT: the calls go through .plt.sec; .plt only binds lazily. */
        ASSERT_EQ(check_plt(ibt_path, ibt), n);
}

/* The address of objdump's "label>:" in the PLT sections of path, 0 if none. */
static uint64_t objdump_plt_label(const char *path, const char *label) {
        _cleanup_free_ char *cmd = NULL;
        char line[512], want[300];
        uint64_t found = 0;
        FILE *f;

        snprintf(want, sizeof(want), "<%s>:", label);
        ASSERT_TRUE(asprintf(&cmd, "objdump -d -j .plt -j .plt.sec -j .plt.got '%s'", path) > 0);
        f = popen(cmd, "r");
        ASSERT_NOT_NULL(f);
        while (fgets(line, sizeof(line), f)) {
                unsigned long long addr;

                if (strstr(line, want) && sscanf(line, "%llx <", &addr) == 1)
                        found = addr;
        }
        ASSERT_EQ(pclose(f), 0);
        return found;
}

/* C++ names come out demangled, once: the second lookup of a symbol returns
 * the very string the first one made. The fixture's own functions from its
 * .symtab (the oracle gives their mangled names' addresses), and the PLT stub
 * of a libstdc++ function. */
TEST(cxx_demangled) {
        const char *path = getenv("CGPROF_ELF_FIXTURE_CXX");
        _cleanup_(elf_symtab_freep) ElfSymtab *s = NULL;
        static const struct {
                const char *mangled, *shown;
        } fns[] = {
                { "_ZN2ns6WidgetIiE4spinEv", "ns::Widget<int>::spin()" },
                { "_ZNK2ns6WidgetIiEeqERKS1_", "ns::Widget<int>::operator==(ns::Widget<int> const&) const" },
                { "_ZN2ns5twiceIlEET_S1_", "ns::twice<long>(long)" },
                { "main", "main" },
        };
        const char *first, *again;
        uint64_t plt, off;

        if (!path || access(path, X_OK) < 0)
                TEST_SKIP_PREREQ("CGPROF_ELF_FIXTURE_CXX not set (no C++ compiler)");

        s = load_path(path);
        ASSERT_TRUE(elf_symtab_has_full_symtab(s));
        for (size_t i = 0; i < ELEMENTSOF(fns); i++) {
                uint64_t value, size;

                ASSERT_TRUE(oracle_symbol(path, fns[i].mangled, &value, &size));
                ASSERT_TRUE(size > 1);
                first = elf_symtab_lookup(s, value, &off);
                ASSERT_STREQ(first, fns[i].shown);
                ASSERT_EQ(off, 0);
                again = elf_symtab_lookup(s, value + size - 1, &off);
                ASSERT_TRUE(again == first);
                ASSERT_EQ(off, size - 1);
        }

#if defined(__x86_64__)
        /* Called through .plt.got (its address is taken too) or .plt. */
        plt = objdump_plt_label(path, "_ZNSt6chrono3_V212steady_clock3nowEv@plt");
        ASSERT_TRUE(plt != 0);
        first = elf_symtab_lookup(s, plt, &off);
        ASSERT_STREQ(first, "std::chrono::_V2::steady_clock::now()@plt");
        ASSERT_EQ(off, 0);
        ASSERT_TRUE(elf_symtab_lookup(s, plt + 1, NULL) == first);
        /* C names of the same PLT stay as they are. */
        plt = objdump_plt_label(path, "printf@plt");
        ASSERT_TRUE(plt != 0);
        ASSERT_STREQ(elf_symtab_lookup(s, plt, NULL), "printf@plt");
#else
        (void) plt;
#endif
}

TEST(offset_to_vaddr) {
        const char *path = env_or_skip("CGPROF_ELF_FIXTURE");
        _cleanup_(elf_symtab_freep) ElfSymtab *s = load_path(path);
        _cleanup_close_ int fd = -EBADF;
        uint64_t max_end = 0, vaddr;
        size_t phnum, n_load = 0;
        Elf *elf;

        fd = open(path, O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_TRUE(elf_version(EV_CURRENT) != EV_NONE);
        elf = elf_begin(fd, ELF_C_READ, NULL);
        ASSERT_NOT_NULL(elf);
        ASSERT_EQ(elf_getphdrnum(elf, &phnum), 0);

        for (size_t i = 0; i < phnum; i++) {
                GElf_Phdr p;

                ASSERT_NOT_NULL(gelf_getphdr(elf, (int) i, &p));
                if (p.p_type != PT_LOAD || p.p_filesz == 0)
                        continue;
                n_load++;
                ASSERT_OK(elf_symtab_offset_to_vaddr(s, p.p_offset, &vaddr));
                ASSERT_EQ(vaddr, p.p_vaddr);
                ASSERT_OK(elf_symtab_offset_to_vaddr(s, p.p_offset + p.p_filesz - 1, &vaddr));
                ASSERT_EQ(vaddr, p.p_vaddr + p.p_filesz - 1);
                if (p.p_flags & PF_X) {
                        uint64_t value, size;

                        /* The text: a function's file offset maps to its vaddr. */
                        ASSERT_TRUE(oracle_symbol(path, "fixture_alpha", &value, &size));
                        ASSERT_TRUE(value >= p.p_vaddr && value < p.p_vaddr + p.p_filesz);
                        ASSERT_OK(elf_symtab_offset_to_vaddr(s, value - p.p_vaddr + p.p_offset + 3, &vaddr));
                        ASSERT_EQ(vaddr, value + 3);
                        ASSERT_STREQ(elf_symtab_lookup(s, vaddr, NULL), "fixture_alpha");
                }
                max_end = MAX(max_end, p.p_offset + p.p_filesz);
        }
        elf_end(elf);

        ASSERT_TRUE(n_load >= 2);
        vaddr = 4242;
        ASSERT_ERROR(elf_symtab_offset_to_vaddr(s, max_end + 0x100000, &vaddr), ENOENT);
        ASSERT_EQ(vaddr, 4242);
}

TEST(shared_library) {
        /* libc: a shared library, usually without .symtab; getpid() taken
         * from our own process, less libc's load bias, is its vaddr. */
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        _cleanup_(elf_symtab_freep) ElfSymtab *s = NULL;
        char path[512] = "";
        uint64_t fn = (uint64_t) (uintptr_t) getpid, start = 0, pgoff = 0, vaddr, off;
        size_t alloc = 0;
        const char *name;

        f = fopen("/proc/self/maps", "re");
        ASSERT_NOT_NULL(f);
        while (getline(&line, &alloc, f) > 0) {
                uint64_t a, b, o;
                char perms[8];
                int pos = 0;

                if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*u %n", &a, &b, perms, &o,
                           &pos) < 4 ||
                    pos == 0)
                        continue;
                if (fn >= a && fn < b && perms[2] == 'x') {
                        start = a;
                        pgoff = o;
                        snprintf(path, sizeof(path), "%s", line + pos);
                        path[strcspn(path, "\n")] = '\0';
                        break;
                }
        }
        if (path[0] != '/') {
                /* TEST_SKIP() runs no cleanups. */
                fclose(TAKE_PTR(f));
                free(TAKE_PTR(line));
                TEST_SKIP("getpid() not in a file mapping");
        }

        s = load_path(path);
        ASSERT_NOT_NULL(elf_symtab_build_id(s));
        ASSERT_TRUE(elf_symtab_count(s) > 100);
        ASSERT_OK(elf_symtab_offset_to_vaddr(s, fn - start + pgoff, &vaddr));
        name = elf_symtab_lookup(s, vaddr + 1, &off);
        ASSERT_NOT_NULL(name);
        fprintf(stderr, "getpid in %s: %s+%" PRIu64 "\n", path, name, off);
        ASSERT_TRUE(strstr(name, "getpid") != NULL);
        ASSERT_EQ(off, 1);
}

TEST(vdso_from_memory) {
        _cleanup_(elf_symtab_freep) ElfSymtab *s = NULL;
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        unsigned long base = getauxval(AT_SYSINFO_EHDR);
        uint64_t start = 0, end = 0, off;
        size_t alloc = 0;

        if (base == 0)
                TEST_SKIP("no vDSO");
        f = fopen("/proc/self/maps", "re");
        ASSERT_NOT_NULL(f);
        while (getline(&line, &alloc, f) > 0)
                if (strstr(line, "[vdso]")) {
                        ASSERT_EQ(sscanf(line, "%" SCNx64 "-%" SCNx64, &start, &end), 2);
                        break;
                }
        ASSERT_EQ(start, base);

        ASSERT_OK(elf_symtab_load_memory((const void *) base, end - start, &s));
        ASSERT_TRUE(elf_symtab_count(s) > 0);
        ASSERT_FALSE(elf_symtab_has_full_symtab(s));
        /* Something in its text is a function (e.g. __vdso_clock_gettime). */
        for (uint64_t o = 0; o < end - start; o += 16) {
                uint64_t vaddr;
                const char *n;

                if (elf_symtab_offset_to_vaddr(s, o, &vaddr) < 0)
                        continue;
                n = elf_symtab_lookup(s, vaddr, &off);
                if (n && strstr(n, "gettime")) {
                        fprintf(stderr, "vdso: %s\n", n);
                        return;
                }
        }
        ASSERT_TRUE(false);
}

/* ---- MiniDebugInfo ---- */

/* Checks every function symbol ("T"/"t") nm finds in the unstripped
 * original against the table loaded from its MiniDebugInfo copy: found at
 * its address (offset 0), under its name or an alias of it (a name nm
 * gives the same address). Returns how many were checked. */
static size_t check_against_nm(const char *original, const ElfSymtab *s) {
        _cleanup_free_ char *cmd = NULL, *line = NULL;
        size_t n_line = 0, checked = 0;
        struct {
                char name[256];
                char type;
                uint64_t addr;
        } *syms = NULL;
        size_t n = 0, allocated = 0;
        FILE *f;

        ASSERT_TRUE(asprintf(&cmd, "nm --defined-only --format=posix '%s'", original) > 0);
        f = popen(cmd, "r");
        ASSERT_NOT_NULL(f);
        while (getline(&line, &n_line, f) > 0) {
                char name[256], type;
                unsigned long long addr;

                if (sscanf(line, "%255s %c %llx", name, &type, &addr) != 3)
                        continue;
                if (n == allocated) {
                        allocated = allocated ? allocated * 2 : 64;
                        syms = reallocarray(syms, allocated, sizeof(*syms));
                        ASSERT_NOT_NULL(syms);
                }
                snprintf(syms[n].name, sizeof(syms[n].name), "%s", name);
                syms[n].type = type;
                syms[n].addr = addr;
                n++;
        }
        ASSERT_EQ(pclose(f), 0);

        for (size_t i = 0; i < n; i++) {
                const char *found;
                uint64_t off = 4242;
                bool alias = false;

                if ((syms[i].type != 'T' && syms[i].type != 't') || syms[i].addr == 0)
                        continue;
                found = elf_symtab_lookup(s, syms[i].addr, &off);
                if (!found) {
                        fprintf(stderr, "%s at 0x%" PRIx64 " not found\n", syms[i].name, syms[i].addr);
                        ASSERT_TRUE(false);
                }
                for (size_t k = 0; k < n && !alias; k++)
                        alias = syms[k].addr == syms[i].addr && streq(syms[k].name, found);
                if (!alias)
                        fprintf(stderr, "%s at 0x%" PRIx64 " resolved to %s\n", syms[i].name, syms[i].addr,
                                found);
                ASSERT_TRUE(alias);
                ASSERT_EQ(off, 0);
                checked++;
        }
        free(syms);
        return checked;
}

/* The contents of a section of the file at path, malloc()ed. */
static void *read_section(const char *path, const char *name, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        Elf_Scn *scn = NULL;
        void *copy = NULL;
        size_t shstrndx;
        Elf *elf;

        elf = test_elf_open(path, &fd);
        ASSERT_TRUE(elf_getshdrstrndx(elf, &shstrndx) == 0);
        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr shdr;
                Elf_Data *data;

                ASSERT_NOT_NULL(gelf_getshdr(scn, &shdr));
                if (!streq_ptr(elf_strptr(elf, shstrndx, shdr.sh_name), name))
                        continue;
                data = elf_rawdata(scn, NULL);
                ASSERT_NOT_NULL(data);
                copy = malloc(data->d_size);
                ASSERT_NOT_NULL(copy);
                memcpy(copy, data->d_buf, data->d_size);
                *ret_size = data->d_size;
                break;
        }
        elf_end(elf);
        ASSERT_NOT_NULL(copy);
        return copy;
}

TEST(minidebuginfo) {
        const char *path = env_or_skip("CGPROF_ELF_FIXTURE");
        const char *mini_path = env_or_skip("CGPROF_ELF_FIXTURE_MINIDEBUGINFO");
        _cleanup_(elf_symtab_freep) ElfSymtab *full = load_path(path);
        _cleanup_(elf_symtab_freep) ElfSymtab *mini = load_path(mini_path);
        static const char *const names[] = {
                "fixture_alpha", "fixture_beta", "fixture_static_gamma", "fixture_static_delta", "main",
        };
        uint64_t value, size, off;

        /* Stripped: the file itself names none of them. */
        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                ASSERT_FALSE(oracle_symbol(mini_path, names[i], &value, &size));

        ASSERT_OK(elf_symtab_minidebuginfo_error(mini));
        ASSERT_EQ(elf_symtab_symbols_source(mini), ELF_SYMBOLS_MINIDEBUGINFO);
        ASSERT_STREQ(elf_symbols_source_to_string(elf_symtab_symbols_source(mini)), "minidebuginfo");
        ASSERT_EQ(elf_symtab_symbols_source(full), ELF_SYMBOLS_SYMTAB);
        ASSERT_FALSE(elf_symtab_has_full_symtab(mini)); /* a debug file would still be looked for */
        ASSERT_STREQ(elf_symtab_build_id(mini), elf_symtab_build_id(full));

        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                ASSERT_TRUE(oracle_symbol(path, names[i], &value, &size));
                ASSERT_STREQ(elf_symtab_lookup(mini, value + size - 1, &off), names[i]);
                ASSERT_EQ(off, size - 1);
        }
        ASSERT_TRUE(check_against_nm(path, mini) >= ELEMENTSOF(names));
}

/* The workload, -rdynamic: its exported functions come from .dynsym, its
 * static ones (now()) from MiniDebugInfo, merged into one table. */
TEST(minidebuginfo_with_dynsym) {
        const char *path = env_or_skip("CGPROF_WORKLOAD");
        const char *mini_path = env_or_skip("CGPROF_WORKLOAD_MINIDEBUGINFO_RDYNAMIC");
        _cleanup_(elf_symtab_freep) ElfSymtab *mini = load_path(mini_path);
        uint64_t value, size, off;

        ASSERT_EQ(elf_symtab_symbols_source(mini), ELF_SYMBOLS_MINIDEBUGINFO);
        ASSERT_TRUE(oracle_symbol(mini_path, "hot_alpha", &value, &size)); /* .dynsym */
        ASSERT_FALSE(oracle_symbol(mini_path, "now", &value, &size));
        ASSERT_TRUE(oracle_symbol(path, "now", &value, &size));
        ASSERT_STREQ(elf_symtab_lookup(mini, value + 1, &off), "now");
        ASSERT_EQ(off, 1);
        ASSERT_TRUE(check_against_nm(path, mini) >= 8);
}

/* A broken .gnu_debugdata is an error remembered in the table, and the file
 * loads with .dynsym alone. */
TEST(minidebuginfo_broken) {
        static const struct {
                const char *env;
                int error;
        } cases[] = {
                { "CGPROF_WORKLOAD_MINIDEBUGINFO_TRUNCATED", -EBADMSG },
                { "CGPROF_WORKLOAD_MINIDEBUGINFO_BADMAGIC", -EBADMSG },
                { "CGPROF_WORKLOAD_MINIDEBUGINFO_BOMB", -EFBIG },
        };
        const char *path = env_or_skip("CGPROF_WORKLOAD");

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                const char *broken = env_or_skip(cases[i].env);
                _cleanup_(elf_symtab_freep) ElfSymtab *s = load_path(broken);
                uint64_t value, size;

                fprintf(stderr, "%s: %s\n", cases[i].env, strerror(-elf_symtab_minidebuginfo_error(s)));
                ASSERT_EQ(elf_symtab_minidebuginfo_error(s), cases[i].error);
                ASSERT_EQ(elf_symtab_symbols_source(s), ELF_SYMBOLS_DYNSYM);
                ASSERT_TRUE(oracle_symbol(path, "hot_alpha", &value, &size));
                ASSERT_STREQ(elf_symtab_lookup(s, value, NULL), "hot_alpha");
                ASSERT_TRUE(oracle_symbol(path, "now", &value, &size));
                ASSERT_FALSE(streq_ptr(elf_symtab_lookup(s, value, NULL), "now"));
        }
}

TEST(minidebuginfo_decompress) {
        const char *mini_path = env_or_skip("CGPROF_WORKLOAD_MINIDEBUGINFO_RDYNAMIC");
        const char *bomb_path = env_or_skip("CGPROF_WORKLOAD_MINIDEBUGINFO_BOMB");
        _cleanup_free_ void *xz = NULL, *bomb = NULL, *out = NULL, *out2 = NULL;
        _cleanup_free_ uint8_t *bad = NULL;
        size_t xz_size, bomb_size, size = 0, size2 = 0;

        ASSERT_EQ(elf_minidebuginfo_max_size(1000), 64000);
        ASSERT_EQ(elf_minidebuginfo_max_size(SIZE_MAX), MINIDEBUGINFO_SIZE_MAX);
        ASSERT_EQ(elf_minidebuginfo_max_size(MINIDEBUGINFO_SIZE_MAX), MINIDEBUGINFO_SIZE_MAX);

        xz = read_section(mini_path, ".gnu_debugdata", &xz_size);
        ASSERT_OK(
                elf_minidebuginfo_decompress(xz, xz_size, elf_minidebuginfo_max_size(xz_size), &out, &size));
        ASSERT_TRUE(size > xz_size);
        ASSERT_EQ(memcmp(out, "\177ELF", 4), 0);
        /* A bound of exactly its size is enough, one byte less is not. */
        ASSERT_OK(elf_minidebuginfo_decompress(xz, xz_size, size, &out2, &size2));
        ASSERT_EQ(size2, size);
        ASSERT_EQ(memcmp(out, out2, size), 0);
        ASSERT_ERROR(elf_minidebuginfo_decompress(xz, xz_size, size - 1, &out2, &size2), EFBIG);
        ASSERT_ERROR(elf_minidebuginfo_decompress(xz, xz_size, 0, &out2, &size2), EFBIG);

        /* Truncated anywhere, a flipped byte in the middle, nothing at all. */
        for (size_t cut = 0; cut < xz_size; cut += 1 + cut / 8)
                ASSERT_TRUE(elf_minidebuginfo_decompress(xz, cut, SIZE_MAX, &out2, &size2) < 0);
        bad = malloc(xz_size);
        ASSERT_NOT_NULL(bad);
        memcpy(bad, xz, xz_size);
        bad[xz_size / 2] ^= 0x55;
        ASSERT_ERROR(elf_minidebuginfo_decompress(bad, xz_size, SIZE_MAX, &out2, &size2), EBADMSG);
        ASSERT_ERROR(elf_minidebuginfo_decompress(NULL, 0, SIZE_MAX, &out2, &size2), EINVAL);
        /* Trailing garbage after the stream. */
        bad = realloc(bad, xz_size + 8);
        ASSERT_NOT_NULL(bad);
        memcpy(bad, xz, xz_size);
        memset(bad + xz_size, 0x42, 8);
        ASSERT_ERROR(elf_minidebuginfo_decompress(bad, xz_size + 8, SIZE_MAX, &out2, &size2), EBADMSG);

        /* The bomb: 200 MiB of zeros. Refused at the default bound, and at
         * any bound below its size, without allocating more than that. */
        bomb = read_section(bomb_path, ".gnu_debugdata", &bomb_size);
        ASSERT_ERROR(elf_minidebuginfo_decompress(bomb, bomb_size, elf_minidebuginfo_max_size(bomb_size),
                                                  &out2, &size2),
                     EFBIG);
        ASSERT_ERROR(elf_minidebuginfo_decompress(bomb, bomb_size, MINIDEBUGINFO_SIZE_MAX, &out2, &size2),
                     EFBIG);
        ASSERT_EQ(size2, size); /* untouched */
}

TEST(not_elf) {
        _cleanup_close_ int fd = -EBADF;
        ElfSymtab *s = NULL;
        static const char junk[] = "#!/bin/sh\necho not an ELF file\n";

        fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_ERROR(elf_symtab_load(fd, &s), ENOEXEC);
        ASSERT_ERROR(elf_symtab_load_memory(junk, sizeof(junk), &s), ENOEXEC);
        ASSERT_ERROR(elf_symtab_load(-1, &s), EINVAL);
        ASSERT_NULL(s);

        ASSERT_NULL(elf_symtab_lookup(NULL, 1, NULL));
        ASSERT_NULL(elf_symtab_build_id(NULL));
        ASSERT_EQ(elf_symtab_count(NULL), 0);
        ASSERT_FALSE(elf_symtab_has_full_symtab(NULL));
        ASSERT_EQ(elf_symtab_symbols_source(NULL), ELF_SYMBOLS_NONE);
        ASSERT_OK(elf_symtab_minidebuginfo_error(NULL));
        ASSERT_NULL(elf_symbols_source_to_string(_ELF_SYMBOLS_SOURCE_MAX));
}

DEFINE_TEST_MAIN
