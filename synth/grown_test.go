package synth_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/perfring"
	"github.com/synth-dev/synth/internal/perftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// The kernel adds each event's sample_id size to the header.size of a
// KSYMBOL or BPF_EVENT record it shares among them, newest event first,
// and never takes it back (perf_event_ksymbol_output(),
// perf_event_bpf_output()): an event opened after a session's rings that
// hears them (another synth, a perf record) makes the session's records
// longer than they are, their trailer no longer at their end, and perf
// 6.1 refuses the file ("failed to process type: 17 [Bad address]").

// growerSampleType is the trailer of the newer events: 48 bytes, which
// the kernel adds to every KSYMBOL and BPF_EVENT older events get.
const growerSampleType = perfdata.SampleTID | perfdata.SampleTime | perfdata.SampleTypeID |
	perfdata.SampleStreamID | perfdata.SampleCPU | perfdata.SampleIdentifier

// witnessSampleType is the trailer of the witness events (openGrowers).
const witnessSampleType = perfdata.SampleTID | perfdata.SampleTime

// openGrowers opens, on every CPU, a witness event, then a side-band
// event that hears KSYMBOL and BPF_EVENT with a large trailer, as
// another profiler started after the session would. It returns the
// witnesses, older than the growers, for kernelGrows.
func openGrowers(t *testing.T) []*perfring.Event {
	t.Helper()
	witnesses := openListeners(t, witnessSampleType)
	openListeners(t, growerSampleType)
	return witnesses
}

// openListeners opens on every CPU an event that hears KSYMBOL and
// BPF_EVENT with trailers of sample type st, its ring mapped.
func openListeners(t *testing.T, st uint64) []*perfring.Event {
	t.Helper()
	cpus, err := perfring.OnlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	a := perfdata.Attr{Type: perfdata.TypeSoftware, Size: perfdata.AttrSize, Config: perfdata.CountSWDummy,
		SamplePeriod: 1, SampleType: st,
		Flags: perfdata.AttrKsymbol | perfdata.AttrBPFEvent | perfdata.AttrSampleIDAll}
	var evs []*perfring.Event
	for _, cpu := range cpus {
		ev, err := perfring.Open(&a, -1, cpu)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ev.Close() })
		if err := ev.MapRing(8); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	return evs
}

// skipUnlessGrown skips t unless the kernel grew the KSYMBOL of addr
// that the witnesses heard: on a kernel whose
// perf_event_ksymbol_output() restores the size there is nothing to cut.
func skipUnlessGrown(t *testing.T, witnesses []*perfring.Event, addr uint64) {
	t.Helper()
	found, grown := false, false
	for _, ev := range witnesses {
		err := ev.Ring().ReadAll(func(rec []byte) error {
			if perfdata.RecordView(rec).Type() != perfdata.RecordKsymbol || !ofFilter(rec, 0, addr) {
				return nil
			}
			n, err := perfdata.TrueSize(rec, witnessSampleType)
			found, grown = true, grown || err == nil && n < len(rec)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if !found {
		t.Fatal("the witness events heard no KSYMBOL of the program")
	}
	if !grown {
		t.Skip("the kernel did not grow an older event's KSYMBOL: perf_event_ksymbol_output() is fixed here")
	}
}

// loadFilter loads a socket filter, which the kernel announces with a
// KSYMBOL and a BPF_EVENT, and returns its id and address.
func loadFilter(t *testing.T) (id uint32, addr uint64) {
	t.Helper()
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "synth_grown", Type: ebpf.SocketFilter, License: "MIT",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}})
	if err != nil {
		t.Fatalf("load a socket filter: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := info.ID()
	ksyms, ok := info.JitedKsymAddrs()
	if !ok || len(ksyms) != 1 {
		t.Fatalf("program %d: the kernel shows %d function addresses", pid, len(ksyms))
	}
	return uint32(pid), uint64(ksyms[0])
}

// ofFilter reports whether rec is the KSYMBOL of addr or the BPF_EVENT
// of id.
func ofFilter(rec []byte, id uint32, addr uint64) bool {
	switch perfdata.RecordView(rec).Type() {
	case perfdata.RecordKsymbol:
		return len(rec) >= 16 && binary.NativeEndian.Uint64(rec[8:]) == addr
	case perfdata.RecordBPFEvent:
		return len(rec) >= 16 && binary.NativeEndian.Uint32(rec[12:]) == id
	}
	return false
}

// checkTrueSize fails t unless rec is of its true size, and returns its
// trailer, of sample type st, read at its end.
func checkTrueSize(t *testing.T, rec []byte, st uint64) perfdata.SampleID {
	t.Helper()
	typ := perfdata.RecordView(rec).Type()
	n, err := perfdata.TrueSize(rec, st)
	if err != nil || n != len(rec) {
		t.Errorf("%s of %d bytes, true size %d (%v)", typ, len(rec), n, err)
	}
	sid, err := perfdata.ParseSampleID(rec, st)
	if err != nil {
		t.Errorf("%s trailer: %v", typ, err)
	}
	return sid
}

// ofThisProcess counts the KSYMBOL and BPF_EVENT records of the filter
// id at addr, each checked by checkTrueSize, whose trailer names this
// process: the kernel's, not a dump's (whose trailer is zero).
func ofThisProcess(t *testing.T, recs []perftest.Record, id uint32, addr uint64) int {
	t.Helper()
	n := 0
	for _, rec := range recs {
		if ofFilter(rec.Data, id, addr) && checkTrueSize(t, rec.Data, rec.SampleType).Pid == uint32(os.Getpid()) {
			n++
		}
	}
	return n
}

// A session's KSYMBOL and BPF_EVENT records of a program loaded while a
// newer event hears them are of their true size, their trailer at their
// end.
func TestSessionTrimsGrownRecords(t *testing.T) {
	s := openSession(t, synth.SessionOptions{})
	witnesses := openGrowers(t) // newer
	id, addr := loadFilter(t)
	skipUnlessGrown(t, witnesses, addr)
	st := s.Attrs()[0].Attr.SampleType
	seen := 0
	readFlushed(t, s, func(r *synth.Record) {
		if r.Kind == synth.KindLive && ofFilter(r.Raw, id, addr) && checkTrueSize(t, r.Raw, st).Pid == uint32(os.Getpid()) {
			seen++
		}
	})
	if seen != 2 {
		t.Fatalf("the session streamed %d of the program's KSYMBOL and BPF_EVENT, want 2", seen)
	}
	if g := s.Stats().Grown; g < 2 {
		t.Errorf("Stats().Grown = %d, want at least the program's 2", g)
	}
}

// A profile of the host during which a program loads, with a newer event
// hearing its KSYMBOL and BPF_EVENT, is read whole by perf script and
// perf report, and holds the records at their true size.
func TestProfileGrownRecordsPerfReads(t *testing.T) {
	testenv.Root(t)
	testenv.Perf(t)
	path := filepath.Join(t.TempDir(), "perf.data")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var id uint32
	var addr uint64
	var witnesses []*perfring.Event
	opts := synth.ProfileOptions{Sampling: func() {
		witnesses = openGrowers(t)
		id, addr = loadFilter(t)
		cancel()
	}}
	st, err := synth.Profile(ctx, opts, f, synth.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	skipUnlessGrown(t, witnesses, addr)
	if st.Session.Grown < 2 {
		t.Errorf("Session.Grown = %d, want at least the program's 2", st.Session.Grown)
	}
	if seen := ofThisProcess(t, perftest.ReadRecords(t, path), id, addr); seen != 2 {
		t.Errorf("the file holds %d of the program's KSYMBOL and BPF_EVENT of the kernel, want 2", seen)
	}
	for _, args := range [][]string{{"script"}, {"report", "--stdio"}} {
		r := perftest.Run(t, perftest.Command(t, append(args, "-i", path)...))
		if r.Code != 0 || strings.Contains(r.Stderr, "failed to process") {
			t.Errorf("perf %s: exit %d: %s (%s)", args[0], r.Code, clip(r.Stderr), testenv.Keep(path))
		}
	}
}

// perf record's KSYMBOL and BPF_EVENT records of a program loaded while
// a newer event hears them are grown in perf's own stream: the kernel
// bug hits perf as it hits synth. Inject cuts them to their true size,
// with the trailer of perf's attr, and perf report reads the output.
func TestInjectTrimsGrownRecords(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	dir := t.TempDir()
	ready, hold := filepath.Join(dir, "ready"), filepath.Join(dir, "hold")
	for _, p := range []string{ready, hold} {
		if err := unix.Mkfifo(p, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// perf starts its workload once its events are enabled: the
	// workload's line on ready says they are.
	cmd := exec.Command(perf, "record", "-q", "-a", "-k", "CLOCK_MONOTONIC", "-o", "-", "--",
		"sh", "-c", "echo > "+ready+"; read x < "+hold)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stream, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stream, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	release := func() {
		if f, err := os.OpenFile(hold, os.O_WRONLY, 0); err == nil {
			f.WriteString("\n")
			f.Close()
		}
	}
	if _, err := os.ReadFile(ready); err != nil {
		cmd.Process.Kill()
		t.Fatal(err)
	}
	witnesses := openGrowers(t) // newer than perf's events
	id, addr := loadFilter(t)
	release()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, stderr.String())
	}
	skipUnlessGrown(t, witnesses, addr)
	path, st := injectAndReport(t, perf, stream.Bytes())
	if st.Grown < 2 {
		t.Errorf("InjectStats.Grown = %d, want at least the program's 2", st.Grown)
	}
	if seen := ofThisProcess(t, perftest.ReadRecords(t, path), id, addr); seen != 2 {
		t.Errorf("the output holds %d of the program's KSYMBOL and BPF_EVENT of the kernel, want 2 (%s)", seen, testenv.Keep(path))
	}
}

// ownPrograms returns the ids of the BPF programs this process holds
// open, from /proc/self/fdinfo.
func ownPrograms(t *testing.T) map[uint32]bool {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	ids := map[uint32]bool{}
	for _, fd := range fds {
		link, _ := os.Readlink("/proc/self/fd/" + fd.Name())
		if link != "anon_inode:bpf-prog" {
			continue
		}
		info, _ := os.ReadFile("/proc/self/fdinfo/" + fd.Name())
		for _, line := range strings.Split(string(info), "\n") {
			var id uint32
			if _, err := fmt.Sscanf(line, "prog_id:\t%d", &id); err == nil {
				ids[id] = true
			}
		}
	}
	return ids
}

// A session loads its programs before its side-band opens: the kernel
// grows the KSYMBOL and BPF_EVENT records of every older listener (a
// perf record started before synth) by each newer one's trailer, so the
// side-band, open while they loaded, grew the records of synth's loads
// that perf got. The side-band then hears none of them, and the dump
// lists them, as it lists every loaded program.
func TestSessionLoadsBeforeSideband(t *testing.T) {
	s := openSession(t, synth.SessionOptions{})
	own := ownPrograms(t)
	if len(own) == 0 {
		t.Fatal("the session holds no BPF program open")
	}
	heard := 0
	readFlushed(t, s, func(r *synth.Record) {
		if r.Kind != synth.KindLive || r.Type() != perfdata.RecordBPFEvent {
			return
		}
		if e, _, err := perfdata.ParseBPFEvent(r.Raw, s.Attrs()[0].Attr.SampleType); err == nil && own[e.ID] {
			heard++
		}
	})
	if heard > 0 {
		t.Errorf("the side-band heard %d of the session's %d programs load", heard, len(own))
	}
	if err := s.Dump(context.Background()); err != nil {
		t.Fatal(err)
	}
	listed := 0
	var rec synth.Record
	for rec.Kind != synth.KindDumpEnd {
		if err := s.Read(&rec); err != nil {
			t.Fatal(err)
		}
		if rec.Kind == synth.KindSynthesized && rec.Type() == perfdata.RecordBPFEvent {
			if e, _, err := perfdata.ParseBPFEvent(rec.Raw, s.Attrs()[0].Attr.SampleType); err == nil && own[e.ID] {
				listed++
			}
		}
	}
	if listed != len(own) {
		t.Errorf("the dump lists %d of the session's %d programs", listed, len(own))
	}
}
