/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The listener's connections as slots: which wait for a request's head
 * (its line and headers), since when, and which serve one (a request in
 * its handler, an answer being sent, a pull waiting for its profile). A
 * client that opens connections and sends nothing, or a byte at a time
 * (slowloris), holds only slots that wait: past the limit of slots, the
 * one that has waited longest is taken back for a new connection (so a
 * Prometheus scrape always gets in), and none waits longer than the head
 * deadline. Pure bookkeeping, no I/O: tests/test-http-slots.c. */

typedef struct HttpSlot {
        int fd;
        uint64_t since; /* waiting: since when (µs, any clock; the caller's) */
        bool busy; /* serving a request */
        struct HttpSlot *prev, *next; /* in order of 'since' among the waiting */
} HttpSlot;

typedef struct HttpSlots {
        HttpSlot *head, *tail; /* oldest first */
        size_t n, n_waiting;
} HttpSlots;

/* A new connection: waiting since now. */
void http_slots_add(HttpSlots *l, HttpSlot *s, int fd, uint64_t now);
void http_slots_remove(HttpSlots *l, HttpSlot *s);
/* Serving a request (busy), or waiting for the next one since now. */
void http_slots_set_busy(HttpSlots *l, HttpSlot *s, bool busy, uint64_t now);
/* The slot that has waited longest (other than 'except'), or NULL. */
HttpSlot *http_slots_oldest_waiting(const HttpSlots *l, const HttpSlot *except);
/* When the oldest waiting slot reaches 'deadline' of waiting (UINT64_MAX: none waits). */
uint64_t http_slots_next_expiry(const HttpSlots *l, uint64_t deadline);
