package bench

import (
	"context"
	"io"
	"os"
	"slices"
	"testing"

	"github.com/synth-dev/synth/cmd/synth/internal/bench/floor"
	"github.com/synth-dev/synth/internal/testenv"
)

// This test binary, re-executed by a floor row, runs that floor.
func TestMain(m *testing.M) {
	floor.Main()
	os.Exit(m.Run())
}

// The floor rows run each walk's floor in a process of its own (here
// the test binary, re-executed) and read its summary as a dump's.
func TestFloorRows(t *testing.T) {
	testenv.Root(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Synth: self, Skip: Unavailable(io.Discard)}
	for _, m := range c.floors() {
		t.Run(m.name, func(t *testing.T) {
			if slices.Contains(c.Skip, m.name) {
				t.Skipf("%s: the maple walk cannot prove itself here", m.name)
			}
			r, err := runOnce(context.Background(), m)
			if err != nil {
				t.Fatal(err)
			}
			if r.mappings == 0 || r.records != 0 || r.d <= 0 {
				t.Errorf("%s: %d mappings, %d records in %v; want some mappings, no record", m.name, r.mappings, r.records, r.d)
			}
		})
	}
}
