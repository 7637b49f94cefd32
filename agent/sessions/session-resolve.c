/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Late resolution: frames are named when their samples are drained
 * (session.c, intern_user()), with the symbols known then. Some arrive
 * later: a debug file fetched from debuginfod while the session runs, a
 * JIT perf map or jitdump written (or grown) after the code ran. Before the
 * report is written, the frames still unresolved are looked up again
 * through their process's mappings snapshot (which reads what its JIT files
 * gained); stacks that became equal are merged, and the counters the
 * summary shows follow.
 *
 * What it costs: nothing when the session has no unresolved user frame;
 * else one lookup per unresolved location (and process), a binary search,
 * plus a look at each process's JIT files once. Only when one resolves is
 * the session's data copied with the new frames. Every unresolved frame is
 * tried, not only those of files whose symbols changed (the symbolizer's
 * generation): JIT files change without the symbolizer knowing, and the
 * lookups are cheap (test_debuginfod.py: 18 lookups and the copy, 0.1 ms).
 * The mapping pass below is one lookup per mapping, when some file got
 * symbols late or a mapping said pending. Both run on the event loop, once
 * per report, and are logged with their time at debug level. */

#include <inttypes.h>
#include <time.h>

#include "log.h"
#include "session.h"
#include "sessions-room.h"

static int resolve_late(void *userdata, uint32_t process, const ProfileLocation *location,
                        ProfileFrameName *ret) {
        Session *s = userdata;
        ProcessMaps *maps = session_process_maps(s, process);
        const Frame *old = &s->data->frames[location->frame];
        const ProfileMapping *pm =
                location->mapping != PROFILE_NONE ? &s->data->mappings[location->mapping] : NULL;
        ResolvedFrame rf = {};

        /* An unresolved Python frame's address is its code object's, no code. */
        if (streq(old->name, "[python]") && !old->module)
                return 0;
        if (!maps || symbolizer_resolve_user(s->room->symbolizer, maps, location->address, &rf) < 0)
                return 0;
        /* A name now, in the same mapping as when it was drained (not one
         * mapped at that address since); JIT code had none, or its file's. */
        if (!rf.name || (pm && rf.map_start != 0 && rf.map_start != pm->start))
                return 0;
        if (streq_ptr(old->module, PROFILE_CUDA_KERNEL_MODULE)) {
                /* A launch's kernel (session.c, intern_launch()): its host
                 * function named now, still the launch's leaf. */
                *ret = (ProfileFrameName){ .name = rf.name,
                                           .module = PROFILE_CUDA_KERNEL_MODULE,
                                           .kind = FRAME_USER };
                return 1;
        }
        *ret = (ProfileFrameName){ .name = rf.name, .module = rf.module, .kind = FRAME_USER };
        return 1;
}

static bool mappings_pending(const ProfileData *d) {
        for (size_t i = 0; i < d->n_mappings; i++)
                if (d->mappings[i].symbols && strstr(d->mappings[i].symbols, "(debuginfod pending)"))
                        return true;
        return false;
}

/* Says again where each user mapping's symbols came from: "debuginfod" once
 * its debug file arrived, still "... (debuginfod pending)" when it has not. */
static int update_mapping_symbols(Session *s) {
        ProfileData *d = s->data;
        _cleanup_free_ bool *done = NULL;

        if (d->n_mappings == 0)
                return 0;
        done = calloc(d->n_mappings, sizeof(bool));
        if (!done)
                return -ENOMEM;

        for (size_t i = 0; i < d->n_stacks; i++) {
                const ProfileStack *st = &d->stacks[i];
                ProcessMaps *maps;

                if (!st->locations)
                        continue;
                maps = session_process_maps(s, st->process);
                if (!maps)
                        continue;
                for (uint32_t k = 0; k < st->n_frames; k++) {
                        const ProfileLocation *l = &d->locations[st->locations[k]];
                        ResolvedFrame rf = {};
                        int r;

                        if (l->mapping == PROFILE_NONE || done[l->mapping] || d->mappings[l->mapping].kernel)
                                continue;
                        if (symbolizer_resolve_user(s->room->symbolizer, maps, l->address, &rf) < 0 ||
                            !rf.symbols_source || rf.map_start != d->mappings[l->mapping].start)
                                continue;
                        done[l->mapping] = true;
                        r = profile_data_mapping_update_symbols(d, l->mapping, rf.symbols_source);
                        if (r < 0)
                                return r;
                }
        }
        return 0;
}

void session_resolve_late(Session *s) {
        uint64_t generation = symbolizer_generation(s->room->symbolizer), start = now_usec(CLOCK_MONOTONIC);
        ProfileRelocateStats st = {};
        bool changed = generation != s->symbols_generation;
        int r;

        /* Kernel records whose launch's stack is known by now (the end's
         * drain read the socket and the launches): the report counts those
         * still waiting as not joined. */
        session_cuda_join(s, true);
        if (s->frames_unsymbolized > 0) {
                _cleanup_(profile_data_freep) ProfileData *d = NULL;

                r = profile_data_relocate(s->data, resolve_late, s, &d, &st);
                if (r < 0)
                        log_warning_errno(r, "Session %s: failed to resolve frames again, ignoring: %m",
                                          s->id_string);
                else if (d) {
                        profile_data_free(s->data);
                        s->data = TAKE_PTR(d);
                        /* Their frames' indices were the old data's: records
                         * still to come for them are counted not joined. */
                        session_cuda_anchors_forget(s);
                        s->frames_unsymbolized -= MIN(st.resolved, s->frames_unsymbolized);
                }
                log_debug("Session %s: %" PRIu64 " of %" PRIu64
                          " unresolved user frames resolved late (%zu locations, %zu lookups, "
                          "%zu stacks now %zu) in %.3f ms.",
                          s->id_string, st.resolved, st.candidates, st.locations_resolved, st.calls,
                          st.stacks_before, st.stacks_after,
                          (double) (now_usec(CLOCK_MONOTONIC) - start) / 1000.0);
        }
        s->symbols_generation = generation;

        if (changed || mappings_pending(s->data)) {
                r = update_mapping_symbols(s);
                if (r < 0)
                        log_warning_errno(r,
                                          "Session %s: failed to update the mappings' symbols, ignoring: %m",
                                          s->id_string);
        }
}
