/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Fixed-work CPU workload for bench/overhead (filled in with the benchmark). */
int main(void) { return 0; }
