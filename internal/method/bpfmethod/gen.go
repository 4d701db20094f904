package bpfmethod

import (
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/dedupe"
	"github.com/synth-dev/synth/perfdata"
)

// Generation is one dump of the BPF method, a generation of its
// records, in two phases: BPF.Start reads the host (the walk's records
// are held), then Write hands the held records to the dump's emit a
// part at a time. A Session writes the next part when its reader has
// taken the last, so it never holds a whole dump twice; a Method writes
// them all at once (Dump).
//
// It owns the dump's read times (Reads): when it began, and when it
// first read each process, which it notes as the rings deliver the
// records (noteRead).
type Generation struct {
	w     *walker
	d     *assemble.Assembler
	dd    *dedupe.Deduper
	gen   uint64
	reads *Reads
	// dups and stale are the deduper's counts when the dump began.
	dups, stale int
	done        bool
	writing     time.Duration // in Write
}

// Reads are a dump's read times: when it began, and when it first read
// each process it read (CLOCK_MONOTONIC), with the live records it
// delegated its own to. They outlive the dump: a consumer of the live
// stream compares live records with the last dump's (Times).
type Reads struct {
	start     uint64
	at        map[uint32]uint64
	delegated dedupe.Delegated
}

func newReads(start uint64) *Reads { return &Reads{start: start, at: make(map[uint32]uint64)} }

// Gen returns the generation's number: the synth_gen its records carry.
func (g *Generation) Gen() uint64 { return g.gen }

// keep judges a synthesized record of generation gen, read at time t,
// on its way from the rings: it notes the read of its process if it is
// of this generation, and reports whether it is to be written (not
// stale, nor a duplicate of a live record).
func (g *Generation) keep(raw []byte, gen, t uint64) bool {
	if gen == g.gen {
		g.noteRead(raw, t)
	}
	return g.dd.Keep(raw, gen, t)
}

// noteRead notes the time of a synthesized record of this dump for the
// process it is about.
func (g *Generation) noteRead(raw []byte, t uint64) {
	switch perfdata.RecordView(raw).Type() {
	case perfdata.RecordMmap2, perfdata.RecordComm, perfdata.RecordFork, perfdata.RecordNamespaces:
	default:
		return
	}
	pid := perfdata.RecordView(raw).Pid()
	if at, ok := g.reads.at[pid]; !ok || t < at {
		g.reads.at[pid] = t
	}
}

// forgetReads forgets the read times of processes whose records were
// dropped: the dump did not read them (Reads), so none of their live
// records is superseded by it.
func (g *Generation) forgetReads(pids []uint32) {
	for _, pid := range pids {
		delete(g.reads.at, pid)
	}
}

// Reads returns the dump's read times, complete once Start has
// returned.
func (g *Generation) Reads() *Reads { return g.reads }

// Times returns when the dump began, and when it first read each
// process it read (CLOCK_MONOTONIC). A live record of a process older
// than that is already in what the dump read of it, or undone there: a
// mapping made then, or one unmapped since. The programs read no
// exiting task (PF_EXITING) nor any of an exiting process
// (SIGNAL_GROUP_EXIT), so the EXIT of a process's main thread is never
// older than its read: a process read is one that had not exited.
func (r *Reads) Times() (start uint64, readAt map[uint32]uint64) {
	return r.start, r.at
}

// Delegated returns the live MMAP2 records that stand for the
// synthesized records the dump dropped as duplicates: a consumer that
// skips live records older than Times' must still apply them.
func (r *Reads) Delegated() dedupe.Delegated { return r.delegated }

// Write hands the held records to emit, about limit bytes of them (0:
// all), in perf's order; after the last, it closes the dump.
func (g *Generation) Write(limit int) error {
	start := time.Now()
	defer func() { g.writing += time.Since(start) }()
	done, err := g.w.hold.flushSome(limit)
	if err == nil && done {
		err = g.d.Finish()
		done = true
	}
	g.done = done || err != nil
	return err
}

// Done reports whether the dump has ended: every record written, or an
// error returned.
func (g *Generation) Done() bool { return g.done }

// Lost returns how many records the dump's programs could not write
// so far: all of them once Done.
func (g *Generation) Lost() uint64 { return g.d.Stats.Lost }

// Stats returns the counts of the dump.
func (g *Generation) Stats() config.Stats {
	g.d.Stats.Duplicates = g.dd.Duplicates - g.dups
	g.d.Stats.Stale = g.dd.Stale - g.stale
	st := g.d.FinishStats()
	st.Steps = append(slices.Clip(st.Steps), config.Step{Name: "write", Took: g.writing})
	return st
}

// MonotonicNow reads CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns()
// and of the rings' records.
func MonotonicNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) // cannot fail for this clock
	return uint64(ts.Nano())
}
