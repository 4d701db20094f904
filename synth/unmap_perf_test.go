package synth_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// A session with Unmaps, written to perf.data by the loop of
// ExampleSession_ReadContext, is a file perf report reads: the writer
// refuses the unmap records, and the loop leaves them out.
func TestSessionUnmapsPerfReport(t *testing.T) {
	perf := testenv.Perf(t)
	s := openSession(t, synth.SessionOptions{
		Options: synth.Options{Target: synth.Target{Pids: []int{os.Getpid()}}},
		Sample:  &synth.SampleOptions{Freq: 999},
		Unmaps:  true,
	})
	testenv.Option(t, s.UnmapsErr() == nil, fmt.Sprintf("syscall tracepoints (%v)", s.UnmapsErr()))
	path := filepath.Join(t.TempDir(), "perf.data")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := perfdata.NewWriter(f, perfdata.WriterOptions{Attrs: s.Attrs()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Dump(ctx); err != nil {
		t.Fatal(err)
	}
	// Map and unmap an executable page of this program a few times
	// once the dump has read the process.
	churn := func() {
		for range 4 {
			mem, err := mapSelf()
			if err != nil {
				t.Fatal(err)
			}
			if err := unix.Munmap(mem); err != nil {
				t.Fatal(err)
			}
		}
	}
	var rec synth.Record
	unmaps, written := 0, 0
	for {
		err := s.ReadContext(ctx, &rec)
		if errors.Is(err, synth.ErrFlushed) {
			break
		}
		if err != nil {
			t.Fatalf("after %d unmap records: %v", unmaps, err)
		}
		switch rec.Kind {
		case synth.KindDumpEnd:
			churn()
			s.Flush()
			continue
		case synth.KindUnmap:
			// What a loop that wrote every record would do.
			if err := w.WriteRecord(rec.Raw); !errors.Is(err, perfdata.ErrPrivateRecord) {
				t.Fatalf("WriteRecord of an unmap record: %v, want ErrPrivateRecord", err)
			}
			unmaps++
			continue
		}
		if err := w.WriteRecord(rec.Raw); err != nil {
			t.Fatalf("WriteRecord of a %v record: %v", rec.Kind, err)
		}
		written++
	}
	if err := w.WriteTables(s.LastDump().Tables); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if unmaps == 0 || written == 0 {
		t.Fatalf("%d unmap records, %d written: the test unmapped nothing, or read nothing", unmaps, written)
	}
	// perf 6.1 stops at a type it does not know and still exits 0:
	// its stderr says so.
	cmd := exec.Command(perf, "report", "--stdio", "-i", path)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "PERF_PAGER=cat")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	if err != nil || strings.Contains(stderr.String(), "failed to process type") {
		t.Fatalf("perf report --stdio -i %s: %v (%s)\n%s", path, err, testenv.Keep(path), stderr.String())
	}
}
