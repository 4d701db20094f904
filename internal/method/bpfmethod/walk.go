package bpfmethod

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/bpfiter"
	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/perfdata"
)

// The synth-private record types and walk states of bpf/synth.h.
const (
	recordWalk      = perfdata.RecordType(synthbpf.SynthSynthRecordTypeSYNTH_RECORD_WALK)
	recordMmap2Next = perfdata.RecordType(synthbpf.SynthSynthRecordTypeSYNTH_RECORD_MMAP2NEXT)
	recordPending   = perfdata.RecordType(synthbpf.SynthSynthRecordTypeSYNTH_RECORD_PENDING)
	walkDone        = uint32(synthbpf.SynthSynthWalkStatusSYNTH_WALK_DONE)
	walkMore        = uint32(synthbpf.SynthSynthWalkStatusSYNTH_WALK_MORE)
	walkInvalid     = uint32(synthbpf.SynthSynthWalkStatusSYNTH_WALK_INVALID)
	synthBatchBytes = int(synthbpf.SynthSynthLimitSYNTH_BATCH)
)

// Bits of synth_flags.
const (
	cfgData       = uint32(synthbpf.SynthSynthCfgSYNTH_CFG_DATA)
	cfgBuildID    = uint32(synthbpf.SynthSynthCfgSYNTH_CFG_BUILDID)
	cfgNamespaces = uint32(synthbpf.SynthSynthCfgSYNTH_CFG_NAMESPACES)
)

// walker runs the dumps of a method, one at a time: for each, the
// passes of the maple walk or of the task_vma iterator over the
// processes (this file), each a paced read of an iterator whose records
// come out of the rings (pipe.go) into the hold (hold.go), the lock
// waits of dump_vma (lockwait.go), and the build IDs of the files new
// to the cache (buildid.go). It keeps the hold from dump to dump, for
// its memory, and owns it: Close releases it.
type walker struct {
	lo    *loaded
	rings *rings
	ids   *buildIDs
	live  *liveSide       // takes the live records of every round
	opts  config.Resolved // the dump under way's
	g     *Generation     // the dump under way
	hold  *walkHold
	stuck stuckReads // dump_vma reads given up on (see lockwait.go)
	// readBuf is the bounded buffer iterator reads go through, sized
	// for the walk (readBudget, walkLimits).
	readBuf []byte
	rounds  [2]round // the pipeline's (see pipeline)
	// prev is the last whole MMAP2 record delivered, and next the one a
	// short record of the maple walk expands into (see expandNext).
	prev, next []byte
	lost       uint64    // synth_lost already accounted for
	fault      faultAt   // tests: see injectFault
	hook       *exitHook // tests: see SetExitHook
}

func newWalker(lo *loaded, r *rings, ids *buildIDs, live *liveSide) *walker {
	n := readBudget(r.size)
	if lo.walk == config.WalkMaple {
		_, n = walkLimits(r.size)
	}
	return &walker{lo: lo, rings: r, ids: ids, live: live, hold: newWalkHold(), readBuf: make([]byte, n)}
}

// Close releases the hold's blocks.
func (w *walker) Close() error {
	if w == nil {
		return nil
	}
	return w.hold.Close()
}

// read reads the host for generation g, with the options opts: the
// kernel maps, then the processes with the walk.
func (w *walker) read(ctx context.Context, g *Generation, opts config.Resolved) error {
	w.g, w.opts = g, opts
	d := g.d
	if err := w.configure(); err != nil {
		return err
	}
	start := time.Now()
	if !w.opts.NoKernel {
		if err := d.KernelMaps(w.lo.text); err != nil {
			return err
		}
	}
	if err := d.BPFPrograms(); err != nil {
		return err
	}
	if err := d.Cgroups(); err != nil {
		return err
	}
	d.Stats.Steps = assemble.Time(d.Stats.Steps, "kernel maps", start)
	objs := w.lo.objs
	ran := progTime(objs.loaded()...)
	if err := w.readHeld(ctx, d); err != nil {
		return err
	}
	d.Stats.Steps = append(d.Stats.Steps, objs.takeSteps()...) // programs loaded on the way
	d.Stats.ProgramTime = progTime(objs.loaded()...) - ran
	var lost uint64
	if err := objs.SynthLost.Get(&lost); err != nil {
		return fmt.Errorf("read lost count: %w", err)
	}
	d.Stats.Lost += lost - w.lost
	w.lost = lost
	return nil
}

// configure sets the programs' globals for the dump: its generation and
// what it reads.
func (w *walker) configure() error {
	objs := w.lo.objs
	var flags uint32
	if w.opts.Data {
		flags |= cfgData
	}
	if !w.opts.NoBuildID {
		flags |= cfgBuildID
	}
	if w.opts.Namespaces {
		flags |= cfgNamespaces
		dev, err := procfs.NSDev()
		if err != nil {
			return err
		}
		if err := objs.SynthNsDev.Set(dev); err != nil {
			return fmt.Errorf("set namespace device: %w", err)
		}
	}
	if err := objs.SynthGen.Set(w.g.gen); err != nil {
		return fmt.Errorf("set generation: %w", err)
	}
	if err := objs.SynthFlags.Set(flags); err != nil {
		return fmt.Errorf("set flags: %w", err)
	}
	chunk, _ := walkLimits(w.rings.size)
	if err := objs.ChunkLimit.Set(chunk); err != nil {
		return fmt.Errorf("set chunk limit: %w", err)
	}
	return objs.LastTid.Set(uint32(0))
}

// readHeld reads the host's processes with the walk of the options,
// holding their MMAP2 records, then reads the build IDs of files new to
// the cache in userspace, from the files, and puts them into the held
// records. The records are then written by Generation.Write.
func (w *walker) readHeld(ctx context.Context, d *assemble.Assembler) error {
	h := w.hold
	h.reset(d)
	h.fault = w.fault
	h.pending = w.ids.startPending
	w.hook.begin()
	d.Trailed = true
	// The build IDs' deadline runs from the walk's start: their reads
	// begin as the walk notes their files.
	expired, stop := w.ids.begin()
	defer stop()
	var err error
	start := time.Now()
	if w.lo.walk == config.WalkIter {
		err = w.readVMAIter(ctx, d, h)
	} else {
		err = w.readMaple(ctx, d, h)
	}
	if err != nil {
		return err
	}
	w.hook.reached(HookWalked)
	d.Stats.Steps = assemble.Time(d.Stats.Steps, "walk", start)
	start = time.Now()
	defer func() { d.Stats.Steps = assemble.Time(d.Stats.Steps, "build IDs", start) }()
	if !w.opts.NoBuildID {
		ids, err := w.ids.resolvePending(d, h.mappingsOf, expired)
		if err != nil {
			return err
		}
		h.setBuildIDs(ids)
		if err := w.ids.countCache(d); err != nil {
			return err
		}
	}
	h.sortPids()
	return nil
}

// readMaple reads the processes with the maple walk: one pass of
// dump_tasks over the tasks, more chunks for processes too large for
// one, and the task_vma iterator for processes whose walk did not hold.
func (w *walker) readMaple(ctx context.Context, d *assemble.Assembler, h *walkHold) error {
	if err := w.pass(ctx, d, w.lo.dumpTasks, w.opts.Pids, h.add); err != nil {
		return err
	}
	d.TasksDone(w.opts.Pids)
	w.hook.reached(HookPassed)
	if err := w.resumeWalks(ctx, d, h); err != nil {
		return err
	}
	h.unclosed()
	d.Stats.WalksInvalid = len(h.fallback) // each walk that did not hold
	if len(h.fallback) == 0 {
		return nil
	}
	if err := w.lo.vmaIter(); err != nil {
		return err
	}
	if err := w.passEach(ctx, d, w.lo.dumpVMA, h.fallback, h.addIter); err != nil {
		return err
	}
	w.g.forgetReads(h.dropExiting(h.fallback))
	return nil
}

// readVMAIter reads the processes with the task_vma iterator: a pass of
// dump_task for the threads' FORK and COMM records, then one of
// dump_vma for the MMAP2 records.
func (w *walker) readVMAIter(ctx context.Context, d *assemble.Assembler, h *walkHold) error {
	if err := w.pass(ctx, d, w.lo.dumpTask, w.opts.Pids, d.AddTask); err != nil {
		return err
	}
	live := d.TasksDone(w.opts.Pids)
	w.hook.reached(HookPassed)
	if err := w.vmaPass(ctx, d, h, live); err != nil {
		return err
	}
	h.putCur() // for the list below
	pids := make([]int, 0, len(h.procs))
	for pid := range h.procs {
		pids = append(pids, int(pid))
	}
	w.g.forgetReads(h.dropExiting(pids))
	return nil
}

// resumeWalks runs dump_tasks again, in resume mode, over each process
// whose walk stopped at the chunk limit, until every walk has ended.
func (w *walker) resumeWalks(ctx context.Context, d *assemble.Assembler, h *walkHold) error {
	if len(h.resume) == 0 {
		return nil
	}
	objs := w.lo.objs
	if err := objs.ResumeMode.Set(uint32(1)); err != nil {
		return fmt.Errorf("set resume mode: %w", err)
	}
	defer objs.ResumeMode.Set(uint32(0))
	for len(h.resume) > 0 {
		pids := h.resume
		h.resume = nil
		if err := w.fault.apply(objs, pids); err != nil {
			return err
		}
		clear(h.seen)
		if err := w.passEach(ctx, d, w.lo.dumpTasks, pids, h.add); err != nil {
			return err
		}
	}
	return nil
}

// pass runs one iterator program over every task, or over each of pids
// when the dump is restricted to some processes, feeding its records to
// add in emission order.
func (w *walker) pass(ctx context.Context, d *assemble.Assembler, prog *ebpf.Program, pids []int, add func([]byte) error) error {
	if len(w.opts.Pids) == 0 {
		return w.runIter(ctx, d, prog, 0, add)
	}
	return w.passEach(ctx, d, prog, pids, add)
}

// passEach runs one iterator program over the threads of each of pids;
// a process that is gone is skipped.
func (w *walker) passEach(ctx context.Context, d *assemble.Assembler, prog *ebpf.Program, pids []int, add func([]byte) error) error {
	for _, pid := range pids {
		if prog == w.lo.dumpVMA && w.stuck.has(pid) {
			w.lockedOut(d, pid) // still waiting since an earlier read
			continue
		}
		err := w.runIter(ctx, d, prog, pid, add)
		if errors.Is(err, bpfiter.ErrNoProcess) {
			d.Skip(pid)
			continue
		}
		if errors.Is(err, ErrLockWait) {
			w.lockedOut(d, pid)
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}
