package perfdata

import "bytes"

// headerSize is sizeof(struct perf_event_header): u32 type, u16 misc,
// u16 size.
const headerSize = 8

// MaxRecordSize bounds a record: perf_event_header.size is a u16.
const MaxRecordSize = 1<<16 - 1

// Header mirrors struct perf_event_header.
type Header struct {
	Type RecordType
	Misc uint16
	Size uint16
}

// ParseHeader decodes the header at the start of b.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < headerSize {
		return Header{}, errorf(0, "%d bytes, short of a record header", len(b))
	}
	return Header{Type: RecordType(le.Uint32(b)), Misc: le.Uint16(b[4:]), Size: le.Uint16(b[6:])}, nil
}

// startRecord appends a header whose size finishRecord patches.
func startRecord(b []byte, typ RecordType, misc uint16) ([]byte, int) {
	at := len(b)
	b = le.AppendUint32(b, uint32(typ))
	b = le.AppendUint16(b, misc)
	return le.AppendUint16(b, 0), at
}

// finishRecord appends the trailer and sets the size of the record at at.
func finishRecord(b []byte, at int, sampleType uint64, sid *SampleID) []byte {
	if sid != nil {
		b = AppendSampleID(b, sampleType, sid)
	}
	le.PutUint16(b[at+6:], uint16(len(b)-at))
	return b
}

// appendString appends s NUL-terminated and NUL-padded to 8 bytes, as
// the kernel writes names into records.
func appendString(b []byte, s string) []byte {
	b = append(b, s...)
	pad := 8 - len(s)%8
	for range pad {
		b = append(b, 0)
	}
	return b
}

// body returns a record's bytes between its header and its trailer,
// checking the record's own size, its type and a minimum body length.
func body(rec []byte, typ RecordType, sampleType uint64, min int) ([]byte, Header, error) {
	h, err := ParseHeader(rec)
	if err != nil {
		return nil, h, err
	}
	if int(h.Size) != len(rec) {
		return nil, h, errorf(6, "record size %d, have %d bytes", h.Size, len(rec))
	}
	if h.Type != typ {
		return nil, h, errorf(0, "record type %d, want %d", h.Type, typ)
	}
	end := len(rec) - SampleIDSize(sampleType)
	if end < headerSize+min {
		return nil, h, errorf(6, "record of %d bytes too short for type %d", len(rec), typ)
	}
	return rec[headerSize:end], h, nil
}

// cString reads a NUL-terminated string that must end within b.
func cString(b []byte, off int64) (string, error) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return "", errorf(off, "string not NUL-terminated")
	}
	return string(b[:i]), nil
}
