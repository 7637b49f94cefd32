/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <assert.h>

#include "hashmap.h"

#define HASH_EMPTY 0
#define HASH_REMOVED 1
#define MIN_SLOTS 8

/* MurmurHash3's 64-bit finalizer: every input bit flips about half of the
 * output bits, so the low bits the table uses are as good as the high ones. */
static uint64_t mix64(uint64_t x) {
        x ^= x >> 33;
        x *= UINT64_C(0xff51afd7ed558ccd);
        x ^= x >> 33;
        x *= UINT64_C(0xc4ceb9fe1a85ec53);
        x ^= x >> 33;
        return x;
}

static uint64_t key_hash(HashmapKeyType type, HashmapKey key) {
        uint64_t h;

        if (type == HASHMAP_KEY_STRING) {
                /* FNV-1a, then mixed. */
                h = UINT64_C(0xcbf29ce484222325);
                for (const unsigned char *p = (const unsigned char *) key.string; *p; p++) {
                        h ^= *p;
                        h *= UINT64_C(0x100000001b3);
                }
                h = mix64(h);
        } else
                h = mix64(key.u64);
        /* 0 and 1 mark empty and removed slots. */
        return h > HASH_REMOVED ? h : h + 2;
}

static bool key_equal(HashmapKeyType type, HashmapKey a, HashmapKey b) {
        return type == HASHMAP_KEY_STRING ? streq(a.string, b.string) : a.u64 == b.u64;
}

/* The slot holding key, or NULL. */
static HashmapSlot *find(const Hashmap *h, HashmapKeyType type, HashmapKey key, uint64_t hash) {
        if (h->n_items == 0)
                return NULL;
        size_t mask = h->n_slots - 1;
        for (size_t i = hash & mask;; i = (i + 1) & mask) {
                HashmapSlot *s = &h->slots[i];
                if (s->hash == HASH_EMPTY)
                        return NULL;
                if (s->hash == hash && key_equal(type, s->key, key))
                        return s;
        }
}

/* Moves every entry into a new table of n_slots slots (dropping the marks
 * of removed entries). */
static int rehash(Hashmap *h, size_t n_slots) {
        HashmapSlot *slots = calloc(n_slots, sizeof(HashmapSlot));
        if (!slots)
                return -ENOMEM;
        for (size_t i = 0; i < h->n_slots; i++) {
                const HashmapSlot *s = &h->slots[i];
                if (s->hash <= HASH_REMOVED)
                        continue;
                size_t j = s->hash & (n_slots - 1);
                while (slots[j].hash != HASH_EMPTY)
                        j = (j + 1) & (n_slots - 1);
                slots[j] = *s;
        }
        free(h->slots);
        h->slots = slots;
        h->n_slots = n_slots;
        h->n_removed = 0;
        return 0;
}

/* Makes room for one more entry: a table at most 3/4 full (entries and
 * removal marks), at most 1/2 full of entries after a resize. */
static int reserve_one(Hashmap *h) {
        size_t n_slots = MIN_SLOTS;

        if (h->n_slots > 0 && (h->n_items + h->n_removed + 1) * 4 <= h->n_slots * 3)
                return 0;
        while (n_slots / 2 < h->n_items + 1) {
                if (n_slots > SIZE_MAX / 2 / sizeof(HashmapSlot))
                        return -ENOMEM;
                n_slots *= 2;
        }
        return rehash(h, n_slots);
}

static void slot_set(HashmapSlot *s, uint64_t hash, HashmapKey key, void *value) {
        *s = (HashmapSlot){ .hash = hash, .key = key, .value = value };
}

static int insert(Hashmap *h, HashmapKeyType type, HashmapKey key, void *value, bool replace,
                  void **ret_old) {
        uint64_t hash;
        HashmapSlot *s;
        int r;

        if (!value || (type == HASHMAP_KEY_STRING && !key.string))
                return -EINVAL;
        hash = key_hash(type, key);
        s = find(h, type, key, hash);
        if (s) {
                if (!replace)
                        return -EEXIST;
                if (ret_old)
                        *ret_old = s->value;
                /* The key too: the old one may live in the old value. */
                slot_set(s, hash, key, value);
                return 0;
        }

        r = reserve_one(h);
        if (r < 0)
                return r;
        size_t mask = h->n_slots - 1, i = hash & mask;
        while (h->slots[i].hash > HASH_REMOVED)
                i = (i + 1) & mask;
        if (h->slots[i].hash == HASH_REMOVED)
                h->n_removed--;
        slot_set(&h->slots[i], hash, key, value);
        h->n_items++;
        if (ret_old)
                *ret_old = NULL;
        return 0;
}

int hashmap_put(Hashmap *h, HashmapKeyType type, HashmapKey key, void *value) {
        return insert(h, type, key, value, false, NULL);
}

int hashmap_replace(Hashmap *h, HashmapKeyType type, HashmapKey key, void *value, void **ret_old) {
        return insert(h, type, key, value, true, ret_old);
}

void *hashmap_get(const Hashmap *h, HashmapKeyType type, HashmapKey key) {
        if (type == HASHMAP_KEY_STRING && !key.string)
                return NULL;
        HashmapSlot *s = find(h, type, key, key_hash(type, key));
        return s ? s->value : NULL;
}

static void *slot_remove(Hashmap *h, HashmapSlot *s) {
        void *value = s->value;

        /* A mark, not an empty slot: entries further along the probe chain
         * stay reachable, and nothing moves under an iteration. */
        *s = (HashmapSlot){ .hash = HASH_REMOVED };
        h->n_items--;
        h->n_removed++;
        return value;
}

void *hashmap_remove(Hashmap *h, HashmapKeyType type, HashmapKey key) {
        if (type == HASHMAP_KEY_STRING && !key.string)
                return NULL;
        HashmapSlot *s = find(h, type, key, key_hash(type, key));
        return s ? slot_remove(h, s) : NULL;
}

bool hashmap_remove_value(Hashmap *h, HashmapKeyType type, HashmapKey key, const void *value) {
        if (type == HASHMAP_KEY_STRING && !key.string)
                return false;
        HashmapSlot *s = find(h, type, key, key_hash(type, key));
        if (!s || s->value != value)
                return false;
        slot_remove(h, s);
        return true;
}

bool hashmap_next(const Hashmap *h, HashmapIter *i, HashmapKey *ret_key, void **ret_value) {
        if (i->next == 0)
                i->slots = h->slots;
        /* Entries were added and the table moved: this iteration would miss or repeat some. */
        assert(i->slots == h->slots || h->n_slots == 0);
        for (; i->next < h->n_slots; i->next++) {
                const HashmapSlot *s = &h->slots[i->next];
                if (s->hash <= HASH_REMOVED)
                        continue;
                i->next++;
                if (ret_key)
                        *ret_key = s->key;
                if (ret_value)
                        *ret_value = s->value;
                return true;
        }
        return false;
}

void hashmap_clear(Hashmap *h) {
        free(h->slots);
        *h = (Hashmap){};
}
