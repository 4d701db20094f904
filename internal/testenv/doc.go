// Package testenv holds the test helpers that decide whether a test that
// needs the real machine (root, BPF, perf) runs, skips or fails.
//
// Such a test may skip only when what it needs is missing. When the
// environment variable SYNTH_REQUIRE is 1 (make test sets it), a missing
// requirement fails the test instead, so CI cannot pass by skipping.
package testenv
