/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>

#include "machine-config.h"
#include "machine-select.h"
#include "tests.h"

/* Every test runs against a fake sysctl tree in a temporary directory:
 * <tmp>/sys/kernel/perf_event_paranoid etc., and a state directory
 * <tmp>/state/sub that does not exist yet. */

typedef struct Fixture {
        char dir[64];
        char *sysctl_root;
        char *state_dir;
} Fixture;

typedef struct Change {
        char *name;
        char *old_value;
        char *new_value;
        MachineChange change;
} Change;

typedef struct Recorder {
        Change changes[16];
        size_t n;
        size_t refused; /* MACHINE_CHANGE_REFUSED, not in changes[] */
} Recorder;

static void record(const char *name, const char *old_value, const char *new_value, MachineChange change,
                   void *userdata) {
        Recorder *rec = userdata;

        if (change == MACHINE_CHANGE_REFUSED) {
                ASSERT_NOT_NULL(name);
                rec->refused++;
                return;
        }
        ASSERT_TRUE(rec->n < ELEMENTSOF(rec->changes));
        rec->changes[rec->n++] = (Change){
                .name = strdup(name),
                .old_value = strdup(old_value),
                .new_value = strdup(new_value),
                .change = change,
        };
}

static void recorder_reset(Recorder *rec) {
        for (size_t i = 0; i < rec->n; i++) {
                free(rec->changes[i].name);
                free(rec->changes[i].old_value);
                free(rec->changes[i].new_value);
        }
        rec->n = 0;
}

static const Change *recorder_find(const Recorder *rec, const char *name) {
        for (size_t i = 0; i < rec->n; i++)
                if (streq(rec->changes[i].name, name))
                        return rec->changes + i;
        return NULL;
}

static void assert_change(const Recorder *rec, const char *name, const char *old_value,
                          const char *new_value, MachineChange change) {
        const Change *c = recorder_find(rec, name);

        ASSERT_NOT_NULL(c);
        ASSERT_STREQ(c->old_value, old_value);
        ASSERT_STREQ(c->new_value, new_value);
        ASSERT_STREQ(machine_change_to_string(c->change), machine_change_to_string(change));
}

static char *path_join(const char *a, const char *b) {
        char *p;

        ASSERT_TRUE(asprintf(&p, "%s/%s", a, b) >= 0);
        return p;
}

static void write_file(const char *path, const char *content) {
        FILE *f = fopen(path, "we");

        ASSERT_NOT_NULL(f);
        ASSERT_TRUE(fputs(content, f) >= 0);
        ASSERT_EQ(fclose(f), 0);
}

static char *read_file(const char *path) {
        FILE *f = fopen(path, "re");
        char *buf;
        size_t n;

        ASSERT_NOT_NULL(f);
        buf = calloc(1, 65536);
        ASSERT_NOT_NULL(buf);
        n = fread(buf, 1, 65535, f);
        ASSERT_TRUE(!ferror(f));
        buf[n] = 0;
        fclose(f);
        return buf;
}

static void sysctl_set(const Fixture *fx, const char *rel, const char *content) {
        _cleanup_free_ char *p = path_join(fx->sysctl_root, rel);
        write_file(p, content);
}

/* The whole file, so that a stray byte after the newline shows. */
static char *sysctl_get(const Fixture *fx, const char *rel) {
        _cleanup_free_ char *p = path_join(fx->sysctl_root, rel);
        return read_file(p);
}

static void fixture_setup(Fixture *fx) {
        _cleanup_free_ char *kernel = NULL, *state_parent = NULL;

        strcpy(fx->dir, "/tmp/test-machine-config.XXXXXX");
        ASSERT_NOT_NULL(mkdtemp(fx->dir));
        fx->sysctl_root = path_join(fx->dir, "sys");
        ASSERT_EQ(mkdir(fx->sysctl_root, 0755), 0);
        kernel = path_join(fx->sysctl_root, "kernel");
        ASSERT_EQ(mkdir(kernel, 0755), 0);

        sysctl_set(fx, "kernel/perf_event_paranoid", "2\n");
        sysctl_set(fx, "kernel/perf_event_max_stack", "127\n");
        sysctl_set(fx, "kernel/perf_event_mlock_kb", "516\n");
        sysctl_set(fx, "kernel/kptr_restrict", "0\n");
        sysctl_set(fx, "kernel/core_pattern", "core\n");

        /* Two levels that do not exist: the state directory and its parent
         * are created on the first save. */
        state_parent = path_join(fx->dir, "state");
        fx->state_dir = path_join(state_parent, "sub");
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(path);
}

static void fixture_teardown(Fixture *fx) {
        ASSERT_EQ(nftw(fx->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS), 0);
        free(fx->sysctl_root);
        free(fx->state_dir);
}

static void make_state_dir(const Fixture *fx) {
        _cleanup_free_ char *parent = path_join(fx->dir, "state");

        ASSERT_EQ(mkdir(parent, 0755), 0);
        ASSERT_EQ(mkdir(fx->state_dir, 0700), 0);
}

static size_t count_entries(const char *dir) {
        DIR *d = opendir(dir);
        struct dirent *de;
        size_t n = 0;

        ASSERT_NOT_NULL(d);
        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        n++;
        closedir(d);
        return n;
}

static char *state_path(const Fixture *fx) {
        return path_join(fx->state_dir, MACHINE_CONFIG_STATE_FILE);
}

static bool state_exists(const Fixture *fx) {
        _cleanup_free_ char *p = state_path(fx);
        return access(p, F_OK) >= 0;
}

/* The saved original of a sysctl, or NULL. */
static char *state_original(const Fixture *fx, const char *name) {
        _cleanup_free_ char *p = state_path(fx), *text = read_file(p);
        cJSON *root, *o, *v;
        char *ret = NULL;

        root = cJSON_Parse(text);
        ASSERT_TRUE(cJSON_IsObject(root));
        o = cJSON_GetObjectItemCaseSensitive(root, "originals");
        ASSERT_TRUE(cJSON_IsObject(o));
        v = cJSON_GetObjectItemCaseSensitive(o, name);
        if (v) {
                ASSERT_TRUE(cJSON_IsString(v));
                ret = strdup(v->valuestring);
        }
        cJSON_Delete(root);
        return ret;
}

static size_t state_count(const Fixture *fx) {
        _cleanup_free_ char *p = state_path(fx), *text = read_file(p);
        cJSON *root = cJSON_Parse(text);
        size_t n;

        ASSERT_TRUE(cJSON_IsObject(root));
        n = (size_t) cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(root, "originals"));
        cJSON_Delete(root);
        return n;
}

#define ASSERT_FILE(fx, rel, content)                              \
        do {                                                       \
                _cleanup_free_ char *_c = sysctl_get((fx), (rel)); \
                ASSERT_STREQ(_c, (content));                       \
        } while (0)

#define ASSERT_ORIGINAL(fx, name, value)                                \
        do {                                                            \
                _cleanup_free_ char *_o = state_original((fx), (name)); \
                ASSERT_STREQ(_o, (value));                              \
        } while (0)

static const MachineSetting two_settings[] = {
        { .name = (char *) "kernel.perf_event_paranoid", .value = (char *) "-1" },
        { .name = (char *) "kernel.perf_event_max_stack", .value = (char *) "512" },
};

TEST(change_to_string) {
        ASSERT_STREQ(machine_change_to_string(MACHINE_CHANGE_APPLY), "apply");
        ASSERT_STREQ(machine_change_to_string(MACHINE_CHANGE_DRIFT), "drift");
        ASSERT_STREQ(machine_change_to_string(MACHINE_CHANGE_RESTORE), "restore");
        ASSERT_STREQ(machine_change_to_string(MACHINE_CHANGE_REFUSED), "refused");
        ASSERT_NULL(machine_change_to_string(_MACHINE_CHANGE_MAX));
        ASSERT_NULL(machine_change_to_string((MachineChange) -1));
}

TEST(sysctl_path) {
        _cleanup_free_ char *p = NULL, *q = NULL;
        char *x = NULL;

        ASSERT_OK(sysctl_path("/root", "kernel.perf_event_paranoid", &p));
        ASSERT_STREQ(p, "/root/kernel/perf_event_paranoid");
        /* Dots in the root stay dots. */
        ASSERT_OK(sysctl_path("/tmp/a.b", "kernel.kptr_restrict", &q));
        ASSERT_STREQ(q, "/tmp/a.b/kernel/kptr_restrict");
        free(p);
        p = NULL;
        ASSERT_OK(sysctl_path(NULL, "kernel.perf_event_max_sample_rate", &p));
        ASSERT_STREQ(p, "/proc/sys/kernel/perf_event_max_sample_rate");

        /* Well formed, not allow-listed. */
        ASSERT_ERROR(sysctl_path("/root", "kernel.core_pattern", &x), EPERM);
        ASSERT_ERROR(sysctl_path("/root", "vm.overcommit_memory", &x), EPERM);
        ASSERT_ERROR(sysctl_path("/root", "kernel.perf_event_paranoid.x", &x), EPERM);

        /* Malformed. */
        ASSERT_ERROR(sysctl_path("/root", "kernel/perf_event_paranoid", &x), EINVAL);
        ASSERT_ERROR(sysctl_path("/root", "kernel.perf_event_paranoid/../core_pattern", &x), EINVAL);
        ASSERT_ERROR(sysctl_path("/root", "kernel..perf_event_paranoid", &x), EINVAL);
        ASSERT_ERROR(sysctl_path("/root", "../kernel.perf_event_paranoid", &x), EINVAL);
        ASSERT_ERROR(sysctl_path("/root", ".kernel.perf_event_paranoid", &x), EINVAL);
        ASSERT_ERROR(sysctl_path("/root", "kernel.perf_event_paranoid.", &x), EINVAL);
        ASSERT_ERROR(sysctl_path("/root", "Kernel.perf_event_paranoid", &x), EINVAL);
        ASSERT_ERROR(sysctl_path("/root", "kernel.perf event", &x), EINVAL);
        ASSERT_ERROR(sysctl_path("/root", "", &x), EINVAL);
        ASSERT_ERROR(sysctl_path("/root", NULL, &x), EINVAL);
        ASSERT_NULL(x);
}

TEST(apply_saves_originals_and_writes) {
        Fixture fx;
        Recorder rec = {};
        struct stat st;

        fixture_setup(&fx);

        ASSERT_OK(machine_config_apply(fx.state_dir, fx.sysctl_root, two_settings, ELEMENTSOF(two_settings),
                                       true, record, &rec));
        ASSERT_EQ(rec.n, 2);
        assert_change(&rec, "kernel.perf_event_paranoid", "2", "-1", MACHINE_CHANGE_APPLY);
        assert_change(&rec, "kernel.perf_event_max_stack", "127", "512", MACHINE_CHANGE_APPLY);

        /* value + "\n", nothing else left of the old content */
        ASSERT_FILE(&fx, "kernel/perf_event_paranoid", "-1\n");
        ASSERT_FILE(&fx, "kernel/perf_event_max_stack", "512\n");
        ASSERT_FILE(&fx, "kernel/perf_event_mlock_kb", "516\n");

        ASSERT_EQ(state_count(&fx), 2);
        ASSERT_ORIGINAL(&fx, "kernel.perf_event_paranoid", "2");
        ASSERT_ORIGINAL(&fx, "kernel.perf_event_max_stack", "127");

        /* The state directory is private; its missing parent was made too. */
        ASSERT_EQ(stat(fx.state_dir, &st), 0);
        ASSERT_EQ(st.st_mode & 07777, 0700);
        /* No temporary file left behind. */
        ASSERT_EQ(count_entries(fx.state_dir), 1);

        recorder_reset(&rec);
        fixture_teardown(&fx);
}

TEST(apply_without_saved_originals_writes_nothing) {
        _cleanup_free_ char *blocker = NULL, *bad_state = NULL;
        Fixture fx;
        Recorder rec = {};

        fixture_setup(&fx);

        /* The state directory cannot be created (its parent is a file): the
         * originals cannot be saved, so nothing may be written. */
        blocker = path_join(fx.dir, "blocker");
        write_file(blocker, "");
        bad_state = path_join(blocker, "state");

        ASSERT_ERROR(machine_config_apply(bad_state, fx.sysctl_root, two_settings, ELEMENTSOF(two_settings),
                                          true, record, &rec),
                     ENOTDIR);
        ASSERT_EQ(rec.n, 0);
        ASSERT_FILE(&fx, "kernel/perf_event_paranoid", "2\n");
        ASSERT_FILE(&fx, "kernel/perf_event_max_stack", "127\n");

        fixture_teardown(&fx);
}

TEST(apply_twice_no_drift) {
        _cleanup_free_ char *before = NULL, *after = NULL, *p = NULL;
        Fixture fx;
        Recorder rec = {};

        fixture_setup(&fx);
        p = path_join(fx.state_dir, MACHINE_CONFIG_STATE_FILE);

        ASSERT_OK(machine_config_apply(fx.state_dir, fx.sysctl_root, two_settings, ELEMENTSOF(two_settings),
                                       true, record, &rec));
        ASSERT_EQ(rec.n, 2);
        recorder_reset(&rec);
        before = read_file(p);

        ASSERT_EQ(machine_config_apply(fx.state_dir, fx.sysctl_root, two_settings, ELEMENTSOF(two_settings),
                                       false, record, &rec),
                  0);
        ASSERT_EQ(rec.n, 0);
        ASSERT_FILE(&fx, "kernel/perf_event_paranoid", "-1\n");
        after = read_file(p);
        ASSERT_STREQ(before, after);

        /* A callback is optional. */
        ASSERT_OK(machine_config_apply(fx.state_dir, fx.sysctl_root, two_settings, ELEMENTSOF(two_settings),
                                       false, NULL, NULL));

        fixture_teardown(&fx);
}

TEST(drift_repaired) {
        Fixture fx;
        Recorder rec = {};

        fixture_setup(&fx);

        ASSERT_OK(machine_config_apply(fx.state_dir, fx.sysctl_root, two_settings, ELEMENTSOF(two_settings),
                                       true, record, &rec));
        recorder_reset(&rec);

        /* Someone else changes one of them. */
        sysctl_set(&fx, "kernel/perf_event_paranoid", "3\n");

        ASSERT_OK(machine_config_apply(fx.state_dir, fx.sysctl_root, two_settings, ELEMENTSOF(two_settings),
                                       false, record, &rec));
        ASSERT_EQ(rec.n, 1);
        assert_change(&rec, "kernel.perf_event_paranoid", "3", "-1", MACHINE_CHANGE_DRIFT);
        ASSERT_FILE(&fx, "kernel/perf_event_paranoid", "-1\n");

        /* The original is the one from before our first write, not the
         * drifted value. */
        ASSERT_ORIGINAL(&fx, "kernel.perf_event_paranoid", "2");

        recorder_reset(&rec);
        fixture_teardown(&fx);
}

TEST(crash_keeps_true_originals) {
        Fixture fx;
        Recorder rec = {};

        fixture_setup(&fx);

        ASSERT_OK(machine_config_apply(fx.state_dir, fx.sysctl_root, two_settings, ELEMENTSOF(two_settings),
                                       true, record, &rec));
        recorder_reset(&rec);

        /* The agent dies without restoring; a new one starts and applies
         * with the sysctls still holding our values. */
        ASSERT_TRUE(state_exists(&fx));
        ASSERT_OK(machine_config_apply(fx.state_dir, fx.sysctl_root, two_settings, ELEMENTSOF(two_settings),
                                       true, record, &rec));
        ASSERT_EQ(rec.n, 0);
        ASSERT_ORIGINAL(&fx, "kernel.perf_event_paranoid", "2");
        ASSERT_ORIGINAL(&fx, "kernel.perf_event_max_stack", "127");

        /* The restarted agent also changes its config before dying again:
         * the original of the new setting is saved, the old ones kept. */
        {
                const MachineSetting s[] = {
                        two_settings[0],
                        two_settings[1],
                        { .name = (char *) "kernel.kptr_restrict", .value = (char *) "1" },
                };
                ASSERT_OK(machine_config_apply(fx.state_dir, fx.sysctl_root, s, ELEMENTSOF(s), true, record,
                                               &rec));
                ASSERT_EQ(rec.n, 1);
                assert_change(&rec, "kernel.kptr_restrict", "0", "1", MACHINE_CHANGE_APPLY);
                recorder_reset(&rec);
        }
        ASSERT_EQ(state_count(&fx), 3);
        ASSERT_ORIGINAL(&fx, "kernel.perf_event_paranoid", "2");
        ASSERT_ORIGINAL(&fx, "kernel.kptr_restrict", "0");

        ASSERT_OK(machine_config_restore(fx.state_dir, fx.sysctl_root, record, &rec));
        ASSERT_EQ(rec.n, 3);
        ASSERT_FILE(&fx, "kernel/perf_event_paranoid", "2\n");
        ASSERT_FILE(&fx, "kernel/perf_event_max_stack", "127\n");
        ASSERT_FILE(&fx, "kernel/kptr_restrict", "0\n");
        ASSERT_FALSE(state_exists(&fx));

        recorder_reset(&rec);
        fixture_teardown(&fx);
}

TEST(stale_state_from_earlier_boot) {
        _cleanup_free_ char *p = NULL;
        Fixture fx;
        Recorder rec = {};
        FILE *f;

        /* Only meaningful where the kernel tells us its boot ID. */
        f = fopen("/proc/sys/kernel/random/boot_id", "re");
        if (!f)
                TEST_SKIP("no /proc/sys/kernel/random/boot_id");
        fclose(f);

        fixture_setup(&fx);
        make_state_dir(&fx);
        p = state_path(&fx);

        /* Saved in another boot: the kernel has reset the sysctls since, the
         * values on the node now are the originals. */
        write_file(p, "{ \"bootId\": \"00000000-0000-0000-0000-000000000000\", "
                      "\"originals\": { \"kernel.perf_event_paranoid\": \"7\", "
                      "\"kernel.perf_event_mlock_kb\": \"9\" } }\n");

        ASSERT_OK(machine_config_apply(fx.state_dir, fx.sysctl_root, two_settings, ELEMENTSOF(two_settings),
                                       true, record, &rec));
        ASSERT_EQ(rec.n, 2); /* no restore of the stale mlock_kb */
        ASSERT_EQ(state_count(&fx), 2);
        ASSERT_ORIGINAL(&fx, "kernel.perf_event_paranoid", "2");
        ASSERT_FILE(&fx, "kernel/perf_event_mlock_kb", "516\n");
        recorder_reset(&rec);

        /* Without a boot ID (written by hand): kept. */
        write_file(p, "{ \"originals\": { \"kernel.perf_event_paranoid\": \"7\" } }\n");
        ASSERT_OK(machine_config_restore(fx.state_dir, fx.sysctl_root, record, &rec));
        ASSERT_EQ(rec.n, 1);
        ASSERT_FILE(&fx, "kernel/perf_event_paranoid", "7\n");
        ASSERT_FALSE(state_exists(&fx));

        /* A stale file is simply dropped by restore. */
        write_file(p, "{ \"bootId\": \"00000000-0000-0000-0000-000000000000\", "
                      "\"originals\": { \"kernel.perf_event_paranoid\": \"5\" } }\n");
        recorder_reset(&rec);
        ASSERT_OK(machine_config_restore(fx.state_dir, fx.sysctl_root, record, &rec));
        ASSERT_EQ(rec.n, 0);
        ASSERT_FILE(&fx, "kernel/perf_event_paranoid", "7\n");
        ASSERT_FALSE(state_exists(&fx));

        fixture_teardown(&fx);
}

TEST(restore) {
        Fixture fx;
        Recorder rec = {};

        fixture_setup(&fx);

        /* Nothing saved: nothing to do. */
        ASSERT_EQ(machine_config_restore(fx.state_dir, fx.sysctl_root, record, &rec), 0);
        ASSERT_EQ(rec.n, 0);

        ASSERT_OK(machine_config_apply(fx.state_dir, fx.sysctl_root, two_settings, ELEMENTSOF(two_settings),
                                       true, record, &rec));
        recorder_reset(&rec);
        ASSERT_TRUE(state_exists(&fx));

        ASSERT_OK(machine_config_restore(fx.state_dir, fx.sysctl_root, record, &rec));
        ASSERT_EQ(rec.n, 2);
        assert_change(&rec, "kernel.perf_event_paranoid", "-1", "2", MACHINE_CHANGE_RESTORE);
        assert_change(&rec, "kernel.perf_event_max_stack", "512", "127", MACHINE_CHANGE_RESTORE);
        ASSERT_FILE(&fx, "kernel/perf_event_paranoid", "2\n");
        ASSERT_FILE(&fx, "kernel/perf_event_max_stack", "127\n");
        ASSERT_FALSE(state_exists(&fx));
        recorder_reset(&rec);

        /* Twice: nothing left. */
        ASSERT_EQ(machine_config_restore(fx.state_dir, fx.sysctl_root, record, &rec), 0);
        ASSERT_EQ(rec.n, 0);

        fixture_teardown(&fx);
}

TEST(restore_failure_keeps_state) {
        _cleanup_free_ char *p = NULL;
        Fixture fx;
        Recorder rec = {};

        fixture_setup(&fx);

        ASSERT_OK(machine_config_apply(fx.state_dir, fx.sysctl_root, two_settings, ELEMENTSOF(two_settings),
                                       true, record, &rec));
        recorder_reset(&rec);

        /* One sysctl vanished (or cannot be written): the other is restored,
         * the failing one stays saved for a later attempt. */
        p = path_join(fx.sysctl_root, "kernel/perf_event_max_stack");
        ASSERT_EQ(unlink(p), 0);

        ASSERT_ERROR(machine_config_restore(fx.state_dir, fx.sysctl_root, record, &rec), ENOENT);
        ASSERT_EQ(rec.n, 1);
        ASSERT_FILE(&fx, "kernel/perf_event_paranoid", "2\n");
        ASSERT_TRUE(state_exists(&fx));
        ASSERT_EQ(state_count(&fx), 1);
        ASSERT_ORIGINAL(&fx, "kernel.perf_event_max_stack", "127");

        recorder_reset(&rec);
        fixture_teardown(&fx);
}

TEST(removed_setting_restored) {
        Fixture fx;
        Recorder rec = {};

        fixture_setup(&fx);

        ASSERT_OK(machine_config_apply(fx.state_dir, fx.sysctl_root, two_settings, ELEMENTSOF(two_settings),
                                       true, record, &rec));
        recorder_reset(&rec);

        /* max_stack leaves the config. */
        ASSERT_OK(machine_config_apply(fx.state_dir, fx.sysctl_root, two_settings, 1, false, record, &rec));
        ASSERT_EQ(rec.n, 1);
        assert_change(&rec, "kernel.perf_event_max_stack", "512", "127", MACHINE_CHANGE_RESTORE);
        ASSERT_FILE(&fx, "kernel/perf_event_max_stack", "127\n");
        ASSERT_FILE(&fx, "kernel/perf_event_paranoid", "-1\n");
        ASSERT_EQ(state_count(&fx), 1);
        ASSERT_ORIGINAL(&fx, "kernel.perf_event_max_stack", NULL);
        ASSERT_ORIGINAL(&fx, "kernel.perf_event_paranoid", "2");
        recorder_reset(&rec);

        /* Then all of them: the state file goes too. */
        ASSERT_OK(machine_config_apply(fx.state_dir, fx.sysctl_root, NULL, 0, false, record, &rec));
        ASSERT_EQ(rec.n, 1);
        assert_change(&rec, "kernel.perf_event_paranoid", "-1", "2", MACHINE_CHANGE_RESTORE);
        ASSERT_FILE(&fx, "kernel/perf_event_paranoid", "2\n");
        ASSERT_FALSE(state_exists(&fx));

        recorder_reset(&rec);
        fixture_teardown(&fx);
}

TEST(refused_settings) {
        Fixture fx;
        Recorder rec = {};
        const MachineSetting s[] = {
                { .name = (char *) "kernel.core_pattern", .value = (char *) "|/tmp/evil" },
                { .name = (char *) "kernel/perf_event_paranoid", .value = (char *) "-1" },
                { .name = (char *) "kernel.perf_event_paranoid/../core_pattern", .value = (char *) "x" },
                { .name = (char *) "kernel.perf_event_mlock_kb", .value = (char *) "1\n2" }, /* two lines */
                { .name = (char *) "kernel.perf_event_max_stack", .value = (char *) " " },
                { .name = (char *) "kernel.kptr_restrict", .value = (char *) "1" },
        };

        fixture_setup(&fx);

        /* Keeps going and returns the first error. */
        ASSERT_ERROR(
                machine_config_apply(fx.state_dir, fx.sysctl_root, s, ELEMENTSOF(s), true, record, &rec),
                EPERM);
        ASSERT_EQ(rec.n, 1);
        ASSERT_EQ(rec.refused, 5); /* each refused setting reported (cgprof_machine_config_refusals_total) */
        assert_change(&rec, "kernel.kptr_restrict", "0", "1", MACHINE_CHANGE_APPLY);
        ASSERT_FILE(&fx, "kernel/core_pattern", "core\n");
        ASSERT_FILE(&fx, "kernel/perf_event_paranoid", "2\n");
        ASSERT_FILE(&fx, "kernel/perf_event_mlock_kb", "516\n");
        ASSERT_FILE(&fx, "kernel/perf_event_max_stack", "127\n");
        ASSERT_EQ(state_count(&fx), 1);

        recorder_reset(&rec);
        fixture_teardown(&fx);
}

TEST(bad_state_file) {
        _cleanup_free_ char *p = NULL;
        Fixture fx;
        Recorder rec = {};
        static const char *const bad[] = {
                "not json",
                "[]",
                "{ \"originals\": [] }",
                "{ \"originals\": { \"kernel.perf_event_paranoid\": 2 } }",
                "{ \"originals\": { \"kernel.core_pattern\": \"|/tmp/evil\" } }",
                "{ \"originals\": { \"kernel.perf_event_paranoid\": \"1\\n2\" } }",
                "{ \"bootId\": 1, \"originals\": {} }",
        };

        fixture_setup(&fx);
        make_state_dir(&fx);
        p = state_path(&fx);

        /* A state file we did not write: refuse to touch anything rather than
         * lose (or invent) originals. */
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                write_file(p, bad[i]);
                ASSERT_ERROR(machine_config_apply(fx.state_dir, fx.sysctl_root, two_settings,
                                                  ELEMENTSOF(two_settings), true, record, &rec),
                             EBADMSG);
                ASSERT_ERROR(machine_config_restore(fx.state_dir, fx.sysctl_root, record, &rec), EBADMSG);
                ASSERT_EQ(rec.n, 0);
                ASSERT_FILE(&fx, "kernel/perf_event_paranoid", "2\n");
                ASSERT_FILE(&fx, "kernel/core_pattern", "core\n");
        }

        fixture_teardown(&fx);
}

TEST(whitespace_folded) {
        Fixture fx;
        Recorder rec = {};
        const MachineSetting s[] = {
                { .name = (char *) "kernel.perf_event_mlock_kb", .value = (char *) "4096 8192" },
                { .name = (char *) "kernel.perf_event_max_stack", .value = (char *) " 127 " },
        };

        fixture_setup(&fx);
        sysctl_set(&fx, "kernel/perf_event_mlock_kb", "4096\t \t8192\n");

        ASSERT_OK(machine_config_apply(fx.state_dir, fx.sysctl_root, s, ELEMENTSOF(s), true, record, &rec));
        ASSERT_EQ(rec.n, 0);
        ASSERT_FILE(&fx, "kernel/perf_event_mlock_kb", "4096\t \t8192\n");
        ASSERT_FALSE(state_exists(&fx));

        /* Folding is no looser than that. */
        sysctl_set(&fx, "kernel/perf_event_mlock_kb", "40968192\n");
        ASSERT_OK(machine_config_apply(fx.state_dir, fx.sysctl_root, s, ELEMENTSOF(s), true, record, &rec));
        ASSERT_EQ(rec.n, 1);
        assert_change(&rec, "kernel.perf_event_mlock_kb", "40968192", "4096 8192", MACHINE_CHANGE_APPLY);
        ASSERT_FILE(&fx, "kernel/perf_event_mlock_kb", "4096 8192\n");

        recorder_reset(&rec);
        fixture_teardown(&fx);
}

TEST(duplicate_names_last_wins) {
        Fixture fx;
        Recorder rec = {};
        const MachineSetting s[] = {
                { .name = (char *) "kernel.perf_event_paranoid", .value = (char *) "1" },
                { .name = (char *) "kernel.perf_event_paranoid", .value = (char *) "0" },
        };

        fixture_setup(&fx);

        ASSERT_OK(machine_config_apply(fx.state_dir, fx.sysctl_root, s, ELEMENTSOF(s), true, record, &rec));
        ASSERT_EQ(rec.n, 1);
        assert_change(&rec, "kernel.perf_event_paranoid", "2", "0", MACHINE_CHANGE_APPLY);
        ASSERT_ORIGINAL(&fx, "kernel.perf_event_paranoid", "2");

        recorder_reset(&rec);
        fixture_teardown(&fx);
}

/* The node's labels change: entries selected and deselected, applied and
 * restored, what only scoped entries set left alone while the labels are
 * not known. */
static void apply_for(const Fixture *fx, const Config *c, Labels labels, bool known, Recorder *rec,
                      MachineWants *ret) {
        MachineSetting *settings = NULL;

        recorder_reset(rec);
        machine_wants_done(ret);
        ASSERT_OK(machine_wants_select(c, labels, known, ret));
        ASSERT_OK(machine_wants_settings(ret, &settings));
        ASSERT_OK(machine_config_apply_keep(fx->state_dir, fx->sysctl_root, settings, ret->n, ret->pending,
                                            true, record, rec));
        free(settings);
}

TEST(node_selector_select_apply_restore) {
        static char *const open[] = { "cgprof.io/tuning", "open", "zone", "a", NULL };
        static char *const closed[] = { "zone", "a", NULL };
        _cleanup_free_ char *v = NULL;
        Fixture fx;
        Recorder rec = {};
        MachineWants w = {};
        Config *c = NULL;
        char *err = NULL;

        fixture_setup(&fx);
        ASSERT_OK(config_parse(
                "{\"machineConfig\": ["
                "{\"name\": \"kernel.perf_event_paranoid\", \"value\": \"-1\", \"nodeSelector\": "
                "{\"matchLabels\": {\"cgprof.io/tuning\": \"open\"}}},"
                "{\"name\": \"kernel.perf_event_mlock_kb\", \"value\": \"1024\"}]}",
                &c, &err));

        /* The Node not read yet: the unscoped entry only; paranoid waits. */
        apply_for(&fx, c, NULL, false, &rec, &w);
        ASSERT_EQ(w.n, 1);
        ASSERT_STREQ(w.items[0].name, "kernel.perf_event_mlock_kb");
        ASSERT_NULL(w.items[0].selector);
        ASSERT_EQ(strv_length(w.pending), 1);
        ASSERT_STREQ(w.pending[0], "kernel.perf_event_paranoid");
        ASSERT_EQ(rec.n, 1);
        assert_change(&rec, "kernel.perf_event_mlock_kb", "516", "1024", MACHINE_CHANGE_APPLY);

        /* Labelled: both. */
        apply_for(&fx, c, open, true, &rec, &w);
        ASSERT_EQ(w.n, 2);
        ASSERT_NULL(w.pending);
        ASSERT_EQ(machine_wants_find(&w, "kernel.perf_event_paranoid")->entry, 0);
        ASSERT_STREQ(machine_wants_find(&w, "kernel.perf_event_paranoid")->selector,
                     "cgprof.io/tuning=open");
        ASSERT_EQ(rec.n, 1);
        assert_change(&rec, "kernel.perf_event_paranoid", "2", "-1", MACHINE_CHANGE_APPLY);
        v = state_original(&fx, "kernel.perf_event_paranoid");
        ASSERT_STREQ(v, "2");

        /* A restart before the Node is read again: paranoid stays as it is
         * (neither restored nor written), its original stays saved. */
        apply_for(&fx, c, NULL, false, &rec, &w);
        ASSERT_EQ(rec.n, 0);
        free(v);
        v = sysctl_get(&fx, "kernel/perf_event_paranoid");
        ASSERT_STREQ(v, "-1\n");

        /* The label removed: paranoid back to its original, mlock stays. */
        apply_for(&fx, c, closed, true, &rec, &w);
        ASSERT_EQ(w.n, 1);
        ASSERT_EQ(rec.n, 1);
        assert_change(&rec, "kernel.perf_event_paranoid", "-1", "2", MACHINE_CHANGE_RESTORE);
        free(v);
        v = sysctl_get(&fx, "kernel/perf_event_mlock_kb");
        ASSERT_STREQ(v, "1024\n");
        ASSERT_EQ(state_count(&fx), 1);

        /* Labelled again: applied again. */
        apply_for(&fx, c, open, true, &rec, &w);
        assert_change(&rec, "kernel.perf_event_paranoid", "2", "-1", MACHINE_CHANGE_APPLY);

        /* What check shows. */
        ASSERT_STREQ(machine_sysctl_state(&w, "kernel.perf_event_paranoid", "-1", MACHINE_CHANGE_APPLY),
                     "applied");
        ASSERT_STREQ(machine_sysctl_state(&w, "kernel.perf_event_paranoid", " -1\n", MACHINE_CHANGE_APPLY),
                     "applied");
        ASSERT_STREQ(machine_sysctl_state(&w, "kernel.perf_event_paranoid", "3", MACHINE_CHANGE_APPLY),
                     "drifted");
        ASSERT_STREQ(machine_sysctl_state(&w, "kernel.perf_event_paranoid", "3", MACHINE_CHANGE_REFUSED),
                     "refused");
        ASSERT_STREQ(machine_sysctl_state(&w, "kernel.perf_event_paranoid", NULL, _MACHINE_CHANGE_MAX),
                     "drifted");
        ASSERT_STREQ(machine_sysctl_state(&w, "kernel.kptr_restrict", "0", _MACHINE_CHANGE_MAX),
                     "not selected");
        apply_for(&fx, c, closed, true, &rec, &w);
        ASSERT_STREQ(machine_sysctl_state(&w, "kernel.perf_event_paranoid", "2", MACHINE_CHANGE_RESTORE),
                     "restored");
        apply_for(&fx, c, NULL, false, &rec, &w);
        ASSERT_STREQ(machine_sysctl_state(&w, "kernel.perf_event_paranoid", "2", MACHINE_CHANGE_RESTORE),
                     "waiting for the node's labels");
        ASSERT_STREQ(machine_sysctl_state(&w, "kernel.perf_event_mlock_kb", "1024", MACHINE_CHANGE_APPLY),
                     "applied");

        ASSERT_OK(machine_config_restore(fx.state_dir, fx.sysctl_root, NULL, NULL));
        free(v);
        v = sysctl_get(&fx, "kernel/perf_event_paranoid");
        ASSERT_STREQ(v, "2\n");

        machine_wants_done(&w);
        config_free(c);
        recorder_reset(&rec);
        fixture_teardown(&fx);
}

DEFINE_TEST_MAIN
