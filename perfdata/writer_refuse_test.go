package perfdata

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// typed is a record of type typ: a header and n bytes of payload.
func typed(typ RecordType, n int) []byte {
	b := make([]byte, 8+n)
	le.PutUint32(b, uint32(typ))
	le.PutUint16(b[6:], uint16(len(b)))
	return b
}

// The writer refuses synth's private records, whatever the mode, and
// writes perf's and a newer perf's unknown types as they are.
func TestWriterRefusesPrivate(t *testing.T) {
	for _, pipe := range []bool{false, true} {
		f, err := os.Create(filepath.Join(t.TempDir(), "perf.data"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		w, err := NewWriter(f, WriterOptions{Attrs: []EventAttr{{Attr: testAttr()}}, Mode: modeOf(pipe)})
		if err != nil {
			t.Fatal(err)
		}
		for _, typ := range []RecordType{RecordPrivateFirst, 0x5e03, RecordPrivateLast} {
			err := w.WriteRecord(typed(typ, 40))
			if !errors.Is(err, ErrPrivateRecord) {
				t.Errorf("pipe=%v: type %#x: %v, want ErrPrivateRecord", pipe, uint32(typ), err)
			}
			if err := w.WriteRecordPayload(typed(typ, 8), []byte("payload\x00")); !errors.Is(err, ErrPrivateRecord) {
				t.Errorf("pipe=%v: type %#x with a payload: %v, want ErrPrivateRecord", pipe, uint32(typ), err)
			}
		}
		if err := w.WriteRecord(typed(0x5e03, 40)); err == nil || err.Error() != "write perf.data: synth-private record type 0x5e03" {
			t.Errorf("error %q", err)
		}
		mmap := testRecords()[4]
		passed := [][]byte{mmap, typed(83, 16), typed(RecordPrivateFirst-1, 8), typed(RecordPrivateLast+1, 8)}
		for _, rec := range passed {
			if err := w.WriteRecord(rec); err != nil {
				t.Errorf("pipe=%v: type %v: %v", pipe, RecordView(rec).Type(), err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatalf("pipe=%v: close after a refused record: %v", pipe, err)
		}
		b, err := os.ReadFile(f.Name())
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		var got [][]byte
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("pipe=%v: %v", pipe, err)
			}
			if rec.Type < RecordHeaderAttr || rec.Type > RecordFinishedInit {
				got = append(got, bytes.Clone(rec.Data))
			}
		}
		if len(got) != len(passed) {
			t.Fatalf("pipe=%v: %d records read back, want %d", pipe, len(got), len(passed))
		}
		for i := range got {
			if !bytes.Equal(got[i], passed[i]) {
				t.Errorf("pipe=%v: record %d differs: %x, want %x", pipe, i, got[i], passed[i])
			}
		}
	}
}

// The writer refuses an MMAP2 whose build_id_size says more than the
// record holds, which perf 6.1 aborts on; ClearBuildID makes it one the
// writer takes, of the maj/min/ino form, all zero.
func TestWriterRefusesBuildIDSize(t *testing.T) {
	st := uint64(testST)
	m := Mmap2{Misc: MiscUser, Pid: 100, Tid: 100, Addr: 0x400000, Len: 0x1000, Prot: 5, Flags: 2,
		BuildID: bytes.Repeat([]byte{0xab}, BuildIDMax), Filename: "/usr/bin/main"}
	rec := m.Append(nil, st, &SampleID{Pid: 100, Tid: 100})
	w, err := NewWriter(io.Discard, WriterOptions{Attrs: []EventAttr{{Attr: testAttr()}}, Mode: ModePipe})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteRecord(rec); err != nil {
		t.Fatalf("build ID of %d bytes: %v", BuildIDMax, err)
	}
	v := Mmap2View(rec)
	rec[mmap2BuildIDSize] = BuildIDMax + 12
	if v.BuildIDSize() != 32 {
		t.Errorf("BuildIDSize %d", v.BuildIDSize())
	}
	err = w.WriteRecord(rec)
	if !errors.Is(err, ErrBuildIDSize) || err.Error() != "write perf.data: mmap2 build id size over 20: 32" {
		t.Errorf("build ID of 32 bytes: %v", err)
	}
	v.ClearBuildID()
	if err := w.WriteRecord(rec); err != nil {
		t.Fatalf("cleared: %v", err)
	}
	got, _, err := ParseMmap2(rec, st)
	if err != nil {
		t.Fatal(err)
	}
	want := m
	want.BuildID = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cleared: %+v, want %+v", got, want)
	}
	short := bytes.Clone(rec[:64])
	RecordView(short).SetSize(64)
	RecordView(short).SetMisc(MiscMmapBuildID)
	if err := w.WriteRecord(short); !errors.Is(err, ErrBuildIDSize) || !strings.HasSuffix(err.Error(), ": record of 64 bytes") {
		t.Errorf("build-ID MMAP2 of 64 bytes: %v", err)
	}
}
