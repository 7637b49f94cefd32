/* SPDX-License-Identifier: LGPL-2.1-or-later */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cupti-socket.h"
#include "fileio.h"
#include "log.h"

/* Datagrams read per wakeup: the loop takes turns with the other sources
 * (the rest wait in the socket's buffer). */
#define CUPTI_SOCKET_BURST 256
#define CUPTI_SOCKET_RCVBUF (4 << 20)

struct CuptiSocket {
        int fd;
        char *path;
        dev_t dev; /* the socket file bound: unlinked at the end only if still ours */
        ino_t ino;
        sd_event_source *source;
        CuptiSocketFunc cb;
        void *userdata;
        CuptiSocketStats stats;
};

CuptiSocket *cupti_socket_free(CuptiSocket *c) {
        if (!c)
                return NULL;
        sd_event_source_disable_unref(c->source);
        if (c->fd >= 0) {
                struct stat st;

                close(c->fd);
                /* Another agent may have bound the path since (a second
                 * cgprofd on the host): its socket stays. */
                if (stat(c->path, &st) >= 0 && st.st_dev == c->dev && st.st_ino == c->ino)
                        (void) unlink(c->path);
        }
        free(c->path);
        free(c);
        return NULL;
}

/* One datagram: 1 read, 0 none left, or a negative errno. */
static int read_one(CuptiSocket *c) {
        uint8_t buf[CUPTI_WIRE_MAX_SIZE + 1];
        CuptiWireKernel k[CUPTI_WIRE_MAX_KERNELS];
        union {
                struct cmsghdr h;
                uint8_t buf[CMSG_SPACE(sizeof(struct ucred))];
        } control = {};
        struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
        struct msghdr m = {
                .msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control, .msg_controllen = sizeof(control)
        };
        const struct ucred *cred = NULL;
        CuptiWireHeader h;
        ssize_t len;
        int n;

        len = recvmsg(c->fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (len < 0)
                return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : errno == EINTR ? 1 : -errno;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm))
                if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_CREDENTIALS &&
                    cm->cmsg_len == CMSG_LEN(sizeof(struct ucred)))
                        cred = (const struct ucred *) CMSG_DATA(cm);
        n = (m.msg_flags & MSG_TRUNC) ? -EBADMSG
                                      : cupti_wire_decode(buf, (size_t) len, &h, k, ELEMENTSOF(k));
        if (n < 0 || !cred || cred->pid <= 0) {
                c->stats.refused++;
                return 1;
        }
        if (h.pid != (uint32_t) cred->pid)
                c->stats.claimed_other_pid++;
        c->stats.datagrams++;
        c->cb((uint32_t) cred->pid, &h, k, (size_t) n, c->userdata);
        return 1;
}

int cupti_socket_read(CuptiSocket *c) {
        int n = 0, r;

        while (n < CUPTI_SOCKET_BURST) {
                r = read_one(c);
                if (r <= 0)
                        return r < 0 ? r : n;
                n++;
        }
        return n;
}

static int on_io(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        int r = cupti_socket_read(userdata);

        if (r < 0)
                log_debug_errno(r, "Failed to read the CUPTI socket, ignoring: %m");
        return 0;
}

static int bind_socket(CuptiSocket *c) {
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int one = 1, size = CUPTI_SOCKET_RCVBUF;
        _cleanup_free_ char *dir = NULL;
        struct stat st;
        char *slash;

        if (strlen(c->path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, c->path);
        dir = strdup(c->path);
        if (!dir)
                return -ENOMEM;
        slash = strrchr(dir, '/');
        if (slash && slash != dir) {
                *slash = '\0';
                if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                        return -errno;
        }
        c->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (c->fd < 0)
                return -errno;
        if (setsockopt(c->fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)) < 0)
                return -errno;
        (void) setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
        (void) unlink(c->path); /* a stale one, from an agent before */
        if (bind(c->fd, (struct sockaddr *) &sa, sizeof(sa)) < 0)
                return -errno;
        if (chmod(c->path, 0666) < 0 || stat(c->path, &st) < 0)
                return -errno;
        c->dev = st.st_dev;
        c->ino = st.st_ino;
        return 0;
}

int cupti_socket_new(sd_event *event, const char *path, CuptiSocketFunc cb, void *userdata,
                     CuptiSocket **ret) {
        _cleanup_(cupti_socket_freep) CuptiSocket *c = calloc(1, sizeof(*c));
        int r;

        if (!c)
                return -ENOMEM;
        c->fd = -EBADF;
        c->cb = cb;
        c->userdata = userdata;
        c->path = strdup(path);
        if (!c->path)
                return -ENOMEM;
        r = bind_socket(c);
        if (r < 0) {
                if (c->fd >= 0) {
                        close(c->fd);
                        c->fd = -EBADF;
                }
                return r;
        }
        r = sd_event_add_io(event, &c->source, c->fd, EPOLLIN, on_io, c);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(c->source, "cupti-socket");
        *ret = TAKE_PTR(c);
        return 0;
}

void cupti_socket_stats(const CuptiSocket *c, CuptiSocketStats *ret) {
        *ret = c ? c->stats : (CuptiSocketStats){};
}
