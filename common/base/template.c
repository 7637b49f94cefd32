/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <inttypes.h>
#include <stdarg.h>
#include <sys/random.h>
#include <time.h>

#include "template.h"

/* Output name templates.
 *
 * Grammar: literal text, '/' separators, "{NAME}" placeholders and "%{VAR}"
 * environment placeholders. A '%' not followed by '{' is literal text.
 *
 * Sanitizing rules for substituted values (path_component_sanitize()):
 *   - '/' and '\\' become '_' (a backslash is harmless on Linux, but reports
 *     are copied to other systems where it is a separator);
 *   - control characters (< 0x20, 0x7f, and the C1 range U+0080..U+009F)
 *     become '_';
 *   - every byte that is not part of a valid UTF-8 sequence becomes '_', and
 *     so does U+FFFD, the replacement character profile data makes of one;
 *   - an empty or NULL value becomes "unknown";
 *   - the result is cut to TEMPLATE_COMPONENT_MAX bytes on a character
 *     boundary;
 *   - a result of "." or ".." has its dots replaced by '_'.
 * After expansion, every component of the path is checked again (a literal
 * next to a value, "{POD}." with POD=".", can form ".."), and cut again to
 * TEMPLATE_COMPONENT_MAX bytes. */

typedef enum Placeholder {
        PLACEHOLDER_NAMESPACE,
        PLACEHOLDER_POD,
        PLACEHOLDER_CONTAINER,
        PLACEHOLDER_CONTAINER_ID,
        PLACEHOLDER_CGROUP,
        PLACEHOLDER_NODE,
        PLACEHOLDER_PROFILE,
        PLACEHOLDER_PROCESS_NAME,
        PLACEHOLDER_PROCESS_ID,
        PLACEHOLDER_RANK,
        PLACEHOLDER_TIMESTAMP,
        PLACEHOLDER_UID,
        _PLACEHOLDER_MAX,
        _PLACEHOLDER_INVALID = -EINVAL,
} Placeholder;

static const char *const placeholder_table[_PLACEHOLDER_MAX] = {
        [PLACEHOLDER_NAMESPACE] = "NAMESPACE",   [PLACEHOLDER_POD] = "POD",
        [PLACEHOLDER_CONTAINER] = "CONTAINER",   [PLACEHOLDER_CONTAINER_ID] = "CONTAINER_ID",
        [PLACEHOLDER_CGROUP] = "CGROUP",         [PLACEHOLDER_NODE] = "NODE",
        [PLACEHOLDER_PROFILE] = "PROFILE",       [PLACEHOLDER_PROCESS_NAME] = "PROCESS_NAME",
        [PLACEHOLDER_PROCESS_ID] = "PROCESS_ID", [PLACEHOLDER_RANK] = "RANK",
        [PLACEHOLDER_TIMESTAMP] = "TIMESTAMP",   [PLACEHOLDER_UID] = "UID",
};

static Placeholder placeholder_from_string(const char *s, size_t n) {
        for (size_t i = 0; i < _PLACEHOLDER_MAX; i++)
                if (strlen(placeholder_table[i]) == n && memcmp(placeholder_table[i], s, n) == 0)
                        return (Placeholder) i;
        return _PLACEHOLDER_INVALID;
}

size_t utf8_valid_char_len(const char *str) {
        const unsigned char *s = (const unsigned char *) str;
        unsigned char lo = 0x80, hi = 0xBF;
        size_t n;

        if (s[0] == 0)
                return 0;
        if (s[0] < 0x80)
                return 1;
        if (s[0] >= 0xC2 && s[0] <= 0xDF)
                n = 2;
        else if (s[0] >= 0xE0 && s[0] <= 0xEF) {
                n = 3;
                if (s[0] == 0xE0)
                        lo = 0xA0; /* overlong */
                else if (s[0] == 0xED)
                        hi = 0x9F; /* surrogates */
        } else if (s[0] >= 0xF0 && s[0] <= 0xF4) {
                n = 4;
                if (s[0] == 0xF0)
                        lo = 0x90; /* overlong */
                else if (s[0] == 0xF4)
                        hi = 0x8F; /* > U+10FFFF */
        } else
                return 0;

        /* A NUL terminator fails the range check, so we never read past it. */
        if (s[1] < lo || s[1] > hi)
                return 0;
        for (size_t i = 2; i < n; i++)
                if (s[i] < 0x80 || s[i] > 0xBF)
                        return 0;
        return n;
}

/* The code point of the valid sequence of k bytes at s. */
static uint32_t utf8_code_point(const unsigned char *s, size_t k) {
        uint32_t c = k == 1 ? s[0] : s[0] & (0x7F >> k);

        for (size_t i = 1; i < k; i++)
                c = (c << 6) | (s[i] & 0x3F);
        return c;
}

size_t utf8_bus_char_len(const char *s) {
        size_t k = utf8_valid_char_len(s);
        uint32_t c;

        if (k < 3)
                return k;
        c = utf8_code_point((const unsigned char *) s, k);
        if ((c >= 0xFDD0 && c <= 0xFDEF) || (c & 0xFFFE) == 0xFFFE)
                return 0; /* a noncharacter */
        return k;
}

static char *make_valid(const char *s, size_t (*char_len)(const char *)) {
        size_t n = 0;
        char *r, *p;

        if (!s)
                return NULL;

        for (const char *i = s; *i;) {
                size_t k = char_len(i);
                n += k > 0 ? k : 3;
                i += k > 0 ? k : 1;
        }

        r = malloc(n + 1);
        if (!r)
                return NULL;

        p = r;
        for (const char *i = s; *i;) {
                size_t k = char_len(i);
                if (k > 0) {
                        memcpy(p, i, k);
                        p += k;
                        i += k;
                } else {
                        memcpy(p, "\xEF\xBF\xBD", 3); /* U+FFFD */
                        p += 3;
                        i++;
                }
        }
        *p = 0;
        return r;
}

char *utf8_make_valid(const char *s) {
        return make_valid(s, utf8_valid_char_len);
}

static bool is_valid(const char *s, size_t (*char_len)(const char *)) {
        if (!s)
                return true;
        for (size_t k; *s; s += k) {
                k = char_len(s);
                if (k == 0)
                        return false;
        }
        return true;
}

bool utf8_is_valid(const char *s) {
        return is_valid(s, utf8_valid_char_len);
}

static int ensure_valid(const char **s, char **ret_copy, size_t (*char_len)(const char *)) {
        char *c;

        if (!*s || is_valid(*s, char_len))
                return 0;
        c = make_valid(*s, char_len);
        if (!c)
                return -ENOMEM;
        *ret_copy = c;
        *s = c;
        return 0;
}

int utf8_ensure_valid(const char **s, char **ret_copy) {
        return ensure_valid(s, ret_copy, utf8_valid_char_len);
}

char *utf8_make_valid_bus(const char *s) {
        return make_valid(s, utf8_bus_char_len);
}

bool utf8_is_valid_bus(const char *s) {
        return is_valid(s, utf8_bus_char_len);
}

int utf8_ensure_valid_bus(const char **s, char **ret_copy) {
        return ensure_valid(s, ret_copy, utf8_bus_char_len);
}

char *utf8_make_valid_take(char *s) {
        char *c;

        if (utf8_is_valid(s))
                return s;
        c = utf8_make_valid(s);
        free(s);
        return c;
}

/* The largest length <= max at which s (of length n) can be cut without
 * splitting a UTF-8 sequence. */
static size_t utf8_truncate_len(const char *s, size_t n, size_t max) {
        if (n <= max)
                return n;
        /* Back up over continuation bytes, at most 3 of them. */
        for (size_t k = max, i = 0; k > 0 && i < 4; k--, i++)
                if (((unsigned char) s[k] & 0xC0) != 0x80)
                        return k;
        return max;
}

/* Replaces a component of "." or ".." (in place, n bytes at s) by underscores. */
static void fix_dot_component(char *s, size_t n) {
        if ((n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
                memset(s, '_', n);
}

char *path_component_sanitize(const char *value) {
        size_t len, n = 0;
        char *r;

        if (!value || !*value)
                return strdup("unknown");

        len = strlen(value);
        r = malloc(len + 1);
        if (!r)
                return NULL;

        for (const char *i = value; *i;) {
                unsigned char c = (unsigned char) *i;
                size_t k = utf8_valid_char_len(i);

                if (k == 0 || c < 0x20 || c == 0x7f || c == '/' || c == '\\' ||
                    (k == 2 && c == 0xC2 && (unsigned char) i[1] < 0xA0) ||
                    (k == 3 && memcmp(i, "\xEF\xBF\xBD", 3) == 0)) {
                        /* Invalid byte (or U+FFFD, what the profile data made
                         * of one), control character (C0, DEL or C1), or
                         * separator. */
                        r[n++] = '_';
                        i += k > 0 ? k : 1;
                } else {
                        memcpy(r + n, i, k);
                        n += k;
                        i += k;
                }
        }

        n = utf8_truncate_len(r, n, TEMPLATE_COMPONENT_MAX);
        r[n] = 0;
        fix_dot_component(r, n);
        return r;
}

static uint64_t splitmix64(uint64_t *state) {
        uint64_t z = (*state += UINT64_C(0x9E3779B97F4A7C15));
        z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
        z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
        return z ^ (z >> 31);
}

/* Fills buf with random bytes: getrandom() when the kernel has entropy, else
 * a non-cryptographic generator seeded from the clock and pid (a {UID} needs
 * uniqueness, not secrecy). */
static void random_bytes(uint8_t *buf, size_t n) {
        static uint64_t counter = 0;
        size_t done = 0;

        while (done < n) {
                ssize_t k = getrandom(buf + done, n - done, GRND_NONBLOCK);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        break;
                }
                done += (size_t) k;
        }

        if (done < n) {
                struct timespec ts = {};
                uint64_t state;

                (void) clock_gettime(CLOCK_REALTIME, &ts);
                state = (uint64_t) ts.tv_sec * NSEC_PER_SEC + (uint64_t) ts.tv_nsec;
                state ^= (uint64_t) getpid() << 32;
                state ^= __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED) * UINT64_C(0x2545F4914F6CDD1D);
                for (; done < n; done++)
                        buf[done] = (uint8_t) splitmix64(&state);
        }
}

void random_uid(char buf[static 9]) {
        static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
        size_t n = 0;

        while (n < 8) {
                uint8_t bytes[16];

                random_bytes(bytes, sizeof(bytes));
                for (size_t i = 0; i < sizeof(bytes) && n < 8; i++)
                        /* Reject 252..255 so that every character is equally likely: 252 = 7 × 36. */
                        if (bytes[i] < 252)
                                buf[n++] = alphabet[bytes[i] % 36];
        }
        buf[8] = 0;
}

/* Tokenizer shared by validation, expansion and template_is_per_process(). */

typedef enum TokenType {
        TOKEN_TEXT, /* literal text without '/' */
        TOKEN_SLASH,
        TOKEN_PLACEHOLDER, /* {NAME} */
        TOKEN_ENV, /* %{VAR}: start/len is the variable name */
        TOKEN_END,
} TokenType;

typedef struct Token {
        TokenType type;
        const char *start;
        size_t len;
        Placeholder placeholder;
} Token;

static bool env_name_valid(const char *s, size_t n) {
        if (n == 0)
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = s[i];
                bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';

                if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
                        return false;
        }
        return true;
}

static int errorf(char **ret_error, const char *fmt, ...) _printf_(2, 3);
static int errorf(char **ret_error, const char *fmt, ...) {
        va_list ap;
        char *s;
        int r;

        if (!ret_error)
                return -EINVAL;

        va_start(ap, fmt);
        r = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;

        *ret_error = s;
        return -EINVAL;
}

/* Reads the token at *p of tmpl and advances *p. Returns 0, -EINVAL with a reason, or -ENOMEM. */
static int template_next_token(const char *tmpl, const char **p, Token *ret, char **ret_error) {
        const char *s = *p, *e;
        bool env;

        if (*s == 0) {
                *ret = (Token){ .type = TOKEN_END, .start = s };
                return 0;
        }
        if (*s == '/') {
                *ret = (Token){ .type = TOKEN_SLASH, .start = s, .len = 1 };
                *p = s + 1;
                return 0;
        }
        if (*s == '}')
                return errorf(ret_error, "unbalanced '}' at offset %zu", (size_t) (s - tmpl));

        env = s[0] == '%' && s[1] == '{';
        if (env || *s == '{') {
                const char *name = s + (env ? 2 : 1);

                e = name + strcspn(name, "{}");
                if (*e == '{')
                        return errorf(ret_error, "nested '{' at offset %zu", (size_t) (e - tmpl));
                if (*e != '}')
                        return errorf(ret_error, "unbalanced '{' at offset %zu", (size_t) (s - tmpl));

                if (env) {
                        if (!env_name_valid(name, (size_t) (e - name)))
                                return errorf(ret_error, "invalid environment variable name %%{%.*s}",
                                              (int) (e - name), name);
                        *ret = (Token){ .type = TOKEN_ENV, .start = name, .len = (size_t) (e - name) };
                } else {
                        Placeholder ph = placeholder_from_string(name, (size_t) (e - name));
                        if (ph < 0)
                                return errorf(ret_error, "unknown placeholder {%.*s}", (int) (e - name),
                                              name);
                        *ret = (Token){
                                .type = TOKEN_PLACEHOLDER,
                                .start = name,
                                .len = (size_t) (e - name),
                                .placeholder = ph,
                        };
                }
                *p = e + 1;
                return 0;
        }

        /* Literal text up to the next '/', '{', '}' or "%{". */
        for (e = s; *e && *e != '/' && *e != '{' && *e != '}' && !(e[0] == '%' && e[1] == '{'); e++)
                ;
        *ret = (Token){ .type = TOKEN_TEXT, .start = s, .len = (size_t) (e - s) };
        *p = e;
        return 0;
}

int template_validate(const char *tmpl, char **ret_error) {
        size_t literal_len = 0;
        bool has_placeholder = false;
        const char *component, *p;
        int r;

        if (!tmpl || !*tmpl)
                return errorf(ret_error, "template is empty");
        if (tmpl[0] == '/')
                return errorf(ret_error, "template must be a relative path, not \"%s\"", tmpl);

        for (const char *i = tmpl; *i;) {
                unsigned char c = (unsigned char) *i;
                size_t k = utf8_valid_char_len(i);

                if (k == 0)
                        return errorf(ret_error, "invalid UTF-8 at offset %zu", (size_t) (i - tmpl));
                if (c < 0x20 || c == 0x7f || (k == 2 && c == 0xC2 && (unsigned char) i[1] < 0xA0))
                        return errorf(ret_error, "control character at offset %zu", (size_t) (i - tmpl));
                i += k;
        }

        p = tmpl;
        component = tmpl;
        for (;;) {
                Token t;

                r = template_next_token(tmpl, &p, &t, ret_error);
                if (r < 0)
                        return r;

                switch (t.type) {
                case TOKEN_TEXT:
                        literal_len += t.len;
                        break;
                case TOKEN_PLACEHOLDER:
                case TOKEN_ENV:
                        has_placeholder = true;
                        break;
                case TOKEN_SLASH:
                case TOKEN_END: {
                        size_t n = (size_t) (t.start - component);

                        if (n == 0)
                                return errorf(ret_error, "empty path component in \"%s\"", tmpl);
                        if (!has_placeholder && ((n == 1 && component[0] == '.') ||
                                                 (n == 2 && component[0] == '.' && component[1] == '.')))
                                return errorf(ret_error, "path component \"%.*s\" not allowed", (int) n,
                                              component);
                        if (literal_len > TEMPLATE_COMPONENT_MAX)
                                return errorf(ret_error, "path component \"%.*s\" longer than %d bytes",
                                              (int) MIN(n, (size_t) 32), component, TEMPLATE_COMPONENT_MAX);
                        if (t.type == TOKEN_END)
                                return 0;

                        component = p;
                        literal_len = 0;
                        has_placeholder = false;
                        break;
                }
                }
        }
}

bool template_is_per_process(const char *tmpl) {
        const char *p = tmpl;

        if (!tmpl)
                return false;

        for (;;) {
                Token t;

                if (template_next_token(tmpl, &p, &t, NULL) < 0 || t.type == TOKEN_END)
                        return false;
                if (t.type == TOKEN_PLACEHOLDER &&
                    (t.placeholder == PLACEHOLDER_PROCESS_NAME || t.placeholder == PLACEHOLDER_PROCESS_ID ||
                     t.placeholder == PLACEHOLDER_RANK))
                        return true;
        }
}

/* NAME's value in env (NULL: the process's environment). The name is
 * compared in place: no copy of a name as long as the template. */
static const char *env_lookup(const char *const *env, const char *name, size_t n) {
        if (!env)
                env = (const char *const *) environ;
        if (!env)
                return NULL;
        for (const char *const *e = env; *e; e++)
                if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
                        return *e + n + 1;
        return NULL;
}

/* The sanitized value of a placeholder (malloc()ed). uid is generated on
 * first use, so that every {UID} of one expansion is the same. */
static char *placeholder_value(Placeholder ph, const TemplateVars *v, char uid[static 9]) {
        char num[sizeof(uint64_t) * 3 + 1];
        const char *s = NULL;

        switch (ph) {
        case PLACEHOLDER_NAMESPACE:
                s = v->namespace;
                break;
        case PLACEHOLDER_POD:
                s = v->pod;
                break;
        case PLACEHOLDER_CONTAINER:
                s = v->container;
                break;
        case PLACEHOLDER_CONTAINER_ID:
                s = v->container_id;
                break;
        case PLACEHOLDER_CGROUP:
                /* Relative to the cgroup root; tolerate a leading '/'. The
                 * remaining '/' become '_' like in every value. */
                s = v->cgroup;
                if (s)
                        s += strspn(s, "/");
                break;
        case PLACEHOLDER_NODE:
                s = v->node;
                break;
        case PLACEHOLDER_PROFILE:
                s = v->profile;
                break;
        case PLACEHOLDER_PROCESS_NAME:
                s = v->process_name;
                break;
        case PLACEHOLDER_PROCESS_ID:
                s = v->process_id;
                break;
        case PLACEHOLDER_RANK:
                s = v->rank;
                break;
        case PLACEHOLDER_TIMESTAMP:
                (void) snprintf(num, sizeof(num), "%" PRIu64, v->timestamp_ms);
                s = num;
                break;
        case PLACEHOLDER_UID:
                if (v->uid)
                        s = v->uid;
                else {
                        if (!uid[0])
                                random_uid(uid);
                        s = uid;
                }
                break;
        default:
                break;
        }

        return path_component_sanitize(s);
}

static int buf_append(char **buf, size_t *len, size_t *allocated, const char *s, size_t n) {
        if (*len + n + 1 > *allocated) {
                size_t a = MAX(*allocated * 2, *len + n + 1);
                char *b = realloc(*buf, MAX(a, (size_t) 64));
                if (!b)
                        return -ENOMEM;
                *buf = b;
                *allocated = MAX(a, (size_t) 64);
        }
        memcpy(*buf + *len, s, n);
        *len += n;
        (*buf)[*len] = 0;
        return 0;
}

int template_expand(const char *tmpl, const TemplateVars *vars, char **ret) {
        static const TemplateVars no_vars = {};
        _cleanup_free_ char *buf = NULL;
        size_t len = 0, allocated = 0;
        char uid[9] = {}, *w;
        const char *p, *rp;
        int r;

        if (!ret)
                return -EINVAL;

        /* Expanding an unvalidated template could produce an absolute path or
         * a literal "..": refuse. */
        r = template_validate(tmpl, NULL);
        if (r < 0)
                return r;
        if (!vars)
                vars = &no_vars;

        p = tmpl;
        for (;;) {
                _cleanup_free_ char *value = NULL;
                Token t;

                r = template_next_token(tmpl, &p, &t, NULL);
                if (r < 0)
                        return r;
                if (t.type == TOKEN_END)
                        break;

                switch (t.type) {
                case TOKEN_TEXT:
                case TOKEN_SLASH:
                        r = buf_append(&buf, &len, &allocated, t.start, t.len);
                        break;
                case TOKEN_PLACEHOLDER:
                case TOKEN_ENV:
                        if (t.type == TOKEN_PLACEHOLDER)
                                value = placeholder_value(t.placeholder, vars, uid);
                        else
                                value = path_component_sanitize(env_lookup(vars->env, t.start, t.len));
                        if (!value)
                                return -ENOMEM;
                        r = buf_append(&buf, &len, &allocated, value, strlen(value));
                        break;
                default:
                        r = -EINVAL;
                }
                if (r < 0)
                        return r;
        }

        /* A validated template is never empty, so buf is allocated. Now make
         * every component safe as a whole: literal text next to a value can
         * form ".." ("{POD}." with POD="."), and literal text plus a value
         * can be too long. */
        w = buf;
        rp = buf;
        for (;;) {
                size_t n = strcspn(rp, "/");
                size_t m = utf8_truncate_len(rp, n, TEMPLATE_COMPONENT_MAX);

                memmove(w, rp, m);
                fix_dot_component(w, m);
                w += m;
                rp += n;
                if (*rp == 0)
                        break;
                *w++ = '/';
                rp++;
        }
        *w = 0;

        *ret = TAKE_PTR(buf);
        return 0;
}
