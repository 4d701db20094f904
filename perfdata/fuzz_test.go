package perfdata

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// FuzzReader: any input reads to an error or io.EOF, never a panic,
// and every error is a *FormatError.
func FuzzReader(f *testing.F) {
	for _, pipe := range []bool{false, true} {
		out := &seekBuffer{}
		w, err := NewWriter(out, WriterOptions{Attrs: []EventAttr{{Attr: testAttr()}},
			Features: testFeatures("synth"), Mode: modeOf(pipe)})
		if err != nil {
			f.Fatal(err)
		}
		for _, rec := range testRecords() {
			w.WriteRecord(rec)
		}
		w.WriteRecordPayload(auxtraceRecord(8), []byte("AUXDATA!"))
		if err := w.Close(); err != nil {
			f.Fatal(err)
		}
		f.Add(out.b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := NewReader(bytes.NewReader(in), int64(len(in)))
		if err != nil {
			checkFormatError(t, err)
			return
		}
		for range 10000 {
			rec, err := r.Next()
			if err == io.EOF {
				return
			}
			if err != nil {
				checkFormatError(t, err)
				return
			}
			parseAny(rec, r.SampleType())
		}
	})
}

func checkFormatError(t *testing.T, err error) {
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v is a %T, not a *FormatError", err, err)
	}
}

func parseAny(rec Record, st uint64) {
	switch rec.Type {
	case RecordMmap:
		ParseMmap(rec.Data, st)
	case RecordMmap2:
		ParseMmap2(rec.Data, st)
	case RecordComm:
		ParseComm(rec.Data, st)
	case RecordFork:
		ParseFork(rec.Data, st)
	case RecordLost:
		ParseLost(rec.Data, st)
	case RecordHeaderBuildID:
		ParseBuildIDEvent(rec.Data)
	}
}

// FuzzParseMmap2: a record that parses re-encodes to the same bytes.
func FuzzParseMmap2(f *testing.F) {
	f.Add((&Mmap2{Misc: MiscUser, Filename: "/x"}).Append(nil, testST, &testSID))
	f.Add((&Mmap2{BuildID: []byte{1, 2}, Filename: "/x"}).Append(nil, testST, &testSID))
	f.Fuzz(func(t *testing.T, rec []byte) {
		m, sid, err := ParseMmap2(rec, testST)
		if err != nil {
			return
		}
		again := m.Append(nil, testST, &sid)
		m2, sid2, err := ParseMmap2(again, testST)
		if err != nil || m2.Filename != m.Filename || m2.Addr != m.Addr || sid2 != sid ||
			!bytes.Equal(m2.BuildID, m.BuildID) {
			t.Fatalf("re-encoded record differs: %+v vs %+v (%v)", m2, m, err)
		}
	})
}

// seekBuffer is an in-memory io.WriteSeeker.
type seekBuffer struct {
	b   []byte
	off int
}

func (s *seekBuffer) Write(p []byte) (int, error) {
	if need := s.off + len(p); need > len(s.b) {
		s.b = append(s.b, make([]byte, need-len(s.b))...)
	}
	copy(s.b[s.off:], p)
	s.off += len(p)
	return len(p), nil
}

func (s *seekBuffer) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		s.off = int(off)
	case io.SeekCurrent:
		s.off += int(off)
	case io.SeekEnd:
		s.off = len(s.b) + int(off)
	}
	return int64(s.off), nil
}
