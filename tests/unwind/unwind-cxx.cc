// SPDX-License-Identifier: LGPL-2.1-or-later
// The C++ unwinding fixture, -O2 -fomit-frame-pointer: namespaces, a class
// template, a virtual call and exceptions, the things C++ code is made of.
// The CPU time is in two leaves, 7:3, under a fixed chain
//   main -> app::Runner::run -> app::Pipeline<int>::step
//        -> app::MixStage::process (virtual) -> app::hot_a (7) | app::hot_b (3)
// and every 16th step an exception is thrown three frames below step and
// caught there:
//   step -> app::detail::check -> app::detail::validate (x2) -> throw
// so the run unwinds through libgcc's unwinder and the personality routine
// all along (a small share of the time, not in the leaves).
//
// cgprof-unwind-cxx [--seconds S]: runs for S seconds of CPU time; prints
// "ready <pid>" once started, and at the end the number of exceptions caught
// on stderr.
#include <stdexcept>

#include "unwind-common.h"

namespace app {

static volatile uint64_t sink;

CHAIN void hot_a() {
        UNWIND_SPIN(sink, 1);
}

CHAIN void hot_b() {
        UNWIND_SPIN(sink, 1);
}

class Stage {
      public:
        virtual ~Stage() = default;
        virtual void process(unsigned i) = 0;
};

class MixStage : public Stage {
      public:
        CHAIN void process(unsigned i) override {
                if (i % 10 < 7)
                        hot_a();
                else
                        hot_b();
                BARRIER();
        }
};

class Overflow : public std::runtime_error {
      public:
        explicit Overflow(unsigned i) : std::runtime_error("overflow"), at(i) {
        }
        unsigned at;
};

namespace detail {

// depth 1..0: the throw is in the innermost validate.
CHAIN void validate(int depth, unsigned i) {
        if (depth == 0)
                throw Overflow(i);
        validate(depth - 1, i);
        BARRIER();
}

CHAIN void check(unsigned i) {
        validate(1, i);
        BARRIER();
}

} // namespace detail

template <typename T> class Pipeline {
      public:
        explicit Pipeline(Stage &stage) : stage_(stage) {
        }

        CHAIN void step(T i) {
                stage_.process((unsigned) i);
                BARRIER();
                if (i % 16 == 0) {
                        try {
                                detail::check((unsigned) i);
                        } catch (const Overflow &e) {
                                caught_ += e.at == (unsigned) i;
                        }
                }
                BARRIER();
        }

        unsigned long caught() const {
                return caught_;
        }

      private:
        Stage &stage_;
        unsigned long caught_ = 0;
};

// The pipeline is chosen at run time, so the virtual call stays one.
static Stage *make_stage() {
        static MixStage mix;
        return &mix;
}

class Runner {
      public:
        explicit Runner(double seconds) : seconds_(seconds) {
        }

        CHAIN unsigned long run() {
                Stage *stage = make_stage();
                Pipeline<int> pipeline(*stage);
                for (int i = 0; unwind_running(seconds_); i++)
                        pipeline.step(i);
                BARRIER();
                return pipeline.caught();
        }

      private:
        double seconds_;
};

} // namespace app

int main(int argc, char *argv[]) {
        double seconds = unwind_args(argc, argv, nullptr, nullptr, 0);

        unwind_ready();
        app::Runner runner(seconds);
        unsigned long caught = runner.run();
        fprintf(stderr, "caught %lu exceptions\n", caught);
        return caught > 0 ? 0 : 1;
}
