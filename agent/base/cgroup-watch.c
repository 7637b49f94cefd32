/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <dirent.h>
#include <fcntl.h>
#include <sys/inotify.h>

#include "cgroup-watch.h"
#include "hashmap.h"
#include "log.h"

#define WATCH_MASK (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ONLYDIR | IN_DONT_FOLLOW)

typedef struct Node {
        char *path;
        int wd;
        bool seen; /* rescan mark */
        /* The tree: a node's parent is known as long as it is (parents are
         * added before their children and removed after them). */
        struct Node *parent, *first_child, *prev_sibling, *next_sibling;
} Node;

DEFINE_STRING_HASHMAP(NodeByPath, node_by_path, Node);
DEFINE_UINT64_HASHMAP(NodeByWd, node_by_wd, Node);

struct CgroupWatch {
        sd_event_source *io;
        sd_event_source *retry; /* a new inotify instance, after a read error */
        LogRateLimit log;
        int inotify_fd;
        int root_fd;
        char *root;
        NodeByPath by_path;
        NodeByWd by_wd; /* the nodes with a watch */
        CgroupWatchCallback cb;
        void *userdata;
};

static Node *find_path(const CgroupWatch *w, const char *path) {
        return node_by_path_get(&w->by_path, path);
}

static Node *find_wd(const CgroupWatch *w, int wd) {
        return wd >= 0 ? node_by_wd_get(&w->by_wd, (uint64_t) wd) : NULL;
}

static char *path_join(const char *a, const char *b) {
        char *p;
        if (asprintf(&p, "%s%s%s", a, a[0] ? "/" : "", b) < 0)
                return NULL;
        return p;
}

static int node_watch(CgroupWatch *w, const char *path) {
        _cleanup_free_ char *abs = NULL;
        int wd;

        if (asprintf(&abs, "%s/%s", w->root, path) < 0)
                return -ENOMEM;
        wd = inotify_add_watch(w->inotify_fd, abs, WATCH_MASK);
        if (wd < 0) {
                if (errno == ENOENT || errno == ENOTDIR)
                        return -ENOENT; /* gone already */
                return log_debug_errno(errno, "Failed to watch cgroup %s: %m", abs);
        }
        return wd;
}

static void node_link(Node *n, Node *parent) {
        n->parent = parent;
        if (!parent)
                return;
        n->next_sibling = parent->first_child;
        if (n->next_sibling)
                n->next_sibling->prev_sibling = n;
        parent->first_child = n;
}

static void node_unlink(Node *n) {
        if (n->prev_sibling)
                n->prev_sibling->next_sibling = n->next_sibling;
        else if (n->parent)
                n->parent->first_child = n->next_sibling;
        if (n->next_sibling)
                n->next_sibling->prev_sibling = n->prev_sibling;
        /* Children outliving their parent would break the rule above: never seen, but no pointer dangles. */
        for (Node *c = n->first_child; c; c = c->next_sibling)
                c->parent = NULL;
        n->parent = n->prev_sibling = n->next_sibling = n->first_child = NULL;
}

static int node_index_wd(CgroupWatch *w, Node *n) {
        /* Replaces a stale entry for a recycled wd. */
        return node_by_wd_replace(&w->by_wd, (uint64_t) n->wd, n, NULL);
}

/* Adds a watch on path (if new, or if its watch was lost; a new one goes
 * below parent), reports it, and recurses into its children. */
static int add_tree(CgroupWatch *w, const char *path, Node *parent) {
        _cleanup_close_ int fd = -EBADF;
        Node *n = find_path(w, path);
        int r;

        if (n) {
                n->seen = true;
                if (n->wd < 0) {
                        r = node_watch(w, path);
                        if (r == -ENOENT) {
                                n->seen = false; /* gone: the rescan forgets it */
                                return 0;
                        }
                        if (r < 0)
                                return r;
                        n->wd = r;
                        r = node_index_wd(w, n);
                        if (r < 0)
                                return r;
                }
        } else {
                int wd = node_watch(w, path);
                if (wd == -ENOENT)
                        return 0;
                if (wd < 0)
                        return wd;
                n = calloc(1, sizeof(*n));
                if (!n)
                        return -ENOMEM;
                n->path = strdup(path);
                n->wd = wd;
                n->seen = true;
                if (!n->path || node_by_path_put(&w->by_path, n->path, n) < 0) {
                        free(n->path);
                        free(n);
                        return -ENOMEM;
                }
                node_link(n, parent);
                if (node_index_wd(w, n) < 0)
                        return -ENOMEM;
                w->cb(n->path, true, w->userdata);
        }

        fd = openat(w->root_fd, path[0] ? path : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return errno == ENOENT ? 0 : negative_errno();
        DIR *d = fdopendir(fd);
        if (!d)
                return negative_errno();
        TAKE_FD(fd);

        r = 0;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_type != DT_DIR || streq(de->d_name, ".") || streq(de->d_name, ".."))
                        continue;
                _cleanup_free_ char *child = path_join(path, de->d_name);
                if (!child) {
                        r = -ENOMEM;
                        break;
                }
                int k = add_tree(w, child, n);
                if (k < 0 && r == 0)
                        r = k;
        }
        closedir(d);
        return r;
}

static void node_forget(CgroupWatch *w, Node *n, bool report) {
        if (report)
                w->cb(n->path, false, w->userdata);
        if (n->wd >= 0) {
                (void) inotify_rm_watch(w->inotify_fd, n->wd);
                (void) node_by_wd_remove_value(&w->by_wd, (uint64_t) n->wd, n);
        }
        (void) node_by_path_remove_value(&w->by_path, n->path, n);
        node_unlink(n);
        free(n->path);
        free(n);
}

/* Nodes collected for removal or a walk, deepest first (children are
 * reported before parents), then by path. */
typedef struct Collect {
        Node **nodes;
        size_t n, allocated;
} Collect;

static void collect_add(Collect *c, Node *n) {
        if (c->n == c->allocated) {
                size_t na = MAX(c->allocated * 2, (size_t) 16);
                Node **nn = reallocarray(c->nodes, na, sizeof(Node *));
                if (!nn)
                        return (void) log_oom();
                c->nodes = nn;
                c->allocated = na;
        }
        c->nodes[c->n++] = n;
}

static int cmp_depth_desc(const void *a, const void *b) {
        const char *pa = (*(Node *const *) a)->path, *pb = (*(Node *const *) b)->path;
        size_t la = strlen(pa), lb = strlen(pb);
        return la != lb ? CMP(lb, la) : strcmp(pa, pb);
}

static void collect_sort(Collect *c) {
        if (c->n > 1)
                qsort(c->nodes, c->n, sizeof(Node *), cmp_depth_desc);
}

static void collect_subtree(Collect *c, Node *n) {
        collect_add(c, n);
        for (Node *child = n->first_child; child; child = child->next_sibling)
                collect_subtree(c, child);
}

/* path and everything below it (nothing when path is not known: neither is anything below). */
static void collect_below(const CgroupWatch *w, const char *path, Collect *c) {
        Node *n = find_path(w, path);
        if (n)
                collect_subtree(c, n);
        collect_sort(c);
}

static void remove_tree(CgroupWatch *w, const char *path) {
        Collect c = {};
        collect_below(w, path, &c);
        for (size_t i = 0; i < c.n; i++)
                node_forget(w, c.nodes[i], true);
        free(c.nodes);
}

static int rescan(CgroupWatch *w) {
        Node *n;
        int r;

        HASHMAP_FOREACH (n, node_by_path, &w->by_path)
                n->seen = false;
        r = add_tree(w, "", NULL);
        Collect c = {};
        HASHMAP_FOREACH (n, node_by_path, &w->by_path)
                if (!n->seen)
                        collect_add(&c, n);
        collect_sort(&c);
        for (size_t i = 0; i < c.n; i++)
                node_forget(w, c.nodes[i], true);
        free(c.nodes);
        return r;
}

static int on_inotify(sd_event_source *s, int fd, uint32_t revents, void *userdata);

/* A new inotify instance, every cgroup watched again, and a rescan for what
 * changed meanwhile (reported as usual). */
static int watch_restart(CgroupWatch *w, sd_event *e) {
        _cleanup_(sd_event_source_unrefp) sd_event_source *io = NULL;
        _cleanup_close_ int fd = -EBADF;
        Node *n;
        int r;

        fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (fd < 0)
                return negative_errno();
        r = sd_event_add_io(e, &io, fd, EPOLLIN, on_inotify, w);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(io, "cgroup-inotify");

        /* Safe from its own handler: sd-event frees a source after its dispatch. */
        sd_event_source_disable_unref(w->io);
        w->io = TAKE_PTR(io);
        safe_close(w->inotify_fd);
        w->inotify_fd = TAKE_FD(fd);
        node_by_wd_clear(&w->by_wd, NULL);
        HASHMAP_FOREACH (n, node_by_path, &w->by_path)
                n->wd = -1;
        return rescan(w);
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata);

/* Handlers return 0: sd-event disables a source whose handler fails, for
 * good, and cgroups would go unnoticed for the rest of the agent's life. */
static void watch_recover(CgroupWatch *w, sd_event *e, int error) {
        uint64_t now = 0;
        int r;

        (void) sd_event_now(e, CLOCK_MONOTONIC, &now);
        int level = log_ratelimit_level(&w->log, now, LOG_WARNING);
        log_full_errno(level, error, "Failed to read cgroup inotify events, watching %s anew: %m", w->root);
        r = watch_restart(w, e);
        if (r >= 0)
                return;

        /* The old instance is still there: silence it, and try again later. */
        log_full_errno(level, r, "Failed to watch %s anew, trying again in 1 s: %m", w->root);
        (void) sd_event_source_set_enabled(w->io, SD_EVENT_OFF);
        if (w->retry) {
                r = sd_event_source_set_time_relative(w->retry, USEC_PER_SEC);
                if (r >= 0)
                        r = sd_event_source_set_enabled(w->retry, SD_EVENT_ONESHOT);
        } else
                r = sd_event_add_time_relative(e, &w->retry, CLOCK_MONOTONIC, USEC_PER_SEC,
                                               10 * USEC_PER_MSEC, on_retry, w);
        if (r < 0) {
                log_error_errno(r, "Failed to arm the cgroup watch's retry timer, stopping the agent: %m");
                (void) sd_event_exit(e, r);
        }
}

static int on_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        CgroupWatch *w = userdata;
        int r = watch_restart(w, sd_event_source_get_event(s));
        if (r < 0)
                watch_recover(w, sd_event_source_get_event(s), r);
        else
                log_info("Watching the cgroups of %s again.", w->root);
        return 0;
}

static int on_inotify(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        CgroupWatch *w = userdata;
        char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
        bool overflow = false;

        for (;;) {
                ssize_t l = read(fd, buf, sizeof(buf));
                if (l < 0) {
                        if (errno == EAGAIN || errno == EINTR)
                                break;
                        watch_recover(w, sd_event_source_get_event(s), errno);
                        return 0; /* fd is closed now, or silenced */
                }
                for (char *p = buf; p < buf + l;) {
                        struct inotify_event *e = (struct inotify_event *) p;
                        p += sizeof(*e) + e->len;

                        if (e->mask & IN_Q_OVERFLOW) {
                                overflow = true;
                                continue;
                        }
                        if (e->mask & IN_IGNORED) {
                                Node *n = node_by_wd_remove(&w->by_wd, (uint64_t) e->wd);
                                if (n)
                                        n->wd = -1;
                                continue;
                        }
                        if (!(e->mask & IN_ISDIR) || e->len == 0)
                                continue;
                        Node *parent = find_wd(w, e->wd);
                        if (!parent)
                                continue;
                        _cleanup_free_ char *child = path_join(parent->path, e->name);
                        if (!child) {
                                log_oom();
                                overflow = true; /* an event lost: rescan */
                                continue;
                        }
                        if (e->mask & (IN_CREATE | IN_MOVED_TO))
                                (void) add_tree(w, child, parent);
                        else if (e->mask & (IN_DELETE | IN_MOVED_FROM))
                                remove_tree(w, child);
                }
        }

        if (overflow) {
                log_warning("cgroup inotify events were lost (queue overflow), rescanning the cgroup tree.");
                (void) rescan(w);
        }
        return 0;
}

int cgroup_watch_new(sd_event *e, const char *root, CgroupWatchCallback cb, void *userdata,
                     CgroupWatch **ret) {
        _cleanup_(cgroup_watch_freep) CgroupWatch *w = NULL;
        int r;

        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        w->inotify_fd = -EBADF;
        w->log.interval_usec = 10 * USEC_PER_SEC;
        w->cb = cb;
        w->userdata = userdata;
        w->root = strdup(root);
        if (!w->root)
                return -ENOMEM;
        w->root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (w->root_fd < 0)
                return negative_errno();
        w->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (w->inotify_fd < 0)
                return negative_errno();

        r = add_tree(w, "", NULL);
        if (r < 0)
                return r;

        r = sd_event_add_io(e, &w->io, w->inotify_fd, EPOLLIN, on_inotify, w);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(w->io, "cgroup-inotify");

        *ret = TAKE_PTR(w);
        return 0;
}

static void node_free(Node *n) {
        free(n->path);
        free(n);
}

CgroupWatch *cgroup_watch_free(CgroupWatch *w) {
        if (!w)
                return NULL;
        sd_event_source_disable_unref(w->io);
        sd_event_source_disable_unref(w->retry);
        node_by_wd_clear(&w->by_wd, NULL);
        node_by_path_clear(&w->by_path, node_free);
        safe_close(w->inotify_fd);
        safe_close(w->root_fd);
        free(w->root);
        free(w);
        return NULL;
}

size_t cgroup_watch_count(const CgroupWatch *w) {
        return node_by_path_size(&w->by_path);
}

bool cgroup_watch_has(const CgroupWatch *w, const char *path) {
        return find_path(w, path) != NULL;
}

void cgroup_watch_foreach_below(const CgroupWatch *w, const char *path,
                                void (*f)(const char *path, void *ud), void *ud) {
        Collect c = {};
        collect_below(w, path, &c);
        /* Parents first. */
        for (size_t i = c.n; i > 0; i--)
                f(c.nodes[i - 1]->path, ud);
        free(c.nodes);
}
