package synth

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/method/bpfmethod"
	"github.com/synth-dev/synth/perfdata"
)

// liveMethod is the BPF method with the live side-band: each dump is a
// generation of its rings, written with the live records of its window,
// so that a mapping made while the dump runs is reported once, live. It
// runs the generation a Session runs (generation), on the same rings
// (openStream), and takes the live records as a Session does (queueLive,
// liveFilter); it is not a Session read back.
type liveMethod struct {
	b      *bpfmethod.BPF
	attrs  []perfdata.EventAttr
	filter liveFilter
	live   liveQueue
	// lost counts what the dumps and the drains lost, over the method's
	// life: a dump's Stats.Lost.
	lost    uint64
	buildID bool
	closed  bool
}

// newLive opens the BPF method with the live side-band for opts.
func newLive(opts SessionOptions, d config.Resolved) (dumper, error) {
	b, rc, err := openStream(opts, d)
	if err != nil {
		return nil, err
	}
	return &liveMethod{b: b, attrs: []perfdata.EventAttr{sidebandAttr(&rc, b)}, filter: newLiveFilter(d),
		buildID: !opts.NoBuildID}, nil
}

// Attrs returns the attrs the records are written under.
func (m *liveMethod) Attrs() []perfdata.EventAttr { return m.attrs }

// Dump hands emit the synthesized records of a new generation, then the
// live records of that generation that the rings hold when it ends.
func (m *liveMethod) Dump(ctx context.Context, emit func(rec []byte) error) (Stats, error) {
	if m.closed {
		return Stats{}, os.ErrClosed
	}
	start := time.Now()
	var emitErr error
	out := func(rec []byte) error {
		if err := emit(rec); err != nil {
			emitErr = err
			return err
		}
		return nil
	}
	m.live.compact()
	x := startGeneration(ctx, m.b, m.attrs[0], out, nil)
	// The live records the dump drained, for after its synthesized ones.
	queueLive(&m.live, m.b)
	for !x.done() {
		x.write(0)
	}
	if rec := x.lostRecord(); rec != nil && emitErr == nil {
		out(rec)
	}
	st, _, err := x.end()
	m.lost += st.Lost
	if emitErr != nil {
		return st, emitErr
	}
	if err != nil {
		return st, err
	}
	live, liveMaps, liveLost, tables, err := m.emitLive(x.gen, emit)
	if err != nil {
		return st, err
	}
	st.Live = live
	st.Elapsed = time.Since(start) // the live records' collection included
	st.Mappings += liveMaps
	st.Records += live
	st.Lost = m.lost
	st.LiveLost = liveLost
	st.Tables.Merge(tables.Result(false, m.buildID))
	return st, nil
}

// emitLive drains the rings and hands emit the live records of
// generation gen they held, of the target, in time order: those up to
// the drain, as a Session's Flush returns them.
func (m *liveMethod) emitLive(gen uint64, emit func(rec []byte) error) (live, liveMaps int, liveLost uint64, tables assemble.Tables, err error) {
	upTo := bpfmethod.MonotonicNow()
	m.live.compact()
	_, lost, err := m.b.DrainLive()
	if err != nil {
		return 0, 0, 0, tables, fmt.Errorf("read live records: %w", err)
	}
	m.lost += lost
	queueLive(&m.live, m.b)
	m.live.sort()
	for {
		var rec Record
		lr, ok := m.live.pop(&rec, upTo)
		if !ok {
			break
		}
		if !m.filter.keep(&rec, lr) || rec.Kind != KindLive || rec.Gen != gen {
			continue
		}
		if err := emit(rec.Raw); err != nil {
			return live, liveMaps, liveLost, tables, err
		}
		tables.AddLive(rec.Raw)
		live++
		switch rec.Type() {
		case perfdata.RecordMmap2:
			liveMaps++
		case perfdata.RecordLost:
			liveLost += lostCount(rec.Raw)
		}
	}
	return live, liveMaps, liveLost, tables, nil
}

func (m *liveMethod) Close() error {
	m.closed = true
	return m.b.Close()
}

// walk is the BPF method's walk, for Method.Walk.
func (m *liveMethod) walk() (Walk, error) { return m.b.Walk() }
