/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdarg.h>
#include <systemd/sd-bus.h>

/* What the agent appends to a D-Bus message, valid UTF-8 whatever the names
 * in it. sd-bus refuses a string that is not UTF-8 (-EINVAL), and a reply
 * that cannot be built is an error of the whole call: one cgroup, process
 * or node named with other bytes would break ListSessions for everyone.
 * These append as sd_bus_message_append() does, each string ('s') made
 * valid first (utf8_make_valid(): each invalid byte becomes U+FFFD).
 *
 * The types: the basic ones (y b n q i u x t d h s o g), structs "(...)",
 * arrays "aT" (an unsigned count, then the elements, as sd-bus takes
 * them), dict entries "{KV}" inside an array, and variants "v" (the
 * contents' signature, then the contents). Needs no bus: only sd-bus's
 * message functions. */

int bus_append_valid(sd_bus_message *m, const char *types, ...);
int bus_append_validv(sd_bus_message *m, const char *types, va_list ap);

/* Appends l (NULL-terminated, NULL: empty) as "as". */
int bus_append_strv_valid(sd_bus_message *m, char **l);

/* The method's reply with the arguments appended as above, sent. */
int bus_reply_valid(sd_bus_message *call, const char *types, ...);

/* A signal on bus with the arguments appended as above, sent. */
int bus_emit_signal_validv(sd_bus *bus, const char *path, const char *interface, const char *member,
                           const char *types, va_list ap);

/* sd_bus_error_set() with the message made valid (it goes in the error
 * reply, as a string). Returns what sd_bus_error_set() returns. */
int bus_error_set_valid(sd_bus_error *e, const char *name, const char *message);
