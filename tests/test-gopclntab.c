/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The .gopclntab reader against the truth of the Go toolchain: the Go test
 * workload (tests/go/, built by meson with the installed Go) stripped and
 * unstripped, checked against the unstripped binary's .symtab, against
 * "go tool addr2line" and against the source's LINE: markers; Debian's
 * stripped prometheus (or promtool) when installed (test "debian", which
 * skips otherwise); and malformed tables, which must give errors, never a
 * read outside them (the ASan build checks that). */
#include <fcntl.h>
#include <gelf.h>
#include <time.h>
#include <unistd.h>

#include "elf-symtab.h"
#include "elf-test.h"
#include "elf-util.h"
#include "gopclntab.h"
#include "tests.h"

static const char *fixture(const char *var) {
        const char *p = getenv(var);

        if (!p || access(p, R_OK) < 0)
                TEST_SKIP_PREREQ("%s not built (no Go toolchain: golang-go)", var);
        return p;
}

typedef struct Loaded {
        int fd;
        Elf *elf;
        GoPclntab *t;
} Loaded;

static void load(const char *path, Loaded *ret) {
        ASSERT_TRUE(elf_version(EV_CURRENT) != EV_NONE);
        ret->fd = open(path, O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(ret->fd >= 0);
        ASSERT_OK(elf_open_fd(ret->fd, &ret->elf));
        ASSERT_OK(gopclntab_load(ret->elf, ret->fd, &ret->t));
}

static void unload(Loaded *l) {
        gopclntab_free(l->t);
        elf_end(l->elf);
        close(l->fd);
}

/* A section's contents (the test's own reading), NULL if absent. */
static const uint8_t *section(Elf *elf, const char *name, GElf_Shdr *ret) {
        Elf_Scn *scn = NULL;
        size_t shstrndx;

        ASSERT_TRUE(elf_getshdrstrndx(elf, &shstrndx) >= 0);
        while ((scn = elf_nextscn(elf, scn))) {
                const char *n;
                Elf_Data *data;

                ASSERT_NOT_NULL(gelf_getshdr(scn, ret));
                n = elf_strptr(elf, shstrndx, ret->sh_name);
                if (!n || !streq(n, name))
                        continue;
                data = elf_rawdata(scn, NULL);
                ASSERT_NOT_NULL(data);
                return data->d_buf;
        }
        return NULL;
}

/* How far "go tool addr2line" of Go 1.19 is off: it takes function entries
 * from .text's start, where the table's header says runtime.text (cgo's C
 * code comes first in an externally linked binary). */
static uint64_t addr2line_skew(Elf *elf) {
        GElf_Shdr sh, text;
        const uint8_t *d = section(elf, ".gopclntab", &sh);
        uint64_t text_start;

        ASSERT_NOT_NULL(d);
        ASSERT_NOT_NULL(section(elf, ".text", &text));
        if (d[0] == 0xfa) /* Go 1.16-1.17: absolute entries */
                return 0;
        memcpy(&text_start, d + 8 + 2 * 8, sizeof(text_start));
        return text_start - text.sh_addr;
}

/* The output of a command (sh -c), NUL-terminated. */
static char *command_output(const char *cmd) {
        char *buf = NULL;
        size_t size = 0, n;
        char chunk[65536];
        FILE *p, *out;

        p = popen(cmd, "re");
        ASSERT_NOT_NULL(p);
        out = open_memstream(&buf, &size);
        ASSERT_NOT_NULL(out);
        while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
                ASSERT_EQ(fwrite(chunk, 1, n, out), n);
        ASSERT_EQ(pclose(p), 0);
        ASSERT_EQ(fclose(out), 0);
        return buf;
}

/* "go tool addr2line BINARY" for pcs: two lines each, "function" and
 * "file:line". Returns the output's lines. */
static char **addr2line(const char *binary, const uint64_t *pcs, size_t n) {
        _cleanup_free_ char *cmd = NULL, *out = NULL;
        char in[] = "/tmp/cgprof-test-addr2line-XXXXXX", **lines;
        size_t k = 0;
        FILE *f;
        int fd;

        fd = mkstemp(in);
        ASSERT_TRUE(fd >= 0);
        f = fdopen(fd, "w");
        ASSERT_NOT_NULL(f);
        for (size_t i = 0; i < n; i++)
                fprintf(f, "0x%" PRIx64 "\n", pcs[i]);
        ASSERT_EQ(fclose(f), 0);

        ASSERT_TRUE(asprintf(&cmd, "'%s' tool addr2line '%s' < '%s'", fixture("CGPROF_GO"), binary, in) > 0);
        out = command_output(cmd);
        unlink(in);

        lines = calloc(2 * n + 1, sizeof(char *));
        ASSERT_NOT_NULL(lines);
        for (char *save = NULL, *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
                ASSERT_TRUE(k < 2 * n);
                lines[k++] = strdup(l);
        }
        ASSERT_EQ(k, 2 * n);
        return lines;
}

/* Checks lookups at pcs against addr2line (whose answer for pc - skew is
 * the answer for pc): the physical function's name, and the innermost
 * frame's file:line. Returns how many lookups had inlined frames. */
static size_t check_addr2line(const char *binary, const GoPclntab *t, const uint64_t *pcs, size_t n,
                              uint64_t skew) {
        _cleanup_free_ uint64_t *asked = calloc(n, sizeof(uint64_t));
        size_t n_inlined = 0, n_bad = 0;
        char **lines;

        ASSERT_NOT_NULL(asked);
        for (size_t i = 0; i < n; i++)
                asked[i] = pcs[i] - skew;
        lines = addr2line(binary, asked, n);

        for (size_t i = 0; i < n; i++) {
                GoFrame f[GOPCLNTAB_INLINE_DEPTH_MAX];
                char pos[4096];
                size_t m;

                ASSERT_OK(gopclntab_lookup(t, pcs[i], f, ELEMENTSOF(f), &m));
                ASSERT_TRUE(m >= 1);
                for (size_t j = 0; j < m; j++)
                        ASSERT_EQ(f[j].inlined, j + 1 < m);
                if (m > 1)
                        n_inlined++;
                /* Unknown positions: addr2line says ":-1". */
                if (f[0].file)
                        snprintf(pos, sizeof(pos), "%s:%u", f[0].file, f[0].line);
                else
                        snprintf(pos, sizeof(pos), ":-1");
                if (!streq(f[m - 1].function, lines[2 * i]) || !streq(pos, lines[2 * i + 1])) {
                        fprintf(stderr, "0x%" PRIx64 ": %s %s, addr2line says %s %s\n", pcs[i],
                                f[m - 1].function, pos, lines[2 * i], lines[2 * i + 1]);
                        n_bad++;
                }
        }
        for (size_t i = 0; i < 2 * n; i++)
                free(lines[i]);
        free(lines);
        ASSERT_EQ(n_bad, 0);
        return n_inlined;
}

/* The Go version the toolchain that built the fixtures says it is. */
static char *go_version(void) {
        _cleanup_free_ char *cmd = NULL;
        char *v;

        ASSERT_TRUE(asprintf(&cmd, "'%s' env GOVERSION", fixture("CGPROF_GO")) > 0);
        v = command_output(cmd);
        v[strcspn(v, "\n")] = 0;
        return v;
}

/* Whether .symtab's name sym is Go's table's name go: the same but for
 * the ".abi0" suffix of assembly functions in .symtab, and array lengths,
 * which the table abbreviates ("type..eq.[...]internal/cpu.option" for
 * "type..eq.[5]internal/cpu.option"). */
static bool same_function(const char *sym, const char *go) {
        size_t n = strlen(go);

        if (streq(sym, go) || (strncmp(sym, go, n) == 0 && streq(sym + n, ".abi0")))
                return true;
        while (*go) {
                if (strncmp(go, "[...]", 5) == 0 && *sym == '[') {
                        size_t digits = strspn(sym + 1, "0123456789");

                        if (digits == 0 || sym[1 + digits] != ']')
                                return false;
                        sym += digits + 2;
                        go += 5;
                        continue;
                }
                if (*sym++ != *go++)
                        return false;
        }
        return *sym == 0;
}

TEST(fixture_functions) {
        Loaded full = {}, stripped = {};
        _cleanup_free_ char *version = go_version();
        GElf_Shdr sh;
        Elf_Scn *scn = NULL;
        size_t n, matched = 0;

        load(fixture("CGPROF_GO_WORKLOAD"), &full);
        load(fixture("CGPROF_GO_WORKLOAD_STRIPPED"), &stripped);

        /* The layout the magic says, the version .go.buildinfo says. */
        ASSERT_STREQ(gopclntab_go_version(full.t), version);
        ASSERT_STREQ(gopclntab_go_version(stripped.t), version);
        if (strncmp(version, "go1.18", 6) == 0 || strncmp(version, "go1.19", 6) == 0)
                ASSERT_EQ(gopclntab_format(full.t), GO_PCLNTAB_1_18);
        ASSERT_TRUE(gopclntab_has_inline_trees(full.t));
        ASSERT_TRUE(gopclntab_has_inline_trees(stripped.t));

        /* Every function, named as the unstripped binary's .symtab names
         * the symbol at its entry. */
        n = gopclntab_count(full.t);
        ASSERT_TRUE(n > 1000);
        ASSERT_EQ(gopclntab_count(stripped.t), n);
        while ((scn = elf_nextscn(full.elf, scn))) {
                Elf_Data *data;

                ASSERT_NOT_NULL(gelf_getshdr(scn, &sh));
                if (sh.sh_type != SHT_SYMTAB)
                        continue;
                data = elf_getdata(scn, NULL);
                for (size_t i = 0; i < n; i++) {
                        const char *name, *name2;
                        uint64_t entry, end, entry2;
                        bool found = false;

                        ASSERT_OK(gopclntab_function(full.t, i, &entry, &end, &name));
                        ASSERT_TRUE(entry < end);
                        ASSERT_OK(gopclntab_function(stripped.t, i, &entry2, NULL, &name2));
                        ASSERT_EQ(entry, entry2);
                        ASSERT_STREQ(name, name2);
                        for (size_t k = 0; k < sh.sh_size / sh.sh_entsize && !found; k++) {
                                GElf_Sym sym;

                                ASSERT_NOT_NULL(gelf_getsym(data, (int) k, &sym));
                                if (GELF_ST_TYPE(sym.st_info) == STT_FUNC && sym.st_value == entry &&
                                    same_function(elf_strptr(full.elf, sh.sh_link, sym.st_name), name))
                                        found = true;
                        }
                        if (!found)
                                fprintf(stderr, "%s at 0x%" PRIx64 " is not in .symtab\n", name, entry);
                        matched += found;
                }
        }
        fprintf(stderr, "%zu of %zu functions match .symtab\n", matched, n);
        ASSERT_EQ(matched, n);
        ASSERT_ERROR(gopclntab_function(full.t, n, NULL, NULL, NULL), ENOENT);

        unload(&full);
        unload(&stripped);
}

TEST(fixture_addr2line) {
        const char *paths[] = { fixture("CGPROF_GO_WORKLOAD"), fixture("CGPROF_GO_WORKLOAD_STRIPPED") };

        for (size_t p = 0; p < ELEMENTSOF(paths); p++) {
                _cleanup_free_ uint64_t *pcs = NULL;
                size_t n, k = 0, n_inlined;
                Loaded l = {};

                load(paths[p], &l);
                n = gopclntab_count(l.t);
                pcs = calloc(4 * n, sizeof(uint64_t));
                ASSERT_NOT_NULL(pcs);
                /* Each function's entry and three addresses inside. */
                for (size_t i = 0; i < n; i++) {
                        uint64_t entry, end;

                        ASSERT_OK(gopclntab_function(l.t, i, &entry, &end, NULL));
                        for (unsigned q = 0; q < 4; q++)
                                pcs[k++] = entry + (end - entry) * q / 4;
                }
                n_inlined = check_addr2line(paths[p], l.t, pcs, k, addr2line_skew(l.elf));
                fprintf(stderr, "%s: %zu addresses as addr2line says, %zu with inlined calls\n", paths[p], k,
                        n_inlined);
                ASSERT_TRUE(n_inlined > 0);

                /* Outside every function. */
                GoFrame f;
                size_t m;
                uint64_t first, last;
                ASSERT_OK(gopclntab_function(l.t, 0, &first, NULL, NULL));
                ASSERT_OK(gopclntab_function(l.t, n - 1, NULL, &last, NULL));
                ASSERT_ERROR(gopclntab_lookup(l.t, first - 1, &f, 1, &m), ENOENT);
                ASSERT_ERROR(gopclntab_lookup(l.t, last, &f, 1, &m), ENOENT);
                ASSERT_ERROR(gopclntab_lookup(l.t, 0, &f, 1, &m), ENOENT);
                ASSERT_ERROR(gopclntab_lookup(l.t, first, &f, 0, &m), EINVAL);
                unload(&l);
        }
}

/* The line of the source holding "LINE:<marker>". */
static uint32_t marker_line(const char *marker) {
        _cleanup_fclose_ FILE *f = fopen(fixture("CGPROF_GO_SOURCE"), "re");
        char line[512], tag[64];
        uint32_t n = 0;

        ASSERT_NOT_NULL(f);
        snprintf(tag, sizeof(tag), "// LINE:%s", marker);
        while (fgets(line, sizeof(line), f)) {
                n++;
                if (strstr(line, tag))
                        return n;
        }
        ASSERT_TRUE(!"no such marker");
        return 0;
}

static bool ends_with(const char *s, const char *suffix) {
        size_t a = strlen(s), b = strlen(suffix);

        return a >= b && streq(s + a - b, suffix);
}

/* The address range of the function named name. */
static void function_range(const GoPclntab *t, const char *name, uint64_t *ret_entry, uint64_t *ret_end) {
        for (size_t i = 0; i < gopclntab_count(t); i++) {
                const char *n;

                ASSERT_OK(gopclntab_function(t, i, ret_entry, ret_end, &n));
                if (streq(n, name))
                        return;
        }
        ASSERT_TRUE(!"no such function");
}

TEST(fixture_inline) {
        const char *paths[] = { fixture("CGPROF_GO_WORKLOAD"), fixture("CGPROF_GO_WORKLOAD_STRIPPED") };
        uint32_t step_line = marker_line("gammaStep"), call_line = marker_line("gammaCall"),
                 alpha_line = marker_line("goAlpha");

        for (size_t p = 0; p < ELEMENTSOF(paths); p++) {
                size_t n_chains = 0, n_alpha = 0;
                uint64_t entry, end;
                Loaded l = {};

                load(paths[p], &l);
                /* goGamma's loop is gammaStep inlined: a chain of two. */
                function_range(l.t, "main.goGamma", &entry, &end);
                for (uint64_t pc = entry; pc < end; pc++) {
                        GoFrame f[4];
                        size_t m;

                        ASSERT_OK(gopclntab_lookup(l.t, pc, f, ELEMENTSOF(f), &m));
                        ASSERT_STREQ(f[m - 1].function, "main.goGamma");
                        ASSERT_FALSE(f[m - 1].inlined);
                        ASSERT_EQ(f[m - 1].entry, entry);
                        if (m == 1)
                                continue;
                        ASSERT_EQ(m, 2);
                        ASSERT_STREQ(f[0].function, "main.gammaStep");
                        ASSERT_TRUE(f[0].inlined);
                        ASSERT_TRUE(ends_with(f[0].file, "/main.go"));
                        ASSERT_EQ(f[0].line, step_line);
                        ASSERT_TRUE(ends_with(f[1].file, "/main.go"));
                        ASSERT_EQ(f[1].line, call_line);

                        /* With room for one frame: the physical function, at the call. */
                        ASSERT_OK(gopclntab_lookup(l.t, pc, f, 1, &m));
                        ASSERT_EQ(m, 1);
                        ASSERT_STREQ(f[0].function, "main.goGamma");
                        ASSERT_EQ(f[0].line, call_line);
                        n_chains++;
                }
                fprintf(stderr, "%s: %zu addresses of goGamma in inlined gammaStep\n", paths[p], n_chains);
                ASSERT_TRUE(n_chains >= 4);

                /* goAlpha inlines nothing; its loop is at its marker. */
                function_range(l.t, "main.goAlpha", &entry, &end);
                for (uint64_t pc = entry; pc < end; pc++) {
                        GoFrame f[4];
                        size_t m;

                        ASSERT_OK(gopclntab_lookup(l.t, pc, f, ELEMENTSOF(f), &m));
                        ASSERT_EQ(m, 1);
                        ASSERT_STREQ(f[0].function, "main.goAlpha");
                        n_alpha += f[0].line == alpha_line;
                }
                ASSERT_TRUE(n_alpha >= 4);
                unload(&l);
        }
}

TEST(elf_symtab) {
        const char *paths[] = { fixture("CGPROF_GO_WORKLOAD_STRIPPED"), fixture("CGPROF_GO_WORKLOAD") };

        for (size_t p = 0; p < ELEMENTSOF(paths); p++) {
                _cleanup_(elf_symtab_freep) ElfSymtab *s = NULL;
                _cleanup_free_ char *version = go_version();
                ElfFrame f[ELF_FRAMES_MAX];
                uint64_t entry, end, off;
                Loaded l = {};
                int fd;
                size_t n_chains = 0;

                fd = open(paths[p], O_RDONLY | O_CLOEXEC);
                ASSERT_TRUE(fd >= 0);
                ASSERT_OK(elf_symtab_load(fd, &s));
                close(fd);
                load(paths[p], &l);

                /* Stripped: the names come from .gopclntab; unstripped from .symtab. */
                ASSERT_EQ(elf_symtab_symbols_source(s), p == 0 ? ELF_SYMBOLS_GOPCLNTAB : ELF_SYMBOLS_SYMTAB);
                ASSERT_STREQ(elf_symbols_source_to_string(elf_symtab_symbols_source(s)),
                             p == 0 ? "gopclntab" : "symtab");
                ASSERT_STREQ(elf_symtab_go_version(s), version);
                ASSERT_EQ(elf_symtab_gopclntab_error(s), 0);
                ASSERT_TRUE(elf_symtab_count(s) > 1000);

                function_range(l.t, "main.goAlpha", &entry, &end);
                ASSERT_STREQ(elf_symtab_lookup(s, entry + 4, &off), "main.goAlpha");
                ASSERT_EQ(off, 4);
                ASSERT_EQ(elf_symtab_lookup_frames(s, entry + 4, f, ELEMENTSOF(f)), 1);
                ASSERT_STREQ(f[0].name, "main.goAlpha");
                ASSERT_EQ(f[0].offset, 4);
                ASSERT_TRUE(ends_with(f[0].file, "/main.go"));

                /* Both give goGamma's inline chain. */
                function_range(l.t, "main.goGamma", &entry, &end);
                for (uint64_t pc = entry; pc < end; pc++) {
                        size_t m = elf_symtab_lookup_frames(s, pc, f, ELEMENTSOF(f));

                        ASSERT_TRUE(m == 1 || m == 2);
                        ASSERT_STREQ(f[m - 1].name, "main.goGamma");
                        ASSERT_EQ(f[m - 1].offset, pc - entry);
                        ASSERT_STREQ(elf_symtab_lookup(s, pc, NULL), "main.goGamma");
                        if (m == 2) {
                                ASSERT_STREQ(f[0].name, "main.gammaStep");
                                ASSERT_TRUE(f[0].inlined);
                                ASSERT_FALSE(f[1].inlined);
                                n_chains++;
                        }
                }
                ASSERT_TRUE(n_chains > 0);
                unload(&l);
        }

        /* A C binary: no Go table, no error, one frame without a file. */
        _cleanup_(elf_symtab_freep) ElfSymtab *c = NULL;
        int fd = open(fixture("CGPROF_WORKLOAD"), O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(elf_symtab_load(fd, &c));
        close(fd);
        ASSERT_EQ(elf_symtab_gopclntab_error(c), 0);
        ASSERT_NULL(elf_symtab_go_version(c));
        ASSERT_EQ(elf_symtab_symbols_source(c), ELF_SYMBOLS_SYMTAB);
}

/* ---- Malformed tables ---- */

/* The fixture's table and read-only data, copied to buffers of their exact
 * size (ASan sees a read past them), and go:func.* from its .symtab. */
typedef struct Image {
        uint8_t *pclntab, *rodata;
        size_t pclntab_size, rodata_size;
        uint64_t pclntab_vaddr, rodata_vaddr, gofunc;
} Image;

static void image_of_fixture(Image *ret) {
        GElf_Shdr sh, ro;
        const uint8_t *d, *r;
        Elf_Scn *scn = NULL;
        Elf *elf;
        int fd;

        elf = test_elf_open(fixture("CGPROF_GO_WORKLOAD"), &fd);
        d = section(elf, ".gopclntab", &sh);
        r = section(elf, ".rodata", &ro);
        ASSERT_NOT_NULL(d);
        ASSERT_NOT_NULL(r);
        *ret = (Image){
                .pclntab = malloc(sh.sh_size),
                .pclntab_size = sh.sh_size,
                .pclntab_vaddr = sh.sh_addr,
                .rodata = malloc(ro.sh_size),
                .rodata_size = ro.sh_size,
                .rodata_vaddr = ro.sh_addr,
        };
        ASSERT_NOT_NULL(ret->pclntab);
        ASSERT_NOT_NULL(ret->rodata);
        memcpy(ret->pclntab, d, sh.sh_size);
        memcpy(ret->rodata, r, ro.sh_size);

        while ((scn = elf_nextscn(elf, scn))) {
                GElf_Shdr s;
                Elf_Data *data;

                ASSERT_NOT_NULL(gelf_getshdr(scn, &s));
                if (s.sh_type != SHT_SYMTAB)
                        continue;
                data = elf_getdata(scn, NULL);
                for (size_t k = 0; k < s.sh_size / s.sh_entsize; k++) {
                        GElf_Sym sym;
                        const char *name;

                        ASSERT_NOT_NULL(gelf_getsym(data, (int) k, &sym));
                        name = elf_strptr(elf, s.sh_link, sym.st_name);
                        if (name && (streq(name, "go.func.*") || streq(name, "go:func.*")))
                                ret->gofunc = sym.st_value;
                }
        }
        ASSERT_TRUE(ret->gofunc != 0);
        elf_end(elf);
        close(fd);
}

static int image_new(const uint8_t *pclntab, size_t size, const Image *img, GoPclntab **ret) {
        GoRegion region = { .vaddr = img->rodata_vaddr, .data = img->rodata, .size = img->rodata_size };

        return gopclntab_new(
                &(GoPclntabImage){
                        .pclntab = pclntab,
                        .pclntab_size = size,
                        .pclntab_vaddr = img->pclntab_vaddr,
                        .gofunc = img->gofunc,
                        .regions = &region,
                        .n_regions = 1,
                },
                ret);
}

static bool inside(const char *s, const void *buf, size_t size) {
        return !s || ((const uint8_t *) s >= (const uint8_t *) buf &&
                      (const uint8_t *) s + strlen(s) < (const uint8_t *) buf + size);
}

/* Lookups at addresses across the text: errors or frames whose strings lie
 * in the table. Returns how many succeeded. */
static size_t probe(const GoPclntab *t, const void *buf, size_t size, uint64_t lo, uint64_t hi) {
        size_t ok = 0;

        for (uint64_t pc = lo; pc < hi; pc += 97) {
                GoFrame f[8];
                size_t m = 99;
                int r = gopclntab_lookup(t, pc, f, ELEMENTSOF(f), &m);

                if (r < 0) {
                        ASSERT_TRUE(r == -ENOENT || r == -EBADMSG);
                        continue;
                }
                ASSERT_TRUE(m >= 1 && m <= ELEMENTSOF(f));
                for (size_t j = 0; j < m; j++) {
                        ASSERT_TRUE(inside(f[j].function, buf, size));
                        ASSERT_TRUE(inside(f[j].file, buf, size));
                }
                ok++;
        }
        return ok;
}

static void put_u32(uint8_t *p, uint32_t v) {
        memcpy(p, &v, sizeof(v));
}

static void put_u64(uint8_t *p, uint64_t v) {
        memcpy(p, &v, sizeof(v));
}

TEST(malformed) {
        _cleanup_free_ uint8_t *copy = NULL;
        GoPclntab *t = NULL;
        uint64_t lo, hi;
        unsigned seed = 1;
        size_t whole;
        Image img;

        image_of_fixture(&img);
        ASSERT_OK(image_new(img.pclntab, img.pclntab_size, &img, &t));
        ASSERT_TRUE(gopclntab_has_inline_trees(t));
        ASSERT_OK(gopclntab_function(t, 0, &lo, NULL, NULL));
        ASSERT_OK(gopclntab_function(t, gopclntab_count(t) - 1, NULL, &hi, NULL));
        whole = probe(t, img.pclntab, img.pclntab_size, lo, hi);
        ASSERT_TRUE(whole > 1000);
        t = gopclntab_free(t);

        copy = malloc(img.pclntab_size);
        ASSERT_NOT_NULL(copy);

        /* The header. */
        static const struct {
                size_t at;
                uint32_t value;
                int error;
        } header[] = {
                { 0, 0xfffffffb, -EPROTONOSUPPORT }, /* Go 1.2-1.15 */
                { 0, 0xfffffff7, -EPROTONOSUPPORT }, /* a layout we do not know */
                { 0, 0x12345678, -EBADMSG },         { 4, 0x08010001, -EBADMSG }, /* padding not zero */
                { 4, 0x08030000, -EBADMSG }, /* quantum 3 */
                { 4, 0x05010000, -EBADMSG }, /* pointer size 5 */
        };
        for (size_t i = 0; i < ELEMENTSOF(header); i++) {
                memcpy(copy, img.pclntab, img.pclntab_size);
                put_u32(copy + header[i].at, header[i].value);
                ASSERT_EQ(image_new(copy, img.pclntab_size, &img, &t), header[i].error);
                ASSERT_NULL(t);
        }
        /* Absurd counts and offsets. */
        memcpy(copy, img.pclntab, img.pclntab_size);
        put_u64(copy + 8, UINT64_C(1) << 40);
        ASSERT_ERROR(image_new(copy, img.pclntab_size, &img, &t), E2BIG);
        put_u64(copy + 8, img.pclntab_size / 8);
        ASSERT_ERROR(image_new(copy, img.pclntab_size, &img, &t), EBADMSG);
        for (size_t w = 3; w < 8; w++) {
                memcpy(copy, img.pclntab, img.pclntab_size);
                put_u64(copy + 8 + 8 * w, img.pclntab_size + 1);
                ASSERT_ERROR(image_new(copy, img.pclntab_size, &img, &t), EBADMSG);
                put_u64(copy + 8 + 8 * w, UINT64_MAX);
                ASSERT_ERROR(image_new(copy, img.pclntab_size, &img, &t), EBADMSG);
        }
        ASSERT_ERROR(
                gopclntab_new(&(GoPclntabImage){ .pclntab = copy, .pclntab_size = GOPCLNTAB_SIZE_MAX + 1 },
                              &t),
                E2BIG);

        /* Truncated: an error, or a table whose lookups stay inside. */
        for (size_t size = 0; size < img.pclntab_size; size = size < 128 ? size + 1 : size + 1009) {
                _cleanup_free_ uint8_t *cut = malloc(MAX(size, (size_t) 1));

                ASSERT_NOT_NULL(cut);
                memcpy(cut, img.pclntab, size);
                if (image_new(cut, size, &img, &t) < 0) {
                        ASSERT_NULL(t);
                        continue;
                }
                (void) probe(t, cut, size, lo, hi);
                t = gopclntab_free(t);
        }

        /* Garbage in the body (the functions' records, pc-value tables,
         * names) and in the inline trees: errors, or frames inside. */
        for (unsigned round = 0; round < 120; round++) {
                _cleanup_free_ uint8_t *ro = malloc(img.rodata_size);
                Image bad = img;

                ASSERT_NOT_NULL(ro);
                memcpy(copy, img.pclntab, img.pclntab_size);
                memcpy(ro, img.rodata, img.rodata_size);
                for (unsigned k = 0; k < 64; k++) {
                        copy[72 + (size_t) rand_r(&seed) % (img.pclntab_size - 72)] =
                                (uint8_t) rand_r(&seed);
                        ro[(size_t) rand_r(&seed) % img.rodata_size] = (uint8_t) rand_r(&seed);
                }
                bad.rodata = ro;
                ASSERT_OK(image_new(copy, img.pclntab_size, &bad, &t));
                (void) probe(t, copy, img.pclntab_size, lo, hi);
                t = gopclntab_free(t);
        }

        free(img.pclntab);
        free(img.rodata);
}

TEST(buildinfo) {
        _cleanup_free_ char *version = go_version(), *v = NULL;
        GElf_Shdr sh;
        const uint8_t *d;
        uint8_t hand[64] = "\xff Go buildinf:", str[16] = "go1.16.15", hdr[16];
        Elf *elf;
        int fd;

        /* Go 1.18+: the version inline. */
        elf = test_elf_open(fixture("CGPROF_GO_WORKLOAD_STRIPPED"), &fd);
        d = section(elf, ".go.buildinfo", &sh);
        ASSERT_NOT_NULL(d);
        ASSERT_OK(gopclntab_parse_buildinfo(d, sh.sh_size, NULL, 0, &v));
        ASSERT_STREQ(v, version);
        for (size_t size = 0; size < 40; size++) {
                char *w = NULL;

                ASSERT_TRUE(gopclntab_parse_buildinfo(d, size, NULL, 0, &w) < 0);
                ASSERT_NULL(w);
        }
        elf_end(elf);
        close(fd);

        /* Go 1.16-1.17: a pointer to the version's string header. */
        hand[14] = 8;
        hand[15] = 0;
        put_u64(hand + 16, 0x1000);
        put_u64(hdr, 0x2000);
        put_u64(hdr + 8, strlen((char *) str));
        GoRegion regions[] = {
                { .vaddr = 0x1000, .data = hdr, .size = sizeof(hdr) },
                { .vaddr = 0x2000, .data = str, .size = sizeof(str) },
        };
        free(v);
        v = NULL;
        ASSERT_OK(gopclntab_parse_buildinfo(hand, sizeof(hand), regions, ELEMENTSOF(regions), &v));
        ASSERT_STREQ(v, "go1.16.15");
        put_u64(hdr + 8, sizeof(str) + 1); /* longer than its region */
        ASSERT_TRUE(gopclntab_parse_buildinfo(hand, sizeof(hand), regions, ELEMENTSOF(regions), &v) < 0);
        put_u64(hand + 16, 0x3000); /* nowhere */
        ASSERT_ERROR(gopclntab_parse_buildinfo(hand, sizeof(hand), regions, ELEMENTSOF(regions), &v),
                     ENODATA);
        hand[0] = 0;
        ASSERT_ERROR(gopclntab_parse_buildinfo(hand, sizeof(hand), regions, ELEMENTSOF(regions), &v),
                     ENODATA);
}

static double now_ms(void) {
        struct timespec ts;

        ASSERT_OK(clock_gettime(CLOCK_MONOTONIC, &ts));
        return (double) ts.tv_sec * 1e3 + (double) ts.tv_nsec / 1e6;
}

/* Debian's own stripped Go binaries (prometheus, Go 1.19, cgo: its text
 * starts with C code), when installed. */
TEST(debian) {
        const char *candidates[] = { "/usr/bin/prometheus", "/usr/bin/promtool" }, *path = NULL;
        static const char *const known[] = { "runtime.main", "runtime.mallocgc", "runtime.schedule",
                                             "runtime.gcBgMarkWorker", "main.main" };
        _cleanup_free_ uint64_t *pcs = NULL;
        _cleanup_free_ char *cmd = NULL, *out = NULL;
        uint64_t lo, hi, skew;
        unsigned seed = 18;
        size_t n = 3000, n_inlined;
        double t0, t1;
        Loaded l = {};

        for (size_t i = 0; i < ELEMENTSOF(candidates) && !path; i++)
                if (access(candidates[i], R_OK) >= 0)
                        path = candidates[i];
        if (!path)
                TEST_SKIP_PREREQ("neither prometheus nor promtool is installed");
        fixture("CGPROF_GO");

        t0 = now_ms();
        load(path, &l);
        t1 = now_ms();
        fprintf(stderr, "%s: %zu functions, %s, loaded in %.3f ms\n", path, gopclntab_count(l.t),
                gopclntab_go_version(l.t), t1 - t0);
        ASSERT_TRUE(gopclntab_count(l.t) > 10000);
        ASSERT_TRUE(gopclntab_has_inline_trees(l.t));

        /* "go version FILE" reads the same .go.buildinfo: "FILE: go1.19.8". */
        ASSERT_TRUE(asprintf(&cmd, "'%s' version '%s'", fixture("CGPROF_GO"), path) > 0);
        out = command_output(cmd);
        out[strcspn(out, "\n")] = 0;
        ASSERT_NOT_NULL(strstr(out, ": "));
        ASSERT_STREQ(gopclntab_go_version(l.t), strstr(out, ": ") + 2);

        /* Known functions at their entries and inside. */
        for (size_t k = 0; k < ELEMENTSOF(known); k++) {
                uint64_t entry, end;
                GoFrame f[GOPCLNTAB_INLINE_DEPTH_MAX];
                size_t m;

                function_range(l.t, known[k], &entry, &end);
                ASSERT_OK(gopclntab_lookup(l.t, entry, f, ELEMENTSOF(f), &m));
                ASSERT_STREQ(f[m - 1].function, known[k]);
                ASSERT_OK(gopclntab_lookup(l.t, end - 1, f, ELEMENTSOF(f), &m));
                ASSERT_STREQ(f[m - 1].function, known[k]);
        }

        /* Random addresses across Go's text, as addr2line has them. */
        ASSERT_OK(gopclntab_function(l.t, 0, &lo, NULL, NULL));
        ASSERT_OK(gopclntab_function(l.t, gopclntab_count(l.t) - 1, NULL, &hi, NULL));
        pcs = calloc(n, sizeof(uint64_t));
        ASSERT_NOT_NULL(pcs);
        for (size_t i = 0; i < n; i++)
                pcs[i] = lo + (((uint64_t) rand_r(&seed) << 31) ^ (uint64_t) rand_r(&seed)) % (hi - lo);
        skew = addr2line_skew(l.elf);
        fprintf(stderr, "addr2line's skew: 0x%" PRIx64 "\n", skew);
        n_inlined = check_addr2line(path, l.t, pcs, n, skew);
        fprintf(stderr, "%zu random addresses as addr2line says, %zu with inlined calls\n", n, n_inlined);
        ASSERT_TRUE(n_inlined > n / 20);
        unload(&l);
}

DEFINE_TEST_MAIN
