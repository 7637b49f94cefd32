/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include "macro.h"

/* Token buckets keyed by a string (a client's address, a user's name): a
 * key may take 'burst' at once, then 'per_second' (may be fractional). The
 * bucket is the GCRA's (the generic cell rate algorithm, ATM's and
 * nginx's limit_req's): a key keeps one time, when its bucket will be full
 * again; a key whose bucket is full holds nothing the limit needs, and is
 * forgotten when it is the least recently used of max_keys and another
 * comes. So the map is bounded, and an eviction at worst gives a key that
 * was not full a full bucket again (the price of the bound: max_keys
 * distinct keys in a row). Time is the caller's (CLOCK_MONOTONIC
 * microseconds): nothing here reads a clock, and tests drive it with
 * explicit timestamps. */

#define RATE_LIMIT_KEY_MAX 256U /* longer keys are cut to this many bytes */

typedef struct RateLimit RateLimit;

/* per_second 0: no limit (every take succeeds, nothing is kept). burst >= 1. */
int rate_limit_new(double per_second, unsigned burst, size_t max_keys, RateLimit **ret);
RateLimit *rate_limit_free(RateLimit *l);
DEFINE_TRIVIAL_CLEANUP_FUNC(RateLimit *, rate_limit_free);

/* Takes one from key's bucket at 'now'. true: taken. false: the bucket is
 * empty, nothing taken; *ret_wait_usec (when given) says how long until one
 * is there (> 0). Out of memory counts as taken (a limit is not worth a
 * refusal nobody asked for). */
bool rate_limit_take(RateLimit *l, const char *key, uint64_t now, uint64_t *ret_wait_usec);
/* The keys kept now. */
size_t rate_limit_keys(const RateLimit *l);

/* The key of a client's address: an IPv4 address (also when mapped into
 * IPv6), an IPv6 address's /64 ("2001:db8:1:2::/64": one host usually
 * holds a whole /64, and could otherwise take 2^64 buckets), "::1", and
 * "local" for a Unix socket or an unknown address. */
#define RATE_LIMIT_SOURCE_MAX (INET6_ADDRSTRLEN + 4)
const char *rate_limit_source_key(const struct sockaddr *sa, char buf[static RATE_LIMIT_SOURCE_MAX]);
/* Seconds for a Retry-After header: the wait rounded up, at least 1. */
unsigned rate_limit_retry_after_sec(uint64_t wait_usec);
