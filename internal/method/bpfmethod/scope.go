package bpfmethod

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/perfring"
	"github.com/synth-dev/synth/perfdata"
)

// Scope says which tasks an event of the rings covers, as perf record
// opens its events for a target. The zero value covers every task on
// each CPU (-a).
type Scope struct {
	// Tasks, when set, has the event opened per task and per CPU: perf
	// record -p, -t, -u and a command. A task that has exited by then is
	// left out.
	Tasks []int
	// Relist, when set with Tasks, lists the tasks again once their
	// events are open; events are opened for the new ones, and the list
	// read again, until it holds no new task. A thread that an uncovered
	// thread created while the events opened is then covered too (one
	// that a covered thread creates inherits its event, with AttrInherit).
	Relist func() ([]int, error)
	// Cgroup, when set, is a cgroup directory: the event is opened per
	// CPU for the tasks in that cgroup and below it
	// (PERF_FLAG_PID_CGROUP), as perf record -G.
	Cgroup *os.File
}

// SampleScope is the Scope of the sampling event; AttrInherit in the
// Sampler's flags says whether children are sampled.
type SampleScope = Scope

// maxRelists bounds the rounds of Scope.Relist: a process that creates
// threads without end cannot hold a session's opening for ever. Threads
// created after the last round by threads already covered inherit
// their events anyway.
const maxRelists = 64

// hostRecords are the attr bits of the side-band records the kernel
// reports to per-CPU events only when the task is not the event's:
// KSYMBOL, BPF_EVENT and CGROUP come from perf_iterate_sb() with no task
// context, so a per-task event sees only its own task's. A scoped
// side-band takes them from the per-CPU event that owns each ring.
const hostRecords = perfdata.AttrKsymbol | perfdata.AttrBPFEvent | perfdata.AttrCgroup

// ownerAttr is the attr of the event that owns a CPU's side-band ring:
// for a side-band of every task, the whole side-band (LiveAttr); for a
// scoped one, only the records of the host (hostRecords), the tasks'
// own going to the scoped events redirected into the ring.
func (c *RingConfig) ownerAttr() perfdata.Attr {
	a := c.LiveAttr()
	if c.LiveScope != nil {
		a.Flags &^= perfdata.AttrMmap | perfdata.AttrMmap2 | perfdata.AttrComm | perfdata.AttrCommExec |
			perfdata.AttrTask | perfdata.AttrMmapData | perfdata.AttrNamespaces
	}
	return a
}

// taskAttr is the attr of the scoped side-band events: the tasks' own
// records, and their children's (inherited: a mapping a child makes is
// the target's too, and a thread created after the events opened is
// covered).
func (c *RingConfig) taskAttr() perfdata.Attr {
	a := c.LiveAttr()
	a.Flags &^= hostRecords | perfdata.AttrWatermark
	a.Flags |= perfdata.AttrInherit
	a.WakeupEvents = 0
	return a
}

// openScoped opens the scoped side-band (c.LiveScope) into the rings'
// owners, before any sampler: both are open before the dump begins, so
// that every mapping of the target is either read by the dump or
// reported live.
func (r *rings) openScoped(c *RingConfig) error {
	sc := c.LiveScope
	a := c.taskAttr()
	if sc.Cgroup != nil {
		return r.openCgroup(&a, sc.Cgroup, &r.tasks, "side-band")
	}
	return r.openTasks(&a, sc, &r.tasks, "side-band")
}

// openTasks opens a on every CPU for each task of sc, redirected into
// the CPU's side-band ring, and for the tasks sc.Relist finds, until it
// finds no new one. A task that exited meanwhile is left out; no task
// at all is ErrNoTask.
func (r *rings) openTasks(a *perfdata.Attr, sc *Scope, into *[]*perfring.Event, what string) error {
	opened := make(map[int]bool)
	before := len(*into)
	tids := sc.Tasks
	for range maxRelists {
		n := 0
		for _, tid := range tids {
			if opened[tid] {
				continue
			}
			opened[tid] = true
			n++
			if err := r.openTask(a, tid, into, what); err != nil {
				return err
			}
		}
		if n == 0 || sc.Relist == nil {
			break
		}
		var err error
		if tids, err = sc.Relist(); err != nil {
			return err
		}
	}
	if len(*into) == before {
		return fmt.Errorf("open %s event: %w", what, ErrNoTask)
	}
	return nil
}

// openTask opens a for task tid on every CPU, each redirected into that
// CPU's side-band ring. A task that has exited is no error.
func (r *rings) openTask(a *perfdata.Attr, tid int, into *[]*perfring.Event, what string) error {
	for i, cpu := range r.cpus {
		if !r.covers(cpu) {
			continue
		}
		ev, err := perfring.Open(a, tid, cpu)
		if errors.Is(err, unix.ESRCH) {
			return nil // exited since it was listed
		}
		if err := r.redirect(ev, err, i, what, fmt.Sprintf("task %d", tid)); err != nil {
			return err
		}
		*into = append(*into, ev)
	}
	return nil
}

// openCgroup opens a on every CPU for the tasks of a cgroup, each
// redirected into that CPU's side-band ring.
func (r *rings) openCgroup(a *perfdata.Attr, cgroup *os.File, into *[]*perfring.Event, what string) error {
	for i, cpu := range r.cpus {
		if !r.covers(cpu) {
			continue
		}
		ev, err := perfring.OpenCgroup(a, cgroup, cpu)
		if err := r.redirect(ev, err, i, what, "its cgroup"); err != nil {
			return err
		}
		*into = append(*into, ev)
	}
	return nil
}

// redirect sends the records of ev, just opened with error err, into
// the side-band ring of the i-th CPU.
func (r *rings) redirect(ev *perfring.Event, err error, i int, what, whom string) error {
	if errors.Is(err, os.ErrPermission) {
		return &PermissionError{Op: "perf_event_open", Err: err}
	}
	if err != nil {
		return fmt.Errorf("open %s event on cpu %d for %s: %w", what, r.cpus[i], whom, err)
	}
	if err := ev.SetOutput(r.live[i]); err != nil {
		ev.Close()
		return fmt.Errorf("cpu %d: %w", r.cpus[i], err)
	}
	return nil
}
