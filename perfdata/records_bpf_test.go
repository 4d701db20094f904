package perfdata

import (
	"reflect"
	"testing"
)

func TestKsymbolRoundTrip(t *testing.T) {
	k := Ksymbol{Addr: 0xffffffffc0025b90, Len: 2364, Type: KsymbolTypeBPF,
		Name: "bpf_prog_ff31f88b2750e046_dump_task"}
	rec := k.Append(nil, 0, nil)
	// header 8, addr 8, len/type/flags 8, a 35-byte name padded to 40:
	// the 0x40 perf writes before the trailer.
	if len(rec) != 0x40 {
		t.Errorf("ksymbol record of %d bytes, want 64", len(rec))
	}
	got, _, err := ParseKsymbol(rec, 0)
	if err != nil || got != k {
		t.Errorf("ksymbol: %+v %v", got, err)
	}
	rec = k.Append(nil, testST, &testSID)
	got, sid, err := ParseKsymbol(rec, testST)
	if err != nil || got != k || sid != testSID {
		t.Errorf("ksymbol with trailer: %+v %+v %v", got, sid, err)
	}
	rec[len(rec)-SampleIDSize(testST)-1] = 'x' // the name's NUL padding
	for i := 24; i < len(rec)-SampleIDSize(testST); i++ {
		if rec[i] == 0 {
			rec[i] = 'x'
		}
	}
	if _, _, err := ParseKsymbol(rec, testST); err == nil {
		t.Error("a name without its NUL parsed")
	}
}

func TestBPFEventRoundTrip(t *testing.T) {
	e := BPFEvent{Type: BPFEventProgLoad, ID: 43723,
		Tag: [8]byte{0xff, 0x31, 0xf8, 0x8b, 0x27, 0x50, 0xe0, 0x46}}
	rec := e.Append(nil, 0, nil)
	if len(rec) != 24 { // perf's 0x18 before the trailer
		t.Errorf("bpf event record of %d bytes, want 24", len(rec))
	}
	got, _, err := ParseBPFEvent(rec, 0)
	if err != nil || got != e {
		t.Errorf("bpf event: %+v %v", got, err)
	}
	rec = e.Append(nil, testST, &testSID)
	got, sid, err := ParseBPFEvent(rec, testST)
	if err != nil || got != e || sid != testSID {
		t.Errorf("bpf event with trailer: %+v %+v %v", got, sid, err)
	}
	if _, _, err := ParseBPFEvent(rec, 0); err == nil {
		t.Error("a BPF_EVENT with 8 bytes too many parsed")
	}
}

// FuzzParseKsymbol: a record that parses re-encodes to one that parses
// to the same values.
func FuzzParseKsymbol(f *testing.F) {
	k := Ksymbol{Addr: 1, Len: 2, Type: KsymbolTypeBPF, Name: "bpf_prog_0011223344556677_f"}
	f.Add(k.Append(nil, testST, &testSID))
	f.Fuzz(func(t *testing.T, rec []byte) {
		got, sid, err := ParseKsymbol(rec, testST)
		if err != nil {
			return
		}
		again, sid2, err := ParseKsymbol(got.Append(nil, testST, &sid), testST)
		if err != nil || again != got || sid2 != sid {
			t.Fatalf("re-encoded record differs: %+v vs %+v (%v)", again, got, err)
		}
	})
}

// FuzzParseBPFEvent: as FuzzParseKsymbol.
func FuzzParseBPFEvent(f *testing.F) {
	e := BPFEvent{Type: BPFEventProgLoad, ID: 7, Tag: [8]byte{1, 2, 3}}
	f.Add(e.Append(nil, testST, &testSID))
	f.Fuzz(func(t *testing.T, rec []byte) {
		got, sid, err := ParseBPFEvent(rec, testST)
		if err != nil {
			return
		}
		again, sid2, err := ParseBPFEvent(got.Append(nil, testST, &sid), testST)
		if err != nil || !reflect.DeepEqual(again, got) || sid2 != sid {
			t.Fatalf("re-encoded record differs: %+v vs %+v (%v)", again, got, err)
		}
	})
}
