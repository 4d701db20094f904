package profconv

import (
	"slices"

	"github.com/synth-dev/synth/perfdata"
)

// rounds puts a file's records in time order before they are taken in,
// as perf's ordered events do (tools/perf/util/ordered-events.c): the
// kernel's records reach the file a ring at a time, so that within a
// round of perf record -a a sample on one CPU may come before the MMAP2
// another CPU reported earlier, which in file order would leave the
// sample in no mapping. Records are held until a FINISHED_ROUND; each
// round then takes in, sorted by time, the records no later than the
// newest time seen before the round before it ended, which no later
// round can precede; the end of the file takes in the rest. A file
// without times (no PERF_SAMPLE_TIME) is taken in file order.
type rounds struct {
	held  []heldRecord
	limit uint64 // what the next FINISHED_ROUND takes in
	max   uint64 // the newest time held or taken
	seq   uint64
}

// heldRecord is a record held for its round, with its time and its
// place in the file, which breaks ties as perf's queue does.
type heldRecord struct {
	time, seq uint64
	rec       perfdata.Record
}

// take takes in rec, or holds it for its round.
func (c *Converter) take(rec perfdata.Record) error {
	if rec.Type == perfdata.RecordFinishedRound {
		return c.flushRound(false)
	}
	t, ok := c.recordTime(rec)
	if !ok {
		return c.addRecord(rec)
	}
	rec.Data = slices.Clone(rec.Data) // the reader's buffer is reused
	rec.Payload = nil
	r := &c.rounds
	r.seq++
	r.held = append(r.held, heldRecord{time: t, seq: r.seq, rec: rec})
	r.max = max(r.max, t)
	return nil
}

// flushRound takes in the held records a FINISHED_ROUND lets go, or all
// of them at the end of the file.
func (c *Converter) flushRound(end bool) error {
	r := &c.rounds
	slices.SortFunc(r.held, func(a, b heldRecord) int {
		if a.time != b.time {
			return cmpUint(a.time, b.time)
		}
		return cmpUint(a.seq, b.seq)
	})
	n := len(r.held)
	if !end {
		n, _ = slices.BinarySearchFunc(r.held, r.limit, func(h heldRecord, limit uint64) int {
			if h.time <= limit {
				return -1
			}
			return 1
		})
	}
	for i := range n {
		if err := c.addRecord(r.held[i].rec); err != nil {
			return err
		}
	}
	r.held = append(r.held[:0], r.held[n:]...)
	r.limit = r.max
	return nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// recordTime returns the time of a kernel record of the file, if its
// events record times: a sample's, or the sample_id_all trailer's.
func (c *Converter) recordTime(rec perfdata.Record) (uint64, bool) {
	if len(c.events) == 0 || rec.Type >= perfdata.RecordHeaderAttr || rec.Type.Private() {
		return 0, false
	}
	first := &c.events[0].attr
	if first.SampleType&perfdata.SampleTime == 0 {
		return 0, false
	}
	if rec.Type == perfdata.RecordSample {
		_, a := c.recordEvent(rec.Data)
		if a == nil {
			return 0, false
		}
		return perfdata.SampleView(rec.Data).Time(a.SampleType)
	}
	if first.Flags&perfdata.AttrSampleIDAll == 0 {
		return 0, false
	}
	sid, err := perfdata.ParseSampleID(rec.Data, first.SampleType)
	return sid.Time, err == nil
}
