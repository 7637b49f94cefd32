// SPDX-License-Identifier: LGPL-2.1-or-later
/* C++ fixture for the demangling tests (test-elf-symtab, test-symbolizer):
 * a class template in a namespace with a member function and an operator,
 * a function template, and a call into libstdc++ through the PLT
 * (std::chrono::steady_clock::now()).
 *
 * elf-fixture-cxx         run each function once and exit 0
 * elf-fixture-cxx --wait  print "steady_clock_now 0xADDR" (the function in
 *                         libstdc++, through the GOT of this PIE) and
 *                         "ready PID", then block until stdin reaches EOF
 *                         (so a test that dies takes its fixture with it)
 *
 * The tests find the fixture's own functions by their mangled names in its
 * .symtab: _ZN2ns6WidgetIiE4spinEv, _ZNK2ns6WidgetIiEeqERKS1_ and
 * _ZN2ns5twiceIlEET_S1_. */
#include <chrono>
#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace ns {

template <typename T> struct Widget {
        T value;

        T spin();
        bool operator==(const Widget &other) const;
};

template <typename T> __attribute__((noinline)) T Widget<T>::spin() {
        T x = value;

        for (int i = 0; i < 1000; i++)
                x = x * 3 + 1;
        return x;
}

template <typename T> __attribute__((noinline)) bool Widget<T>::operator==(const Widget &other) const {
        return value == other.value;
}

template <typename T> __attribute__((noinline)) T twice(T x) {
        return x * 2;
}

template struct Widget<int>;
template long twice<long>(long);

} // namespace ns

static volatile long sink;

int main(int argc, char *argv[]) {
        ns::Widget<int> a{ 1 }, b{ 2 };

        sink = a.spin() + (a == b) + ns::twice<long>(21) +
               std::chrono::steady_clock::now().time_since_epoch().count();
        if (argc <= 1)
                return 0;

        if (strcmp(argv[1], "--wait") == 0) {
                std::chrono::steady_clock::time_point (*now)() = std::chrono::steady_clock::now;
                char buf[256];

                printf("steady_clock_now %p\n", (void *) now);
                printf("ready %d\n", (int) getpid());
                fflush(stdout);
                while (read(STDIN_FILENO, buf, sizeof(buf)) > 0)
                        ;
                return 0;
        }

        fprintf(stderr, "usage: %s [--wait]\n", argv[0]);
        return 2;
}
