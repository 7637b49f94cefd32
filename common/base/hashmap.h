/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

/* A hash map from a string or a uint64_t to a pointer: open addressing with
 * linear probing, O(1) average insert, lookup and removal. The table grows
 * by doubling (and sheds the marks removals leave, shrinking when it got
 * sparse) when an insertion would fill more than 3/4 of it, never on a
 * removal: removing entries, the current one or any other, during an
 * iteration is safe. Adding entries during an iteration is not (a resize
 * moves them). No global state.
 *
 * The map does not copy string keys: a key must stay valid and unchanged
 * while its entry is in the map (usually it is a field of the value).
 * Values are never NULL.
 *
 * Use it through a typed wrapper:
 *
 *   DEFINE_STRING_HASHMAP(CgroupMap, cgroup_map, CgroupState);
 *
 * defines the type CgroupMap (a zero-initialized one is an empty map, no
 * setup needed) and type-checked functions:
 *
 *   int cgroup_map_put(CgroupMap *m, const char *key, CgroupState *v);
 *       0, -EEXIST when the key is there already, -ENOMEM, -EINVAL (v NULL)
 *   int cgroup_map_replace(CgroupMap *m, const char *key, CgroupState *v, CgroupState **ret_old);
 *       adds or replaces (key and value), *ret_old gets the value replaced (NULL: none)
 *   CgroupState *cgroup_map_get(const CgroupMap *m, const char *key);
 *   CgroupState *cgroup_map_remove(CgroupMap *m, const char *key);   (the value removed, or NULL)
 *   bool cgroup_map_remove_value(CgroupMap *m, const char *key, CgroupState *v);
 *       removes the entry only when key maps to v
 *   size_t cgroup_map_size(const CgroupMap *m);
 *   bool cgroup_map_next(const CgroupMap *m, HashmapIter *i, const char **ret_key, CgroupState **ret_value);
 *   void cgroup_map_clear(CgroupMap *m, void (*free_value)(CgroupState *v));
 *       empties the map and frees its table (free_value, if not NULL, is called on every value)
 *
 * and HASHMAP_FOREACH(v, cgroup_map, &m) { ... } iterates over the values,
 * in no particular order. DEFINE_UINT64_HASHMAP() is the same with uint64_t
 * keys. */

typedef union HashmapKey {
        const char *string;
        uint64_t u64;
} HashmapKey;

typedef enum HashmapKeyType {
        HASHMAP_KEY_STRING,
        HASHMAP_KEY_UINT64,
} HashmapKeyType;

typedef struct HashmapSlot {
        uint64_t hash; /* 0: empty, 1: removed (a mark that keeps probe chains whole), else in use */
        HashmapKey key;
        void *value;
} HashmapSlot;

typedef struct Hashmap {
        HashmapSlot *slots;
        size_t n_slots; /* 0 or a power of two */
        size_t n_items;
        size_t n_removed; /* slots marked removed */
} Hashmap;

/* Where an iteration is: start from HASHMAP_ITER_INIT. */
typedef struct HashmapIter {
        size_t next;
        const HashmapSlot *slots; /* the table iterated: a resize meanwhile is a bug */
} HashmapIter;

#define HASHMAP_ITER_INIT ((HashmapIter){})

/* The untyped functions the wrappers call. */
int hashmap_put(Hashmap *h, HashmapKeyType type, HashmapKey key, void *value);
int hashmap_replace(Hashmap *h, HashmapKeyType type, HashmapKey key, void *value, void **ret_old);
void *hashmap_get(const Hashmap *h, HashmapKeyType type, HashmapKey key);
void *hashmap_remove(Hashmap *h, HashmapKeyType type, HashmapKey key);
bool hashmap_remove_value(Hashmap *h, HashmapKeyType type, HashmapKey key, const void *value);
bool hashmap_next(const Hashmap *h, HashmapIter *i, HashmapKey *ret_key, void **ret_value);
/* Frees the table (not the values): the map is empty again. */
void hashmap_clear(Hashmap *h);

static inline size_t hashmap_size(const Hashmap *h) {
        return h->n_items;
}

#define _HASHMAP_DEFINE(Map, prefix, key_type, key_field, KEY_TYPE, Value)                              \
        typedef struct Map {                                                                            \
                Hashmap base;                                                                           \
        } Map;                                                                                          \
        _unused_ static inline int prefix##_put(Map *m, key_type key, Value *v) {                       \
                return hashmap_put(&m->base, KEY_TYPE, (HashmapKey){ .key_field = key }, v);            \
        }                                                                                               \
        _unused_ static inline int prefix##_replace(Map *m, key_type key, Value *v, Value **ret_old) {  \
                void *old = NULL;                                                                       \
                int r = hashmap_replace(&m->base, KEY_TYPE, (HashmapKey){ .key_field = key }, v, &old); \
                if (r >= 0 && ret_old)                                                                  \
                        *ret_old = old;                                                                 \
                return r;                                                                               \
        }                                                                                               \
        _unused_ static inline Value *prefix##_get(const Map *m, key_type key) {                        \
                return hashmap_get(&m->base, KEY_TYPE, (HashmapKey){ .key_field = key });               \
        }                                                                                               \
        _unused_ static inline Value *prefix##_remove(Map *m, key_type key) {                           \
                return hashmap_remove(&m->base, KEY_TYPE, (HashmapKey){ .key_field = key });            \
        }                                                                                               \
        _unused_ static inline bool prefix##_remove_value(Map *m, key_type key, const Value *v) {       \
                return hashmap_remove_value(&m->base, KEY_TYPE, (HashmapKey){ .key_field = key }, v);   \
        }                                                                                               \
        _unused_ static inline size_t prefix##_size(const Map *m) {                                     \
                return hashmap_size(&m->base);                                                          \
        }                                                                                               \
        _unused_ static inline bool prefix##_next(const Map *m, HashmapIter *i, key_type *ret_key,      \
                                                  Value **ret_value) {                                  \
                HashmapKey k;                                                                           \
                void *v;                                                                                \
                if (!hashmap_next(&m->base, i, &k, &v))                                                 \
                        return false;                                                                   \
                if (ret_key)                                                                            \
                        *ret_key = k.key_field;                                                         \
                if (ret_value)                                                                          \
                        *ret_value = v;                                                                 \
                return true;                                                                            \
        }                                                                                               \
        _unused_ static inline void prefix##_clear(Map *m, void (*free_value)(Value * v)) {             \
                HashmapIter i = HASHMAP_ITER_INIT;                                                      \
                Value *v;                                                                               \
                while (free_value && prefix##_next(m, &i, NULL, &v))                                    \
                        free_value(v);                                                                  \
                hashmap_clear(&m->base);                                                                \
        }                                                                                               \
        struct _hashmap_##prefix##_semicolon

#define DEFINE_STRING_HASHMAP(Map, prefix, Value) \
        _HASHMAP_DEFINE(Map, prefix, const char *, string, HASHMAP_KEY_STRING, Value)
#define DEFINE_UINT64_HASHMAP(Map, prefix, Value) \
        _HASHMAP_DEFINE(Map, prefix, uint64_t, u64, HASHMAP_KEY_UINT64, Value)

#define _HASHMAP_CONCAT2(a, b) a##b
#define _HASHMAP_CONCAT(a, b) _HASHMAP_CONCAT2(a, b)
#define _HASHMAP_FOREACH(v, prefix, map, i) \
        for (HashmapIter i = HASHMAP_ITER_INIT; prefix##_next((map), &i, NULL, &(v));)
/* Every value of a map, in no particular order; removing entries in the
 * body is fine, adding some is not. */
#define HASHMAP_FOREACH(v, prefix, map) \
        _HASHMAP_FOREACH(v, prefix, map, _HASHMAP_CONCAT(_hm_iter_, __COUNTER__))
