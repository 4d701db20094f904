package profconv

import (
	"bytes"
	"testing"

	"github.com/synth-dev/synth/perfdata"
)

// A sample written before the MMAP2 of its mapping within a round, as
// perf record -a writes one CPU's ring before another's, falls in that
// mapping: records are taken in time order, as perf report takes them,
// not in file order; one the round after too.
func TestRoundsTimeOrder(t *testing.T) {
	attr := perfdata.Attr{Type: perfdata.TypeSoftware, Config: perfdata.CountSWCPUClock, SampleType: sampleType,
		SamplePeriod: 1000000, Flags: perfdata.AttrSampleIDAll | perfdata.AttrMmap2}
	var out bytes.Buffer
	w, err := perfdata.NewWriter(&out, perfdata.WriterOptions{Attrs: []perfdata.EventAttr{{Attr: attr, Name: "cpu-clock", IDs: []uint64{7}}}, Mode: perfdata.ModePipe})
	if err != nil {
		t.Fatal(err)
	}
	sid := func(time uint64) *perfdata.SampleID {
		return &perfdata.SampleID{Pid: 42, Tid: 42, ID: 7, Identifier: 7, Time: time}
	}
	sample := func(time uint64) []byte {
		s := perfdata.Sample{Identifier: 7, IP: 0x10000100, Pid: 42, Tid: 42, Time: time, Period: 1000000,
			Callchain: []uint64{^uint64(511), 0x10000100}}
		return s.Append(nil, &attr)
	}
	c := perfdata.Comm{Pid: 42, Tid: 42, Comm: "victim"}
	m := perfdata.Mmap2{Pid: 42, Tid: 42, Addr: 0x10000000, Len: 0x1000, Prot: 5, Maj: 1, Min: 2, Ino: 3, Filename: "/nonexistent/victim"}
	for _, rec := range [][]byte{
		c.Append(nil, sampleType, sid(500)),
		sample(2000), // another CPU's ring, written first
		m.Append(nil, sampleType, sid(1000)),
	} {
		if err := w.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	w.EndRound()
	w.WriteRecord(sample(3000))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	cv := convert(t, out.Bytes())
	if st := cv.Stats(); st.Samples != 2 || st.Unmapped != 0 {
		t.Errorf("stats %+v: want 2 samples, none unmapped", st)
	}
}
