package perfdata

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

const testST = SampleIP | SampleTID | SampleTime | SampleCPU | SamplePeriod

var testSID = SampleID{Pid: 7, Tid: 8, Time: 9, CPU: 1}

func TestMmap2RoundTrip(t *testing.T) {
	for _, m := range []Mmap2{
		{Misc: MiscUser, Pid: 1, Tid: 2, Addr: 0x1000, Len: 0x2000, Pgoff: 0x3000, Maj: 8, Min: 1,
			Ino: 99, InoGeneration: 5, Prot: 5, Flags: 2, Filename: "/lib/x.so"},
		{Misc: MiscUser | MiscMmapBuildID, Pid: 1, Tid: 1, Addr: 0x1000, Len: 0x1000,
			BuildID: bytes.Repeat([]byte{0xab}, 20), Prot: 5, Flags: 2, Filename: "/a"},
		{Misc: MiscUser | MiscMmapBuildID, BuildID: []byte{1, 2, 3}, Filename: ""},
	} {
		rec := m.Append(nil, testST, &testSID)
		got, sid, err := ParseMmap2(rec, testST)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) || sid != testSID {
			t.Errorf("round trip:\n got %+v %+v\nwant %+v %+v", got, sid, m, testSID)
		}
	}
}

// The layout of PERF_RECORD_MMAP2 (include/uapi/linux/perf_event.h):
// header 8, pid/tid 8, addr/len/pgoff 24, the 24-byte union, prot/flags
// 8, then the name at offset 72.
func TestMmap2Layout(t *testing.T) {
	m := Mmap2{Misc: MiscUser, Pid: 0x11, Tid: 0x22, Addr: 0x33, Len: 0x44, Pgoff: 0x55,
		Maj: 0x66, Min: 0x77, Ino: 0x88, InoGeneration: 0x99, Prot: 0xaa, Flags: 0xbb, Filename: "abcdefg"}
	rec := m.Append(nil, 0, nil)
	if len(rec) != 72+8 || le.Uint16(rec[6:]) != 80 || le.Uint32(rec) != 10 || le.Uint16(rec[4:]) != MiscUser {
		t.Fatalf("header of % x", rec[:8])
	}
	for off, want := range map[int]uint64{8: 0x11, 12: 0x22, 16: 0x33, 24: 0x44, 32: 0x55, 40: 0x66,
		44: 0x77, 48: 0x88, 56: 0x99, 64: 0xaa, 68: 0xbb} {
		if got := le.Uint32(rec[off:]); uint64(got) != want {
			t.Errorf("offset %d: %#x, want %#x", off, got, want)
		}
	}
	if string(rec[72:]) != "abcdefg\x00" {
		t.Errorf("name %q", rec[72:])
	}
	b := Mmap2{BuildID: []byte{0xde, 0xad}}
	rec = b.Append(nil, 0, nil)
	if le.Uint16(rec[4:])&MiscMmapBuildID == 0 || rec[40] != 2 || rec[44] != 0xde || rec[45] != 0xad {
		t.Errorf("build-id form: % x", rec[40:64])
	}
}

// Names are NUL-terminated and padded to 8, so a name of 8k bytes takes
// 8k+8.
func TestNamePadding(t *testing.T) {
	for n := 0; n <= 17; n++ {
		checkName(t, strings.Repeat("x", n))
	}
	checkName(t, "/"+strings.Repeat("y", 4094))
}

func checkName(t *testing.T, name string) {
	t.Helper()
	c := Comm{Pid: 1, Tid: 1, Comm: name}
	rec := c.Append(nil, testST, &testSID)
	want := 16 + (len(name)/8+1)*8 + SampleIDSize(testST)
	if len(rec) != want || len(rec)%8 != 0 {
		t.Errorf("name of %d bytes: record of %d, want %d", len(name), len(rec), want)
	}
	got, _, err := ParseComm(rec, testST)
	if err != nil || got.Comm != name {
		t.Errorf("name of %d bytes: %v, %d bytes back", len(name), err, len(got.Comm))
	}
}

func TestOtherRecordsRoundTrip(t *testing.T) {
	m := Mmap{Misc: MiscKernel, Pid: ^uint32(0), Addr: 0xffffffff81000000, Len: 0x1276508,
		Pgoff: 0xffffffff81000000, Filename: "[kernel.kallsyms]_text"}
	gm, _, err := ParseMmap(m.Append(nil, testST, &testSID), testST)
	if err != nil || gm != m {
		t.Errorf("mmap: %+v %v", gm, err)
	}
	f := Fork{Pid: 1, Ppid: 1, Tid: 2, Ptid: 1, Time: 3}
	rec := f.Append(nil, testST, &testSID)
	if len(rec) != 32+SampleIDSize(testST) {
		t.Errorf("fork record of %d bytes", len(rec))
	}
	gf, sid, err := ParseFork(rec, testST)
	if err != nil || gf != f || sid != testSID {
		t.Errorf("fork: %+v %+v %v", gf, sid, err)
	}
	l := Lost{ID: 1, Lost: 1000}
	gl, _, err := ParseLost(l.Append(nil, 0, nil), 0)
	if err != nil || gl != l {
		t.Errorf("lost: %+v %v", gl, err)
	}
	e := BuildIDEvent{Misc: MiscUser, Pid: -1, BuildID: bytes.Repeat([]byte{7}, 20), Filename: "/bin/true"}
	rec = e.Append(nil)
	if len(rec) != 36+64 {
		t.Errorf("build-id event of %d bytes, want 100", len(rec))
	}
	ge, err := ParseBuildIDEvent(rec)
	if err != nil || !reflect.DeepEqual(ge, e) {
		t.Errorf("build-id event: %+v %v", ge, err)
	}
}

func TestSampleIDSizes(t *testing.T) {
	for st, want := range map[uint64]int{
		0: 0, SampleIP: 0, SampleTID: 8, testST: 24,
		SampleTID | SampleTime | SampleTypeID | SampleStreamID | SampleCPU | SampleIdentifier: 48,
	} {
		s := SampleID{Pid: 1, Tid: 2, Time: 3, ID: 4, StreamID: 5, CPU: 6, Identifier: 7}
		b := AppendSampleID(nil, st, &s)
		if SampleIDSize(st) != want || len(b) != want {
			t.Errorf("sample type %#x: size %d / %d bytes, want %d", st, SampleIDSize(st), len(b), want)
		}
	}
}

func TestAttrRoundTrip(t *testing.T) {
	a := Attr{Type: 1, Size: AttrSize, Config: 9, SamplePeriod: 1, SampleType: testST,
		Flags: AttrMmap | AttrSampleIDAll | AttrMmap2, ClockID: 1, SampleMaxStack: 127, SigData: 5}
	b := a.Append(nil)
	if len(b) != AttrSize {
		t.Fatalf("attr of %d bytes", len(b))
	}
	// flags at offset 40, clockid at 92 (struct perf_event_attr).
	if le.Uint64(b[40:]) != a.Flags || le.Uint32(b[92:]) != 1 {
		t.Errorf("flags/clockid misplaced")
	}
	got, err := ParseAttr(b)
	if err != nil || got != a {
		t.Errorf("round trip: %+v %v", got, err)
	}
}

// An attr is written as AttrSize bytes, and says so, whatever size it
// came with: an older perf's 112 bytes, a newer one's 136, or none.
func TestAttrSizeWritten(t *testing.T) {
	for _, size := range []uint32{0, 64, 112, AttrSize, 136} {
		a := Attr{Type: 1, Size: size, Config: 9, SigData: 5}
		b := a.Append(nil)
		if len(b) != AttrSize || le.Uint32(b[4:]) != AttrSize {
			t.Errorf("size %d: %d bytes, size field %d; want %d", size, len(b), le.Uint32(b[4:]), AttrSize)
		}
	}
}

func TestParseErrors(t *testing.T) {
	good := (&Comm{Pid: 1, Tid: 1, Comm: "abc"}).Append(nil, testST, &testSID)
	bad := map[string][]byte{
		"short":      good[:6],
		"size lies":  append(append([]byte{}, good...), 0, 0, 0, 0, 0, 0, 0, 0),
		"wrong type": (&Fork{}).Append(nil, testST, &testSID),
		"no NUL":     func() []byte { b := bytes.Clone(good); copy(b[16:24], "abcdefgh"); return b }(),
	}
	for name, rec := range bad {
		if _, _, err := ParseComm(rec, testST); err == nil {
			t.Errorf("%s: no error", name)
		} else if _, ok := err.(*FormatError); !ok {
			t.Errorf("%s: %T, want *FormatError", name, err)
		}
	}
}
