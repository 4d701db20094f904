package perfdata

import (
	"bytes"
	"testing"
)

// textPoke builds a TEXT_POKE record as perf_event_text_poke() lays it
// out: u64 addr, u16 old_len, u16 new_len, the bytes padded to 8.
func textPoke(old, new []byte, st uint64, sid *SampleID) []byte {
	b, at := startRecord(nil, RecordTextPoke, MiscKernel)
	b = le.AppendUint64(b, 0xffffffff81000000)
	b = le.AppendUint16(b, uint16(len(old)))
	b = le.AppendUint16(b, uint16(len(new)))
	b = append(b, old...)
	b = append(b, new...)
	for (len(b)-at)%8 != 0 {
		b = append(b, 0)
	}
	return finishRecord(b, at, st, sid)
}

// grow makes rec what the kernel serves an event heard after others
// whose trailers add extra bytes: its size grown, stale bytes past its
// own trailer.
func grow(rec []byte, extra int) []byte {
	g := append(bytes.Clone(rec), bytes.Repeat([]byte{0xa5}, extra)...)
	RecordView(g).SetSize(len(g))
	return g
}

func grownRecords() map[string][]byte {
	sid := &SampleID{Pid: 1, Tid: 1, Time: 42, Identifier: 77}
	return map[string][]byte{
		"ksymbol": (&Ksymbol{Addr: 0xffffffffc0025b90, Len: 2364, Type: KsymbolTypeBPF,
			Name: "bpf_prog_ff31f88b2750e046_dump_task"}).Append(nil, testST, sid),
		"ksymbol name of 7": (&Ksymbol{Addr: 1, Len: 2, Name: "bpf_abc"}).Append(nil, testST, sid),
		"ksymbol name of 8": (&Ksymbol{Addr: 1, Len: 2, Name: "bpf_abcd"}).Append(nil, testST, sid),
		"bpf_event":         (&BPFEvent{Type: BPFEventProgLoad, ID: 9, Tag: [8]byte{1, 2, 3}}).Append(nil, testST, sid),
		"text_poke":         textPoke([]byte{1, 2, 3, 4, 5}, []byte{6, 7, 8, 9, 10}, testST, sid),
		"text_poke even":    textPoke([]byte{1, 2}, []byte{3, 4}, testST, sid),
	}
}

// TestTrimGrown: a record grown by any number of other events' trailers
// comes back as the kernel meant it, its own trailer at its end.
func TestTrimGrown(t *testing.T) {
	for name, rec := range grownRecords() {
		for _, extra := range []int{0, 8, 24, 32 * 3} {
			g := grow(rec, extra)
			n, err := TrueSize(g, testST)
			if err != nil || n != len(rec) {
				t.Errorf("%s grown by %d: true size %d, %v; want %d", name, extra, n, err, len(rec))
				continue
			}
			got, cut, err := TrimGrown(g, testST)
			if err != nil || cut != extra || !bytes.Equal(got, rec) {
				t.Errorf("%s grown by %d: cut %d, %v, %x; want %x", name, extra, cut, err, got, rec)
			}
			if sid, err := ParseSampleID(got, testST); err != nil || sid.Time != 42 || sid.Pid != 1 {
				t.Errorf("%s grown by %d: trailer %+v, %v", name, extra, sid, err)
			}
		}
	}
}

func TestTrueSizeRefuses(t *testing.T) {
	recs := grownRecords()
	k := recs["ksymbol"]
	noNUL := bytes.Clone(k[:32])
	for i := 24; i < len(noNUL); i++ {
		noNUL[i] = 'x'
	}
	RecordView(noNUL).SetSize(len(noNUL))
	for name, rec := range map[string][]byte{
		"header only":      k[:8],
		"size past end":    k[:len(k)-8],
		"name without NUL": noNUL,
		// Read with a trailer larger than the event's.
		"short trailer":  recs["bpf_event"],
		"text_poke lens": grow(textPoke([]byte{1}, []byte{2}, 0, nil)[:16], 0),
	} {
		st := uint64(testST)
		if name == "short trailer" {
			st |= SampleCPU | SampleStreamID
		}
		if n, err := TrueSize(rec, st); err == nil {
			t.Errorf("%s: true size %d, no error", name, n)
		} else {
			checkFormatError(t, err)
		}
	}
}

// TestTrimGrownOtherTypes: only the three record types the kernel grows
// are cut.
func TestTrimGrownOtherTypes(t *testing.T) {
	for _, rec := range testRecords() {
		g := grow(rec, 16)
		got, cut, err := TrimGrown(g, testST)
		if err != nil || cut != 0 || len(got) != len(g) {
			t.Errorf("%s: cut %d, %v", RecordView(rec).Type(), cut, err)
		}
	}
}

// FuzzTrimGrown: any input is cut to a record whose true size is its
// size, or refused with a *FormatError; never a panic.
func FuzzTrimGrown(f *testing.F) {
	for _, rec := range grownRecords() {
		f.Add(grow(rec, 16), uint64(testST))
	}
	f.Fuzz(func(t *testing.T, rec []byte, st uint64) {
		got, cut, err := TrimGrown(rec, st)
		if err != nil {
			checkFormatError(t, err)
			return
		}
		if cut < 0 || len(got)+cut != len(rec) || RecordView(got).Size() != len(got) {
			t.Fatalf("cut %d of %d bytes to %d, size %d", cut, len(rec), len(got), RecordView(got).Size())
		}
		if n, err := TrueSize(got, st); err != nil || n != len(got) {
			t.Fatalf("trimmed record's true size %d, %v; have %d", n, err, len(got))
		}
	})
}
