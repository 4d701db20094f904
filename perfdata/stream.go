package perfdata

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// maxPayload caps the data that follows a TRACING_DATA or AUXTRACE record
// in a pipe, outside the record's own size.
const maxPayload = 256 << 20

// StreamReader reads a pipe-mode perf.data from an io.Reader as it
// arrives, the way perf's tools read `perf record -o -` on stdin.
type StreamReader struct {
	r   *bufio.Reader
	off int64
	headers
	buf     []byte
	payload bytes.Buffer
}

// NewStreamReader reads the pipe header from r. A file-mode perf.data
// is an error: it needs NewReader, which seeks.
func NewStreamReader(r io.Reader) (*StreamReader, error) {
	s := &StreamReader{r: bufio.NewReaderSize(r, 256<<10), buf: make([]byte, 0, MaxRecordSize)}
	var h [pipeHeaderSize]byte
	if _, err := io.ReadFull(s.r, h[:]); err != nil {
		return nil, errorf(0, "read the pipe header: %v", noEOF(err))
	}
	switch hs := le.Uint64(h[8:]); {
	case string(h[:8]) != magic:
		return nil, errorf(0, "bad magic %q", h[:8])
	case hs == fileHeaderSize:
		return nil, errorf(8, "a file-mode perf.data, not a pipe")
	case hs != pipeHeaderSize:
		return nil, errorf(8, "header size %d", hs)
	}
	s.off = pipeHeaderSize
	return s, nil
}

// noEOF turns an end of input inside a structure into the error it is.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Next returns the next record, or io.EOF at the end of the input. The
// record's Data, and its Payload, are valid until the next call. The
// HEADER_ATTR and HEADER_FEATURE records are returned too, after their
// contents are taken into Attrs and Features.
func (s *StreamReader) Next() (Record, error) {
	b := s.buf[:headerSize]
	if _, err := io.ReadFull(s.r, b); err != nil {
		if err == io.EOF {
			return Record{}, io.EOF
		}
		return Record{}, errorf(s.off, "read a record header: %v", noEOF(err))
	}
	h, _ := ParseHeader(b)
	if h.Size < headerSize {
		return Record{}, errorf(s.off, "record size %d", h.Size)
	}
	b = s.buf[:h.Size]
	if _, err := io.ReadFull(s.r, b[headerSize:]); err != nil {
		return Record{}, errorf(s.off, "read a %s record of %d bytes: %v", h.Type, h.Size, noEOF(err))
	}
	rec := Record{Off: s.off, Type: h.Type, Misc: h.Misc, Data: b}
	s.off += int64(h.Size)
	if err := s.readPayload(&rec); err != nil {
		return Record{}, err
	}
	if err := s.take(rec); err != nil {
		return Record{}, err
	}
	return rec, nil
}

// payloadSize is the size of what follows rec in the data, outside its
// header's size: the tracing data after HEADER_TRACING_DATA (u32 size;
// pipe mode only), the trace after AUXTRACE (u64 size).
func payloadSize(rec *Record) uint64 {
	switch {
	case rec.Type == RecordHeaderTracingData && len(rec.Data) >= headerSize+4:
		return uint64(le.Uint32(rec.Data[headerSize:]))
	case rec.Type == RecordAuxtrace && len(rec.Data) >= headerSize+8:
		return le.Uint64(rec.Data[headerSize:])
	}
	return 0
}

// readPayload reads what follows rec outside its size (payloadSize).
func (s *StreamReader) readPayload(rec *Record) error {
	n := payloadSize(rec)
	if n == 0 {
		return nil
	}
	if n > maxPayload {
		return errorf(rec.Off, "%s payload of %d bytes, over %d", rec.Type, n, maxPayload)
	}
	s.payload.Reset()
	// Copy rather than allocate what the input claims: a short input
	// costs only what it holds.
	if _, err := io.CopyN(&s.payload, s.r, int64(n)); err != nil {
		return errorf(s.off, "read the %d-byte %s payload: %v", n, rec.Type, noEOF(err))
	}
	rec.Payload = s.payload.Bytes()
	s.off += int64(n)
	return nil
}
