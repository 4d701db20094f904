package synth_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/perftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// testPrograms loads BPF programs for the test to find in the dumps:
// synth's own collection (BTF, programs of several functions) and a
// socket filter without BTF. It returns their ids and the addresses of
// their functions, as the kernel reports them to cilium/ebpf.
func testPrograms(t *testing.T) (ids map[uint32]bool, addrs map[uint64]bool) {
	t.Helper()
	// The programs every kernel synth runs on loads (the maple walk's
	// dump_tasks does not load everywhere).
	var objs struct {
		DumpTask *ebpf.Program `ebpf:"dump_task"`
		DumpVma  *ebpf.Program `ebpf:"dump_vma"`
		Probe    *ebpf.Program `ebpf:"probe"`
	}
	spec, err := bpf.LoadSynth()
	if err != nil {
		t.Fatal(err)
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		t.Fatalf("load synth's programs: %v", err)
	}
	t.Cleanup(func() { objs.DumpTask.Close(); objs.DumpVma.Close(); objs.Probe.Close() })
	plain, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "synth_nobtf", Type: ebpf.SocketFilter, License: "MIT",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		t.Fatalf("load a socket filter: %v", err)
	}
	t.Cleanup(func() { plain.Close() })
	ids, addrs = make(map[uint32]bool), make(map[uint64]bool)
	for _, p := range []*ebpf.Program{objs.DumpTask, objs.DumpVma, objs.Probe, plain} {
		info, err := p.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := info.ID()
		ids[uint32(id)] = true
		ksyms, ok := info.JitedKsymAddrs()
		if !ok || len(ksyms) == 0 {
			t.Fatalf("program %d: the kernel shows no function addresses", id)
		}
		for _, a := range ksyms {
			addrs[uint64(a)] = true
		}
	}
	return ids, addrs
}

// bpfRecords returns the kernel's maps (MMAP records of pid -1: text,
// entry trampolines, modules), then the KSYMBOL records of addrs and the
// BPF_EVENT records of ids in a file, without their trailers, in file
// order.
func bpfRecords(t *testing.T, path string, ids map[uint32]bool, addrs map[uint64]bool) [][]byte {
	t.Helper()
	var out [][]byte
	for _, rec := range perftest.ReadRecords(t, path) {
		if rec.Type != perfdata.RecordKsymbol && rec.Type != perfdata.RecordBPFEvent && rec.Type != perfdata.RecordMmap {
			continue
		}
		b := untrailed(rec)
		if rec.Type == perfdata.RecordMmap {
			b = zeroNamePadding(b)
		}
		switch {
		case rec.Type == perfdata.RecordMmap && binary.NativeEndian.Uint32(b[8:]) == ^uint32(0),
			rec.Type == perfdata.RecordKsymbol && addrs[binary.NativeEndian.Uint64(b[8:])],
			rec.Type == perfdata.RecordBPFEvent && ids[binary.NativeEndian.Uint32(b[12:])]:
			out = append(out, b)
		}
	}
	return out
}

// bpfHeader returns what perf report --header-only shows of the
// programs ids (# bpf_prog_info lines and their sub_prog lines), whether
// the attr asks for BPF_EVENT records, and the BTF ids listed.
func bpfHeader(t *testing.T, path string, ids map[uint32]bool) (progs []string, bpfEvent bool, btfs []string) {
	t.Helper()
	r := perftest.Run(t, perftest.Command(t, "report", "--header-only", "-I", "-i", path))
	if r.Code != 0 {
		t.Fatalf("perf report --header-only %s: exit %d: %s", path, r.Code, r.Stderr)
	}
	head := regexp.MustCompile(`^# bpf_prog_info (\d+):`)
	var in bool
	for _, line := range strings.Split(r.Stdout, "\n") {
		if m := head.FindStringSubmatch(line); m != nil {
			var id uint32
			fmt.Sscan(m[1], &id)
			in = ids[id]
		} else if !strings.HasPrefix(line, "# \tsub_prog") {
			in = false
		}
		if in {
			progs = append(progs, line)
		}
		if strings.HasPrefix(line, "# event :") && strings.Contains(line, "bpf_event = 1") {
			bpfEvent = true
		}
		if strings.HasPrefix(line, "# btf info of id") {
			btfs = append(btfs, line)
		}
	}
	return progs, bpfEvent, btfs
}

// The kernel's maps, and the KSYMBOL and BPF_EVENT records of loaded
// programs equal perf's own,
// field by field (all but the trailer), and so does what perf report
// shows of HEADER_BPF_PROG_INFO: perf record -a against WritePerfData,
// with and without Options.NoBPFEvent (perf's --no-bpf-event), with the
// BPF and a /proc method.
func TestBPFEventsMatchPerf(t *testing.T) {
	testenv.Root(t)
	testenv.Perf(t)
	ids, addrs := testPrograms(t)
	dir := t.TempDir()
	for _, noBPFEvent := range []bool{false, true} {
		var flags []string
		if noBPFEvent {
			flags = []string{"--no-bpf-event"}
		}
		perfOut := filepath.Join(dir, "perf.data")
		perftest.RecordHost(t, perfOut, flags...)
		want := bpfRecords(t, perfOut, ids, addrs)
		wantProgs, wantEvent, _ := bpfHeader(t, perfOut, ids)
		events := len(ids)
		if len(flags) > 0 {
			events = 0
		}
		maps := 0 // the kernel text and its modules
		for _, rec := range want {
			if perfdata.RecordView(rec).Type() == perfdata.RecordMmap {
				maps++
			}
		}
		if maps != 1+loadedModules(t) || len(want)-maps != len(addrs)+events {
			t.Fatalf("perf %v wrote %d records of %d functions of %d programs, %d maps of the kernel and modules",
				flags, len(want), len(addrs), len(ids), maps)
		}
		for _, method := range []synth.MethodName{synth.MethodBPF, synth.MethodProcmaps} {
			t.Run(strings.Join(append([]string{method.String()}, flags...), ""), func(t *testing.T) {
				out := filepath.Join(dir, method.String()+".data")
				writeDump(t, out, method, synth.MethodOptions{Options: synth.Options{NoBPFEvent: noBPFEvent}})
				got := bpfRecords(t, out, ids, addrs)
				if !slices.EqualFunc(got, want, bytes.Equal) {
					t.Errorf("records differ:\n synth %x\n perf  %x", got, want)
				}
				gotProgs, gotEvent, btfs := bpfHeader(t, out, ids)
				if !slices.Equal(gotProgs, wantProgs) {
					t.Errorf("bpf_prog_info:\n synth %q\n perf  %q", gotProgs, wantProgs)
				}
				if gotEvent != wantEvent {
					t.Errorf("attr bpf_event %v, perf's %v", gotEvent, wantEvent)
				}
				if len(flags) == 0 && (len(gotProgs) < len(ids) || len(btfs) == 0) {
					t.Errorf("header lists %d lines of %d programs, %d BTFs", len(gotProgs), len(ids), len(btfs))
				}
			})
		}
	}
}

// zeroNamePadding returns an MMAP record with the bytes after its file
// name's NUL zeroed: perf 6.1 leaves there what an earlier, longer name
// of a module map left in its buffer; synth writes zeros.
func zeroNamePadding(rec []byte) []byte {
	const nameOff = 40 // header, pid, tid, addr, len, pgoff
	rec = slices.Clone(rec)
	if i := bytes.IndexByte(rec[min(nameOff, len(rec)):], 0); i >= 0 {
		clear(rec[nameOff+i:])
	}
	return rec
}
