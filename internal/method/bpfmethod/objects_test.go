package bpfmethod

import (
	"testing"

	"github.com/cilium/ebpf"
	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/testenv"
)

// A dump creates no map that only the unmap programs use (unmap_calls,
// and unmap_events, their rings' array); the first of them to load
// creates them, and the others share them.
func TestLazyMaps(t *testing.T) {
	testenv.Root(t)
	o, err := loadObjects("")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if o.UnmapCalls != nil || o.UnmapEvents != nil {
		t.Fatal("unmap_calls or unmap_events created before an unmap program loads")
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
	if o.UnmapEvents == nil || o.shared[synthbpf.SynthMapUnmapEvents] != o.UnmapEvents {
		t.Error("unmap_events is not created or not shared")
	}
}

// A program's load creates no map: cilium/ebpf creates every map of the
// collection it loads that has no replacement, and a load that handed
// it the whole object's maps created (and dropped) unmap_calls, an LRU
// hash the kernel preallocates, at every program. Map IDs are taken in
// order, so a map made just before the load and one just after are one
// ID apart when the load made none. Other processes (other packages'
// tests) may make maps meanwhile: one try of several without a gap is
// enough.
func TestLoadMakesNoMap(t *testing.T) {
	testenv.Root(t)
	mapID := func() ebpf.MapID {
		m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		info, err := m.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := info.ID()
		return id
	}
	var gaps []ebpf.MapID
	for range 20 {
		o, err := loadObjects("")
		if err != nil {
			t.Fatal(err)
		}
		before := mapID()
		_, err = o.program(synthbpf.SynthProgDumpTask)
		after := mapID()
		o.Close()
		if err != nil {
			t.Fatal(err)
		}
		if after == before+1 {
			return
		}
		gaps = append(gaps, after-before-1)
	}
	t.Errorf("every load of dump_task made maps: %v between the maps around it", gaps)
}
