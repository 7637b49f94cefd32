/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The D-Bus API on the agent's private socket (peer-to-peer, no bus daemon):
 * object /io/cgprof/Agent1, interface io.cgprof.Agent1. Only root may
 * connect: the socket is mode 0600 and the peer's credentials are checked. */
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "fileio.h"
#include "log.h"
#include "manager.h"

#define AGENT_PATH "/io/cgprof/Agent1"
#define AGENT_INTERFACE "io.cgprof.Agent1"

static int method_get_status(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        _cleanup_free_ char *json = manager_status_json(m);
        if (!json)
                return -ENOMEM;
        return sd_bus_reply_method_return(msg, "s", json);
}

static const sd_bus_vtable agent_vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD_WITH_ARGS("GetStatus", SD_BUS_NO_ARGS, SD_BUS_RESULT("s", status_json),
                                method_get_status, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
};

static void client_drop(Manager *m, sd_bus *bus) {
        for (size_t i = 0; i < m->n_bus_clients; i++)
                if (m->bus_clients[i] == bus) {
                        m->bus_clients[i] = m->bus_clients[--m->n_bus_clients];
                        break;
                }
        sd_bus_detach_event(bus);
        sd_bus_close(bus);
        sd_bus_unref(bus);
}

static int on_disconnected(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        Manager *m = userdata;
        client_drop(m, sd_bus_message_get_bus(msg));
        return 0;
}

static int on_accept(sd_event_source *s, int fd, uint32_t revents, void *userdata) {
        Manager *m = userdata;
        _cleanup_close_ int nfd = -EBADF;
        sd_bus *bus = NULL;
        struct ucred cred;
        socklen_t len = sizeof(cred);
        sd_id128_t id;
        int r;

        nfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (nfd < 0) {
                if (errno != EAGAIN && errno != EINTR)
                        log_warning_errno(errno, "Failed to accept a bus connection, ignoring: %m");
                return 0;
        }
        if (getsockopt(nfd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != 0) {
                log_notice("Refusing bus connection from UID %d: only root may control cgprofd.",
                           (int) cred.uid);
                return 0;
        }

        sd_bus **n = reallocarray(m->bus_clients, m->n_bus_clients + 1, sizeof(sd_bus *));
        if (!n)
                return log_oom();
        m->bus_clients = n;

        r = sd_bus_new(&bus);
        if (r < 0)
                return log_error_errno(r, "Failed to allocate a bus connection: %m");
        (void) sd_id128_randomize(&id);
        if ((r = sd_bus_set_fd(bus, nfd, nfd)) < 0 || (r = sd_bus_set_server(bus, 1, id)) < 0 ||
            (r = sd_bus_set_anonymous(bus, 1)) < 0 ||
            (r = sd_bus_add_object_vtable(bus, NULL, AGENT_PATH, AGENT_INTERFACE, agent_vtable, m)) < 0 ||
            (r = sd_bus_match_signal(bus, NULL, NULL, "/org/freedesktop/DBus/Local",
                                     "org.freedesktop.DBus.Local", "Disconnected", on_disconnected, m)) <
                    0 ||
            (r = sd_bus_start(bus)) < 0 ||
            (r = sd_bus_attach_event(bus, m->event, SD_EVENT_PRIORITY_NORMAL)) < 0) {
                TAKE_FD(nfd); /* owned by the bus now, or closed by it */
                sd_bus_close(bus);
                sd_bus_unref(bus);
                return log_warning_errno(r, "Failed to set up a bus connection, ignoring: %m");
        }
        TAKE_FD(nfd);
        m->bus_clients[m->n_bus_clients++] = bus;
        return 0;
}

int manager_bus_listen(Manager *m) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *dir = NULL;
        struct sockaddr_un sa = { .sun_family = AF_UNIX };
        int r;

        if (strlen(m->bus_socket) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, m->bus_socket);

        dir = strdup(m->bus_socket);
        if (!dir)
                return -ENOMEM;
        char *slash = strrchr(dir, '/');
        if (slash && slash != dir) {
                *slash = 0;
                r = mkdir_p(dir, 0755);
                if (r < 0)
                        return r;
        }

        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (fd < 0)
                return negative_errno();
        (void) unlink(m->bus_socket);
        mode_t old = umask(0077);
        r = bind(fd, (struct sockaddr *) &sa, sizeof(sa));
        umask(old);
        if (r < 0)
                return negative_errno();
        if (listen(fd, SOMAXCONN) < 0)
                return negative_errno();

        r = sd_event_add_io(m->event, &m->bus_accept, fd, EPOLLIN, on_accept, m);
        if (r < 0)
                return r;
        (void) sd_event_source_set_description(m->bus_accept, "bus-accept");
        m->bus_listen_fd = TAKE_FD(fd);
        log_debug("Listening for cgprofctl on %s.", m->bus_socket);
        return 0;
}

void manager_bus_close(Manager *m) {
        while (m->n_bus_clients > 0)
                client_drop(m, m->bus_clients[m->n_bus_clients - 1]);
        free(m->bus_clients);
        m->bus_clients = NULL;
        m->bus_accept = sd_event_source_disable_unref(m->bus_accept);
        if (m->bus_listen_fd >= 0) {
                (void) unlink(m->bus_socket);
                m->bus_listen_fd = safe_close(m->bus_listen_fd);
        }
}
