package bpfmethod

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/cilium/ebpf"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/bpfiter"
)

// The kernel's task_vma iterator (dump_vma) takes each process's
// mmap_lock with mmap_read_lock_killable (kernel/bpf/task_iter.c, 6.1 to
// 6.18), a wait that only a fatal signal ends. A process that holds its
// lock for writing, or a writer queued behind a reader that does not let
// go (a fault on a hung FUSE file), holds the read(2) of the iterator
// until the lock comes free. So dump_vma is read on a goroutine of its
// own, and a read that has not returned within Options.ProcMapTimeout is
// given up on, as perf gives up on a /proc/PID/maps read past its
// --proc-map-timeout: the process is left out and named in
// Stats.LockedOut.
//
// The read itself cannot be called back. When the lock comes free the
// instance goes on, so before anything else runs, giving up fences it:
// vma_session_min is set past its session (bpf/synth.bpf.c), so that it
// stops at its next VMA, and an update of a map of maps waits for every
// BPF program then running to end (maybe_wait_bpf_programs() in
// kernel/bpf/syscall.c calls synchronize_rcu()). What it emitted before
// is then all in the rings, drained and dropped with the process.

// ErrLockWait is the error of a read given up on: a process's mmap lock
// was not taken within Options.ProcMapTimeout.
var ErrLockWait = errors.New("mmap lock not taken in time")

// iterRead is what one read of an iterator returned.
type iterRead struct {
	n   int
	err error
}

// timedReader reads an iterator instance on a goroutine of its own, each
// read bounded by wait. After a read is given up on, the goroutine keeps
// the instance and the buffer until the kernel returns, then closes the
// instance and calls stuckEnd.
type timedReader struct {
	it     io.ReadCloser
	wait   time.Duration
	timer  *time.Timer
	req    chan []byte
	res    chan iterRead
	gaveUp bool
}

func newTimedReader(it io.ReadCloser, wait time.Duration, stuckEnd func()) *timedReader {
	t := &timedReader{it: it, wait: wait, req: make(chan []byte), res: make(chan iterRead, 1)}
	go func() {
		for buf := range t.req {
			n, err := t.it.Read(buf)
			t.res <- iterRead{n, err}
		}
		t.it.Close()
		if t.gaveUp { // set before Close closed req
			stuckEnd()
		}
	}()
	return t
}

// Read reads the instance into buf, or gives up after t.wait: then buf
// belongs to the reading goroutine until the kernel returns.
func (t *timedReader) Read(buf []byte) (int, error) {
	if t.gaveUp {
		return 0, ErrLockWait
	}
	t.req <- buf
	if t.timer == nil {
		t.timer = time.NewTimer(t.wait)
	} else {
		t.timer.Reset(t.wait)
	}
	select {
	case r := <-t.res:
		t.timer.Stop()
		return r.n, r.err
	case <-t.timer.C:
		t.gaveUp = true
		return 0, ErrLockWait
	}
}

// Close ends the reading goroutine once its read, if any, has returned.
func (t *timedReader) Close() error {
	close(t.req)
	return nil
}

// stuckReads are the processes whose dump_vma read was given up on and
// is still in the kernel, by pid (0: an instance over every process).
// A process is not read again while its read is there: it would wait
// again, behind the same lock.
type stuckReads struct {
	mu   sync.Mutex
	pids map[int]int
}

func (s *stuckReads) add(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pids == nil {
		s.pids = make(map[int]int)
	}
	s.pids[pid]++
}

func (s *stuckReads) remove(pid int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pids[pid]--; s.pids[pid] <= 0 {
		delete(s.pids, pid)
	}
}

// has reports whether a read of process pid is still in the kernel.
func (s *stuckReads) has(pid int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pids[pid] > 0
}

// any reports whether any read given up on is still in the kernel.
func (s *stuckReads) any() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pids) > 0
}

// vmaReader returns the reader of a dump_vma instance over process pid
// (0: every process), its reads bounded by Options.ProcMapTimeout. A read
// given up on marks pid stuck until the kernel returns it.
func (w *walker) vmaReader(it io.ReadCloser, pid int) *timedReader {
	return newTimedReader(it, w.opts.ProcMapWait(), func() { w.stuck.remove(pid) })
}

// giveUp fences the dump_vma instance whose read was given up on (see
// the comment at the top of this file): once it returns, that instance
// emits nothing more, and what it emitted is in the rings.
func (w *walker) giveUp() error {
	objs := w.lo.objs
	p, err := objs.program(synthbpf.SynthProgSessionProbe)
	if err != nil {
		return err
	}
	if err := bpfiter.Drain(p, os.Getpid()); err != nil {
		return err
	}
	var session uint64
	if err := objs.SessionLast.Get(&session); err != nil {
		return fmt.Errorf("read iterator session: %w", err)
	}
	if err := objs.VmaSessionMin.Set(session); err != nil {
		return fmt.Errorf("fence iterator: %w", err)
	}
	// The read's buffer is the stuck goroutine's now.
	w.readBuf = make([]byte, len(w.readBuf))
	return waitPrograms()
}

// lockedOut leaves out process pid, whose mmap lock was not taken in
// time: what its walk or an earlier read held is dropped.
func (w *walker) lockedOut(d *assemble.Assembler, pid int) {
	w.hold.drop(uint32(pid))
	d.LockedOut(pid)
}

// vmaPass reads the processes with the task_vma iterator: pids, or every
// process when the dump is not restricted to some. When a whole-host
// instance is given up on, the process it waited for is the last one it
// emitted records of, or one after: the processes from that one on are
// read one by one.
func (w *walker) vmaPass(ctx context.Context, d *assemble.Assembler, h *walkHold, pids []int) error {
	if len(w.opts.Pids) == 0 {
		if !w.stuck.any() {
			err := w.runIter(ctx, d, w.lo.dumpVMA, 0, h.addIter)
			if !errors.Is(err, ErrLockWait) {
				return err
			}
		}
		last := h.lastPid()
		h.drop(last)
		pids = pids[:0]
		for _, tgid := range d.Groups() {
			if tgid >= last {
				pids = append(pids, int(tgid))
			}
		}
	}
	return w.passEach(ctx, d, w.lo.dumpVMA, pids, h.addIter)
}

// waitPrograms returns once every BPF program running when it was called
// has ended: the kernel waits for them (synchronize_rcu()) in each
// update of a map of maps.
func waitPrograms() error {
	inner := &ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1}
	outer, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.ArrayOfMaps, KeySize: 4, ValueSize: 4,
		MaxEntries: 1, InnerMap: inner})
	if err != nil {
		return fmt.Errorf("wait for BPF programs: %w", err)
	}
	defer outer.Close()
	m, err := ebpf.NewMap(inner)
	if err != nil {
		return fmt.Errorf("wait for BPF programs: %w", err)
	}
	defer m.Close()
	if err := outer.Put(uint32(0), m); err != nil {
		return fmt.Errorf("wait for BPF programs: %w", err)
	}
	return nil
}
