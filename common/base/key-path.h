/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

#include "macro.h"

/* Errors of input for the caller to show: a message, and the negative
 * errno to return. Most name where the input went wrong by key path
 * ("profiles[1].includePatterns[0]"): the config, its label selectors,
 * ProfileConfig specs. */

/* Stores the message in *ret_error (when ret_error is not NULL; it gets
 * NULL without memory) and returns r. */
_printf_(3, 4) int error_message(char **ret_error, int r, const char *fmt, ...);

/* Stores "<path>: <message>" in *error (freeing what it held; "$" for the
 * root, an empty or NULL path) and returns -EINVAL, or -ENOMEM when the
 * message cannot be allocated. */
_printf_(3, 4) int key_path_error(char **error, const char *path, const char *fmt, ...);

/* "parent.key", or "key" at the root (parent ""); NULL without memory. */
char *key_path_child(const char *parent, const char *key);
/* "parent[i]"; NULL without memory. */
char *key_path_index(const char *parent, size_t i);
