package synth

import (
	"bytes"
	"testing"

	"github.com/synth-dev/synth/perfdata"
)

// perf's KSYMBOL grown by a newer listener's trailer is cut with the
// trailer of the attr that asked for KSYMBOL records; a record no attr
// asked for, or of perf's size, is passed on as it is.
func TestInjectTrimGrown(t *testing.T) {
	const st = perfdata.SampleTID | perfdata.SampleTime | perfdata.SampleCPU
	sid := &perfdata.SampleID{Pid: 7, Tid: 7, Time: 1234, CPU: 1}
	k := perfdata.Ksymbol{Addr: 0xffffffffc0001000, Len: 64, Type: perfdata.KsymbolTypeBPF, Name: "bpf_prog_0123456789abcdef_f"}
	want := k.Append(nil, st, sid)
	grown := append(bytes.Clone(want), make([]byte, 32)...) // a newer event's trailer, stale bytes
	perfdata.RecordView(grown).SetSize(len(grown))
	cycles := perfdata.EventAttr{Attr: perfdata.Attr{SampleType: st | perfdata.SampleIP | perfdata.SamplePeriod,
		Flags: perfdata.AttrSampleIDAll | perfdata.AttrMmap | perfdata.AttrKsymbol | perfdata.AttrBPFEvent}}
	noKsym := cycles
	noKsym.Attr.Flags &^= perfdata.AttrKsymbol
	for _, c := range []struct {
		name  string
		rec   []byte
		attrs []perfdata.EventAttr
		want  []byte
	}{
		{"grown", grown, []perfdata.EventAttr{cycles}, want},
		{"true size", want, []perfdata.EventAttr{cycles}, want},
		{"no attr asked", grown, []perfdata.EventAttr{noKsym}, grown},
		{"asked by the second", grown, []perfdata.EventAttr{noKsym, cycles}, want},
	} {
		got, cut := trimGrown(bytes.Clone(c.rec), c.attrs)
		if !bytes.Equal(got, c.want) || cut != (len(c.want) < len(c.rec)) {
			t.Errorf("%s: cut %v to %x, want %x", c.name, cut, got, c.want)
			continue
		}
		if sid, err := perfdata.ParseSampleID(got, st); len(got) == len(want) && (err != nil || sid.Time != 1234) {
			t.Errorf("%s: trailer %+v, %v", c.name, sid, err)
		}
	}
}
