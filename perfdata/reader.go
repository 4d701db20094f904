package perfdata

import (
	"bytes"
	"io"
)

// Caps on what a perf.data may make the reader allocate.
const (
	maxAttrs       = 4096
	maxIDs         = 1 << 20
	maxFeatureSize = 64 << 20
	maxAttrSize    = 4096
)

// Record is one record of the data section. Data is the whole record,
// header included, and is only valid until the next call of Next.
type Record struct {
	Off  int64
	Type RecordType
	Misc uint16
	Data []byte
	// Payload is what follows a HEADER_TRACING_DATA (in a pipe) or
	// AUXTRACE record in the data, outside its header's size; valid as
	// long as Data.
	Payload []byte
}

// Reader reads perf.data in file or pipe mode.
type Reader struct {
	r        io.ReaderAt
	size     int64
	pipe     bool
	headers        // the attrs and features
	pos, end int64 // the records still to read
	buf      []byte
}

// headers are the attrs and features of a file, and the count of sample
// ids, which is capped.
type headers struct {
	attrs    []EventAttr
	features []Feature
	nids     int
}

// NewReader reads the header of the perf.data of size bytes in r (and,
// in file mode, its attrs and feature sections).
func NewReader(r io.ReaderAt, size int64) (*Reader, error) {
	rd := &Reader{r: r, size: size, buf: make([]byte, 0, 4096)}
	h, err := rd.readAt(0, pipeHeaderSize)
	if err != nil {
		return nil, err
	}
	switch {
	case string(h[:8]) == "2ELIFREP":
		return nil, errorf(0, "big-endian perf.data is not supported")
	case string(h[:8]) != magic:
		return nil, errorf(0, "bad magic %q", h[:8])
	}
	switch hs := le.Uint64(h[8:]); hs {
	case pipeHeaderSize:
		rd.pipe, rd.pos, rd.end = true, pipeHeaderSize, size
		return rd, nil
	case fileHeaderSize:
		return rd, rd.readFileHeader()
	default:
		return nil, errorf(8, "header size %d", hs)
	}
}

// readAt returns n bytes at off, in the reader's buffer.
func (rd *Reader) readAt(off int64, n int) ([]byte, error) {
	if off < 0 || n < 0 || off > rd.size || int64(n) > rd.size-off {
		return nil, errorf(off, "%d bytes past the end of the file (%d bytes)", n, rd.size)
	}
	if cap(rd.buf) < n {
		rd.buf = make([]byte, n)
	}
	b := rd.buf[:n]
	if _, err := rd.r.ReadAt(b, off); err != nil {
		return nil, errorf(off, "read %d bytes: %v", n, err)
	}
	return b, nil
}

// section reads a struct perf_file_section and checks that it lies in
// the file and within limit bytes.
func (rd *Reader) section(b []byte, at int64, limit int64) (off, size int64, err error) {
	off, size = int64(le.Uint64(b)), int64(le.Uint64(b[8:]))
	if off < 0 || size < 0 || size > limit || off > rd.size || size > rd.size-off {
		return 0, 0, errorf(at, "section [%d, +%d) outside the file or over %d bytes", off, size, limit)
	}
	return off, size, nil
}

func (rd *Reader) readFileHeader() error {
	h, err := rd.readAt(0, fileHeaderSize)
	if err != nil {
		return err
	}
	h = bytes.Clone(h)
	attrSize := int64(le.Uint64(h[16:]))
	if attrSize < minAttrSize+sectionSize || attrSize > maxAttrSize {
		return errorf(16, "attr size %d", attrSize)
	}
	aoff, asize, err := rd.section(h[24:], 24, maxAttrs*attrSize)
	if err != nil {
		return err
	}
	if rd.pos, rd.end, err = rd.section(h[40:], 40, rd.size); err != nil {
		return err
	}
	rd.end += rd.pos
	for off := aoff; off+attrSize <= aoff+asize; off += attrSize {
		if err := rd.readFileAttr(off, attrSize); err != nil {
			return err
		}
	}
	return rd.readFeatures(h[72:104])
}

func (rd *Reader) readFileAttr(off, attrSize int64) error {
	b, err := rd.readAt(off, int(attrSize))
	if err != nil {
		return err
	}
	a, err := ParseAttr(b[:attrSize-sectionSize])
	if err != nil {
		return errorf(off, "%v", err)
	}
	ioff, isize, err := rd.section(b[attrSize-sectionSize:], off+attrSize-sectionSize, 8*maxIDs)
	if err != nil {
		return err
	}
	ids, err := rd.readIDs(ioff, int(isize/8))
	if err != nil {
		return err
	}
	rd.attrs = append(rd.attrs, EventAttr{Attr: a, IDs: ids})
	return nil
}

func (rd *Reader) readIDs(off int64, n int) ([]uint64, error) {
	if rd.nids += n; rd.nids > maxIDs {
		return nil, errorf(off, "more than %d sample ids", maxIDs)
	}
	b, err := rd.readAt(off, 8*n)
	if err != nil {
		return nil, err
	}
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = le.Uint64(b[8*i:])
	}
	return ids, nil
}

// readFeatures reads the feature index at the end of the data section.
func (rd *Reader) readFeatures(bits []byte) error {
	idx := rd.end
	total := int64(0)
	for id := 0; id < featBits; id++ {
		if bits[id/8]&(1<<(id%8)) == 0 {
			continue
		}
		b, err := rd.readAt(idx, sectionSize)
		if err != nil {
			return err
		}
		off, size, err := rd.section(b, idx, maxFeatureSize)
		if err != nil {
			return err
		}
		if total += size; total > maxFeatureSize {
			return errorf(idx, "feature sections over %d bytes", maxFeatureSize)
		}
		body, err := rd.readAt(off, int(size))
		if err != nil {
			return err
		}
		rd.features = append(rd.features, Feature{ID: FeatureID(id), Data: bytes.Clone(body)})
		idx += sectionSize
	}
	return nil
}

// Pipe reports whether the file is in pipe mode.
func (rd *Reader) Pipe() bool { return rd.pipe }

// Attrs returns the attrs read so far (in pipe mode, from the
// HEADER_ATTR records Next has passed).
func (rd *headers) Attrs() []EventAttr { return rd.attrs }

// Features returns the feature sections read so far (in pipe mode, from
// the HEADER_FEATURE records Next has passed, without the end marker).
func (rd *headers) Features() []Feature { return rd.features }

// SampleType is the trailer type of the records under the first attr:
// its sample_type with sample_id_all, else 0.
func (rd *headers) SampleType() uint64 {
	if len(rd.attrs) == 0 || rd.attrs[0].Attr.Flags&AttrSampleIDAll == 0 {
		return 0
	}
	return rd.attrs[0].Attr.SampleType
}

// Next returns the next record, or io.EOF after the last. In pipe mode
// it returns the HEADER_ATTR and HEADER_FEATURE records too, after
// taking their contents into Attrs and Features.
func (rd *Reader) Next() (Record, error) {
	if rd.pos >= rd.end {
		return Record{}, io.EOF
	}
	if rd.end-rd.pos < headerSize {
		return Record{}, errorf(rd.pos, "%d trailing bytes", rd.end-rd.pos)
	}
	hb, err := rd.readAt(rd.pos, headerSize)
	if err != nil {
		return Record{}, err
	}
	h, _ := ParseHeader(hb)
	if h.Size < headerSize || int64(h.Size) > rd.end-rd.pos {
		return Record{}, errorf(rd.pos, "record size %d", h.Size)
	}
	b, err := rd.readAt(rd.pos, int(h.Size))
	if err != nil {
		return Record{}, err
	}
	rec := Record{Off: rd.pos, Type: h.Type, Misc: h.Misc, Data: b}
	if n := payloadSize(&rec); n > 0 {
		// Read again, with what follows: the record's bytes stay in
		// the buffer, before the payload.
		left := rd.end - rd.pos - int64(h.Size)
		if n > maxPayload || n > uint64(left) {
			return Record{}, errorf(rd.pos, "%s payload of %d bytes, %d left in the data", rec.Type, n, left)
		}
		if b, err = rd.readAt(rd.pos, int(h.Size)+int(n)); err != nil {
			return Record{}, err
		}
		rec.Data, rec.Payload = b[:h.Size], b[h.Size:]
		rd.pos += int64(n)
	}
	rd.pos += int64(h.Size)
	if rd.pipe {
		if err := rd.take(rec); err != nil {
			return Record{}, err
		}
	}
	return rec, nil
}

// take takes in the header records of a pipe.
func (rd *headers) take(rec Record) error {
	p := rec.Data[headerSize:]
	switch rec.Type {
	case RecordHeaderAttr:
		if len(p) < minAttrSize {
			return errorf(rec.Off, "short HEADER_ATTR")
		}
		asize := int(le.Uint32(p[4:]))
		if asize < minAttrSize || asize > len(p) {
			return errorf(rec.Off+12, "attr size %d", asize)
		}
		if len(rd.attrs) >= maxAttrs {
			return errorf(rec.Off, "more than %d attrs", maxAttrs)
		}
		a, _ := ParseAttr(p[:asize])
		n := (len(p) - asize) / 8
		if rd.nids += n; rd.nids > maxIDs {
			return errorf(rec.Off, "more than %d sample ids", maxIDs)
		}
		ids := make([]uint64, n)
		for i := range ids {
			ids[i] = le.Uint64(p[asize+8*i:])
		}
		rd.attrs = append(rd.attrs, EventAttr{Attr: a, IDs: ids})
	case RecordHeaderFeature:
		if len(p) < 8 {
			return errorf(rec.Off, "short HEADER_FEATURE")
		}
		id := le.Uint64(p)
		if id == 0 || id > uint64(FeatLast) {
			return errorf(rec.Off+8, "feature id %d", id)
		}
		if id < uint64(FeatLast) {
			rd.features = append(rd.features, Feature{ID: FeatureID(id), Data: bytes.Clone(p[8:])})
		}
	}
	return nil
}
