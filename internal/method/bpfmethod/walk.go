package bpfmethod

import (
	"context"
	"fmt"
	"time"
	"unsafe"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/assemble"
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

// walkLimits splits half a ring between the two things one paced read
// may put into it: the records of the objects before the read's budget
// ran out (budget pacing bytes' worth), and the last object's, which is
// at most a chunk plus the batch it found not yet flushed (less than two
// SYNTH_BATCH). A chunk's pacing bytes must also fit in the iterator's
// 32 KiB seq_file next to the budget, or the kernel would replay the
// object, and the program emit it twice.
func walkLimits(ringBytes int) (chunk uint32, budget int) {
	half := ringBytes / 2
	budget = min(half/4/paceUnit, 16<<10)
	c := half - budget*paceUnit - 2*synthBatchBytes
	return uint32(min(c, 512<<10)), budget
}

// readHeld reads the host's processes with the walk of the options,
// holding their MMAP2 records, then reads the build IDs of files new to
// the cache in userspace, from the files, and puts them into the held
// records. The records are then written by Run.Write.
func (b *BPF) readHeld(ctx context.Context, d *assemble.Assembler) error {
	if b.hold == nil {
		b.hold = newWalkHold()
	}
	h := b.hold
	h.reset(d)
	h.fault = b.fault
	h.pending = b.ids.startPending
	d.Trailed = true
	// The build IDs' deadline runs from the walk's start: their reads
	// begin as the walk notes their files.
	expired, stop := b.ids.begin()
	defer stop()
	var err error
	start := time.Now()
	if b.walk == assemble.WalkIter {
		err = b.readVMAIter(ctx, d, h)
	} else {
		err = b.readMaple(ctx, d, h)
	}
	if err != nil {
		return err
	}
	d.Stats.Steps = assemble.Time(d.Stats.Steps, "walk", start)
	start = time.Now()
	defer func() { d.Stats.Steps = assemble.Time(d.Stats.Steps, "build IDs", start) }()
	if !b.opts.NoBuildID {
		ids, err := b.ids.resolvePending(d, h.mappingsOf, expired)
		if err != nil {
			return err
		}
		h.setBuildIDs(ids)
		if err := b.ids.countCache(d); err != nil {
			return err
		}
	}
	h.sortPids()
	return nil
}

// readMaple reads the processes with the maple walk: one pass of
// dump_tasks over the tasks, more chunks for processes too large for
// one, and the task_vma iterator for processes whose walk did not hold.
func (b *BPF) readMaple(ctx context.Context, d *assemble.Assembler, h *walkHold) error {
	if err := b.pass(ctx, d, b.dumpTasks, b.opts.Pids, h.add); err != nil {
		return err
	}
	d.TasksDone(b.opts.Pids)
	if err := b.resumeWalks(ctx, d, h); err != nil {
		return err
	}
	h.unclosed()
	d.Stats.WalksInvalid = h.invalid
	if len(h.fallback) == 0 {
		return nil
	}
	if err := b.vmaIter(); err != nil {
		return err
	}
	if err := b.passEach(ctx, d, b.dumpVMA, h.fallback, h.addIter); err != nil {
		return err
	}
	b.forgetReads(h.dropExiting(h.fallback))
	return nil
}

// readVMAIter reads the processes with the task_vma iterator: a pass of
// dump_task for the threads' FORK and COMM records, then one of
// dump_vma for the MMAP2 records.
func (b *BPF) readVMAIter(ctx context.Context, d *assemble.Assembler, h *walkHold) error {
	if err := b.pass(ctx, d, b.dumpTask, b.opts.Pids, d.AddTask); err != nil {
		return err
	}
	live := d.TasksDone(b.opts.Pids)
	if err := b.vmaPass(ctx, d, h, live); err != nil {
		return err
	}
	h.putCur() // for the list below
	pids := make([]int, 0, len(h.procs))
	for pid := range h.procs {
		pids = append(pids, int(pid))
	}
	b.forgetReads(h.dropExiting(pids))
	return nil
}

// forgetReads forgets the read times of processes whose records were
// dropped: the dump did not read them (ReadTimes), so none of their live
// records is superseded by it.
func (b *BPF) forgetReads(pids []uint32) {
	for _, pid := range pids {
		delete(b.readAt, pid)
	}
}

// resumeWalks runs dump_tasks again, in resume mode, over each process
// whose walk stopped at the chunk limit, until every walk has ended.
func (b *BPF) resumeWalks(ctx context.Context, d *assemble.Assembler, h *walkHold) error {
	if len(h.resume) == 0 {
		return nil
	}
	if err := b.objs.ResumeMode.Set(uint32(1)); err != nil {
		return fmt.Errorf("set resume mode: %w", err)
	}
	defer b.objs.ResumeMode.Set(uint32(0))
	for len(h.resume) > 0 {
		pids := h.resume
		h.resume = nil
		if err := b.fault.apply(b.objs, pids); err != nil {
			return err
		}
		clear(h.seen)
		if err := b.passEach(ctx, d, b.dumpTasks, pids, h.add); err != nil {
			return err
		}
	}
	return nil
}

// mmap2Next is struct synth_mmap2_next after its synth_hdr: the short
// MMAP2 record of the maple walk. Its fields are read by offset from
// the generated layout, so that the C struct and this reader cannot
// drift apart.
type mmap2Next = synthbpf.SynthSynthMmap2Next

var (
	nextHdr  = unsafe.Offsetof(mmap2Next{}.Header)
	nextPid  = int(unsafe.Offsetof(mmap2Next{}.Pid) - nextHdr)
	nextAddr = int(unsafe.Offsetof(mmap2Next{}.Addr) - nextHdr)
	nextProt = int(unsafe.Offsetof(mmap2Next{}.Prot) - nextHdr)
	nextSize = int(unsafe.Sizeof(mmap2Next{}) - nextHdr)
)

// expandNext rebuilds the whole MMAP2 record that a short record stands
// for, from prev, the MMAP2 record before it in the stream (same process
// and file), into buf. next is a struct synth_mmap2_next of
// bpf/synth.h, in the kernel's byte order, as the programs wrote it.
func expandNext(buf, prev, next []byte) ([]byte, error) {
	ne := hostOrder
	if len(next) < nextSize {
		return nil, fmt.Errorf("short MMAP2 record of %d bytes", len(next))
	}
	pid := ne.Uint32(next[nextPid:])
	if len(prev) == 0 || perfdata.Mmap2View(prev).Pid() != pid {
		return nil, fmt.Errorf("short MMAP2 record of pid %d follows no MMAP2 record of its process", pid)
	}
	buf = append(buf[:0], prev...)
	m := perfdata.Mmap2View(buf)
	perfdata.RecordView(buf).SetMisc(perfdata.RecordView(next).Misc())
	m.SetTask(pid, ne.Uint32(next[nextPid+4:]))
	m.SetRange(ne.Uint64(next[nextAddr:]), ne.Uint64(next[nextAddr+8:]), ne.Uint64(next[nextAddr+16:]))
	m.SetProt(ne.Uint32(next[nextProt:]), ne.Uint32(next[nextProt+4:]))
	return buf, nil
}
