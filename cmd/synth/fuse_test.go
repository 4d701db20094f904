package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/hostarch"
	"github.com/synth-dev/synth/internal/perftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
)

// A file on a FUSE server whose reads never return, mapped by a process
// that never touched it, holds up no dump: a whole-host dump with build
// IDs ends within 10 s and exits 0, reports the file as not read in
// time, writes its mapping without a build ID, and gives every other
// file its build ID. The same with --method procquery.
func TestBuildIDHungFUSE(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	blocked, abort := testproc.HungFUSE(t)
	hung := testproc.StartT(t, testproc.Spec{Maps: []testproc.MapSpec{{Path: blocked}}})
	libc := libcPath(t)
	lib := testproc.StartT(t, testproc.Spec{Maps: []testproc.MapSpec{{Path: libc}}})
	for _, method := range []string{"bpf", "procquery"} {
		t.Run(method, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "perf.data")
			// A dump stuck on the server cannot be killed: aborting
			// the connection is what ends it, and fails the test.
			watchdog := time.AfterFunc(20*time.Second, abort)
			defer watchdog.Stop()
			start := time.Now()
			r := runCmd(t, exec.Command(synthBin, "dump", "--method", method, "-o", file))
			if took := time.Since(start); took > 10*time.Second || r.code != 0 {
				t.Fatalf("exit %d after %v:\n%s", r.code, took, r.stderr)
			}
			sum := parseSummary(t, r.stderr)
			if sum.idTimeouts < 1 || sum.buildIDs == 0 {
				t.Errorf("stderr says %d files not read in time, %d mappings with a build ID:\n%s",
					sum.idTimeouts, sum.buildIDs, r.stderr)
			}
			out := runCmd(t, exec.Command(perf, "script", "-D", "-i", file))
			if out.code != 0 {
				t.Fatalf("perf script: %s", out.stderr)
			}
			// The hung file is there by inode: no build ID.
			if got := perftest.Maps(t, out.stdout, hung.Pid); !containsPath(got, blocked) {
				t.Errorf("no mapping of %s by inode for pid %d in:\n%s", blocked, hung.Pid, strings.Join(got, "\n"))
			}
			// The library another process maps carries its build ID
			// (perftest.Maps checks it is the file's).
			if !strings.Contains(perftest.BuildIDLines(out.stdout, lib.Pid), libc) {
				t.Errorf("pid %d: no MMAP2 of %s with a build ID", lib.Pid, libc)
			}
			perftest.Maps(t, out.stdout, lib.Pid)
		})
	}
}

// lockBound is how long TestDumpLockedProcess lets a dump run before it
// calls it stuck on the lock: far over the 23 s a dump that never waited
// took on a loaded host, and short enough that a stuck one in each of
// the six runs fails the test before the package's 10-minute timeout.
const lockBound = 75 * time.Second

func containsPath(lines []string, path string) bool {
	for _, l := range lines {
		if strings.HasSuffix(l, fmt.Sprintf(" %q", path)) {
			return true
		}
	}
	return false
}

// fileMaps are the lines of perftest.Maps or ProcMaps of mappings of files.
func fileMaps(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.Contains(l, ` "/`) {
			out = append(out, l)
		}
	}
	return out
}

func libcPath(t *testing.T) string {
	p := filepath.Join(hostarch.LibDir(), "libc.so.6")
	_, err := os.Stat(p)
	testenv.Need(t, err == nil, "no "+p)
	return p
}

// A process whose mmap lock no one can take (perf's --proc-map-timeout
// case) holds up no dump: a whole-host dump, and one of the process and
// another, end within a few seconds and exit 0. With the task_vma
// iterator, which waits for the lock, the process is left out and named;
// the maple walk reads it without the lock, or falls back and leaves it
// out. Either way, the other process is whole.
//
// What tells a dump that waits for the lock from a slow one is not its
// time (a whole-host dump with build IDs takes 1 s here, over 20 s on a
// loaded host): a dump that waits never ends by itself, and only the
// watchdog's abort of the server lets it go. Each run has a watchdog; a
// run it had to free fails, and so do the runs after it, which the
// abort left without a locked process to test.
func TestDumpLockedProcess(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	blocked, abort := testproc.HungFUSE(t)
	hung := testproc.StartT(t, testproc.Spec{Maps: []testproc.MapSpec{{Path: blocked}}})
	other := testproc.StartT(t, testproc.Spec{Maps: []testproc.MapSpec{{Path: libcPath(t)}}})
	hungMaps := perftest.ProcMaps(t, hung.Pid, true)
	otherMaps := perftest.ProcMaps(t, other.Pid, true)
	var addr uint64
	for _, l := range hungMaps {
		if strings.HasSuffix(l, fmt.Sprintf(" %q", blocked)) {
			addr, _ = strconv.ParseUint(l[:strings.IndexByte(l, '-')], 16, 64)
		}
	}
	if addr == 0 {
		t.Fatalf("no mapping of %s in:\n%s", blocked, strings.Join(hungMaps, "\n"))
	}
	testproc.LockMM(t, hung.Pid, addr, abort)
	var aborted atomic.Bool
	pids := fmt.Sprintf("%d,%d", hung.Pid, other.Pid)
	type run struct {
		name string
		args []string
	}
	runs := []run{
		{"iter", []string{"--walk", "iter"}},
		{"iter-pids", []string{"--walk", "iter", "-p", pids}},
		{"auto", nil},
		{"auto-pids", []string{"-p", pids}},
	}
	for _, m := range procMethods(t) {
		runs = append(runs, run{m, []string{"--method", m}})
	}
	for _, tc := range runs {
		t.Run(tc.name, func(t *testing.T) {
			if aborted.Load() {
				t.Fatal("the server was aborted: no process holds its mmap lock any more")
			}
			file := filepath.Join(t.TempDir(), "perf.data")
			args := append([]string{"dump", "--data", "--buildid-timeout", "2s", "-o", file}, tc.args...)
			// A dump that waits for the lock cannot be killed: aborting
			// the connection is what ends it. The bound is far above
			// what a dump takes on a loaded host (tens of seconds) or
			// under TCG on arm64 (8 s, its loading alone 6).
			watchdog := time.AfterFunc(lockBound, func() {
				aborted.Store(true)
				abort()
			})
			start := time.Now()
			r := runCmd(t, exec.Command(synthBin, args...))
			if !watchdog.Stop() {
				t.Fatalf("the dump waited for the lock: it ended (exit %d) only once the watchdog aborted the server, after %v:\n%s",
					r.code, time.Since(start).Round(time.Millisecond), r.stderr)
			}
			if r.code != 0 {
				t.Fatalf("exit %d after %v:\n%s", r.code, time.Since(start).Round(time.Millisecond), r.stderr)
			}
			sum := parseSummary(t, r.stderr)
			left := strings.Contains(sum.lockedOut, fmt.Sprintf("%d (", hung.Pid))
			if tc.args != nil && tc.args[1] == "iter" && !left {
				t.Errorf("the task_vma iterator did not leave %d out:\n%s", hung.Pid, r.stderr)
			}
			out := runCmd(t, exec.Command(perf, "script", "-D", "-i", file))
			if out.code != 0 {
				t.Fatalf("perf script: exit %d: %s", out.code, out.stderr)
			}
			got := perftest.Maps(t, out.stdout, hung.Pid)
			switch {
			case left && len(got) > 0:
				t.Errorf("%d left out, yet %d of its mappings are written", hung.Pid, len(got))
			case !left && !slices.Equal(got, hungMaps):
				t.Errorf("%d not left out, but its mappings are not those of /proc:\n%s\nwant:\n%s",
					hung.Pid, strings.Join(got, "\n"), strings.Join(hungMaps, "\n"))
			}
			// Of the other process, its files: its runtime may add
			// anonymous memory (a thread's malloc arena) meanwhile.
			if got, want := fileMaps(perftest.Maps(t, out.stdout, other.Pid)), fileMaps(otherMaps); !slices.Equal(got, want) {
				t.Errorf("the file mappings of %d:\n%s\nwant:\n%s", other.Pid, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			t.Logf("%v, walk %s, left out: %q", time.Since(start).Round(time.Millisecond), sum.walk, sum.lockedOut)
		})
	}
}
