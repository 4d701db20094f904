package synth_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"
	"unsafe"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

func mmap2(pid uint32, start, end, pgoff uint64, path string) []byte {
	m := perfdata.Mmap2{Pid: pid, Tid: pid, Addr: start, Len: end - start, Pgoff: pgoff, Prot: 5, Filename: path}
	return m.Append(nil, 0, nil)
}

func ranges(p *synth.Process) string {
	s := ""
	for _, m := range p.Mappings {
		s += fmt.Sprintf("[%x-%x@%x %s]", m.Start, m.End, m.Pgoff, m.Path)
	}
	return s
}

// Apply follows what the records say: a mapping replaces what it
// overlaps, a fork copies, an exec starts afresh, an exit removes.
func TestTableApply(t *testing.T) {
	tb := synth.NewTable()
	apply := func(rec []byte) {
		t.Helper()
		if err := tb.Apply(&synth.Record{Kind: synth.KindLive, Raw: rec}); err != nil {
			t.Fatal(err)
		}
	}
	apply(mmap2(1, 0x1000, 0x5000, 0, "a"))
	apply(mmap2(1, 0x8000, 0x9000, 0, "b"))
	apply(mmap2(1, 0x2000, 0x3000, 0, "c")) // splits a
	apply(mmap2(1, 0x4000, 0x8800, 0, "d")) // cuts a's tail and b's head
	p, _ := tb.Process(1)
	if got, want := ranges(p), "[1000-2000@0 a][2000-3000@0 c][3000-4000@2000 a][4000-8800@0 d][8800-9000@800 b]"; got != want {
		t.Errorf("mappings %s, want %s", got, want)
	}
	if m, ok := p.Lookup(0x3fff); !ok || m.Path != "a" {
		t.Errorf("lookup 0x3fff: %+v %v", m, ok)
	}
	if _, ok := p.Lookup(0x9000); ok {
		t.Errorf("lookup past the end found a mapping")
	}
	fork := perfdata.Fork{Pid: 2, Ppid: 1, Tid: 2, Ptid: 1}
	apply(fork.Append(nil, 0, nil))
	c, ok := tb.Process(2)
	if !ok || ranges(c) != ranges(p) {
		t.Errorf("forked child: %v %s", ok, ranges(c))
	}
	// A dump's FORK of a running process copies nothing: its own
	// mappings follow.
	synthFork := perfdata.Fork{Misc: perfdata.MiscForkExec, Pid: 4, Ppid: 1, Tid: 4, Ptid: 1}
	apply(synthFork.Append(nil, 0, nil))
	if c, ok := tb.Process(4); ok && len(c.Mappings) != 0 {
		t.Errorf("a dump's FORK copied the parent's mappings: %s", ranges(c))
	}
	exec := perfdata.Comm{Misc: perfdata.MiscCommExec, Pid: 2, Tid: 2, Comm: "new"}
	apply(exec.Append(nil, 0, nil))
	if c, _ := tb.Process(2); len(c.Mappings) != 0 || c.Comm != "new" {
		t.Errorf("after exec: %q %s", c.Comm, ranges(c))
	}
	thread := perfdata.Exit{Pid: 1, Tid: 3}
	apply(thread.Append(nil, 0, nil))
	exit := perfdata.Exit{Pid: 1, Tid: 1}
	if _, ok := tb.Process(1); !ok {
		t.Errorf("a thread's exit removed its process")
	}
	apply(exit.Append(nil, 0, nil))
	if _, ok := tb.Process(1); ok || len(tb.Processes()) != 1 {
		t.Errorf("after exit: %d processes", len(tb.Processes()))
	}
	if err := tb.Apply(&synth.Record{Kind: synth.KindLive, Raw: []byte{10, 0, 0, 0, 0, 0, 16, 0}}); err == nil {
		t.Errorf("a short MMAP2 applied")
	}
}

// unmapRec is a KindUnmap record of a range that went.
func unmapRec(pid uint32, start, end, to, toEnd uint64) *synth.Record {
	return unmapWhat(pid, synthbpf.SynthSynthUnmapWhatSYNTH_UNMAP_GONE, start, end, to, toEnd)
}

// unmapWhat is a KindUnmap record as the programs write it: struct
// synth_unmap (bpf/synth.h) after its synth_hdr, in the layout bpf2go
// generated from the C.
func unmapWhat(pid uint32, what synthbpf.SynthSynthUnmapWhat, start, end, to, toEnd uint64) *synth.Record {
	u := synthbpf.SynthSynthUnmap{Pid: pid, Tid: pid, What: uint32(what), Start: start, End: end, To: to, ToEnd: toEnd}
	size := unsafe.Sizeof(u) - unsafe.Offsetof(u.Header)
	u.Header.Type = uint32(synthbpf.SynthSynthRecordTypeSYNTH_RECORD_UNMAP)
	u.Header.Size = uint16(size)
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&u.Header)), size)
	return &synth.Record{Kind: synth.KindUnmap, Raw: bytes.Clone(raw)}
}

// A KindUnmap cuts its range out, splitting what it overlaps in part;
// after an mremap the mapping that held its start is where the call put
// it, its file offset kept; an unmap read over by a dump changes nothing.
func TestTableUnmap(t *testing.T) {
	tb := synth.NewTable()
	data := perfdata.Mmap2{Pid: 1, Tid: 1, Addr: 0x2800, Len: 0x800, Prot: 3, Filename: "c"}
	for _, rec := range [][]byte{mmap2(1, 0x1000, 0x5000, 0, "a"), mmap2(1, 0x8000, 0xa000, 0x3000, "b")} {
		if err := tb.Apply(&synth.Record{Kind: synth.KindLive, Raw: rec}); err != nil {
			t.Fatal(err)
		}
	}
	p, _ := tb.Process(1)
	for _, step := range []struct {
		rec  *synth.Record
		want string
	}{
		{unmapRec(1, 0x2000, 0x3000, 0, 0), "[1000-2000@0 a][3000-5000@2000 a][8000-a000@3000 b]"},
		{unmapRec(1, 0x4000, 0x9000, 0, 0), "[1000-2000@0 a][3000-4000@2000 a][9000-a000@4000 b]"},
		{unmapRec(9, 0x1000, 0x2000, 0, 0), "[1000-2000@0 a][3000-4000@2000 a][9000-a000@4000 b]"},
		// mremap: moved and grown; shrunk in place.
		{unmapRec(1, 0x9000, 0xa000, 0x20000, 0x22000), "[1000-2000@0 a][3000-4000@2000 a][20000-22000@4000 b]"},
		{unmapRec(1, 0x20000, 0x22000, 0x20000, 0x21000), "[1000-2000@0 a][3000-4000@2000 a][20000-21000@4000 b]"},
		{&synth.Record{Kind: synth.KindUnmap, Raw: unmapRec(1, 0x1000, 0x2000, 0, 0).Raw, Superseded: true},
			"[1000-2000@0 a][3000-4000@2000 a][20000-21000@4000 b]"},
		// No longer executable: only the executable mappings lose it
		// (mmap2 gives prot 5; c is a data mapping, prot 3).
		{&synth.Record{Kind: synth.KindLive, Raw: data.Append(nil, 0, nil)},
			"[1000-2000@0 a][2800-3000@0 c][3000-4000@2000 a][20000-21000@4000 b]"},
		{unmapWhat(1, synthbpf.SynthSynthUnmapWhatSYNTH_UNMAP_NOEXEC, 0x1800, 0x3800, 0, 0), "[1000-1800@0 a][2800-3000@0 c][3800-4000@2800 a][20000-21000@4000 b]"},
	} {
		if err := tb.Apply(step.rec); err != nil {
			t.Fatal(err)
		}
		if got := ranges(p); got != step.want {
			u, _ := step.rec.Unmapped()
			t.Errorf("after %+v: %s, want %s", u, got, step.want)
		}
	}
	bad := unmapRec(1, 0, 0, 0, 0)
	bad.Raw = bad.Raw[:48]
	if err := tb.Apply(bad); err == nil {
		t.Error("a short unmap record applied")
	}
}

// tableKeys is what the table says of pid, as procKeys reads /proc.
func tableKeys(p *synth.Process) []string {
	var keys []string
	for _, m := range p.Mappings {
		keys = append(keys, fmt.Sprintf("%x-%x %x %d %s", m.Start, m.End, m.Pgoff, m.Prot, m.Path))
	}
	return keys
}

func procTableKeys(t *testing.T, pid int) []string {
	var keys []string
	for _, k := range procKeys(t, pid, false) {
		keys = append(keys, fmt.Sprintf("%x-%x %x %d %s", k.start, k.end, k.pgoff, k.prot, k.path))
	}
	return keys
}

// The table of a dump is /proc/PID/maps; the live stream then adds a
// library mapped later, and an exit removes the process.
func TestTableLive(t *testing.T) {
	testenv.Root(t)
	exe, _ := os.Executable()
	p := testproc.StartT(t, testproc.Spec{Dir: t.TempDir(), Maps: []testproc.MapSpec{{Path: exe, Len: int64(os.Getpagesize())}}})
	// A snapshot of the whole host has the test process as /proc has
	// it (its parent, this test, is in the table too).
	b, err := synth.NewBPF(synth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	host, _, err := synth.Snapshot(context.Background(), b.Method())
	b.Close()
	if err != nil {
		t.Fatal(err)
	}
	if hp, ok := host.Process(uint32(p.Pid)); !ok {
		t.Errorf("host snapshot: no process %d among %d", p.Pid, len(host.Processes()))
	} else if got, want := tableKeys(hp), procTableKeys(t, p.Pid); !slices.Equal(got, want) {
		t.Errorf("host snapshot:\n%v\n/proc/%d/maps:\n%v", got, p.Pid, want)
	}
	s, err := synth.NewSession(synth.SessionOptions{Options: synth.Options{Target: synth.Target{Pids: []int{p.Pid}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb := synth.NewTable()
	if err := s.Dump(context.Background()); err != nil {
		t.Fatal(err)
	}
	// read applies the stream's records until done says so.
	read := func(what string, done func(rec *synth.Record) bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var rec synth.Record
		for {
			if err := s.ReadContext(ctx, &rec); err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			if err := tb.Apply(&rec); err != nil {
				t.Fatal(err)
			}
			if done(&rec) {
				return
			}
		}
	}
	read("the dump", func(rec *synth.Record) bool { return rec.Kind == synth.KindDumpEnd })
	proc, ok := tb.Process(uint32(p.Pid))
	if !ok {
		t.Fatalf("process %d not in the table", p.Pid)
	}
	if got, want := tableKeys(proc), procTableKeys(t, p.Pid); !slices.Equal(got, want) {
		t.Errorf("table:\n%v\n/proc/%d/maps:\n%v", got, p.Pid, want)
	}
	if m, ok := proc.Lookup(proc.Mappings[0].Start); !ok || m.BuildID == nil && m.Ino == 0 {
		t.Errorf("first mapping %+v: no file identity", m)
	}

	lib := exe // mapped whole, a second time: a new mapping of a file that surely exists
	if err := p.Map(lib); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n := 0
		for _, m := range proc.Mappings {
			if m.Path == lib {
				n++
			}
		}
		return n
	}
	before := count()
	read("the new mapping", func(*synth.Record) bool { return count() > before })
	if got, want := tableKeys(proc), procTableKeys(t, p.Pid); !slices.Equal(got, want) {
		t.Errorf("after the live mapping, table:\n%v\n/proc/%d/maps:\n%v", got, p.Pid, want)
	}

	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	read("the exit", func(*synth.Record) bool {
		_, ok := tb.Process(uint32(p.Pid))
		return !ok
	})
}

func TestRecordKindString(t *testing.T) {
	for k, want := range map[synth.RecordKind]string{synth.KindSynthesized: "synthesized", synth.KindLive: "live",
		synth.KindSample: "sample", synth.KindDumpEnd: "dump-end", 9: "RecordKind(9)"} {
		if got := k.String(); got != want {
			t.Errorf("kind %d: %q, want %q", uint8(k), got, want)
		}
	}
	rec := synth.Record{Raw: mmap2(1, 0, 4096, 0, "x")}
	if got := rec.Type().String(); got != "MMAP2" {
		t.Errorf("type of an MMAP2: %q", got)
	}
}

// ReadContext returns when its context ends, though no record comes.
func TestReadContextEnds(t *testing.T) {
	testenv.Root(t)
	s, err := synth.NewSession(synth.SessionOptions{Options: synth.Options{Target: synth.Target{Pids: []int{os.Getpid()}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	var rec synth.Record
	for {
		err := s.ReadContext(ctx, &rec)
		if err == nil {
			continue // a record of this process
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("ReadContext: %v", err)
		}
		break
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("ReadContext returned %v after its deadline", d)
	}
	// The session's own deadline is untouched.
	go func() { time.Sleep(100 * time.Millisecond); s.Flush() }()
	if err := s.Read(&rec); err != nil && !errors.Is(err, synth.ErrFlushed) {
		t.Errorf("Read after ReadContext: %v", err)
	}
}
