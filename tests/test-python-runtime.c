/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* CPython's insides as the profiler reads them
 * (common/symbols/python-runtime.c) and where Python frames go among native
 * ones (common/profile/python-merge.c):
 * - _PyRuntime, PyCode_Type and the version found in Debian's own
 *   python3.11 and libpython3.11.so (checked against readelf's symbols);
 * - the 3.11 line table decoded for every instruction of every code object
 *   of a real module, against what python3.11 itself says (co_lines());
 * - str objects' headers; the merge convention on hand-made stacks. */
#include <fcntl.h>
#include <gelf.h>
#include <linux/types.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../bpf/python.h"
#include "elf-util.h"
#include "python-merge.h"
#include "python-runtime.h"
#include "tests.h"

#define PYTHON "/usr/bin/python3.11"
#define LIBPYTHON "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0"

/* The value of a symbol as readelf prints it, 0 when absent. */
static uint64_t readelf_symbol(const char *path, const char *name) {
        _cleanup_free_ char *cmd = NULL, *line = NULL;
        size_t size = 0;
        uint64_t v = 0;
        FILE *f;

        ASSERT_TRUE(asprintf(&cmd, "readelf -W --dyn-syms '%s'", path) > 0);
        f = popen(cmd, "r");
        ASSERT_NOT_NULL(f);
        while (getline(&line, &size, f) > 0) {
                char sym[256];
                unsigned long long value;
                if (sscanf(line, "%*u: %llx %*s %*s %*s %*s %*s %255s", &value, sym) == 2 &&
                    streq(sym, name))
                        v = value;
        }
        pclose(f);
        return v;
}

static void inspect(const char *path, PythonElfInfo *ret, int *ret_r) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        _cleanup_(elf_endp) Elf *elf = NULL;

        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(elf_open_fd(fd, &elf));
        *ret_r = python_elf_inspect(elf, path, ret);
}

TEST(debian_interpreters) {
        const char *paths[] = { PYTHON, LIBPYTHON };
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(paths); i++) {
                PythonElfInfo info;
                int r;

                if (access(paths[i], R_OK) < 0) {
                        fprintf(stderr, "%s not installed: skipped\n", paths[i]);
                        continue;
                }
                inspect(paths[i], &info, &r);
                ASSERT_OK(r);
                ASSERT_EQ(info.major, 3u);
                ASSERT_EQ(info.minor, 11u);
                ASSERT_EQ(info.runtime_vaddr, readelf_symbol(paths[i], "_PyRuntime"));
                ASSERT_EQ(info.code_type_vaddr, readelf_symbol(paths[i], "PyCode_Type"));
                ASSERT_TRUE(info.runtime_vaddr != 0);
                ASSERT_NOT_NULL(python_offsets_find(info.major, info.minor));
                n++;
        }
        if (n == 0)
                TEST_SKIP_PREREQ(PYTHON " and " LIBPYTHON " not installed");
}

/* The version comes from the file's contents, not its name: each pyenv
 * libpython (3.7-3.10 have no Py_Version: their PY_VERSION string) copied
 * to a name that says nothing. */
TEST(version_without_name) {
        static const struct {
                const char *path;
                unsigned minor;
        } libs[] = {
                { "/root/.pyenv/versions/3.7.16/lib/libpython3.7m.so.1.0", 7 },
                { "/root/.pyenv/versions/3.8.18/lib/libpython3.8.so.1.0", 8 },
                { "/root/.pyenv/versions/3.9.18/lib/libpython3.9.so.1.0", 9 },
                { "/root/.pyenv/versions/3.10.13/lib/libpython3.10.so.1.0", 10 },
                { "/root/.pyenv/versions/3.12.1/lib/libpython3.12.so.1.0", 12 },
                { "/root/.pyenv/versions/3.13.0/lib/libpython3.13.so.1.0", 13 },
                { PYTHON, 11 },
        };
        size_t n = 0;

        for (size_t i = 0; i < ELEMENTSOF(libs); i++) {
                _cleanup_free_ char *cmd = NULL;
                char tmp[] = "/tmp/cgprof-pyname-XXXXXX";
                PythonElfInfo info;
                int r, fd;

                if (access(libs[i].path, R_OK) < 0) {
                        fprintf(stderr, "%s not installed: not checked\n", libs[i].path);
                        continue;
                }
                fd = mkstemp(tmp);
                ASSERT_TRUE(fd >= 0);
                close(fd);
                ASSERT_TRUE(asprintf(&cmd, "cp '%s' '%s'", libs[i].path, tmp) > 0);
                ASSERT_EQ(system(cmd), 0);
                inspect(tmp, &info, &r);
                unlink(tmp);
                ASSERT_OK(r);
                fprintf(stderr, "%s as %s: %u.%u\n", libs[i].path, tmp, info.major, info.minor);
                ASSERT_EQ(info.major, 3u);
                ASSERT_EQ(info.minor, libs[i].minor);
                n++;
        }
        if (n == 0)
                TEST_SKIP_PREREQ("no CPython here");
}

TEST(not_python) {
        PythonElfInfo info;
        int r;

        inspect("/bin/sh", &info, &r);
        ASSERT_ERROR(r, ENOENT);
}

TEST(version_names) {
        unsigned major, minor;

        ASSERT_OK(python_version_from_name("/usr/lib/libpython3.10.so.1.0", &major, &minor));
        ASSERT_EQ(major, 3u);
        ASSERT_EQ(minor, 10u);
        ASSERT_OK(python_version_from_name("python3.9d", &major, &minor));
        ASSERT_EQ(minor, 9u);
        ASSERT_ERROR(python_version_from_name("/usr/bin/python3", &major, &minor), ENOENT);
        ASSERT_ERROR(python_version_from_name("/bin/bash", &major, &minor), ENOENT);
        ASSERT_NULL(python_offsets_find(3, 99));
        ASSERT_NULL(python_offsets_find(3, 6)); /* not walked: no _PyRuntime */
        for (unsigned minor = 7; minor <= 13; minor++) {
                const PythonOffsets *o = python_offsets_find(3, minor);
                PythonOffsets bad;
                ASSERT_NOT_NULL(o);
                ASSERT_NULL(python_offsets_invalid(o));
                bad = *o;
                bad.frame_size = 128; /* more than the walk reads */
                ASSERT_STREQ(python_offsets_invalid(&bad), "frame_size");
                bad = *o;
                bad.code_header_size = bad.code_linetable; /* the line table's pointer not read */
                ASSERT_STREQ(python_offsets_invalid(&bad), "code_linetable");
                bad = *o;
                bad.frame_previous = PYTHON_NO_OFFSET;
                ASSERT_STREQ(python_offsets_invalid(&bad), "frame_previous");
        }
        ASSERT_NOT_NULL(python_offsets_find(3, 8));
        ASSERT_NOT_NULL(python_offsets_find(3, 13));
}

/* 3.13's _PyRuntime.debug_offsets, read from the file as the agent does,
 * against the table generated from its headers; then the same bytes
 * dressed up as a 3.14, and broken. */
TEST(debug_offsets) {
        static const char *const libs[] = { "/root/.pyenv/versions/3.13.0/lib/libpython3.13.so.1.0" };
        _cleanup_close_ int fd = -EBADF;
        _cleanup_(elf_endp) Elf *elf = NULL;
        _cleanup_free_ uint8_t *buf = NULL;
        const PythonOffsets *table = python_offsets_find(3, 13);
        const char *missing = NULL;
        PythonElfInfo info;
        PythonOffsets o;
        uint64_t v;
        int r;

        ASSERT_NOT_NULL(table);
        if (access(LIBPYTHON, R_OK) == 0) {
                inspect(LIBPYTHON, &info, &r); /* 3.11: no debug offsets */
                ASSERT_OK(r);
                ASSERT_FALSE(info.has_debug_offsets);
                ASSERT_NULL(info.debug_missing);
        }
        if (access(libs[0], R_OK) < 0)
                TEST_SKIP("no CPython 3.13 (pyenv's libpython3.13.so) here");
        inspect(libs[0], &info, &r);
        ASSERT_OK(r);
        ASSERT_EQ(info.minor, 13u);
        if (!info.has_debug_offsets)
                fprintf(stderr, "debug offsets: missing %s\n", strna(info.debug_missing));
        ASSERT_TRUE(info.has_debug_offsets);
#define SAME(f) ASSERT_EQ((unsigned) info.debug_offsets.f, (unsigned) table->f)
        SAME(runtime_interp_head);
        SAME(interp_threads_head);
        SAME(tstate_next);
        SAME(tstate_thread_id);
        SAME(cframe_current_frame);
        SAME(frame_code);
        SAME(frame_previous);
        SAME(frame_prev_instr);
        SAME(frame_owner);
        SAME(frame_size);
        SAME(code_adaptive);
        SAME(code_qualname);
        SAME(code_linetable);
        SAME(code_firstlineno);
        SAME(unicode_ascii_data);
#undef SAME
        /* Every field: what the interpreter says is what its headers say. */
        ASSERT_EQ(memcmp(&info.debug_offsets, table, sizeof(o)), 0);

        /* The bytes themselves, for the broken cases. */
        fd = open(libs[0], O_RDONLY | O_CLOEXEC);
        ASSERT_TRUE(fd >= 0);
        ASSERT_OK(elf_open_fd(fd, &elf));
        buf = malloc(table->dbg_size);
        ASSERT_NOT_NULL(buf);
        {
                /* _PyRuntime's file offset: through its section. */
                Elf_Scn *scn = NULL;
                bool found = false;
                while ((scn = elf_nextscn(elf, scn))) {
                        GElf_Shdr sh;
                        if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_PROGBITS &&
                            (sh.sh_flags & SHF_ALLOC) && info.runtime_vaddr >= sh.sh_addr &&
                            info.runtime_vaddr - sh.sh_addr < sh.sh_size) {
                                ASSERT_TRUE(pread(fd, buf, table->dbg_size,
                                                  (off_t) (sh.sh_offset + info.runtime_vaddr -
                                                           sh.sh_addr)) == (ssize_t) table->dbg_size);
                                found = true;
                        }
                }
                ASSERT_TRUE(found);
        }
        ASSERT_OK(python_offsets_from_debug(buf, table->dbg_size, 3, 13, &o, &missing));
        ASSERT_EQ(memcmp(&o, table, sizeof(o)), 0);
        /* A 3.14 with the same layout: read with 3.13's, no table needed. */
        v = 0x030e00a1;
        memcpy(buf + table->dbg_version, &v, sizeof(v));
        ASSERT_OK(python_offsets_from_debug(buf, table->dbg_size, 3, 14, &o, &missing));
        ASSERT_EQ(o.minor, 14u);
        ASSERT_EQ(o.cframe_current_frame, table->cframe_current_frame);
        /* Not the version it says. */
        ASSERT_ERROR(python_offsets_from_debug(buf, table->dbg_size, 3, 13, &o, &missing), EBADMSG);
        ASSERT_STREQ(missing, "version");
        /* A field outside its structure: named. */
        v = 8;
        memcpy(buf + table->dbg_tstate_size, &v, sizeof(v));
        ASSERT_ERROR(python_offsets_from_debug(buf, table->dbg_size, 3, 14, &o, &missing), EBADMSG);
        ASSERT_STREQ(missing, "thread_state.thread_id");
        /* Cut short, no cookie, before 3.13. */
        ASSERT_ERROR(python_offsets_from_debug(buf, 100, 3, 14, &o, &missing), EBADMSG);
        ASSERT_ERROR(python_offsets_from_debug(buf, table->dbg_size, 3, 12, &o, &missing), ENOENT);
        buf[0] = 'y';
        ASSERT_ERROR(python_offsets_from_debug(buf, table->dbg_size, 3, 14, &o, &missing), ENOENT);
}

static void unhex(const char *hex, uint8_t **ret, size_t *ret_n) {
        size_t n = strlen(hex) / 2;
        uint8_t *b = malloc(n + 1);
        ASSERT_NOT_NULL(b);
        for (size_t i = 0; i < n; i++) {
                unsigned v;
                ASSERT_TRUE(sscanf(hex + 2 * i, "%2x", &v) == 1);
                b[i] = (uint8_t) v;
        }
        *ret = b;
        *ret_n = n;
}

/* Every code object of real modules (the Python fixture, and json/decoder.py
 * of the interpreter's own library), each instruction's line as the
 * interpreter itself says: co_lines() (3.10+), dis.findlinestarts() (3.8,
 * 3.9: co_lnotab). Returns the instructions checked, 0: not installed. */
static size_t line_table_check(const char *python) {
        static const char script[] =
                "import dis, sys, types, json.decoder\n"
                "def walk(co):\n"
                "    yield co\n"
                "    for c in co.co_consts:\n"
                "        if isinstance(c, types.CodeType):\n"
                "            yield from walk(c)\n"
                "print('version', sys.version_info[0], sys.version_info[1])\n"
                "for path in sys.argv[1:] + [json.decoder.__file__]:\n"
                "    co = compile(open(path).read(), path, 'exec')\n"
                "    for c in walk(co):\n"
                "        new = sys.version_info >= (3, 10)\n"
                "        print('code', c.co_firstlineno, (c.co_linetable if new else c.co_lnotab).hex() or "
                "'-')\n"
                "        if new:\n"
                "            for start, end, line in c.co_lines():\n"
                "                print('range', start // 2, end // 2, -1 if line is None else line)\n"
                "            continue\n"
                "        starts = list(dis.findlinestarts(c))\n"
                "        for i, (off, line) in enumerate(starts):\n"
                "            end = starts[i + 1][0] if i + 1 < len(starts) else len(c.co_code)\n"
                "            print('range', off // 2, end // 2, line)\n";
        _cleanup_free_ char *cmd = NULL, *line = NULL, *py_hot = NULL;
        _cleanup_free_ uint8_t *table = NULL;
        size_t size = 0, n_table = 0, checked = 0, codes = 0;
        const char *src = getenv("CGPROF_SOURCE_DIR") ?: ".";
        char script_path[] = "/tmp/cgprof-lines-XXXXXX";
        const PythonOffsets *o = NULL;
        int firstlineno = 0, fd;
        unsigned major, minor;
        FILE *f;

        if (access(python, X_OK) < 0)
                return 0;
        fd = mkstemp(script_path);
        ASSERT_TRUE(fd >= 0);
        ASSERT_TRUE(write(fd, script, sizeof(script) - 1) == (ssize_t) sizeof(script) - 1);
        close(fd);
        ASSERT_TRUE(asprintf(&py_hot, "%s/tests/python/py-hot.py", src) > 0);
        ASSERT_TRUE(asprintf(&cmd, "%s %s %s", python, script_path, py_hot) > 0);
        f = popen(cmd, "r");
        ASSERT_NOT_NULL(f);
        while (getline(&line, &size, f) > 0) {
                char hex[65536];
                unsigned start, end;
                int want, got;

                if (sscanf(line, "version %u %u", &major, &minor) == 2) {
                        o = python_offsets_find(major, minor);
                        ASSERT_NOT_NULL(o);
                        continue;
                }
                ASSERT_NOT_NULL(o);
                if (sscanf(line, "code %d %65535s", &firstlineno, hex) == 2) {
                        free(TAKE_PTR(table));
                        n_table = 0;
                        if (!streq(hex, "-"))
                                unhex(hex, &table, &n_table);
                        codes++;
                        continue;
                }
                ASSERT_TRUE(sscanf(line, "range %u %u %d", &start, &end, &want) == 3);
                for (unsigned i = start; i < end; i++) {
                        int r = python_code_line_format(o->linetable_format, table ?: (uint8_t *) "",
                                                        n_table, firstlineno, i, &got);
                        if (want < 0)
                                ASSERT_ERROR(r, ENOENT);
                        else {
                                if (r < 0 || got != want)
                                        fprintf(stderr, "%s: instruction %u: got %d (%d), want %d\n", python,
                                                i, got, r, want);
                                ASSERT_OK(r);
                                ASSERT_EQ(got, want);
                        }
                        checked++;
                }
        }
        ASSERT_EQ(pclose(f), 0);
        unlink(script_path);
        fprintf(stderr, "%s (%u.%u): %zu instructions of %zu code objects checked\n", python, major, minor,
                checked, codes);
        ASSERT_TRUE(codes > 10 && checked > 500);
        return checked;
}

TEST(line_table) {
        /* Debian's, and pyenv's of every format (co_lnotab, 3.10's, the location table). */
        const char *pythons[] = { PYTHON,
                                  "/root/.pyenv/versions/3.7.16/bin/python3.7",
                                  "/root/.pyenv/versions/3.8.18/bin/python3.8",
                                  "/root/.pyenv/versions/3.9.18/bin/python3.9",
                                  "/root/.pyenv/versions/3.10.13/bin/python3.10",
                                  "/root/.pyenv/versions/3.12.1/bin/python3.12",
                                  "/root/.pyenv/versions/3.13.0/bin/python3.13" };
        size_t found = 0;

        for (size_t i = 0; i < ELEMENTSOF(pythons); i++) {
                if (line_table_check(pythons[i]) > 0)
                        found++;
                else
                        fprintf(stderr, "%s not installed: not checked\n", pythons[i]);
        }
        if (found == 0)
                TEST_SKIP_PREREQ(PYTHON " not installed");

        /* Broken tables: an error or no line, never a read past the end. */
        static const uint8_t bad[][4] = { { 0x70 }, { 0xf0 | 6, 0xff }, { 0xe8 | 7, 0x7f, 0x7f, 0x7f } };
        for (unsigned format = PYTHON_LINETABLE_LNOTAB; format <= PYTHON_LINETABLE_LOCATIONS; format++)
                for (size_t i = 0; i < ELEMENTSOF(bad); i++)
                        for (unsigned k = 0; k < 10; k++) {
                                int got;
                                (void) python_code_line_format(format, bad[i],
                                                               i == 0   ? 1
                                                               : i == 1 ? 2
                                                                        : 4,
                                                               1, k, &got);
                        }
        ASSERT_ERROR(python_code_line_format(9, bad[0], 1, 1, 0, &(int){ 0 }), EOPNOTSUPP);
}

TEST(str) {
        const PythonOffsets *o = python_offsets_find(3, 11);
        uint8_t header[72] = {};
        uint64_t length = 5;
        uint32_t state = (1u << 2) | (1u << 5) | (1u << 6) | (1u << 7); /* kind 1, compact, ascii, ready */
        _cleanup_free_ char *s = NULL;
        PythonStr str;
        const uint16_t ucs2[] = { 'h', 0xe9, 0x4e16, 0xd800 };

        ASSERT_NOT_NULL(o);
        memcpy(header + o->unicode_length, &length, sizeof(length));
        memcpy(header + o->unicode_state, &state, sizeof(state));
        ASSERT_OK(python_str_parse(o, header, sizeof(header), &str));
        ASSERT_EQ(str.length, 5u);
        ASSERT_EQ(str.kind, 1u);
        ASSERT_EQ(str.data_offset, 48u);

        state = (2u << 2) | (1u << 5); /* kind 2, compact, not ascii */
        memcpy(header + o->unicode_state, &state, sizeof(state));
        ASSERT_OK(python_str_parse(o, header, sizeof(header), &str));
        ASSERT_EQ(str.kind, 2u);
        ASSERT_EQ(str.data_offset, 72u);

        state = 1u << 2; /* legacy, not compact */
        memcpy(header + o->unicode_state, &state, sizeof(state));
        ASSERT_ERROR(python_str_parse(o, header, sizeof(header), &str), EOPNOTSUPP);
        ASSERT_ERROR(python_str_parse(o, header, 10, &str), EINVAL);

        ASSERT_OK(python_str_to_utf8(ucs2, ELEMENTSOF(ucs2), 2, &s));
        ASSERT_STREQ(s, "h\xc3\xa9\xe4\xb8\x96\xef\xbf\xbd");
}

/* ---- the merge ---- */

static void merge_check(const char *native, const char *python, const char *want) {
        /* native: one letter per frame, root first, 'E' = _PyEval_EvalFrameDefault;
         * python: one letter per frame, leaf first, uppercase = entry. */
        bool eval[64];
        uint64_t py[64];
        PythonMergeItem out[128];
        char got[256] = "";
        size_t n_native = strlen(native), n_python = strlen(python), n;

        for (size_t i = 0; i < n_native; i++)
                eval[i] = native[i] == 'E';
        for (size_t i = 0; i < n_python; i++)
                py[i] = CGPROF_PY_FRAME(0x1000 * (i + 1), 0, python[i] >= 'A' && python[i] <= 'Z');
        ASSERT_OK(python_merge(eval, n_native, py, n_python, out, ELEMENTSOF(out), &n));
        for (size_t k = 0; k < n; k++) {
                char c = out[k].python ? python[out[k].index] : native[out[k].index];
                strncat(got, (char[]){ c, 0 }, sizeof(got) - strlen(got) - 1);
        }
        if (!streq(got, want))
                fprintf(stderr, "native %s python %s: got %s, want %s\n", native, python, got, want);
        ASSERT_STREQ(got, want);
}

TEST(merge) {
        /* One evaluation loop running <module> -> main -> f (3.11 inlines
         * Python-to-Python calls): E replaced by them, root first. */
        merge_check("mrEx", "fmU", "mrUmfx");
        /* Two loops (a C function calling back into Python in between). */
        merge_check("mrEcEx", "gFbA", "mrAbcFgx");
        /* More groups than evaluation frames (the native stack cut short):
         * the outer group goes just outside the outermost one matched. */
        merge_check("cEx", "gFbA", "cAbFgx");
        /* No evaluation frame at all: the Python frames at the root. */
        merge_check("xy", "fM", "Mfxy");
        /* More evaluation frames than groups: the outer ones stay native. */
        merge_check("mEcEx", "fM", "mEcMfx");
        /* No Python frames: native only. */
        merge_check("mEx", "", "mEx");
        ASSERT_ERROR(python_merge(NULL, 1, NULL, 0, (PythonMergeItem[1]){}, 1, &(size_t){ 0 }), EINVAL);
        ASSERT_ERROR(python_merge((bool[2]){}, 2, NULL, 0, (PythonMergeItem[1]){}, 1, &(size_t){ 0 }),
                     ENOBUFS);
}

DEFINE_TEST_MAIN
