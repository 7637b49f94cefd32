// SPDX-License-Identifier: LGPL-2.1-or-later

// The Go test workload: like tests/workload.c, it spends its CPU time in
// three functions in a 5:3:2 ratio, main.goAlpha, main.goBeta and
// main.goGamma, called from main.main. Built stripped (-ldflags=-s -w), as
// Go programs ship, its only symbols are its .gopclntab.
//
// main.gammaStep is small enough for the compiler to inline into
// main.goGamma ("go build -gcflags=-m": "can inline gammaStep", "inlining
// call to gammaStep"), so goGamma's samples fall in code whose inline tree
// names gammaStep, at the line marked LINE:gammaStep, called from the line
// marked LINE:gammaCall. test-gopclntab and test_go_symbols.py find those
// lines by their markers.
//
// Usage: cgprof-go-workload [--seconds N] [--leaves]; prints "ready" once
// running.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

// Work units per round: 5:3:2, about 10 µs a round, far shorter than a
// sampling period (~1 ms at 999 Hz): with a round of about a millisecond
// the samples could lock in step with the rounds on a steady CPU, and
// goBeta got 35.8 % instead of 30 % (as tests/workload.c's cycle did).
const unit = 400

var sink uint64

// keep makes the hot functions call something: a Go function that calls
// nothing has no frame of its own (no frame pointer pushed), and a
// frame-pointer walk from inside it skips its caller, as for C.
//
//go:noinline
func keep(x uint64) uint64 {
	return x
}

func gammaStep(x uint64) uint64 {
	return (x*6364136223846793005 + 1442695040888963407) ^ (x >> 29) // LINE:gammaStep
}

//go:noinline
func goAlpha(n int) uint64 {
	x := sink
	for i := 0; i < n; i++ {
		x = (x*6364136223846793005 + 1442695040888963407) ^ (x >> 29) // LINE:goAlpha
	}
	return keep(x)
}

//go:noinline
func goBeta(n int) uint64 {
	x := sink
	for i := 0; i < n; i++ {
		x = (x*6364136223846793005 + 1442695040888963407) ^ (x >> 29) // LINE:goBeta
	}
	return keep(x)
}

//go:noinline
func goGamma(n int) uint64 {
	x := sink
	for i := 0; i < n; i++ {
		x = gammaStep(x) // LINE:gammaCall
	}
	return keep(x)
}

// The frameless leaves (--leaves): the same work, but calling nothing,
// so the compiler gives them no frame ("go build -gcflags=-S": "leaf",
// locals=0x0, no SUBQ/PUSHQ): no frame pointer of their own, the stack
// pointer where the call left it. A frame-pointer walk from inside them
// skips their caller; .gopclntab's pcsp (delta 0 throughout) does not.
//
//go:noinline
func leafAlpha(x uint64, n int) uint64 {
	for i := 0; i < n; i++ {
		x = (x*6364136223846793005 + 1442695040888963407) ^ (x >> 29) // LINE:leafAlpha
	}
	return x
}

//go:noinline
func leafBeta(x uint64, n int) uint64 {
	for i := 0; i < n; i++ {
		x = (x*6364136223846793005 + 1442695040888963407) ^ (x >> 29)
	}
	return x
}

//go:noinline
func leafGamma(x uint64, n int) uint64 {
	for i := 0; i < n; i++ {
		x = (x*6364136223846793005 + 1442695040888963407) ^ (x >> 29)
	}
	return x
}

func main() {
	seconds := flag.Float64("seconds", 5, "how long to run")
	leaves := flag.Bool("leaves", false, "spend the time in the frameless leaves leafAlpha, leafBeta, leafGamma (5:3:2)")
	flag.Parse()

	fmt.Println("ready")
	os.Stdout.Sync()
	end := time.Now().Add(time.Duration(*seconds * float64(time.Second)))
	for *leaves && time.Now().Before(end) {
		sink = leafAlpha(sink, 5*unit)
		sink = leafBeta(sink, 3*unit)
		sink = leafGamma(sink, 2*unit)
	}
	for !*leaves && time.Now().Before(end) {
		sink += goAlpha(5 * unit) // LINE:alphaCall
		sink += goBeta(3 * unit)
		sink += goGamma(2 * unit)
	}
}
