/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for Kubernetes label selectors (common/kube/selector.c).
 *
 * The input is JSON: either {"selector": S, "labels": L}, or a selector
 * alone (then matched against fixed labels). A selector parses, or fails
 * with -EINVAL and a message starting with its path (or -ENOMEM). A parsed
 * one matches everything when empty; with matchLabels only, it matches its
 * own matchLabels. Matching never fails on any labels, or none.
 *
 * With "other": S2 as well, label_selectors_overlap() is checked against
 * matching: when they overlap, the witness matches both; when they do not,
 * no labels tried (the input's, the fixed ones, none) match both. A
 * selector that matches some labels overlaps itself. Its text form never
 * fails but for memory.
 * Built by tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include "fuzz.h"
#include "selector.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(cJSON *, cJSON_Delete);

static char *const fixed_labels[] = { "app", "web", "tier", "front", "example.com/team", "a-b_c.d", NULL };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = fuzz_strndup(data, size), *error = NULL;
        _cleanup_(label_selector_freep) LabelSelector *s = NULL;
        _cleanup_(cJSON_Deletep) cJSON *j = NULL;
        _cleanup_free_ char **labels = NULL;
        const cJSON *sel, *l, *i;
        size_t n = 0;
        int r;

        j = cJSON_Parse(text);
        if (!j)
                return 0;
        sel = cJSON_GetObjectItemCaseSensitive(j, "selector");
        l = cJSON_GetObjectItemCaseSensitive(j, "labels");
        if (!sel)
                sel = j;

        r = label_selector_from_json(sel, "spec.podSelector", &s, &error);
        if (r < 0) {
                CHECK(r == -EINVAL || r == -ENOMEM);
                CHECK(!s);
                CHECK(r != -EINVAL || (error && strncmp(error, "spec.podSelector", 16) == 0));
                return 0;
        }
        CHECK(s && !error);
        for (size_t k = 0; k < s->n_requirements; k++) {
                const LabelRequirement *req = &s->requirements[k];

                CHECK(req->key && req->key[0]);
                CHECK(req->op >= 0 && req->op < _LABEL_OPERATOR_MAX);
                CHECK((req->op == LABEL_OPERATOR_IN || req->op == LABEL_OPERATOR_NOT_IN) ==
                      (req->values && req->values[0]));
        }

        if (cJSON_IsObject(l)) {
                labels = calloc(2 * (size_t) cJSON_GetArraySize(l) + 1, sizeof(char *));
                CHECK(labels);
                cJSON_ArrayForEach (i, l)
                        if (cJSON_IsString(i)) {
                                labels[n++] = i->string;
                                labels[n++] = i->valuestring;
                        }
        }
        (void) label_selector_matches(s, labels ?: (char **) fixed_labels);
        (void) label_selector_matches(s, NULL);

        {
                _cleanup_(label_selector_freep) LabelSelector *o = NULL;
                _cleanup_free_ char *e2 = NULL, *text = NULL;
                const cJSON *other = cJSON_GetObjectItemCaseSensitive(j, "other");
                char **w = NULL;

                r = label_selector_to_string(s, &text);
                CHECK(r == 0 || r == -ENOMEM);
                if (label_selector_matches(s, labels ?: (char **) fixed_labels)) {
                        r = label_selectors_overlap(s, s, NULL);
                        CHECK(r == 1 || r == -ENOMEM);
                }
                if (other && label_selector_from_json(other, "other", &o, &e2) >= 0) {
                        r = label_selectors_overlap(s, o, &w);
                        CHECK(r >= 0 || r == -ENOMEM);
                        if (r > 0) {
                                CHECK(label_selector_matches(s, w) && label_selector_matches(o, w));
                                strv_free(w);
                        } else if (r == 0) {
                                CHECK(!w);
                                CHECK(!(label_selector_matches(s, labels ?: (char **) fixed_labels) &&
                                        label_selector_matches(o, labels ?: (char **) fixed_labels)));
                                CHECK(!(label_selector_matches(s, NULL) && label_selector_matches(o, NULL)));
                        }
                }
        }

        if (s->n_requirements == 0)
                CHECK(label_selector_matches(s, s->match_labels));
        if (!s->match_labels && s->n_requirements == 0) {
                CHECK(label_selector_matches(s, NULL));
                CHECK(label_selector_matches(s, fixed_labels));
        }
        return 0;
}
