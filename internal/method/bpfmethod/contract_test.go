package bpfmethod

import (
	"fmt"
	"testing"
	"unsafe"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/perfdata"
)

// The reader takes the programs' constants and layouts from bpf2go's
// output, which TestGeneratedUpToDate (package bpf) ties to the C; what
// is left to tie is the C to perf's layouts, which perfdata reads the
// records with once their synth_hdr is cut off: struct synth_mmap2 must
// be PERF_RECORD_MMAP2's layout (include/uapi/linux/perf_event.h), struct
// synth_unmap must fit a RecordView, and the synth-private types must be
// none of perf's.
func TestContract(t *testing.T) {
	var m synthbpf.SynthSynthMmap2
	body := func(off uintptr) int { return int(off) - hdrSize }
	for _, f := range []struct {
		name      string
		got, want int
	}{
		{"synth_hdr", hdrSize, 24},
		{"mmap2 pid", body(unsafe.Offsetof(m.Pid)), 8},
		{"mmap2 addr", body(unsafe.Offsetof(m.Addr)), 16},
		{"mmap2 pgoff", body(unsafe.Offsetof(m.Pgoff)), 32},
		{"mmap2 maj/min/ino", body(unsafe.Offsetof(m.U)), 40},
		{"mmap2 prot", body(unsafe.Offsetof(m.Prot)), 64},
		{"mmap2 filename", body(unsafe.Offsetof(m.Filename)), 72},
		{"mmap2 filename size", len(m.Filename), int(synthbpf.SynthSynthLimitSYNTH_PATH_MAX)},
		{"unmap pid", body(unsafe.Offsetof(synthbpf.SynthSynthUnmap{}.Pid)), 8},
		{"unmap size", UnmapSize, 56},
	} {
		if f.got != f.want {
			t.Errorf("%s at %d, want %d", f.name, f.got, f.want)
		}
	}
	for _, typ := range []perfdata.RecordType{recordWalk, recordMmap2Next, recordPending, RecordUnmap} {
		if typ.String() != fmt.Sprintf("RecordType(%d)", uint32(typ)) {
			t.Errorf("record type %#x is perf's %s", uint32(typ), typ)
		}
	}
}

// The object a dump loads carries no global of a benchmark (the floor
// is an object of its own, in cmd/synth/internal/bench/floor, whose
// tests check that the dump's has none of its programs) and nothing for
// tests: their faults are made in userspace (fault.go).
func TestNoFloorInDumpObject(t *testing.T) {
	spec, err := synthbpf.LoadSynth()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"walked", "fail_tgid", "walks_invalid"} {
		if _, ok := spec.Variables[name]; ok {
			t.Errorf("the dump's object has the global %s, of a benchmark or a test", name)
		}
	}
}
