package synth_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// Stream this process's mappings: the dump's synthesized state, then a
// mapping made afterwards, reported live. It needs CAP_BPF and
// CAP_PERFMON (the tests run as root).
func ExampleSession() {
	s, err := synth.NewSession(synth.SessionOptions{
		Options: synth.Options{Target: synth.Target{Pids: []int{os.Getpid()}}, Data: true, NoKernel: true},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	if err := s.Dump(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	f, err := os.CreateTemp("", "example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.Remove(f.Name())
	counts := map[synth.RecordKind]int{}
	var rec synth.Record
	for {
		err := s.Read(&rec)
		if errors.Is(err, synth.ErrFlushed) {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		counts[rec.Kind]++
		if rec.Kind == synth.KindDumpEnd {
			// Map something new, then read what the rings hold.
			f.Truncate(int64(os.Getpagesize()))
			mem, err := unix.Mmap(int(f.Fd()), 0, os.Getpagesize(), unix.PROT_READ, unix.MAP_SHARED)
			if err != nil {
				fmt.Println(err)
				return
			}
			defer unix.Munmap(mem)
			s.Flush()
		}
	}
	fmt.Println("synthesized:", counts[synth.KindSynthesized] > 0)
	fmt.Println("dumps:", counts[synth.KindDumpEnd])
	fmt.Println("live:", counts[synth.KindLive] > 0)
	fmt.Println("lost:", s.Stats().Lost)
	// Output:
	// synthesized: true
	// dumps: 1
	// live: true
	// lost: 0
}

// A profiler's reading loop: write a session to perf.data, its dump and
// then the live records of the next second. ReadContext ends the loop.
// KindDumpEnd has no record, and KindUnmap (with SessionOptions.Unmaps)
// is synth's own, which perfdata.Writer refuses: both are left out.
func ExampleSession_ReadContext() {
	s, err := synth.NewSession(synth.SessionOptions{
		Options: synth.Options{Target: synth.Target{Pids: []int{os.Getpid()}}}, // the zero Target: the whole host
		Sample:  &synth.SampleOptions{Freq: 999},                               // optional cpu-clock samples
		Unmaps:  true,                                                          // KindUnmap records, for a Table
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer s.Close()
	f, err := os.CreateTemp("", "perf.data")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.Remove(f.Name())
	defer f.Close()
	w, err := perfdata.NewWriter(f, perfdata.WriterOptions{Attrs: s.Attrs()})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := s.Dump(ctx); err != nil { // a new generation
		fmt.Println(err)
		return
	}
	var rec synth.Record
	n := 0
	for {
		err := s.ReadContext(ctx, &rec) // synthesized, then live records and samples
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		if rec.Kind == synth.KindDumpEnd || rec.Kind == synth.KindUnmap {
			continue // no perf record: the writer would refuse an unmap's
		}
		if err := w.WriteRecord(rec.Raw); err != nil { // Raw is valid until the next read
			fmt.Println(err)
			return
		}
		n++
	}
	// The dump's build IDs and BPF programs, for perf buildid-list and
	// perf report.
	if err := w.WriteTables(s.LastDump().Tables); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("records:", n > 0, "close:", w.Close())
	// Output: records: true close: <nil>
}
