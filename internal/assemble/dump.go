package assemble

import (
	"slices"
	"time"

	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/perfdata"
)

// Assembler puts the records of one dump into perf's order and appends
// their trailers. Thread records (FORK, COMM) arrive first, for all processes;
// MMAP2 records follow process by process in ascending pid order. Each
// process's thread records are held back until its mappings start, so the
// output reads: per process, FORK/NAMESPACES/COMM per thread, the
// leader's first, then MMAP2, pids ascending, as perf synthesizes them.
type Assembler struct {
	opts       config.Resolved
	sampleType uint64
	emit       func([]byte) error
	// Held, if set, takes the records a method keeps with their
	// trailers (see Trailed) instead of emit: they stay valid until the
	// next dump, and need no copy.
	Held  func([]byte) error
	gate  *Gate
	start time.Time
	Stats config.Stats
	Ident uint64 // sample_id_all identifier, with SampleIdentifier
	// Trailed says AddVMA's records come with their trailers (see
	// AppendTrailer): a method that keeps records may append them as
	// it keeps them, saving a copy.
	Trailed bool

	arena  []byte              // thread records of all processes
	groups map[uint32][]span   // tgid -> its thread records in arena
	order  []uint32            // tgids of groups, ascending
	next   int                 // first group in order not yet written
	done   map[uint32]struct{} // tgids whose thread records were written
	noGate map[uint32]struct{} // tgids of 32-bit processes: no [vsyscall]
	tids   map[uint32]struct{} // Target.Tids and their leaders; nil: every thread
	cur    uint32              // process whose mappings are being written
	inProc bool

	buf    []byte // the record being emitted
	tables Tables // of the records emitted
}

type span struct{ off, n int }

func New(opts config.Resolved, emit func([]byte) error, gate *Gate) *Assembler {
	var tids map[uint32]struct{}
	if len(opts.Target.Tids) > 0 {
		tids = make(map[uint32]struct{}, len(opts.Target.Tids)+len(opts.Pids))
		for _, t := range opts.Target.Tids {
			tids[uint32(t)] = struct{}{}
		}
		// The leaders too (opts.Pids are the threads' processes), as
		// perf -t writes a thread's leader when the list lacks it
		// (need_leader in perf_event__synthesize_thread_map): perf
		// names a process by its leader's COMM.
		for _, pid := range opts.Pids {
			tids[uint32(pid)] = struct{}{}
		}
	}
	return &Assembler{
		tids:       tids,
		opts:       opts,
		sampleType: opts.SampleTypeOrDefault(),
		emit:       emit,
		gate:       gate,
		start:      time.Now(),
		groups:     make(map[uint32][]span),
		done:       make(map[uint32]struct{}),
		noGate:     make(map[uint32]struct{}),
	}
}

// MiscNoGate marks, on a leader's FORK from the programs, a process
// without the [vsyscall] page (SYNTH_MISC_NO_GATE in bpf/synth.h). It is
// PERF_RECORD_MISC_EXT_RESERVED, and cleared before the record is written.
const MiscNoGate = 1 << 15

// AddTask takes a FORK, NAMESPACES or COMM record of the thread pass.
func (d *Assembler) AddTask(rec []byte) error {
	tgid := perfdata.RecordView(rec).Pid()
	if r := perfdata.RecordView(rec); r.Misc()&MiscNoGate != 0 {
		r.SetMisc(r.Misc() &^ MiscNoGate)
		d.noGate[tgid] = struct{}{}
	}
	if !d.WantThread(perfdata.RecordView(rec).Tid()) {
		return nil
	}
	d.groups[tgid] = append(d.groups[tgid], span{len(d.arena), len(rec)})
	d.arena = append(d.arena, rec...)
	return nil
}

// WantThread reports whether the thread records of tid are dumped.
func (d *Assembler) WantThread(tid uint32) bool {
	if d.tids == nil {
		return true
	}
	_, ok := d.tids[tid]
	return ok
}

// TasksDone ends the thread pass. Of the requested pids, it returns those
// the pass saw, and counts the others as skipped: a pid-scoped iterator
// over a process that is gone walks nothing.
func (d *Assembler) TasksDone(pids []int) []int {
	var live []int
	for _, pid := range pids {
		if _, ok := d.groups[uint32(pid)]; ok {
			live = append(live, pid)
		} else {
			d.Stats.Skipped++
		}
	}
	d.order = make([]uint32, 0, len(d.groups))
	for tgid := range d.groups {
		d.order = append(d.order, tgid)
	}
	slices.Sort(d.order)
	return live
}

// AddVMA takes an MMAP2 record of the mapping pass, or the COMM record the
// pass emits when it reaches a new process.
func (d *Assembler) AddVMA(rec []byte) error {
	tgid := perfdata.RecordView(rec).Pid()
	if !d.inProc || tgid != d.cur {
		if err := d.endProc(); err != nil {
			return err
		}
		if err := d.flushBefore(tgid); err != nil {
			return err
		}
		d.cur, d.inProc = tgid, true
		if _, ok := d.groups[tgid]; ok {
			if err := d.writeGroup(tgid); err != nil {
				return err
			}
		} else if perfdata.RecordView(rec).Type() == perfdata.RecordComm {
			// Born after the thread pass: this COMM names it.
			d.Stats.Threads++
			d.Stats.Processes++
			return d.write(rec)
		}
	}
	if perfdata.RecordView(rec).Type() != perfdata.RecordMmap2 {
		return nil
	}
	d.Stats.Mappings++
	d.countFile(rec)
	if d.Trailed {
		d.Stats.Records++
		if d.Held != nil {
			d.tables.Add(rec)
			return d.Held(rec)
		}
		return d.Emit(rec)
	}
	return d.write(rec)
}

// countFile counts file-backed mappings and those with a build ID.
func (d *Assembler) countFile(rec []byte) {
	m := perfdata.Mmap2View(rec)
	if m.HasBuildID() {
		d.Stats.FileMappings++
		d.Stats.BuildIDMappings++
	} else if _, _, ino, _ := m.Inode(); ino != 0 {
		d.Stats.FileMappings++
	}
}

// flushBefore writes the thread records of processes below tgid that have
// no mappings (kernel threads, exited processes).
func (d *Assembler) flushBefore(tgid uint32) error {
	for d.next < len(d.order) && d.order[d.next] < tgid {
		if err := d.writeGroup(d.order[d.next]); err != nil {
			return err
		}
		d.next++
	}
	return nil
}

// writeGroup writes the thread records of process tgid: its leader's
// first, then the other threads' in the order they came. The task pass
// comes by tid, and once pids wrap a thread's tid can be below its
// leader's: perf makes a leader of its own at a thread's FORK, then a
// new one, with maps of its own, at the leader's FORK, and the threads
// before it keep the first, which the MMAP2s never reach (perf fixed the
// same in its /proc scan: "perf tools: Don't sort the task scan result
// from /proc").
func (d *Assembler) writeGroup(tgid uint32) error {
	if _, ok := d.done[tgid]; ok {
		return nil
	}
	d.done[tgid] = struct{}{}
	d.Stats.Processes++
	for _, leader := range []bool{true, false} {
		for _, s := range d.groups[tgid] {
			rec := d.arena[s.off : s.off+s.n]
			if (perfdata.RecordView(rec).Tid() == tgid) != leader {
				continue
			}
			if perfdata.RecordView(rec).Type() == perfdata.RecordComm {
				d.Stats.Threads++
			}
			if err := d.write(rec); err != nil {
				return err
			}
		}
	}
	return nil
}

// endProc closes the current process's mappings with the gate area, which
// /proc/PID/maps lists for every 64-bit process but no VMA iterator sees.
func (d *Assembler) endProc() error {
	if !d.inProc || d.gate == nil {
		return nil
	}
	if _, ok := d.noGate[d.cur]; ok {
		return nil
	}
	if d.gate.Prot&protExec == 0 && !d.opts.Data {
		return nil
	}
	d.buf = d.gate.append(d.buf[:0], d.sampleType, d.sampleID(d.cur, d.cur))
	d.Stats.Mappings++
	d.Stats.Records++
	return d.Emit(d.buf)
}

// Finish writes what is still held back after the mapping pass.
func (d *Assembler) Finish() error {
	if err := d.endProc(); err != nil {
		return err
	}
	d.inProc = false
	return d.flushBefore(^uint32(0))
}

// Skip counts a requested process that was gone.
func (d *Assembler) Skip(int) { d.Stats.Skipped++ }

// LockedOut names a process left out: its mmap lock was not taken in
// time.
func (d *Assembler) LockedOut(pid int) { d.Stats.LockedOut = append(d.Stats.LockedOut, pid) }

// Groups returns the processes the thread pass saw, ascending.
func (d *Assembler) Groups() []uint32 { return d.order }

// Emit hands a record to the dump's emit, noting what it names in the
// dump's tables. Every record of a dump goes through it, or through
// Held.
func (d *Assembler) Emit(rec []byte) error {
	d.tables.Add(rec)
	return d.emit(rec)
}

// FinishStats returns the dump's statistics, with its tables.
func (d *Assembler) FinishStats() config.Stats {
	d.Stats.Elapsed = time.Since(d.start)
	d.Stats.Tables = d.tables.Result(!d.opts.NoKernel, !d.opts.NoBuildID)
	return d.Stats
}

// write appends the trailer to a record that has none and emits it.
// Synthesized records carry time 0, perf's convention for initial state.
func (d *Assembler) write(rec []byte) error {
	d.buf = append(d.buf[:0], rec...)
	d.buf = perfdata.AppendSampleID(d.buf, d.sampleType, d.sampleID(perfdata.RecordView(rec).Pid(), perfdata.RecordView(rec).Tid()))
	perfdata.RecordView(d.buf).SetSize(len(d.buf))
	d.Stats.Records++
	return d.Emit(d.buf)
}

// sampleID is the trailer of a synthesized record of thread pid/tid.
func (d *Assembler) sampleID(pid, tid uint32) *perfdata.SampleID {
	return &perfdata.SampleID{Pid: pid, Tid: tid, Identifier: d.Ident}
}

// AppendTrailer appends rec to b with the trailer it is written with,
// and sets its size.
func (d *Assembler) AppendTrailer(b, rec []byte) []byte {
	off := len(b)
	b = append(b, rec...)
	b = perfdata.AppendSampleID(b, d.sampleType, d.sampleID(perfdata.RecordView(rec).Pid(), perfdata.RecordView(rec).Tid()))
	perfdata.RecordView(b[off:]).SetSize(len(b) - off)
	return b
}

// Time appends to steps the step name, begun at start.
func Time(steps []config.Step, name string, start time.Time) []config.Step {
	return append(steps, config.Step{Name: name, Took: time.Since(start)})
}
