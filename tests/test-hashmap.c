/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <signal.h>
#include <sys/wait.h>

#include "hashmap.h"
#include "tests.h"

typedef struct Item {
        char name[32];
        uint64_t id;
        unsigned freed;
} Item;

DEFINE_STRING_HASHMAP(ItemByName, item_by_name, Item);
DEFINE_UINT64_HASHMAP(ItemById, item_by_id, Item);

static bool is_power_of_two(size_t n) {
        return n > 0 && (n & (n - 1)) == 0;
}

TEST(string_basics) {
        ItemByName m = {};
        Item a = { .name = "kubepods.slice/a" }, b = { .name = "kubepods.slice/b" }, a2 = { .name = "" },
             *old;
        const char *key;
        Item *v;

        ASSERT_EQ(item_by_name_size(&m), 0);
        ASSERT_NULL(item_by_name_get(&m, "kubepods.slice/a"));
        ASSERT_NULL(item_by_name_remove(&m, "kubepods.slice/a"));
        ASSERT_NULL(item_by_name_get(&m, NULL));

        ASSERT_OK(item_by_name_put(&m, a.name, &a));
        ASSERT_OK(item_by_name_put(&m, b.name, &b));
        ASSERT_ERROR(item_by_name_put(&m, "kubepods.slice/a", &b), EEXIST);
        ASSERT_ERROR(item_by_name_put(&m, "x", NULL), EINVAL);
        ASSERT_ERROR(item_by_name_put(&m, NULL, &a), EINVAL);
        ASSERT_EQ(item_by_name_size(&m), 2);
        ASSERT_TRUE(item_by_name_get(&m, "kubepods.slice/a") == &a);
        ASSERT_TRUE(item_by_name_get(&m, "kubepods.slice/b") == &b);
        ASSERT_NULL(item_by_name_get(&m, "kubepods.slice"));
        ASSERT_NULL(item_by_name_get(&m, "kubepods.slice/a/"));

        /* The empty string is a key like any other. */
        ASSERT_OK(item_by_name_put(&m, a2.name, &a2));
        ASSERT_TRUE(item_by_name_get(&m, "") == &a2);
        ASSERT_TRUE(item_by_name_remove(&m, "") == &a2);
        ASSERT_NULL(item_by_name_get(&m, ""));

        /* Replacing swaps the key too: the old value's key may go with it. */
        snprintf(a2.name, sizeof(a2.name), "%s", a.name);
        old = &b;
        ASSERT_OK(item_by_name_replace(&m, a2.name, &a2, &old));
        ASSERT_TRUE(old == &a);
        memset(a.name, 'x', sizeof(a.name) - 1);
        ASSERT_TRUE(item_by_name_get(&m, "kubepods.slice/a") == &a2);
        HashmapIter i = HASHMAP_ITER_INIT;
        size_t n = 0;
        while (item_by_name_next(&m, &i, &key, &v)) {
                ASSERT_TRUE(key == v->name);
                n++;
        }
        ASSERT_EQ(n, 2);
        ASSERT_OK(item_by_name_replace(&m, "new", &a, &old));
        ASSERT_NULL(old);
        ASSERT_EQ(item_by_name_size(&m), 3);
        ASSERT_TRUE(item_by_name_remove(&m, "new") == &a);

        /* remove_value: only the entry that maps to that value. */
        ASSERT_FALSE(item_by_name_remove_value(&m, "kubepods.slice/b", &a2));
        ASSERT_TRUE(item_by_name_get(&m, "kubepods.slice/b") == &b);
        ASSERT_TRUE(item_by_name_remove_value(&m, "kubepods.slice/b", &b));
        ASSERT_FALSE(item_by_name_remove_value(&m, "kubepods.slice/b", &b));
        ASSERT_NULL(item_by_name_get(&m, "kubepods.slice/b"));
        ASSERT_EQ(item_by_name_size(&m), 1);

        item_by_name_clear(&m, NULL);
        ASSERT_EQ(item_by_name_size(&m), 0);
        ASSERT_NULL(item_by_name_get(&m, "kubepods.slice/a"));
        /* Cleared twice, or never used: fine. */
        item_by_name_clear(&m, NULL);
}

TEST(uint64_basics) {
        static const uint64_t keys[] = { 0, 1, 2, 7, 8, 1ULL << 32, 1ULL << 63, UINT64_MAX, UINT64_MAX - 1 };
        Item items[ELEMENTSOF(keys)];
        ItemById m = {};

        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                items[i] = (Item){ .id = keys[i] };
                ASSERT_OK(item_by_id_put(&m, keys[i], &items[i]));
        }
        ASSERT_EQ(item_by_id_size(&m), ELEMENTSOF(keys));
        for (size_t i = 0; i < ELEMENTSOF(keys); i++) {
                ASSERT_TRUE(item_by_id_get(&m, keys[i]) == &items[i]);
                ASSERT_ERROR(item_by_id_put(&m, keys[i], &items[0]), EEXIST);
        }
        ASSERT_NULL(item_by_id_get(&m, 3));
        ASSERT_NULL(item_by_id_get(&m, 1ULL << 31));
        ASSERT_TRUE(item_by_id_remove(&m, 0) == &items[0]);
        ASSERT_NULL(item_by_id_get(&m, 0));
        ASSERT_TRUE(item_by_id_get(&m, UINT64_MAX) == &items[7]);
        item_by_id_clear(&m, NULL);
}

/* Keys that share long prefixes (cgroup paths), and keys that differ in
 * high bits only: the table's low bits still spread them. */
TEST(growth) {
        const size_t n = 20000;
        Item *items = calloc(n, sizeof(Item));
        ItemByName by_name = {};
        ItemById by_id = {};
        size_t last_slots = 0;

        ASSERT_NOT_NULL(items);
        for (size_t i = 0; i < n; i++) {
                snprintf(items[i].name, sizeof(items[i].name), "kubepods.slice/pod%zu", i);
                items[i].id = (uint64_t) i << 40;
                ASSERT_OK(item_by_name_put(&by_name, items[i].name, &items[i]));
                ASSERT_OK(item_by_id_put(&by_id, items[i].id, &items[i]));
                /* Doubling, and never more than 3/4 full. */
                ASSERT_TRUE(is_power_of_two(by_name.base.n_slots));
                ASSERT_TRUE(by_name.base.n_items * 4 <= by_name.base.n_slots * 3);
                if (by_id.base.n_slots != last_slots) {
                        ASSERT_TRUE(last_slots == 0 || by_id.base.n_slots == last_slots * 2);
                        last_slots = by_id.base.n_slots;
                }
        }
        ASSERT_EQ(item_by_name_size(&by_name), n);
        ASSERT_EQ(item_by_id_size(&by_id), n);
        ASSERT_TRUE(by_id.base.n_slots <= 4 * n);
        for (size_t i = 0; i < n; i++) {
                char name[32];
                snprintf(name, sizeof(name), "kubepods.slice/pod%zu", i);
                ASSERT_TRUE(item_by_name_get(&by_name, name) == &items[i]);
                ASSERT_TRUE(item_by_id_get(&by_id, (uint64_t) i << 40) == &items[i]);
                ASSERT_NULL(item_by_id_get(&by_id, ((uint64_t) i << 40) + 1));
        }
        ASSERT_NULL(item_by_name_get(&by_name, "kubepods.slice/pod"));
        ASSERT_NULL(item_by_name_get(&by_name, "kubepods.slice/pod20000"));
        item_by_name_clear(&by_name, NULL);
        item_by_id_clear(&by_id, NULL);
        free(items);
}

/* Removals leave marks; adding and removing forever must not grow the table
 * or slow lookups down to a crawl. */
TEST(churn_stays_small) {
        Item items[64];
        ItemById m = {};

        for (uint64_t round = 0; round < 5000; round++) {
                for (size_t i = 0; i < ELEMENTSOF(items); i++) {
                        items[i].id = round * 1000 + i;
                        ASSERT_OK(item_by_id_put(&m, items[i].id, &items[i]));
                }
                for (size_t i = 0; i < ELEMENTSOF(items); i++)
                        ASSERT_TRUE(item_by_id_get(&m, round * 1000 + i) == &items[i]);
                for (size_t i = 0; i < ELEMENTSOF(items); i++)
                        ASSERT_TRUE(item_by_id_remove(&m, round * 1000 + i) == &items[i]);
                ASSERT_EQ(item_by_id_size(&m), 0);
                ASSERT_TRUE(m.base.n_slots <= 256);
        }
        /* Shrinks when it got sparse: many in, nearly all out, then churn. */
        Item *many = calloc(10000, sizeof(Item));
        ASSERT_NOT_NULL(many);
        for (size_t i = 0; i < 10000; i++)
                ASSERT_OK(item_by_id_put(&m, i, &many[i]));
        for (size_t i = 1; i < 10000; i++)
                ASSERT_TRUE(item_by_id_remove(&m, i) == &many[i]);
        for (size_t i = 10000; i < 30000; i++) {
                ASSERT_OK(item_by_id_put(&m, i, &many[0]));
                ASSERT_TRUE(item_by_id_remove(&m, i) == &many[0]);
        }
        ASSERT_TRUE(m.base.n_slots <= 64);
        ASSERT_TRUE(item_by_id_get(&m, 0) == &many[0]);
        item_by_id_clear(&m, NULL);
        free(many);
}

static void item_free(Item *i) {
        i->freed++;
}

TEST(clear_frees_values) {
        Item items[100] = {};
        ItemById m = {};

        for (size_t i = 0; i < ELEMENTSOF(items); i++)
                ASSERT_OK(item_by_id_put(&m, i, &items[i]));
        for (size_t i = 0; i < 50; i++)
                ASSERT_NOT_NULL(item_by_id_remove(&m, i));
        item_by_id_clear(&m, item_free);
        for (size_t i = 0; i < ELEMENTSOF(items); i++)
                ASSERT_EQ(items[i].freed, i < 50 ? 0 : 1);
        ASSERT_EQ(item_by_id_size(&m), 0);
        ASSERT_NULL(m.base.slots);
        /* Usable again. */
        ASSERT_OK(item_by_id_put(&m, 7, &items[7]));
        ASSERT_TRUE(item_by_id_get(&m, 7) == &items[7]);
        item_by_id_clear(&m, NULL);
}

TEST(foreach) {
        Item items[300] = {};
        unsigned seen[300] = {};
        ItemById m = {};
        Item *v, *w;
        size_t n = 0;

        HASHMAP_FOREACH (v, item_by_id, &m)
                ASSERT_TRUE(false); /* an empty map: no iteration */

        for (size_t i = 0; i < ELEMENTSOF(items); i++) {
                items[i].id = i;
                ASSERT_OK(item_by_id_put(&m, i, &items[i]));
        }
        HASHMAP_FOREACH (v, item_by_id, &m) {
                seen[v->id]++;
                n++;
        }
        ASSERT_EQ(n, ELEMENTSOF(items));
        for (size_t i = 0; i < ELEMENTSOF(items); i++)
                ASSERT_EQ(seen[i], 1);

        /* Nested: each loop has an iterator of its own. */
        n = 0;
        HASHMAP_FOREACH (v, item_by_id, &m)
                HASHMAP_FOREACH (w, item_by_id, &m)
                        n += v->id < 10 && w->id < 10;
        ASSERT_EQ(n, 100);

        /* Removing the current entry, and others, while iterating. */
        memset(seen, 0, sizeof(seen));
        HASHMAP_FOREACH (v, item_by_id, &m) {
                seen[v->id]++;
                ASSERT_TRUE(item_by_id_remove(&m, v->id) == v);
                if (v->id % 2 == 0 && v->id + 1 < ELEMENTSOF(items))
                        (void) item_by_id_remove(&m, v->id + 1);
        }
        ASSERT_EQ(item_by_id_size(&m), 0);
        for (size_t i = 0; i < ELEMENTSOF(items); i++)
                ASSERT_TRUE(seen[i] <= 1);
        for (size_t i = 0; i < ELEMENTSOF(items); i += 2)
                ASSERT_EQ(seen[i], 1); /* even ones are removed only when visited */
        item_by_id_clear(&m, NULL);
}

/* Adding entries during an iteration is a bug the iterator catches (when
 * the table moved), rather than missing or repeating entries. */
TEST(adding_while_iterating_aborts) {
        int status;
        pid_t pid;

        pid = fork();
        ASSERT_TRUE(pid >= 0);
        if (pid == 0) {
                static Item items[1000];
                ItemById m = {};
                Item *v;

                (void) !freopen("/dev/null", "w", stderr);
                for (size_t i = 0; i < 4; i++)
                        (void) item_by_id_put(&m, i, &items[i]);
                HASHMAP_FOREACH (v, item_by_id, &m)
                        for (size_t i = 4; i < ELEMENTSOF(items); i++)
                                (void) item_by_id_put(&m, i, &items[i]);
                _exit(EXIT_SUCCESS);
        }
        ASSERT_EQ(waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFSIGNALED(status));
        ASSERT_EQ(WTERMSIG(status), SIGABRT);
}

/* ---- randomized, against a plain array ---- */

static uint64_t rng_state;

static uint64_t rng(void) {
        /* xorshift64*: reproducible from its seed. */
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * UINT64_C(2685821657736338717);
}

#define N_KEYS 700

typedef struct Reference {
        Item *value[N_KEYS]; /* NULL: not in the map */
        const char *key[N_KEYS]; /* the key string the map was given (string maps) */
} Reference;

static void check_all(const ItemByName *names, const ItemById *ids, const Reference *ref,
                      char keys[][2][24]) {
        size_t n = 0;

        for (size_t k = 0; k < N_KEYS; k++) {
                ASSERT_TRUE(item_by_name_get(names, keys[k][0]) == ref->value[k]);
                ASSERT_TRUE(item_by_id_get(ids, k * 0x9e3779b97f4a7c15ULL) == ref->value[k]);
                n += ref->value[k] != NULL;
        }
        ASSERT_EQ(item_by_name_size(names), n);
        ASSERT_EQ(item_by_id_size(ids), n);

        /* Iteration yields each entry once, with the key it was given. */
        unsigned seen[N_KEYS] = {};
        HashmapIter i = HASHMAP_ITER_INIT;
        const char *key;
        Item *v;
        while (item_by_name_next(names, &i, &key, &v)) {
                ASSERT_TRUE(key == ref->key[v->id]);
                ASSERT_TRUE(ref->value[v->id] == v);
                seen[v->id]++;
        }
        for (size_t k = 0; k < N_KEYS; k++)
                ASSERT_EQ(seen[k], ref->value[k] ? 1 : 0);
        ASSERT_TRUE(names->base.n_items + names->base.n_removed < names->base.n_slots ||
                    names->base.n_slots == 0);
}

static void random_run(uint64_t seed, size_t n_ops) {
        /* Two spellings of every key, so that replacing can swap the key's storage. */
        static char keys[N_KEYS][2][24];
        static Item items[N_KEYS][2];
        Reference ref = {};
        ItemByName names = {};
        ItemById ids = {};
        Item *old;

        rng_state = seed;
        for (size_t k = 0; k < N_KEYS; k++)
                for (size_t s = 0; s < 2; s++) {
                        snprintf(keys[k][s], sizeof(keys[k][s]), "system.slice/u%zu", k);
                        items[k][s] = (Item){ .id = k };
                }

        for (size_t op = 0; op < n_ops; op++) {
                /* Phases that mostly add, mostly remove, or both, so the
                 * map grows and shrinks. */
                unsigned phase = (op / 4000) % 3, what = rng() % 8;
                size_t k = rng() % N_KEYS, s = rng() % 2;
                uint64_t id = k * 0x9e3779b97f4a7c15ULL;
                Item *v = &items[k][s];
                int r;

                if (phase == 0 && (what == 3 || what == 4))
                        what = 0;
                else if (phase == 1 && (what <= 2))
                        what = 3;
                switch (what) {
                case 0:
                case 1: /* put */
                        r = item_by_name_put(&names, keys[k][s], v);
                        ASSERT_EQ(r, ref.value[k] ? -EEXIST : 0);
                        r = item_by_id_put(&ids, id, v);
                        ASSERT_EQ(r, ref.value[k] ? -EEXIST : 0);
                        if (!ref.value[k]) {
                                ref.value[k] = v;
                                ref.key[k] = keys[k][s];
                        }
                        break;
                case 2: /* replace */
                        ASSERT_OK(item_by_name_replace(&names, keys[k][s], v, &old));
                        ASSERT_TRUE(old == ref.value[k]);
                        ASSERT_OK(item_by_id_replace(&ids, id, v, &old));
                        ASSERT_TRUE(old == ref.value[k]);
                        ref.value[k] = v;
                        ref.key[k] = keys[k][s];
                        break;
                case 3:
                case 4: /* remove */
                        ASSERT_TRUE(item_by_name_remove(&names, keys[k][s]) == ref.value[k]);
                        ASSERT_TRUE(item_by_id_remove(&ids, id) == ref.value[k]);
                        ref.value[k] = NULL;
                        break;
                case 5: /* remove_value */ {
                        bool match = ref.value[k] == v;
                        ASSERT_EQ(item_by_name_remove_value(&names, keys[k][1 - s], v), match);
                        ASSERT_EQ(item_by_id_remove_value(&ids, id, v), match);
                        if (match)
                                ref.value[k] = NULL;
                        break;
                }
                case 6: /* get */
                        ASSERT_TRUE(item_by_name_get(&names, keys[k][s]) == ref.value[k]);
                        ASSERT_TRUE(item_by_id_get(&ids, id) == ref.value[k]);
                        break;
                case 7: /* iterate, removing some entries (the current one or others) on the way */
                        if (rng() % 16 == 0) {
                                unsigned visited[N_KEYS] = {};
                                bool removed_early[N_KEYS] = {}, present[N_KEYS] = {};
                                Item *x;
                                for (size_t j = 0; j < N_KEYS; j++)
                                        present[j] = ref.value[j] != NULL;
                                HASHMAP_FOREACH (x, item_by_name, &names) {
                                        ASSERT_FALSE(removed_early[x->id]);
                                        visited[x->id]++;
                                        size_t victim = rng() % 3 == 0 ? x->id : rng() % N_KEYS;
                                        if (rng() % 2 == 0 && ref.value[victim]) {
                                                ASSERT_TRUE(item_by_name_remove(&names, ref.key[victim]) ==
                                                            ref.value[victim]);
                                                ASSERT_TRUE(item_by_id_remove(
                                                                    &ids, victim * 0x9e3779b97f4a7c15ULL) ==
                                                            ref.value[victim]);
                                                ref.value[victim] = NULL;
                                                if (!visited[victim])
                                                        removed_early[victim] = true;
                                        }
                                }
                                for (size_t j = 0; j < N_KEYS; j++) {
                                        ASSERT_TRUE(visited[j] <= 1);
                                        /* Everything there all along was visited. */
                                        if (present[j] && !removed_early[j])
                                                ASSERT_EQ(visited[j], 1);
                                        if (!present[j])
                                                ASSERT_EQ(visited[j], 0);
                                }
                        }
                        break;
                }
                if (op % 997 == 0)
                        check_all(&names, &ids, &ref, keys);
        }
        check_all(&names, &ids, &ref, keys);
        item_by_name_clear(&names, NULL);
        item_by_id_clear(&ids, NULL);
}

TEST(randomized_against_reference) {
        for (uint64_t seed = 1; seed <= 20; seed++)
                random_run(seed * 0x2545f4914f6cdd1dULL, 30000);
}

DEFINE_TEST_MAIN
