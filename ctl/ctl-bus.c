/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* cgprofctl: connecting to the agent and calling its methods. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bus-api.h"
#include "ctl-bus.h"
#include "log.h"

/* Stopping writes the reports before the answer: symbolizing a large
 * session takes its time. */
#define STOP_TIMEOUT_USEC (5 * 60 * USEC_PER_SEC)

#define REPORT_SIGNATURE "(sssssstt)"

static int permission_denied(void) {
        log_error("permission denied: only root may control cgprofd.");
        return EXIT_FAILURE;
}

static bool is_disconnect(int r) {
        return r == -ECONNRESET || r == -ENOTCONN || r == -EPIPE || r == -ESHUTDOWN || r == -ECONNABORTED;
}

static int call_failed_what(const char *what, const sd_bus_error *error, int r) {
        const char *msg = sd_bus_error_is_set(error) ? error->message : NULL;

        if (sd_bus_error_has_name(error, CGPROF_ERROR_NOT_FOUND)) {
                log_error("%s: %s", what, msg ?: "not found");
                return EXIT_NOT_FOUND;
        }
        if (sd_bus_error_has_name(error, CGPROF_ERROR_INVALID_ARGUMENT)) {
                log_error("%s: %s", what, msg ?: "invalid argument");
                return EXIT_USAGE;
        }
        if (sd_bus_error_has_name(error, SD_BUS_ERROR_ACCESS_DENIED) || r == -EACCES || r == -EPERM)
                return permission_denied();
        if (sd_bus_error_has_name(error, SD_BUS_ERROR_SERVICE_UNKNOWN) ||
            sd_bus_error_has_name(error, SD_BUS_ERROR_NAME_HAS_NO_OWNER)) {
                log_error("%s: cgprofd is not on the system bus (%s).", what, strna(msg));
                return EXIT_FAILURE;
        }
        if (sd_bus_error_has_name(error, SD_BUS_ERROR_UNKNOWN_METHOD)) {
                log_error("%s: this cgprofd does not support it (%s).", what, msg ?: "unknown method");
                return EXIT_FAILURE;
        }
        /* The agent hangs up on a client that is not root. */
        if (is_disconnect(r) && geteuid() != 0)
                return permission_denied();
        if (is_disconnect(r)) {
                log_error("%s: the agent closed the connection.", what);
                return EXIT_FAILURE;
        }
        if (msg)
                log_error("%s: %s", what, msg);
        else
                log_error_errno(r, "%s: %m", what);
        return EXIT_FAILURE;
}

int call_failed(const sd_bus_error *error, int r, const char *fmt, ...) {
        _cleanup_free_ char *what = NULL;
        va_list ap;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&what, fmt, ap);
        va_end(ap);
        if (k < 0)
                return log_oom(), EXIT_FAILURE;
        return call_failed_what(what, error, r);
}

int reply_parse_failed(int r) {
        log_error_errno(r, "Failed to parse the reply: %m");
        return EXIT_FAILURE;
}

const char *ctl_destination(const Ctl *c) {
        return c->system ? CGPROF_BUS_NAME : NULL;
}

static int callv(const Ctl *c, uint64_t timeout_usec, const char *method, sd_bus_error *error,
                 sd_bus_message **reply, const char *types, va_list ap) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        int r;

        r = sd_bus_message_new_method_call(c->bus, &m, ctl_destination(c), CGPROF_BUS_PATH,
                                           CGPROF_BUS_INTERFACE, method);
        if (r < 0)
                return r;
        r = sd_bus_message_appendv(m, types, ap);
        if (r < 0)
                return r;
        return sd_bus_call(c->bus, m, timeout_usec, error, reply);
}

int ctl_call(const Ctl *c, const char *method, sd_bus_error *error, sd_bus_message **reply,
             const char *types, ...) {
        va_list ap;
        int r;

        va_start(ap, types);
        r = callv(c, 0, method, error, reply, types, ap);
        va_end(ap);
        return r;
}

int ctl_call_stop(const Ctl *c, const char *method, sd_bus_error *error, sd_bus_message **reply,
                  const char *types, ...) {
        va_list ap;
        int r;

        va_start(ap, types);
        r = callv(c, STOP_TIMEOUT_USEC, method, error, reply, types, ap);
        va_end(ap);
        return r;
}

int ctl_connect(Ctl *c) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_free_ char *address = NULL;
        const char *path = c->bus_socket ?: DEFAULT_BUS_SOCKET;
        int r;

        if (c->system) {
                r = sd_bus_open_system(&bus);
                if (r < 0)
                        return log_error_errno(r, "Failed to connect to the system bus: %m"), EXIT_FAILURE;
                c->bus = TAKE_PTR(bus);
                return 0;
        }

        /* Fail early with a clear message rather than a late ECONNREFUSED. */
        if (access(path, F_OK) < 0) {
                if (errno == EACCES)
                        return permission_denied();
                log_error_errno(errno, "Failed to connect to cgprofd at %s: %m (is cgprofd running?)", path);
                return EXIT_FAILURE;
        }
        if (asprintf(&address, "unix:path=%s", path) < 0)
                return log_oom(), EXIT_FAILURE;
        r = sd_bus_new(&bus);
        if (r < 0)
                return log_error_errno(r, "Failed to allocate a bus: %m"), EXIT_FAILURE;
        r = sd_bus_set_address(bus, address);
        if (r >= 0)
                r = sd_bus_start(bus);
        /* The agent hangs up on a client that is not root. */
        if (r == -EACCES || r == -EPERM || (is_disconnect(r) && geteuid() != 0))
                return permission_denied();
        if (r < 0)
                return log_error_errno(r, "Failed to connect to cgprofd at %s: %m", path), EXIT_FAILURE;
        c->bus = TAKE_PTR(bus);
        return 0;
}

int report_list_enter(sd_bus_message *reply) {
        return sd_bus_message_enter_container(reply, 'a', REPORT_SIGNATURE);
}

int report_list_read(sd_bus_message *reply, ReportInfo *ret) {
        return sd_bus_message_read(reply, REPORT_SIGNATURE, &ret->session, &ret->dir, &ret->namespace,
                                   &ret->pod, &ret->container, &ret->cgroup, &ret->start_usec,
                                   &ret->samples);
}
