/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "debuginfod-cache.h"

bool debuginfod_build_id_valid(const char *s) {
        size_t n;

        if (!s)
                return false;
        n = strlen(s);
        if (n < 2 || n > 128 || n % 2 != 0)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

static int file_use_compare(const void *a, const void *b, void *userdata) {
        const DebuginfodCacheFile *files = userdata;
        const DebuginfodCacheFile *x = &files[*(const size_t *) a], *y = &files[*(const size_t *) b];
        int r = CMP(x->last_use_nsec, y->last_use_nsec);

        return r != 0 ? r : strcmp(strempty(x->name), strempty(y->name));
}

int debuginfod_cache_prune_plan(const DebuginfodCacheFile *files, size_t n, uint64_t max_bytes, size_t **ret,
                                size_t *ret_n) {
        _cleanup_free_ size_t *order = NULL;
        uint64_t total = 0;
        size_t k = 0, m = 0;

        if ((n > 0 && !files) || !ret || !ret_n)
                return -EINVAL;

        for (size_t i = 0; i < n; i++) {
                total += files[i].size;
                if (files[i].size > 0)
                        m++;
        }
        if (total <= max_bytes || m == 0) {
                *ret = NULL;
                *ret_n = 0;
                return 0;
        }

        order = malloc(m * sizeof(size_t));
        if (!order)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (files[i].size > 0)
                        order[k++] = i;
        qsort_r(order, m, sizeof(size_t), file_use_compare, (void *) files);

        for (k = 0; k < m && total > max_bytes; k++)
                total -= files[order[k]].size;

        *ret_n = k;
        *ret = TAKE_PTR(order);
        return 0;
}

typedef struct Found {
        DebuginfodCacheFile *files;
        char **names;
        size_t n, n_alloc;
} Found;

static void found_done(Found *f) {
        for (size_t i = 0; i < f->n; i++)
                free(f->names[i]);
        free(f->names);
        free(f->files);
        *f = (Found){};
}

static int found_add(Found *f, const char *dir, const char *file, const struct stat *st) {
        char *name;

        if (f->n >= f->n_alloc) {
                size_t n = MAX(f->n_alloc * 2, (size_t) 64);
                DebuginfodCacheFile *files = reallocarray(f->files, n, sizeof(DebuginfodCacheFile));
                char **names;

                if (!files)
                        return -ENOMEM;
                f->files = files;
                names = reallocarray(f->names, n, sizeof(char *));
                if (!names)
                        return -ENOMEM;
                f->names = names;
                f->n_alloc = n;
        }
        if (asprintf(&name, "%s/%s", dir, file) < 0)
                return -ENOMEM;
        f->names[f->n] = name;
        f->files[f->n] = (DebuginfodCacheFile){
                .name = name,
                .size = (uint64_t) st->st_size,
                .last_use_nsec =
                        (uint64_t) st->st_atim.tv_sec * NSEC_PER_SEC + (uint64_t) st->st_atim.tv_nsec,
        };
        f->n++;
        return 0;
}

/* The regular files of one build-ID directory. */
static int scan_build_id_dir(int dir_fd, const char *name, Found *found) {
        _cleanup_close_ int fd = -EBADF;
        DIR *d;
        struct dirent *de;
        int r = 0;

        fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT || errno == ELOOP || errno == ENOTDIR ? 0 : negative_errno();
        d = fdopendir(fd);
        if (!d)
                return negative_errno();
        TAKE_FD(fd);
        while ((de = readdir(d))) {
                struct stat st;

                if (streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                r = found_add(found, name, de->d_name, &st);
                if (r < 0)
                        break;
        }
        closedir(d);
        return r;
}

int debuginfod_cache_prune(int dir_fd, uint64_t max_bytes, DebuginfodCachePruneResult *ret) {
        _cleanup_(found_done) Found found = {};
        _cleanup_free_ size_t *victims = NULL;
        DebuginfodCachePruneResult res = {};
        _cleanup_close_ int fd = -EBADF;
        size_t n_victims = 0;
        struct dirent *de;
        DIR *d;
        int r = 0;

        if (dir_fd < 0)
                return -EBADF;
        fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        d = fdopendir(fd);
        if (!d)
                return negative_errno();
        TAKE_FD(fd);
        while ((de = readdir(d)))
                if (debuginfod_build_id_valid(de->d_name)) {
                        r = scan_build_id_dir(dirfd(d), de->d_name, &found);
                        if (r < 0)
                                break;
                }
        closedir(d);
        if (r < 0)
                return r;

        res.files = found.n;
        for (size_t i = 0; i < found.n; i++)
                res.bytes += found.files[i].size;

        r = debuginfod_cache_prune_plan(found.files, found.n, max_bytes, &victims, &n_victims);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n_victims; i++) {
                const DebuginfodCacheFile *f = &found.files[victims[i]];
                _cleanup_free_ char *dir = strndup(f->name, strcspn(f->name, "/"));

                if (unlinkat(dir_fd, f->name, 0) < 0)
                        continue; /* gone meanwhile, or not ours to remove */
                res.removed++;
                res.removed_bytes += f->size;
                if (dir)
                        (void) unlinkat(dir_fd, dir, AT_REMOVEDIR); /* fails unless empty */
        }

        if (ret)
                *ret = res;
        return 0;
}
