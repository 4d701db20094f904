package synth_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// perfPipeBuildIDs records the host for a moment with perf record
// --buildid-mmap into a pipe-mode stream and returns it: the kernel's
// MMAP2 among perf's initial records, and sleep's after them, in the
// build-ID form.
func perfPipeBuildIDs(t *testing.T, perf string) []byte {
	t.Helper()
	cmd := exec.Command(perf, "record", "-q", "--buildid-mmap", "-a", "--synth=no", "-k", "CLOCK_MONOTONIC",
		"-o", "-", "--", "sleep", "0.2")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, stderr.String())
	}
	return stdout.Bytes()
}

// oversizeBuildIDs sets the build_id_size byte of every build-ID MMAP2
// of a pipe-mode stream to 32, as a broken or hostile writer might, and
// returns the pid and addr of each, and how many there were.
func oversizeBuildIDs(t *testing.T, stream []byte) (bad map[[2]uint64]bool, n int) {
	t.Helper()
	bad = map[[2]uint64]bool{}
	le := binary.LittleEndian
	for off := 16; off+8 <= len(stream); {
		typ, misc, size := perfdata.RecordType(le.Uint32(stream[off:])), le.Uint16(stream[off+4:]), int(le.Uint16(stream[off+6:]))
		if size < 8 || off+size > len(stream) {
			t.Fatalf("perf's stream: record of %d bytes at %d", size, off)
		}
		if typ == perfdata.RecordHeaderTracingData || typ == perfdata.RecordAuxtrace {
			t.Fatalf("perf's stream: a %v record, whose payload this walk does not skip", typ)
		}
		if typ == perfdata.RecordMmap2 && misc&perfdata.MiscMmapBuildID != 0 && size > 72 {
			stream[off+40] = 32
			bad[[2]uint64{uint64(le.Uint32(stream[off+8:])), le.Uint64(stream[off+16:])}] = true
			n++
		}
		off += size
	}
	return bad, n
}

// A build-ID MMAP2 of perf's whose size byte says more than the 20 bytes
// the record holds makes perf 6.1 abort ("assertion failed at
// util/build-id.c:1010", then "stack smashing detected"). Inject passes
// such a record on without its build ID, and perf report reads the
// output.
func TestInjectOversizeBuildID(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	stream := perfPipeBuildIDs(t, perf)
	bad, n := oversizeBuildIDs(t, stream)
	if len(bad) < 2 {
		t.Fatalf("perf record --buildid-mmap wrote %d MMAP2 records with a build ID, want the kernel's and sleep's", n)
	}
	path, st := injectAndReport(t, perf, stream)
	if st.BadBuildIDs != n {
		t.Errorf("inject: %d records of perf's with a bad build ID, want %d", st.BadBuildIDs, n)
	}
	if msg := checkRepaired(path, bad); msg != "" {
		t.Errorf("%s (%s)", msg, testenv.Keep(path))
	}
}

// injectAndReport injects perf's pipe-mode stream into a file, with no
// build IDs of the dump's own, and has perf report read the file: it
// must, with no assertion of perf's and no record it cannot process.
// It returns the file's path and the injection's stats.
func injectAndReport(t *testing.T, perf string, stream []byte) (string, synth.InjectStats) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "perf.data")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := synth.Inject(context.Background(), bytes.NewReader(stream), f, synth.InjectOptions{NoBuildID: true})
	if err != nil {
		t.Fatalf("inject: %v", err)
	}
	cmd := exec.Command(perf, "report", "--stdio", "-i", path)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "PERF_PAGER=cat")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	err = cmd.Run()
	if err != nil || strings.Contains(stderr.String(), "assertion failed") || strings.Contains(stderr.String(), "failed to process") {
		t.Fatalf("perf report --stdio -i %s: %v (%s)\n%s", path, err, testenv.Keep(path), clip(stderr.String()))
	}
	return path, st
}

// checkRepaired checks the MMAP2 records of a perf.data: none with a
// build ID over 20 bytes, and each of bad there in the maj/min/ino form,
// all zero. It returns what is wrong, or "".
func checkRepaired(path string, bad map[[2]uint64]bool) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	r, err := perfdata.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return err.Error()
	}
	seen := map[[2]uint64]bool{}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err.Error()
		}
		if rec.Type != perfdata.RecordMmap2 {
			continue
		}
		m := perfdata.Mmap2View(rec.Data)
		if m.HasBuildID() && rec.Data[40] > perfdata.BuildIDMax {
			return fmt.Sprintf("MMAP2 of %#x with a build ID of %d bytes written", m.Addr(), rec.Data[40])
		}
		k := [2]uint64{uint64(m.Pid()), m.Addr()}
		if !bad[k] || m.HasBuildID() {
			continue
		}
		if maj, min, ino, gen := m.Inode(); maj == 0 && min == 0 && ino == 0 && gen == 0 {
			seen[k] = true
		}
	}
	for k := range bad {
		if !seen[k] {
			return fmt.Sprintf("no MMAP2 of pid %d at %#x without its build ID and inode", int32(k[0]), k[1])
		}
	}
	return ""
}

// clip is the start and end of perf's stderr, which may repeat a line
// thousands of times.
func clip(s string) string {
	if len(s) <= 1000 {
		return s
	}
	return s[:500] + "\n[...]\n" + s[len(s)-500:]
}
