package perfdata

import (
	"bytes"
	"encoding/binary"
	"slices"
	"testing"
)

// Merge keeps what t has and adds what it lacks, programs and BTF in id
// order.
func TestTablesMerge(t *testing.T) {
	id := func(b byte) []byte { return bytes.Repeat([]byte{b}, 20) }
	a := Tables{
		BuildIDs: []BuildIDEvent{{Misc: MiscUser, Pid: -1, BuildID: id(1), Filename: "/lib/a"}},
		BPFProgs: []BPFProg{{ID: 7, Info: []byte{7}}},
	}
	a.Merge(Tables{
		BuildIDs: []BuildIDEvent{
			{Misc: MiscUser, Pid: -1, BuildID: id(9), Filename: "/lib/a"}, // a has it: kept as a has it
			{Misc: MiscUser, Pid: -1, BuildID: id(2), Filename: "/lib/b"},
			{Misc: MiscKernel, Pid: -1, BuildID: id(3), Filename: "/lib/a"}, // another kind
		},
		BPFProgs: []BPFProg{{ID: 9, Info: []byte{9}}, {ID: 3, Info: []byte{3}}, {ID: 7, Info: []byte{0}}},
		BTFs:     []BTF{{ID: 2, Data: []byte{2}}},
	})
	var names []string
	for _, e := range a.BuildIDs {
		names = append(names, e.Filename+":"+string(rune('0'+e.BuildID[0])))
	}
	if want := []string{"/lib/a:1", "/lib/b:2", "/lib/a:3"}; !slices.Equal(names, want) {
		t.Errorf("build IDs %v, want %v", names, want)
	}
	var progs []byte
	for _, p := range a.BPFProgs {
		progs = append(progs, byte(p.ID), p.Info[0])
	}
	if want := []byte{3, 3, 7, 7, 9, 9}; !bytes.Equal(progs, want) {
		t.Errorf("programs (id, info) %v, want %v", progs, want)
	}
	if len(a.BTFs) != 1 || a.BTFs[0].ID != 2 {
		t.Errorf("BTFs %+v", a.BTFs)
	}
}

// WriteTables puts the build IDs and, in file mode, the BPF sections
// into the header, where a reader finds them; in pipe mode the build
// IDs are records.
func TestWriteTables(t *testing.T) {
	tab := Tables{
		BuildIDs: []BuildIDEvent{{Misc: MiscUser, Pid: -1, BuildID: bytes.Repeat([]byte{5}, 20), Filename: "/bin/x"}},
		BPFProgs: []BPFProg{{ID: 4, Info: []byte("info")}},
		BTFs:     []BTF{{ID: 8, Data: []byte("btf")}},
	}
	for _, mode := range []Mode{ModeFile, ModePipe} {
		var out seekBuffer
		attr := Attr{Type: TypeSoftware, Config: CountSWDummy, SampleType: SampleTID, Flags: AttrSampleIDAll}
		w, err := NewWriter(&out, WriterOptions{Attrs: []EventAttr{{Attr: attr, IDs: []uint64{1}}}, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteTables(tab); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		rd, err := NewReader(bytes.NewReader(out.b), int64(len(out.b)))
		if err != nil {
			t.Fatal(err)
		}
		var ids []BuildIDEvent
		addIDs := func(b []byte) {
			for rec, err := range Records(b) {
				if err != nil {
					t.Fatal(err)
				}
				e, err := ParseBuildIDEvent(rec)
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, e)
			}
		}
		addIDs(featureData(rd.Features(), FeatBuildID))
		for {
			rec, err := rd.Next()
			if err != nil {
				break
			}
			if rec.Type == RecordHeaderBuildID {
				addIDs(rec.Data)
			}
		}
		feats := rd.Features()
		if len(ids) != 1 || ids[0].Filename != "/bin/x" || !bytes.Equal(ids[0].BuildID, tab.BuildIDs[0].BuildID) {
			t.Errorf("%v: build IDs read back %+v", mode, ids)
		}
		info := featureData(feats, FeatBPFProgInfo)
		if mode == ModeFile {
			want := append(binary.LittleEndian.AppendUint32(nil, 1), "info"...)
			if !bytes.Equal(info, want) {
				t.Errorf("file mode: HEADER_BPF_PROG_INFO %q, want %q", info, want)
			}
		}
	}
}

func featureData(fs []Feature, id FeatureID) []byte {
	for _, f := range fs {
		if f.ID == id {
			return f.Data
		}
	}
	return nil
}
