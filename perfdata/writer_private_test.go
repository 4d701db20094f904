package perfdata

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
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
