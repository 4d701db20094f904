package testproc

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/procfs"
)

// nsLastPid is the last pid the kernel gave in this process's pid
// namespace: the next clone(2) gets the first free id above it.
const nsLastPid = "/proc/sys/kernel/ns_last_pid"

// ThreadName names the threads StartWrapped has its helper start.
const ThreadName = "below"

// StartWrapped starts a helper for a test, as StartT, with n threads
// named ThreadName whose tids are below the helper's pid, as a process
// has once pids wrap (pid_max is 32768 on many hosts), and returns their
// tids, ascending. It needs root: it writes ns_last_pid, high before the
// helper starts and low before its threads do. That moves where the
// host's next pids come from, and nothing more, so nothing is restored.
// Another process that writes ns_last_pid meanwhile fails the test.
func StartWrapped(t testing.TB, spec Spec, n int) (*Proc, []int) {
	t.Helper()
	pidMax, err := readInt("/proc/sys/kernel/pid_max")
	if err != nil {
		t.Fatal(err)
	}
	// Ids below RESERVED_PIDS (300) are never given again after a wrap;
	// low is above them, high well above low and below pid_max.
	const low = 1000
	if pidMax < 4*low {
		t.Skipf("pid_max is %d: no room for a wrap", pidMax)
	}
	setLastPid(t, pidMax-2*low)
	p := StartT(t, spec)
	if p.Pid <= 2*low {
		t.Fatalf("the helper got pid %d after ns_last_pid was set to %d: another process set it", p.Pid, pidMax-2*low)
	}
	setLastPid(t, low)
	if err := p.command(fmt.Sprintf("below %d", n)); err != nil {
		t.Fatal(err)
	}
	comms, err := p.Comms()
	if err != nil {
		t.Fatal(err)
	}
	var tids []int
	for tid, name := range comms {
		if name == ThreadName {
			tids = append(tids, tid)
		}
	}
	slices.Sort(tids)
	if len(tids) != n || tids[n-1] >= p.Pid {
		t.Fatalf("pid %d: threads %s %v; want %d below the pid", p.Pid, ThreadName, tids, n)
	}
	return p, tids
}

func setLastPid(t testing.TB, pid int) {
	t.Helper()
	if err := os.WriteFile(nsLastPid, []byte(strconv.Itoa(pid)), 0); err != nil {
		t.Fatalf("set ns_last_pid: %v", err)
	}
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// below starts OS threads, each locked to a goroutine for good, until n
// of them have a tid below the process's pid, and names those
// ThreadName. The runtime may hand the first goroutines threads it
// already had; a thread it starts for one gets the next free id.
func (c *child) below(n int) error {
	const tries = 256
	pid := unix.Getpid()
	tids := make(chan int)
	for i := 0; i < tries && n > 0; i++ {
		go func() {
			runtime.LockOSThread()
			tid := unix.Gettid()
			if tid < pid {
				unix.Prctl(unix.PR_SET_NAME, uintptr(unsafePtr(ThreadName)), 0, 0, 0)
			}
			tids <- tid
			select {} // keep the thread, and its name
		}()
		if <-tids < pid {
			n--
		}
	}
	if n > 0 {
		return fmt.Errorf("below: %d threads short after %d", n, tries)
	}
	return nil
}

// init keeps the main goroutine of a helper whose leader is to exit
// (Spec.ZombieLeader) on the process's main thread: LockOSThread in an
// init function runs main.main, and Main in it, on that thread.
func init() {
	if js, ok := os.LookupEnv(envSpec); ok && strings.Contains(js, `"ZombieLeader":true`) {
		runtime.LockOSThread()
	}
}

// awaitZombie returns once the process's leader is a zombie, or fails
// the helper after 10 s.
func awaitZombie() {
	pid := os.Getpid()
	deadline := time.Now().Add(10 * time.Second)
	for !procfs.Exiting(pid) {
		if time.Now().After(deadline) {
			fail(fmt.Errorf("leader %d not a zombie after 10s", pid))
		}
		time.Sleep(time.Millisecond)
	}
}
