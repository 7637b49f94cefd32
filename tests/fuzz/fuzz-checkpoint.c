/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libFuzzer target for what the agent reads at start to recover
 * checkpoints (agent/sessions/checkpoint-parse.c, called by agent/sessions/checkpoint.c): a
 * registry entry (STATE_DIR/checkpoints/SESSION_ID), and a checkpoint's
 * summary.json, marked "interrupted" by rewriting it.
 *
 * Each input is read as both. An entry parses or fails with -EBADMSG or
 * -ENOMEM, and keeps strings only. A summary is marked or not; the text
 * written instead parses again as the same object with "interrupted": true
 * and the reason, its cgroup, end and sample count as returned, and marking
 * it again does nothing (a second crash leaves a marked report alone).
 * Built by tests/fuzz/meson.build with clang -fsanitize=fuzzer,address,undefined. */
#include <cjson/cJSON.h>

#include "checkpoint-parse.h"
#include "fuzz.h"
#include "macro.h"

static const char *const REASON = "cgprofd stopped without ending the session (killed or crashed)";

static void check_entry(const char *text, size_t size) {
        _cleanup_(checkpoint_entry_done) CheckpointEntry e = {};
        int r = checkpoint_entry_parse(text, size, &e);

        if (r < 0) {
                CHECK(r == -EBADMSG || r == -ENOMEM);
                CHECK(!e.report_dir && !e.boot_id && !e.dirs);
                return;
        }
        CHECK(r == 0);
        CHECK(e.report_dir && e.boot_id && e.dirs);
        for (char **d = e.dirs; *d; d++)
                CHECK(strlen(*d) < size);
}

static const char *string_of(const cJSON *j, const char *key) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
        return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void check_mark(const char *text, size_t size) {
        _cleanup_(checkpoint_marked_done) CheckpointMarked m = {}, again = {};
        cJSON *j;
        int r = checkpoint_summary_mark_interrupted(text, size, REASON, &m);

        if (r <= 0) {
                CHECK(r == 0 || r == -ENOMEM);
                CHECK(!m.text && !m.cgroup && !m.end);
                return;
        }
        CHECK(r == 1 && m.text);
        size_t n = strlen(m.text);
        CHECK(n > 0 && m.text[n - 1] == '\n');

        /* What is written reads back as a marked checkpoint... */
        j = cJSON_ParseWithLength(m.text, n);
        CHECK(cJSON_IsObject(j));
        CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "partial")));
        CHECK(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "interrupted")));
        CHECK(streq_ptr(string_of(j, "interruptedReason"), REASON));
        CHECK(streq_ptr(string_of(j, "cgroup"), m.cgroup));
        CHECK(streq_ptr(string_of(j, "end"), m.end));
        cJSON_Delete(j);

        /* ... that the next start leaves alone. */
        r = checkpoint_summary_mark_interrupted(m.text, n, REASON, &again);
        CHECK(r == 0 || r == -ENOMEM);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        /* NUL-terminated, as read_regular_file_max() leaves a file. */
        _cleanup_free_ char *text = fuzz_strndup(data, size);

        check_entry(text, size);
        check_mark(text, size);
        return 0;
}
