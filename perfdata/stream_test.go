package perfdata

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
)

// pipeFile writes testRecords in pipe mode, then the extra bytes.
func pipeFile(t testing.TB, extra ...[]byte) []byte {
	pipe := true
	out := &seekBuffer{}
	w, err := NewWriter(out, WriterOptions{Attrs: []EventAttr{{Attr: testAttr(), IDs: []uint64{5, 6}}},
		Features: testFeatures("synth"), Mode: modeOf(pipe)})
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range testRecords() {
		w.WriteRecord(rec)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.Join(append([][]byte{out.b}, extra...), nil)
}

// The stream reader reads a pipe as the file reader does, and the data
// that follows TRACING_DATA outside its size.
func TestStreamReader(t *testing.T) {
	tracing := make([]byte, 16)
	le.PutUint32(tracing, uint32(RecordHeaderTracingData))
	le.PutUint16(tracing[6:], 16)
	le.PutUint32(tracing[8:], 24) // u32 size of what follows
	payload := bytes.Repeat([]byte{0xee}, 24)
	in := pipeFile(t, tracing, payload, headerOnly(RecordFinishedRound))

	fr, err := NewReader(bytes.NewReader(in), int64(len(in)))
	if err != nil {
		t.Fatal(err)
	}
	sr, err := NewStreamReader(iotestHalf{bytes.NewReader(in)})
	if err != nil {
		t.Fatal(err)
	}
	var types []RecordType
	for {
		rec, err := sr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, rec.Type)
		if rec.Type == RecordHeaderTracingData {
			if !bytes.Equal(rec.Payload, payload) {
				t.Errorf("tracing data payload % x", rec.Payload)
			}
			break
		}
		want, err := fr.Next()
		if err != nil || want.Off != rec.Off || !bytes.Equal(want.Data, rec.Data) {
			t.Fatalf("record at %d: %v; file reader has %d % x", rec.Off, err, want.Off, want.Data)
		}
	}
	if rec, err := sr.Next(); err != nil || rec.Type != RecordFinishedRound {
		t.Errorf("after the payload: %v %v", rec.Type, err)
	}
	if !reflect.DeepEqual(sr.Attrs(), fr.Attrs()) || len(sr.Features()) != len(fr.Features()) {
		t.Errorf("attrs %+v features %d; file reader: %+v %d", sr.Attrs(), len(sr.Features()), fr.Attrs(), len(fr.Features()))
	}
	if len(types) < len(testRecords()) {
		t.Errorf("read %v", types)
	}
}

func TestStreamReaderErrors(t *testing.T) {
	in := pipeFile(t)
	for name, b := range map[string][]byte{
		"empty":      nil,
		"short":      in[:10],
		"cut record": in[:len(in)-3],
		"file mode":  append([]byte(magic), le.AppendUint64(nil, fileHeaderSize)...),
		"bad magic":  append([]byte("PERFILE3"), in[8:]...),
	} {
		err := readAll(b)
		var fe *FormatError
		if !errors.As(err, &fe) {
			t.Errorf("%s: %v, want a *FormatError", name, err)
		}
	}
}

func readAll(b []byte) error {
	sr, err := NewStreamReader(bytes.NewReader(b))
	if err != nil {
		return err
	}
	for range 100000 {
		if _, err := sr.Next(); err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
	return nil
}

// iotestHalf returns at most half of what is asked, as a pipe may.
type iotestHalf struct{ r io.Reader }

func (h iotestHalf) Read(p []byte) (int, error) { return h.r.Read(p[:(len(p)+1)/2]) }

// FuzzStreamReader: any input reads to io.EOF or a *FormatError.
func FuzzStreamReader(f *testing.F) {
	f.Add(pipeFile(f))
	f.Fuzz(func(t *testing.T, in []byte) {
		if err := readAll(in); err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error %T: %v", err, err)
			}
		}
	})
}
