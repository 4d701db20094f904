package bpfmethod

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"

	"github.com/cilium/ebpf"

	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/bpfiter"
	"github.com/synth-dev/synth/perfdata"
)

// An iterator is read on two goroutines: while the kernel runs the
// programs for the next read(2), userspace unwraps, expands, dedupes and
// holds the records of the one before. The rings are still drained
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
func (b *BPF) startPipeline(d *assemble.Assembler, add func([]byte) error) *pipeline {
	p := &pipeline{
		work: make(chan *round, len(b.rounds)),
		free: make(chan *round, len(b.rounds)),
		done: make(chan struct{}),
	}
	for i := range b.rounds {
		p.free <- &b.rounds[i]
	}
	go func() {
		defer close(p.done)
		for r := range p.work {
			if p.err == nil {
				if p.err = b.deliver(d, r, add); p.err != nil {
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

// runIter reads one iterator instance with bounded reads, draining every
// ring after each read so that no ring can overflow, and hands what each
// read wrote to add, in emission order.
func (b *BPF) runIter(ctx context.Context, d *assemble.Assembler, prog *ebpf.Program, pid int, add func([]byte) error) error {
	it, err := bpfiter.Open(prog, pid)
	if err != nil {
		return fmt.Errorf("open %s iterator: %w", prog, err)
	}
	var rd io.Reader = it
	if prog == b.dumpVMA {
		t := b.vmaReader(it, pid)
		defer t.Close()
		rd = t
	} else {
		defer it.Close()
	}
	p := b.startPipeline(d, add)
	reads, err := b.readIter(ctx, rd, prog, p)
	d.Stats.Reads += reads
	if errors.Is(err, ErrLockWait) {
		b.stuck.add(pid)
	}
	if herr := p.stop(); herr != nil {
		return herr
	}
	return err
}

// readIter reads it until its end, each read into a round of p.
func (b *BPF) readIter(ctx context.Context, it io.Reader, prog *ebpf.Program, p *pipeline) (int, error) {
	for reads := 0; ; {
		if err := ctx.Err(); err != nil {
			return reads, err
		}
		r := p.next()
		if r == nil {
			return reads, nil // stop reports the handler's error
		}
		n, rerr := it.Read(b.readBuf)
		reads++
		if errors.Is(rerr, ErrLockWait) {
			// What the instance emitted before it stopped is drained
			// below, with the rest of the round.
			if err := b.giveUp(); err != nil {
				return reads, err
			}
		}
		if err := b.drain(r); err != nil {
			return reads, err
		}
		if len(r.recs) == 0 && len(r.liveEnds) == 0 && r.lost == 0 {
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

// drain moves what the rings hold into r: the output rings first, then
// the side-band rings. A live record that precedes a synthesized one in
// time was in its ring before the synthesized one was written (the
// kernel writes it under the mmap write lock, the programs read under
// the read lock), so deliver, handing the live records over first, has
// it in the deduper before its Keep judges the synthesized one.
func (b *BPF) drain(r *round) error {
	r.reset()
	if err := b.rings.drain(b.rings.out, r.addOut); err != nil {
		return err
	}
	return b.rings.drain(b.rings.live, r.addLive)
}

// deliver moves the live records of a drained round into the live
// buffer and the deduper, then hands its current generation's
// synthesized records to add, in emission order.
func (b *BPF) deliver(d *assemble.Assembler, r *round, add func([]byte) error) error {
	if err := b.passLive(r); err != nil {
		return err
	}
	d.Stats.Lost += r.lost
	r.lost = 0
	for _, rec := range r.sorted() {
		raw := r.bytes(rec)
		switch perfdata.RecordView(raw).Type() {
		case perfdata.RecordMmap2:
			b.prev = append(b.prev[:0], raw...)
		case recordMmap2Next:
			var err error
			if b.next, err = expandNext(b.next, b.prev, raw); err != nil {
				return err
			}
			raw = b.next
		}
		if rec.gen == b.gen {
			b.noteRead(raw, rec.time)
		}
		if !b.dd.Keep(raw, rec.gen, rec.time) {
			continue
		}
		if err := add(raw); err != nil {
			return err
		}
	}
	return nil
}
