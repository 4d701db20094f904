package synth

import (
	"bytes"
	"testing"

	"github.com/synth-dev/synth/perfdata"
)

// TestBuildIDTableNames checks that the table's shortcut for a name
// repeated from the record before does not swallow a different name that
// merely starts with it, and that a repeated name keeps its first ID.
func TestBuildIDTableNames(t *testing.T) {
	st := uint64(perfdata.SampleTID | perfdata.SampleIdentifier)
	sid := &perfdata.SampleID{Pid: 1, Tid: 1, Identifier: 7}
	rec := func(name string, id byte) []byte {
		m := perfdata.Mmap2{Pid: 1, Tid: 1, Addr: 0x1000, Len: 0x1000,
			BuildID: bytes.Repeat([]byte{id}, 20), Filename: name}
		return m.Append(nil, st, sid)
	}
	var table buildIDTable
	for _, r := range [][]byte{
		rec("/lib/a", 1), rec("/lib/a", 9), // the same file again
		rec("/lib/ab", 2), // starts with the name before
		rec("/lib/a", 9), rec("/lib/abcdefgh", 3),
	} {
		table.add(r)
	}
	want := map[string]byte{"/lib/a": 1, "/lib/ab": 2, "/lib/abcdefgh": 3}
	if len(table.ids) != len(want) {
		t.Fatalf("table has %d names, want %d: %v", len(table.ids), len(want), table.ids)
	}
	for name, id := range want {
		if got := table.ids[name]; !bytes.Equal(got, bytes.Repeat([]byte{id}, 20)) {
			t.Errorf("%s: build ID %x, want 20 bytes of %02x", name, got, id)
		}
	}
}
