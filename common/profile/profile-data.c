/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <endian.h>
#include <sys/random.h>
#include <time.h>

#include "profile-data.h"
#include "template.h"

/* Frames and stacks are looked up through open-addressing hash tables
 * (linear probing, at most half full) that map a key to an index into
 * d->frames or d->stacks. Names come from the profiled programs, so the hash
 * is SipHash-1-3 with a random key: a binary with crafted symbol names cannot
 * turn lookups quadratic.
 *
 * Strings are stored as valid UTF-8 (invalid bytes become U+FFFD), so that
 * every report format (JSON, pprof's proto3 strings) can carry them. */

typedef struct SipHash {
        uint64_t v0, v1, v2, v3;
        uint64_t padding;
        size_t n_padding;
        size_t inlen;
} SipHash;

#define ROTL64(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

static inline void sipround(SipHash *s) {
        s->v0 += s->v1;
        s->v1 = ROTL64(s->v1, 13);
        s->v1 ^= s->v0;
        s->v0 = ROTL64(s->v0, 32);
        s->v2 += s->v3;
        s->v3 = ROTL64(s->v3, 16);
        s->v3 ^= s->v2;
        s->v0 += s->v3;
        s->v3 = ROTL64(s->v3, 21);
        s->v3 ^= s->v0;
        s->v2 += s->v1;
        s->v1 = ROTL64(s->v1, 17);
        s->v1 ^= s->v2;
        s->v2 = ROTL64(s->v2, 32);
}

static void siphash_init(SipHash *s, const uint64_t key[static 2]) {
        *s = (SipHash){
                .v0 = UINT64_C(0x736f6d6570736575) ^ key[0],
                .v1 = UINT64_C(0x646f72616e646f6d) ^ key[1],
                .v2 = UINT64_C(0x6c7967656e657261) ^ key[0],
                .v3 = UINT64_C(0x7465646279746573) ^ key[1],
        };
}

static inline void siphash_block(SipHash *s, uint64_t m) {
        s->v3 ^= m;
        sipround(s);
        s->v0 ^= m;
}

static void siphash_compress(SipHash *s, const void *data, size_t n) {
        const uint8_t *p = data;

        s->inlen += n;

        if (s->n_padding > 0) {
                for (; n > 0 && s->n_padding < 8; n--)
                        s->padding |= (uint64_t) *p++ << (8 * s->n_padding++);
                if (s->n_padding < 8)
                        return;
                siphash_block(s, s->padding);
                s->padding = 0;
                s->n_padding = 0;
        }

        for (; n >= 8; n -= 8, p += 8) {
                uint64_t m;

                memcpy(&m, p, sizeof(m));
                siphash_block(s, le64toh(m));
        }

        for (; n > 0; n--)
                s->padding |= (uint64_t) *p++ << (8 * s->n_padding++);
}

static uint64_t siphash_finalize(SipHash *s) {
        uint64_t b = ((uint64_t) s->inlen << 56) | s->padding;

        siphash_block(s, b);
        s->v2 ^= 0xff;
        sipround(s);
        sipround(s);
        sipround(s);
        return s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
}

typedef struct Slot {
        uint32_t entry; /* index + 1; 0: empty */
        uint32_t hash; /* low 32 bits of the hash: probe start and quick compare */
} Slot;

typedef struct Index {
        Slot *slots;
        size_t n_slots; /* 0 or a power of two */
        size_t n_used;
        uint64_t key[2];
} Index;

typedef bool (*EntryEqualFunc)(const ProfileData *d, uint32_t entry, const void *key);
/* Fills entry, the new last element of an array, from key: all of it, or nothing and a negative errno. */
typedef int (*EntryNewFunc)(void *entry, const void *key);

static Index *index_new(void) {
        Index *ix = calloc(1, sizeof(Index));

        if (!ix)
                return NULL;

        if (getrandom(ix->key, sizeof(ix->key), GRND_NONBLOCK) != (ssize_t) sizeof(ix->key)) {
                /* Early boot without entropy: a weaker key still spreads normal input well. */
                struct timespec ts = {};

                (void) clock_gettime(CLOCK_MONOTONIC, &ts);
                ix->key[0] = ((uint64_t) ts.tv_sec << 32) ^ (uint64_t) ts.tv_nsec;
                ix->key[0] ^= (uint64_t) (uintptr_t) ix;
                ix->key[1] = ((uint64_t) getpid() << 32) ^ UINT64_C(0x9E3779B97F4A7C15);
        }
        return ix;
}

static Index *index_free(Index *ix) {
        if (ix)
                free(ix->slots);
        free(ix);
        return NULL;
}

/* The slot holding an entry equal to key, or the empty slot where it belongs. */
static Slot *index_lookup(const Index *ix, uint32_t hash, EntryEqualFunc eq, const ProfileData *d,
                          const void *key) {
        size_t mask = ix->n_slots - 1;

        for (size_t i = hash & mask;; i = (i + 1) & mask) {
                Slot *s = ix->slots + i;

                if (s->entry == 0)
                        return s;
                if (s->hash == hash && eq(d, s->entry - 1, key))
                        return s;
        }
}

/* The first empty slot on hash's probe sequence. */
static Slot *slot_empty(Slot *slots, size_t mask, uint32_t hash) {
        size_t j;

        for (j = hash & mask; slots[j].entry != 0; j = (j + 1) & mask)
                ;
        return slots + j;
}

/* Makes room for one more entry, keeping the table at most half full. */
static int index_reserve(Index *ix) {
        size_t n_slots, mask;
        Slot *slots;

        if ((ix->n_used + 1) * 2 <= ix->n_slots)
                return 0;

        n_slots = ix->n_slots == 0 ? 64 : ix->n_slots * 2;
        if (n_slots > (size_t) UINT32_MAX + 1)
                return -E2BIG;
        slots = calloc(n_slots, sizeof(Slot));
        if (!slots)
                return -ENOMEM;

        mask = n_slots - 1;
        for (size_t i = 0; i < ix->n_slots; i++)
                if (ix->slots[i].entry != 0)
                        *slot_empty(slots, mask, ix->slots[i].hash) = ix->slots[i];

        free(ix->slots);
        ix->slots = slots;
        ix->n_slots = n_slots;
        return 0;
}

/* The entry equal to key among the *n elements (of size bytes) of *array that ix indexes under hash: the
 * one there is, or a new one that new_entry makes at the end. Its number goes to ret_index. Call it
 * through INTERN(): eq reads d's array, which may move before new_entry runs. */
static int intern_entry(const ProfileData *d, Index *ix, uint32_t hash, EntryEqualFunc eq,
                        EntryNewFunc new_entry, const void *key, void **array, size_t *allocated, size_t *n,
                        size_t size, uint32_t *ret_index) {
        int r;

        if (ix->n_slots > 0) {
                Slot *slot = index_lookup(ix, hash, eq, d, key);

                if (slot->entry != 0) {
                        if (ret_index)
                                *ret_index = slot->entry - 1;
                        return 0;
                }
        }
        if (*n >= UINT32_MAX - 1)
                return -E2BIG;

        r = greedy_realloc(array, allocated, *n + 1, size, 16);
        if (r < 0)
                return r;
        r = index_reserve(ix);
        if (r < 0)
                return r;
        r = new_entry((uint8_t *) *array + *n * size, key);
        if (r < 0)
                return r;

        /* Nothing in ix equals key: it goes where the lookup stopped. */
        *slot_empty(ix->slots, ix->n_slots - 1, hash) = (Slot){ .entry = (uint32_t) *n + 1, .hash = hash };
        ix->n_used++;
        if (ret_index)
                *ret_index = (uint32_t) *n;
        (*n)++;
        return 0;
}

#define INTERN(d, ix, hash, eq, new_entry, key, array, allocated, n, ret_index)                             \
        ({                                                                                                  \
                void *_a = (void *) (array);                                                                \
                int _r = intern_entry((d), (ix), (hash), (eq), (new_entry), (key), &_a, &(allocated), &(n), \
                                      sizeof((array)[0]), (ret_index));                                     \
                (array) = _a;                                                                               \
                _r;                                                                                         \
        })

ProfileData *profile_data_new(void) {
        ProfileData *d = calloc(1, sizeof(ProfileData));

        if (!d)
                return NULL;

        d->frame_index = index_new();
        d->stack_index = index_new();
        d->mapping_index = index_new();
        d->location_index = index_new();
        if (!d->frame_index || !d->stack_index || !d->mapping_index || !d->location_index)
                return profile_data_free(d);
        return d;
}

ProfileData *profile_data_free(ProfileData *d) {
        if (!d)
                return NULL;

        for (size_t i = 0; i < d->n_frames; i++) {
                free(d->frames[i].name);
                free(d->frames[i].module);
                free(d->frames[i].file);
        }
        free(d->frames);

        for (size_t i = 0; i < d->n_processes; i++) {
                free(d->processes[i].comm);
                free(d->processes[i].cmdline);
                free(d->processes[i].python);
        }
        free(d->processes);

        for (size_t i = 0; i < d->n_stacks; i++) {
                free(d->stacks[i].frames);
                free(d->stacks[i].locations);
        }
        free(d->stacks);

        for (size_t i = 0; i < d->n_mappings; i++) {
                free(d->mappings[i].file);
                free(d->mappings[i].build_id);
                free(d->mappings[i].unwind_table);
                free(d->mappings[i].symbols);
        }
        free(d->mappings);
        free(d->locations);

        index_free(d->frame_index);
        index_free(d->stack_index);
        index_free(d->mapping_index);
        index_free(d->location_index);
        free(d);
        return NULL;
}

/* A malloc()ed valid UTF-8 copy of s. */
static char *strdup_utf8(const char *s) {
        return utf8_is_valid(s) ? strdup(s) : utf8_make_valid(s);
}

/* *field becomes a copy of s (by dup; NULL for NULL) unless it is equal already. */
static int string_update(char **field, const char *s, char *(*dup)(const char *) ) {
        char *c;

        if (streq_ptr(*field, s))
                return 0;
        c = s ? dup(s) : NULL;
        if (s && !c)
                return -ENOMEM;
        free(*field);
        *field = c;
        return 0;
}

/* *ret: a malloc()ed copy of s, or NULL for NULL. */
static int strdup_null(const char *s, char **ret) {
        *ret = s ? strdup(s) : NULL;
        return s && !*ret ? -ENOMEM : 0;
}

typedef struct FrameKey {
        const char *name;
        const char *module;
        const char *file;
        FrameKind kind;
} FrameKey;

static bool frame_equal(const ProfileData *d, uint32_t entry, const void *key) {
        const FrameKey *k = key;
        const Frame *f = d->frames + entry;

        return f->kind == k->kind && streq(f->name, k->name) && streq_ptr(f->module, k->module) &&
               streq_ptr(f->file, k->file);
}

static uint32_t frame_hash(const Index *ix, const FrameKey *k) {
        uint8_t kind = (uint8_t) k->kind, has = (uint8_t) ((k->module ? 1 : 0) | (k->file ? 2 : 0));
        SipHash s;

        siphash_init(&s, ix->key);
        siphash_compress(&s, k->name, strlen(k->name) + 1);
        siphash_compress(&s, &has, 1);
        if (k->module)
                siphash_compress(&s, k->module, strlen(k->module) + 1);
        if (k->file)
                siphash_compress(&s, k->file, strlen(k->file) + 1);
        siphash_compress(&s, &kind, 1);
        if (k->file)
                siphash_compress(&s, k->file, strlen(k->file) + 1);
        return (uint32_t) siphash_finalize(&s);
}

static int frame_new(void *entry, const void *key) {
        const FrameKey *k = key;
        _cleanup_free_ char *n = NULL, *m = NULL, *fl = NULL;

        n = strdup(k->name);
        if (!n || strdup_null(k->module, &m) < 0 || strdup_null(k->file, &fl) < 0)
                return -ENOMEM;

        *(Frame *) entry = (Frame){
                .name = TAKE_PTR(n),
                .module = TAKE_PTR(m),
                .file = TAKE_PTR(fl),
                .kind = k->kind,
        };
        return 0;
}

int profile_data_intern_frame(ProfileData *d, const char *name, const char *module, FrameKind kind,
                              uint32_t *ret_index) {
        return profile_data_intern_frame_full(d, name, module, NULL, kind, ret_index);
}

int profile_data_intern_frame_full(ProfileData *d, const char *name, const char *module, const char *file,
                                   FrameKind kind, uint32_t *ret_index) {
        _cleanup_free_ char *valid_name = NULL, *valid_module = NULL, *valid_file = NULL;
        FrameKey key;

        if (!d || !name || kind < 0 || kind >= _FRAME_KIND_MAX)
                return -EINVAL;

        /* The common case, a frame seen before with a valid name, allocates nothing. */
        if (utf8_ensure_valid(&name, &valid_name) < 0 || utf8_ensure_valid(&module, &valid_module) < 0 ||
            utf8_ensure_valid(&file, &valid_file) < 0)
                return -ENOMEM;

        key = (FrameKey){ .name = name, .module = module, .file = file, .kind = kind };
        return INTERN(d, d->frame_index, frame_hash(d->frame_index, &key), frame_equal, frame_new, &key,
                      d->frames, d->allocated_frames, d->n_frames, ret_index);
}

int profile_data_add_process(ProfileData *d, pid_t pid, const char *comm, const char *cmdline,
                             uint32_t *ret_index) {
        _cleanup_free_ char *c = NULL, *l = NULL;
        int r;

        if (!d)
                return -EINVAL;
        if (d->n_processes >= UINT32_MAX)
                return -E2BIG;

        c = strdup_utf8(comm ?: "[unknown]");
        if (!c)
                return -ENOMEM;
        if (cmdline) {
                l = strdup_utf8(cmdline);
                if (!l)
                        return -ENOMEM;
        }

        r = GREEDY_REALLOC(d->processes, d->allocated_processes, d->n_processes + 1, 16);
        if (r < 0)
                return r;

        d->processes[d->n_processes] = (ProfileProcess){
                .pid = pid,
                .comm = TAKE_PTR(c),
                .cmdline = TAKE_PTR(l),
                .job = JOB_IDENTITY_NONE,
        };
        if (ret_index)
                *ret_index = (uint32_t) d->n_processes;
        d->n_processes++;
        return 0;
}

int profile_data_process_set_job(ProfileData *d, uint32_t process, const JobIdentity *job, JobRole role,
                                 pid_t parent_pid) {
        if (!d || process >= d->n_processes || !job)
                return -EINVAL;
        d->processes[process].job = *job;
        d->processes[process].role = role;
        d->processes[process].parent_pid = parent_pid;
        return 0;
}

int profile_data_process_set_python(ProfileData *d, uint32_t process, const char *status) {
        if (!d || process >= d->n_processes)
                return -EINVAL;
        return string_update(&d->processes[process].python, status, strdup_utf8);
}

typedef struct StackKey {
        uint32_t process;
        const uint32_t *frames;
        const uint32_t *locations;
        uint32_t n_frames;
        bool truncated; /* not part of the key: what a new stack is marked */
} StackKey;

static bool stack_equal(const ProfileData *d, uint32_t entry, const void *key) {
        const StackKey *k = key;
        const ProfileStack *s = d->stacks + entry;

        if (s->process != k->process || s->n_frames != k->n_frames || !s->locations != !k->locations)
                return false;
        if (k->n_frames == 0)
                return true;
        return memcmp(s->frames, k->frames, k->n_frames * sizeof(uint32_t)) == 0 &&
               (!k->locations || memcmp(s->locations, k->locations, k->n_frames * sizeof(uint32_t)) == 0);
}

static uint32_t stack_hash(const Index *ix, const StackKey *k) {
        uint8_t has_locations = !!k->locations;
        SipHash s;

        siphash_init(&s, ix->key);
        siphash_compress(&s, &k->process, sizeof(k->process));
        siphash_compress(&s, &k->n_frames, sizeof(k->n_frames));
        siphash_compress(&s, &has_locations, 1);
        if (k->n_frames > 0) {
                siphash_compress(&s, k->frames, k->n_frames * sizeof(uint32_t));
                if (k->locations)
                        siphash_compress(&s, k->locations, k->n_frames * sizeof(uint32_t));
        }
        return (uint32_t) siphash_finalize(&s);
}

static uint32_t *u32_copy(const uint32_t *a, size_t n) {
        uint32_t *c = malloc(MAX(n, (size_t) 1) * sizeof(uint32_t));
        if (c && n > 0)
                memcpy(c, a, n * sizeof(uint32_t));
        return c;
}

/* A new stack counts nothing yet: its caller adds the count, as to one found. */
static int stack_new(void *entry, const void *key) {
        const StackKey *k = key;
        _cleanup_free_ uint32_t *copy = NULL, *copy_locations = NULL;

        if (k->n_frames > 0) {
                copy = u32_copy(k->frames, k->n_frames);
                if (!copy)
                        return -ENOMEM;
                if (k->locations) {
                        copy_locations = u32_copy(k->locations, k->n_frames);
                        if (!copy_locations)
                                return -ENOMEM;
                }
        }

        *(ProfileStack *) entry = (ProfileStack){
                .process = k->process,
                .frames = TAKE_PTR(copy),
                .locations = TAKE_PTR(copy_locations),
                .n_frames = k->n_frames,
                .truncated = k->truncated,
        };
        return 0;
}

int profile_data_add_stack_full(ProfileData *d, uint32_t process, const uint32_t *frames,
                                const uint32_t *locations, size_t n_frames, bool truncated, uint64_t count) {
        return profile_data_add_stack_values(d, process, frames, locations, n_frames, truncated, count, 0);
}

int profile_data_add_stack_values(ProfileData *d, uint32_t process, const uint32_t *frames,
                                  const uint32_t *locations, size_t n_frames, bool truncated, uint64_t count,
                                  uint64_t offcpu_ns) {
        StackKey key;
        uint32_t stack;
        int r;

        if (!d || process >= d->n_processes || (n_frames > 0 && !frames))
                return -EINVAL;
        if (n_frames > UINT32_MAX)
                return -E2BIG;
        for (size_t i = 0; i < n_frames; i++) {
                if (frames[i] >= d->n_frames)
                        return -EINVAL;
                if (!locations)
                        continue;
                if (locations[i] >= d->n_locations || d->locations[locations[i]].frame != frames[i])
                        return -EINVAL;
                /* An inlined call right after what it was inlined into. */
                if (d->locations[locations[i]].inlined_into != PROFILE_NONE &&
                    (i == 0 || locations[i - 1] != d->locations[locations[i]].inlined_into))
                        return -EINVAL;
        }
        if (n_frames == 0)
                locations = NULL;

        key = (StackKey){ .process = process,
                          .frames = frames,
                          .locations = locations,
                          .n_frames = (uint32_t) n_frames,
                          .truncated = truncated };
        r = INTERN(d, d->stack_index, stack_hash(d->stack_index, &key), stack_equal, stack_new, &key,
                   d->stacks, d->allocated_stacks, d->n_stacks, &stack);
        if (r < 0)
                return r;

        d->stacks[stack].count += count;
        d->stacks[stack].offcpu_ns += offcpu_ns;
        d->processes[process].samples += count;
        return 0;
}

int profile_data_add_stack(ProfileData *d, uint32_t process, const uint32_t *frames, size_t n_frames,
                           uint64_t count) {
        return profile_data_add_stack_full(d, process, frames, NULL, n_frames, false, count);
}

typedef struct MappingKey {
        const char *file;
        uint64_t start, limit, offset;
        const char *build_id;
        bool kernel;
} MappingKey;

static bool mapping_equal(const ProfileData *d, uint32_t entry, const void *key) {
        const MappingKey *k = key;
        const ProfileMapping *m = d->mappings + entry;

        return m->start == k->start && m->limit == k->limit && m->offset == k->offset &&
               m->kernel == k->kernel && streq(m->file, k->file) && streq_ptr(m->build_id, k->build_id);
}

static uint32_t mapping_hash(const Index *ix, const MappingKey *k) {
        uint64_t nums[3] = { k->start, k->limit, k->offset };
        uint8_t flags = (uint8_t) (k->kernel | (k->build_id ? 2 : 0));
        SipHash s;

        siphash_init(&s, ix->key);
        siphash_compress(&s, nums, sizeof(nums));
        siphash_compress(&s, &flags, 1);
        siphash_compress(&s, k->file, strlen(k->file) + 1);
        if (k->build_id)
                siphash_compress(&s, k->build_id, strlen(k->build_id) + 1);
        return (uint32_t) siphash_finalize(&s);
}

static int mapping_new(void *entry, const void *key) {
        const MappingKey *k = key;
        _cleanup_free_ char *f = NULL, *b = NULL;

        f = strdup_utf8(k->file);
        if (!f || strdup_null(k->build_id, &b) < 0)
                return -ENOMEM;

        *(ProfileMapping *) entry = (ProfileMapping){
                .file = TAKE_PTR(f),
                .start = k->start,
                .limit = k->limit,
                .offset = k->offset,
                .build_id = TAKE_PTR(b),
                .kernel = k->kernel,
        };
        return 0;
}

int profile_data_intern_mapping(ProfileData *d, const char *file, uint64_t start, uint64_t limit,
                                uint64_t offset, const char *build_id, bool kernel, uint32_t *ret_index) {
        MappingKey key;

        if (!d || !file)
                return -EINVAL;

        key = (MappingKey){ .file = file,
                            .start = start,
                            .limit = limit,
                            .offset = offset,
                            .build_id = build_id,
                            .kernel = kernel };
        return INTERN(d, d->mapping_index, mapping_hash(d->mapping_index, &key), mapping_equal, mapping_new,
                      &key, d->mappings, d->allocated_mappings, d->n_mappings, ret_index);
}

static bool location_equal(const ProfileData *d, uint32_t entry, const void *key) {
        const ProfileLocation *k = key, *l = d->locations + entry;
        return l->address == k->address && l->mapping == k->mapping && l->frame == k->frame &&
               l->line == k->line && l->inlined_into == k->inlined_into;
}

static uint32_t location_hash(const Index *ix, const ProfileLocation *k) {
        uint64_t v[3] = { k->address, ((uint64_t) k->mapping << 32) | k->frame,
                          ((uint64_t) k->line << 32) | k->inlined_into };
        SipHash s;

        siphash_init(&s, ix->key);
        siphash_compress(&s, v, sizeof(v));
        return (uint32_t) siphash_finalize(&s);
}

static int location_new(void *entry, const void *key) {
        *(ProfileLocation *) entry = *(const ProfileLocation *) key;
        return 0;
}

/* *field, if it is still unset, becomes a copy of s (if not NULL). */
static int string_set_once(char **field, const char *s) {
        return *field ? 0 : strdup_null(s, field);
}

int profile_data_mapping_set_unwind_table(ProfileData *d, uint32_t mapping, const char *unwind_table) {
        if (!d || mapping >= d->n_mappings)
                return -EINVAL;
        return string_set_once(&d->mappings[mapping].unwind_table, unwind_table);
}

int profile_data_mapping_set_symbols(ProfileData *d, uint32_t mapping, const char *symbols) {
        if (!d || mapping >= d->n_mappings)
                return -EINVAL;
        return string_set_once(&d->mappings[mapping].symbols, symbols);
}

int profile_data_mapping_update_symbols(ProfileData *d, uint32_t mapping, const char *symbols) {
        if (!d || mapping >= d->n_mappings || !symbols)
                return -EINVAL;
        return string_update(&d->mappings[mapping].symbols, symbols, strdup);
}

int profile_data_intern_location(ProfileData *d, uint64_t address, uint32_t mapping, uint32_t frame,
                                 uint32_t *ret_index) {
        return profile_data_intern_location_full(d, address, mapping, frame, 0, PROFILE_NONE, ret_index);
}

int profile_data_intern_location_full(ProfileData *d, uint64_t address, uint32_t mapping, uint32_t frame,
                                      uint32_t line, uint32_t inlined_into, uint32_t *ret_index) {
        ProfileLocation key = {
                .address = address,
                .mapping = mapping,
                .frame = frame,
                .line = line,
                .inlined_into = inlined_into,
        };

        if (!d || frame >= d->n_frames || (mapping != PROFILE_NONE && mapping >= d->n_mappings))
                return -EINVAL;
        /* The function it was inlined into: at the same address, in the same mapping. */
        if (inlined_into != PROFILE_NONE &&
            (inlined_into >= d->n_locations || d->locations[inlined_into].address != address ||
             d->locations[inlined_into].mapping != mapping))
                return -EINVAL;

        return INTERN(d, d->location_index, location_hash(d->location_index, &key), location_equal,
                      location_new, &key, d->locations, d->allocated_locations, d->n_locations, ret_index);
}

uint64_t profile_data_total(const ProfileData *d) {
        uint64_t total = 0;

        if (!d)
                return 0;
        for (size_t i = 0; i < d->n_stacks; i++)
                total += d->stacks[i].count;
        return total;
}

static int top_function_compare(const void *a, const void *b, void *userdata) {
        const TopFunction *x = a, *y = b;
        const ProfileData *d = userdata;
        const Frame *fx = d->frames + x->frame, *fy = d->frames + y->frame;
        int r;

        r = CMP(y->self, x->self);
        if (r != 0)
                return r;
        r = CMP(y->total, x->total);
        if (r != 0)
                return r;
        r = strcmp(fx->name, fy->name);
        if (r != 0)
                return r;
        /* Same name, different module or kind: keep the order stable anyway. */
        r = strcmp(strempty(fx->module), strempty(fy->module));
        if (r != 0)
                return r;
        r = CMP(fx->kind, fy->kind);
        if (r != 0)
                return r;
        return CMP(x->frame, y->frame);
}

int profile_data_top_functions(const ProfileData *d, size_t max, TopFunction **ret, size_t *ret_n) {
        _cleanup_free_ uint64_t *self = NULL, *total = NULL;
        _cleanup_free_ size_t *last_stack = NULL;
        _cleanup_free_ TopFunction *top = NULL;
        size_t n = 0;

        if (!d || !ret || !ret_n)
                return -EINVAL;

        if (d->n_frames > 0) {
                self = calloc(d->n_frames, sizeof(uint64_t));
                total = calloc(d->n_frames, sizeof(uint64_t));
                last_stack = calloc(d->n_frames, sizeof(size_t));
                if (!self || !total || !last_stack)
                        return -ENOMEM;
        }

        for (size_t i = 0; i < d->n_stacks; i++) {
                const ProfileStack *s = d->stacks + i;

                if (s->n_frames == 0)
                        continue;

                self[s->frames[s->n_frames - 1]] += s->count;

                /* Inclusive samples count a frame once per stack, so that
                 * recursion does not count a sample several times. */
                for (uint32_t j = 0; j < s->n_frames; j++) {
                        uint32_t f = s->frames[j];

                        if (last_stack[f] == i + 1)
                                continue;
                        last_stack[f] = i + 1;
                        total[f] += s->count;
                }
        }

        for (size_t i = 0; i < d->n_frames; i++)
                if (total[i] > 0)
                        n++;

        if (n > 0) {
                size_t k = 0;

                top = calloc(n, sizeof(TopFunction));
                if (!top)
                        return -ENOMEM;
                for (size_t i = 0; i < d->n_frames; i++)
                        if (total[i] > 0)
                                top[k++] = (TopFunction){
                                        .frame = (uint32_t) i,
                                        .self = self[i],
                                        .total = total[i],
                                };

                qsort_r(top, n, sizeof(TopFunction), top_function_compare, (void *) d);

                if (max > 0 && n > max) {
                        TopFunction *t;

                        n = max;
                        t = realloc(top, n * sizeof(TopFunction));
                        if (t)
                                top = t;
                }
        }

        *ret = TAKE_PTR(top);
        *ret_n = n;
        return 0;
}

ProfileData *profile_data_of_process(const ProfileData *d, uint32_t process) {
        return profile_data_of_processes(d, &process, 1);
}

uint64_t profile_data_offcpu_total(const ProfileData *d) {
        uint64_t total = 0;

        for (size_t i = 0; d && i < d->n_stacks; i++)
                total += d->stacks[i].offcpu_ns;
        return total;
}

/* What a copy keeps. launches: -1 every stack, 0 the CPU samples only, 1
 * the launches only, 2 the launches without their dimensions frame. value:
 * which values; wall: count is the wall-clock µs (samples × period_ns +
 * off-CPU ns), value ignored. drop_threads: without thread frames. */
typedef struct CopyOptions {
        int launches;
        ProfileValue value;
        bool wall;
        uint64_t period_ns;
        bool drop_threads;
} CopyOptions;

static ProfileData *of_processes(const ProfileData *d, const uint32_t *processes, size_t n,
                                 const CopyOptions *o);

ProfileData *profile_data_of_processes(const ProfileData *d, const uint32_t *processes, size_t n) {
        return of_processes(d, processes, n, &(CopyOptions){ .launches = -1 });
}

/* The indices of all of d's processes (NULL: out of memory). */
static uint32_t *all_processes(const ProfileData *d) {
        uint32_t *all = malloc(MAX(d->n_processes, (size_t) 1) * sizeof(uint32_t));

        for (size_t i = 0; all && i < d->n_processes; i++)
                all[i] = (uint32_t) i;
        return all;
}

static ProfileData *of_all(const ProfileData *d, const CopyOptions *o) {
        _cleanup_free_ uint32_t *all = NULL;

        if (!d || d->n_processes == 0)
                return d ? profile_data_new() : NULL;
        all = all_processes(d);
        return all ? of_processes(d, all, d->n_processes, o) : NULL;
}

ProfileData *profile_data_of_value(const ProfileData *d, ProfileValue value) {
        return of_all(d, &(CopyOptions){ .launches = -1, .value = value });
}

bool profile_data_has_threads(const ProfileData *d) {
        for (size_t i = 0; d && i < d->n_frames; i++)
                if (d->frames[i].kind == FRAME_THREAD)
                        return true;
        return false;
}

ProfileData *profile_data_without_threads(const ProfileData *d) {
        return of_all(d, &(CopyOptions){ .launches = -1, .drop_threads = true });
}

ProfileData *profile_data_wall_clock(const ProfileData *d, uint64_t period_ns) {
        return of_all(d, &(CopyOptions){ .launches = 0, .wall = true, .period_ns = period_ns });
}

bool profile_stack_is_launch(const ProfileData *d, const ProfileStack *st) {
        const Frame *leaf;

        if (st->n_frames == 0)
                return false;
        leaf = &d->frames[st->frames[st->n_frames - 1]];
        return leaf->module && (strcmp(leaf->module, PROFILE_CUDA_KERNEL_MODULE) == 0 ||
                                strcmp(leaf->module, PROFILE_CUDA_LAUNCH_MODULE) == 0);
}

static bool stack_has_dims(const ProfileData *d, const ProfileStack *st) {
        const char *m = st->n_frames > 0 ? d->frames[st->frames[st->n_frames - 1]].module : NULL;
        return m && strcmp(m, PROFILE_CUDA_LAUNCH_MODULE) == 0;
}

ProfileData *profile_data_launches_without_dims(const ProfileData *launches) {
        return of_all(launches, &(CopyOptions){ .launches = 2 });
}

int profile_data_split_launches(const ProfileData *d, ProfileData **ret_cpu, ProfileData **ret_launches) {
        _cleanup_(profile_data_freep) ProfileData *cpu = NULL, *launches = NULL;
        bool any = false;

        *ret_cpu = *ret_launches = NULL;
        for (size_t i = 0; i < d->n_stacks && !any; i++)
                any = profile_stack_is_launch(d, &d->stacks[i]);
        if (!any)
                return 0;
        cpu = of_all(d, &(CopyOptions){ .launches = 0 });
        launches = of_all(d, &(CopyOptions){ .launches = 1 });
        if (!cpu || !launches)
                return -ENOMEM;
        *ret_cpu = TAKE_PTR(cpu);
        *ret_launches = TAKE_PTR(launches);
        return 1;
}

static bool copy_processes(ProfileData *p, const ProfileData *d, const uint32_t *processes, size_t n,
                           const CopyOptions *o);

static ProfileData *of_processes(const ProfileData *d, const uint32_t *processes, size_t n,
                                 const CopyOptions *o) {
        _cleanup_(profile_data_freep) ProfileData *p = NULL;

        if (!d || !processes || n == 0)
                return NULL;
        for (size_t k = 0; k < n; k++)
                if (processes[k] >= d->n_processes)
                        return NULL;
        p = profile_data_new();
        if (!p || !copy_processes(p, d, processes, n, o))
                return NULL;
        return TAKE_PTR(p);
}

int profile_data_merge(ProfileData *into, const ProfileData *d) {
        _cleanup_free_ uint32_t *all = NULL;

        if (!into || !d)
                return -EINVAL;
        if (d->n_processes == 0)
                return 0;
        all = all_processes(d);
        if (!all)
                return -ENOMEM;
        return copy_processes(into, d, all, d->n_processes, &(CopyOptions){ .launches = -1 }) ? 0 : -ENOMEM;
}

/* Adds the processes of d (indices, all valid) to p, with their stacks
 * (and the frames, mappings, locations these use): false on OOM. */
/* Copies location l of d (and its mapping) into p as location_map[l],
 * mapping_map[its mapping], its function the frame of p given. */
static int copy_location(const ProfileData *d, ProfileData *p, uint32_t *mapping_map, uint32_t *location_map,
                         uint32_t l, uint32_t frame) {
        const ProfileLocation *loc = &d->locations[l];
        uint32_t mp = PROFILE_NONE;
        int r;

        if (loc->mapping != PROFILE_NONE) {
                if (mapping_map[loc->mapping] == PROFILE_NONE) {
                        const ProfileMapping *m = &d->mappings[loc->mapping];
                        r = profile_data_intern_mapping(p, m->file, m->start, m->limit, m->offset,
                                                        m->build_id, m->kernel, &mapping_map[loc->mapping]);
                        if (r >= 0)
                                r = profile_data_mapping_set_unwind_table(p, mapping_map[loc->mapping],
                                                                          m->unwind_table);
                        if (r >= 0)
                                r = profile_data_mapping_set_symbols(p, mapping_map[loc->mapping],
                                                                     m->symbols);
                        if (r < 0)
                                return r;
                }
                mp = mapping_map[loc->mapping];
        }
        /* What it was inlined into came before it in the stack. */
        if (loc->inlined_into != PROFILE_NONE && location_map[loc->inlined_into] == PROFILE_NONE)
                return -EINVAL;
        return profile_data_intern_location_full(
                p, loc->address, mp, frame, loc->line,
                loc->inlined_into != PROFILE_NONE ? location_map[loc->inlined_into] : PROFILE_NONE,
                &location_map[l]);
}

static bool copy_processes(ProfileData *p, const ProfileData *d, const uint32_t *processes, size_t n,
                           const CopyOptions *o) {
        int launches = o->launches;
        ProfileValue value = o->value;
        _cleanup_free_ uint32_t *frame_map = NULL, *mapping_map = NULL, *location_map = NULL,
                                *process_map = NULL;

        frame_map = malloc(MAX(d->n_frames, (size_t) 1) * sizeof(uint32_t));
        mapping_map = malloc(MAX(d->n_mappings, (size_t) 1) * sizeof(uint32_t));
        location_map = malloc(MAX(d->n_locations, (size_t) 1) * sizeof(uint32_t));
        if (!frame_map || !mapping_map || !location_map)
                return false;
        memset(frame_map, 0xff, MAX(d->n_frames, (size_t) 1) * sizeof(uint32_t));
        memset(mapping_map, 0xff, MAX(d->n_mappings, (size_t) 1) * sizeof(uint32_t));
        memset(location_map, 0xff, MAX(d->n_locations, (size_t) 1) * sizeof(uint32_t));

        process_map = malloc(d->n_processes * sizeof(uint32_t));
        if (!process_map)
                return false;
        memset(process_map, 0xff, d->n_processes * sizeof(uint32_t));
        for (size_t k = 0; k < n; k++) {
                const ProfileProcess *pp = &d->processes[processes[k]];
                if (process_map[processes[k]] != PROFILE_NONE)
                        continue; /* listed twice */
                if (profile_data_add_process(p, pp->pid, pp->comm, pp->cmdline, &process_map[processes[k]]) <
                            0 ||
                    profile_data_process_set_python(p, process_map[processes[k]], pp->python) < 0 ||
                    profile_data_process_set_job(p, process_map[processes[k]], &pp->job, pp->role,
                                                 pp->parent_pid) < 0)
                        return false;
        }

        for (size_t i = 0; i < d->n_stacks; i++) {
                const ProfileStack *st = &d->stacks[i];
                _cleanup_free_ uint32_t *frames = NULL, *locations = NULL;
                uint32_t idx = process_map[st->process];
                uint64_t count = st->count, offcpu_ns = st->offcpu_ns;

                if (idx == PROFILE_NONE)
                        continue;
                if (launches >= 0 && profile_stack_is_launch(d, st) != (launches >= 1))
                        continue;
                uint32_t n_frames = st->n_frames - (launches == 2 && stack_has_dims(d, st) ? 1 : 0),
                         kept = 0;
                if (o->wall) {
                        count = (count * o->period_ns + offcpu_ns + 500) / 1000;
                        offcpu_ns = 0;
                        if (count == 0)
                                continue;
                } else if (value == PROFILE_VALUE_CPU) {
                        offcpu_ns = 0;
                        if (count == 0)
                                continue;
                } else if (value == PROFILE_VALUE_OFFCPU_USEC) {
                        count = (offcpu_ns + 500) / 1000;
                        offcpu_ns = 0;
                        if (count == 0)
                                continue;
                }
                frames = malloc(MAX(st->n_frames, 1u) * sizeof(uint32_t));
                locations = st->locations ? malloc(MAX(st->n_frames, 1u) * sizeof(uint32_t)) : NULL;
                if (!frames || (st->locations && !locations))
                        return false;
                for (size_t k = 0; k < n_frames; k++) {
                        uint32_t f = st->frames[k], at;
                        if (o->drop_threads && d->frames[f].kind == FRAME_THREAD)
                                continue;
                        at = kept++; /* where it goes in the copy */
                        if (frame_map[f] == PROFILE_NONE) {
                                const Frame *fr = &d->frames[f];
                                if (profile_data_intern_frame_full(p, fr->name, fr->module, fr->file,
                                                                   fr->kind, &frame_map[f]) < 0)
                                        return false;
                        }
                        frames[at] = frame_map[f];
                        if (!st->locations)
                                continue;
                        uint32_t l = st->locations[k];
                        if (location_map[l] == PROFILE_NONE &&
                            copy_location(d, p, mapping_map, location_map, l, frames[at]) < 0)
                                return false;
                        locations[at] = location_map[l];
                }
                if (profile_data_add_stack_values(p, idx, frames, locations, kept, st->truncated, count,
                                                  offcpu_ns) < 0)
                        return false;
        }
        return true;
}

/* Whether position k of stack st is a frame late resolution may name: an
 * unresolved frame with an address in user space (in a user mapping, or in
 * none: JIT code in anonymous memory). */
static bool relocate_candidate(const ProfileData *d, const ProfileStack *st, uint32_t k) {
        const ProfileLocation *l;

        if (!st->locations || d->frames[st->frames[k]].kind != FRAME_UNKNOWN)
                return false;
        l = &d->locations[st->locations[k]];
        return l->mapping == PROFILE_NONE || !d->mappings[l->mapping].kernel;
}

static bool frame_name_valid(int r, const ProfileFrameName *fn) {
        return r > 0 && fn->name && fn->kind >= 0 && fn->kind < _FRAME_KIND_MAX && fn->kind != FRAME_UNKNOWN;
}

/* Whether any candidate resolves now, before anything is copied: when none
 * does (the common case), late resolution costs its lookups only. memo: per
 * location, the process it was asked for last. */
static int relocate_probe(const ProfileData *d, ProfileResolveFunc resolve, void *userdata, uint32_t *memo,
                          ProfileRelocateStats *stats) {
        for (size_t i = 0; i < d->n_stacks; i++) {
                const ProfileStack *st = &d->stacks[i];

                for (uint32_t k = 0; k < st->n_frames; k++) {
                        uint32_t l = st->locations ? st->locations[k] : PROFILE_NONE;
                        ProfileFrameName fn = {};
                        int r;

                        if (!relocate_candidate(d, st, k) || memo[l] == st->process)
                                continue;
                        memo[l] = st->process;
                        stats->calls++;
                        r = resolve(userdata, st->process, &d->locations[l], &fn);
                        if (r < 0)
                                return r;
                        if (frame_name_valid(r, &fn))
                                return 1;
                }
        }
        return 0;
}

/* The candidates' samples into stats->candidates (and stacks_before/after
 * as d has them); returns the most frames of a stack of d. */
static size_t relocate_count(const ProfileData *d, ProfileRelocateStats *stats) {
        size_t max_frames = 0;

        stats->stacks_before = stats->stacks_after = d->n_stacks;
        for (size_t i = 0; i < d->n_stacks; i++) {
                const ProfileStack *st = &d->stacks[i];

                max_frames = MAX(max_frames, (size_t) st->n_frames);
                for (uint32_t k = 0; k < st->n_frames; k++)
                        if (relocate_candidate(d, st, k))
                                stats->candidates += st->count;
        }
        return max_frames;
}

/* Nothing to relocate: d stays as it is. */
static int relocate_nothing(ProfileData **ret, ProfileRelocateStats *ret_stats,
                            const ProfileRelocateStats *stats) {
        *ret = NULL;
        if (ret_stats)
                *ret_stats = *stats;
        return 0;
}

/* Copies the processes and mappings of d into p. They keep their indices:
 * sessions hold process indices, and a mapping carries its counters. */
static int relocate_copy_processes_mappings(const ProfileData *d, ProfileData *p) {
        int r;

        for (size_t i = 0; i < d->n_processes; i++) {
                const ProfileProcess *pp = &d->processes[i];
                uint32_t idx;

                r = profile_data_add_process(p, pp->pid, pp->comm, pp->cmdline, &idx);
                if (r >= 0)
                        r = profile_data_process_set_python(p, idx, pp->python);
                if (r >= 0)
                        r = profile_data_process_set_job(p, idx, &pp->job, pp->role, pp->parent_pid);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; i < d->n_mappings; i++) {
                const ProfileMapping *m = &d->mappings[i];
                uint32_t idx;

                r = profile_data_intern_mapping(p, m->file, m->start, m->limit, m->offset, m->build_id,
                                                m->kernel, &idx);
                if (r < 0)
                        return r;
                if (idx != i)
                        return -EINVAL; /* two equal mappings: not made by profile_data_intern_mapping() */
                r = profile_data_mapping_set_unwind_table(p, idx, m->unwind_table);
                if (r >= 0)
                        r = profile_data_mapping_set_symbols(p, idx, m->symbols);
                if (r < 0)
                        return r;
                p->mappings[idx].table_frames = m->table_frames;
                p->mappings[idx].fp_frames = m->fp_frames;
                p->mappings[idx].sp_cfa_frames = m->sp_cfa_frames;
                p->mappings[idx].fp_cfa_frames = m->fp_cfa_frames;
        }
        return 0;
}

/* A relocation of d into p under way (the arrays are profile_data_relocate()'s). */
typedef struct Relocation {
        const ProfileData *d;
        ProfileData *p;
        ProfileResolveFunc resolve;
        void *userdata;
        /* Per frame and location of d: its copy in p (PROFILE_NONE: not yet);
         * per location, the process it was last resolved for and the
         * location that gave in p (PROFILE_NONE: unresolved for it). */
        uint32_t *frame_map, *keep_loc, *memo_process, *memo_loc;
        bool *named; /* per location of d: resolved for some process */
        uint32_t *frames, *locations; /* the stack being copied */
        ProfileRelocateStats *stats;
} Relocation;

/* Resolves candidate location l of d for process, once per location and
 * process in a row: x->memo_loc[l] becomes its named copy in p, or
 * PROFILE_NONE. */
static int relocate_resolve(Relocation *x, uint32_t process, uint32_t l) {
        const ProfileLocation *ol = &x->d->locations[l];
        ProfileFrameName fn = {};
        uint32_t nf;
        int r;

        if (x->memo_process[l] == process)
                return 0;
        x->stats->calls++;
        r = x->resolve(x->userdata, process, ol, &fn);
        if (r < 0)
                return r;
        x->memo_process[l] = process;
        if (!frame_name_valid(r, &fn)) {
                x->memo_loc[l] = PROFILE_NONE;
                return 0;
        }
        r = profile_data_intern_frame(x->p, fn.name, fn.module, fn.kind, &nf);
        if (r < 0)
                return r;
        if (!x->named[l])
                x->stats->locations_resolved++;
        x->named[l] = true;
        return profile_data_intern_location(x->p, ol->address, ol->mapping, nf, &x->memo_loc[l]);
}

/* Frame f and location l of d as they were: their copies in p (each made
 * once) into *ret_frame and, unless l is PROFILE_NONE, *ret_location. */
static int relocate_keep(Relocation *x, uint32_t f, uint32_t l, uint32_t *ret_frame,
                         uint32_t *ret_location) {
        int r;

        if (x->frame_map[f] == PROFILE_NONE) {
                const Frame *fr = &x->d->frames[f];

                r = profile_data_intern_frame_full(x->p, fr->name, fr->module, fr->file, fr->kind,
                                                   &x->frame_map[f]);
                if (r < 0)
                        return r;
        }
        *ret_frame = x->frame_map[f];
        if (l == PROFILE_NONE)
                return 0;
        if (x->keep_loc[l] == PROFILE_NONE) {
                const ProfileLocation *ol = &x->d->locations[l];
                uint32_t into = PROFILE_NONE;

                /* What it was inlined into came right before it in the
                 * stack, and was kept (an inlined call is never
                 * unresolved): its copy. */
                if (ol->inlined_into != PROFILE_NONE) {
                        into = x->keep_loc[ol->inlined_into];
                        if (into == PROFILE_NONE)
                                return -EINVAL;
                }
                r = profile_data_intern_location_full(x->p, ol->address, ol->mapping, *ret_frame, ol->line,
                                                      into, &x->keep_loc[l]);
                if (r < 0)
                        return r;
        }
        *ret_location = x->keep_loc[l];
        return 0;
}

/* Copies stack st of d into p: the candidates that resolve now named,
 * every other frame as it was. */
static int relocate_stack(Relocation *x, const ProfileStack *st) {
        int r;

        for (uint32_t k = 0; k < st->n_frames; k++) {
                uint32_t f = st->frames[k], l = st->locations ? st->locations[k] : PROFILE_NONE;

                if (relocate_candidate(x->d, st, k)) {
                        r = relocate_resolve(x, st->process, l);
                        if (r < 0)
                                return r;
                        if (x->memo_loc[l] != PROFILE_NONE) {
                                x->stats->resolved += st->count;
                                x->locations[k] = x->memo_loc[l];
                                x->frames[k] = x->p->locations[x->memo_loc[l]].frame;
                                continue;
                        }
                        /* Still unresolved (for this process): as it was. */
                }
                r = relocate_keep(x, f, l, &x->frames[k], &x->locations[k]);
                if (r < 0)
                        return r;
        }
        return profile_data_add_stack_values(x->p, st->process, x->frames,
                                             st->locations ? x->locations : NULL, st->n_frames,
                                             st->truncated, st->count, st->offcpu_ns);
}

int profile_data_relocate(const ProfileData *d, ProfileResolveFunc resolve, void *userdata,
                          ProfileData **ret, ProfileRelocateStats *ret_stats) {
        _cleanup_(profile_data_freep) ProfileData *p = NULL;
        /* The arrays of Relocation (what each holds: there). */
        _cleanup_free_ uint32_t *frame_map = NULL, *keep_loc = NULL, *memo_process = NULL, *memo_loc = NULL,
                                *frames = NULL, *locations = NULL;
        _cleanup_free_ bool *named = NULL;
        ProfileRelocateStats stats = {};
        size_t max_frames, n_loc = MAX(d ? d->n_locations : 0, (size_t) 1);
        Relocation x;
        int r;

        if (!d || !resolve || !ret)
                return -EINVAL;

        max_frames = relocate_count(d, &stats);
        if (stats.candidates == 0)
                return relocate_nothing(ret, ret_stats, &stats);

        memo_process = malloc(n_loc * sizeof(uint32_t));
        if (!memo_process)
                return -ENOMEM;
        memset(memo_process, 0xff, n_loc * sizeof(uint32_t));
        r = relocate_probe(d, resolve, userdata, memo_process, &stats);
        if (r < 0)
                return r;
        if (r == 0)
                return relocate_nothing(ret, ret_stats, &stats);
        memset(memo_process, 0xff, n_loc * sizeof(uint32_t));

        p = profile_data_new();
        frame_map = malloc(MAX(d->n_frames, (size_t) 1) * sizeof(uint32_t));
        keep_loc = malloc(n_loc * sizeof(uint32_t));
        memo_loc = malloc(n_loc * sizeof(uint32_t));
        frames = malloc(MAX(max_frames, (size_t) 1) * sizeof(uint32_t));
        locations = malloc(MAX(max_frames, (size_t) 1) * sizeof(uint32_t));
        named = calloc(n_loc, sizeof(bool));
        if (!p || !frame_map || !keep_loc || !memo_loc || !frames || !locations || !named)
                return -ENOMEM;
        memset(frame_map, 0xff, MAX(d->n_frames, (size_t) 1) * sizeof(uint32_t));
        memset(keep_loc, 0xff, n_loc * sizeof(uint32_t));
        memset(memo_loc, 0xff, n_loc * sizeof(uint32_t));

        r = relocate_copy_processes_mappings(d, p);
        if (r < 0)
                return r;

        x = (Relocation){
                .d = d,
                .p = p,
                .resolve = resolve,
                .userdata = userdata,
                .frame_map = frame_map,
                .keep_loc = keep_loc,
                .memo_process = memo_process,
                .memo_loc = memo_loc,
                .named = named,
                .frames = frames,
                .locations = locations,
                .stats = &stats,
        };
        for (size_t i = 0; i < d->n_stacks; i++) {
                r = relocate_stack(&x, &d->stacks[i]);
                if (r < 0)
                        return r;
        }

        stats.stacks_after = p->n_stacks;
        if (ret_stats)
                *ret_stats = stats;
        *ret = stats.resolved > 0 ? TAKE_PTR(p) : NULL;
        return 0;
}
