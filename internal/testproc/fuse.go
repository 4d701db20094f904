package testproc

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
)

// HungFUSE mounts testdata/fuse/blockfs.py: a FUSE server with one file,
// blocked.so, whose reads are never answered. It returns the file's
// path, and the function that aborts the connection, which ends every
// read left waiting on it, in whatever process. The cleanup aborts,
// unmounts and kills the server.
func HungFUSE(t testing.TB) (string, func()) {
	t.Helper()
	py := "/usr/bin/python3" // Debian's, with python3-fusepy (make deps)
	err := exec.Command(py, "-c", "import fusepy").Run()
	testenv.Need(t, err == nil, "python3-fusepy is not installed")
	server := testenv.Testdata(t, "fuse", "blockfs.py")
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
func abortFUSE(t testing.TB, conn uint32) {
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

// LockMM makes the mmap lock of process pid unobtainable until the
// returned release is called (which aborts the hung FUSE connection).
// A reader faults in the page at addr, of a file on the hung server,
// through /proc/PID/mem: a remote access, whose fault may not drop the
// lock to wait, so it waits for the server holding the lock for reading.
// A writer (a write of 5 to /proc/PID/clear_refs, which takes the lock
// for writing) queues behind it, and every later reader behind the
// writer (kernel/locking/rwsem.c): to them the lock is as good as held
// for writing, for as long as the test runs.
func LockMM(t testing.TB, pid int, addr uint64, abort func()) {
	t.Helper()
	mem := fmt.Sprintf("/proc/%d/mem", pid)
	page := uint64(os.Getpagesize())
	reader := exec.Command("dd", "if="+mem, "of=/dev/null", fmt.Sprintf("bs=%d", page), fmt.Sprintf("skip=%d", addr/page), "count=1")
	writer := exec.Command("sh", "-c", fmt.Sprintf("echo 5 > /proc/%d/clear_refs", pid))
	for i, c := range []*exec.Cmd{reader, writer} {
		if err := c.Start(); err != nil {
			abort()
			t.Fatal(err)
		}
		t.Cleanup(func() {
			// Neither can be killed while it waits for the server:
			// aborting the connection ends both waits.
			abort()
			c.Process.Kill()
			c.Wait()
		})
		if !waitBlocked(c.Process.Pid, []int{unix.SYS_READ, unix.SYS_WRITE}[i], 5*time.Second) {
			t.Fatalf("%s did not block on the mmap lock of %d", c, pid)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if !waitBlocked(writer.Process.Pid, unix.SYS_WRITE, 0) {
		t.Fatalf("the writer of %d's mmap lock went on", pid)
	}
}

// waitBlocked waits up to d for process pid to sleep uninterruptibly
// (/proc/PID/stat) in system call nr (/proc/PID/syscall).
func waitBlocked(pid, nr int, d time.Duration) bool {
	for end := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		sc, _ := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
		i := strings.LastIndexByte(string(st), ')')
		if i > 0 && i+2 < len(st) && st[i+2] == 'D' && strings.HasPrefix(string(sc), fmt.Sprintf("%d ", nr)) {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}
