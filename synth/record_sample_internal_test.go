package synth

import (
	"testing"

	"github.com/synth-dev/synth/perfdata"
)

// A session's sample decodes under its sampler's attr, whatever the
// caller does to Attrs; other records, and records not read from a
// session, have no sample.
func TestRecordSample(t *testing.T) {
	a := samplerAttr(&SampleOptions{Callchain: true}, false)
	s := &Session{sampler: &a, attrs: []perfdata.EventAttr{{}, {Attr: a}}}
	want := perfdata.Sample{IP: 0x401234, Pid: 7, Tid: 8, Time: 20, CPU: 1, Period: 1000, Callchain: []uint64{0x401234, 0x401000}}
	s.live.push(want.Append(nil, &a), liveRec{kind: KindSample, pid: 7, tid: 8, time: 20})
	other := perfdata.Mmap2{Pid: 7, Tid: 7, Addr: 0x1000, Len: 0x1000, Filename: "/bin/x"}
	s.live.push(other.Append(nil, 0, nil), liveRec{kind: KindLive, pid: 7, time: 30})
	s.Attrs()[1].Attr.SampleType = 0 // a caller's change reaches no sample
	recs := make([]Record, 2)
	if n := s.popLive(recs, ^uint64(0)); n != 2 {
		t.Fatalf("%d records, want 2", n)
	}
	got, ok := recs[0].Sample()
	if !ok || got.IP != want.IP || got.Pid != want.Pid || got.Tid != want.Tid || got.Period != want.Period || len(got.Callchain) != 2 {
		t.Errorf("sample %+v %v, want %+v", got, ok, want)
	}
	clear(recs[0].Raw)
	if got.Callchain[1] != 0x401000 {
		t.Error("the sample shares memory with Raw")
	}
	if _, ok := recs[1].Sample(); ok {
		t.Error("an MMAP2 has a sample")
	}
	if _, ok := (&Record{Kind: KindSample, Raw: recs[0].Raw}).Sample(); ok {
		t.Error("a record of no session has a sample")
	}
}
