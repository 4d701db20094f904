//go:build !linux

package perfdata

import "testing"

// perfRun skips: perf runs on Linux only. The tests that need no perf
// run on every system.
func perfRun(t *testing.T, stdin []byte, args ...string) string {
	t.Skip("perf runs on Linux only")
	return ""
}
