/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <cjson/cJSON.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "fileio.h"
#include "machine-config.h"

/* State file layout:
 *
 *   { "originals": { "kernel.perf_event_paranoid": "2", ... }, "bootId": "<kernel boot ID>" }
 *
 * "originals" holds the value each sysctl had before this agent first wrote
 * it. "bootId" says in which boot they were saved: sysctls do not survive a
 * reboot, so after one the values found on the node are the originals again
 * and a state file from an earlier boot is stale. Within one boot (a crash and
 * restart of the agent) the saved originals are kept, since the values found
 * on the node are then our own. */

#define WHITESPACE " \t\n\r\v\f"
#define STATE_FILE_MAX (1024 * 1024)
#define SYSCTL_VALUE_MAX 4096
#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

static const char *const machine_change_table[_MACHINE_CHANGE_MAX] = {
        [MACHINE_CHANGE_APPLY] = "apply",
        [MACHINE_CHANGE_DRIFT] = "drift",
        [MACHINE_CHANGE_RESTORE] = "restore",
        [MACHINE_CHANGE_REFUSED] = "refused",
};

const char *machine_change_to_string(MachineChange c) {
        if ((unsigned) c >= _MACHINE_CHANGE_MAX)
                return NULL;
        return machine_change_table[c];
}

static bool sysctl_name_valid(const char *name) {
        size_t n;

        if (!name)
                return false;
        n = strlen(name);
        if (n == 0 || n > 255 || name[0] == '.' || name[n - 1] == '.')
                return false;
        if (strstr(name, ".."))
                return false;
        for (const char *p = name; *p; p++)
                if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '.'))
                        return false;
        return true;
}

int sysctl_path(const char *sysctl_root, const char *name, char **ret) {
        char *p;
        size_t root_len;

        if (!ret)
                return -EINVAL;
        /* Syntax first (this also rules out '/' and ".."), then the allow-list. */
        if (!sysctl_name_valid(name))
                return -EINVAL;
        if (!machine_setting_allowed(name))
                return -EPERM;

        if (!sysctl_root)
                sysctl_root = MACHINE_CONFIG_SYSCTL_ROOT;
        if (asprintf(&p, "%s/%s", sysctl_root, name) < 0)
                return -ENOMEM;

        root_len = strlen(sysctl_root);
        for (char *s = p + root_len + 1; *s; s++)
                if (*s == '.')
                        *s = '/';

        *ret = p;
        return 0;
}

/* What may be written to a sysctl: one line of printable text. */
static bool sysctl_value_valid(const char *value) {
        if (!value || strlen(value) > SYSCTL_VALUE_MAX)
                return false;
        if (value[strspn(value, WHITESPACE)] == 0)
                return false;
        for (const char *p = value; *p; p++)
                if ((*p > 0 && *p < ' ' && *p != '\t') || *p == 0x7f)
                        return false;
        return true;
}

/* Equal with whitespace runs folded and leading/trailing whitespace ignored:
 * "4096\t8192" == "4096 8192", which is how the kernel prints multi-value
 * sysctls. */
bool machine_value_equal(const char *a, const char *b) {
        for (;;) {
                size_t la, lb;

                a += strspn(a, WHITESPACE);
                b += strspn(b, WHITESPACE);
                la = strcspn(a, WHITESPACE);
                lb = strcspn(b, WHITESPACE);
                if (la != lb || memcmp(a, b, la) != 0)
                        return false;
                if (la == 0)
                        return true; /* both at their end */
                a += la;
                b += lb;
        }
}

/* The first line of a file, without its trailing newline. */
static int read_first_line(const char *path, char **ret) {
        _cleanup_fclose_ FILE *f = NULL;
        _cleanup_free_ char *line = NULL;
        _cleanup_close_ int fd = -EBADF;
        size_t allocated = 0;
        ssize_t n;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
        if (fd < 0)
                return negative_errno();
        f = fdopen(fd, "r");
        if (!f)
                return negative_errno();
        TAKE_FD(fd);

        errno = 0;
        n = getline(&line, &allocated, f);
        if (n < 0) {
                if (ferror(f))
                        return errno > 0 ? -errno : -EIO;
                /* empty file */
                line = strdup("");
                if (!line)
                        return -ENOMEM;
        } else if (n > 0 && line[n - 1] == '\n')
                line[n - 1] = 0;

        *ret = TAKE_PTR(line);
        return 0;
}

/* Writes value + "\n" in one write(), as the kernel wants a sysctl written. */
static int write_sysctl(const char *path, const char *value) {
        _cleanup_free_ char *s = NULL;
        _cleanup_close_ int fd = -EBADF;
        ssize_t k;
        int n;

        n = asprintf(&s, "%s\n", value);
        if (n < 0)
                return -ENOMEM;

        fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOCTTY | O_NOFOLLOW);
        if (fd < 0)
                return negative_errno();

        k = write(fd, s, (size_t) n);
        if (k < 0)
                return negative_errno();
        if (k != n)
                return -EIO;
        return 0;
}

static int loop_write(int fd, const char *data, size_t size) {
        while (size > 0) {
                ssize_t k = write(fd, data, size);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return negative_errno();
                }
                if (k == 0)
                        return -EIO;
                data += k;
                size -= (size_t) k;
        }
        return 0;
}

/* Creates dir (mode 0700) and, as needed, its parents (mode 0755). */
static int mkdir_state_dir(const char *dir) {
        _cleanup_free_ char *p = NULL;

        if (mkdir(dir, 0700) >= 0 || errno == EEXIST)
                return 0;
        if (errno != ENOENT)
                return negative_errno();

        p = strdup(dir);
        if (!p)
                return -ENOMEM;
        for (char *s = p + 1; *s; s++) {
                if (*s != '/')
                        continue;
                *s = 0;
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                        return negative_errno();
                *s = '/';
        }

        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return negative_errno();
        return 0;
}

/* Atomic replace: a temporary file in the same directory, written, fsync()ed
 * and renamed over 'name'. A reader (or the agent after a crash) sees the old
 * file or the new one, never a part. */
static int write_file_atomic(const char *dir, const char *name, const char *data) {
        _cleanup_free_ char *path = NULL, *tmp = NULL;
        _cleanup_close_ int fd = -EBADF, dfd = -EBADF;
        int r;

        if (asprintf(&path, "%s/%s", dir, name) < 0)
                return -ENOMEM;
        if (asprintf(&tmp, "%s/.#%sXXXXXX", dir, name) < 0)
                return -ENOMEM;

        fd = mkostemp(tmp, O_CLOEXEC); /* mode 0600 */
        if (fd < 0)
                return negative_errno();

        r = loop_write(fd, data, strlen(data));
        if (r >= 0 && fsync(fd) < 0)
                r = negative_errno();
        if (r >= 0 && rename(tmp, path) < 0)
                r = negative_errno();
        if (r < 0) {
                (void) unlink(tmp);
                return r;
        }

        /* Make the rename itself durable. Best effort: what the state file
         * protects against is a crash of the agent, and sysctls do not survive
         * a crash of the machine anyway. */
        dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0)
                (void) fsync(dfd);
        return 0;
}

static int boot_id(char **ret) {
        return read_first_line(BOOT_ID_PATH, ret);
}

static char *state_file_path(const char *state_dir) {
        char *p;

        if (asprintf(&p, "%s/%s", state_dir, MACHINE_CONFIG_STATE_FILE) < 0)
                return NULL;
        return p;
}

/* Loads the saved originals. Returns 0 and an empty object if there is no
 * state file, 1 if there is one (its originals are empty when it is stale,
 * from an earlier boot), -EBADMSG if it is not what we write. */
static int state_load(const char *state_dir, cJSON **ret) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL, *originals = NULL;
        _cleanup_free_ char *path = NULL, *text = NULL, *current_boot = NULL;
        cJSON *o, *b, *item;
        int r;

        path = state_file_path(state_dir);
        if (!path)
                return -ENOMEM;

        r = read_full_file_max(AT_FDCWD, path, STATE_FILE_MAX, &text, NULL);
        if (r == -ENOENT) {
                originals = cJSON_CreateObject();
                if (!originals)
                        return -ENOMEM;
                *ret = TAKE_PTR(originals);
                return 0;
        }
        if (r < 0)
                return r;

        root = cJSON_Parse(text);
        if (!cJSON_IsObject(root))
                return -EBADMSG;

        o = cJSON_GetObjectItemCaseSensitive(root, "originals");
        if (o && !cJSON_IsObject(o))
                return -EBADMSG;
        b = cJSON_GetObjectItemCaseSensitive(root, "bootId");
        if (b && !cJSON_IsString(b))
                return -EBADMSG;

        cJSON_ArrayForEach (item, o) {
                _cleanup_free_ char *p = NULL;

                if (!cJSON_IsString(item) || !sysctl_value_valid(item->valuestring))
                        return -EBADMSG;
                /* Never write back something that is not allow-listed, nor
                 * keep it around. */
                r = sysctl_path(NULL, item->string, &p);
                if (r < 0)
                        return -EBADMSG;
        }

        /* A state file from an earlier boot: the kernel has since reset every
         * sysctl, so what is on the node now are the originals. Without a boot
         * ID (ours or the file's) keep what was saved. */
        if (b && boot_id(&current_boot) >= 0 && !streq(current_boot, b->valuestring))
                o = NULL;

        if (o)
                originals = cJSON_DetachItemViaPointer(root, o);
        else
                originals = cJSON_CreateObject();
        if (!originals)
                return -ENOMEM;

        *ret = TAKE_PTR(originals);
        return 1;
}

/* Saves the originals, or removes the state file when there are none left. */
static int state_save(const char *state_dir, cJSON *originals) {
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        _cleanup_free_ char *text = NULL, *id = NULL;
        char *json;
        int r;

        if (!originals->child) {
                _cleanup_free_ char *path = state_file_path(state_dir);
                if (!path)
                        return -ENOMEM;
                if (unlink(path) < 0 && errno != ENOENT)
                        return negative_errno();
                return 0;
        }

        root = cJSON_CreateObject();
        if (!root)
                return -ENOMEM;
        /* A reference: deleting root leaves the caller's object alone. */
        if (!cJSON_AddItemReferenceToObject(root, "originals", originals))
                return -ENOMEM;
        if (boot_id(&id) >= 0 && !cJSON_AddStringToObject(root, "bootId", id))
                return -ENOMEM;

        json = cJSON_Print(root);
        if (!json)
                return -ENOMEM;
        /* cJSON_Print() leaves out the final newline. */
        r = asprintf(&text, "%s\n", json);
        cJSON_free(json);
        if (r < 0)
                return -ENOMEM;

        r = mkdir_state_dir(state_dir);
        if (r < 0)
                return r;
        return write_file_atomic(state_dir, MACHINE_CONFIG_STATE_FILE, text);
}

/* Writes one original back, if the sysctl does not already hold it. */
static int restore_one(const char *sysctl_root, const char *name, const char *original,
                       MachineChangeCallback cb, void *userdata) {
        _cleanup_free_ char *path = NULL, *current = NULL;
        int r;

        r = sysctl_path(sysctl_root, name, &path);
        if (r < 0)
                return r;
        r = read_first_line(path, &current);
        if (r < 0)
                return r;
        if (machine_value_equal(current, original))
                return 0;

        r = write_sysctl(path, original);
        if (r < 0)
                return r;
        if (cb)
                cb(name, current, original, MACHINE_CHANGE_RESTORE, userdata);
        return 1;
}

static bool settings_contain(const MachineSetting *settings, size_t n_settings, const char *name) {
        for (size_t i = 0; i < n_settings; i++)
                if (streq_ptr(settings[i].name, name))
                        return true;
        return false;
}

typedef struct PendingWrite {
        char *path; /* NULL: nothing to write */
        char *current;
        bool new_original; /* its original is saved by this call */
} PendingWrite;

static void pending_free_many(PendingWrite *p, size_t n) {
        if (!p)
                return;
        for (size_t i = 0; i < n; i++) {
                free(p[i].path);
                free(p[i].current);
        }
        free(p);
}

#define RET_GATHER(ret, r)                 \
        do {                               \
                int _r_ = (r);             \
                if ((ret) == 0 && _r_ < 0) \
                        (ret) = _r_;       \
        } while (0)

int machine_config_apply(const char *state_dir, const char *sysctl_root, const MachineSetting *settings,
                         size_t n_settings, bool initial, MachineChangeCallback cb, void *userdata) {
        return machine_config_apply_keep(state_dir, sysctl_root, settings, n_settings, NULL, initial, cb,
                                         userdata);
}

static bool strv_has(char *const *l, const char *s) {
        for (; l && *l; l++)
                if (streq(*l, s))
                        return true;
        return false;
}

/* What machine_config_apply_keep() works on, from one step to the next. */
typedef struct ApplyRun {
        const char *state_dir;
        const char *sysctl_root;
        const MachineSetting *settings;
        size_t n_settings;
        MachineChangeCallback cb;
        void *userdata;
        cJSON *originals;
        PendingWrite *pending; /* one per setting */
        int ret; /* the first error; the run goes on past it */
} ApplyRun;

static void apply_run_done(ApplyRun *run) {
        pending_free_many(run->pending, run->n_settings);
        cJSON_Delete(run->originals);
}

static void apply_refused(ApplyRun *run, size_t i, const char *current) {
        if (run->cb)
                run->cb(run->settings[i].name, current, run->settings[i].value, MACHINE_CHANGE_REFUSED,
                        run->userdata);
}

/* Reads the sysctl of setting i: its path and current value go to pending[i]
 * when it holds something else, pending[i] stays empty when it already holds
 * the value. Returns a negative errno when the setting is refused or its
 * sysctl cannot be read. */
static int apply_read_one(ApplyRun *run, size_t i) {
        const MachineSetting *s = run->settings + i;
        _cleanup_free_ char *path = NULL, *current = NULL;
        int r;

        r = sysctl_path(run->sysctl_root, s->name, &path);
        if (r < 0) {
                apply_refused(run, i, NULL);
                return r;
        }
        if (!sysctl_value_valid(s->value)) {
                apply_refused(run, i, NULL);
                return -EINVAL;
        }
        r = read_first_line(path, &current);
        if (r < 0)
                return r;
        if (machine_value_equal(current, s->value))
                return 0;

        run->pending[i].path = TAKE_PTR(path);
        run->pending[i].current = TAKE_PTR(current);
        return 0;
}

/* First: finds what differs and notes the originals of what is about to be
 * written for the first time. Returns 1 if it noted any, 0 if not, -ENOMEM
 * (the run ends) when it cannot. */
static int apply_find_changes(ApplyRun *run) {
        bool added = false;
        int r;

        for (size_t i = 0; i < run->n_settings; i++) {
                const MachineSetting *s = run->settings + i;

                /* Should the same name come twice, the last one wins. */
                if (settings_contain(s + 1, run->n_settings - i - 1, s->name))
                        continue;

                r = apply_read_one(run, i);
                if (r < 0) {
                        RET_GATHER(run->ret, r);
                        continue;
                }
                if (!run->pending[i].path)
                        continue;

                if (!cJSON_GetObjectItemCaseSensitive(run->originals, s->name)) {
                        if (!cJSON_AddStringToObject(run->originals, s->name, run->pending[i].current))
                                return -ENOMEM;
                        run->pending[i].new_original = true;
                        added = true;
                }
        }
        return added;
}

/* Second: the originals reach the disk before any sysctl is written. If they
 * cannot, only those whose originals were saved earlier are written. */
static void apply_save_originals(ApplyRun *run) {
        int r;

        r = state_save(run->state_dir, run->originals);
        if (r >= 0)
                return;

        RET_GATHER(run->ret, r);
        for (size_t i = 0; i < run->n_settings; i++)
                if (run->pending[i].new_original) {
                        cJSON_DeleteItemFromObjectCaseSensitive(run->originals, run->settings[i].name);
                        free(run->pending[i].path);
                        run->pending[i].path = NULL;
                }
}

/* Third: writes what differs. */
static void apply_write(ApplyRun *run, bool initial) {
        int r;

        for (size_t i = 0; i < run->n_settings; i++) {
                const MachineSetting *s = run->settings + i;
                PendingWrite *p = run->pending + i;

                if (!p->path)
                        continue;
                r = write_sysctl(p->path, s->value);
                if (r < 0) {
                        RET_GATHER(run->ret, r);
                        apply_refused(run, i, p->current);
                        continue;
                }
                if (run->cb)
                        run->cb(s->name, p->current, s->value,
                                initial ? MACHINE_CHANGE_APPLY : MACHINE_CHANGE_DRIFT, run->userdata);
        }
}

/* Last: settings no longer configured (nor kept) get their originals back
 * and leave the state file. One that cannot be restored stays in it.
 * Returns whether any left. */
static bool apply_restore_dropped(ApplyRun *run, char *const *keep) {
        bool dropped = false;
        cJSON *item, *next;
        int r;

        for (item = run->originals->child; item; item = next) {
                next = item->next;
                if (settings_contain(run->settings, run->n_settings, item->string) ||
                    strv_has(keep, item->string))
                        continue;
                r = restore_one(run->sysctl_root, item->string, item->valuestring, run->cb, run->userdata);
                if (r < 0) {
                        RET_GATHER(run->ret, r);
                        continue;
                }
                cJSON_Delete(cJSON_DetachItemViaPointer(run->originals, item));
                dropped = true;
        }
        return dropped;
}

int machine_config_apply_keep(const char *state_dir, const char *sysctl_root, const MachineSetting *settings,
                              size_t n_settings, char *const *keep, bool initial, MachineChangeCallback cb,
                              void *userdata) {
        _cleanup_(apply_run_done) ApplyRun run = {
                .state_dir = state_dir,
                .sysctl_root = sysctl_root,
                .settings = settings,
                .n_settings = n_settings,
                .cb = cb,
                .userdata = userdata,
        };
        bool had_file, dropped;
        int r;

        if (!state_dir || (n_settings > 0 && !settings))
                return -EINVAL;

        r = state_load(state_dir, &run.originals);
        if (r < 0)
                return r;
        had_file = r > 0;

        if (n_settings > 0) {
                run.pending = calloc(n_settings, sizeof(PendingWrite));
                if (!run.pending)
                        return -ENOMEM;
        }

        r = apply_find_changes(&run);
        if (r < 0)
                return r;
        if (r > 0)
                apply_save_originals(&run);
        apply_write(&run, initial);

        dropped = apply_restore_dropped(&run, keep);
        if (dropped || (had_file && !run.originals->child)) {
                r = state_save(state_dir, run.originals);
                RET_GATHER(run.ret, r);
        }

        return run.ret;
}

int machine_config_restore(const char *state_dir, const char *sysctl_root, MachineChangeCallback cb,
                           void *userdata) {
        _cleanup_(cJSON_Deletep) cJSON *originals = NULL;
        cJSON *item, *next;
        int r, ret = 0;

        if (!state_dir)
                return -EINVAL;

        r = state_load(state_dir, &originals);
        if (r <= 0)
                return r; /* error, or nothing saved */

        for (item = originals->child; item; item = next) {
                next = item->next;
                r = restore_one(sysctl_root, item->string, item->valuestring, cb, userdata);
                if (r < 0) {
                        RET_GATHER(ret, r);
                        continue;
                }
                cJSON_Delete(cJSON_DetachItemViaPointer(originals, item));
        }

        /* Removes the file, or keeps what could not be restored. */
        r = state_save(state_dir, originals);
        RET_GATHER(ret, r);
        return ret;
}
