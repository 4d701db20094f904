package synth_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/synth"
	"golang.org/x/sys/unix"
)

// BenchmarkDump measures one whole-host dump with loaded programs; the
// records are decoded by no one. Compare with perf's own synthesis by
// running `perf bench internals synthesize --mt` on the same host.
func BenchmarkDump(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts synth.Options
	}{
		{"exec", synth.Options{}},
		{"exec-nobuildid", synth.Options{NoBuildID: true}},
		{"data", synth.Options{Data: true}},
		{"data-nobuildid", synth.Options{Data: true, NoBuildID: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			testenv.Root(b)
			d, err := synth.NewBPF(bc.opts)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			// The first dump fills the build-ID cache; the loop measures
			// dumps with a warm cache, as a profiler's repeated dumps.
			first, err := d.Dump(context.Background(), func([]byte) error { return nil })
			if err != nil {
				b.Fatal(err)
			}
			var st synth.Stats
			for b.Loop() {
				st, err = d.Dump(context.Background(), func([]byte) error { return nil })
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(st.Mappings), "mappings")
			b.ReportMetric(float64(st.Records), "records")
			b.ReportMetric(float64(first.FilesRead), "files-read-first")
			b.ReportMetric(float64(st.FilesRead), "files-read-later")
			b.ReportMetric(float64(first.Elapsed.Microseconds()), "first-µs")
		})
	}
}

// BenchmarkSessionPerRecord measures what a Session adds per record to
// the dump it runs: a warm whole-host dump (--data, with a test process
// of 5,000 file-backed VMAs) read through Session.Read, against the
// same dump handed to a callback by BPF.Dump, in one run. The metric
// session-ns/record is the difference divided by the records, and
// batch-ns/record the same with Session.ReadBatch, 256 at a time.
func BenchmarkSessionPerRecord(b *testing.B) {
	testenv.Root(b)
	testproc.StartT(b, everything)
	opts := synth.Options{Data: true, NoLive: true}
	direct, err := synth.NewBPF(opts)
	if err != nil {
		b.Fatal(err)
	}
	defer direct.Close()
	s, err := synth.NewSession(synth.SessionOptions{Options: opts})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	dumpDirect := func() int {
		n := 0
		if _, err := direct.Dump(ctx, func([]byte) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
		return n
	}
	dumpSession := func() int {
		if err := s.Dump(ctx); err != nil {
			b.Fatal(err)
		}
		n := 0
		for rec := (synth.Record{}); rec.Kind != synth.KindDumpEnd; n++ {
			if err := s.Read(&rec); err != nil {
				b.Fatal(err)
			}
		}
		return n - 1
	}
	recs := make([]synth.Record, 256)
	dumpBatch := func() int {
		if err := s.Dump(ctx); err != nil {
			b.Fatal(err)
		}
		total := 0
		for {
			n, err := s.ReadBatch(recs)
			if err != nil {
				b.Fatal(err)
			}
			if recs[n-1].Kind == synth.KindDumpEnd {
				return total + n - 1
			}
			total += n
		}
	}
	dumpDirect() // warm both build-ID caches
	dumpSession()
	var tDirect, tSession, tBatch time.Duration
	records := 0
	for b.Loop() {
		t := time.Now()
		records = dumpDirect()
		tDirect += time.Since(t)
		t = time.Now()
		dumpSession()
		tSession += time.Since(t)
		t = time.Now()
		dumpBatch()
		tBatch += time.Since(t)
	}
	perRecord := func(d time.Duration) float64 {
		return float64(d-tDirect) / float64(b.N) / float64(records)
	}
	b.ReportMetric(float64(records), "records")
	b.ReportMetric(perRecord(tSession), "session-ns/record")
	b.ReportMetric(perRecord(tBatch), "batch-ns/record")
}

// BenchmarkUnmapHook measures what SessionOptions.Unmaps adds to a
// munmap(2): an mmap and munmap of one anonymous page, timed bare and
// with a session's unmap programs attached (its stream read meanwhile),
// alternating in one run. Metrics: bare-ns/op and hooked-ns/op, each an
// mmap-munmap pair.
func BenchmarkUnmapHook(b *testing.B) {
	testenv.Root(b)
	pairs := func(n int) time.Duration {
		page := os.Getpagesize()
		start := time.Now()
		for range n {
			m, err := unix.Mmap(-1, 0, page, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				b.Fatal(err)
			}
			if err := unix.Munmap(m); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	const batch = 10000
	var bare, hooked time.Duration
	for b.Loop() {
		bare += pairs(batch)
		s, err := synth.NewSession(synth.SessionOptions{Options: synth.Options{Target: synth.Target{Pids: []int{os.Getpid()}}}, Unmaps: true})
		if err != nil {
			b.Fatal(err)
		}
		testenv.Option(b, s.UnmapsErr() == nil, "syscall tracepoints ("+fmt.Sprint(s.UnmapsErr())+")")
		if err := s.Dump(context.Background()); err != nil { // the programs learn the reader's namespace
			b.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for rec := (synth.Record{}); s.Read(&rec) == nil; {
			}
		}()
		hooked += pairs(batch)
		s.Close()
		<-done
	}
	b.ReportMetric(float64(bare.Nanoseconds())/float64(b.N*batch), "bare-ns/op")
	b.ReportMetric(float64(hooked.Nanoseconds())/float64(b.N*batch), "hooked-ns/op")
}
