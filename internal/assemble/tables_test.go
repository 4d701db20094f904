package assemble

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/synth-dev/synth/perfdata"
)

// TestTablesNames checks that the Tables' shortcut for a name
// repeated from the record before does not swallow a different name that
// merely starts with it, and that a repeated name keeps its first ID.
func TestTablesNames(t *testing.T) {
	st := uint64(perfdata.SampleTID | perfdata.SampleIdentifier)
	sid := &perfdata.SampleID{Pid: 1, Tid: 1, Identifier: 7}
	rec := func(name string, id byte) []byte {
		m := perfdata.Mmap2{Pid: 1, Tid: 1, Addr: 0x1000, Len: 0x1000,
			BuildID: bytes.Repeat([]byte{id}, 20), Filename: name}
		return m.Append(nil, st, sid)
	}
	var table Tables
	for _, r := range [][]byte{
		rec("/lib/a", 1), rec("/lib/a", 9), // the same file again
		rec("/lib/ab", 2), // starts with the name before
		rec("/lib/a", 9), rec("/lib/abcdefgh", 3),
	} {
		table.Add(r)
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

// Module maps (kernel MMAP records) list their modules' build IDs, read
// from /sys/module/NAME/notes, under the map's name, misc KERNEL, in map
// order; the kernel text map and a module without notes list none.
func TestTablesModules(t *testing.T) {
	sys := t.TempDir()
	id := bytes.Repeat([]byte{0xab}, 20)
	// An ELF note: namesz 4, descsz 20, type NT_GNU_BUILD_ID, "GNU\0".
	note := binary.NativeEndian.AppendUint32(nil, 4)
	note = binary.NativeEndian.AppendUint32(note, 20)
	note = binary.NativeEndian.AppendUint32(note, 3)
	note = append(append(note, "GNU\x00"...), id...)
	dir := filepath.Join(sys, "nf_conntrack", "notes")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".note.gnu.build-id"), note, 0o444); err != nil {
		t.Fatal(err)
	}
	var table Tables
	path := "/lib/modules/6.1.0/kernel/net/nf-conntrack.ko.xz"
	for _, name := range []string{"[kernel.kallsyms]_text", path, "[crc16]"} {
		m := perfdata.Mmap{Misc: perfdata.MiscKernel, Pid: ^uint32(0), Addr: 0xffffffffc0000000, Len: 4096, Filename: name}
		table.Add(m.Append(nil, perfdata.SampleTID, &perfdata.SampleID{Pid: ^uint32(0)}))
	}
	evs := table.moduleEvents(sys)
	if len(evs) != 1 || evs[0].Filename != path || evs[0].Misc != perfdata.MiscKernel || !bytes.Equal(evs[0].BuildID, id) {
		t.Errorf("module build IDs %+v, want %x for %s", evs, id, path)
	}
}
