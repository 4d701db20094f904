package synth

import (
	"context"
	"fmt"

	"github.com/synth-dev/synth/internal/method/bpfmethod"
	"github.com/synth-dev/synth/perfdata"
)

// generation is one dump of the BPF method as synth hands it out, the
// one primitive both a Session (readDump) and a one-shot dump of
// OpenMethod's BPF method (liveMethod) run: the synthesized records of
// a bpfmethod.Generation, closed by a PERF_RECORD_LOST of what the dump
// itself lost, then its Stats and what it read when (bpfmethod.Reads).
// A Session writes its held records a part at a time, as its reader
// takes them; a Method writes them all at once. The live records of
// its window come from the rings, as each drain takes them.
type generation struct {
	g          *bpfmethod.Generation // nil when the dump could not start
	gen        uint64
	err        error              // the dump's
	attr       perfdata.EventAttr // the PERF_RECORD_LOST is written under
	lostMarked bool               // lostRecord returned it
}

// startGeneration reads the host for a new generation of b, whose
// records go to emit, and those of the walk's hold to held, if not nil
// (see assemble.Assembler.Held). attr is the attr of the synthesized
// records, with their ids.
func startGeneration(ctx context.Context, b *bpfmethod.BPF, attr perfdata.EventAttr, emit, held func([]byte) error) *generation {
	x := &generation{attr: attr}
	x.g, x.err = b.Start(ctx, emit, held)
	x.gen = b.Gen()
	return x
}

// done reports whether every held record is written, or the dump
// failed.
func (x *generation) done() bool { return x.g == nil || x.g.Done() }

// write writes about limit bytes of the held records (0: all of them).
func (x *generation) write(limit int) { x.err = x.g.Write(limit) }

// lostRecord returns, once per dump and once it is done, a
// PERF_RECORD_LOST of the records the dump itself lost (Stats.Lost), to
// close its synthesized records with: a file written from them then
// says that its state is incomplete, as perf report reads it ("lost N
// chunks"). nil when the dump lost nothing, or once it was returned.
func (x *generation) lostRecord() []byte {
	if x.g == nil || x.lostMarked {
		return nil
	}
	x.lostMarked = true
	n := x.g.Lost()
	if n == 0 {
		return nil
	}
	id := x.attr.IDs[0]
	l := perfdata.Lost{ID: id, Lost: n}
	return l.Append(nil, x.attr.Attr.SampleType, &perfdata.SampleID{ID: id, Identifier: id})
}

// end returns the dump's Stats and, if it ended well, what it read
// when; else its error.
func (x *generation) end() (Stats, *bpfmethod.Reads, error) {
	var st Stats
	if x.g != nil {
		st = x.g.Stats()
	}
	if x.err != nil {
		return st, nil, fmt.Errorf("dump: %w", x.err)
	}
	return st, x.g.Reads(), nil
}
