/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The reports of reportDir in memory: see report-index.h. */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hashmap.h"
#include "report-index.h"

DEFINE_STRING_HASHMAP(ReportEntryMap, report_entry_map, ReportEntry);

struct ReportIndex {
        ReportEntry **entries; /* oldest first: (start_usec, serial) ascending */
        size_t n_entries, n_allocated;
        ReportEntryMap by_dir; /* keys: the entries' report.report_dir */
        uint64_t bytes;
        uint64_t next_serial;
};

static const char *const removal_names[_REPORT_REMOVAL_MAX] = {
        [REPORT_REMOVAL_AGE] = "age",
        [REPORT_REMOVAL_COUNT] = "count",
        [REPORT_REMOVAL_BYTES] = "bytes",
};

const char *report_removal_to_string(ReportRemoval r) {
        return r >= 0 && r < _REPORT_REMOVAL_MAX ? removal_names[r] : NULL;
}

static void entry_free(ReportEntry *e) {
        if (!e)
                return;
        control_report_done(&e->report);
        free(e);
}

int report_index_new(ReportIndex **ret) {
        ReportIndex *x = calloc(1, sizeof(*x));

        if (!x)
                return -ENOMEM;
        x->next_serial = 1;
        *ret = x;
        return 0;
}

ReportIndex *report_index_free(ReportIndex *x) {
        if (!x)
                return NULL;
        report_entry_map_clear(&x->by_dir, NULL);
        for (size_t i = 0; i < x->n_entries; i++)
                entry_free(x->entries[i]);
        free(x->entries);
        free(x);
        return NULL;
}

size_t report_index_count(const ReportIndex *x) {
        return x ? x->n_entries : 0;
}

uint64_t report_index_bytes(const ReportIndex *x) {
        return x ? x->bytes : 0;
}

static int key_cmp(uint64_t start_a, uint64_t serial_a, uint64_t start_b, uint64_t serial_b) {
        int r = CMP(start_a, start_b);
        return r != 0 ? r : CMP(serial_a, serial_b);
}

/* The position of the first entry not before (start, serial). */
static size_t lower_bound(const ReportIndex *x, uint64_t start, uint64_t serial) {
        size_t lo = 0, hi = x->n_entries;

        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                const ReportEntry *e = x->entries[mid];

                if (key_cmp(e->report.start_usec, e->serial, start, serial) < 0)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        return lo;
}

static void unlink_entry(ReportIndex *x, const ReportEntry *e) {
        size_t i = lower_bound(x, e->report.start_usec, e->serial);

        assert(i < x->n_entries && x->entries[i] == e);
        memmove(x->entries + i, x->entries + i + 1, (x->n_entries - i - 1) * sizeof(ReportEntry *));
        x->n_entries--;
        x->bytes -= e->report.bytes;
}

static int link_entry(ReportIndex *x, ReportEntry *e) {
        size_t i;

        if (GREEDY_REALLOC(x->entries, x->n_allocated, x->n_entries + 1, 64) < 0)
                return -ENOMEM;
        i = lower_bound(x, e->report.start_usec, e->serial);
        memmove(x->entries + i + 1, x->entries + i, (x->n_entries - i) * sizeof(ReportEntry *));
        x->entries[i] = e;
        x->n_entries++;
        x->bytes += e->report.bytes;
        return 0;
}

static int report_copy(const ControlReport *r, ControlReport *ret) {
        *ret = (ControlReport){
                .session = strdup(r->session),
                .report_dir = strdup(r->report_dir),
                .namespace = strdup(r->namespace),
                .pod = strdup(r->pod),
                .container = strdup(r->container),
                .cgroup = strdup(r->cgroup),
                .start_usec = r->start_usec,
                .samples = r->samples,
                .bytes = r->bytes,
        };
        if (!ret->session || !ret->report_dir || !ret->namespace || !ret->pod || !ret->container ||
            !ret->cgroup) {
                control_report_done(ret);
                return -ENOMEM;
        }
        return 0;
}

int report_index_put(ReportIndex *x, const ControlReport *r) {
        ReportEntry *old, *e;
        int k;

        if (!x || !r || !r->report_dir || !r->session || !r->namespace || !r->pod || !r->container ||
            !r->cgroup)
                return -EINVAL;
        e = calloc(1, sizeof(*e));
        if (!e)
                return -ENOMEM;
        k = report_copy(r, &e->report);
        if (k < 0) {
                free(e);
                return k;
        }
        old = report_entry_map_get(&x->by_dir, r->report_dir);
        e->serial = old ? old->serial : x->next_serial++;
        /* Room first: a failure leaves the old entry as it was. */
        if (GREEDY_REALLOC(x->entries, x->n_allocated, x->n_entries + 1, 64) < 0) {
                entry_free(e);
                return -ENOMEM;
        }
        k = report_entry_map_replace(&x->by_dir, e->report.report_dir, e, NULL);
        if (k < 0) {
                entry_free(e);
                return k;
        }
        if (old) {
                unlink_entry(x, old);
                entry_free(old);
        }
        return link_entry(x, e); /* cannot fail: the room is there */
}

bool report_index_remove(ReportIndex *x, const char *report_dir) {
        ReportEntry *e;

        if (!x || !report_dir)
                return false;
        e = report_entry_map_remove(&x->by_dir, report_dir);
        if (!e)
                return false;
        unlink_entry(x, e);
        entry_free(e);
        return true;
}

const ReportEntry *report_index_find_session(const ReportIndex *x, const char *session) {
        if (!x || !session)
                return NULL;
        for (size_t i = x->n_entries; i > 0; i--)
                if (streq(x->entries[i - 1]->report.session, session))
                        return x->entries[i - 1];
        return NULL;
}

/* A decimal number of digits only, up to UINT64_MAX; *end at what follows. */
static int parse_u64(const char *s, const char **end, uint64_t *ret) {
        uint64_t v = 0;
        const char *p = s;

        for (; *p >= '0' && *p <= '9'; p++) {
                unsigned d = (unsigned) (*p - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        if (p == s)
                return -EINVAL;
        *end = p;
        *ret = v;
        return 0;
}

int report_cursor_parse(const char *s, ReportCursor *ret) {
        uint64_t start, serial;
        const char *p;

        if (!s || parse_u64(s, &p, &start) < 0 || *p != '.' || parse_u64(p + 1, &p, &serial) < 0 || *p != 0)
                return -EINVAL;
        *ret = (ReportCursor){ .start_usec = start, .serial = serial };
        return 0;
}

void report_cursor_format(const ReportCursor *c, char buf[static REPORT_CURSOR_STRING_MAX]) {
        snprintf(buf, REPORT_CURSOR_STRING_MAX, "%" PRIu64 ".%" PRIu64, c->start_usec, c->serial);
}

int report_index_list(const ReportIndex *x, ReportMatch match, void *userdata, const ReportCursor *after,
                      size_t limit, const ReportEntry ***ret, size_t *ret_n, bool *ret_more) {
        const ReportEntry **list = NULL;
        size_t n = 0, allocated = 0, i;
        bool more = false;

        /* Newest first: from the end, or from just before the cursor. */
        i = after ? lower_bound(x, after->start_usec, after->serial) : x->n_entries;
        for (; i > 0; i--) {
                const ReportEntry *e = x->entries[i - 1];

                if (match && !match(&e->report, userdata))
                        continue;
                if (limit > 0 && n == limit) {
                        more = true;
                        break;
                }
                if (GREEDY_REALLOC(list, allocated, n + 1, 64) < 0) {
                        free(list);
                        return -ENOMEM;
                }
                list[n++] = e;
        }
        *ret = list;
        *ret_n = n;
        if (ret_more)
                *ret_more = more;
        return 0;
}

void report_victims_free(ReportVictim *v, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(v[i].report_dir);
                free(v[i].session);
                free(v[i].cgroup);
        }
        free(v);
}

/* Whether the entry at i goes, and why. 'left' and 'bytes' are what stays
 * if it does not. */
static bool victim_reason(const ReportEntry *e, const ReportRetention *lim, uint64_t now_usec, size_t left,
                          uint64_t bytes, ReportRemoval *ret) {
        if (lim->max_age_usec > 0 && now_usec > lim->max_age_usec &&
            e->report.start_usec < now_usec - lim->max_age_usec)
                *ret = REPORT_REMOVAL_AGE;
        else if (lim->max_reports > 0 && left > lim->max_reports)
                *ret = REPORT_REMOVAL_COUNT;
        else if (lim->max_bytes > 0 && bytes > lim->max_bytes)
                *ret = REPORT_REMOVAL_BYTES;
        else
                return false;
        return true;
}

int report_index_take_victims(ReportIndex *x, const ReportRetention *lim, uint64_t now_usec,
                              bool (*keep)(const char *report_dir, void *userdata), void *userdata,
                              ReportVictim **ret, size_t *ret_n) {
        ReportVictim *v = NULL;
        size_t n = 0, allocated = 0, left = x->n_entries;
        uint64_t bytes = x->bytes;

        /* Oldest first; an entry kept (running) still counts. The plan is
         * made first, then carried out, so that a failure changes nothing. */
        for (size_t i = 0; i < x->n_entries; i++) {
                const ReportEntry *e = x->entries[i];
                ReportRemoval why;

                if (!victim_reason(e, lim, now_usec, left, bytes, &why)) {
                        /* Too young for age: so is everything after it;
                         * count and bytes are met: nothing more to take. */
                        break;
                }
                if (keep && keep(e->report.report_dir, userdata))
                        continue;
                if (GREEDY_REALLOC(v, allocated, n + 1, 16) < 0)
                        goto oom;
                v[n] = (ReportVictim){
                        .report_dir = strdup(e->report.report_dir),
                        .session = strdup(e->report.session),
                        .cgroup = strdup(e->report.cgroup),
                        .bytes = e->report.bytes,
                        .reason = why,
                };
                n++;
                if (!v[n - 1].report_dir || !v[n - 1].session || !v[n - 1].cgroup)
                        goto oom;
                left--;
                bytes -= e->report.bytes;
        }
        for (size_t i = 0; i < n; i++)
                (void) report_index_remove(x, v[i].report_dir);
        *ret = v;
        *ret_n = n;
        return 0;
oom:
        report_victims_free(v, n);
        return -ENOMEM;
}
