// Package testenv holds the test helpers that decide whether a test that
// needs the real machine (root, BPF, perf) runs, skips or fails.
//
// Such a test may skip only when what it needs is missing. When the
// environment variable SYNTH_REQUIRE is 1 (make test sets it), a missing
// requirement fails the test instead, so CI cannot pass by skipping.
package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// Required reports whether missing requirements fail tests.
func Required() bool { return os.Getenv("SYNTH_REQUIRE") == "1" }

// Need skips or fails t, by Required, when ok is false.
func Need(t testing.TB, ok bool, what string) {
	t.Helper()
	if ok {
		return
	}
	if Required() {
		t.Fatalf("SYNTH_REQUIRE=1 and %s", what)
	}
	t.Skip(what)
}

// Root requires that the test runs as root.
func Root(t testing.TB) {
	t.Helper()
	Need(t, os.Geteuid() == 0, "test needs root")
}

// Perf returns the path of the perf tool, or skips or fails t.
func Perf(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("perf")
	Need(t, err == nil, "perf is not installed")
	return p
}
