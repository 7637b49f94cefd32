/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "macro.h"

/* Output name templates: a path relative to reportDir with placeholders
 * {NAMESPACE} {POD} {CONTAINER} {CONTAINER_ID} {CGROUP} {NODE} {PROFILE}
 * {PROCESS_NAME} {PROCESS_ID} {RANK} {TIMESTAMP} {UID} and %{ENV} (an environment
 * variable of the agent). Every substituted value is sanitized so that no
 * value can climb out of reportDir. */

#define TEMPLATE_HOST_DEFAULT "{CGROUP}/{TIMESTAMP}_{UID}"
#define TEMPLATE_POD_DEFAULT "{NAMESPACE}/{POD}/{CONTAINER}/{TIMESTAMP}_{UID}"
/* A ProfileConfig profile's default, below "{NAMESPACE}/". */
#define TEMPLATE_POD_NAMESPACED_DEFAULT "{POD}/{CONTAINER}/{TIMESTAMP}_{UID}"
#define TEMPLATE_COMPONENT_MAX 200 /* bytes; longer values are truncated */

typedef struct TemplateVars {
        const char *namespace;
        const char *pod;
        const char *container;
        const char *container_id;
        const char *cgroup; /* relative to the cgroup root; '/' becomes '_' when substituted */
        const char *node;
        const char *profile;
        const char *process_name;
        const char *process_id;
        const char *rank; /* {RANK}: the process's rank in its distributed job (job-identity.h) */
        uint64_t timestamp_ms; /* {TIMESTAMP}: UNIX ms */
        const char *uid; /* {UID}: 8 random alphanumerics; generated when NULL */
        const char *const *env; /* environ-style array for %{ENV}; NULL: the process environment */
} TemplateVars;

/* Checks a template at config time: relative, no ".." or "." component, no
 * empty component, only known placeholders, balanced braces. Returns 0 or
 * -EINVAL with a malloc()ed reason in ret_error ("unknown placeholder {FOO}"). */
int template_validate(const char *tmpl, char **ret_error);

/* Expands a (validated) template into a relative path whose every component
 * is safe: no '/', NUL, control character from values; no component equal to
 * "." or ".."; no empty component; none longer than TEMPLATE_COMPONENT_MAX.
 * A placeholder whose value is NULL expands to "unknown". */
int template_expand(const char *tmpl, const TemplateVars *vars, char **ret);

/* Whether the template uses {PROCESS_NAME} or {PROCESS_ID} (one report per
 * process), or {RANK} (one per rank: a rank's process and its workers). */
bool template_is_per_process(const char *tmpl);

/* Sanitizes one value into a single safe path component (malloc()ed). */
char *path_component_sanitize(const char *value);

/* UTF-8. Every name that leaves the agent (D-Bus, JSON, Prometheus, report
 * files) is valid UTF-8, escaped in one way: each byte that is not part of a
 * valid UTF-8 sequence becomes U+FFFD (EF BF BD), the replacement character,
 * as in the process names and frames of profile data (docs/control.md,
 * "Names that are not UTF-8"). A valid string is left as it is. Invalid bytes
 * are only ever replaced, never dropped, and a valid sequence never contains
 * an ASCII byte: so making a whole JSON or exposition text valid gives the
 * same text as making each of its strings valid. */

/* Length (1..4) of the valid UTF-8 character at the start of the
 * NUL-terminated s, or 0 when s is empty or starts with an invalid sequence
 * (overlong forms, surrogates and code points above U+10FFFF are invalid). */
size_t utf8_valid_char_len(const char *s);
/* Whether s is valid UTF-8 (NULL is). */
bool utf8_is_valid(const char *s);
/* A malloc()ed copy of s with every byte that is not part of a valid UTF-8
 * sequence replaced by U+FFFD. NULL for NULL or on OOM. */
char *utf8_make_valid(const char *s);
/* Points *s (unless NULL) at a valid UTF-8 string: itself when it is valid
 * (*ret_copy untouched), else a malloc()ed copy made valid, also stored in
 * *ret_copy for the caller to free. 0 or -ENOMEM. */
int utf8_ensure_valid(const char **s, char **ret_copy);
/* The same for D-Bus, whose strings (sd-bus) refuse the noncharacters too
 * (U+FDD0..U+FDEF, U+xFFFE, U+xFFFF): each byte of one becomes U+FFFD.
 * utf8_bus_char_len(): utf8_valid_char_len(), 0 for a noncharacter. */
int utf8_ensure_valid_bus(const char **s, char **ret_copy);
size_t utf8_bus_char_len(const char *s);
bool utf8_is_valid_bus(const char *s);
char *utf8_make_valid_bus(const char *s);
/* Takes the malloc()ed s and returns it if it is valid UTF-8 (or NULL), else
 * a copy made valid, freeing s. NULL on OOM (s freed). For a whole text, as
 * cJSON_Print() returns it. */
char *utf8_make_valid_take(char *s);

/* 8 random alphanumerics + NUL into buf[9]. */
void random_uid(char buf[static 9]);
