/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* One unit of work in libcgprof-unwind-lib.so (iteration i picks the leaf). */
void lib_entry(unsigned i);
