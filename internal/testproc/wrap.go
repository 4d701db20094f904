package testproc

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/internal/testenv"
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
// The helpers of concurrent tests take turns (a lock file); should
// another process write ns_last_pid meanwhile, the helper is started
// again, three times at most.
func StartWrapped(t testing.TB, spec Spec, n int) (*Proc, []int) {
	t.Helper()
	_, err := os.Stat(nsLastPid)
	testenv.Option(t, err == nil, "CONFIG_CHECKPOINT_RESTORE ("+nsLastPid+")")
	if spec.Dir == "" {
		spec.Dir = t.TempDir()
	}
	for try := 1; ; try++ {
		p, tids, err := startWrapped(spec, n)
		if err == nil {
			t.Cleanup(func() { p.Stop() })
			return p, tids
		}
		if errors.Is(err, errNoRoom) {
			t.Skip(err)
		}
		if try == 3 {
			t.Fatal(err)
		}
		t.Logf("try %d: %v", try, err)
	}
}

var errNoRoom = errors.New("pid_max leaves no room for a wrap")

func startWrapped(spec Spec, n int) (*Proc, []int, error) {
	pidMax, err := readInt("/proc/sys/kernel/pid_max")
	if err != nil {
		return nil, nil, err
	}
	// Ids below RESERVED_PIDS (300) are never given again after a wrap;
	// low is above them, high well above low and below pid_max.
	const low = 1000
	high := pidMax - 2*low
	if high < 2*low {
		return nil, nil, fmt.Errorf("%w: %d", errNoRoom, pidMax)
	}
	unlock, err := lockLastPid()
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	if err := setLastPid(high); err != nil {
		return nil, nil, err
	}
	p, err := Start(spec)
	if err != nil {
		return nil, nil, err
	}
	tids, err := p.below(n, low)
	if err != nil {
		p.Stop()
		return nil, nil, err
	}
	return p, tids, nil
}

// below has p start n threads after ns_last_pid is set to low, and
// returns their tids, below p's pid.
func (p *Proc) below(n, low int) ([]int, error) {
	if p.Pid <= 2*low {
		return nil, fmt.Errorf("the helper got pid %d: another process set ns_last_pid", p.Pid)
	}
	if err := setLastPid(low); err != nil {
		return nil, err
	}
	if err := p.command(fmt.Sprintf("below %d", n)); err != nil {
		return nil, err
	}
	comms, err := p.Comms()
	if err != nil {
		return nil, err
	}
	var tids []int
	for tid, name := range comms {
		if name == ThreadName {
			tids = append(tids, tid)
		}
	}
	slices.Sort(tids)
	if len(tids) != n || tids[n-1] >= p.Pid {
		return nil, fmt.Errorf("pid %d: threads %s %v; want %d below the pid", p.Pid, ThreadName, tids, n)
	}
	return tids, nil
}

// lockLastPid takes the lock that the helpers of concurrent tests (of
// several test binaries: go test runs packages in parallel) take while
// they set ns_last_pid and start their processes.
func lockLastPid() (unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "synth-testproc-ns_last_pid.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}

func setLastPid(pid int) error {
	if err := os.WriteFile(nsLastPid, []byte(strconv.Itoa(pid)), 0); err != nil {
		return fmt.Errorf("set ns_last_pid: %w", err)
	}
	return nil
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
