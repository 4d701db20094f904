package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Keep copies a file to a directory of its own, outside the test's, and
// says where.
func TestKeep(t *testing.T) {
	path := filepath.Join(t.TempDir(), "perf.data")
	if err := os.WriteFile(path, []byte("PERFILE2"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, got := range []string{Keep(path), KeepData("perf.data", []byte("PERFILE2"))} {
		kept, ok := strings.CutPrefix(got, "kept as ")
		if !ok || !strings.Contains(kept, "synth-perf-fail-") || filepath.Base(kept) != "perf.data" {
			t.Fatalf("Keep: %q", got)
		}
		if b, err := os.ReadFile(kept); err != nil || string(b) != "PERFILE2" {
			t.Errorf("kept %q: %v", b, err)
		}
		os.RemoveAll(filepath.Dir(kept))
	}
	if got := Keep(filepath.Join(t.TempDir(), "none")); !strings.HasPrefix(got, "not kept: ") {
		t.Errorf("Keep of a missing file: %q", got)
	}
}
