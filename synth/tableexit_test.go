package synth_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/testenv"
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

// flushApply is flushInto with apply for each record.
func flushApply(t *testing.T, s *synth.Session, apply func(*synth.Record)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	var rec synth.Record
	for {
		err := s.ReadContext(ctx, &rec)
		if err == synth.ErrFlushed {
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
// before the dump that finds the zombie, and after it (its time is then
// before the dump's read of the zombie, so Superseded, as it was before
// the dump left exiting tasks out).
func TestTableDropsZombie(t *testing.T) {
	eachWalk(t, tableDropsZombie)
}

// eachWalk runs test with a Session of each walk.
func eachWalk(t *testing.T, test func(*testing.T, string)) {
	for _, walk := range []string{synth.WalkMaple, synth.WalkIter} {
		t.Run(walk, func(t *testing.T) {
			if walk == synth.WalkMaple {
				needMaple(t)
			} else {
				testenv.Root(t)
			}
			test(t, walk)
		})
	}
}

func tableDropsZombie(t *testing.T, walk string) {
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
// behind.
func TestTableExitsDuringDumps(t *testing.T) {
	eachWalk(t, tableExitsDuringDumps)
}

func tableExitsDuringDumps(t *testing.T, walk string) {
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
	gone, zombies := map[uint32]bool{}, map[uint32]bool{}
	note := func() {
		g, z := keptAfterExit(t, s, tb, apply)
		for _, pid := range g {
			gone[pid] = true
		}
		for _, pid := range z {
			zombies[pid] = true
		}
	}
	for range dumps {
		dumpInto(t, s, tb, nil)
		note()
	}
	close(stop)
	<-done
	flushInto(t, s, tb, nil)
	note()
	if len(gone)+len(zombies) != 0 {
		t.Errorf("in %d dumps, the table kept processes that had exited: %d gone from /proc %v, %d zombies %v",
			dumps, len(gone), slices.Sorted(maps.Keys(gone)), len(zombies), slices.Sorted(maps.Keys(zombies)))
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
