/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The signal-frame unwinding fixture, -O2 -fomit-frame-pointer: a CPU-bound
 * SIGALRM handler interrupting a CPU-bound function,
 *   main -> interrupted_work                    (between signals)
 *   main -> interrupted_work -> [__restore_rt] -> alarm_handler
 * The kernel delivers the signal on the interrupted stack: the handler's
 * caller is glibc's signal trampoline (__restore_rt), whose unwind entry
 * says the interrupted registers are in the ucontext the kernel saved.
 * A timer on the process's CPU time asks for SIGALRM every 4 ms of CPU
 * (the kernel checks CPU timers at its ticks: in practice every ~10 ms);
 * the handler spins for about 3 ms, a fifth to a half of the time. A
 * real-time timer on a busy machine could fire again before the handler
 * ends, and starve the interrupted function; past the run's end the
 * handler returns at once, so the run ends whatever the timer does.
 *
 * cgprof-unwind-signal [--seconds S]: runs for S seconds of CPU time;
 * prints "ready <pid>" once started. */
#include <signal.h>
#include <time.h>

#include "unwind-common.h"

static volatile uint64_t sink;
static volatile sig_atomic_t handled;
static double cpu_end; /* the run's end, in CPU time */

CHAIN void alarm_handler(int sig) {
        (void) sig;
        /* Past the end: return at once, so the interrupted function runs
         * (and ends) whatever the timer does. */
        if (unwind_cpu_now() >= cpu_end)
                return;
        UNWIND_SPIN(sink, 30);
        handled++;
}

/* Spins until the CPU time is up (the clock is read by unwind_running()
 * every 8th unit). */
CHAIN void interrupted_work(double seconds) {
        while (unwind_running(seconds))
                UNWIND_SPIN(sink, 1);
        BARRIER();
}

int main(int argc, char *argv[]) {
        double seconds = unwind_args(argc, argv, NULL, NULL, 0);
        struct sigaction sa = { .sa_handler = alarm_handler, .sa_flags = SA_RESTART };
        struct sigevent ev = { .sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGALRM };
        struct itimerspec every = { .it_interval = { 0, 4000000 }, .it_value = { 0, 4000000 } };
        timer_t timer;

        sigemptyset(&sa.sa_mask);
        cpu_end = unwind_cpu_now() + seconds;
        if (sigaction(SIGALRM, &sa, NULL) < 0 || timer_create(CLOCK_PROCESS_CPUTIME_ID, &ev, &timer) < 0 ||
            timer_settime(timer, 0, &every, NULL) < 0) {
                perror("SIGALRM");
                return 1;
        }
        unwind_ready();
        interrupted_work(seconds);
        BARRIER();
        timer_delete(timer);
        printf("handled %d\n", (int) handled);
        return 0;
}
