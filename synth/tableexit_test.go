package synth_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/synth"
)

// procExited reports whether process pid has exited, as the Table
// sees it: /proc no longer has it, or has it as a zombie (every thread
// exited, the parent has not reaped it yet). A process whose leader
// exited while other threads run is not a zombie: it has more than one
// thread.
func procExited(pid uint32) (exited, zombie bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true, false
	}
	// After the comm's closing parenthesis: state (field 3) ...
	// num_threads (field 20).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return false, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 18 || f[0] != "Z" && f[0] != "X" {
		return false, false
	}
	n, err := strconv.Atoi(f[17])
	return err == nil && n <= 1, err == nil && n <= 1
}

// keptAfterExit returns the processes tb holds that have exited (see
// procExited), after the live stream settled: a process seen exited is
// looked at again after a Flush, which applies (with apply) every
// record the kernel wrote before, its EXIT among them. gone are those
// /proc no longer has, zombies those it has as zombies. A pid taken by
// a new process meanwhile is not counted.
func keptAfterExit(t *testing.T, s *synth.Session, tb *synth.Table, apply func(*synth.Record)) (gone, zombies []uint32) {
	t.Helper()
	var seen []uint32
	for _, p := range tb.Processes() {
		if exited, _ := procExited(p.Pid); exited {
			seen = append(seen, p.Pid)
		}
	}
	if len(seen) == 0 {
		return nil, nil
	}
	flushApply(t, s, apply)
	for _, pid := range seen {
		if _, ok := tb.Process(pid); !ok {
			continue
		}
		switch exited, zombie := procExited(pid); {
		case zombie:
			zombies = append(zombies, pid)
		case exited:
			gone = append(gone, pid)
		}
	}
	return gone, zombies
}

// flushApply hands apply every live record the rings hold (a Flush),
// without a dump.
func flushApply(t *testing.T, s *synth.Session, apply func(*synth.Record)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), stuckBound)
	defer cancel()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	var rec synth.Record
	for {
		err := s.ReadContext(ctx, &rec)
		if errors.Is(err, synth.ErrFlushed) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		apply(&rec)
	}
}

// startZombie starts a child that exits at once and is not reaped:
// a zombie until reap is called.
func startZombie(t *testing.T) (pid uint32, reap func()) {
	t.Helper()
	c := exec.Command("/bin/true")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	pid = uint32(c.Process.Pid)
	for deadline := time.Now().Add(5 * time.Second); ; {
		if _, zombie := procExited(pid); zombie {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("child %d is no zombie after 5s", pid)
		}
		time.Sleep(time.Millisecond)
	}
	return pid, func() { c.Wait() }
}

// The Table drops a process at its EXIT, and a dump never brings it
// back: a zombie (exited, not yet reaped) is no process of the table,
// though /proc lists it, since nothing would remove it when its parent
// reaps it, which no record reports. Both orders: the EXIT applied
// before the dump that finds the zombie, and after it (the dump does not
// read the zombie, and its end removes it; the EXIT then removes nothing
// more).
func TestTableDropsZombie(t *testing.T) {
	eachWalk(t, tableDropsZombie)
}

// eachWalk runs test with a Session of each walk.
func eachWalk(t *testing.T, test func(*testing.T, synth.Walk)) {
	for _, walk := range []synth.Walk{synth.WalkMaple, synth.WalkIter} {
		t.Run(walk.String(), func(t *testing.T) {
			if walk == synth.WalkMaple {
				needMaple(t)
			} else {
				testenv.Root(t)
			}
			test(t, walk)
		})
	}
}

func tableDropsZombie(t *testing.T, walk synth.Walk) {
	s, err := synth.NewSession(synth.SessionOptions{Options: synth.Options{Walk: walk}, Unmaps: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb := synth.NewTable()
	dumpInto(t, s, tb, nil)
	absent := func(what string, pid uint32) {
		t.Helper()
		if p, ok := tb.Process(pid); ok {
			t.Errorf("%s: the table holds exited process %d (%q, %d mappings)", what, pid, p.Comm, len(p.Mappings))
		}
	}
	for _, flushFirst := range []bool{true, false} {
		pid, reap := startZombie(t)
		if flushFirst {
			flushInto(t, s, tb, nil)
			absent("EXIT applied", pid)
		}
		dumpInto(t, s, tb, nil)
		absent(fmt.Sprintf("zombie dumped (EXIT read first: %v)", flushFirst), pid)
		if at, ok := s.ReadAt(pid); ok {
			t.Errorf("the dump read zombie %d, at %d: a read after its EXIT supersedes it", pid, at)
		}
		reap()
		flushInto(t, s, tb, nil)
		absent(fmt.Sprintf("zombie reaped (EXIT read first: %v)", flushFirst), pid)
	}
}

// An agent's loop while short processes start and exit, reaped at once
// (os/exec's Run) or late (zombies for a while): after every dump, once
// the live stream has settled, the table holds no process that has
// exited. A task that exits while a dump visits it must leave nothing
// behind. A turn in which the kernel dropped live records (a full ring
// on a busy host), or the one before it, may keep the processes whose
// EXIT it dropped, until the next dump: they are excused, as TestSoak
// excuses them (exitedKept).
func TestTableExitsDuringDumps(t *testing.T) {
	eachWalk(t, tableExitsDuringDumps)
}

func tableExitsDuringDumps(t *testing.T, walk synth.Walk) {
	s, err := synth.NewSession(synth.SessionOptions{Options: synth.Options{Walk: walk}, Unmaps: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb := synth.NewTable()
	apply := func(rec *synth.Record) {
		if err := tb.Apply(rec); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	done := startExiters(stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-done
	}()
	const dumps = 30
	turn := 0
	kept := &exitedKept{gone: map[uint32]bool{}, zombies: map[uint32]bool{}, excused: map[uint32]bool{}, t: t,
		describe: func(pid uint32) string {
			p, _ := tb.Process(pid)
			_, zombie := procExited(pid)
			at, read := s.ReadAt(pid)
			return fmt.Sprintf("turn %d (%d lost so far): pid %d %q, %d mappings, a zombie in /proc: %v; the last dump read it: %v (at %d)",
				turn, lostSoFar(s), pid, p.Comm, len(p.Mappings), zombie, read, at)
		}}
	note := func(lost uint64) {
		gone, zombies := keptAfterExit(t, s, tb, apply)
		kept.note(lostSoFar(s) != lost, gone, zombies)
	}
	for range dumps {
		turn++
		lost := lostSoFar(s)
		dumpInto(t, s, tb, nil)
		note(lost)
	}
	close(stop)
	<-done
	// The live stream alone, twice: the first turn applies the EXITs of
	// the last children, the second takes a PERF_RECORD_LOST the kernel
	// wrote late for the first. Neither dumps, so what the last turn
	// kept is kept still, and judged with that turn (noteFlushed).
	for range 2 {
		turn++
		lost := lostSoFar(s)
		flushInto(t, s, tb, nil)
		gone, zombies := keptAfterExit(t, s, tb, apply)
		kept.noteFlushed(lostSoFar(s) != lost, gone, zombies)
	}
	kept.flush()
	if kept.count() != 0 {
		t.Errorf("in %d dumps, the table kept processes that had exited: %v", dumps, kept)
	} else if kept.lossyTurns > 0 {
		t.Logf("in %d dumps: %v", dumps, kept)
	}
}

// startExiters starts, until stop is closed, short children of this
// process: two loops that reap each at once, and one that starts four
// at a time and reaps them 150 ms later. done is closed once every
// child is reaped.
func startExiters(stop <-chan struct{}) (done <-chan struct{}) {
	var wg sync.WaitGroup
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stopped() {
				_ = exec.Command("/bin/true").Run()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stopped() {
			var cs []*exec.Cmd
			for range 4 {
				c := exec.Command("/bin/true")
				if c.Start() == nil {
					cs = append(cs, c)
				}
			}
			select {
			case <-stop:
			case <-time.After(150 * time.Millisecond):
			}
			for _, c := range cs {
				_ = c.Wait()
			}
		}
	}()
	ch := make(chan struct{})
	go func() {
		wg.Wait()
		close(ch)
	}()
	return ch
}

// A process killed while one of its threads waits uninterruptibly (a
// read a FUSE server never answers) is dying, its main thread's EXIT
// reported and the thread still to come: no dump brings it back into
// the table, though the thread still runs, and once the thread is gone
// nothing of it is left.
func TestTableDropsDyingProcess(t *testing.T) {
	eachWalk(t, tableDropsDyingProcess)
}

func tableDropsDyingProcess(t *testing.T, walk synth.Walk) {
	blocked, abort := testproc.HungFUSE(t)
	c := exec.Command("/usr/bin/python3", "-c", stuckReader, blocked)
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := false
	defer func() {
		abort()
		if !reaped {
			c.Process.Kill()
			c.Wait()
		}
	}()
	pid := uint32(c.Process.Pid)
	if !threadInSyscall(pid, unix.SYS_PREAD64, 5*time.Second) {
		t.Fatalf("no thread of %d waits in pread(2) on the hung server", pid)
	}
	s, err := synth.NewSession(synth.SessionOptions{Options: synth.Options{Walk: walk}, Unmaps: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb := synth.NewTable()
	dumpInto(t, s, tb, nil)
	if _, ok := tb.Process(pid); !ok {
		t.Fatalf("process %d is not in the table", pid)
	}
	if err := c.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Its main thread exits; the reader cannot, until the server
	// answers.
	for deadline := time.Now().Add(5 * time.Second); !leaderZombie(pid); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the main thread of %d did not exit", pid)
		}
	}
	flushInto(t, s, tb, nil)
	if _, ok := tb.Process(pid); ok {
		t.Fatalf("process %d is in the table after its main thread's EXIT", pid)
	}
	dumpInto(t, s, tb, nil)
	if p, ok := tb.Process(pid); ok {
		t.Errorf("a dump brought back dying process %d (%d mappings)", pid, len(p.Mappings))
	}
	if at, ok := s.ReadAt(pid); ok {
		t.Errorf("the dump read dying process %d, at %d", pid, at)
	}
	abort()
	c.Wait()
	reaped = true
	flushInto(t, s, tb, nil)
	if _, ok := tb.Process(pid); ok {
		t.Errorf("process %d is in the table after it was reaped", pid)
	}
}

// stuckReader is a Python program whose main thread sleeps while
// another reads, through /proc/self/mem, a page of its private mapping
// of the file argv[1], of a FUSE server that never answers: a remote
// access, whose fault waits for the server uninterruptibly, SIGKILL or
// not (see testproc.LockMM).
const stuckReader = `import ctypes, mmap, os, sys, threading, time
f = open(sys.argv[1], 'rb')
m = mmap.mmap(f.fileno(), 4096, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE)
addr = ctypes.addressof(ctypes.c_char.from_buffer(m))
def read():
    fd = os.open('/proc/self/mem', os.O_RDONLY)
    os.pread(fd, 1, addr)
threading.Thread(target=read, daemon=True).start()
time.sleep(600)
`

// threadInSyscall waits up to d for a thread of process pid other than
// its main thread to be in system call nr (/proc/PID/task/TID/syscall).
func threadInSyscall(pid uint32, nr int, d time.Duration) bool {
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		for _, task := range tasks {
			if task.Name() == strconv.Itoa(int(pid)) {
				continue
			}
			sc, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/syscall", pid, task.Name()))
			if strings.HasPrefix(string(sc), fmt.Sprintf("%d ", nr)) {
				return true
			}
		}
	}
	return false
}

// leaderZombie reports whether the main thread of process pid has
// exited (state Z), whatever its other threads do.
func leaderZombie(pid uint32) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := bytes.LastIndexByte(b, ')')
	return err == nil && i > 0 && i+2 < len(b) && b[i+2] == 'Z'
}
