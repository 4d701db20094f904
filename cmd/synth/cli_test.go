package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/perftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/synth"
)

// --pid given a thread's id dumps the thread's process.
func TestPidOfThread(t *testing.T) {
	testenv.Root(t)
	self, tid := os.Getpid(), testenv.Thread(t)
	out := filepath.Join(t.TempDir(), "perf.data")
	r := runCmd(t, exec.Command(synthBin, "dump", "--no-kernel", "--pid", strconv.Itoa(tid), "-o", out))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if sum := parseSummary(t, r.stderr); sum.processes != 1 || sum.mappings == 0 {
		t.Errorf("summary %+v: want this process's mappings", sum)
	}
	maps := perftest.Maps(t, perfScript(t, out), self)
	if len(maps) == 0 {
		t.Errorf("no mapping of process %d in the dump of its thread %d", self, tid)
	}
}

// perfScript returns perf script's side-band events of a perf.data.
func perfScript(t *testing.T, path string) string {
	t.Helper()
	perf := testenv.Perf(t)
	cmd := exec.Command(perf, "script", "-i", path, "--show-mmap-events", "--show-task-events")
	cmd.Env = perfEnv(t)
	r := runCmd(t, cmd)
	if r.code != 0 {
		t.Fatalf("perf script: exit %d: %s", r.code, r.stderr)
	}
	return r.stdout
}

// readable checks that a perf.data holds whole records: our reader and
// perf script both read it.
func readable(t *testing.T, what, path string) {
	t.Helper()
	if len(perftest.ReadRecords(t, path)) == 0 {
		t.Errorf("%s: no records", what)
	}
	perfScript(t, path)
}

// SIGINT ends a recording within a second, sends the workload SIGTERM,
// and leaves a valid file; synth then dies of the workload's SIGTERM, as
// perf record does (a shell shows 143).
func TestRecordInterrupt(t *testing.T) {
	testenv.Root(t)
	out := filepath.Join(t.TempDir(), "perf.data")
	cmd := exec.Command(synthBin, "record", "-o", out, "--", "sleep", "20")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	sent := time.Now()
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	took := time.Since(sent)
	if took > time.Second {
		t.Errorf("synth record ended %v after SIGINT, want within a second", took)
	}
	if !died(err, unix.SIGTERM) {
		t.Errorf("%v, want death by SIGTERM (the workload's); stderr %q", err, stderr.String())
	}
	readable(t, "interrupted record", out)
}

// -F above the kernel's limit is lowered to it, with a warning; below
// it, it stands. A recording of a short command at the limit samples the
// command's task only: it ends at once, with the command's status.
func TestRecordFreqLimit(t *testing.T) {
	b, err := os.ReadFile(maxSampleRate)
	if err != nil {
		t.Skipf("no %s: %v", maxSampleRate, err)
	}
	limit, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || limit < 2 {
		t.Fatalf("%s: %q", maxSampleRate, b)
	}
	var stderr strings.Builder
	if got := limitFreq(1000000000, false, &stderr); got != limit ||
		!strings.Contains(stderr.String(), "synth: warning: -F 1000000000 is above the kernel's limit") ||
		!strings.Contains(stderr.String(), fmt.Sprintf("sampling at %d Hz", limit)) {
		t.Errorf("-F 1000000000 became %d, stderr %q; want %d and a warning", got, stderr.String(), limit)
	}
	stderr.Reset()
	if got := limitFreq(limit-1, false, &stderr); got != limit-1 || stderr.Len() != 0 {
		t.Errorf("-F %d became %d, stderr %q", limit-1, got, stderr.String())
	}
	// The default -F above the limit: lowered, and said so as perf says
	// it, without a -F the user did not give.
	stderr.Reset()
	if got := limitFreq(limit+1, true, &stderr); got != limit ||
		stderr.String() != fmt.Sprintf("synth: warning: lowering the default frequency from %d Hz to the kernel's limit, %d Hz (%s)\n", limit+1, limit, maxSampleRate) {
		t.Errorf("the default %d became %d, stderr %q", limit+1, got, stderr.String())
	}
	testenv.Root(t)
	out := filepath.Join(t.TempDir(), "perf.data")
	start := time.Now()
	r := runCmd(t, exec.Command(synthBin, "record", "-F", "1000000000", "-o", out, "--", "true"))
	if took := time.Since(start); r.code != 0 || took > endBound {
		t.Fatalf("synth record -F 1000000000 -- true: exit %d after %v: %s", r.code, took, r.stderr)
	}
	if !strings.Contains(r.stderr, fmt.Sprintf("sampling at %d Hz", limit)) {
		t.Errorf("no warning: %s", r.stderr)
	}
	readable(t, "record at the limit", out)
	t.Logf("synth record -F %d -- true took %v", limit, time.Since(start))
}

// died reports whether a command's error says it died of sig.
func died(err error, sig syscall.Signal) bool {
	ee, ok := err.(*exec.ExitError)
	if !ok {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == sig
}

// A recording the kernel throttled says nothing of it in its summary, as
// perf record 6.1 says nothing at any -F; -v says how often
// (printThrottled), and the file has the THROTTLE records.
func TestRecordSummaryThrottledQuiet(t *testing.T) {
	var stderr strings.Builder
	st := synth.ProfileStats{Session: synth.SessionStats{Samples: 10, Throttled: 3}}
	if code := recordSummary(&stderr, st, "-", os.Stdout); code != exitOK || strings.Contains(stderr.String(), "throttl") {
		t.Errorf("exit %d, summary %q: want 0 and no word of throttling", code, stderr.String())
	}
	stderr.Reset()
	printThrottled(&stderr, 3)
	if !strings.HasPrefix(stderr.String(), "synth: the kernel throttled sampling 3 times") {
		t.Errorf("-v: %q", stderr.String())
	}
}
