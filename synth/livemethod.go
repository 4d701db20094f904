package synth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/perfdata"
)

// liveMethod is the BPF method on a Session: each dump is a generation
// of the session, written with the live records of its window, so that
// a mapping made while the dump runs is reported once, live.
type liveMethod struct {
	s *Session
}

// readBatch is how many records a reader of the Session takes at a time.
const readBatch = 256

// newLive opens a Session for opts, as the BPF method.
func newLive(opts SessionOptions, d config.Resolved) (dumper, error) {
	s, err := newSession(opts, d)
	if err != nil {
		return nil, err
	}
	return &liveMethod{s: s}, nil
}

// Attrs returns the attrs the records are written under.
func (m *liveMethod) Attrs() []perfdata.EventAttr { return m.s.Attrs() }

// Dump hands emit the synthesized records of a new generation, then the
// live records of that generation that the rings hold when it ends.
func (m *liveMethod) Dump(ctx context.Context, emit func(rec []byte) error) (Stats, error) {
	start := time.Now()
	if err := m.s.Dump(ctx); err != nil {
		return Stats{}, err
	}
	var (
		recs           [readBatch]Record
		live, liveMaps int
		liveLost       uint64
		gen            uint64
		tables         assemble.Tables // of the live records
	)
	for ended := false; !ended; {
		n, err := m.s.ReadBatch(recs[:])
		if err != nil {
			return m.s.LastDump(), err
		}
		for _, rec := range recs[:n] {
			switch rec.Kind {
			case KindSynthesized:
				if err := emit(rec.Raw); err != nil {
					return m.s.LastDump(), err
				}
			case KindDumpEnd:
				ended, gen = true, rec.Gen
			}
		}
	}
	m.s.Flush()
	for {
		n, err := m.s.ReadBatch(recs[:])
		if errors.Is(err, ErrFlushed) {
			break
		}
		if err != nil {
			return m.s.LastDump(), fmt.Errorf("read live records: %w", err)
		}
		for _, rec := range recs[:n] {
			if rec.Kind != KindLive || rec.Gen != gen {
				continue
			}
			if err := emit(rec.Raw); err != nil {
				return m.s.LastDump(), err
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
	}
	st := m.s.LastDump()
	st.Live = live
	st.Elapsed = time.Since(start) // the live records' collection included
	st.Mappings += liveMaps
	st.Records += live
	st.Lost = m.s.Stats().Lost
	st.LiveLost = liveLost
	st.Tables.Merge(tables.Result(false, !m.s.opts.NoBuildID))
	return st, nil
}

func (m *liveMethod) Close() error { return m.s.Close() }

// walk is the session's BPF method's walk, for Method.Walk.
func (m *liveMethod) walk() (Walk, error) { return m.s.b.Walk() }
