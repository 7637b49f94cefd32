/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <cjson/cJSON.h>

#include "macro.h"

/* Kubernetes label selectors (metav1.LabelSelector) with the API's exact
 * semantics: matchLabels and matchExpressions (In, NotIn, Exists,
 * DoesNotExist) are ANDed; an empty selector matches everything. */

typedef enum LabelOperator {
        LABEL_OPERATOR_IN,
        LABEL_OPERATOR_NOT_IN,
        LABEL_OPERATOR_EXISTS,
        LABEL_OPERATOR_DOES_NOT_EXIST,
        _LABEL_OPERATOR_MAX,
        _LABEL_OPERATOR_INVALID = -EINVAL,
} LabelOperator;

typedef struct LabelRequirement {
        char *key;
        LabelOperator op;
        char **values; /* strv; empty for Exists/DoesNotExist */
} LabelRequirement;

typedef struct LabelSelector {
        char **match_labels; /* strv of key, value, key, value, ... */
        LabelRequirement *requirements;
        size_t n_requirements;
} LabelSelector;

/* A set of labels as key/value pairs: strv key, value, key, value, ... */
typedef char *const *Labels;

/* Parses a selector object. 'path' is the key path used in error messages
 * (e.g. "targets[0].podSelector"); on error ret_error gets
 * "targets[0].podSelector.matchExpressions[1].operator: must be one of In, NotIn, Exists, DoesNotExist".
 * Validates label keys and values like the API server (qualified names, 63
 * chars, ...), In/NotIn need a non-empty values list, Exists/DoesNotExist none. */
int label_selector_from_json(const cJSON *j, const char *path, LabelSelector **ret, char **ret_error);
LabelSelector *label_selector_free(LabelSelector *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(LabelSelector *, label_selector_free);

/* labels may be NULL (no labels). A NULL selector means "not set" and matches
 * everything, like an empty one (unlike a nil selector in the API). */
bool label_selector_matches(const LabelSelector *s, Labels labels);

/* Whether some set of labels matches both selectors (NULL: not set, matches
 * everything). Decided exactly, without guessing at label sets: 1 when they
 * overlap, with *ret_witness (if non-NULL) a label set both match (strv
 * key, value, ...; keys neither selector names are left out), 0 when no
 * node can match both, -ENOMEM. */
int label_selectors_overlap(const LabelSelector *a, const LabelSelector *b, char ***ret_witness);

/* A label set as a JSON object of strings ("nodeLabels", matchLabels):
 * keys and values checked as the API server does, no duplicate key.
 * Errors start with 'path'. *ret is a strv key, value, ... (never NULL). */
int label_set_from_json(const cJSON *j, const char *path, char ***ret, char **ret_error);

/* kubectl's text for a selector ("a=b,zone in (x,y),!k"; "" when it has no
 * condition) and for labels ("a=b,c=d"). */
int label_selector_to_string(const LabelSelector *s, char **ret);
int labels_to_string(Labels labels, char **ret);
