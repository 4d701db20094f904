package synth_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/perftest"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// The helpers of the tests that hold the perf.data files the library
// writes against perf's own (perftest has perf's side).

// dumpTo writes one dump of method, opened with opts, to out as
// perf.data, as synth dump does: an error if the dump lost records.
func dumpTo(out io.Writer, method synth.MethodName, opts synth.MethodOptions, wopts synth.WriteOptions) (synth.Stats, error) {
	m, err := synth.OpenMethod(method, opts)
	if err != nil {
		return synth.Stats{}, fmt.Errorf("%s: %w", method, err)
	}
	defer m.Close()
	st, err := synth.WritePerfData(context.Background(), m, out, wopts)
	if err == nil && st.Lost > 0 {
		err = fmt.Errorf("%s: %d records lost", method, st.Lost)
	}
	return st, err
}

// profileTo profiles for d with opts into out as perf.data.
func profileTo(out io.Writer, opts synth.ProfileOptions, d time.Duration, wopts synth.WriteOptions) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	_, err := synth.Profile(ctx, opts, out, wopts)
	if errors.Is(err, context.DeadlineExceeded) {
		return nil // the end asked for
	}
	return err
}

// writeFile writes a new file at path with write, which fails t.
func writeFile(t *testing.T, path string, write func(io.Writer) error) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := write(f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// writeDump writes one dump to a new perf.data file at path.
func writeDump(t *testing.T, path string, method synth.MethodName, opts synth.MethodOptions) synth.Stats {
	t.Helper()
	var st synth.Stats
	writeFile(t, path, func(w io.Writer) (err error) {
		st, err = dumpTo(w, method, opts, synth.WriteOptions{})
		return err
	})
	return st
}

// piped runs write into a pipe on a goroutine and returns the pipe's
// read end, a consumer's stdin, and wait, which closes it once the
// consumer is done and returns write's error.
func piped(t *testing.T, write func(io.Writer) error) (*os.File, func() error) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		err := write(w)
		w.Close()
		done <- err
	}()
	wait := sync.OnceValue(func() error {
		r.Close()
		return <-done
	})
	t.Cleanup(func() { wait() })
	return r, wait
}

// untrailed returns a copy of a record without its sample_id trailer,
// its size set to match.
func untrailed(rec perftest.Record) []byte {
	b := bytes.Clone(rec.Data[:len(rec.Data)-perfdata.SampleIDSize(rec.SampleType)])
	binary.NativeEndian.PutUint16(b[6:], uint16(len(b)))
	return b
}

// loadedModules counts the kernel's loaded modules, each of which has a
// build ID (they are linked with --build-id).
func loadedModules(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/modules")
	if errors.Is(err, fs.ErrNotExist) {
		return 0 // a kernel built without modules
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// procMethods are the /proc methods this kernel has: procquery needs
// PROCMAP_QUERY (6.11; a 6.11+ kernel without it fails t under
// SYNTH_REQUIRE).
func procMethods(t *testing.T) []synth.MethodName {
	t.Helper()
	if haveProcquery(t) {
		return []synth.MethodName{synth.MethodProcmaps, synth.MethodProcquery}
	}
	return []synth.MethodName{synth.MethodProcmaps}
}

// libWrite is one way the library writes perf.data, named for the
// tests' messages: a dump (WritePerfData) or a profile (Profile).
type libWrite struct {
	name  string
	write func(out io.Writer, wopts synth.WriteOptions) error
}

// dumping writes a dump of the auto method, as synth dump does.
func dumping(name string, opts synth.Options) libWrite {
	return libWrite{name, func(out io.Writer, wopts synth.WriteOptions) error {
		_, err := dumpTo(out, synth.MethodAuto, synth.MethodOptions{Options: opts}, wopts)
		return err
	}}
}

// profiling writes a profile that runs for d. It is to have a target
// that is the test's: a profile of every CPU samples the processes of
// others on the host, whose files may be gone when a reader looks (as
// go test's binaries are), and a reader then says so.
func profiling(name string, opts synth.ProfileOptions, d time.Duration) libWrite {
	return libWrite{name, func(out io.Writer, wopts synth.WriteOptions) error {
		return profileTo(out, opts, d, wopts)
	}}
}
