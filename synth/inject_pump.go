package synth

import (
	"io"

	"github.com/synth-dev/synth/perfdata"
)

// pump reads perf's records after its initial ones in a goroutine, so
// that perf never waits on a full pipe while the dump runs.
type pump struct {
	ch   chan pumped
	quit chan struct{}
	// times reads the time of a record by the layout of its event.
	times recordTimes
}

type pumped struct {
	rec perfRec
	err error // io.EOF at the end
}

func startPump(sr *perfdata.StreamReader, first *perfRec) *pump {
	p := &pump{ch: make(chan pumped, 4096), quit: make(chan struct{}), times: newRecordTimes(sr.Attrs())}
	go func() {
		if first != nil && !p.send(pumped{rec: *first}) {
			return
		}
		for {
			r, err := sr.Next()
			if err != nil {
				p.send(pumped{err: err})
				return
			}
			if !p.send(pumped{rec: copyRec(r, sr.Attrs())}) {
				return
			}
		}
	}()
	return p
}

func (p *pump) send(x pumped) bool {
	select {
	case p.ch <- x:
		return true
	case <-p.quit:
		return false
	}
}

// stop lets the goroutine end; it is still blocked in a read of the
// input until perf writes or closes it.
func (p *pump) stop() { close(p.quit) }

// until returns perf's records until the stream holds every record of
// time up to end, by perf's ordering rule: once a FINISHED_ROUND is read,
// no later record is older than the newest record before the previous
// FINISHED_ROUND (perf report flushes its queue on that rule). It ends
// at the end of the stream too, and returns the stream's error, if any.
func (p *pump) until(end uint64) ([]perfRec, error) {
	var held []perfRec
	var newest, atLastRound uint64
	for x := range p.ch {
		if x.err != nil {
			p.ch = nil
			if x.err == io.EOF {
				return held, nil
			}
			return held, x.err
		}
		held = append(held, x.rec)
		if perfdata.RecordView(x.rec.data).Type() == perfdata.RecordFinishedRound {
			if atLastRound >= end {
				return held, nil
			}
			atLastRound = newest
		} else if t, ok := p.times.of(x.rec.data); ok {
			newest = max(newest, t)
		}
	}
	return held, nil
}

// copyRest writes the rest of perf's records.
func (p *pump) copyRest(w *perfdata.Writer, st *InjectStats) error {
	if p.ch == nil {
		return nil
	}
	for x := range p.ch {
		if x.err == io.EOF {
			return nil
		}
		if x.err != nil {
			return x.err
		}
		if err := writePerf(w, x.rec, st); err != nil {
			return err
		}
		st.Perf++
	}
	return nil
}

// recordTimes finds the time of perf's records: in a sample, after the
// fields before it in its event's sample_type; in other records of the
// kernel, in the sample_id_all trailer (the first attr's layout, which
// perf requires all events to share).
type recordTimes struct {
	trailer uint64
	first   uint64            // sample_type of the first attr
	byID    map[uint64]uint64 // sample_type by sample id, when attrs differ
}

func newRecordTimes(attrs []perfdata.EventAttr) recordTimes {
	rt := recordTimes{trailer: attrs[0].Attr.SampleType, first: attrs[0].Attr.SampleType}
	for _, a := range attrs {
		if a.Attr.SampleType != rt.first && rt.byID == nil {
			rt.byID = map[uint64]uint64{}
		}
	}
	if rt.byID != nil {
		for _, a := range attrs {
			for _, id := range a.IDs {
				rt.byID[id] = a.Attr.SampleType
			}
		}
	}
	return rt
}

func (rt recordTimes) of(rec []byte) (uint64, bool) {
	typ := perfdata.RecordView(rec).Type()
	if typ >= perfdata.RecordHeaderAttr {
		return 0, false
	}
	if typ != perfdata.RecordSample {
		sid, err := perfdata.ParseSampleID(rec, rt.trailer)
		return sid.Time, err == nil && rt.trailer&perfdata.SampleTime != 0
	}
	st := rt.first
	if rt.byID != nil && st&perfdata.SampleIdentifier != 0 {
		// PERF_SAMPLE_IDENTIFIER is a sample's first field.
		if id, ok := perfdata.SampleView(rec).Identifier(); ok {
			if s, ok := rt.byID[id]; ok {
				st = s
			}
		}
	}
	return perfdata.SampleView(rec).Time(st)
}
