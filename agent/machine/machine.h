/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Owns: machineConfig on this node (the sysctls applied, checked for drift and restored) and the Node
 * watch whose labels select the entries.
 * May call: the kube and base rooms (kube.h, base.h), common/ (machine); and for now the Manager and the
 * metrics of the http room (the KNOWN entries of scripts/check-rooms).
 * Called by: the Manager (start, the drift timer, reloads), the kube room (the Node), the control room. */
#pragma once

#include "manager-machine.h"
#include "manager-node.h"
