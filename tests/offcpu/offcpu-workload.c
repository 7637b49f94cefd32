/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Designed waits for the off-CPU tests (tests/integration/test_offcpu.py).
 *
 * Default: a worker thread repeats a 100 ms cycle: 30 ms on CPU
 * (step_cpu), 30 ms in nanosleep() (step_sleep), ~20 ms blocked reading a
 * pipe a helper thread writes to 20 ms later (step_pipe), ~20 ms waiting on
 * a pthread mutex the helper holds for 20 ms (step_mutex). It prints, as
 * JSON, the wall time each step took in the worker, and the worker's and
 * the helper's (threads named "ow-worker" and "ow-helper": the wall-clock
 * view per thread).
 *
 * --migrate: a thread sleeps 20 ms at a time (migrate_sleep) while another
 * pins it alternately to CPU 0 and CPU 1 every 7 ms: it wakes up on
 * another CPU than it slept on. It prints the time it slept.
 *
 * --ping-pong N: two threads pass a byte back and forth over two pipes N
 * times (a context switch per hop), and print the rate (bench/overhead).
 * --spin K: with --ping-pong, each thread spins K loop iterations before it
 * passes the byte on (work per hop: bench/overhead calibrates K for a
 * given rate of switches).
 * --cpu C: with --ping-pong, both threads on CPU C: each hop is a switch
 * from one to the other, not a wake-up of another (maybe idle) CPU, whose
 * latency (an IPI; in a VM, a vCPU to wake) would be what is measured.
 *
 * --page-faults: waits outside any system call. A thread reads the pages
 * of a userfaultfd region one by one, alternately in fault_short() (even
 * pages) and fault_long() (odd), with ~1 ms on CPU after each (no system
 * call: the clock is the vDSO's); a handler thread resolves each fault
 * after 5 ms (even) or 15 ms (odd). It prints the time each function took.
 * Exits 77 where userfaultfd is refused. */

#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static uint64_t now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

static void sleep_us(uint64_t us) {
        struct timespec ts = { .tv_sec = (time_t) (us / 1000000), .tv_nsec = (long) (us % 1000000) * 1000 };
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

enum {
        CMD_PIPE = 1,
        CMD_MUTEX = 2,
        CMD_QUIT = 3
};

static sem_t cmd_sem, locked_sem;
static volatile int cmd;
static int pipefd[2];
static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static volatile uint64_t sink;
static uint64_t t_helper;

static void *helper_main(void *arg) {
        uint64_t start = now_us();

        pthread_setname_np(pthread_self(), "ow-helper");
        for (;;) {
                while (sem_wait(&cmd_sem) < 0)
                        ;
                if (cmd == CMD_QUIT) {
                        t_helper = now_us() - start;
                        return NULL;
                }
                if (cmd == CMD_PIPE) {
                        sleep_us(20000);
                        if (write(pipefd[1], "x", 1) != 1)
                                abort();
                } else {
                        pthread_mutex_lock(&mutex);
                        sem_post(&locked_sem);
                        sleep_us(20000);
                        pthread_mutex_unlock(&mutex);
                }
        }
}

static NOINLINE void step_cpu(uint64_t us) {
        uint64_t end = now_us() + us;
        while (now_us() < end)
                for (int i = 0; i < 1000; i++)
                        sink += (uint64_t) i * i;
}

static NOINLINE void step_sleep(uint64_t us) {
        sleep_us(us);
}

static NOINLINE void step_pipe(void) {
        char c;
        cmd = CMD_PIPE;
        sem_post(&cmd_sem);
        if (read(pipefd[0], &c, 1) != 1)
                abort();
}

static NOINLINE void step_mutex(void) {
        cmd = CMD_MUTEX;
        sem_post(&cmd_sem);
        while (sem_wait(&locked_sem) < 0)
                ;
        pthread_mutex_lock(&mutex); /* held by the helper for 20 ms */
        pthread_mutex_unlock(&mutex);
}

static uint64_t t_cpu, t_sleep, t_pipe, t_mutex, t_wall;

static NOINLINE void *worker_main(void *arg) {
        uint64_t end = now_us() + (uint64_t) (*(double *) arg * 1e6), start = now_us(), t;

        pthread_setname_np(pthread_self(), "ow-worker");
        while (now_us() < end) {
                t = now_us();
                step_cpu(30000);
                t_cpu += now_us() - t;
                t = now_us();
                step_sleep(30000);
                t_sleep += now_us() - t;
                t = now_us();
                step_pipe();
                t_pipe += now_us() - t;
                t = now_us();
                step_mutex();
                t_mutex += now_us() - t;
        }
        t_wall = now_us() - start;
        return NULL;
}

static int designed(double seconds) {
        pthread_t helper, worker;

        if (pipe(pipefd) < 0 || sem_init(&cmd_sem, 0, 0) < 0 || sem_init(&locked_sem, 0, 0) < 0)
                return 1;
        pthread_create(&helper, NULL, helper_main, NULL);
        printf("ready\n");
        fflush(stdout);
        pthread_create(&worker, NULL, worker_main, &seconds);
        pthread_join(worker, NULL);
        cmd = CMD_QUIT;
        sem_post(&cmd_sem);
        pthread_join(helper, NULL);
        printf("{\"step_cpu\": %llu, \"step_sleep\": %llu, \"step_pipe\": %llu, \"step_mutex\": %llu, "
               "\"worker_wall\": %llu, \"helper_wall\": %llu}\n",
               (unsigned long long) t_cpu, (unsigned long long) t_sleep, (unsigned long long) t_pipe,
               (unsigned long long) t_mutex, (unsigned long long) t_wall, (unsigned long long) t_helper);
        return 0;
}

static volatile int migrate_done;
static pid_t sleeper_tid;
static uint64_t slept_us;

static NOINLINE void migrate_sleep(uint64_t us) {
        uint64_t t = now_us();
        sleep_us(us);
        slept_us += now_us() - t;
}

static void *sleeper_main(void *arg) {
        uint64_t end = now_us() + (uint64_t) (*(double *) arg * 1e6);
        sleeper_tid = gettid();
        while (now_us() < end)
                migrate_sleep(20000);
        migrate_done = 1;
        return NULL;
}

static int migrate(double seconds) {
        pthread_t sleeper;
        unsigned flips = 0;

        pthread_create(&sleeper, NULL, sleeper_main, &seconds);
        printf("ready\n");
        fflush(stdout);
        while (!migrate_done) {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(flips++ % 2, &set);
                if (sleeper_tid)
                        (void) sched_setaffinity(sleeper_tid, sizeof(set), &set);
                sleep_us(7000);
        }
        pthread_join(sleeper, NULL);
        printf("{\"slept\": %llu, \"flips\": %u}\n", (unsigned long long) slept_us, flips);
        return 0;
}

static int ping[2], pong[2];
static long hops, spin;

static NOINLINE void hop_work(void) {
        for (long j = 0; j < spin; j++)
                __asm__ volatile("" ::: "memory");
}

static void *ponger(void *arg) {
        char c;
        for (long i = 0; i < hops; i++) {
                if (read(ping[0], &c, 1) != 1)
                        abort();
                hop_work();
                if (write(pong[1], &c, 1) != 1)
                        abort();
        }
        return NULL;
}

static int ping_pong(long n, int cpu) {
        pthread_t t;
        char c = 'x';
        uint64_t start;

        if (cpu >= 0) {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(cpu, &set);
                if (sched_setaffinity(0, sizeof(set), &set) < 0) /* the thread created next inherits it */
                        return 1;
        }
        hops = n;
        if (pipe(ping) < 0 || pipe(pong) < 0)
                return 1;
        pthread_create(&t, NULL, ponger, NULL);
        printf("ready\n");
        start = now_us();
        for (long i = 0; i < n; i++) {
                if (write(ping[1], &c, 1) != 1 || read(pong[0], &c, 1) != 1)
                        abort();
                hop_work();
        }
        uint64_t us = now_us() - start;
        pthread_join(t, NULL);
        printf("{\"round_trips\": %ld, \"spin\": %ld, \"usec\": %llu, \"switches_per_sec\": %.0f}\n", n,
               spin, (unsigned long long) us, 2.0 * (double) n / ((double) us / 1e6));
        return 0;
}

static int uffd = -1;
static char *region;
static long page_size;
static uint64_t t_fault_short, t_fault_long;

static void *fault_handler(void *arg) {
        for (;;) {
                struct pollfd pfd = { .fd = uffd, .events = POLLIN };
                struct uffd_msg msg;

                if (poll(&pfd, 1, -1) < 0 || read(uffd, &msg, sizeof(msg)) != sizeof(msg) ||
                    msg.event != UFFD_EVENT_PAGEFAULT)
                        continue;
                uint64_t addr = msg.arg.pagefault.address & ~((uint64_t) page_size - 1);
                long idx = (long) ((addr - (uint64_t) (uintptr_t) region) / (uint64_t) page_size);
                sleep_us(idx % 2 ? 15000 : 5000);
                struct uffdio_zeropage z = { .range = { .start = addr, .len = (uint64_t) page_size } };
                (void) ioctl(uffd, UFFDIO_ZEROPAGE, &z);
        }
        return NULL;
}

static NOINLINE void fault_short(volatile char *p) {
        uint64_t t = now_us();
        sink += *p;
        t_fault_short += now_us() - t;
}

static NOINLINE void fault_long(volatile char *p) {
        uint64_t t = now_us();
        sink += *p;
        t_fault_long += now_us() - t;
}

static NOINLINE void fault_spin(void) {
        uint64_t end = now_us() + 1000;
        while (now_us() < end)
                sink++;
}

static int page_faults(double seconds) {
        long n = (long) (seconds * 1000 / 11); /* 5 + 15 ms of waits and 2 ms on CPU a pair */
        struct uffdio_api api = { .api = UFFD_API };
        struct uffdio_register reg = {};
        pthread_t handler;

        page_size = sysconf(_SC_PAGESIZE);
        uffd = (int) syscall(SYS_userfaultfd, O_CLOEXEC);
        if (uffd < 0 || ioctl(uffd, UFFDIO_API, &api) < 0) {
                fprintf(stderr, "userfaultfd: %s\n", strerror(errno));
                return 77;
        }
        region = mmap(NULL, (size_t) (n * page_size), PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (region == MAP_FAILED)
                return 1;
        reg.range.start = (uint64_t) (uintptr_t) region;
        reg.range.len = (uint64_t) (n * page_size);
        reg.mode = UFFDIO_REGISTER_MODE_MISSING;
        if (ioctl(uffd, UFFDIO_REGISTER, &reg) < 0) {
                fprintf(stderr, "UFFDIO_REGISTER: %s\n", strerror(errno));
                return 77;
        }
        pthread_create(&handler, NULL, fault_handler, NULL);
        printf("ready\n");
        for (long i = 0; i < n; i++) {
                if (i % 2)
                        fault_long(region + i * page_size);
                else
                        fault_short(region + i * page_size);
                fault_spin();
        }
        printf("{\"short_us\": %llu, \"long_us\": %llu, \"faults\": %ld}\n",
               (unsigned long long) t_fault_short, (unsigned long long) t_fault_long, n);
        return 0;
}

int main(int argc, char *argv[]) {
        double seconds = 3;
        const char *mode = "designed";
        long n = 100000;
        int cpu = -1;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
                        seconds = atof(argv[++i]);
                else if (strcmp(argv[i], "--migrate") == 0)
                        mode = "migrate";
                else if (strcmp(argv[i], "--page-faults") == 0)
                        mode = "page-faults";
                else if (strcmp(argv[i], "--ping-pong") == 0 && i + 1 < argc) {
                        mode = "ping-pong";
                        n = atol(argv[++i]);
                } else if (strcmp(argv[i], "--spin") == 0 && i + 1 < argc)
                        spin = atol(argv[++i]);
                else if (strcmp(argv[i], "--cpu") == 0 && i + 1 < argc)
                        cpu = atoi(argv[++i]);
                else {
                        fprintf(stderr,
                                "usage: %s [--seconds S] [--migrate | --page-faults | --ping-pong N [--spin "
                                "K] "
                                "[--cpu C]]\n",
                                argv[0]);
                        return 2;
                }
        }
        setvbuf(stdout, NULL, _IOLBF, 0);
        if (strcmp(mode, "migrate") == 0)
                return migrate(seconds);
        if (strcmp(mode, "page-faults") == 0)
                return page_faults(seconds);
        if (strcmp(mode, "ping-pong") == 0)
                return ping_pong(n, cpu);
        return designed(seconds);
}
