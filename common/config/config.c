/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <ctype.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/stat.h>
#include <wctype.h>

#include <cjson/cJSON.h>
#include <gnutls/gnutls.h>

#include "config.h"
#include "key-path.h"
#include "pull-query.h"
#include "fileio.h"
#include "socket-address.h"
#include "duration.h"
#include "template.h"

#define CONFIG_FILE_MAX (4U * 1024U * 1024U)

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

static const char *const profile_start_table[_PROFILE_START_MAX] = {
        [PROFILE_START_AUTO] = "auto",
        [PROFILE_START_MANUAL] = "manual",
};

static const char *const unwind_mode_table[_UNWIND_MODE_MAX] = {
        [UNWIND_AUTO] = "auto",
        [UNWIND_FRAME_POINTER] = "frame-pointer",
        [UNWIND_DWARF] = "dwarf",
};

/* perf events a profile may sample on (the names perf(1) uses). */
static const char *const profile_events[] = {
        "cpu-clock",    "task-clock", "cycles",       "cpu-cycles",
        "instructions", "ref-cycles", "cache-misses", "branch-misses",
};

/* The only sysctls machineConfig may set: perf-related knobs. Anything else
 * (kernel.core_pattern, ...) must never be reachable through a ConfigMap. */
static const char *const machine_setting_allow_list[] = {
        "kernel.perf_event_paranoid",       "kernel.perf_event_max_stack",
        "kernel.perf_event_mlock_kb",       "kernel.perf_event_max_sample_rate",
        "kernel.perf_cpu_time_max_percent", "kernel.kptr_restrict",
};

#define MACHINE_SETTINGS_ALLOWED                                                                \
        "kernel.perf_event_paranoid, kernel.perf_event_max_stack, kernel.perf_event_mlock_kb, " \
        "kernel.perf_event_max_sample_rate, kernel.perf_cpu_time_max_percent, kernel.kptr_restrict"

#define TARGET_CONDITIONS \
        "namespaceSelector, podSelector, podNamePatterns, owner, containers, cgroupPatterns"

DEFINE_STRING_TABLE_LOOKUP(profile_start, ProfileStart, _PROFILE_START_MAX, _PROFILE_START_INVALID);
DEFINE_STRING_TABLE_LOOKUP(unwind_mode, UnwindMode, _UNWIND_MODE_MAX, _UNWIND_MODE_INVALID);

bool machine_setting_allowed(const char *name) {
        if (!name || strchr(name, '/') || strstr(name, ".."))
                return false;
        for (size_t i = 0; i < ELEMENTSOF(machine_setting_allow_list); i++)
                if (streq(name, machine_setting_allow_list[i]))
                        return true;
        return false;
}

/* ---- freeing ---------------------------------------------------------------------------------- */

static void patterns_free(Pattern *p, size_t n) {
        for (size_t i = 0; i < n; i++) {
                regfree(&p[i].regex);
                free(p[i].source);
        }
        free(p);
}

static void profile_done(Profile *p) {
        free(p->name);
        free(p->event);
        free(p->output);
        patterns_free(p->include_patterns, p->n_include_patterns);
        patterns_free(p->exclude_patterns, p->n_exclude_patterns);
        for (size_t i = 0; i < ELEMENTSOF(p->rank_categories); i++)
                strv_free(p->rank_categories[i]);
        *p = (Profile){};
}

static void owner_ref_free(OwnerRef *o) {
        if (!o)
                return;
        free(o->kind);
        free(o->name);
        free(o);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(OwnerRef *, owner_ref_free);

static void machine_setting_done(MachineSetting *m) {
        free(m->name);
        free(m->value);
        label_selector_free(m->node_selector);
        *m = (MachineSetting){};
}

static void target_done(Target *t) {
        free(t->name);
        free(t->profile_ref);
        label_selector_free(t->namespace_selector);
        label_selector_free(t->pod_selector);
        patterns_free(t->pod_name_patterns, t->n_pod_name_patterns);
        owner_ref_free(t->owner);
        strv_free(t->containers);
        strv_free(t->cgroup_patterns);
        *t = (Target){};
}

Config *config_free(Config *c) {
        if (!c)
                return NULL;

        free(c->report_dir);
        strv_free(c->debuginfod_urls);
        free(c->http.listen);
        free(c->http.tls_cert_file);
        free(c->http.tls_priorities);
        strv_free(c->http.allowed_hosts);
        strv_free(c->http.token_audiences);
        free(c->http.tls_key_file);
        for (size_t i = 0; i < c->n_machine_config; i++)
                machine_setting_done(&c->machine_config[i]);
        free(c->machine_config);
        strv_free(c->node_labels);
        free(c->default_profile_ref);
        for (size_t i = 0; i < c->n_profiles; i++)
                profile_done(&c->profiles[i]);
        free(c->profiles);
        for (size_t i = 0; i < c->n_targets; i++)
                target_done(&c->targets[i]);
        free(c->targets);
        free(c);
        return NULL;
}

/* ---- a small JSON dispatcher ------------------------------------------------------------------- */

/* An object's schema is a table of fields: each known key, the function that
 * parses its value into the struct being built (at 'offset'; 'offset_n' for
 * the count of an array) and whether it is required. Keys absent from the
 * document keep the defaults the caller put in the struct. A field without a
 * function is allowed but handled by the caller. */
typedef struct JsonField JsonField;
typedef int (*JsonDispatch)(const cJSON *j, const char *path, void *base, const JsonField *f, char **error);
struct JsonField {
        const char *key;
        JsonDispatch func;
        size_t offset;
        size_t offset_n;
        bool required;
};

#define FIELD(base, f) ((void *) ((uint8_t *) (base) + (f)->offset))
#define FIELD_N(base, f) ((size_t *) ((uint8_t *) (base) + (f)->offset_n))

/* Rejects keys the table does not know ("profiles[0].frequncy: unknown key"),
 * and keys given twice (cJSON keeps both; lookups would silently see the
 * first), then dispatches every known key in table order. */
static int json_dispatch(const cJSON *obj, const char *path, const JsonField *fields, void *base,
                         char **error) {
        const cJSON *i;
        int r;

        if (!cJSON_IsObject(obj))
                return key_path_error(error, path, "must be an object");

        cJSON_ArrayForEach (i, obj) {
                _cleanup_free_ char *p = NULL;
                const JsonField *f;

                for (f = fields; f->key; f++)
                        if (streq(i->string, f->key))
                                break;

                p = key_path_child(path, i->string);
                if (!p)
                        return -ENOMEM;
                if (!f->key)
                        return key_path_error(error, p, "unknown key");

                for (const cJSON *k = obj->child; k != i; k = k->next)
                        if (streq(k->string, i->string))
                                return key_path_error(error, p, "duplicate key");
        }

        for (const JsonField *f = fields; f->key; f++) {
                _cleanup_free_ char *p = NULL;

                p = key_path_child(path, f->key);
                if (!p)
                        return -ENOMEM;

                i = cJSON_GetObjectItemCaseSensitive(obj, f->key);
                if (!i) {
                        if (f->required)
                                return key_path_error(error, p, "required key is missing");
                        continue;
                }
                if (!f->func)
                        continue;

                r = f->func(i, p, base, f, error);
                if (r < 0)
                        return r;
        }

        return 0;
}

static int dispatch_bool(const cJSON *j, const char *path, void *base, const JsonField *f, char **error) {
        if (!cJSON_IsBool(j))
                return key_path_error(error, path, "must be a boolean");
        *(bool *) FIELD(base, f) = cJSON_IsTrue(j);
        return 0;
}

/* A JSON number that is a whole number in min..max, into *ret: -EINVAL when
 * j is not a number or not whole, -ERANGE when it is outside the range
 * (NaN included; checked first). */
static int json_integer(const cJSON *j, double min, double max, uint64_t *ret) {
        double d;

        if (!cJSON_IsNumber(j))
                return -EINVAL;
        d = j->valuedouble;
        if (!(d >= min && d <= max))
                return -ERANGE;
        if ((double) (uint64_t) d != d)
                return -EINVAL;
        *ret = (uint64_t) d;
        return 0;
}

/* func(), the dispatcher of an enum field of type, by name##_from_string()
 * (which takes NULL as an unknown name); anything else (not a string, an
 * unknown name) is refused with message. */
#define DEFINE_DISPATCH_ENUM(func, name, type, message)                                                   \
        static int func(const cJSON *j, const char *path, void *base, const JsonField *f, char **error) { \
                type v = name##_from_string(cJSON_IsString(j) ? j->valuestring : NULL);                   \
                if (v < 0)                                                                                \
                        return key_path_error(error, path, message);                                      \
                *(type *) FIELD(base, f) = v;                                                             \
                return 0;                                                                                 \
        }

static int string_dup(const cJSON *j, const char *path, char **ret, char **error) {
        char *s;

        if (!cJSON_IsString(j))
                return key_path_error(error, path, "must be a string");
        s = strdup(j->valuestring);
        if (!s)
                return -ENOMEM;
        free(*ret);
        *ret = s;
        return 0;
}

static int dispatch_string(const cJSON *j, const char *path, void *base, const JsonField *f, char **error) {
        if (cJSON_IsString(j) && j->valuestring[0] == '\0')
                return key_path_error(error, path, "must not be empty");
        return string_dup(j, path, FIELD(base, f), error);
}

static bool name_char_valid(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
               c == '_' || c == '-';
}

/* Profile and target names: non-empty, [A-Za-z0-9._-], not "." or "..". */
static int dispatch_name(const cJSON *j, const char *path, void *base, const JsonField *f, char **error) {
        if (!cJSON_IsString(j))
                return key_path_error(error, path, "must be a string");
        if (j->valuestring[0] == '\0')
                return key_path_error(error, path, "must not be empty");
        for (const char *c = j->valuestring; *c; c++)
                if (!name_char_valid(*c))
                        return key_path_error(
                                error, path, "\"%s\" must consist of letters, digits, '.', '_' and '-' only",
                                j->valuestring);
        if (streq(j->valuestring, ".") || streq(j->valuestring, ".."))
                return key_path_error(error, path, "must not be \".\" or \"..\"");
        return string_dup(j, path, FIELD(base, f), error);
}

static int dispatch_duration(const cJSON *j, const char *path, void *base, const JsonField *f,
                             char **error) {
        uint64_t usec;
        int r;

        if (!cJSON_IsString(j))
                return key_path_error(error, path, "must be a duration string (e.g. \"20s\", \"1m30s\")");

        r = parse_duration(j->valuestring, &usec);
        if (r == -ERANGE)
                return key_path_error(error, path, "duration \"%s\" is out of range", j->valuestring);
        if (r < 0)
                return key_path_error(
                        error, path,
                        "invalid duration \"%s\" (a number with a unit us, ms, s, m, h or d, e.g. \"20s\", "
                        "\"1m30s\"; or \"0\")",
                        j->valuestring);
        *(uint64_t *) FIELD(base, f) = usec;
        return 0;
}

static int dispatch_positive_duration(const cJSON *j, const char *path, void *base, const JsonField *f,
                                      char **error) {
        int r;

        r = dispatch_duration(j, path, base, f, error);
        if (r < 0)
                return r;
        if (*(uint64_t *) FIELD(base, f) == 0)
                return key_path_error(error, path, "must be greater than 0");
        return 0;
}

/* checkpointInterval: "0" (off) or at least CONFIG_MIN_CHECKPOINT_INTERVAL_USEC
 * (each checkpoint writes the whole report so far, on the event loop). */
static int dispatch_checkpoint_interval(const cJSON *j, const char *path, void *base, const JsonField *f,
                                        char **error) {
        uint64_t v;
        int r;

        r = dispatch_duration(j, path, base, f, error);
        if (r < 0)
                return r;
        v = *(uint64_t *) FIELD(base, f);
        if (v > 0 && v < CONFIG_MIN_CHECKPOINT_INTERVAL_USEC)
                return key_path_error(error, path,
                                      "must be \"0\" (no checkpoints) or at least 1s, not \"%s\"",
                                      j->valuestring);
        return 0;
}

static int array_check(const cJSON *j, const char *path, bool allow_empty, char **error) {
        if (!cJSON_IsArray(j))
                return key_path_error(error, path, "must be an array");
        if (!allow_empty && cJSON_GetArraySize(j) == 0)
                return key_path_error(error, path, "must not be empty");
        return 0;
}

/* An array (array_check()) and room for its elements, of size bytes each:
 * *ret, zeroed, one more than the array has. */
static int array_new(const cJSON *j, const char *path, bool allow_empty, size_t size, void **ret,
                     char **error) {
        void *a;
        int r;

        r = array_check(j, path, allow_empty, error);
        if (r < 0)
                return r;
        a = calloc((size_t) cJSON_GetArraySize(j) + 1, size);
        if (!a)
                return -ENOMEM;
        *ret = a;
        return 0;
}

/* Parses one element of an array (at path) into *element, the index-th. */
typedef int (*ElementParse)(const cJSON *j, const char *path, void *element, size_t index, void *userdata,
                            char **error);

/* An array of objects (possibly empty) into an array of elements of size
 * bytes, allocated here (zeroed, and one more zeroed at the end). *ret_n
 * counts the elements parsed as they are, so that the owner frees what was
 * parsed when one fails; name_offset: where an element's name (char *) is,
 * which must not be repeated ("duplicate <what> name"). */
static int parse_named_array(const cJSON *j, const char *path, size_t size, size_t name_offset,
                             const char *what, ElementParse parse, void *userdata, void **ret, size_t *ret_n,
                             char **error) {
        const cJSON *i;
        uint8_t *a;
        size_t n = 0;
        int r;

        r = array_new(j, path, /* allow_empty= */ true, size, ret, error);
        if (r < 0)
                return r;
        a = *ret;

        cJSON_ArrayForEach (i, j) {
                _cleanup_free_ char *p = key_path_index(path, n);
                const char *name;

                if (!p)
                        return -ENOMEM;
                r = parse(i, p, a + n * size, n, userdata, error);
                if (r < 0)
                        return r;
                *ret_n = ++n;

                name = *(char *const *) (a + (n - 1) * size + name_offset);
                for (size_t k = 0; k + 1 < n; k++)
                        if (streq(*(char *const *) (a + k * size + name_offset), name)) {
                                _cleanup_free_ char *np = key_path_child(p, "name");

                                if (!np)
                                        return -ENOMEM;
                                return key_path_error(error, np, "duplicate %s name \"%s\"", what, name);
                        }
        }
        return 0;
}

/* Checks one string of a list (l: the n strings before it); returns why
 * it is refused (printf format of one %s: the string), or NULL. */
typedef const char *(*StrvCheck)(const char *s, char *const *l, size_t n);

/* An array of strings, each passing check, as a strv in the field. */
static int parse_strv(const cJSON *j, const char *path, void *base, const JsonField *f, bool allow_empty,
                      StrvCheck check, char **error) {
        _cleanup_strv_free_ char **l = NULL;
        const cJSON *i;
        size_t n = 0;
        int r;

        r = array_new(j, path, allow_empty, sizeof(char *), (void **) &l, error);
        if (r < 0)
                return r;

        cJSON_ArrayForEach (i, j) {
                _cleanup_free_ char *p = key_path_index(path, n);
                const char *why;

                if (!p)
                        return -ENOMEM;
                if (cJSON_IsString(i) && (why = check(i->valuestring, l, n)))
                        return key_path_error(error, p, why, i->valuestring);
                r = string_dup(i, p, &l[n], error);
                if (r < 0)
                        return r;
                n++;
        }

        strv_free(*(char ***) FIELD(base, f));
        *(char ***) FIELD(base, f) = TAKE_PTR(l);
        return 0;
}

static const char *check_not_empty(const char *s, char *const *l, size_t n) {
        return s[0] == '\0' ? "must not be empty" : NULL;
}

/* A non-empty array of non-empty strings, as a strv. */
static int dispatch_strv(const cJSON *j, const char *path, void *base, const JsonField *f, char **error) {
        return parse_strv(j, path, base, f, /* allow_empty= */ false, check_not_empty, error);
}

/* Bounds on a pattern, checked before regcomp(): glibc's compiler and
 * matcher are exponential in the worst case (a 5,000-deep nested
 * alternation takes 0.7 s and 210 MB to compile; a backreference 0.4 s a
 * match), and a reload compiles them on the event loop.
 *
 * Repetitions too: glibc compiles one by copying what it repeats ("x+" is
 * "xx*", "x{3}" is "xxx", "x{1,3}" is "x(x(x)?)?"), so stacked and nested
 * ones multiply ("a" and 20 '+' took 2.5 s and 700 MB, 70 of them more
 * memory than there is), and its epsilon closures grow with the square of
 * the '*' and '?' copies, more when they nest ("(.*){9999}" took 0.65 s and
 * 770 MB, "((a*)*){2500}" 38 s, "a" with 6 '+', 40 '*' and 9 '+' 275 s and
 * 8 GB). A pattern is measured as it expands: its node copies (at most
 * 10,000), and its '*' and '?' copies, each weighted by the number of them
 * it is inside of (at most 500: "(.*){500}", "((a*)*){166}" compile in
 * milliseconds).
 *
 * After an anchor ('^' or '$', wherever it stands, the usual '^' first
 * included) the closures grow much faster: "^((a*)*){20}" took 1.1 s,
 * "$((a*)*){40}" more than a minute, "$;*******x***************+**" 4 s
 * (55 s under the fuzzer's instrumentation), while the same without the
 * anchor, or with it at the end, compile in milliseconds. So the part of
 * a pattern from its first anchor on is measured again, with at most
 * PATTERN_EPSILON_ANCHORED_MAX weighted '*' and '?' copies (36:
 * "^((a*)*){12}" 9 ms, "$x****+**" 1 ms; real patterns, such as
 * "^.*python3?( .*)? .*train\.py( |$)", weigh under 10). */
#define PATTERN_LENGTH_MAX 1024
#define PATTERN_NESTING_MAX 32
#define PATTERN_SIZE_MAX 10000
#define PATTERN_EPSILON_MAX 500
#define PATTERN_EPSILON_ANCHORED_MAX 36

/* What a piece of a pattern expands to: nodes, '*' and '?' (or interval)
 * nodes, and those weighted by how many of them enclose each. All
 * saturate above PATTERN_SIZE_MAX: only "more than a bound" matters, and
 * products stay far from overflowing. */
typedef struct PatternCost {
        uint64_t size, eps, weight;
        bool anchor; /* has a '^' or '$' */
} PatternCost;

static uint64_t cost_sat(uint64_t v) {
        return MIN(v, (uint64_t) PATTERN_SIZE_MAX + 1);
}

static void cost_add(PatternCost *a, const PatternCost *b) {
        a->size = cost_sat(a->size + b->size);
        a->eps = cost_sat(a->eps + b->eps);
        a->weight = cost_sat(a->weight + b->weight);
        a->anchor = a->anchor || b->anchor;
}

static bool cost_too_big(const PatternCost *c, uint64_t epsilon_max) {
        return c->size > PATTERN_SIZE_MAX || c->weight > epsilon_max;
}

/* The piece x repeated by the operator at p ('*', '+', '?', "{n}",
 * "{n,}", "{n,m}", "{,m}"): true with *x updated and *ret_end after the
 * operator, false when there is none at p. */
static bool cost_repeat(const char *p, PatternCost *x, const char **ret_end) {
        PatternCost r = *x, star = { x->size + 1, x->eps + 1, x->weight + x->eps + 1 };
        uint64_t n = 0, m;
        bool bounded;
        const char *q;

        star = (PatternCost){ cost_sat(star.size), cost_sat(star.eps), cost_sat(star.weight) };
        switch (*p) {
        case '*':
        case '?':
                *x = star;
                *ret_end = p + 1;
                return true;
        case '+': /* x x* */
                cost_add(&r, &star);
                *x = r;
                *ret_end = p + 1;
                return true;
        case '{':
                break;
        default:
                return false;
        }

        q = p + 1;
        if (!isdigit((unsigned char) *q) && !(*q == ',' && isdigit((unsigned char) q[1])))
                return false; /* a literal '{', or an error regcomp() reports */
        for (; isdigit((unsigned char) *q); q++)
                n = cost_sat(n * 10 + (uint64_t) (*q - '0'));
        m = n;
        bounded = true;
        if (*q == ',') {
                bounded = isdigit((unsigned char) q[1]);
                for (m = 0, q++; isdigit((unsigned char) *q); q++)
                        m = cost_sat(m * 10 + (uint64_t) (*q - '0'));
        }
        if (*q != '}')
                return false;
        *ret_end = q + 1;

        /* n copies, then "x*" ({n,}) or m - n optional copies ({n,m}). */
        r = (PatternCost){ cost_sat(n * x->size), cost_sat(n * x->eps), cost_sat(n * x->weight) };
        if (!bounded)
                cost_add(&r, &star);
        else if (m > n) {
                PatternCost opt = { cost_sat((m - n) * star.size), cost_sat((m - n) * star.eps),
                                    cost_sat((m - n) * (x->weight + 1)) };
                cost_add(&r, &opt);
        }
        *x = r;
        return true;
}

/* Why a pattern (or the part of one from an anchor on) is refused, with
 * at most epsilon_max weighted '*' and '?' copies, or NULL; *ret_anchor:
 * the first anchor, if any. */
static const char *pattern_check(const char *s, uint64_t epsilon_max, const char **ret_anchor) {
        /* group[d]: what the open group at depth d expands to so far; last:
         * the atom or group just read, which a repetition after it repeats. */
        PatternCost group[PATTERN_NESTING_MAX + 1] = {}, last = {};
        unsigned depth = 0;
        bool is_anchor;

        *ret_anchor = NULL;
        for (const char *p = s; *p; p++) {
                bool anchor = last.anchor;
                const char *end;

                if (cost_repeat(p, &last, &end)) {
                        /* glibc's closures of a repeated anchor are exponential whatever the
                         * copies: "(^|/)++++++" and "(^|$|)+{10}" took minutes. Repeating an
                         * anchor matches nothing more. */
                        if (anchor)
                                return "repeats an anchor ('^' or '$'), which takes glibc minutes to "
                                       "compile";
                        last.anchor = false;
                        /* Stacked repetitions apply to the last one: "a++" is "(a+)+". */
                        p = end - 1;
                        continue;
                }
                cost_add(&group[depth], &last);
                last = (PatternCost){};
                if (cost_too_big(&group[depth], epsilon_max))
                        return "";

                is_anchor = *p == '^' || *p == '$';
                if (is_anchor && !*ret_anchor)
                        *ret_anchor = p;
                switch (*p) {
                case '\\':
                        if (p[1] >= '1' && p[1] <= '9')
                                return "has a backreference (\\1 ... \\9), which can take seconds per match";
                        if (p[1])
                                p++;
                        break;
                case '[': {
                        /* A bracket expression: no groups or escapes inside;
                         * a ']' first is literal; [:class:], [=e=], [.c.] end
                         * with their own ':]', '=]', '.]'. */
                        const char *q = p + 1;
                        if (*q == '^')
                                q++;
                        if (*q == ']')
                                q++;
                        while (*q && *q != ']') {
                                if (*q == '[' && (q[1] == ':' || q[1] == '=' || q[1] == '.')) {
                                        char c = q[1];
                                        for (q += 2; *q && !(q[0] == c && q[1] == ']'); q++)
                                                ;
                                        if (*q)
                                                q += 2;
                                        continue;
                                }
                                q++;
                        }
                        if (!*q)
                                goto done; /* unterminated: regcomp() says so, after what came before */
                        p = q;
                        break;
                }
                case '(':
                        if (depth == PATTERN_NESTING_MAX)
                                return "groups nested deeper than 32 levels";
                        group[++depth] = (PatternCost){};
                        continue;
                case ')':
                        if (depth > 0) {
                                last = group[depth--];
                                last.size = cost_sat(last.size + 1);
                        }
                        continue;
                case '|':
                        /* Each alternative is one more epsilon branch in the
                         * closures of what repeats its group: "(|||...|)+++"
                         * after an anchor took glibc minutes (found by
                         * fuzz-profileconfig). */
                        group[depth].eps = cost_sat(group[depth].eps + 1);
                        group[depth].weight = cost_sat(group[depth].weight + 1);
                        if (cost_too_big(&group[depth], epsilon_max))
                                return "";
                        continue;
                }
                /* One atom: a character, an escaped one, a bracket expression, an anchor. */
                last = (PatternCost){ .size = 1, .anchor = is_anchor };
        }
done:
        cost_add(&group[depth], &last);
        for (unsigned d = 0; d <= depth; d++)
                if (cost_too_big(&group[d], epsilon_max))
                        return "";
        return NULL;
}

/* Why a pattern is refused before compiling it, or NULL. */
static const char *pattern_too_complex(const char *s) {
        const char *why, *anchor, *unused;

        if (strlen(s) > PATTERN_LENGTH_MAX)
                return "longer than 1024 characters";
        why = pattern_check(s, PATTERN_EPSILON_MAX, &anchor);
        if (why && !*why)
                return "repeats too much (stacked or nested repetitions: more than 10000 copies, or 500 of "
                       "'*' "
                       "and '?')";
        if (why || !anchor)
                return why;
        why = pattern_check(anchor, PATTERN_EPSILON_ANCHORED_MAX, &unused);
        if (why && !*why)
                return "repeats too much after an anchor ('^' or '$'): more than 36 of '*' and '?' (stacked "
                       "or nested) after one take glibc seconds to compile";
        return why;
}

/* An array of POSIX extended regexes, compiled. */
static int parse_patterns(const cJSON *j, const char *path, bool allow_empty, Pattern **ret, size_t *ret_n,
                          char **error) {
        Pattern *patterns = NULL;
        const cJSON *i;
        size_t n = 0;
        int r;

        r = array_new(j, path, allow_empty, sizeof(Pattern), (void **) &patterns, error);
        if (r < 0)
                return r;

        cJSON_ArrayForEach (i, j) {
                _cleanup_free_ char *p = key_path_index(path, n);
                char *source;
                int k;

                if (!p) {
                        r = -ENOMEM;
                        goto fail;
                }
                if (!cJSON_IsString(i)) {
                        r = key_path_error(error, p, "must be a string");
                        goto fail;
                }

                const char *why = pattern_too_complex(i->valuestring);
                if (why) {
                        r = key_path_error(error, p, "regular expression %s", why);
                        goto fail;
                }

                source = strdup(i->valuestring);
                if (!source) {
                        r = -ENOMEM;
                        goto fail;
                }

                k = regcomp(&patterns[n].regex, source, REG_EXTENDED | REG_NOSUB);
                if (k != 0) {
                        char buf[256];

                        if (k == REG_ESPACE)
                                r = -ENOMEM;
                        else {
                                regerror(k, &patterns[n].regex, buf, sizeof(buf));
                                r = key_path_error(error, p, "invalid regular expression \"%s\": %s", source,
                                                   buf);
                        }
                        free(source);
                        goto fail;
                }
                patterns[n].source = source;
                n++;
        }

        *ret = patterns;
        *ret_n = n;
        return 0;

fail:
        patterns_free(patterns, n);
        return r;
}

static int dispatch_patterns_impl(const cJSON *j, const char *path, void *base, const JsonField *f,
                                  bool allow_empty, char **error) {
        Pattern *patterns;
        size_t n;
        int r;

        r = parse_patterns(j, path, allow_empty, &patterns, &n, error);
        if (r < 0)
                return r;

        patterns_free(*(Pattern **) FIELD(base, f), *FIELD_N(base, f));
        *(Pattern **) FIELD(base, f) = patterns;
        *FIELD_N(base, f) = n;
        return 0;
}

static int dispatch_patterns(const cJSON *j, const char *path, void *base, const JsonField *f,
                             char **error) {
        return dispatch_patterns_impl(j, path, base, f, /* allow_empty= */ false, error);
}

static int dispatch_patterns_or_none(const cJSON *j, const char *path, void *base, const JsonField *f,
                                     char **error) {
        return dispatch_patterns_impl(j, path, base, f, /* allow_empty= */ true, error);
}

static int default_include_patterns(Pattern **ret, size_t *ret_n) {
        Pattern *p;

        p = calloc(1, sizeof(Pattern));
        if (!p)
                return -ENOMEM;
        p->source = strdup(".*");
        if (!p->source) {
                free(p);
                return -ENOMEM;
        }
        if (regcomp(&p->regex, p->source, REG_EXTENDED | REG_NOSUB) != 0) {
                free(p->source);
                free(p);
                return -ENOMEM;
        }
        *ret = p;
        *ret_n = 1;
        return 0;
}

/* ---- profiles --------------------------------------------------------------------------------- */

static int dispatch_event(const cJSON *j, const char *path, void *base, const JsonField *f, char **error) {
        if (!cJSON_IsString(j))
                return key_path_error(error, path, "must be a string");
        for (size_t i = 0; i < ELEMENTSOF(profile_events); i++)
                if (streq(j->valuestring, profile_events[i]))
                        return string_dup(j, path, FIELD(base, f), error);
        return key_path_error(
                error, path,
                "unknown event \"%s\" (known: cpu-clock, task-clock, cycles, cpu-cycles, instructions, "
                "ref-cycles, cache-misses, branch-misses)",
                j->valuestring);
}

static int dispatch_frequency(const cJSON *j, const char *path, void *base, const JsonField *f,
                              char **error) {
        int r;

        r = json_integer(j, 1, CONFIG_FREQUENCY_MAX, FIELD(base, f));
        if (r == -ERANGE)
                return key_path_error(error, path, "must be 1..%d", CONFIG_FREQUENCY_MAX);
        if (r < 0)
                return key_path_error(error, path, "must be an integer");
        return 0;
}

DEFINE_DISPATCH_ENUM(dispatch_start, profile_start, ProfileStart, "must be \"auto\" or \"manual\"");
DEFINE_DISPATCH_ENUM(dispatch_unwind, unwind_mode, UnwindMode,
                     "must be \"auto\", \"frame-pointer\" or \"dwarf\"");

static int dispatch_unwind_table_rows(const cJSON *j, const char *path, void *base, const JsonField *f,
                                      char **error) {
        if (json_integer(j, CONFIG_UNWIND_TABLE_ROWS_MIN, (double) CONFIG_UNWIND_TABLE_ROWS_MAX,
                         FIELD(base, f)) < 0)
                return key_path_error(error, path, "must be an integer in %d..%" PRIu64 " (rows of 4 bytes)",
                                      CONFIG_UNWIND_TABLE_ROWS_MIN, CONFIG_UNWIND_TABLE_ROWS_MAX);
        return 0;
}

/* An array of names, each a bit of a mask (name_bit() says which, -1 for
 * an unknown one), none twice: "formats", "events". what: "format",
 * "event"; known: the names, for the error. */
static int name_set(const cJSON *j, const char *path, int (*name_bit)(const char *name), const char *what,
                    const char *known, unsigned *ret, char **error) {
        const cJSON *i;
        unsigned mask = 0;
        size_t n = 0;
        int r;

        r = array_check(j, path, /* allow_empty= */ false, error);
        if (r < 0)
                return r;

        cJSON_ArrayForEach (i, j) {
                _cleanup_free_ char *p = key_path_index(path, n++);
                int bit;

                if (!p)
                        return -ENOMEM;
                if (!cJSON_IsString(i))
                        return key_path_error(error, p, "must be a string");
                bit = name_bit(i->valuestring);
                if (bit < 0)
                        return key_path_error(error, p, "unknown %s \"%s\" (known: %s)", what,
                                              i->valuestring, known);
                if (mask & (1u << bit))
                        return key_path_error(error, p, "duplicate %s \"%s\"", what, i->valuestring);
                mask |= 1u << bit;
        }

        *ret = mask;
        return 0;
}

static int event_bit(const char *name) {
        if (streq(name, "cpu"))
                return __builtin_ctz(PROFILE_EVENT_CPU);
        if (streq(name, "offcpu"))
                return __builtin_ctz(PROFILE_EVENT_OFFCPU);
        return -1;
}

static int dispatch_events(const cJSON *j, const char *path, void *base, const JsonField *f, char **error) {
        return name_set(j, path, event_bit, "event", "cpu, offcpu", (unsigned *) FIELD(base, f), error);
}

static int dispatch_offcpu_min_usec(const cJSON *j, const char *path, void *base, const JsonField *f,
                                    char **error) {
        if (json_integer(j, 0, (double) CONFIG_OFFCPU_MIN_USEC_MAX, FIELD(base, f)) < 0)
                return key_path_error(error, path, "must be an integer in 0..%llu (microseconds)",
                                      CONFIG_OFFCPU_MIN_USEC_MAX);
        return 0;
}

static int dispatch_probability(const cJSON *j, const char *path, void *base, const JsonField *f,
                                char **error) {
        if (!cJSON_IsNumber(j) || !(j->valuedouble > 0 && j->valuedouble <= 1))
                return key_path_error(error, path, "must be a number in (0, 1]");
        *(double *) FIELD(base, f) = j->valuedouble;
        return 0;
}

static int format_bit(const char *name) {
        ReportFormat fmt = report_format_from_string(name);
        return fmt < 0 ? -1 : (int) fmt;
}

static int dispatch_formats(const cJSON *j, const char *path, void *base, const JsonField *f, char **error) {
        return name_set(j, path, format_bit, "format", "folded, json, pprof, svg, speedscope",
                        (unsigned *) FIELD(base, f), error);
}

static int dispatch_output(const cJSON *j, const char *path, void *base, const JsonField *f, char **error) {
        _cleanup_free_ char *reason = NULL;
        int r;

        if (!cJSON_IsString(j))
                return key_path_error(error, path, "must be a string");

        r = template_validate(j->valuestring, &reason);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return key_path_error(error, path, "%s", reason ?: "invalid template");

        return string_dup(j, path, FIELD(base, f), error);
}

/* "gpu": {"launches": bool, "durations": bool}: an object of its own. */
static int dispatch_gpu(const cJSON *j, const char *path, void *base, const JsonField *f, char **error) {
        static const JsonField fields[] = {
                { "launches", dispatch_bool, offsetof(Profile, gpu_launches) },
                { "durations", dispatch_bool, offsetof(Profile, gpu_durations) },
                {},
        };
        return json_dispatch(j, path, fields, base, error);
}

/* rankCategories: { "communication": [...], "dataLoading": [...],
 * "compute": [...] }, each a list of patterns checked as includePatterns
 * are (report-by-rank.h); their sources are kept. */
static int dispatch_rank_category(const cJSON *j, const char *path, void *base, const JsonField *f,
                                  char **error) {
        Pattern *patterns = NULL;
        size_t n = 0;
        char **l;
        int r;

        r = parse_patterns(j, path, /* allow_empty= */ false, &patterns, &n, error);
        if (r < 0)
                return r;
        l = calloc(n + 1, sizeof(char *));
        for (size_t i = 0; l && i < n; i++)
                l[i] = TAKE_PTR(patterns[i].source);
        patterns_free(patterns, n);
        if (!l)
                return -ENOMEM;
        strv_free(*(char ***) FIELD(base, f));
        *(char ***) FIELD(base, f) = l;
        return 0;
}

static int dispatch_rank_categories(const cJSON *j, const char *path, void *base, const JsonField *f,
                                    char **error) {
        static const JsonField fields[] = {
                { "communication", dispatch_rank_category, 0 * sizeof(char **) },
                { "dataLoading", dispatch_rank_category, 1 * sizeof(char **) },
                { "compute", dispatch_rank_category, 2 * sizeof(char **) },
                {},
        };
        return json_dispatch(j, path, fields, FIELD(base, f), error);
}

static int profile_init_defaults(Profile *p) {
        *p = (Profile){
                .frequency = CONFIG_DEFAULT_FREQUENCY,
                .duration_usec = CONFIG_DEFAULT_DURATION_USEC,
                .checkpoint_interval_usec = CONFIG_DEFAULT_CHECKPOINT_INTERVAL_USEC,
                .start = PROFILE_START_AUTO,
                .kernel_stacks = true,
                .python_frames = true,
                .events = PROFILE_EVENT_CPU,
                .offcpu_min_usec = CONFIG_OFFCPU_MIN_USEC_DEFAULT,
                .offcpu_probability = 1.0,
                .formats = (1u << REPORT_FORMAT_FOLDED) | (1u << REPORT_FORMAT_JSON),
        };
        p->event = strdup(CONFIG_DEFAULT_EVENT);
        if (!p->event)
                return -ENOMEM;
        return default_include_patterns(&p->include_patterns, &p->n_include_patterns);
}

static int parse_profile(const cJSON *j, const char *path, Profile *ret, char **error) {
        static const JsonField fields[] = {
                { "name", dispatch_name, offsetof(Profile, name), 0, true },
                { "event", dispatch_event, offsetof(Profile, event) },
                { "frequency", dispatch_frequency, offsetof(Profile, frequency) },
                { "duration", dispatch_duration, offsetof(Profile, duration_usec) },
                { "checkpointInterval", dispatch_checkpoint_interval,
                  offsetof(Profile, checkpoint_interval_usec) },
                { "start", dispatch_start, offsetof(Profile, start) },
                { "kernelStacks", dispatch_bool, offsetof(Profile, kernel_stacks) },
                { "unwind", dispatch_unwind, offsetof(Profile, unwind) },
                { "pythonFrames", dispatch_bool, offsetof(Profile, python_frames) },
                { "events", dispatch_events, offsetof(Profile, events) },
                { "offCpuMinUsec", dispatch_offcpu_min_usec, offsetof(Profile, offcpu_min_usec) },
                { "offCpuProbability", dispatch_probability, offsetof(Profile, offcpu_probability) },
                { "gpu", dispatch_gpu, 0 },
                { "foldedRankRoot", dispatch_bool, offsetof(Profile, folded_rank_root) },
                { "rankCategories", dispatch_rank_categories, offsetof(Profile, rank_categories) },
                { "formats", dispatch_formats, offsetof(Profile, formats) },
                { "output", dispatch_output, offsetof(Profile, output) },
                { "includePatterns", dispatch_patterns, offsetof(Profile, include_patterns),
                  offsetof(Profile, n_include_patterns) },
                { "excludePatterns", dispatch_patterns_or_none, offsetof(Profile, exclude_patterns),
                  offsetof(Profile, n_exclude_patterns) },
                {},
        };
        _cleanup_(profile_done) Profile p = {};
        int r;

        r = profile_init_defaults(&p);
        if (r < 0)
                return r;

        r = json_dispatch(j, path, fields, &p, error);
        if (r < 0)
                return r;

        *ret = p;
        p = (Profile){};
        return 0;
}

/* The profile used when defaultProfileRef is left at "default" and no
 * profile of that name is configured: every key at its default. */
static int profile_implicit_default(Profile *ret) {
        _cleanup_(profile_done) Profile p = {};
        int r;

        r = profile_init_defaults(&p);
        if (r < 0)
                return r;
        p.name = strdup(CONFIG_DEFAULT_PROFILE_NAME);
        if (!p.name)
                return -ENOMEM;

        *ret = p;
        p = (Profile){};
        return 0;
}

static int profile_element_parse(const cJSON *j, const char *path, void *element, size_t index,
                                 void *userdata, char **error) {
        return parse_profile(j, path, element, error);
}

static int dispatch_profiles(const cJSON *j, const char *path, void *base, const JsonField *f,
                             char **error) {
        Config *c = base;
        return parse_named_array(j, path, sizeof(Profile), offsetof(Profile, name), "profile",
                                 profile_element_parse, NULL, (void **) &c->profiles, &c->n_profiles, error);
}

/* ---- targets ---------------------------------------------------------------------------------- */

/* Sanity of an fnmatch() glob for cgroup paths: relative, no empty, "." or
 * ".." component, terminated brackets that do not try to match '/', no
 * trailing backslash. glibc would take an unterminated '[' literally; we
 * refuse it, as it is surely a typo. */
static const char *cgroup_pattern_invalid_reason(const char *pattern) {
        const char *component = pattern;
        int k;

        if (pattern[0] == '/')
                return "must be relative to the cgroup root (no leading '/')";

        for (const char *c = pattern;; c++) {
                if (*c == '/' || *c == '\0') {
                        size_t l = (size_t) (c - component);

                        if (l == 0)
                                return "must not contain an empty path component";
                        if ((l == 1 && component[0] == '.') || (l == 2 && strncmp(component, "..", 2) == 0))
                                return "must not contain a \".\" or \"..\" component";
                        if (*c == '\0')
                                break;
                        component = c + 1;

                } else if (*c == '\\') {
                        if (c[1] == '\0')
                                return "must not end in a lone '\\'";
                        c++;

                } else if (*c == '[') {
                        const char *e = c + 1;

                        if (*e == '!' || *e == '^')
                                e++;
                        if (*e == ']') /* a leading ']' is literal */
                                e++;
                        for (; *e && *e != ']'; e++) {
                                if (*e == '/')
                                        return "a bracket expression cannot match '/'";
                                if (e[0] == '[' && (e[1] == ':' || e[1] == '.' || e[1] == '=')) {
                                        /* [:class:], [.coll.], [=equiv=] */
                                        char d = e[1];
                                        const char *end = strchr(e + 2, d);

                                        while (end && end[1] != ']')
                                                end = strchr(end + 1, d);
                                        if (!end)
                                                return "unterminated '[' bracket expression";
                                        if (d == ':') {
                                                char class[16] = {};
                                                size_t l = (size_t) (end - (e + 2));

                                                if (l >= sizeof(class))
                                                        return "unknown character class";
                                                memcpy(class, e + 2, l);
                                                if (wctype(class) == 0)
                                                        return "unknown character class";
                                        }
                                        e = end + 1;
                                }
                        }
                        if (*e != ']')
                                return "unterminated '[' bracket expression";
                        c = e;
                }
        }

        /* Leave the final word to fnmatch() itself. It only notices some errors
         * when matching reaches them, hence the checks above. */
        k = fnmatch(pattern, "x", FNM_PATHNAME);
        if (k != 0 && k != FNM_NOMATCH)
                return "not a valid glob pattern";

        return NULL;
}

static int dispatch_cgroup_patterns(const cJSON *j, const char *path, void *base, const JsonField *f,
                                    char **error) {
        char **l;
        int r;

        r = dispatch_strv(j, path, base, f, error);
        if (r < 0)
                return r;

        l = *(char ***) FIELD(base, f);
        for (size_t i = 0; l[i]; i++) {
                const char *reason = cgroup_pattern_invalid_reason(l[i]);

                if (reason) {
                        _cleanup_free_ char *p = key_path_index(path, i);

                        if (!p)
                                return -ENOMEM;
                        return key_path_error(error, p, "invalid cgroup pattern \"%s\": %s", l[i], reason);
                }
        }
        return 0;
}

static int dispatch_selector(const cJSON *j, const char *path, void *base, const JsonField *f,
                             char **error) {
        LabelSelector **s = FIELD(base, f);
        int r;

        label_selector_free(*s);
        *s = NULL;
        r = label_selector_from_json(j, path, s, error);
        if (r == -EINVAL && !*error)
                return key_path_error(error, path, "invalid label selector");
        return r;
}

static int dispatch_owner(const cJSON *j, const char *path, void *base, const JsonField *f, char **error) {
        static const JsonField fields[] = {
                { "kind", dispatch_string, offsetof(OwnerRef, kind) },
                { "name", dispatch_string, offsetof(OwnerRef, name) },
                {},
        };
        _cleanup_(owner_ref_freep) OwnerRef *o = NULL;
        int r;

        o = calloc(1, sizeof(OwnerRef));
        if (!o)
                return -ENOMEM;

        r = json_dispatch(j, path, fields, o, error);
        if (r < 0)
                return r;
        if (!o->kind && !o->name)
                return key_path_error(error, path, "needs \"kind\" or \"name\" (or both)");

        owner_ref_free(*(OwnerRef **) FIELD(base, f));
        *(OwnerRef **) FIELD(base, f) = TAKE_PTR(o);
        return 0;
}

/* 'fallback': a ProfileConfig's targets may also name the cluster config's profiles. */
static int parse_target(const cJSON *j, const char *path, const Config *c, const Config *fallback,
                        Target *ret, char **error) {
        static const JsonField fields[] = {
                { "name", dispatch_name, offsetof(Target, name), 0, true },
                { "profileRef", dispatch_string, offsetof(Target, profile_ref) },
                { "namespaceSelector", dispatch_selector, offsetof(Target, namespace_selector) },
                { "podSelector", dispatch_selector, offsetof(Target, pod_selector) },
                { "podNamePatterns", dispatch_patterns, offsetof(Target, pod_name_patterns),
                  offsetof(Target, n_pod_name_patterns) },
                { "owner", dispatch_owner, offsetof(Target, owner) },
                { "containers", dispatch_strv, offsetof(Target, containers) },
                { "cgroupPatterns", dispatch_cgroup_patterns, offsetof(Target, cgroup_patterns) },
                { "disabled", dispatch_bool, offsetof(Target, disabled) },
                {},
        };
        _cleanup_(target_done) Target t = {};
        int r;

        r = json_dispatch(j, path, fields, &t, error);
        if (r < 0)
                return r;

        if (t.profile_ref && !config_find_profile(c, t.profile_ref) &&
            !(fallback && config_find_profile(fallback, t.profile_ref))) {
                _cleanup_free_ char *p = key_path_child(path, "profileRef");

                if (!p)
                        return -ENOMEM;
                return key_path_error(error, p, "no profile named \"%s\"", t.profile_ref);
        }

        /* A disabled target needs none: in a ProfileConfig it only switches
         * off the cluster target of its name. */
        if (!t.disabled && !t.namespace_selector && !t.pod_selector && !t.pod_name_patterns && !t.owner &&
            !t.containers && !t.cgroup_patterns)
                return key_path_error(error, path, "needs at least one condition (" TARGET_CONDITIONS ")");

        *ret = t;
        t = (Target){};
        return 0;
}

typedef struct TargetsContext {
        Config *config;
        const Config *fallback;
} TargetsContext;

static int target_element_parse(const cJSON *j, const char *path, void *element, size_t index,
                                void *userdata, char **error) {
        TargetsContext *t = userdata;
        return parse_target(j, path, t->config, t->fallback, element, error);
}

static int parse_targets(const cJSON *j, const char *path, Config *c, const Config *fallback, char **error) {
        TargetsContext t = { .config = c, .fallback = fallback };
        return parse_named_array(j, path, sizeof(Target), offsetof(Target, name), "target",
                                 target_element_parse, &t, (void **) &c->targets, &c->n_targets, error);
}

/* ---- machine configuration -------------------------------------------------------------------- */

static int dispatch_sysctl_name(const cJSON *j, const char *path, void *base, const JsonField *f,
                                char **error) {
        if (!cJSON_IsString(j))
                return key_path_error(error, path, "must be a string");
        if (!machine_setting_allowed(j->valuestring))
                return key_path_error(error, path,
                                      "\"%s\" is not an allowed sysctl (allowed: " MACHINE_SETTINGS_ALLOWED
                                      ")",
                                      j->valuestring);
        return string_dup(j, path, FIELD(base, f), error);
}

static int dispatch_sysctl_value(const cJSON *j, const char *path, void *base, const JsonField *f,
                                 char **error) {
        char **v = FIELD(base, f);

        if (cJSON_IsNumber(j)) {
                /* Sysctl values are text; an integer written as a JSON number is fine. */
                double d = j->valuedouble;
                char *s;

                if (!(d >= -9007199254740992.0 && d <= 9007199254740992.0) || (double) (int64_t) d != d)
                        return key_path_error(error, path, "must be a string or an integer");
                if (asprintf(&s, "%" PRIi64, (int64_t) d) < 0)
                        return -ENOMEM;
                free(*v);
                *v = s;
                return 0;
        }

        if (!cJSON_IsString(j))
                return key_path_error(error, path, "must be a string or an integer");
        if (j->valuestring[0] == '\0')
                return key_path_error(error, path, "must not be empty");
        for (const char *c = j->valuestring; *c; c++)
                if ((unsigned char) *c < ' ' || *c == 0x7f)
                        return key_path_error(error, path,
                                              "must not contain newlines or control characters");
        return string_dup(j, path, v, error);
}

/* Two entries may set one sysctl only if no node can match both of their
 * nodeSelectors (decided exactly: label_selectors_overlap()), so that each
 * node gets at most one value per sysctl, whatever its labels become. An
 * entry without nodeSelector matches every node. */
static int machine_setting_check_overlap(const MachineSetting *prev, size_t n, const MachineSetting *m,
                                         const char *path, char **error) {
        for (size_t k = 0; k < n; k++) {
                _cleanup_strv_free_ char **witness = NULL;
                _cleanup_free_ char *np = NULL, *labels = NULL;
                int r;

                if (!streq(prev[k].name, m->name))
                        continue;
                r = label_selectors_overlap(prev[k].node_selector, m->node_selector, &witness);
                if (r < 0)
                        return r;
                if (r == 0)
                        continue;
                np = key_path_child(path, "name");
                if (!np || labels_to_string(witness, &labels) < 0)
                        return -ENOMEM;
                if (!prev[k].node_selector || !m->node_selector)
                        return key_path_error(
                                error, np,
                                "duplicate sysctl \"%s\" (also set by machineConfig[%zu]): an entry "
                                "without nodeSelector applies to every node, so another entry for the "
                                "same sysctl needs a nodeSelector, and so does this one, such that no "
                                "node matches both",
                                m->name, k);
                return key_path_error(
                        error, np,
                        "duplicate sysctl \"%s\" (also set by machineConfig[%zu]): a node labelled "
                        "{%s} matches both entries' nodeSelectors; scope them so that no node "
                        "matches both (e.g. In and NotIn on one label)",
                        m->name, k, labels);
        }
        return 0;
}

static int dispatch_machine_config(const cJSON *j, const char *path, void *base, const JsonField *f,
                                   char **error) {
        static const JsonField fields[] = {
                { "name", dispatch_sysctl_name, offsetof(MachineSetting, name), 0, true },
                { "value", dispatch_sysctl_value, offsetof(MachineSetting, value), 0, true },
                { "nodeSelector", dispatch_selector, offsetof(MachineSetting, node_selector) },
                {},
        };
        Config *c = base;
        const cJSON *i;
        size_t n = 0;
        int r;

        /* Entries are compared pairwise (machine_setting_check_overlap()),
         * on the event loop at a reload: both bounds keep that short. */
        if (cJSON_IsArray(j) && cJSON_GetArraySize(j) > CONFIG_MACHINE_CONFIG_MAX)
                return key_path_error(error, path, "at most %d entries", CONFIG_MACHINE_CONFIG_MAX);
        r = array_new(j, path, /* allow_empty= */ true, sizeof(MachineSetting), (void **) &c->machine_config,
                      error);
        if (r < 0)
                return r;

        cJSON_ArrayForEach (i, j) {
                _cleanup_free_ char *p = key_path_index(path, n);
                _cleanup_(machine_setting_done) MachineSetting m = {};

                if (!p)
                        return -ENOMEM;
                r = json_dispatch(i, p, fields, &m, error);
                if (r < 0)
                        return r;

                if (m.node_selector) {
                        size_t n_values = strv_length(m.node_selector->match_labels) / 2;

                        for (size_t k = 0; k < m.node_selector->n_requirements; k++)
                                n_values += 1 + strv_length(m.node_selector->requirements[k].values);
                        if (n_values > CONFIG_NODE_SELECTOR_VALUES_MAX) {
                                _cleanup_free_ char *sp = key_path_child(p, "nodeSelector");

                                if (!sp)
                                        return -ENOMEM;
                                return key_path_error(error, sp,
                                                      "more than %d labels, conditions and values",
                                                      CONFIG_NODE_SELECTOR_VALUES_MAX);
                        }
                }
                r = machine_setting_check_overlap(c->machine_config, n, &m, p, error);
                if (r < 0)
                        return r;

                c->machine_config[n] = m;
                m = (MachineSetting){};
                c->n_machine_config = ++n;
        }
        return 0;
}

/* A string that is an absolute path; what: what the string must be. */
static int absolute_path_check(const cJSON *j, const char *path, const char *what, char **error) {
        if (!cJSON_IsString(j))
                return key_path_error(error, path, "must be %s", what);
        if (j->valuestring[0] != '/')
                return key_path_error(error, path, "must be an absolute path");
        return 0;
}

/* reportDir: absolute, without ".." components. */
static int dispatch_report_dir(const cJSON *j, const char *path, void *base, const JsonField *f,
                               char **error) {
        int r;

        r = absolute_path_check(j, path, "a string", error);
        if (r < 0)
                return r;
        for (const char *s = j->valuestring; *s;) {
                size_t l = strcspn(s, "/");

                if (l == 2 && strncmp(s, "..", 2) == 0)
                        return key_path_error(error, path, "must not contain a \"..\" component");
                s += l;
                s += strspn(s, "/");
        }
        return string_dup(j, path, FIELD(base, f), error);
}

/* debuginfodUrls: http:// or https:// URLs with a host, without
 * whitespace (libdebuginfod takes them space-separated in one variable),
 * control characters or a query or fragment; no duplicates. May be empty. */
static const char *debuginfod_url_invalid_reason(const char *url) {
        const char *host;
        size_t n;

        if (strncmp(url, "http://", 7) == 0)
                host = url + 7;
        else if (strncmp(url, "https://", 8) == 0)
                host = url + 8;
        else
                return "not an http(s) URL";
        for (const char *c = url; *c; c++)
                if ((unsigned char) *c <= ' ' || *c == 0x7f)
                        return "must not contain whitespace or control characters";
        if (strpbrk(url, "?#"))
                return "must not have a query or fragment";
        n = strcspn(host, "/");
        if (n == 0 || host[0] == ':' || host[0] == '@')
                return "not an http(s) URL: no host";
        return NULL;
}

static const char *check_debuginfod_url(const char *s, char *const *l, size_t n) {
        const char *why;

        if (strlen(s) > CONFIG_DEBUGINFOD_URL_LENGTH_MAX)
                return "longer than 1024 characters"; /* CONFIG_DEBUGINFOD_URL_LENGTH_MAX */
        why = debuginfod_url_invalid_reason(s);
        if (why)
                return why;
        for (size_t k = 0; k < n; k++)
                if (streq(l[k], s))
                        return "duplicate URL \"%s\"";
        return NULL;
}

static int dispatch_debuginfod_urls(const cJSON *j, const char *path, void *base, const JsonField *f,
                                    char **error) {
        if (cJSON_IsArray(j) && cJSON_GetArraySize(j) > CONFIG_DEBUGINFOD_URLS_MAX)
                return key_path_error(error, path, "at most %d servers", CONFIG_DEBUGINFOD_URLS_MAX);
        return parse_strv(j, path, base, f, /* allow_empty= */ true, check_debuginfod_url, error);
}

static int dispatch_node_labels(const cJSON *j, const char *path, void *base, const JsonField *f,
                                char **error) {
        char ***l = FIELD(base, f);

        strv_free(*l);
        *l = NULL;
        return label_set_from_json(j, path, l, error);
}

/* ---- the HTTP listener ------------------------------------------------------------------------ */

static int dispatch_listen(const cJSON *j, const char *path, void *base, const JsonField *f, char **error) {
        struct sockaddr_storage sa;
        socklen_t len;
        const char *why = NULL;

        if (!cJSON_IsString(j))
                return key_path_error(error, path,
                                      "must be a string \"ADDRESS:PORT\" (e.g. \"0.0.0.0:9469\")");
        if (socket_address_parse(j->valuestring, &sa, &len, &why) < 0)
                return key_path_error(error, path, "\"%s\": %s", j->valuestring, strna(why));
        return string_dup(j, path, FIELD(base, f), error);
}

static int dispatch_max_connections(const cJSON *j, const char *path, void *base, const JsonField *f,
                                    char **error) {
        uint64_t v;

        if (json_integer(j, 1, CONFIG_HTTP_MAX_CONNECTIONS_MAX, &v) < 0)
                return key_path_error(error, path, "must be an integer 1..%u",
                                      CONFIG_HTTP_MAX_CONNECTIONS_MAX);
        *(unsigned *) FIELD(base, f) = (unsigned) v;
        return 0;
}

static int dispatch_max_connections_per_client(const cJSON *j, const char *path, void *base,
                                               const JsonField *f, char **error) {
        uint64_t v;

        if (json_integer(j, 0, CONFIG_HTTP_MAX_CONNECTIONS_MAX, &v) < 0)
                return key_path_error(error, path, "must be an integer 0..%u (0: no limit)",
                                      CONFIG_HTTP_MAX_CONNECTIONS_MAX);
        *(unsigned *) FIELD(base, f) = (unsigned) v;
        return 0;
}

static int dispatch_http_timeout(const cJSON *j, const char *path, void *base, const JsonField *f,
                                 char **error) {
        uint64_t *u = FIELD(base, f);
        int r;

        r = dispatch_duration(j, path, base, f, error);
        if (r < 0)
                return r;
        if (*u < USEC_PER_SEC || *u % USEC_PER_SEC != 0 || *u > 3600 * USEC_PER_SEC)
                return key_path_error(error, path, "must be whole seconds, 1s..1h");
        return 0;
}

static int dispatch_tls_file(const cJSON *j, const char *path, void *base, const JsonField *f,
                             char **error) {
        int r;

        r = absolute_path_check(j, path, "a string (an absolute path to a PEM file)", error);
        if (r < 0)
                return r;
        return string_dup(j, path, FIELD(base, f), error);
}

static int dispatch_count(const cJSON *j, const char *path, void *base, const JsonField *f, char **error) {
        uint64_t v;

        if (json_integer(j, 0, (double) (1ULL << 53), &v) < 0)
                return key_path_error(error, path, "must be an integer >= 0 (0: no bound)");
        *(uint64_t *) FIELD(base, f) = v;
        return 0;
}

static int dispatch_report_retention(const cJSON *j, const char *path, void *base, const JsonField *f,
                                     char **error) {
        static const JsonField fields[] = {
                { "maxReports", dispatch_count, offsetof(Config, report_retention.max_reports) },
                { "maxBytes", dispatch_count, offsetof(Config, report_retention.max_bytes) },
                { "maxAge", dispatch_duration, offsetof(Config, report_retention.max_age_usec) },
                {},
        };

        return json_dispatch(j, path, fields, base, error);
}

/* A GnuTLS priority string that GnuTLS takes, and that allows no TLS
 * before 1.2 (the error names where it went wrong). */
static int dispatch_tls_priorities(const cJSON *j, const char *path, void *base, const JsonField *f,
                                   char **error) {
        gnutls_priority_t p = NULL;
        const char *at = NULL, *err = NULL;
        const unsigned *protocols;
        int n, r;

        if (!cJSON_IsString(j) || !j->valuestring[0])
                return key_path_error(error, path, "must be a GnuTLS priority string (e.g. \"%s\")",
                                      CONFIG_HTTP_DEFAULT_TLS_PRIORITIES);
        r = gnutls_priority_init2(&p, j->valuestring, &at, 0);
        if (r < 0)
                return key_path_error(error, path, "GnuTLS does not take \"%s\": %s at \"%.32s\"",
                                      j->valuestring, gnutls_strerror(r), strempty(at));
        n = gnutls_priority_protocol_list(p, &protocols);
        for (int i = 0; i < n && !err; i++)
                if (protocols[i] == GNUTLS_SSL3 || protocols[i] == GNUTLS_TLS1_0 ||
                    protocols[i] == GNUTLS_TLS1_1)
                        err = gnutls_protocol_get_name(protocols[i]);
        gnutls_priority_deinit(p);
        if (n <= 0)
                return key_path_error(error, path, "\"%s\" allows no TLS version", j->valuestring);
        if (err)
                return key_path_error(error, path, "\"%s\" allows %s: only TLS 1.2 and later are served",
                                      j->valuestring, err);
        return dispatch_string(j, path, base, f, error);
}

/* A host name (DNS subdomain, lower case) a loopback listener answers to. */
static const char *check_allowed_host(const char *s, char *const *l, size_t n) {
        if (!kube_name_is_dns_subdomain(s))
                return "\"%s\" is not a host name (lower-case DNS name)";
        for (size_t k = 0; k < n; k++)
                if (streq(l[k], s))
                        return "duplicate host \"%s\"";
        return NULL;
}

static int dispatch_allowed_hosts(const cJSON *j, const char *path, void *base, const JsonField *f,
                                  char **error) {
        if (cJSON_IsArray(j) && cJSON_GetArraySize(j) > CONFIG_HTTP_ALLOWED_HOSTS_MAX)
                return key_path_error(error, path, "at most %d host names", CONFIG_HTTP_ALLOWED_HOSTS_MAX);
        return parse_strv(j, path, base, f, /* allow_empty= */ true, check_allowed_host, error);
}

/* An audience of TokenReview's spec.audiences: a non-empty string without
 * control characters (an issuer URL, a name such as "cgprof"). */
static const char *check_audience(const char *s, char *const *l, size_t n) {
        if (s[0] == 0)
                return "must not be empty";
        if (strlen(s) > 1024)
                return "longer than 1024 characters";
        for (const char *p = s; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        return "\"%s\" has a control character";
        for (size_t k = 0; k < n; k++)
                if (streq(l[k], s))
                        return "duplicate audience \"%s\"";
        return NULL;
}

static int dispatch_token_audiences(const cJSON *j, const char *path, void *base, const JsonField *f,
                                    char **error) {
        if (cJSON_IsArray(j) && cJSON_GetArraySize(j) > CONFIG_HTTP_TOKEN_AUDIENCES_MAX)
                return key_path_error(error, path, "at most %d audiences", CONFIG_HTTP_TOKEN_AUDIENCES_MAX);
        return parse_strv(j, path, base, f, /* allow_empty= */ false, check_audience, error);
}

static int dispatch_per_second(const cJSON *j, const char *path, void *base, const JsonField *f,
                               char **error) {
        if (!cJSON_IsNumber(j) || !(j->valuedouble >= 0 && j->valuedouble <= CONFIG_HTTP_RATE_MAX))
                return key_path_error(error, path, "must be a number 0..%u (0: no limit)",
                                      CONFIG_HTTP_RATE_MAX);
        /* Under one a day is none: say so rather than round it. */
        if (j->valuedouble > 0 && j->valuedouble < 1.0 / 86400)
                return key_path_error(error, path, "must be 0 (no limit) or at least one a day (0.0000116)");
        *(double *) FIELD(base, f) = j->valuedouble;
        return 0;
}

static int dispatch_burst(const cJSON *j, const char *path, void *base, const JsonField *f, char **error) {
        uint64_t v;

        if (json_integer(j, 1, CONFIG_HTTP_RATE_MAX, &v) < 0)
                return key_path_error(error, path, "must be an integer 1..%u", CONFIG_HTTP_RATE_MAX);
        *(unsigned *) FIELD(base, f) = (unsigned) v;
        return 0;
}

/* {"perSecond": N, "burst": M}: either may be left out (its default). */
static int dispatch_rate_limit(const cJSON *j, const char *path, void *base, const JsonField *f,
                               char **error) {
        static const JsonField fields[] = {
                { "perSecond", dispatch_per_second, offsetof(ConfigRateLimit, per_second) },
                { "burst", dispatch_burst, offsetof(ConfigRateLimit, burst) },
                {},
        };

        return json_dispatch(j, path, fields, FIELD(base, f), error);
}

static int dispatch_http(const cJSON *j, const char *path, void *base, const JsonField *f, char **error) {
        static const JsonField fields[] = {
                { "listen", dispatch_listen, offsetof(Config, http.listen), 0, true },
                { "maxConnections", dispatch_max_connections, offsetof(Config, http.max_connections) },
                { "maxConnectionsPerClient", dispatch_max_connections_per_client,
                  offsetof(Config, http.max_connections_per_client) },
                { "timeout", dispatch_http_timeout, offsetof(Config, http.timeout_usec) },
                { "pprof", dispatch_bool, offsetof(Config, http.pprof) },
                { "tlsCertFile", dispatch_tls_file, offsetof(Config, http.tls_cert_file) },
                { "tlsKeyFile", dispatch_tls_file, offsetof(Config, http.tls_key_file) },
                { "tlsPriorities", dispatch_tls_priorities, offsetof(Config, http.tls_priorities) },
                { "allowedHosts", dispatch_allowed_hosts, offsetof(Config, http.allowed_hosts) },
                { "pullAnyCgroup", dispatch_bool, offsetof(Config, http.pull_any_cgroup) },
                { "tokenAudiences", dispatch_token_audiences, offsetof(Config, http.token_audiences) },
                { "reviewRateLimit", dispatch_rate_limit, offsetof(Config, http.review_rate_limit) },
                { "pullRateLimit", dispatch_rate_limit, offsetof(Config, http.pull_rate_limit) },
                {},
        };
        Config *c = base;
        int r;

        r = json_dispatch(j, path, fields, base, error);
        if (r < 0)
                return r;
        if (!c->http.tls_cert_file != !c->http.tls_key_file)
                return key_path_error(error, c->http.tls_cert_file ? "http.tlsKeyFile" : "http.tlsCertFile",
                                      "required with %s",
                                      c->http.tls_cert_file ? "http.tlsCertFile" : "http.tlsKeyFile");
        return 0;
}

bool config_http_is_local(const Config *c) {
        struct sockaddr_storage sa;
        socklen_t len;

        if (!c || !c->http.listen || socket_address_parse(c->http.listen, &sa, &len, NULL) < 0)
                return false;
        return sa.ss_family == AF_UNIX ||
               (sa.ss_family == AF_INET &&
                (ntohl(((const struct sockaddr_in *) &sa)->sin_addr.s_addr) >> 24) == 127) ||
               (sa.ss_family == AF_INET6 &&
                IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *) &sa)->sin6_addr));
}

int config_check_http_mode(const Config *c, bool kubernetes, char **ret_error) {
        struct sockaddr_storage sa;
        socklen_t len;

        if (!c || !c->http.listen || !c->http.pprof)
                return 0;
        if (kubernetes) {
                if (!c->http.tls_cert_file)
                        return key_path_error(
                                ret_error, "http.tlsCertFile",
                                "required with \"pprof\": true in Kubernetes mode (profiles are served "
                                "over TLS only, with bearer tokens)");
                return 0;
        }
        if (socket_address_parse(c->http.listen, &sa, &len, NULL) < 0)
                return key_path_error(ret_error, "http.listen", "\"%s\": not an address", c->http.listen);
        if (config_http_is_local(c))
                return 0;
        return key_path_error(
                ret_error, "http.listen",
                "\"%s\": with \"pprof\": true and no Kubernetes, only a loopback address (127.0.0.1, "
                "[::1]) or a Unix socket (unix:/PATH) is allowed: profiles are served without "
                "authentication there",
                c->http.listen);
}

/* ---- the document ----------------------------------------------------------------------------- */

static unsigned line_of(const char *text, const char *pos) {
        unsigned line = 1;

        for (const char *c = text; c < pos && *c; c++)
                if (*c == '\n')
                        line++;
        return line;
}

/* cJSON decodes "\u0000" into a NUL that silently truncates the string
 * ("kernel.perf_event_paranoid\u0000..." would read as the allowed name):
 * refuse the escape anywhere. Returns a pointer to the first one, or NULL. */
static const char *find_escaped_nul(const char *json) {
        for (const char *c = json; *c; c++)
                if (*c == '\\') {
                        if (c[1] == 'u' && strncmp(c + 2, "0000", 4) == 0)
                                return c;
                        if (c[1] == '\0')
                                break;
                        c++; /* skip the escaped character, so "\\u0000" is not caught */
                }
        return NULL;
}

static int config_from_json(const cJSON *root, Config **ret, char **error) {
        /* "targets" is dispatched last, by hand: profileRefs are checked
         * against the profiles, including the implicit default one. */
        static const JsonField fields[] = {
                { "reportDir", dispatch_report_dir, offsetof(Config, report_dir) },
                { "reportRetention", dispatch_report_retention },
                { "reportDirStrictModes", dispatch_bool, offsetof(Config, report_dir_strict_modes) },
                { "machineConfig", dispatch_machine_config },
                { "restoreMachineConfig", dispatch_bool, offsetof(Config, restore_machine_config) },
                { "machineConfigInterval", dispatch_positive_duration,
                  offsetof(Config, machine_config_interval_usec) },
                { "nodeLabels", dispatch_node_labels, offsetof(Config, node_labels) },
                { "enableDefault", dispatch_bool, offsetof(Config, enable_default) },
                { "unwindTableRows", dispatch_unwind_table_rows, offsetof(Config, unwind_table_rows) },
                { "debuginfodUrls", dispatch_debuginfod_urls, offsetof(Config, debuginfod_urls) },
                { "http", dispatch_http },
                { "defaultProfileRef", dispatch_name, offsetof(Config, default_profile_ref) },
                { "profiles", dispatch_profiles },
                { "targets", NULL },
                {},
        };
        _cleanup_(config_freep) Config *c = NULL;
        const cJSON *targets;
        int r;

        c = calloc(1, sizeof(Config));
        if (!c)
                return -ENOMEM;
        *c = (Config){
                .report_dir = strdup(CONFIG_DEFAULT_REPORT_DIR),
                .restore_machine_config = true,
                .machine_config_interval_usec = CONFIG_DEFAULT_MACHINE_CONFIG_INTERVAL_USEC,
                .enable_default = false,
                .unwind_table_rows = CONFIG_DEFAULT_UNWIND_TABLE_ROWS,
                .http.max_connections = CONFIG_HTTP_DEFAULT_MAX_CONNECTIONS,
                .http.max_connections_per_client = CONFIG_HTTP_DEFAULT_MAX_CONNECTIONS_PER_CLIENT,
                .report_dir_strict_modes = true,
                .report_retention.max_reports = CONFIG_RETENTION_DEFAULT_MAX_REPORTS,
                .report_retention.max_bytes = CONFIG_RETENTION_DEFAULT_MAX_BYTES,
                .report_retention.max_age_usec = CONFIG_RETENTION_DEFAULT_MAX_AGE_USEC,
                .http.timeout_usec = CONFIG_HTTP_DEFAULT_TIMEOUT_USEC,
                .http.review_rate_limit = { CONFIG_HTTP_DEFAULT_REVIEWS_PER_SECOND,
                                            CONFIG_HTTP_DEFAULT_REVIEW_BURST },
                .http.pull_rate_limit = { CONFIG_HTTP_DEFAULT_PULLS_PER_SECOND,
                                          CONFIG_HTTP_DEFAULT_PULL_BURST },
                .default_profile_ref = strdup(CONFIG_DEFAULT_PROFILE_NAME),
        };
        if (!c->report_dir || !c->default_profile_ref)
                return -ENOMEM;

        r = json_dispatch(root, "", fields, c, error);
        if (r < 0)
                return r;

        if (!config_find_profile(c, c->default_profile_ref)) {
                Profile *n;

                if (!streq(c->default_profile_ref, CONFIG_DEFAULT_PROFILE_NAME))
                        return key_path_error(error, "defaultProfileRef", "no profile named \"%s\"",
                                              c->default_profile_ref);

                n = realloc(c->profiles, (c->n_profiles + 1) * sizeof(Profile));
                if (!n)
                        return -ENOMEM;
                c->profiles = n;

                r = profile_implicit_default(&c->profiles[c->n_profiles]);
                if (r < 0)
                        return r;
                c->n_profiles++;
        }

        targets = cJSON_GetObjectItemCaseSensitive(root, "targets");
        if (targets) {
                r = parse_targets(targets, "targets", c, NULL, error);
                if (r < 0)
                        return r;
        }

        *ret = TAKE_PTR(c);
        return 0;
}

/* ---- a ProfileConfig's spec ------------------------------------------------------------------- */

static int config_namespaced_from_json(const cJSON *spec, const char *path, const Config *cluster,
                                       Config **ret, char **error) {
        /* What only the cluster config may set: named, rather than "unknown key". */
        static const char *const cluster_only[] = {
                "reportDir",     "machineConfig",   "restoreMachineConfig", "machineConfigInterval",
                "enableDefault", "unwindTableRows", "debuginfodUrls",       "http",
                "nodeLabels",    "reportRetention", "reportDirStrictModes",
        };
        static const JsonField fields[] = {
                { "defaultProfileRef", dispatch_name, offsetof(Config, default_profile_ref) },
                { "profiles", dispatch_profiles },
                { "targets", NULL },
                {},
        };
        _cleanup_(config_freep) Config *c = NULL;
        const cJSON *targets;
        int r;

        if (!cJSON_IsObject(spec))
                return key_path_error(error, path, "must be an object");
        for (size_t i = 0; i < ELEMENTSOF(cluster_only); i++)
                if (cJSON_GetObjectItemCaseSensitive(spec, cluster_only[i])) {
                        _cleanup_free_ char *p = key_path_child(path, cluster_only[i]);
                        if (!p)
                                return -ENOMEM;
                        return key_path_error(
                                error, p, "not allowed in a ProfileConfig: only the cluster config sets %s",
                                cluster_only[i]);
                }

        c = calloc(1, sizeof(Config));
        if (!c)
                return -ENOMEM;
        r = json_dispatch(spec, path, fields, c, error);
        if (r < 0)
                return r;

        if (c->default_profile_ref && !config_find_profile(c, c->default_profile_ref) &&
            !(cluster && config_find_profile(cluster, c->default_profile_ref))) {
                _cleanup_free_ char *p = key_path_child(path, "defaultProfileRef");
                if (!p)
                        return -ENOMEM;
                return key_path_error(
                        error, p, "no profile named \"%s\" (in this ProfileConfig or the cluster config)",
                        c->default_profile_ref);
        }

        for (size_t i = 0; i < c->n_profiles; i++)
                if (c->profiles[i].output && strstr(c->profiles[i].output, "%{")) {
                        _cleanup_free_ char *a = key_path_child(path, "profiles"),
                                            *b = a ? key_path_index(a, i) : NULL,
                                            *p = b ? key_path_child(b, "output") : NULL;
                        if (!p)
                                return -ENOMEM;
                        return key_path_error(
                                error, p,
                                "%%{...} (the agent's environment) is not allowed in a ProfileConfig");
                }

        targets = cJSON_GetObjectItemCaseSensitive(spec, "targets");
        if (targets) {
                _cleanup_free_ char *tp = key_path_child(path, "targets");
                if (!tp)
                        return -ENOMEM;
                r = parse_targets(targets, tp, c, cluster, error);
                if (r < 0)
                        return r;
                for (size_t i = 0; i < c->n_targets; i++) {
                        const Target *t = &c->targets[i];
                        const char *key = t->namespace_selector ? "namespaceSelector"
                                          : t->cgroup_patterns  ? "cgroupPatterns"
                                                                : NULL;
                        if (!key)
                                continue;
                        _cleanup_free_ char *b = key_path_index(tp, i),
                                            *p = b ? key_path_child(b, key) : NULL;
                        if (!p)
                                return -ENOMEM;
                        return key_path_error(error, p, "not allowed in a ProfileConfig: %s",
                                              t->namespace_selector
                                                      ? "its targets select pods of its own namespace only"
                                                      : "host cgroups are the cluster config's");
                }
        }

        *ret = TAKE_PTR(c);
        return 0;
}

int config_parse_namespaced(const cJSON *spec, const char *path, const Config *cluster, Config **ret,
                            char **ret_error) {
        _cleanup_free_ char *error = NULL;
        int r;

        if (!ret)
                return -EINVAL;
        r = config_namespaced_from_json(spec, path ?: "", cluster, ret, &error);
        if (r == -EINVAL && ret_error)
                *ret_error = TAKE_PTR(error);
        return r;
}

/* Where the JSON text first nests deeper than cJSON parses (its
 * CJSON_NESTING_LIMIT), outside strings; NULL when it does not. */
static const char *json_too_deep(const char *json) {
        unsigned depth = 0;
        bool string = false;

        for (const char *p = json; *p; p++) {
                if (string) {
                        if (*p == '\\' && p[1])
                                p++;
                        else if (*p == '"')
                                string = false;
                        continue;
                }
                if (*p == '"')
                        string = true;
                else if (*p == '[' || *p == '{') {
                        if (++depth > CJSON_NESTING_LIMIT)
                                return p;
                } else if ((*p == ']' || *p == '}') && depth > 0)
                        depth--;
        }
        return NULL;
}

int config_parse(const char *json, Config **ret, char **ret_error) {
        _cleanup_free_ char *error = NULL;
        _cleanup_(cJSON_Deletep) cJSON *root = NULL;
        const char *end = NULL, *nul;
        Config *c = NULL;
        int r;

        if (!json || !ret)
                return -EINVAL;

        /* Tolerate a UTF-8 byte order mark, as editors like to write one. */
        if (strncmp(json, "\xEF\xBB\xBF", 3) == 0)
                json += 3;

        root = cJSON_ParseWithOpts(json, &end, /* require_null_terminated= */ true);
        if (!root) {
                const char *deep = json_too_deep(json);
                if (deep)
                        r = key_path_error(&error, "",
                                           "nested deeper than %d levels (arrays and objects) near line %u",
                                           CJSON_NESTING_LIMIT, line_of(json, deep));
                else
                        r = key_path_error(&error, "", "not valid JSON near line %u",
                                           line_of(json, end ?: json));
                goto finish;
        }

        nul = find_escaped_nul(json);
        if (nul) {
                r = key_path_error(&error, "", "not valid here: \"\\u0000\" in a string near line %u",
                                   line_of(json, nul));
                goto finish;
        }

        r = config_from_json(root, &c, &error);
        if (r < 0)
                goto finish;

        *ret = c;
        return 0;

finish:
        if (r == -EINVAL && ret_error)
                *ret_error = TAKE_PTR(error);
        return r;
}

/* Reads at most CONFIG_FILE_MAX bytes; larger files are -EFBIG. */
static int read_config_file(const char *path, char **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t n;
        int r;

        r = read_full_file_max(AT_FDCWD, path, CONFIG_FILE_MAX, &buf, &n);
        if (r < 0)
                return r;
        if (memchr(buf, '\0', n))
                return -EBADMSG; /* a NUL byte: not a text file */

        *ret = TAKE_PTR(buf);
        return 0;
}

int config_load_file(const char *path, Config **ret, char **ret_error) {
        _cleanup_free_ char *text = NULL;
        int r;

        if (!path || !ret)
                return -EINVAL;

        r = read_config_file(path, &text);
        if (r == -ENOMEM)
                return r;
        if (r == -EBADMSG) {
                if (ret_error &&
                    asprintf(ret_error, "$: not valid JSON (the file contains a NUL byte)") < 0) {
                        *ret_error = NULL;
                        return -ENOMEM;
                }
                return -EINVAL;
        }
        if (r == -EFBIG) {
                if (ret_error && asprintf(ret_error, "%s: larger than %u MiB, the most a config file may be",
                                          path, CONFIG_FILE_MAX / 1024U / 1024U) < 0) {
                        *ret_error = NULL;
                        return -ENOMEM;
                }
                return r;
        }
        if (r < 0) {
                if (ret_error && asprintf(ret_error, "%s: %s", path, strerror(-r)) < 0) {
                        *ret_error = NULL;
                        return -ENOMEM;
                }
                return r;
        }

        return config_parse(text, ret, ret_error);
}

/* ---- queries ---------------------------------------------------------------------------------- */

const Profile *config_find_profile(const Config *c, const char *name) {
        if (!c || !name)
                return NULL;
        for (size_t i = 0; i < c->n_profiles; i++)
                if (streq(c->profiles[i].name, name))
                        return &c->profiles[i];
        return NULL;
}

const Profile *config_target_profile(const Config *c, const Target *t) {
        if (!c || !t)
                return NULL;
        return config_find_profile(c, t->profile_ref ?: c->default_profile_ref);
}

static bool patterns_match(const Pattern *p, size_t n, const char *s) {
        for (size_t i = 0; i < n; i++)
                if (regexec(&p[i].regex, s, 0, NULL, 0) == 0)
                        return true;
        return false;
}

/* A process is wanted when its command line (arguments joined by spaces, as
 * one string) matches at least one includePattern and no excludePattern.
 * Patterns are searched, not anchored: use ^ and $ to anchor. A profile
 * without includePatterns (not possible from config_parse()) includes all. */
bool profile_process_wanted(const Profile *p, const char *cmdline) {
        if (!p)
                return false;
        if (!cmdline)
                cmdline = "";

        if (p->n_include_patterns > 0 &&
            !patterns_match(p->include_patterns, p->n_include_patterns, cmdline))
                return false;

        return !patterns_match(p->exclude_patterns, p->n_exclude_patterns, cmdline);
}

/* Whether the cgroup path matches any of the target's cgroupPatterns, with
 * fnmatch(FNM_PATHNAME) semantics: '*', '?' and bracket expressions never
 * match a '/', so "kubepods.slice/pod*" matches "kubepods.slice/pod1" but not
 * "kubepods.slice/pod1/cri-x.scope"; a pattern spells out every level ("**"
 * is not special, it is the same as "*"). The whole path must match. A
 * leading '/' of the path is ignored. False when the target has no
 * cgroupPatterns. */
bool target_matches_cgroup(const Target *t, const char *cgroup_path) {
        if (!t || !t->cgroup_patterns || !cgroup_path)
                return false;

        cgroup_path += strspn(cgroup_path, "/");

        for (char **p = t->cgroup_patterns; *p; p++)
                if (fnmatch(*p, cgroup_path, FNM_PATHNAME) == 0)
                        return true;
        return false;
}
