package perfdata

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

// appender is what every record struct but Sample implements.
type appender interface {
	Append(b []byte, sampleType uint64, sid *SampleID) []byte
}

// everyRecord has a value of each record struct, with every field set.
func everyRecord() []appender {
	return []appender{
		&Mmap{Misc: MiscUser, Pid: 1, Tid: 2, Addr: 0x1000, Len: 0x2000, Pgoff: 0x3000, Filename: "/bin/x"},
		&Mmap2{Misc: MiscUser, Pid: 1, Tid: 2, Addr: 0x1000, Len: 0x2000, Pgoff: 3, Maj: 8, Min: 1, Ino: 99,
			InoGeneration: 5, Prot: 5, Flags: 2, Filename: "/lib/x.so"},
		&Mmap2{Misc: MiscUser | MiscMmapBuildID, Pid: 1, Tid: 1, Addr: 0x1000, Len: 0x1000,
			BuildID: bytes.Repeat([]byte{0xab}, 20), Prot: 5, Flags: 2, Filename: "/a"},
		&Comm{Misc: MiscCommExec, Pid: 3, Tid: 4, Comm: "name"},
		&Fork{Misc: MiscForkExec, Pid: 5, Ppid: 1, Tid: 6, Ptid: 1, Time: 77},
		&Exit{Pid: 5, Ppid: 1, Tid: 6, Ptid: 1, Time: 78},
		&Lost{ID: 9, Lost: 10},
		&Throttle{Time: 1, ID: 2, StreamID: 3},
		&Throttle{Unthrottle: true, Time: 4, ID: 5, StreamID: 6},
		&LostSamples{Lost: 11},
		&Switch{Misc: MiscSwitchOut},
		&Switch{CPUWide: true, NextPrevPid: 12, NextPrevTid: 13},
		&Namespaces{Pid: 1, Tid: 2, Links: []NSLink{{Dev: 3, Ino: 4}, {Dev: 5, Ino: 6}}},
		&Ksymbol{Addr: 0xffffffffc0000000, Len: 64, Type: KsymbolTypeBPF, Name: "bpf_prog_0123456789abcdef_f"},
		&BPFEvent{Type: BPFEventProgLoad, ID: 42, Tag: [BPFTagSize]byte{1, 2, 3, 4, 5, 6, 7, 8}},
		&Cgroup{ID: 7, Path: "/system.slice"},
	}
}

// Every record type round-trips through Append and Decode, with and
// without a trailer.
func TestDecodeRoundTrip(t *testing.T) {
	for _, a := range []Attr{{SampleType: testST, Flags: AttrSampleIDAll}, {SampleType: testST}} {
		sid := testSID
		psid := &sid
		if a.Flags&AttrSampleIDAll == 0 {
			psid, sid = nil, SampleID{}
		}
		for _, want := range everyRecord() {
			rec := want.Append(nil, a.SampleType, psid)
			got, gotSID, err := Decode(rec, &a)
			if err != nil {
				t.Fatalf("%T: %v", want, err)
			}
			if w := reflect.ValueOf(want).Elem().Interface(); !reflect.DeepEqual(got, w) || gotSID != sid {
				t.Errorf("round trip:\n got %#v %+v\nwant %#v %+v", got, gotSID, w, sid)
			}
		}
	}
}

// fullAttr selects every field of a sample.
func fullAttr(readFormat uint64) Attr {
	return Attr{
		SampleType: SampleIdentifier | SampleIP | SampleTID | SampleTime | SampleAddr | SampleTypeID |
			SampleStreamID | SampleCPU | SamplePeriod | SampleRead | SampleCallchain | SampleRaw |
			SampleBranchStack | SampleRegsUser | SampleStackUser | SampleWeight | SampleDataSrc |
			SampleTransaction | SampleRegsIntr | SamplePhysAddr | SampleAux | SampleCgroup |
			SampleDataPageSize | SampleCodePageSize,
		ReadFormat:       readFormat,
		BranchSampleType: BranchHWIndex,
		SampleRegsUser:   0b1011,
		SampleRegsIntr:   0b11,
	}
}

func TestSampleRoundTrip(t *testing.T) {
	group := uint64(ReadGroup | ReadTotalTimeEnabled | ReadTotalTimeRunning | ReadID | ReadLost)
	for _, tc := range []struct {
		attr Attr
		s    Sample
	}{
		{Attr{SampleType: SampleIP | SampleTID | SampleTime | SampleCPU | SamplePeriod | SampleCallchain},
			Sample{Misc: MiscUser, IP: 0x401000, Pid: 1, Tid: 2, Time: 3, CPU: 1, Period: 1000,
				Callchain: []uint64{0xfffffffffffffe00, 0x401000, 0x402000}}},
		{fullAttr(group), Sample{Identifier: 1, IP: 2, Pid: 3, Tid: 4, Time: 5, Addr: 6, ID: 7, StreamID: 8,
			CPU: 9, Period: 10,
			Read:      ReadValues{TimeEnabled: 11, TimeRunning: 12, Values: []ReadValue{{13, 14, 15}, {16, 17, 18}}},
			Callchain: []uint64{19}, Raw: []byte{1, 2, 3, 4}, BranchHWIndex: 20,
			Branches:    []Branch{{21, 22, 23}},
			RegsUserABI: 2, RegsUser: []uint64{24, 25, 26}, StackUser: bytes.Repeat([]byte{7}, 16), StackUserDyn: 8,
			Weight: 27, DataSrc: 28, Transaction: 29, RegsIntrABI: 2, RegsIntr: []uint64{30, 31},
			PhysAddr: 32, Aux: []byte{1, 2, 3, 4, 5, 6, 7, 8}, Cgroup: 33, DataPageSize: 4096, CodePageSize: 4096}},
		{fullAttr(ReadTotalTimeEnabled | ReadID), Sample{Read: ReadValues{TimeEnabled: 1, Values: []ReadValue{{Value: 2, ID: 3}}},
			Raw: []byte{0, 0, 0, 0}}},
	} {
		rec := tc.s.Append(nil, &tc.attr)
		if len(rec)%8 != 0 {
			t.Errorf("sample of %d bytes, not 8-aligned", len(rec))
		}
		got, _, err := Decode(rec, &tc.attr)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.s) {
			t.Errorf("round trip:\n got %+v\nwant %+v", got, tc.s)
		}
		// Cut short anywhere, it is an error, never a panic.
		for n := headerSize; n < len(rec); n += 8 {
			short := bytes.Clone(rec[:n])
			le.PutUint16(short[6:], uint16(n))
			if _, err := ParseSample(short, &tc.attr); err == nil {
				t.Errorf("sample cut to %d of %d bytes decoded", n, len(rec))
			}
		}
	}
}

func TestDecodeUnknown(t *testing.T) {
	rec := headerOnly(RecordFinishedRound)
	if _, _, err := Decode(rec, &Attr{}); !errors.Is(err, ErrUnknownType) {
		t.Errorf("FINISHED_ROUND: %v, want ErrUnknownType", err)
	}
}

func TestRecordTypeString(t *testing.T) {
	for typ, want := range map[RecordType]string{RecordMmap2: "MMAP2", RecordSample: "SAMPLE",
		RecordFinishedInit: "FINISHED_INIT", RecordHeaderAttr: "ATTR", 1000: "RecordType(1000)"} {
		if got := typ.String(); got != want {
			t.Errorf("%d: %q, want %q", uint32(typ), got, want)
		}
	}
}

// FuzzDecode: any record decodes to a value or an error, never a panic;
// a value encodes back to a record that decodes to the same value.
func FuzzDecode(f *testing.F) {
	a := fullAttr(ReadGroup | ReadID | ReadTotalTimeEnabled)
	a.Flags = AttrSampleIDAll
	for _, r := range everyRecord() {
		f.Add(r.Append(nil, a.SampleType, &testSID), a.SampleType, a.ReadFormat)
	}
	s := Sample{Callchain: []uint64{1, 2}, Read: ReadValues{Values: []ReadValue{{1, 2, 0}}}, Raw: []byte{1, 2, 3, 4}}
	f.Add(s.Append(nil, &a), a.SampleType, a.ReadFormat)
	f.Fuzz(func(t *testing.T, rec []byte, sampleType, readFormat uint64) {
		a := fullAttr(readFormat)
		a.SampleType &= sampleType
		a.Flags = AttrSampleIDAll
		v, sid, err := Decode(rec, &a)
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) && !errors.Is(err, ErrUnknownType) {
				t.Fatalf("error %T: %v", err, err)
			}
			return
		}
		var again []byte
		switch v := v.(type) {
		case Sample:
			again = v.Append(nil, &a)
		default:
			p := reflect.New(reflect.TypeOf(v))
			p.Elem().Set(reflect.ValueOf(v))
			again = p.Interface().(appender).Append(nil, a.SampleType, &sid)
		}
		v2, sid2, err := Decode(again, &a)
		if err != nil || !reflect.DeepEqual(v, v2) || sid != sid2 {
			t.Fatalf("decoded %#v; encoded again it decodes to %#v (%v)", v, v2, err)
		}
	})
}

// FeatureID names the features as perf report --header-only does.
func TestFeatureIDString(t *testing.T) {
	for id, want := range map[FeatureID]string{
		FeatBuildID: "BUILD_ID", FeatCPUTopology: "CPU_TOPOLOGY", FeatPMUCaps: "PMU_CAPS",
		FeatLast: "FeatureID(32)",
	} {
		if got := id.String(); got != want {
			t.Errorf("FeatureID(%d).String() = %q, want %q", int(id), got, want)
		}
	}
}
