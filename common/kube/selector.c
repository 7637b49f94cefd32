/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdarg.h>

#include "key-path.h"
#include "selector.h"

#define LABEL_NAME_MAX 63
#define LABEL_PREFIX_MAX 253

static const char *const label_operator_table[_LABEL_OPERATOR_MAX] = {
        [LABEL_OPERATOR_IN] = "In",
        [LABEL_OPERATOR_NOT_IN] = "NotIn",
        [LABEL_OPERATOR_EXISTS] = "Exists",
        [LABEL_OPERATOR_DOES_NOT_EXIST] = "DoesNotExist",
};

DEFINE_STRING_TABLE_FROM_STRING(static, label_operator, LabelOperator, _LABEL_OPERATOR_MAX,
                                _LABEL_OPERATOR_INVALID);

/* In and NotIn compare against a list of values; Exists and DoesNotExist take none. */
static bool label_operator_has_values(LabelOperator op) {
        return op == LABEL_OPERATOR_IN || op == LABEL_OPERATOR_NOT_IN;
}

static bool is_alnum(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* The Kubernetes "qualified name" / label value shape: [A-Za-z0-9._-],
 * starting and ending with an alphanumeric character. */
static bool name_part_valid(const char *s, size_t n) {
        if (n == 0 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_alnum(s[i]) && s[i] != '.' && s[i] != '_' && s[i] != '-')
                        return false;
        return true;
}

/* RFC 1123 subdomain: lowercase alphanumeric labels joined by '.', labels may
 * contain '-' but not start or end with it. */
static bool dns_subdomain_valid(const char *s, size_t n) {
        size_t label_len = 0;

        if (n == 0 || n > LABEL_PREFIX_MAX)
                return false;

        for (size_t i = 0; i < n; i++) {
                char c = s[i];

                if (c == '.') {
                        if (label_len == 0 || s[i - 1] == '-')
                                return false;
                        label_len = 0;
                } else if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) {
                        label_len++;
                } else if (c == '-') {
                        if (label_len == 0)
                                return false;
                        label_len++;
                } else
                        return false;
        }
        return label_len > 0 && s[n - 1] != '-';
}

/* Validates a label key as the API server does (a qualified name: optional
 * "<dns-subdomain>/" prefix, then a name part). Returns NULL if valid, else a
 * static reason. */
static const char *label_key_invalid_reason(const char *key) {
        const char *slash, *name;

        slash = strchr(key, '/');
        if (slash) {
                if (slash == key)
                        return "prefix part must be non-empty";
                if ((size_t) (slash - key) > LABEL_PREFIX_MAX)
                        return "prefix part must be no more than 253 characters";
                if (!dns_subdomain_valid(key, (size_t) (slash - key)))
                        return "prefix part must be a lowercase RFC 1123 subdomain (lowercase alphanumeric "
                               "characters, '-' or '.', starting and ending with an alphanumeric character)";
                name = slash + 1;
                if (strchr(name, '/'))
                        return "must be a qualified name: an optional prefix and a name separated by one "
                               "'/'";
        } else
                name = key;

        if (*name == '\0')
                return "name part must be non-empty";
        if (strlen(name) > LABEL_NAME_MAX)
                return "name part must be no more than 63 characters";
        if (!name_part_valid(name, strlen(name)))
                return "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
                       "and end with an alphanumeric character";
        return NULL;
}

static const char *label_value_invalid_reason(const char *value) {
        size_t n = strlen(value);

        if (n == 0)
                return NULL;
        if (n > LABEL_NAME_MAX)
                return "must be no more than 63 characters";
        if (!name_part_valid(value, n))
                return "must be empty or consist of alphanumeric characters, '-', '_' or '.', and must "
                       "start "
                       "and end with an alphanumeric character";
        return NULL;
}

static void label_requirement_done(LabelRequirement *r) {
        free(r->key);
        strv_free(r->values);
        *r = (LabelRequirement){};
}

LabelSelector *label_selector_free(LabelSelector *s) {
        if (!s)
                return NULL;

        strv_free(s->match_labels);
        for (size_t i = 0; i < s->n_requirements; i++)
                label_requirement_done(&s->requirements[i]);
        free(s->requirements);
        free(s);
        return NULL;
}

/* Rejects keys other than the allowed ones, and keys given twice (cJSON keeps
 * both; the rest of the parser would silently see only the first). */
static int check_keys(const cJSON *obj, const char *path, const char *const *allowed, char **error) {
        const cJSON *i, *k;

        cJSON_ArrayForEach (i, obj) {
                _cleanup_free_ char *p = NULL;
                bool ok = false;

                for (const char *const *a = allowed; *a; a++)
                        if (streq(i->string, *a))
                                ok = true;

                if (asprintf(&p, "%s.%s", path, i->string) < 0)
                        return -ENOMEM;
                if (!ok)
                        return key_path_error(error, p, "unknown key");

                for (k = obj->child; k != i; k = k->next)
                        if (streq(k->string, i->string))
                                return key_path_error(error, p, "duplicate key");
        }
        return 0;
}

int label_set_from_json(const cJSON *j, const char *path, char ***ret, char **error) {
        _cleanup_strv_free_ char **l = NULL;
        const cJSON *i;
        size_t n = 0;

        if (!cJSON_IsObject(j))
                return key_path_error(error, path, "must be an object");

        l = calloc(2 * (size_t) cJSON_GetArraySize(j) + 1, sizeof(char *));
        if (!l)
                return -ENOMEM;

        cJSON_ArrayForEach (i, j) {
                const char *reason;

                for (const cJSON *k = j->child; k != i; k = k->next)
                        if (streq(k->string, i->string))
                                return key_path_error(error, path, "duplicate key \"%s\"", i->string);

                reason = label_key_invalid_reason(i->string);
                if (reason)
                        return key_path_error(error, path, "invalid label key \"%s\": %s", i->string,
                                              reason);

                if (!cJSON_IsString(i))
                        return key_path_error(error, path, "value of \"%s\" must be a string", i->string);

                reason = label_value_invalid_reason(i->valuestring);
                if (reason)
                        return key_path_error(error, path, "invalid value \"%s\" for label \"%s\": %s",
                                              i->valuestring, i->string, reason);

                l[n] = strdup(i->string);
                if (!l[n])
                        return -ENOMEM;
                n++;
                l[n] = strdup(i->valuestring);
                if (!l[n])
                        return -ENOMEM;
                n++;
        }

        *ret = TAKE_PTR(l);
        return 0;
}

static int parse_requirement(const cJSON *j, const char *path, LabelRequirement *ret, char **error) {
        static const char *const allowed[] = { "key", "operator", "values", NULL };
        _cleanup_free_ char *p = NULL;
        _cleanup_strv_free_ char **values = NULL;
        _cleanup_free_ char *key = NULL;
        const cJSON *k, *o, *v, *i;
        const char *reason;
        LabelOperator op;
        size_t n = 0;
        int r;

        if (!cJSON_IsObject(j))
                return key_path_error(error, path, "must be an object");

        r = check_keys(j, path, allowed, error);
        if (r < 0)
                return r;

        if (asprintf(&p, "%s.key", path) < 0)
                return -ENOMEM;
        k = cJSON_GetObjectItemCaseSensitive(j, "key");
        if (!k)
                return key_path_error(error, p, "required key is missing");
        if (!cJSON_IsString(k))
                return key_path_error(error, p, "must be a string");
        reason = label_key_invalid_reason(k->valuestring);
        if (reason)
                return key_path_error(error, p, "invalid label key \"%s\": %s", k->valuestring, reason);
        free(p);
        p = NULL;

        if (asprintf(&p, "%s.operator", path) < 0)
                return -ENOMEM;
        o = cJSON_GetObjectItemCaseSensitive(j, "operator");
        if (!o)
                return key_path_error(error, p, "required key is missing");
        op = cJSON_IsString(o) ? label_operator_from_string(o->valuestring) : _LABEL_OPERATOR_INVALID;
        if (op < 0)
                return key_path_error(error, p, "must be one of In, NotIn, Exists, DoesNotExist");
        free(p);
        p = NULL;

        if (asprintf(&p, "%s.values", path) < 0)
                return -ENOMEM;
        v = cJSON_GetObjectItemCaseSensitive(j, "values");
        if (v && !cJSON_IsArray(v))
                return key_path_error(error, p, "must be an array of strings");

        values = calloc((v ? (size_t) cJSON_GetArraySize(v) : 0) + 1, sizeof(char *));
        if (!values)
                return -ENOMEM;

        cJSON_ArrayForEach (i, v) {
                if (!cJSON_IsString(i))
                        return key_path_error(error, p, "must be an array of strings");
                reason = label_value_invalid_reason(i->valuestring);
                if (reason)
                        return key_path_error(error, p, "invalid value \"%s\": %s", i->valuestring, reason);
                values[n] = strdup(i->valuestring);
                if (!values[n])
                        return -ENOMEM;
                n++;
        }

        if (label_operator_has_values(op) && n == 0)
                return key_path_error(error, p, "must be non-empty when operator is %s",
                                      label_operator_table[op]);
        if (!label_operator_has_values(op) && n > 0)
                return key_path_error(error, p, "must be empty when operator is %s",
                                      label_operator_table[op]);

        key = strdup(k->valuestring);
        if (!key)
                return -ENOMEM;

        *ret = (LabelRequirement){
                .key = TAKE_PTR(key),
                .op = op,
                .values = TAKE_PTR(values),
        };
        return 0;
}

int label_selector_from_json(const cJSON *j, const char *path, LabelSelector **ret, char **ret_error) {
        static const char *const allowed[] = { "matchLabels", "matchExpressions", NULL };
        _cleanup_(label_selector_freep) LabelSelector *s = NULL;
        _cleanup_free_ char *error = NULL;
        const cJSON *ml, *me, *i;
        int r;

        if (!path)
                path = "$";

        if (!cJSON_IsObject(j)) {
                r = key_path_error(&error, path, "must be an object");
                goto finish;
        }

        r = check_keys(j, path, allowed, &error);
        if (r < 0)
                goto finish;

        s = calloc(1, sizeof(LabelSelector));
        if (!s)
                return -ENOMEM;

        ml = cJSON_GetObjectItemCaseSensitive(j, "matchLabels");
        if (ml) {
                _cleanup_free_ char *p = NULL;

                if (asprintf(&p, "%s.matchLabels", path) < 0)
                        return -ENOMEM;
                r = label_set_from_json(ml, p, &s->match_labels, &error);
                if (r < 0)
                        goto finish;
        }

        me = cJSON_GetObjectItemCaseSensitive(j, "matchExpressions");
        if (me) {
                size_t n = 0;

                if (!cJSON_IsArray(me)) {
                        _cleanup_free_ char *p = NULL;

                        if (asprintf(&p, "%s.matchExpressions", path) < 0)
                                return -ENOMEM;
                        r = key_path_error(&error, p, "must be an array");
                        goto finish;
                }

                s->requirements = calloc((size_t) cJSON_GetArraySize(me) + 1, sizeof(LabelRequirement));
                if (!s->requirements)
                        return -ENOMEM;

                cJSON_ArrayForEach (i, me) {
                        _cleanup_free_ char *p = NULL;

                        if (asprintf(&p, "%s.matchExpressions[%zu]", path, n) < 0)
                                return -ENOMEM;
                        r = parse_requirement(i, p, &s->requirements[n], &error);
                        if (r < 0)
                                goto finish;
                        s->n_requirements = ++n;
                }
        }

        *ret = TAKE_PTR(s);
        return 0;

finish:
        if (r == -EINVAL && ret_error)
                *ret_error = TAKE_PTR(error);
        return r;
}

/* The value of a label, or NULL if the set does not carry the key. */
static const char *labels_get(Labels labels, const char *key) {
        if (!labels)
                return NULL;
        for (size_t i = 0; labels[i] && labels[i + 1]; i += 2)
                if (streq(labels[i], key))
                        return labels[i + 1];
        return NULL;
}

static bool strv_contains(char *const *l, const char *s) {
        if (!l)
                return false;
        for (; *l; l++)
                if (streq(*l, s))
                        return true;
        return false;
}

/* Appends a copy of s to the strv *l. */
static int strv_push_dup(char ***l, const char *s) {
        size_t n = strv_length(*l);
        char **nl, *d;

        d = strdup(s);
        if (!d)
                return -ENOMEM;
        nl = realloc(*l, (n + 2) * sizeof(char *));
        if (!nl) {
                free(d);
                return -ENOMEM;
        }
        nl[n] = d;
        nl[n + 1] = NULL;
        *l = nl;
        return 0;
}

static bool label_requirement_matches(const LabelRequirement *req, Labels labels) {
        const char *v = labels_get(labels, req->key);

        switch (req->op) {
        case LABEL_OPERATOR_IN:
                return v && strv_contains(req->values, v);
        case LABEL_OPERATOR_NOT_IN:
                /* Kubernetes: NotIn also matches when the key is absent. */
                return !v || !strv_contains(req->values, v);
        case LABEL_OPERATOR_EXISTS:
                return v;
        case LABEL_OPERATOR_DOES_NOT_EXIST:
                return !v;
        default:
                return false;
        }
}

bool label_selector_matches(const LabelSelector *s, Labels labels) {
        /* Not set: no condition, like an empty selector. */
        if (!s)
                return true;

        if (s->match_labels)
                for (size_t i = 0; s->match_labels[i] && s->match_labels[i + 1]; i += 2) {
                        const char *v = labels_get(labels, s->match_labels[i]);

                        if (!v || !streq(v, s->match_labels[i + 1]))
                                return false;
                }

        for (size_t i = 0; i < s->n_requirements; i++)
                if (!label_requirement_matches(&s->requirements[i], labels))
                        return false;

        return true;
}

/* ---- overlap -------------------------------------------------------------------------------- */

/* Whether a key in a state (value NULL: absent) passes every condition 's'
 * puts on that key. */
static bool selector_key_matches(const LabelSelector *s, const char *key, const char *value) {
        char *one[3] = { (char *) key, (char *) value, NULL };
        Labels l = value ? one : NULL;

        if (!s)
                return true;
        if (s->match_labels)
                for (size_t i = 0; s->match_labels[i] && s->match_labels[i + 1]; i += 2)
                        if (streq(s->match_labels[i], key) && !streq_ptr(value, s->match_labels[i + 1]))
                                return false;
        for (size_t i = 0; i < s->n_requirements; i++)
                if (streq(s->requirements[i].key, key) && !label_requirement_matches(&s->requirements[i], l))
                        return false;
        return true;
}

/* Every value either selector names for key, as candidates. */
static int values_named(const LabelSelector *s, const char *key, char ***values) {
        if (!s)
                return 0;
        if (s->match_labels)
                for (size_t i = 0; s->match_labels[i] && s->match_labels[i + 1]; i += 2)
                        if (streq(s->match_labels[i], key) &&
                            strv_push_dup(values, s->match_labels[i + 1]) < 0)
                                return -ENOMEM;
        for (size_t i = 0; i < s->n_requirements; i++)
                if (streq(s->requirements[i].key, key))
                        for (char **v = s->requirements[i].values; v && *v; v++)
                                if (strv_push_dup(values, *v) < 0)
                                        return -ENOMEM;
        return 0;
}

static int keys_named(const LabelSelector *s, char ***keys) {
        if (!s)
                return 0;
        if (s->match_labels)
                for (size_t i = 0; s->match_labels[i] && s->match_labels[i + 1]; i += 2)
                        if (!strv_contains(*keys, s->match_labels[i]) &&
                            strv_push_dup(keys, s->match_labels[i]) < 0)
                                return -ENOMEM;
        for (size_t i = 0; i < s->n_requirements; i++)
                if (!strv_contains(*keys, s->requirements[i].key) &&
                    strv_push_dup(keys, s->requirements[i].key) < 0)
                        return -ENOMEM;
        return 0;
}

/* The state of one key that both selectors accept: *ret_value NULL
 * (absent) or a value. Returns 1 when there is one, 0 when none. A value no
 * selector names ("x", "x0", ...) stands for all such values: they are
 * accepted or refused alike. */
static int key_witness(const LabelSelector *a, const LabelSelector *b, const char *key, char **ret_value) {
        _cleanup_strv_free_ char **named = NULL;
        char fresh[32] = "x";
        int r;

        if (selector_key_matches(a, key, NULL) && selector_key_matches(b, key, NULL)) {
                *ret_value = NULL;
                return 1;
        }
        r = values_named(a, key, &named);
        if (r >= 0)
                r = values_named(b, key, &named);
        if (r < 0)
                return r;
        for (char **v = named; v && *v; v++)
                if (selector_key_matches(a, key, *v) && selector_key_matches(b, key, *v)) {
                        *ret_value = strdup(*v);
                        return *ret_value ? 1 : -ENOMEM;
                }
        for (unsigned i = 0; strv_contains(named, fresh); i++)
                snprintf(fresh, sizeof(fresh), "x%u", i);
        if (selector_key_matches(a, key, fresh) && selector_key_matches(b, key, fresh)) {
                *ret_value = strdup(fresh);
                return *ret_value ? 1 : -ENOMEM;
        }
        return 0;
}

int label_selectors_overlap(const LabelSelector *a, const LabelSelector *b, char ***ret_witness) {
        _cleanup_strv_free_ char **keys = NULL, **witness = NULL;
        int r;

        /* Each condition is on one key, and keys are independent: the two
         * selectors can both match some label set if and only if, key by
         * key, some state of that key (absent, or a value) passes the
         * conditions both put on it. Those states are few: absent, each
         * value named, and one value named nowhere. */
        r = keys_named(a, &keys);
        if (r >= 0)
                r = keys_named(b, &keys);
        if (r < 0)
                return r;

        for (char **k = keys; k && *k; k++) {
                _cleanup_free_ char *value = NULL;

                r = key_witness(a, b, *k, &value);
                if (r <= 0)
                        return r;
                if (value && (strv_push_dup(&witness, *k) < 0 || strv_push_dup(&witness, value) < 0))
                        return -ENOMEM;
        }

        if (ret_witness) {
                if (!witness) {
                        witness = calloc(1, sizeof(char *));
                        if (!witness)
                                return -ENOMEM;
                }
                *ret_witness = TAKE_PTR(witness);
        }
        return 1;
}

/* ---- as text -------------------------------------------------------------------------------- */

static int append(char **s, size_t *n, const char *text) {
        size_t l = strlen(text);
        char *ns = realloc(*s, *n + l + 1);

        if (!ns)
                return -ENOMEM;
        memcpy(ns + *n, text, l + 1);
        *s = ns;
        *n += l;
        return 0;
}

int label_selector_to_string(const LabelSelector *s, char **ret) {
        _cleanup_free_ char *t = strdup("");
        size_t n = 0;
        int r = 0;

        if (!t)
                return -ENOMEM;
        /* kubectl's syntax: "a=b,zone in (x,y),zone notin (z),k,!k". */
        for (size_t i = 0; s && s->match_labels && s->match_labels[i] && s->match_labels[i + 1]; i += 2) {
                if (n > 0)
                        r = append(&t, &n, ",");
                if (r >= 0)
                        r = append(&t, &n, s->match_labels[i]);
                if (r >= 0)
                        r = append(&t, &n, "=");
                if (r >= 0)
                        r = append(&t, &n, s->match_labels[i + 1]);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; s && i < s->n_requirements; i++) {
                const LabelRequirement *q = &s->requirements[i];

                if (n > 0 && append(&t, &n, ",") < 0)
                        return -ENOMEM;
                if (q->op == LABEL_OPERATOR_DOES_NOT_EXIST && append(&t, &n, "!") < 0)
                        return -ENOMEM;
                if (append(&t, &n, q->key) < 0)
                        return -ENOMEM;
                if (!label_operator_has_values(q->op))
                        continue;
                if (append(&t, &n, q->op == LABEL_OPERATOR_IN ? " in (" : " notin (") < 0)
                        return -ENOMEM;
                for (char **v = q->values; v && *v; v++)
                        if ((v != q->values && append(&t, &n, ",") < 0) || append(&t, &n, *v) < 0)
                                return -ENOMEM;
                if (append(&t, &n, ")") < 0)
                        return -ENOMEM;
        }
        *ret = TAKE_PTR(t);
        return 0;
}

int labels_to_string(Labels labels, char **ret) {
        _cleanup_free_ char *t = strdup("");
        size_t n = 0;

        if (!t)
                return -ENOMEM;
        for (size_t i = 0; labels && labels[i] && labels[i + 1]; i += 2)
                if ((n > 0 && append(&t, &n, ",") < 0) || append(&t, &n, labels[i]) < 0 ||
                    append(&t, &n, "=") < 0 || append(&t, &n, labels[i + 1]) < 0)
                        return -ENOMEM;
        *ret = TAKE_PTR(t);
        return 0;
}
