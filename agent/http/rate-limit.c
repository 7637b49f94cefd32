/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Token buckets keyed by a string, bounded, with explicit time: see rate-limit.h. */
#include <arpa/inet.h>
#include <sys/un.h>

#include "hashmap.h"
#include "rate-limit.h"

typedef struct Bucket Bucket;
struct Bucket {
        char *key;
        /* When the bucket is full again (the GCRA's theoretical arrival
         * time): at or before now, it is full. */
        uint64_t full_at;
        Bucket *lru_prev, *lru_next;
};

DEFINE_STRING_HASHMAP(BucketMap, bucket_map, Bucket);

struct RateLimit {
        uint64_t interval_usec; /* one take's worth of time */
        uint64_t tolerance_usec; /* (burst - 1) intervals: how far ahead full_at may be */
        size_t max_keys;
        BucketMap buckets;
        Bucket *lru_head, *lru_tail; /* most recently used first */
};

static void bucket_free(Bucket *b) {
        if (!b)
                return;
        free(b->key);
        free(b);
}

int rate_limit_new(double per_second, unsigned burst, size_t max_keys, RateLimit **ret) {
        RateLimit *l;

        if (!ret || !(per_second >= 0) || burst < 1 || max_keys < 1)
                return -EINVAL;
        l = calloc(1, sizeof(*l));
        if (!l)
                return -ENOMEM;
        if (per_second > 0) {
                double i = (double) USEC_PER_SEC / per_second;
                /* At least a microsecond; at most a day (a rate under one a day is none). */
                l->interval_usec = i < 1                        ? 1
                                   : i > 86400.0 * USEC_PER_SEC ? 86400ULL * USEC_PER_SEC
                                                                : (uint64_t) i;
                l->tolerance_usec = (uint64_t) (burst - 1) * l->interval_usec;
        }
        l->max_keys = max_keys;
        *ret = l;
        return 0;
}

RateLimit *rate_limit_free(RateLimit *l) {
        if (!l)
                return NULL;
        bucket_map_clear(&l->buckets, bucket_free);
        free(l);
        return NULL;
}

static void bucket_drop(RateLimit *l, Bucket *b) {
        DLIST_REMOVE(lru_prev, lru_next, l->lru_head, l->lru_tail, b);
        (void) bucket_map_remove_value(&l->buckets, b->key, b);
        bucket_free(b);
}

/* The key's bucket, made (evicting the least recently used at the bound)
 * when there is none; NULL when out of memory. */
static Bucket *bucket_get(RateLimit *l, const char *key, uint64_t now) {
        char cut[RATE_LIMIT_KEY_MAX + 1];
        Bucket *b;

        if (strlen(key) > RATE_LIMIT_KEY_MAX) {
                memcpy(cut, key, RATE_LIMIT_KEY_MAX);
                cut[RATE_LIMIT_KEY_MAX] = 0;
                key = cut;
        }
        b = bucket_map_get(&l->buckets, key);
        if (b) {
                DLIST_REMOVE(lru_prev, lru_next, l->lru_head, l->lru_tail, b);
                DLIST_PREPEND(lru_prev, lru_next, l->lru_head, l->lru_tail, b);
                return b;
        }
        while (l->lru_tail && bucket_map_size(&l->buckets) >= l->max_keys)
                bucket_drop(l, l->lru_tail);
        b = calloc(1, sizeof(*b));
        if (!b)
                return NULL;
        b->key = strdup(key);
        b->full_at = now;
        if (!b->key || bucket_map_put(&l->buckets, b->key, b) < 0) {
                bucket_free(b);
                return NULL;
        }
        DLIST_PREPEND(lru_prev, lru_next, l->lru_head, l->lru_tail, b);
        return b;
}

bool rate_limit_take(RateLimit *l, const char *key, uint64_t now, uint64_t *ret_wait_usec) {
        uint64_t at;
        Bucket *b;

        if (!l || l->interval_usec == 0 || !key)
                return true;
        b = bucket_get(l, key, now);
        if (!b)
                return true;
        at = MAX(b->full_at, now);
        if (at - now > l->tolerance_usec) {
                if (ret_wait_usec)
                        *ret_wait_usec = at - now - l->tolerance_usec;
                return false;
        }
        b->full_at = at + l->interval_usec;
        return true;
}

size_t rate_limit_keys(const RateLimit *l) {
        return l ? bucket_map_size(&l->buckets) : 0;
}

const char *rate_limit_source_key(const struct sockaddr *sa, char buf[static RATE_LIMIT_SOURCE_MAX]) {
        struct in6_addr a;

        strcpy(buf, "local");
        if (!sa)
                return buf;
        if (sa->sa_family == AF_INET) {
                if (!inet_ntop(AF_INET, &((const struct sockaddr_in *) sa)->sin_addr, buf,
                               RATE_LIMIT_SOURCE_MAX))
                        strcpy(buf, "local");
                return buf;
        }
        if (sa->sa_family != AF_INET6)
                return buf;
        a = ((const struct sockaddr_in6 *) sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(&a)) {
                if (!inet_ntop(AF_INET, &a.s6_addr[12], buf, RATE_LIMIT_SOURCE_MAX))
                        strcpy(buf, "local");
                return buf;
        }
        if (IN6_IS_ADDR_LOOPBACK(&a)) {
                strcpy(buf, "::1");
                return buf;
        }
        memset(&a.s6_addr[8], 0, 8);
        if (!inet_ntop(AF_INET6, &a, buf, RATE_LIMIT_SOURCE_MAX - 3))
                strcpy(buf, "local");
        else
                strcat(buf, "/64");
        return buf;
}

unsigned rate_limit_retry_after_sec(uint64_t wait_usec) {
        uint64_t s = (wait_usec + USEC_PER_SEC - 1) / USEC_PER_SEC;

        return s < 1 ? 1 : s > 86400 ? 86400 : (unsigned) s;
}
