package synth

import (
	"errors"
	"testing"

	"github.com/synth-dev/synth/perfdata"
)

// A Read that ends in an error leaves the caller's record as it was,
// even when the session popped a record the target filter dropped
// before it gave up: that record is no record of the stream. So does
// ReadBatch with the records past the count it returns.
func TestReadErrorLeavesRecord(t *testing.T) {
	flushing := func() *Session {
		s := &Session{filter: liveFilter{tracked: map[uint32]struct{}{100: {}}}}
		other := perfdata.Mmap2{Pid: 300, Tid: 300, Addr: 0x1000, Len: 0x1000, Filename: "/bin/other"}
		s.live.push(other.Append(nil, 0, nil), liveRec{kind: KindLive, pid: 300, time: 15})
		// A Flush that found only that record: Read returns ErrFlushed.
		s.flush.Store(true)
		s.flushing, s.flushAt = true, ^uint64(0)
		return s
	}
	mark := Record{Kind: KindDumpEnd, Gen: 42}

	s := flushing()
	rec := mark
	if err := s.Read(&rec); !errors.Is(err, ErrFlushed) {
		t.Fatalf("Read: %v, want ErrFlushed", err)
	}
	if rec.Kind != mark.Kind || rec.Gen != mark.Gen || rec.Raw != nil {
		t.Errorf("Read's error left the record %+v (type %v), not the caller's %+v", rec, rec.Type(), mark)
	}
	if s.stats.Filtered != 1 {
		t.Errorf("filtered %d records, want 1", s.stats.Filtered)
	}

	s = flushing()
	recs := []Record{mark, mark}
	if n, err := s.ReadBatch(recs); n != 0 || !errors.Is(err, ErrFlushed) {
		t.Fatalf("ReadBatch: %d, %v; want 0, ErrFlushed", n, err)
	}
	for i, r := range recs {
		if r.Kind != mark.Kind || r.Raw != nil {
			t.Errorf("ReadBatch's error left recs[%d] %+v, not the caller's", i, r)
		}
	}
}
