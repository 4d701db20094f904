package bpfmethod

import (
	"testing"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/testenv"
)

// A dump creates no map that only the unmap programs use; the first of
// them to load creates it, and the others share it.
func TestLazyMaps(t *testing.T) {
	testenv.Root(t)
	o, err := loadObjects()
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if o.UnmapCalls != nil {
		t.Fatal("unmap_calls created before an unmap program loads")
	}
	for _, h := range unmapHooks {
		p, err := o.program(h.prog)
		if err != nil {
			t.Fatalf("%s: %v", h.prog, err)
		}
		if o.UnmapCalls == nil {
			t.Fatalf("%s loaded without unmap_calls", h.prog)
		}
		want, err := o.UnmapCalls.Info()
		if err != nil {
			t.Fatal(err)
		}
		wantID, _ := want.ID()
		info, err := p.Info()
		if err != nil {
			t.Fatal(err)
		}
		ids, _ := info.MapIDs()
		found := false
		for _, id := range ids {
			found = found || id == wantID
		}
		if !found {
			t.Errorf("%s uses maps %v, not unmap_calls (%d)", h.prog, ids, wantID)
		}
	}
	if o.shared[synthbpf.SynthMapUnmapCalls] != o.UnmapCalls {
		t.Error("unmap_calls is not shared")
	}
}
