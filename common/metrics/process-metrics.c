/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>

#include "fileio.h"
#include "process-metrics.h"

typedef struct ProcStat {
        uint64_t utime, stime, starttime, vsize, rss_pages; /* clock ticks, bytes, pages */
} ProcStat;

static int read_file(const char *dir, const char *name, char **ret) {
        _cleanup_free_ char *path = NULL;

        if (asprintf(&path, "%s/%s", dir, name) < 0)
                return -ENOMEM;
        return read_full_file_max(AT_FDCWD, path, 64 * 1024, ret, NULL);
}

/* /proc/PID/stat: the fields after the ")" that ends comm, from field 3
 * (state) on: 14 utime, 15 stime, 22 starttime, 23 vsize, 24 rss. */
static int read_stat(const char *proc_dir, ProcStat *ret) {
        _cleanup_free_ char *s = NULL;
        char *p, *save = NULL;
        unsigned field = 3;
        int r;

        r = read_file(proc_dir, "stat", &s);
        if (r < 0)
                return r;
        p = strrchr(s, ')');
        if (!p)
                return -EBADMSG;
        *ret = (ProcStat){};
        for (char *t = strtok_r(p + 1, " \n", &save); t; t = strtok_r(NULL, " \n", &save), field++) {
                uint64_t v = strtoull(t, NULL, 10);
                switch (field) {
                case 14:
                        ret->utime = v;
                        break;
                case 15:
                        ret->stime = v;
                        break;
                case 22:
                        ret->starttime = v;
                        break;
                case 23:
                        ret->vsize = v;
                        break;
                case 24:
                        ret->rss_pages = v;
                        return 0;
                }
        }
        return -EBADMSG;
}

/* /proc/stat's btime: the boot time, in seconds since the epoch. */
static int read_btime(uint64_t *ret) {
        _cleanup_free_ char *s = NULL;
        const char *p;
        int r;

        r = read_file("/proc", "stat", &s);
        if (r < 0)
                return r;
        p = strstr(s, "\nbtime ");
        if (!p)
                return -EBADMSG;
        *ret = strtoull(p + 7, NULL, 10);
        return 0;
}

/* /proc/PID/limits: "Max open files  <soft>  <hard>  files". */
static int read_max_fds(const char *proc_dir, uint64_t *ret) {
        _cleanup_free_ char *s = NULL;
        const char *p;
        int r;

        r = read_file(proc_dir, "limits", &s);
        if (r < 0)
                return r;
        p = strstr(s, "Max open files");
        if (!p)
                return -EBADMSG;
        p += strlen("Max open files");
        p += strspn(p, " ");
        if (strncmp(p, "unlimited", 9) == 0) {
                *ret = UINT64_MAX;
                return 0;
        }
        *ret = strtoull(p, NULL, 10);
        return 0;
}

static int count_fds(const char *proc_dir, uint64_t *ret) {
        _cleanup_free_ char *path = NULL;
        struct dirent *de;
        uint64_t n = 0;
        DIR *d;

        if (asprintf(&path, "%s/fd", proc_dir) < 0)
                return -ENOMEM;
        d = opendir(path);
        if (!d)
                return -errno;
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(d);
        /* Not the fd reading the directory, when it is our own. */
        *ret = streq(proc_dir, "/proc/self") && n > 0 ? n - 1 : n;
        return 0;
}

void process_metrics_write(MetricsWriter *w, const char *proc_dir) {
        long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
        uint64_t btime, v = 0;
        ProcStat st;

        if (ticks <= 0)
                ticks = 100;
        if (page <= 0)
                page = 4096;
        if (read_stat(proc_dir, &st) >= 0) {
                metrics_family(w, "process_cpu_seconds_total", METRIC_COUNTER,
                               "Total user and system CPU time spent in seconds.");
                metrics_sample(w, NULL, 0, (double) (st.utime + st.stime) / (double) ticks);
                metrics_gauge(w, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
                              (double) st.vsize);
                metrics_gauge(w, "process_resident_memory_bytes", "Resident memory size in bytes.",
                              (double) st.rss_pages * (double) page);
                if (read_btime(&btime) >= 0)
                        metrics_gauge(w, "process_start_time_seconds",
                                      "Start time of the process since unix epoch in seconds.",
                                      (double) btime + (double) st.starttime / (double) ticks);
        }
        if (count_fds(proc_dir, &v) >= 0)
                metrics_gauge(w, "process_open_fds", "Number of open file descriptors.", (double) v);
        if (read_max_fds(proc_dir, &v) >= 0)
                metrics_gauge(w, "process_max_fds", "Maximum number of open file descriptors.",
                              v == UINT64_MAX ? INFINITY : (double) v);
}
