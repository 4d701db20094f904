package bpfmethod

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/bpfiter"
	"github.com/synth-dev/synth/perfdata"
)

// paceUnit is SYNTH_PACE_UNIT (bpf/synth.h): the programs write one
// byte into the iterator's seq_file per paceUnit bytes that a record
// takes in a ring (its sample overhead included).
const paceUnit = int(synthbpf.SynthSynthLimitSYNTH_PACE_UNIT)

// maxRecordBytes bounds one emitted sample in a ring: struct synth_mmap2
// with a PATH_MAX name, plus SYNTH_SAMPLE_OVERHEAD.
const maxRecordBytes = int(unsafe.Sizeof(synthbpf.SynthSynthMmap2{})) + int(synthbpf.SynthSynthLimitSYNTH_SAMPLE_OVERHEAD)

// readBudget is the iterator read size that keeps one read's records
// within half a ring, whichever CPUs they land on. bpf_seq_read stops
// after the object that crosses the requested size, and an object emits
// at most two records.
func readBudget(ringBytes int) int {
	n := ringBytes/2/paceUnit - 2*((maxRecordBytes+paceUnit-1)/paceUnit)
	// The iterator's seq_file buffer is 32 KiB: stay well inside it so
	// that an object's output never overflows and gets replayed.
	return min(n, 16<<10)
}

// walkLimits splits half a ring between the two things one paced read
// of the maple walk may put into it: the records of the objects before
// the read's budget ran out (budget pacing bytes' worth), and the last
// object's, which is at most a chunk plus the batch it found not yet
// flushed (less than two SYNTH_BATCH). A chunk's pacing bytes must also
// fit in the iterator's 32 KiB seq_file next to the budget, or the
// kernel would replay the object, and the program emit it twice.
func walkLimits(ringBytes int) (chunk uint32, budget int) {
	half := ringBytes / 2
	budget = min(half/4/paceUnit, 16<<10)
	c := half - budget*paceUnit - 2*synthBatchBytes
	return uint32(min(c, 512<<10)), budget
}

// runIter reads one iterator instance with bounded reads, draining every
// ring after each read so that no ring can overflow, and hands what each
// read wrote to add, in emission order.
func (w *walker) runIter(ctx context.Context, d *assemble.Assembler, prog *ebpf.Program, pid int, add func([]byte) error) error {
	it, err := bpfiter.Open(prog, pid)
	if err != nil {
		return fmt.Errorf("open %s iterator: %w", prog, err)
	}
	var rd io.Reader = it
	if prog == w.lo.dumpVMA {
		t := w.vmaReader(it, pid)
		defer t.Close()
		rd = t
	} else {
		defer it.Close()
	}
	p := w.startPipeline(d, add)
	reads, err := w.readIter(ctx, rd, prog, p)
	d.Stats.Reads += reads
	if errors.Is(err, ErrLockWait) {
		w.stuck.add(pid)
	}
	if herr := p.stop(); herr != nil {
		return herr
	}
	return err
}

// readIter reads it until its end, each read into a round of p.
func (w *walker) readIter(ctx context.Context, it io.Reader, prog *ebpf.Program, p *pipeline) (int, error) {
	for reads := 0; ; {
		if err := ctx.Err(); err != nil {
			return reads, err
		}
		r := p.next()
		if r == nil {
			return reads, nil // stop reports the handler's error
		}
		n, rerr := it.Read(w.readBuf)
		reads++
		if errors.Is(rerr, ErrLockWait) {
			// What the instance emitted before it stopped is drained
			// below, with the rest of the round.
			if err := w.giveUp(); err != nil {
				return reads, err
			}
		}
		if err := w.rings.drainInto(r); err != nil {
			return reads, err
		}
		if len(r.raws) == 0 && len(r.liveEnds) == 0 && r.lost == 0 {
			// A read that only returned what the last one left in
			// the seq_file: nothing for the handler.
			p.free <- r
		} else {
			p.work <- r
		}
		if rerr == io.EOF || (rerr == nil && n == 0) {
			return reads, nil
		}
		if rerr != nil {
			return reads, fmt.Errorf("read %s iterator: %w", prog, rerr)
		}
	}
}

// pipeline is the second of the two goroutines an iterator is read on:
// while the kernel runs the programs for the next read(2) (readIter),
// it unwraps, expands, dedupes and holds the records of the one before
// (deliver). The rings are still drained
// between two reads, on the reading goroutine, so the pacing holds as
// before; what moves to the second goroutine is everything after the
// drain. Rounds are handled strictly in the order they were read, and a
// round's live records before its synthesized ones, so the ordering
// deliver relies on is unchanged.
type pipeline struct {
	work   chan *round // drained rounds, in read order
	free   chan *round // handled rounds, to drain again
	done   chan struct{}
	err    error // the handler's first error, once done is closed
	failed atomic.Bool
}

// startPipeline starts the handler of one iterator's rounds: it feeds
// their records to add, as deliver does.
func (w *walker) startPipeline(d *assemble.Assembler, add func([]byte) error) *pipeline {
	p := &pipeline{
		work: make(chan *round, len(w.rounds)),
		free: make(chan *round, len(w.rounds)),
		done: make(chan struct{}),
	}
	for i := range w.rounds {
		p.free <- &w.rounds[i]
	}
	go func() {
		defer close(p.done)
		for r := range p.work {
			if p.err == nil {
				if p.err = w.deliver(d, r, add); p.err != nil {
					p.failed.Store(true)
				}
			}
			p.free <- r
		}
	}()
	return p
}

// next returns a round to drain into, or nil once the handler has
// failed.
func (p *pipeline) next() *round {
	if p.failed.Load() {
		return nil
	}
	return <-p.free
}

// stop waits for the handler to finish the rounds sent and returns its
// error.
func (p *pipeline) stop() error {
	close(p.work)
	<-p.done
	return p.err
}

// deliver moves the live records of a drained round to the live side
// (live.go), which hands them to the deduper first, then hands the
// round's synthesized records to add, in emission order, as the
// generation judges them: expanded to whole MMAP2 records, their reads
// noted, the stale and duplicate ones dropped.
func (w *walker) deliver(d *assemble.Assembler, r *round, add func([]byte) error) error {
	if err := r.unwrap(); err != nil {
		return err
	}
	if err := w.live.pass(r); err != nil {
		return err
	}
	d.Stats.Lost += r.lost
	r.lost = 0
	for _, rec := range r.sorted() {
		raw := r.bytes(rec)
		switch perfdata.RecordView(raw).Type() {
		case perfdata.RecordMmap2:
			w.prev = append(w.prev[:0], raw...)
		case recordMmap2Next:
			var err error
			if w.next, err = expandNext(w.next, w.prev, raw); err != nil {
				return err
			}
			raw = w.next
		}
		if !w.g.keep(raw, rec.gen, rec.time) {
			continue
		}
		if err := add(raw); err != nil {
			return err
		}
		w.hook.delivered(raw)
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
