package testproc

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// StartSleep starts cmd, a command that ends in exec'ing sleep(1) (maybe
// through sh, unshare or a copy under another name), kills it when the
// test ends, and returns its pid once it is asleep: exec'd into a file
// whose path ends in exe, and blocked in nanosleep. From then on its
// mappings do not change; a process merely exec'd may still have ld.so
// mapping its libraries, which a loaded host shows for long.
func StartSleep(t testing.TB, exe string, cmd *exec.Cmd) int {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if err := AwaitSleep(cmd.Process.Pid, exe, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// AwaitSleep waits until process pid runs a file whose path ends in exe
// and is blocked in nanosleep or clock_nanosleep, as /proc/PID/syscall
// shows; it errs after timeout.
func AwaitSleep(pid int, exe string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		path, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if strings.HasSuffix(path, exe) && inNanosleep(pid) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("process %d is not asleep in %s after %v (exe %q)", pid, exe, timeout, path)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// inNanosleep says whether /proc/PID/syscall shows the task blocked in
// one of the sleep calls; "running" or an unreadable file says no.
func inNanosleep(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/syscall", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return false
	}
	nr, err := strconv.Atoi(f[0])
	return err == nil && (nr == unix.SYS_NANOSLEEP || nr == unix.SYS_CLOCK_NANOSLEEP)
}
