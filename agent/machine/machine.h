/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Owns: machineConfig on this node (the sysctls applied, checked for drift and restored) and the Node
 * watch whose labels select the entries: a MachineRoom, opaque to the rooms above (machine-room.h).
 * May call: the kube and base rooms (kube.h, base.h), common/ (machine); what it needs from above (the
 * config, /metrics, stopping the agent) through the MachineRoomDeps the Manager fills in (manager-rooms.c).
 * Called by: the Manager (start, reloads, restore), the kube room (the Node watch), the control room. */
#pragma once

#include "manager-machine.h"
#include "manager-node.h"
