/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The listener's connections as slots: see http-slots.h. */
#include "http-slots.h"

/* The list holds every slot; the waiting ones are in order of 'since'
 * (a slot that starts to wait again goes to the end, its 'since' the
 * latest), the busy ones wherever they were. */

static void unlink_slot(HttpSlots *l, HttpSlot *s) {
        if (s->prev)
                s->prev->next = s->next;
        else
                l->head = s->next;
        if (s->next)
                s->next->prev = s->prev;
        else
                l->tail = s->prev;
        s->prev = s->next = NULL;
}

static void append_slot(HttpSlots *l, HttpSlot *s) {
        s->prev = l->tail;
        s->next = NULL;
        if (l->tail)
                l->tail->next = s;
        else
                l->head = s;
        l->tail = s;
}

void http_slots_add(HttpSlots *l, HttpSlot *s, int fd, uint64_t now) {
        *s = (HttpSlot){ .fd = fd, .since = now };
        append_slot(l, s);
        l->n++;
        l->n_waiting++;
}

void http_slots_remove(HttpSlots *l, HttpSlot *s) {
        unlink_slot(l, s);
        l->n--;
        if (!s->busy)
                l->n_waiting--;
}

void http_slots_set_busy(HttpSlots *l, HttpSlot *s, bool busy, uint64_t now) {
        if (s->busy == busy)
                return;
        s->busy = busy;
        if (busy) {
                l->n_waiting--;
                return;
        }
        l->n_waiting++;
        s->since = now;
        unlink_slot(l, s);
        append_slot(l, s);
}

HttpSlot *http_slots_oldest_waiting(const HttpSlots *l, const HttpSlot *except) {
        for (HttpSlot *s = l->head; s; s = s->next)
                if (!s->busy && s != except)
                        return s;
        return NULL;
}

uint64_t http_slots_next_expiry(const HttpSlots *l, uint64_t deadline) {
        const HttpSlot *s = http_slots_oldest_waiting(l, NULL);

        return s ? s->since + deadline : UINT64_MAX;
}
