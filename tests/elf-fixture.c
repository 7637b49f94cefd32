/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* ELF fixture for test-elf-symtab and test-symbolizer (filled in by those tests' author). */
int main(void) { return 0; }
