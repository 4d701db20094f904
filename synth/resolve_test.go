package synth_test

import (
	"runtime"
	"testing"

	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// Resolve classifies an address by its mapping, gives a file's offset
// as /proc/PID/maps does, and answers with values of its own: a later
// Apply changes neither the mapping nor its build ID.
func TestResolve(t *testing.T) {
	tb := synth.NewTable()
	apply := func(m perfdata.Mmap2) {
		t.Helper()
		m.Pid, m.Tid = 10, 10
		if err := tb.Apply(&synth.Record{Kind: synth.KindLive, Raw: m.Append(nil, 0, nil)}); err != nil {
			t.Fatal(err)
		}
	}
	id := []byte{1, 2, 3, 4}
	apply(perfdata.Mmap2{Addr: 0x400000, Len: 0x2000, Pgoff: 0x1000, Prot: 5, Misc: perfdata.MiscMmapBuildID, BuildID: id, Filename: "/usr/lib/libx.so"})
	apply(perfdata.Mmap2{Addr: 0x500000, Len: 0x1000, Prot: 7, Filename: "//anon"})
	apply(perfdata.Mmap2{Addr: 0x600000, Len: 0x1000, Prot: 3, Filename: "[heap]"})
	apply(perfdata.Mmap2{Addr: 0x7000000, Len: 0x2000, Prot: 5, Filename: "[vdso]"})
	for _, tc := range []struct {
		addr   uint64
		kind   synth.LocationKind
		offset uint64
		path   string
	}{
		{0x400010, synth.LocationFile, 0x1010, "/usr/lib/libx.so"},
		{0x401fff, synth.LocationFile, 0x2fff, "/usr/lib/libx.so"},
		{0x500800, synth.LocationAnon, 0, "//anon"},
		{0x600000, synth.LocationAnon, 0, "[heap]"},
		{0x7001234, synth.LocationVDSO, 0x1234, "[vdso]"},
		{0xffffffff81000000, synth.LocationKernel, 0, ""},
		{0xffffffffc0a00000, synth.LocationKernel, 0, ""}, // a module's, or BPF's
	} {
		loc, ok := tb.Resolve(10, tc.addr)
		if !ok || loc.Kind != tc.kind || loc.Offset != tc.offset || loc.Mapping.Path != tc.path || loc.Addr != tc.addr {
			t.Errorf("%#x: %+v %v; want %v offset %#x in %q", tc.addr, loc, ok, tc.kind, tc.offset, tc.path)
		}
	}
	if loc, ok := tb.Resolve(99, 0xffffffff81000000); !ok || loc.Kind != synth.LocationKernel {
		t.Errorf("a kernel address of a process the table lacks: %+v %v", loc, ok)
	}
	for _, addr := range []uint64{0x3fffff, 0x402000, 0x7fff0000} {
		if loc, ok := tb.Resolve(10, addr); ok {
			t.Errorf("%#x, in no mapping: %+v", addr, loc)
		}
	}
	if loc, ok := tb.Resolve(10, 0xffffffffff600400); runtime.GOARCH == "amd64" &&
		(!ok || loc.Kind != synth.LocationVDSO || loc.Mapping.Path != "[vsyscall]" || loc.Offset != 0x400) {
		t.Errorf("x86-64's vsyscall page: %+v %v", loc, ok)
	}
	if _, ok := tb.Resolve(99, 0x400010); ok {
		t.Error("an address of a process the table lacks resolved")
	}

	// A location is the caller's: neither a change to the table nor to
	// the location reaches the other.
	loc, _ := tb.Resolve(10, 0x400010)
	apply(perfdata.Mmap2{Addr: 0x3ff000, Len: 0x4000, Prot: 5, Filename: "/usr/lib/liby.so"})
	loc.Mapping.BuildID[0] = 0xff
	if loc.Mapping.Path != "/usr/lib/libx.so" || loc.Mapping.Start != 0x400000 {
		t.Errorf("the location changed with the table: %+v", loc)
	}
	if now, _ := tb.Resolve(10, 0x400010); now.Mapping.Path != "/usr/lib/liby.so" || now.Offset != 0x1010 {
		t.Errorf("after the new mapping: %+v", now)
	}
	apply(perfdata.Mmap2{Addr: 0x400000, Len: 0x1000, Prot: 5, Misc: perfdata.MiscMmapBuildID, BuildID: id, Filename: "/usr/lib/libx.so"})
	if now, _ := tb.Resolve(10, 0x400010); now.Mapping.BuildID[0] != 1 {
		t.Errorf("a change to a location's build ID reached the table: %x", now.Mapping.BuildID)
	}
	for k, want := range map[synth.LocationKind]string{synth.LocationFile: "file", synth.LocationKernel: "kernel", 9: "LocationKind(9)"} {
		if k.String() != want {
			t.Errorf("%d: %q, want %q", k, k.String(), want)
		}
	}
}
