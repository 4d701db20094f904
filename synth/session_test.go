package synth_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

func openSession(t *testing.T, opts synth.SessionOptions) *synth.Session {
	t.Helper()
	testenv.Root(t)
	s, err := synth.NewSession(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// readDump reads a dump's synthesized records up to its end.
func readDump(t *testing.T, s *synth.Session) []perfdata.Mmap2 {
	t.Helper()
	var rec synth.Record
	var maps []perfdata.Mmap2
	st := s.Attrs()[0].Attr.SampleType
	for {
		if err := s.Read(&rec); err != nil {
			t.Fatal(err)
		}
		switch rec.Kind {
		case synth.KindDumpEnd:
			return maps
		case synth.KindSynthesized:
			if rec.Type() == perfdata.RecordMmap2 {
				m, _, err := perfdata.ParseMmap2(rec.Raw, st)
				if err != nil {
					t.Fatal(err)
				}
				maps = append(maps, m)
			}
		}
	}
}

// readFlushed flushes s and hands fn every record up to ErrFlushed.
func readFlushed(t *testing.T, s *synth.Session, fn func(*synth.Record)) {
	t.Helper()
	s.Flush()
	var rec synth.Record
	for {
		err := s.Read(&rec)
		if errors.Is(err, synth.ErrFlushed) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		fn(&rec)
	}
}

// A session dumps this process, then reports a file it maps afterwards
// live, once, in the dump's generation.
func TestSessionLiveMmap(t *testing.T) {
	s := openSession(t, synth.SessionOptions{Options: synth.Options{Target: synth.Target{Pids: []int{os.Getpid()}}, Data: true}})
	if err := s.Dump(context.Background()); err != nil {
		t.Fatal(err)
	}
	if maps := readDump(t, s); len(maps) == 0 {
		t.Fatal("dump of this process has no mappings")
	}
	path := filepath.Join(t.TempDir(), "live-mapped")
	size := 2 * os.Getpagesize()
	if err := os.WriteFile(path, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	s.SetDeadline(time.Now().Add(5 * time.Second))
	var rec synth.Record
	st := s.Attrs()[0].Attr.SampleType
	for {
		if err := s.Read(&rec); err != nil {
			t.Fatalf("no live record of %s: %v", path, err)
		}
		if rec.Kind != synth.KindLive || rec.Type() != perfdata.RecordMmap2 {
			continue
		}
		m, _, err := perfdata.ParseMmap2(rec.Raw, st)
		if err != nil {
			t.Fatal(err)
		}
		if m.Filename == path {
			if rec.Gen != 1 || rec.Time == 0 || m.Len != uint64(size) {
				t.Errorf("live record gen %d time %d len %d", rec.Gen, rec.Time, m.Len)
			}
			break
		}
	}
	readFlushed(t, s, func(*synth.Record) {})
	if st := s.Stats(); st.Lost != 0 || st.Synthesized == 0 || st.Live == 0 {
		t.Errorf("stats %+v", st)
	}
}

// sleeper starts a process that maps nothing while it lives.
func sleeper(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}

// Close unblocks a Read waiting in another goroutine, and is
// idempotent; a closed session refuses dumps.
func TestSessionCloseUnblocks(t *testing.T) {
	s := openSession(t, synth.SessionOptions{Options: synth.Options{Target: synth.Target{Pids: []int{sleeper(t)}}}})
	done := make(chan error, 1)
	go func() {
		var rec synth.Record
		for {
			if err := s.Read(&rec); err != nil {
				done <- err
				return
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrClosed) {
			t.Errorf("Read after Close: %v, want os.ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Read still blocked 5 s after Close")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := s.Dump(context.Background()); !errors.Is(err, os.ErrClosed) {
		t.Errorf("Dump after Close: %v, want os.ErrClosed", err)
	}
}

// A deadline ends a wait with os.ErrDeadlineExceeded; a second dump
// cannot start before the first one's records are read.
func TestSessionDeadlineAndDumpRunning(t *testing.T) {
	s := openSession(t, synth.SessionOptions{Options: synth.Options{Target: synth.Target{Pids: []int{sleeper(t)}}, NoKernel: true}})
	if err := s.Dump(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := s.Dump(context.Background()); !errors.Is(err, synth.ErrDumpRunning) {
		t.Errorf("second Dump: %v, want ErrDumpRunning", err)
	}
	readDump(t, s)
	start := time.Now()
	s.SetDeadline(start.Add(150 * time.Millisecond))
	var rec synth.Record
	for {
		err := s.Read(&rec)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind != synth.KindLive {
			t.Errorf("unexpected %v record from an idle process", rec.Kind)
		}
	}
	if d := time.Since(start); d < 150*time.Millisecond || d > 2*time.Second {
		t.Errorf("deadline of 150ms returned after %v", d)
	}
	if st := s.Stats(); st.Dumps != 1 || st.Synthesized == 0 {
		t.Errorf("stats %+v", st)
	}
}

// When a side-band ring overflows, the stream carries the kernel's
// PERF_RECORD_LOST records as live records, and Stats.LiveLost adds them
// up; the session goes on.
func TestSessionMarksLiveLoss(t *testing.T) {
	testproc.StartStorm(t, "map", "2")
	testproc.StartStorm(t, "fork")
	s := openSession(t, synth.SessionOptions{Options: synth.Options{RingPages: synth.MinRingPages}})
	var lost, losts uint64
	count := func(r *synth.Record) {
		if r.Type() != perfdata.RecordLost {
			return
		}
		l, _, err := perfdata.ParseLost(r.Raw, s.Attrs()[0].Attr.SampleType)
		if err != nil {
			t.Fatal(err)
		}
		if r.Kind != synth.KindLive || r.Time == 0 {
			t.Errorf("a LOST record of kind %d, time %d", r.Kind, r.Time)
		}
		lost += l.Lost
		losts++
	}
	// Nobody drains the rings meanwhile: the storm fills them. The
	// kernel writes its LOST record once there is room again, after a
	// drain: read twice. On a host busy with other tests, the storm may
	// need a few rounds to fill them.
	for round := 0; round < 10 && lost == 0; round++ {
		time.Sleep(300 * time.Millisecond)
		readFlushed(t, s, count)
		time.Sleep(50 * time.Millisecond)
		readFlushed(t, s, count)
	}
	st := s.Stats()
	if lost == 0 {
		t.Fatal("the kernel dropped nothing: the storm does not test the loss path")
	}
	if st.LiveLost != lost || st.Lost != 0 {
		t.Errorf("stats say %d live and %d synthesized records lost; the stream's %d LOST records add up to %d",
			st.LiveLost, st.Lost, losts, lost)
	}
	// And the session goes on: a dump after it.
	if err := s.Dump(context.Background()); err != nil {
		t.Fatal(err)
	}
	if maps := readDump(t, s); len(maps) == 0 {
		t.Error("a dump after the loss read no mapping")
	}
	t.Logf("%d LOST records for %d records", losts, lost)
}

// ReadBatch hands out a dump's records as Read does, several per
// call, each batch valid until the next call.
func TestSessionReadBatch(t *testing.T) {
	p := testproc.StartT(t, everything)
	s := openSession(t, synth.SessionOptions{Options: synth.Options{Target: synth.Target{Pids: []int{p.Pid}}, Data: true, NoKernel: true}})
	if err := s.Dump(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := readDump(t, s)
	if err := s.Dump(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := s.Attrs()[0].Attr.SampleType
	var got []perfdata.Mmap2
	recs := make([]synth.Record, 5)
	batches, most := 0, 0
	for ended := false; !ended; {
		n, err := s.ReadBatch(recs)
		if err != nil {
			t.Fatal(err)
		}
		if n < 1 || n > len(recs) {
			t.Fatalf("batch of %d records", n)
		}
		batches++
		most = max(most, n)
		// Every record of the batch is still whole here.
		for _, rec := range recs[:n] {
			switch {
			case rec.Kind == synth.KindDumpEnd:
				ended = true
			case rec.Kind == synth.KindSynthesized && rec.Type() == perfdata.RecordMmap2:
				m, _, err := perfdata.ParseMmap2(rec.Raw, st)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, m)
			}
		}
	}
	if len(want) == 0 || !reflect.DeepEqual(got, want) {
		t.Errorf("ReadBatch gave %d mappings, Read %d; they differ", len(got), len(want))
	}
	if most < len(recs) {
		t.Errorf("no batch was full (largest %d of %d, %d batches)", most, len(recs), batches)
	}
}
