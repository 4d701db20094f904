package perfdata

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// auxtraceRecord is a PERF_RECORD_AUXTRACE (struct perf_record_auxtrace,
// tools/lib/perf/include/perf/event.h) announcing size bytes of trace.
func auxtraceRecord(size uint64) []byte {
	b := make([]byte, 48)
	le.PutUint32(b, uint32(RecordAuxtrace))
	le.PutUint16(b[6:], 48)
	le.PutUint64(b[8:], size)  // size
	le.PutUint64(b[16:], 0)    // offset in the AUX area
	le.PutUint64(b[24:], 0x77) // reference
	le.PutUint32(b[32:], 0)    // idx
	le.PutUint32(b[36:], 100)  // tid
	le.PutUint32(b[40:], 0)    // cpu
	return b
}

// The trace that follows an AUXTRACE record in the data is the record's
// Payload, in file and pipe mode, for both readers; the record after it
// reads whole. perf reads the same file to the same end.
func TestAuxtracePayload(t *testing.T) {
	trace := bytes.Repeat([]byte{0xa5, 0x5a, 0x00, 0xff}, 64)
	recs := testRecords()
	for _, pipe := range []bool{false, true} {
		out := &seekBuffer{}
		w, err := NewWriter(out, WriterOptions{Attrs: []EventAttr{{Attr: testAttr(), Name: "dummy:u"}},
			Features: testFeatures("synth", "test"), Mode: modeOf(pipe)})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteRecord(recs[1]); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteRecordPayload(auxtraceRecord(uint64(len(trace))), trace); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteRecord(recs[4]); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		rd, err := NewReader(bytes.NewReader(out.b), int64(len(out.b)))
		if err != nil {
			t.Fatal(err)
		}
		readers := []interface{ Next() (Record, error) }{rd}
		if pipe {
			sr, err := NewStreamReader(bytes.NewReader(out.b))
			if err != nil {
				t.Fatal(err)
			}
			readers = append(readers, sr)
		}
		for i, r := range readers {
			var got []RecordType
			for {
				rec, err := r.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("pipe=%v reader %d: %v", pipe, i, err)
				}
				if rec.Type >= RecordHeaderAttr && rec.Type != RecordAuxtrace {
					continue // the pipe's header records
				}
				got = append(got, rec.Type)
				switch rec.Type {
				case RecordAuxtrace:
					if !bytes.Equal(rec.Payload, trace) || len(rec.Data) != 48 {
						t.Errorf("pipe=%v reader %d: record of %d bytes, payload % x", pipe, i, len(rec.Data), rec.Payload)
					}
				case RecordMmap2:
					if !bytes.Equal(rec.Data, recs[4]) || rec.Payload != nil {
						t.Errorf("pipe=%v reader %d: the MMAP2 after the trace reads % x", pipe, i, rec.Data)
					}
				}
			}
			want := []RecordType{RecordComm, RecordAuxtrace, RecordMmap2}
			if !slices.Equal(got, want) {
				t.Errorf("pipe=%v reader %d: records %v, want %v", pipe, i, got, want)
			}
		}
		// perf reads the records after the trace only if it skips the
		// trace exactly; perf report wants AUXTRACE_INFO too, but perf
		// inject copies the trace through, and the readers must find it
		// in its output, with the MMAP2 after it.
		in, injectArgs := out.b, []string{"inject", "-i", "-", "-o", "-"}
		if !pipe {
			path := filepath.Join(t.TempDir(), "perf.data")
			if err := os.WriteFile(path, out.b, 0o644); err != nil {
				t.Fatal(err)
			}
			in, injectArgs = nil, []string{"inject", "-i", path, "-o", path + ".injected"}
		}
		injected := []byte(perfRun(t, in, injectArgs...))
		if !pipe {
			if injected, err = os.ReadFile(injectArgs[4]); err != nil {
				t.Fatal(err)
			}
		}
		rd, err = NewReader(bytes.NewReader(injected), int64(len(injected)))
		if err != nil {
			t.Fatalf("pipe=%v: perf inject's output: %v", pipe, err)
		}
		var payload []byte
		var after RecordType
		for {
			rec, err := rd.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("pipe=%v: perf inject's output: %v", pipe, err)
			}
			if payload != nil && rec.Type < RecordHeaderAttr && after == 0 {
				after = rec.Type
			}
			if rec.Type == RecordAuxtrace {
				payload = bytes.Clone(rec.Payload)
			}
		}
		if !bytes.Equal(payload, trace) || after != RecordMmap2 {
			t.Errorf("pipe=%v: perf inject wrote the payload % x, then %v", pipe, payload, after)
		}
	}
}
