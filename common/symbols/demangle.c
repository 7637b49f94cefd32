/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Symbol demangling (see demangle.h) with GNU libiberty's cplus_demangle():
 * one well-kept library for C++ and both Rust manglings, the one binutils
 * (c++filt, objdump -C, nm -C), perf and gdb use, so our names read as
 * theirs. DMGL_AUTO tries Rust first (legacy Rust names are valid Itanium
 * names too), then the Itanium C++ ABI. Its files (demangle.h, cplus-dem.c
 * and rust-demangle.c under the LGPL 2+, cp-demangle.c under the GPL 2+)
 * all give "unlimited permission to link the compiled version of this file
 * into combinations with other programs"; libiberty-dev is a static library.
 *
 * Without DMGL_NO_RECURSE_LIMIT libiberty bounds its recursion and refuses
 * C++ names whose parse arrays would not fit its stack budget (GCC PR 87675):
 * a crafted or absurd symbol in a profiled binary cannot crash us. */

#include "demangle.h"

#include <libiberty/demangle.h>

/* Parameters and qualifiers, as c++filt, objdump -C, gdb and perf report -v
 * show them (perf's default and go tool pprof's display drop parameters, the
 * latter template arguments too): overloads stay apart, and a name says
 * which function it is. No return type in front of function templates
 * ("void foo<int>(int)"): it would hide the name in a narrow flame graph
 * frame. */
#define DEMANGLE_OPTIONS (DMGL_PARAMS | DMGL_ANSI | DMGL_RET_DROP | DMGL_AUTO)

bool symbol_is_mangled(const char *name) {
        return name && name[0] == '_' && (name[1] == 'Z' || name[1] == 'R');
}

int demangle_symbol(const char *name, char **ret) {
        _cleanup_free_ char *base = NULL, *demangled = NULL;
        const char *suffix;
        size_t n;

        if (!name || !ret)
                return -EINVAL;
        *ret = NULL;
        if (!symbol_is_mangled(name))
                return 0;

        /* "NAME@plt", "NAME@@GLIBC_2.2.5": neither mangling uses '@'. */
        n = strcspn(name, "@");
        suffix = name + n;
        if (*suffix) {
                base = strndup(name, n);
                if (!base)
                        return -ENOMEM;
        }

        /* NULL: not a name libiberty takes (or its allocation failed: it
         * does not tell, and the mangled name is still right to show). */
        demangled = cplus_demangle(base ?: name, DEMANGLE_OPTIONS);
        if (!demangled || !*demangled)
                return 0;

        if (*suffix) {
                char *joined;

                if (asprintf(&joined, "%s%s", demangled, suffix) < 0)
                        return -ENOMEM;
                *ret = joined;
        } else
                *ret = TAKE_PTR(demangled);
        return 1;
}
