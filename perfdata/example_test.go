package perfdata_test

import (
	"bytes"
	"fmt"
	"io"

	"github.com/synth-dev/synth/perfdata"
)

// Write one MMAP2 record in pipe mode and read it back.
func Example() {
	const st = perfdata.SampleTID | perfdata.SampleTime
	attr := perfdata.Attr{Type: 1, Config: 9, SampleType: st, Flags: perfdata.AttrSampleIDAll | perfdata.AttrMmap2}
	var out bytes.Buffer
	w, err := perfdata.NewWriter(&out, perfdata.WriterOptions{
		Attrs: []perfdata.EventAttr{{Attr: attr, Name: "dummy:u"}},
		Mode:  perfdata.ModePipe,
	})
	if err != nil {
		panic(err)
	}
	m := perfdata.Mmap2{Misc: perfdata.MiscUser, Pid: 42, Tid: 42, Addr: 0x400000, Len: 0x1000,
		Prot: 5, Flags: 2, Filename: "/usr/bin/true"}
	w.WriteRecord(m.Append(nil, st, &perfdata.SampleID{Pid: 42, Tid: 42}))
	if err := w.Close(); err != nil {
		panic(err)
	}

	r, err := perfdata.NewReader(bytes.NewReader(out.Bytes()), int64(out.Len()))
	if err != nil {
		panic(err)
	}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			break
		}
		if rec.Type != perfdata.RecordMmap2 {
			continue
		}
		got, sid, _ := perfdata.ParseMmap2(rec.Data, r.SampleType())
		fmt.Printf("%d/%d %#x+%#x %s\n", got.Pid, sid.Tid, got.Addr, got.Len, got.Filename)
	}
	// Output: 42/42 0x400000+0x1000 /usr/bin/true
}
