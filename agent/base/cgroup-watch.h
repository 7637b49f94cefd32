/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <systemd/sd-event.h>

#include "macro.h"

/* Watches the cgroup v2 tree with inotify: reports every cgroup that exists
 * when the watch starts and every cgroup created or removed later. Paths are
 * relative to the cgroup root ("" is the root, "system.slice/foo.service" a
 * child). A queue overflow triggers a rescan that reconciles what it missed. */

typedef struct CgroupWatch CgroupWatch;

/* added: true for a new cgroup (parents are reported before children),
 * false for a removed one (children before parents). */
typedef void (*CgroupWatchCallback)(const char *path, bool added, void *userdata);

/* Scans the tree synchronously (calling cb for each existing cgroup) and
 * then watches it on the event loop. */
int cgroup_watch_new(sd_event *e, const char *root, CgroupWatchCallback cb, void *userdata,
                     CgroupWatch **ret);
CgroupWatch *cgroup_watch_free(CgroupWatch *w);
DEFINE_TRIVIAL_CLEANUP_FUNC(CgroupWatch *, cgroup_watch_free);

/* Number of cgroups watched. */
size_t cgroup_watch_count(const CgroupWatch *w);
/* Whether a cgroup is known. */
bool cgroup_watch_has(const CgroupWatch *w, const char *path);
/* Calls f for every known cgroup below (and including) 'path'. */
void cgroup_watch_foreach_below(const CgroupWatch *w, const char *path,
                                void (*f)(const char *path, void *ud), void *ud);
