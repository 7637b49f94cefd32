/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include "job-identity.h"

/* One report per distributed job across the sessions of its pods or
 * cgroups on this node (session-jobs.c, job-registry.h). */

typedef struct Session Session;
typedef struct ReportBatch ReportBatch;

/* A process of the session was seen (j: who it is in its job, NULL: not
 * read): the session joins its job, if it is of one. */
void session_jobs_note(Session *s, const JobIdentity *j);
/* The session ends: its jobs get their processes' samples from the
 * batch's writes (before it is submitted) and the directories. */
void session_jobs_contribute(Session *s, const ReportBatch *b);
/* The session is freed: it leaves its jobs; the last session of a job
 * writes the job's report. */
void session_jobs_leave(Session *s);
