package synth

import (
	"encoding/binary"
	"slices"
	"time"

	"github.com/synth-dev/synth/perfdata"
)

// dump puts the records of one dump into perf's order and appends their
// trailers. Thread records (FORK, COMM) arrive first, for all processes;
// MMAP2 records follow process by process in ascending pid order. Each
// process's thread records are held back until its mappings start, so the
// output reads: per process, COMM/FORK then MMAP2, pids ascending.
type dump struct {
	opts       Options
	sampleType uint64
	emit       func([]byte) error
	// held, if set, takes the records of the walk's hold instead of
	// emit: they stay valid until the next dump, and need no copy.
	held  func([]byte) error
	gate  *gateVMA
	start time.Time
	stats Stats
	ident uint64 // sample_id_all identifier, with SampleIdentifier
	// trailed says addVMA's records come with their trailers: the maple
	// walk's hold appends them as it keeps the records, saving a copy.
	trailed bool

	arena  []byte              // thread records of all processes
	groups map[uint32][]span   // tgid -> its thread records in arena
	order  []uint32            // tgids of groups, ascending
	next   int                 // first group in order not yet written
	done   map[uint32]struct{} // tgids whose thread records were written
	cur    uint32              // process whose mappings are being written
	inProc bool

	buf []byte // the record being emitted
}

type span struct{ off, n int }

func newDump(opts Options, emit func([]byte) error, gate *gateVMA) *dump {
	return &dump{
		opts:       opts,
		sampleType: opts.sampleType(),
		emit:       emit,
		gate:       gate,
		start:      time.Now(),
		groups:     make(map[uint32][]span),
		done:       make(map[uint32]struct{}),
	}
}

// addTask takes a FORK or COMM record of the thread pass.
func (d *dump) addTask(rec []byte) error {
	tgid := recPid(rec)
	d.groups[tgid] = append(d.groups[tgid], span{len(d.arena), len(rec)})
	d.arena = append(d.arena, rec...)
	return nil
}

// tasksDone ends the thread pass. Of the requested pids, it returns those
// the pass saw, and counts the others as skipped: a pid-scoped iterator
// over a process that is gone walks nothing.
func (d *dump) tasksDone(pids []int) []int {
	var live []int
	for _, pid := range pids {
		if _, ok := d.groups[uint32(pid)]; ok {
			live = append(live, pid)
		} else {
			d.stats.Skipped++
		}
	}
	d.order = make([]uint32, 0, len(d.groups))
	for tgid := range d.groups {
		d.order = append(d.order, tgid)
	}
	slices.Sort(d.order)
	return live
}

// addVMA takes an MMAP2 record of the mapping pass, or the COMM record the
// pass emits when it reaches a new process.
func (d *dump) addVMA(rec []byte) error {
	tgid := recPid(rec)
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
		} else if recType(rec) == perfdata.RecordComm {
			// Born after the thread pass: this COMM names it.
			d.stats.Threads++
			d.stats.Processes++
			return d.write(rec)
		}
	}
	if recType(rec) != perfdata.RecordMmap2 {
		return nil
	}
	d.stats.Mappings++
	d.countFile(rec)
	if d.trailed {
		d.stats.Records++
		if d.held != nil {
			return d.held(rec)
		}
		return d.emit(rec)
	}
	return d.write(rec)
}

// countFile counts file-backed mappings and those with a build ID.
func (d *dump) countFile(rec []byte) {
	misc := binary.NativeEndian.Uint16(rec[4:])
	switch {
	case misc&perfdata.MiscMmapBuildID != 0:
		d.stats.FileMappings++
		d.stats.BuildIDMappings++
	case binary.NativeEndian.Uint64(rec[mmap2InoOff:]) != 0:
		d.stats.FileMappings++
	}
}

// mmap2InoOff is the offset of ino in a PERF_RECORD_MMAP2: header 8,
// pid/tid 8, addr/len/pgoff 24, maj/min 8.
const mmap2InoOff = 48

// flushBefore writes the thread records of processes below tgid that have
// no mappings (kernel threads, exited processes).
func (d *dump) flushBefore(tgid uint32) error {
	for d.next < len(d.order) && d.order[d.next] < tgid {
		if err := d.writeGroup(d.order[d.next]); err != nil {
			return err
		}
		d.next++
	}
	return nil
}

func (d *dump) writeGroup(tgid uint32) error {
	if _, ok := d.done[tgid]; ok {
		return nil
	}
	d.done[tgid] = struct{}{}
	d.stats.Processes++
	for _, s := range d.groups[tgid] {
		rec := d.arena[s.off : s.off+s.n]
		if recType(rec) == perfdata.RecordComm {
			d.stats.Threads++
		}
		if err := d.write(rec); err != nil {
			return err
		}
	}
	return nil
}

// endProc closes the current process's mappings with the gate area, which
// /proc/PID/maps lists for every process but no VMA iterator sees.
func (d *dump) endProc() error {
	if !d.inProc || d.gate == nil {
		return nil
	}
	if d.gate.prot&protExec == 0 && !d.opts.Data {
		return nil
	}
	d.buf = d.gate.append(d.buf[:0], d.sampleType, d.sampleID(d.cur, d.cur))
	d.stats.Mappings++
	d.stats.Records++
	return d.emit(d.buf)
}

// finish writes what is still held back after the mapping pass.
func (d *dump) finish() error {
	if err := d.endProc(); err != nil {
		return err
	}
	d.inProc = false
	return d.flushBefore(^uint32(0))
}

// skip counts a requested process that was gone.
func (d *dump) skip(int) { d.stats.Skipped++ }

func (d *dump) finishStats() Stats {
	d.stats.Elapsed = time.Since(d.start)
	return d.stats
}

// write appends the trailer to a record that has none and emits it.
// Synthesized records carry time 0, perf's convention for initial state.
func (d *dump) write(rec []byte) error {
	d.buf = append(d.buf[:0], rec...)
	d.buf = perfdata.AppendSampleID(d.buf, d.sampleType, d.sampleID(recPid(rec), recTid(rec)))
	binary.NativeEndian.PutUint16(d.buf[6:], uint16(len(d.buf)))
	d.stats.Records++
	return d.emit(d.buf)
}

// sampleID is the trailer of a synthesized record of thread pid/tid.
func (d *dump) sampleID(pid, tid uint32) *perfdata.SampleID {
	return &perfdata.SampleID{Pid: pid, Tid: tid, Identifier: d.ident}
}
