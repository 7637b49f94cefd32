/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

#define USEC_PER_SEC ((uint64_t) 1000000ULL)
#define USEC_PER_MSEC ((uint64_t) 1000ULL)
#define NSEC_PER_SEC ((uint64_t) 1000000000ULL)
#define NSEC_PER_USEC ((uint64_t) 1000ULL)
#define USEC_INFINITY ((uint64_t) UINT64_MAX)

/* The clock's time in microseconds. */
static inline uint64_t now_usec(clockid_t clock) {
        struct timespec ts;
        (void) clock_gettime(clock, &ts);
        return (uint64_t) ts.tv_sec * USEC_PER_SEC + (uint64_t) ts.tv_nsec / NSEC_PER_USEC;
}

/* Take ownership of a pointer: returns it and sets the variable to NULL. */
#define TAKE_PTR(p)                        \
        ({                                 \
                __typeof__(p) _ptr_ = (p); \
                (p) = NULL;                \
                _ptr_;                     \
        })

#define TAKE_FD(fd)              \
        ({                       \
                int _fd_ = (fd); \
                (fd) = -EBADF;   \
                _fd_;            \
        })

/* Defines func##p(type **p) that calls func(*p) when *p is not NULL. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func) \
        static inline void func##p(type *p) {   \
                if (*p)                         \
                        func(*p);               \
        }

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_free_ _cleanup_(freep)

static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                close(fd);
                errno = saved;
        }
        return -EBADF;
}

static inline void closep(int *fd) {
        safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

static inline void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}
#define _cleanup_fclose_ _cleanup_(fclosep)

/* free(p), and NULL to assign back: p = mfree(p). */
static inline void *mfree(void *p) {
        free(p);
        return NULL;
}

/* A strv is a NULL-terminated array of malloc()ed strings. */
static inline char **strv_free(char **l) {
        if (!l)
                return NULL;
        for (char **i = l; *i; i++)
                free(*i);
        free(l);
        return NULL;
}
DEFINE_TRIVIAL_CLEANUP_FUNC(char **, strv_free);
#define _cleanup_strv_free_ _cleanup_(strv_freep)

static inline size_t strv_length(char *const *l) {
        size_t n = 0;
        if (l)
                while (l[n])
                        n++;
        return n;
}

/* A copy of l (NULL: an empty strv), or NULL without memory. */
static inline char **strv_copy(char *const *l) {
        size_t n = strv_length(l);
        char **c = calloc(n + 1, sizeof(char *));

        for (size_t i = 0; c && i < n; i++)
                if (!(c[i] = strdup(l[i])))
                        return strv_free(c);
        return c;
}

/* Frees a secret string (a token, a key) after zeroing it; takes NULL. */
static inline void erase_and_free(char *s) {
        if (!s)
                return;
        explicit_bzero(s, strlen(s));
        free(s);
}

static inline bool streq_ptr(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return strcmp(a, b) == 0;
}
#define streq(a, b) (strcmp((a), (b)) == 0)

static inline const char *strempty(const char *s) {
        return s ? s : "";
}

static inline const char *strna(const char *s) {
        return s ? s : "n/a";
}

/* A double (a JSON number) as a count: 0 when it is negative, NaN or too
 * large for a uint64_t, where the cast would be undefined behaviour. */
static inline uint64_t u64_from_double(double d) {
        return d >= 0 && d < 18446744073709551616.0 ? (uint64_t) d : 0;
}

/* Makes room in *p, an array of *allocated elements of size bytes, for
 * need elements: to at least twice as many, at least initial. On -ENOMEM
 * *p and *allocated stay as they were. */
static inline int greedy_realloc(void **p, size_t *allocated, size_t need, size_t size, size_t initial) {
        size_t a;
        void *q;

        if (need <= *allocated)
                return 0;
        a = MAX(MAX(*allocated * 2, initial), need);
        q = reallocarray(*p, a, size);
        if (!q)
                return -ENOMEM;
        *p = q;
        *allocated = a;
        return 0;
}
/* The same for array, a typed pointer, and its count allocated. */
#define GREEDY_REALLOC(array, allocated, need, initial)                                            \
        ({                                                                                         \
                void *_p = (void *) (array);                                                       \
                int _r = greedy_realloc(&_p, &(allocated), (need), sizeof((array)[0]), (initial)); \
                (array) = _p;                                                                      \
                _r;                                                                                \
        })

/* Compare two integers without overflow (never "return a - b" on u64). */
#define CMP(a, b) ((a) < (b) ? -1 : (a) > (b) ? 1 : 0)

/* name_ref(p), which counts one more reference (p->n_ref) and returns p,
 * and name_unref(p), which counts one less and calls free_func(p) at
 * none; both take NULL, unref returns NULL. */
#define DEFINE_TRIVIAL_REF_UNREF_FUNC(type, name, free_func) \
        type *name##_ref(type *p) {                          \
                if (p)                                       \
                        p->n_ref++;                          \
                return p;                                    \
        }                                                    \
        type *name##_unref(type *p) {                        \
                if (!p || --p->n_ref > 0)                    \
                        return NULL;                         \
                free_func(p);                                \
                return NULL;                                 \
        }

/* name_to_string() and name_from_string() of an enum type whose names
 * are name_table[0 .. max - 1]: NULL for a value out of range, invalid for
 * a string that is no name (or NULL). The _FROM_STRING one alone takes a
 * scope (static, or empty). */
#define DEFINE_STRING_TABLE_TO_STRING(name, type, max)                           \
        const char *name##_to_string(type i) {                                   \
                return (int) i >= 0 && (int) i < (max) ? name##_table[i] : NULL; \
        }
#define DEFINE_STRING_TABLE_FROM_STRING(scope, name, type, max, invalid)  \
        scope type name##_from_string(const char *s) {                    \
                for (int i = 0; s && i < (max); i++)                      \
                        if (name##_table[i] && streq(s, name##_table[i])) \
                                return (type) i;                          \
                return invalid;                                           \
        }
#define DEFINE_STRING_TABLE_LOOKUP(name, type, max, invalid) \
        DEFINE_STRING_TABLE_TO_STRING(name, type, max)       \
        DEFINE_STRING_TABLE_FROM_STRING(, name, type, max, invalid)

/* Binary searches in an array of n elements sorted by KEY, an
 * expression of the element `_e` (e.g. `_e.start`, or `_e` itself):
 * the index of the first element whose key is above key (n when none)... */
#define SORTED_UPPER_BOUND(array, n, KEY, key)                             \
        ({                                                                 \
                size_t _lo = 0, _hi = (n);                                 \
                while (_lo < _hi) {                                        \
                        size_t _mid = _lo + (_hi - _lo) / 2;               \
                        const __typeof__((array)[0]) *_e = &(array)[_mid]; \
                        if ((KEY) <= (key))                                \
                                _lo = _mid + 1;                            \
                        else                                               \
                                _hi = _mid;                                \
                }                                                          \
                _lo;                                                       \
        })
/* ... and of the first element whose key is not below key (n when none). */
#define SORTED_LOWER_BOUND(array, n, KEY, key)                             \
        ({                                                                 \
                size_t _lo = 0, _hi = (n);                                 \
                while (_lo < _hi) {                                        \
                        size_t _mid = _lo + (_hi - _lo) / 2;               \
                        const __typeof__((array)[0]) *_e = &(array)[_mid]; \
                        if ((KEY) < (key))                                 \
                                _lo = _mid + 1;                            \
                        else                                               \
                                _hi = _mid;                                \
                }                                                          \
                _lo;                                                       \
        })

/* Empties a malloc()ed array of n elements: FREE_ONE, an expression of
 * `_e` (a pointer to one element), on each in order, then frees the array
 * and sets it to NULL and n to 0. */
#define ARRAY_CLEAR(array, n, FREE_ONE)                            \
        do {                                                       \
                for (size_t _i = 0; _i < (n); _i++) {              \
                        __typeof__((array)[0]) *_e = &(array)[_i]; \
                        FREE_ONE;                                  \
                }                                                  \
                free(array);                                       \
                (array) = NULL;                                    \
                (n) = 0;                                           \
        } while (0)

/* Doubly linked lists from head alone, through the fields prev and next of
 * each element: LIST_PREPEND puts item first, LIST_REMOVE unlinks it (in
 * the list). */
#define LIST_PREPEND(head, item)               \
        do {                                   \
                (item)->prev = NULL;           \
                (item)->next = (head);         \
                if (head)                      \
                        (head)->prev = (item); \
                (head) = (item);               \
        } while (0)
#define LIST_REMOVE(head, item)                            \
        do {                                               \
                if ((item)->prev)                          \
                        (item)->prev->next = (item)->next; \
                else                                       \
                        (head) = (item)->next;             \
                if ((item)->next)                          \
                        (item)->next->prev = (item)->prev; \
                (item)->prev = (item)->next = NULL;        \
        } while (0)

/* Doubly linked lists from head to tail, through the fields PREV and NEXT
 * of each element (e.g. lru_prev, lru_next). DLIST_REMOVE unlinks e (in
 * the list), DLIST_PREPEND puts e first, DLIST_APPEND last. */
#define DLIST_REMOVE(PREV, NEXT, head, tail, e)    \
        do {                                       \
                __typeof__(e) _e = (e);            \
                if (_e->PREV)                      \
                        _e->PREV->NEXT = _e->NEXT; \
                else                               \
                        (head) = _e->NEXT;         \
                if (_e->NEXT)                      \
                        _e->NEXT->PREV = _e->PREV; \
                else                               \
                        (tail) = _e->PREV;         \
                _e->PREV = _e->NEXT = NULL;        \
        } while (0)
#define DLIST_PREPEND(PREV, NEXT, head, tail, e) \
        do {                                     \
                __typeof__(e) _e = (e);          \
                _e->PREV = NULL;                 \
                _e->NEXT = (head);               \
                if (head)                        \
                        (head)->PREV = _e;       \
                else                             \
                        (tail) = _e;             \
                (head) = _e;                     \
        } while (0)
/* (The same, from the other end.) */
#define DLIST_APPEND(PREV, NEXT, head, tail, e) DLIST_PREPEND(NEXT, PREV, tail, head, e)

/* errno-safe negative error from a libc call that set errno. */
static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}
