/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

/* Symbol names as people read them: C++ (Itanium ABI, "_Z...") and Rust
 * (legacy "_ZN...17h<hash>E" and v0 "_R...") names demangled by GNU
 * libiberty's cplus_demangle(), the demangler binutils, perf and gdb use.
 *
 * C++ names keep their parameters, qualifiers and clone suffixes
 * ("ns::Widget<int>::spin() const", "foo() [clone .cold]"), without the
 * return type libiberty prints first for function templates; Rust names
 * lose the legacy "::h<16 hex>" hash and v0's crate disambiguators, as
 * rustfilt shows them. A suffix from the first '@' on ("@plt", "@@GLIBC_2.2.5")
 * is kept as it is, the part before it demangled.
 *
 * libiberty refuses C++ names longer than 1024 characters (its guard against
 * exhausting the stack, GCC PR 87675: they stay mangled; Rust names have no
 * such limit) and needs a few hundred KiB of stack for the longest it takes:
 * call it on a thread with a normal (8 MiB) stack. It is reentrant. */

/* Whether name starts as mangled names do ("_Z", "_R"): cheap, and false
 * means demangle_symbol() has nothing to do. */
bool symbol_is_mangled(const char *name);

/* Returns 1 and the demangled name (malloc()ed) in *ret; 0 and NULL when
 * name is not mangled or does not demangle (then name is what to show);
 * -ENOMEM, -EINVAL. */
int demangle_symbol(const char *name, char **ret);
