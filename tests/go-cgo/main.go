// SPDX-License-Identifier: LGPL-2.1-or-later

// The cgo test workload: main.main spends its time half in a frameless Go
// leaf (main.goLeaf) and half in a C leaf (c_leaf) it calls through cgo:
// main.main -> main._Cfunc_c_leaf -> runtime.cgocall ->
// runtime.asmcgocall (which moves to the g0 stack) -> the C wrapper ->
// c_leaf. Go functions are unwound with .gopclntab, the C code with
// .eh_frame; the stack switch of asmcgocall is followed by rbp.
//
// Usage: cgprof-go-cgo-workload [--seconds N]; prints "ready" once running.
package main

/*
#include <stdint.h>

__attribute__((noinline)) static uint64_t c_leaf(uint64_t x, int n) {
	for (int i = 0; i < n; i++)
		x = (x * 6364136223846793005ULL + 1442695040888963407ULL) ^ (x >> 29);
	return x;
}
*/
import "C"

import (
	"flag"
	"fmt"
	"os"
	"time"
)

// Work units per call: a cgo call costs ~100 ns, a unit a few ns.
const unit = 4000

var sink uint64

//go:noinline
func goLeaf(x uint64, n int) uint64 {
	for i := 0; i < n; i++ {
		x = (x*6364136223846793005 + 1442695040888963407) ^ (x >> 29)
	}
	return x
}

func main() {
	seconds := flag.Float64("seconds", 5, "how long to run")
	flag.Parse()

	fmt.Println("ready")
	os.Stdout.Sync()
	end := time.Now().Add(time.Duration(*seconds * float64(time.Second)))
	for time.Now().Before(end) {
		sink = goLeaf(sink, unit)
		sink = uint64(C.c_leaf(C.uint64_t(sink), unit))
	}
}
