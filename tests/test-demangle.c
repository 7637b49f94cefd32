/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* demangle_symbol() on known names. The C++ names are what g++ emits (the
 * fixture elf-fixture-cxx.cc has some); the Rust ones are real rustc output
 * (rustc 1.63, legacy and -C symbol-mangling-version=v0, of a crate
 * "mycrate") and the test vectors of rustc-demangle, the Rust project's own
 * demangler; the expected strings are what c++filt and rustfilt print,
 * without the return type of function templates. */
#include "demangle.h"
#include "tests.h"

/* expected NULL: not demangled. */
static void check(const char *mangled, const char *expected) {
        _cleanup_free_ char *d = NULL;
        int r;

        r = demangle_symbol(mangled, &d);
        if (!expected) {
                if (r != 0)
                        fprintf(stderr, "%s demangled to \"%s\"\n", mangled, strna(d));
                ASSERT_EQ(r, 0);
                ASSERT_NULL(d);
                return;
        }
        if (r != 1)
                fprintf(stderr, "%s did not demangle\n", mangled);
        ASSERT_EQ(r, 1);
        ASSERT_STREQ(d, expected);
        ASSERT_TRUE(symbol_is_mangled(mangled));
}

TEST(cxx) {
        /* A function template in a namespace: no "void " in front. */
        check("_ZN3foo3barIiEEvT_", "foo::bar<int>(int)");
        check("_ZN2ns5twiceIlEET_S1_", "ns::twice<long>(long)");
        check("_Z1fv", "f()");
        /* Members of a class template, const, constructor and destructor. */
        check("_ZN2ns6WidgetIiE4spinEv", "ns::Widget<int>::spin()");
        check("_ZNSt6vectorIiSaIiEE9push_backERKi",
              "std::vector<int, std::allocator<int> >::push_back(int const&)");
        check("_ZNKSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEE4sizeEv",
              "std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >::size() "
              "const");
        check("_ZN2ns6WidgetIiEC2Ev", "ns::Widget<int>::Widget()");
        check("_ZN2ns6WidgetIiED1Ev", "ns::Widget<int>::~Widget()");
        check("_ZNSt9bad_allocD1Ev", "std::bad_alloc::~bad_alloc()");
        /* Operators. */
        check("_ZplRK1AS1_", "operator+(A const&, A const&)");
        check("_ZNK2ns6WidgetIiEeqERKS1_", "ns::Widget<int>::operator==(ns::Widget<int> const&) const");
        check("_ZN2ns6WidgetIiEclEi", "ns::Widget<int>::operator()(int)");
        check("_Znwm", "operator new(unsigned long)");
        check("_ZdlPvm", "operator delete(void*, unsigned long)");
        /* Lambdas, anonymous namespaces, GCC's clones. */
        check("_ZZ4mainENKUlvE_clEv", "main::{lambda()#1}::operator()() const");
        check("_ZN12_GLOBAL__N_13fooEv", "(anonymous namespace)::foo()");
        check("_Z3foov.cold", "foo() [clone .cold]");
        check("_ZN3foo3barEv.isra.0", "foo::bar() [clone .isra.0]");
        /* Not functions, but names too (a sample never lands in them). */
        check("_ZSt4cout", "std::cout");
        check("_ZTVN10__cxxabiv117__class_type_infoE", "vtable for __cxxabiv1::__class_type_info");
}

TEST(rust_legacy) {
        /* The "::h<16 hex>" hash goes, as rustfilt drops it. */
        check("_ZN4core3fmt5write17h0123456789abcdefE", "core::fmt::write");
        check("_ZN7mycrate4main17hcd4ef7d4d00f171fE", "mycrate::main");
        check("_ZN7mycrate6shapes15Widget$LT$T$GT$4spin17h421bf38874a14a93E",
              "mycrate::shapes::Widget<T>::spin");
        check("_ZN76_$LT$mycrate..shapes..Widget$LT$u64$GT$$u20$as$u20$mycrate..shapes..Area$GT$"
              "4area17h8f9f796b8dfe0917E",
              "<mycrate::shapes::Widget<u64> as mycrate::shapes::Area>::area");
        check("_ZN4core3ops8function6FnOnce9call_once17h7b8c6d5e4f3a2b1cE",
              "core::ops::function::FnOnce::call_once");
        /* Without a believable hash it is a C++ name (libiberty's rule: a
         * Rust hash has at least 5 distinct hex digits). */
        check("_ZN4core3fmt5write17h0000000000000000E", "core::fmt::write::h0000000000000000");
}

TEST(rust_v0) {
        /* rustc output: crate disambiguators and ".llvm.*" suffixes go. */
        check("_RNvCs6gCmtzjtd6o_7mycrate4main", "mycrate::main");
        check("_RNvMNtCs6gCmtzjtd6o_7mycrate6shapesINtB2_6WidgetyE4spinB4_",
              "<mycrate::shapes::Widget<u64>>::spin");
        check("_RNvMNtCs6gCmtzjtd6o_7mycrate6shapesINtB2_6WidgetdE4spinB4_",
              "<mycrate::shapes::Widget<f64>>::spin");
        check("_RNvXs_NtCs6gCmtzjtd6o_7mycrate6shapesINtB4_6WidgetyENtB4_4Area4area",
              "<mycrate::shapes::Widget<u64> as mycrate::shapes::Area>::area");
        check("_RNCINvNtCsdyIG5SqMl5y_3std2rt10lang_startuE0Cs6gCmtzjtd6o_7mycrate.llvm.2194588966540084721",
              "std::rt::lang_start::<()>::{closure#0}");
        check("_RINvNtNtCsdyIG5SqMl5y_3std10sys_common9backtrace28___rust_begin_short_"
              "backtraceFEuuECs6gCmtzjtd6o_"
              "7mycrate",
              "std::sys_common::backtrace::__rust_begin_short_backtrace::<fn(), ()>");
        /* rustc-demangle's test vectors. */
        check("_RNvCs1234_7mycrate3foo", "mycrate::foo");
        check("_RNvC6_123foo3bar", "123foo::bar");
        check("_RNCNCNgCs6DXkGYLi8lr_2cc5spawn00B5_", "cc::spawn::{closure#0}::{closure#0}");
        check("_RNqCs4fqI2P2rA04_11utf8_identsu30____7hkackfecea1cbdathfdh9hlq6y",
              "utf8_idents::\u10e1\u10d0\u10ed\u10db\u10d4\u10da\u10d0\u10d3_"
              "\u10d2\u10d4\u10db\u10e0\u10d8\u10d4"
              "\u10da\u10d8_\u10e1\u10d0\u10d3\u10d8\u10da\u10d8");
        check("_RNCINkXs25_NgCsbmNqQUJIY6D_4core5sliceINyB9_4IterhENuNgNoBb_"
              "4iter8iterator8Iterator9rpositionNCNgNpB9_"
              "6memchr7memrchrs_0E0Bb_",
              "<core::slice::Iter<u8> as "
              "core::iter::iterator::Iterator>::rposition::<core::slice::memchr::memrchr::"
              "{closure#1}>::{closure#0}");
}

TEST(suffixes) {
        /* The symbolizer's PLT stubs, and symbol versions: the part before
         * the first '@' is demangled, the rest kept. */
        check("_ZNSt6vectorIiSaIiEE9push_backERKi@plt",
              "std::vector<int, std::allocator<int> >::push_back(int const&)@plt");
        check("_ZNSt9bad_allocD1Ev@@GLIBCXX_3.4", "std::bad_alloc::~bad_alloc()@@GLIBCXX_3.4");
        check("_ZNSt9bad_allocD1Ev@GLIBCXX_3.4", "std::bad_alloc::~bad_alloc()@GLIBCXX_3.4");
        check("_RNvCs1234_7mycrate3foo@plt", "mycrate::foo@plt");
        check("_ZN4core3fmt5write17h0123456789abcdefE@plt", "core::fmt::write@plt");
        check("printf@plt", NULL);
        check("memcpy@@GLIBC_2.14", NULL);
        check("_ZN3foo@plt", NULL);
        check("_Z@plt", NULL);
        check("@plt", NULL);
}

TEST(not_mangled) {
        static const char *const names[] = {
                "main",
                "fixture_alpha",
                "_start",
                "__libc_start_main",
                "_init",
                ".plt",
                ".plt.sec",
                "[vdso]",
                "do_syscall_64",
                "__x64_sys_getpid",
                "",
                "_",
                "Z",
                "_GLOBAL__sub_I_main",
        };

        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                ASSERT_FALSE(symbol_is_mangled(names[i]));
                check(names[i], NULL);
        }
}

TEST(garbage) {
        /* Look mangled, are not: passed through. */
        static const char *const names[] = {
                "_Z",
                "_R",
                "_ZN",
                "_ZN3foo",
                "_ZZZZ",
                "_Zfoo",
                "_RNvC",
                "_Rb",
                "_ZN4core3fmt5write17hE",
                "_ZN3foo3barE\x01",
                "_Z\xff\xfe",
                "_R\xc3\xa9",
                "_ZN9999999999999999999fooE",
                "_RNvCs1234_7mycrate3fooXYZ",
                "_ZN4core3fmt5write17h0123456789abcdeE",
        };

        for (size_t i = 0; i < ELEMENTSOF(names); i++) {
                ASSERT_TRUE(symbol_is_mangled(names[i]));
                check(names[i], NULL);
        }
}

/* A function template over depth nested class templates:
 * f<A<A<...<int>...> > >(A<A<...<int>...> > >), mangled and demangled. */
static void nested_template(size_t depth, char **ret_mangled, char **ret_demangled) {
        size_t arg_size = depth * 4 + 4, k = 0;
        _cleanup_free_ char *arg = NULL;
        char *m, *p;

        m = malloc(depth * 4 + 16);
        arg = malloc(arg_size);
        ASSERT_TRUE(m && arg);

        p = stpcpy(m, "_Z1fI");
        for (size_t i = 0; i < depth; i++)
                p = stpcpy(p, "1AI");
        *p++ = 'i';
        for (size_t i = 0; i < depth; i++)
                *p++ = 'E';
        strcpy(p, "EvT_");

        for (size_t i = 0; i < depth; i++) {
                memcpy(arg + k, "A<", 2);
                k += 2;
        }
        k += (size_t) sprintf(arg + k, "int");
        for (size_t i = 0; i < depth; i++)
                k += (size_t) sprintf(arg + k, i == 0 ? ">" : " >");
        ASSERT_TRUE(k < arg_size);

        ASSERT_TRUE(asprintf(ret_demangled, "f<%s%s>(%s)", arg, depth > 0 ? " " : "", arg) > 0);
        *ret_mangled = m;
}

static char *repeat(const char *prefix, const char *unit, size_t n, const char *suffix) {
        size_t lp = strlen(prefix), lu = strlen(unit), ls = strlen(suffix);
        char *s = malloc(lp + lu * n + ls + 1), *p;

        ASSERT_NOT_NULL(s);
        p = mempcpy(s, prefix, lp);
        for (size_t i = 0; i < n; i++)
                p = mempcpy(p, unit, lu);
        memcpy(p, suffix, ls + 1);
        return s;
}

TEST(long_names) {
        _cleanup_free_ char *m = NULL, *expected = NULL, *d = NULL;
        static const struct {
                const char *prefix, *unit, *suffix;
                size_t n;
        } huge[] = {
                { "_Z", "x", "", 1 << 20 },
                { "_Z1fI", "1AI", "iEvT_", 1 << 18 }, /* nested templates, unbalanced */
                { "_ZN", "3foo", "Ev", 1 << 18 },
                { "_ZN", "3foo", "Ev@plt", 1 << 18 },
                { "_R", "Nv", "C1a", 1 << 19 }, /* deep Rust v0 paths */
                { "_RNvC1a", "1b", "", 1 << 19 },
                { "_ZN", "1a", "17h0123456789abcdefE", 1 << 19 },
        };

        /* Long but within what libiberty takes: demangled in full. */
        nested_template(200, &m, &expected);
        ASSERT_TRUE(strlen(m) > 800);
        check(m, expected);
        free(m);
        free(expected);

        /* Far longer: libiberty gives up on C++ names past its stack budget
         * (they stay mangled); whatever it does, no crash and no garbage. */
        nested_template(4000, &m, &expected);
        ASSERT_TRUE(demangle_symbol(m, &d) >= 0);
        if (d)
                ASSERT_STREQ(d, expected);

        for (size_t i = 0; i < ELEMENTSOF(huge); i++) {
                _cleanup_free_ char *s = repeat(huge[i].prefix, huge[i].unit, huge[i].n, huge[i].suffix);
                _cleanup_free_ char *out = NULL;
                int r;

                r = demangle_symbol(s, &out);
                fprintf(stderr, "%zu characters (%s%s...%s): %s\n", strlen(s), huge[i].prefix, huge[i].unit,
                        huge[i].suffix, r > 0 ? "demangled" : "left as is");
                ASSERT_TRUE(r >= 0);
                ASSERT_TRUE(r == 0 ? !out : out && strlen(out) > 0);
        }
}

TEST(invalid) {
        char *d = NULL;

        ASSERT_ERROR(demangle_symbol(NULL, &d), EINVAL);
        ASSERT_ERROR(demangle_symbol("_Z1fv", NULL), EINVAL);
        ASSERT_FALSE(symbol_is_mangled(NULL));
}

DEFINE_TEST_MAIN
