package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
)

// hungFUSE mounts testdata/fuse/blockfs.py: a FUSE server with one file,
// blocked.so, whose reads are never answered. It returns the file's
// path, and the function that aborts the connection, which ends every
// read left waiting on it, in whatever process. The cleanup aborts,
// unmounts and kills the server.
func hungFUSE(t *testing.T) (string, func()) {
	t.Helper()
	py := "/usr/bin/python3" // Debian's, with python3-fusepy (make deps)
	err := exec.Command(py, "-c", "import fusepy").Run()
	testenv.Need(t, err == nil, "python3-fusepy is not installed")
	server, _ := filepath.Abs("../../testdata/fuse/blockfs.py")
	mnt := t.TempDir()
	cmd := exec.Command(py, server, mnt)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(mnt, "blocked.so")
	var st unix.Stat_t
	for i := 0; unix.Stat(file, &st) != nil; i++ {
		if i == 500 {
			cmd.Process.Kill()
			t.Fatalf("the FUSE server did not come up at %s", mnt)
		}
		time.Sleep(10 * time.Millisecond)
	}
	var mst unix.Stat_t
	if err := unix.Stat(mnt, &mst); err != nil || unix.Major(mst.Dev) != 0 {
		t.Fatalf("stat %s: %v (dev %d:%d)", mnt, err, unix.Major(mst.Dev), unix.Minor(mst.Dev))
	}
	abort := sync.OnceFunc(func() { abortFUSE(t, unix.Minor(mst.Dev)) })
	t.Cleanup(func() {
		abort()
		if err := unix.Unmount(mnt, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", mnt, err)
		}
		cmd.Process.Kill()
		cmd.Wait()
	})
	return file, abort
}

// abortFUSE aborts FUSE connection conn through the fusectl filesystem.
func abortFUSE(t *testing.T, conn uint32) {
	dir := "/sys/fs/fuse/connections"
	abort := filepath.Join(dir, fmt.Sprint(conn), "abort")
	if _, err := os.Stat(abort); errors.Is(err, os.ErrNotExist) {
		if err := unix.Mount("fusectl", dir, "fusectl", 0, ""); err != nil {
			t.Errorf("mount fusectl: %v", err)
		}
	}
	if err := os.WriteFile(abort, []byte("1"), 0); err != nil {
		t.Errorf("abort FUSE connection %d: %v", conn, err)
	}
}

// A file on a FUSE server whose reads never return, mapped by a process
// that never touched it, holds up no dump: a whole-host dump with build
// IDs ends within 10 s and exits 0, reports the file as not read in
// time, writes its mapping without a build ID, and gives every other
// file its build ID. The same with --method procquery.
func TestBuildIDHungFUSE(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	blocked, abort := hungFUSE(t)
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
			if got := perfMaps(t, out.stdout, hung.Pid); !containsPath(got, blocked) {
				t.Errorf("no mapping of %s by inode for pid %d in:\n%s", blocked, hung.Pid, strings.Join(got, "\n"))
			}
			// The library another process maps carries its build ID
			// (buildIDForm checks it is the file's).
			if !strings.Contains(buildIDLinesOf(out.stdout, lib.Pid), libc) {
				t.Errorf("pid %d: no MMAP2 of %s with a build ID", lib.Pid, libc)
			}
			perfMaps(t, out.stdout, lib.Pid)
		})
	}
}

func containsPath(lines []string, path string) bool {
	for _, l := range lines {
		if strings.HasSuffix(l, fmt.Sprintf(" %q", path)) {
			return true
		}
	}
	return false
}

// buildIDLinesOf returns perf's MMAP2 lines of the build-ID form of pid.
func buildIDLinesOf(out string, pid int) string {
	var b strings.Builder
	for _, l := range strings.Split(out, "\n") {
		if m := perfMmap2BuildIDRE.FindStringSubmatch(l); m != nil && m[1] == fmt.Sprint(pid) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

func libcPath(t *testing.T) string {
	const p = "/usr/lib/x86_64-linux-gnu/libc.so.6"
	_, err := os.Stat(p)
	testenv.Need(t, err == nil, "no "+p)
	return p
}
