/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Checkpoints (the profile's checkpointInterval): a running session writes
 * its report so far every interval, marked "partial": true in
 * summary.json, into the directories its final report will replace, so a
 * crash loses at most one interval of samples.
 *
 * The state directory keeps a small registry, checkpoints/SESSION_ID, one
 * file per session with a checkpoint, naming its report directories; it
 * goes when the session ends. At start the agent reads only these entries
 * (never the whole reportDir, which may hold tens of thousands of
 * reports): each report whose summary.json is still partial belonged to a
 * session the last run never ended, and is marked "interrupted": true
 * with the reason, with one journal entry per report; temporary files
 * left in those directories are removed. */

typedef struct SessionsRoom SessionsRoom;
typedef struct Session Session;

#define CHECKPOINT_REGISTRY_DIR "checkpoints"

/* Opens the registry (below the state directory) and processes the entries
 * a previous run left. Errors are logged; the agent goes on without
 * checkpoints when the registry cannot be opened. */
void manager_checkpoint_setup(SessionsRoom *r);

/* A session started: arms its checkpoint timer (unless its profile has no
 * checkpointInterval, or its duration ends first). */
int session_checkpoint_arm(Session *s);
/* Writes a checkpoint now (the timer's work). */
int session_checkpoint(Session *s);
/* The session's final report is written (or queued for a retry): its
 * registry entry goes. */
void session_checkpoint_done(Session *s);
/* A session discarded without a report: its checkpoint files go too. */
void session_checkpoint_discard(Session *s);
