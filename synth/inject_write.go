package synth

import (
	"fmt"
	"io"

	"github.com/synth-dev/synth/internal/perfhost"
	"github.com/synth-dev/synth/perfdata"
)

// newInjectWriter starts the output with perf's attrs and features. The
// SAMPLE_TIME of perf's pipe is left out: perf writes it empty ahead of
// the samples, and a file gets the span of the samples written.
func newInjectWriter(out io.Writer, perfAttrs []perfdata.EventAttr, perfFeats []perfdata.Feature, init *initRecords, mode perfdata.Mode) (*perfdata.Writer, error) {
	var attrs []perfdata.EventAttr
	for _, a := range perfAttrs {
		// A newer perf's larger attr is written as the fields perf 6.1
		// knows (Attr.Append).
		wa := perfdata.EventAttr{Attr: a.Attr, IDs: a.IDs}
		if len(a.IDs) > 0 {
			wa.Name = init.names[a.IDs[0]]
		}
		attrs = append(attrs, wa)
	}
	var feats []perfdata.Feature
	for _, f := range perfFeats {
		if f.ID != perfdata.FeatSampleTime {
			feats = append(feats, f)
		}
	}
	// perf -k writes the clock's sections itself; where an older perf
	// did not, the clock is read now.
	feats = perfhost.WithClock(feats, attrs)
	w, err := perfdata.NewWriter(out, perfdata.WriterOptions{Attrs: attrs, Features: feats, Mode: mode})
	if err != nil {
		return nil, fmt.Errorf("start perf.data: %w", err)
	}
	return w, nil
}

// writeInit writes perf's initial records but the attrs and features
// (the writer wrote those), then the synthesized ones, then
// FINISHED_INIT.
func writeInit(w *perfdata.Writer, init *initRecords, st *InjectStats, synth func() error) error {
	for _, r := range init.recs {
		switch perfdata.RecordView(r.data).Type() {
		case perfdata.RecordHeaderAttr, perfdata.RecordHeaderFeature:
			continue
		}
		if err := writePerf(w, r, st); err != nil {
			return err
		}
	}
	if err := synth(); err != nil {
		return err
	}
	return w.EndInit()
}

// writeSynth writes the dump's records that perf's stream did not have
// first, each with a trailer of perf's layout in place of the dump's,
// zero as perf's own synthesized records have it.
func writeSynth(w *perfdata.Writer, recs *recordBuf, ours uint64, seen mapSet, trailer uint64, st *InjectStats) error {
	strip := perfdata.SampleIDSize(ours)
	var buf []byte
	for _, rec := range recs.recs {
		if seen.has(rec) {
			st.Dropped++
			continue
		}
		buf = append(buf[:0], rec[:len(rec)-strip]...)
		buf = perfdata.AppendSampleID(buf, trailer, &perfdata.SampleID{})
		perfdata.RecordView(buf).SetSize(len(buf))
		st.Written++
		if err := w.WriteRecord(buf); err != nil {
			return err
		}
	}
	return nil
}

// writePerf passes on one of perf's records, counting it in
// st.BadBuildIDs if its build ID was cleared, in st.Grown if it was cut.
func writePerf(w *perfdata.Writer, r perfRec, st *InjectStats) error {
	if r.badID {
		st.BadBuildIDs++
	}
	if r.grown {
		st.Grown++
	}
	return w.WriteRecordPayload(r.data, r.payload)
}
