package perfdata

import (
	"bytes"
	"errors"
	"slices"
	"testing"
)

// TestViews checks every view against the checked decoders, on records
// the encoders wrote, and that SetBuildID gives the record ParseMmap2
// reads as the build-ID form.
func TestViews(t *testing.T) {
	const st = SampleTID | SampleTime
	sid := &SampleID{Pid: 7, Tid: 8, Time: 9}
	m := Mmap2{Misc: MiscUser, Pid: 7, Tid: 8, Addr: 0x400000, Len: 0x3000, Pgoff: 0x1000,
		Maj: 8, Min: 1, Ino: 12, InoGeneration: 3, Prot: 5, Flags: 2, Filename: "/usr/bin/true"}
	rec := m.Append(nil, st, sid)
	v := Mmap2View(rec)
	maj, mn, ino, gen := v.Inode()
	if v.Pid() != 7 || v.Tid() != 8 || v.Addr() != m.Addr || v.Len() != m.Len || v.Pgoff() != m.Pgoff ||
		v.Prot() != 5 || v.Flags() != 2 || maj != 8 || mn != 1 || ino != 12 || gen != 3 ||
		string(v.Filename()) != m.Filename || v.HasBuildID() || v.BuildID() != nil {
		t.Errorf("view of %+v reads pid %d tid %d %x+%x@%x prot %d flags %d %d:%d %d/%d %q",
			m, v.Pid(), v.Tid(), v.Addr(), v.Len(), v.Pgoff(), v.Prot(), v.Flags(), maj, mn, ino, gen, v.Filename())
	}
	r := RecordView(rec)
	if r.Type() != RecordMmap2 || r.Size() != len(rec) || r.Misc() != MiscUser || r.Pid() != 7 || r.Tid() != 8 {
		t.Errorf("record view: type %v size %d misc %d pid %d tid %d", r.Type(), r.Size(), r.Misc(), r.Pid(), r.Tid())
	}
	id := bytes.Repeat([]byte{0xab}, BuildIDMax)
	v.SetBuildID(id)
	got, gotSID, err := ParseMmap2(rec, st)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.BuildID, id) || got.Maj != 0 || got.Ino != 0 || got.Filename != m.Filename ||
		got.Prot != 5 || got.Misc != MiscUser|MiscMmapBuildID || gotSID != *sid {
		t.Errorf("after SetBuildID: %+v %+v", got, gotSID)
	}
	if !bytes.Equal(v.BuildID(), id) {
		t.Errorf("view's build ID %x, want %x", v.BuildID(), id)
	}
	short := []byte{1, 2, 3}
	v.SetBuildID(short)
	if got, _, _ := ParseMmap2(rec, st); !bytes.Equal(got.BuildID, short) || !bytes.Equal(v.BuildID(), short) {
		t.Errorf("a shorter build ID reads %x and %x", got.BuildID, v.BuildID())
	}

	f := (&Fork{Pid: 10, Ppid: 1, Tid: 11, Ptid: 1}).Append(nil, st, sid)
	if fv := RecordView(f); fv.Pid() != 10 || fv.Tid() != 11 || fv.Ppid() != 1 {
		t.Errorf("fork view: pid %d tid %d ppid %d", fv.Pid(), fv.Tid(), fv.Ppid())
	}
	c := (&Comm{Pid: 10, Tid: 11, Comm: "worker"}).Append(nil, st, sid)
	if string(CommView(c).Comm()) != "worker" || RecordView(c).Tid() != 11 {
		t.Errorf("comm view: %q tid %d", CommView(c).Comm(), RecordView(c).Tid())
	}
	k := (&Mmap{Misc: MiscKernel, Pid: ^uint32(0), Addr: 1, Len: 2, Filename: "[kernel.kallsyms]_text"}).Append(nil, st, sid)
	if string(MmapView(k).Filename()) != "[kernel.kallsyms]_text" {
		t.Errorf("mmap view: %q", MmapView(k).Filename())
	}
}

// The in-place readers of a sample agree with ParseSample for every
// layout of the fields before them.
func TestSampleInPlace(t *testing.T) {
	raw := []byte("synth_hdr and a record")
	for _, st := range []uint64{
		SampleIdentifier | SampleTID | SampleTime | SampleRaw, // the BPF output events'
		SampleIP | SampleTID | SampleTime | SampleCPU | SamplePeriod | SampleCallchain | SampleRaw,
		SampleIdentifier | SampleIP | SampleTID | SampleTime | SampleAddr | SampleTypeID | SampleStreamID | SampleRaw,
		SampleTID | SampleTime, // no RAW
	} {
		a := &Attr{SampleType: st}
		s := Sample{Identifier: 7, IP: 0x401000, Pid: 11, Tid: 12, Time: 1234, Addr: 5, ID: 6, StreamID: 8,
			CPU: 1, Period: 9, Callchain: []uint64{1, 2, 3}, Raw: raw}
		rec := s.Append(nil, a)
		p, err := ParseSample(rec, a)
		if err != nil {
			t.Fatal(err)
		}
		if tm, ok := SampleView(rec).Time(st); !ok || tm != p.Time {
			t.Errorf("%#x: SampleView.Time %d %v, want %d", st, tm, ok, p.Time)
		}
		if pid, tid, ok := SampleView(rec).TID(st); !ok || pid != p.Pid || tid != p.Tid {
			t.Errorf("%#x: SampleView.TID %d/%d %v, want %d/%d", st, pid, tid, ok, p.Pid, p.Tid)
		}
		got, ok := SampleView(rec).Raw(st)
		if st&SampleRaw == 0 {
			if ok {
				t.Errorf("%#x: SampleView.Raw found RAW in a sample without it", st)
			}
			continue
		}
		if !ok || string(got) != string(raw) {
			t.Errorf("%#x: SampleView.Raw %q %v, want %q", st, got, ok, raw)
		}
		if _, ok := SampleView(rec[:len(rec)-len(raw)]).Raw(st); ok {
			t.Errorf("%#x: SampleView.Raw read a RAW cut short", st)
		}
	}
}

// Records walks back-to-back records and stops, with the offset, at one
// whose size is out of range.
func TestRecords(t *testing.T) {
	a := (&Comm{Pid: 1, Tid: 1, Comm: "a"}).Append(nil, 0, nil)
	b := (&Mmap2{Pid: 2, Tid: 2, Filename: "/lib/b"}).Append(nil, 0, nil)
	buf := append(append([]byte(nil), a...), b...)
	var types []RecordType
	for rec, err := range Records(buf) {
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, rec.Type())
	}
	if len(types) != 2 || types[0] != RecordComm || types[1] != RecordMmap2 {
		t.Errorf("types %v, want COMM, MMAP2", types)
	}
	for _, bad := range [][]byte{
		append(slices.Clone(buf), 1, 2, 3),              // a header cut short
		append(slices.Clone(a), b[:len(b)-1]...),        // a record cut short
		append(slices.Clone(a), 0, 0, 0, 0, 0, 0, 0, 0), // size 0
	} {
		var fe *FormatError
		n := 0
		for _, err := range Records(bad) {
			if err != nil {
				if !errors.As(err, &fe) || fe.Off != int64(len(a)) && fe.Off != int64(len(buf)) {
					t.Errorf("error %v, want a FormatError at %d or %d", err, len(a), len(buf))
				}
				break
			}
			n++
		}
		if fe == nil {
			t.Errorf("%d bytes: no error after %d records", len(bad), n)
		}
	}
}
