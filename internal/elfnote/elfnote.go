package elfnote

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Limits on what a file may make the reader do.
const (
	maxHeaders   = 1 << 16  // program or section headers looked at
	maxNoteBytes = 64 << 20 // bytes of one note segment or section walked
	maxNotes     = 1 << 16  // notes walked in the whole file
	// MaxBuildID is the longest build ID an MMAP2 record or perf's
	// build-ID table holds; a longer GNU build-ID note is not taken.
	MaxBuildID = 20
)

// ErrNotELF is returned for a file that does not start with the ELF magic.
var ErrNotELF = errors.New("not an ELF file")

// A FormatError reports an ELF header that cannot be read as one: the
// file holds no build ID this reader can trust. Off is the file offset
// of what is wrong.
type FormatError struct {
	Off int64
	Msg string
}

func (e *FormatError) Error() string { return fmt.Sprintf("ELF at offset %d: %s", e.Off, e.Msg) }

const (
	ptNote       = 4
	shtNote      = 7
	ntGNUBuildID = 3
)

// file is an ELF file being read.
type file struct {
	r     io.ReaderAt
	size  int64
	bo    binary.ByteOrder
	is64  bool
	notes int // notes walked so far
}

// BuildID returns the GNU build ID of the ELF file in r (size bytes), or
// nil when it has none. An error is ErrNotELF, a *FormatError (the ELF
// header itself is unusable: no build ID), or an I/O error from r, after
// which the answer is unknown.
func BuildID(r io.ReaderAt, size int64) ([]byte, error) {
	f := &file{r: r, size: size}
	var ident [16]byte
	if err := f.readAt(ident[:], 0); err != nil {
		return nil, err
	}
	if string(ident[:4]) != "\x7fELF" {
		return nil, ErrNotELF
	}
	switch ident[5] {
	case 1:
		f.bo = binary.LittleEndian
	case 2:
		f.bo = binary.BigEndian
	default:
		return nil, &FormatError{5, fmt.Sprintf("data encoding %d", ident[5])}
	}
	switch ident[4] {
	case 1:
	case 2:
		f.is64 = true
	default:
		return nil, &FormatError{4, fmt.Sprintf("class %d", ident[4])}
	}
	h, err := f.header()
	if err != nil {
		return nil, err
	}
	// Segments first, as the loader maps them; then sections, which a
	// file without PT_NOTE (or with a broken one) may still describe.
	for _, t := range []table{h.phdrs(), h.shdrs()} {
		id, err := f.search(t)
		if id != nil || err != nil {
			return id, err
		}
	}
	return nil, nil
}

// readAt reads len(b) bytes at off; a file too short for them is a
// FormatError, anything else an I/O error.
func (f *file) readAt(b []byte, off int64) error {
	if off < 0 || off > f.size || int64(len(b)) > f.size-off {
		return &FormatError{off, fmt.Sprintf("%d bytes past the end of a %d-byte file", len(b), f.size)}
	}
	_, err := f.r.ReadAt(b, off)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return &FormatError{off, "file shorter than its size"}
	}
	return err
}

// elfHeader holds what the search needs of the ELF header.
type elfHeader struct {
	phoff, shoff                    int64
	phentsize, phnum                int64
	shentsize, shnum                int64
	wantPhentsize, wantShentsize    int64
	typeOff, offOff, sizeOff, alOff int // in a program header
}

func (f *file) header() (*elfHeader, error) {
	bo := f.bo
	if !f.is64 {
		var b [52]byte
		if err := f.readAt(b[:], 0); err != nil {
			return nil, err
		}
		return &elfHeader{
			phoff: int64(bo.Uint32(b[28:])), shoff: int64(bo.Uint32(b[32:])),
			phentsize: int64(bo.Uint16(b[42:])), phnum: int64(bo.Uint16(b[44:])),
			shentsize: int64(bo.Uint16(b[46:])), shnum: int64(bo.Uint16(b[48:])),
			wantPhentsize: 32, wantShentsize: 40,
			typeOff: 0, offOff: 4, sizeOff: 16, alOff: 28,
		}, nil
	}
	var b [64]byte
	if err := f.readAt(b[:], 0); err != nil {
		return nil, err
	}
	return &elfHeader{
		phoff: int64(bo.Uint64(b[32:])), shoff: int64(bo.Uint64(b[40:])),
		phentsize: int64(bo.Uint16(b[54:])), phnum: int64(bo.Uint16(b[56:])),
		shentsize: int64(bo.Uint16(b[58:])), shnum: int64(bo.Uint16(b[60:])),
		wantPhentsize: 56, wantShentsize: 64,
		typeOff: 0, offOff: 8, sizeOff: 32, alOff: 48,
	}, nil
}

// table is a program or section header table, and where in an entry
// its type, file offset, size and alignment are.
type table struct {
	off, entsize, n int64
	want            uint32 // the entry type that holds notes
	typeOff         int
	offOff, sizeOff int
	alOff           int
}

func (h *elfHeader) phdrs() table {
	if h.phentsize != h.wantPhentsize {
		return table{}
	}
	return table{h.phoff, h.phentsize, h.phnum, ptNote, h.typeOff, h.offOff, h.sizeOff, h.alOff}
}

// shdrs gives the section headers' table: sh_type at 4, then sh_offset,
// sh_size and sh_addralign at their class's places.
func (h *elfHeader) shdrs() table {
	if h.shentsize != h.wantShentsize || h.shoff == 0 {
		return table{}
	}
	if h.wantShentsize == 64 {
		return table{h.shoff, 64, h.shnum, shtNote, 4, 24, 32, 48}
	}
	return table{h.shoff, 40, h.shnum, shtNote, 4, 16, 20, 32}
}

// search walks the notes of every entry of t that holds notes. An entry
// that lies outside the file is skipped: a later one may be good.
func (f *file) search(t table) ([]byte, error) {
	n := min(t.n, maxHeaders)
	if t.entsize == 0 || t.off <= 0 || t.off > f.size || n*t.entsize > f.size-t.off {
		return nil, nil
	}
	hdrs := make([]byte, n*t.entsize)
	if err := f.readAt(hdrs, t.off); err != nil {
		return nil, ioOnly(err)
	}
	for i := range n {
		e := hdrs[i*t.entsize : (i+1)*t.entsize]
		if f.bo.Uint32(e[t.typeOff:]) != t.want {
			continue
		}
		off, size, align := f.word(e[t.offOff:]), f.word(e[t.sizeOff:]), f.word(e[t.alOff:])
		if off < 0 || size < 0 || off > f.size || size > f.size-off || size > maxNoteBytes {
			continue
		}
		id, err := f.walk(off, size, align)
		if id != nil || err != nil {
			return id, err
		}
		if f.notes >= maxNotes {
			break
		}
	}
	return nil, nil
}

// word reads an address-sized field; a value beyond int64 is negative,
// which the callers reject.
func (f *file) word(b []byte) int64 {
	if f.is64 {
		return int64(f.bo.Uint64(b))
	}
	return int64(f.bo.Uint32(b))
}

// walk reads the notes in [off, off+size), padded to align (4, or 8 in
// a segment or section aligned so, as readelf reads them), and returns
// the first GNU build ID of at most MaxBuildID bytes. A note whose sizes
// run past the end ends the walk of this range only.
func (f *file) walk(off, size, align int64) ([]byte, error) {
	pad := int64(4)
	if align == 8 {
		pad = 8
	}
	br := bufio.NewReaderSize(io.NewSectionReader(f.r, off, size), 4096)
	var hdr [12]byte
	for left := size; left >= 12 && f.notes < maxNotes; f.notes++ {
		if _, err := io.ReadFull(br, hdr[:]); err != nil {
			return nil, ioOnly(err)
		}
		namesz, descsz, typ := int64(f.bo.Uint32(hdr[:])), int64(f.bo.Uint32(hdr[4:])), f.bo.Uint32(hdr[8:])
		// The descriptor starts at the first multiple of pad after
		// the header and name (readelf's ELF_NOTE_DESC_OFFSET).
		nameLen := (12+namesz+pad-1)&^(pad-1) - 12
		descLen := (descsz + pad - 1) &^ (pad - 1)
		if nameLen > left-12 || descLen > left-12-nameLen {
			return nil, nil // a size that lies
		}
		left -= 12 + nameLen + descLen
		if typ != ntGNUBuildID || namesz != 4 || descsz == 0 || descsz > MaxBuildID {
			if _, err := br.Discard(int(nameLen + descLen)); err != nil {
				return nil, ioOnly(err)
			}
			continue
		}
		var buf [8 + MaxBuildID + 8]byte
		b := buf[:nameLen+descLen]
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, ioOnly(err)
		}
		if bytes.Equal(b[:4], []byte("GNU\x00")) {
			return bytes.Clone(b[nameLen : nameLen+descsz]), nil
		}
	}
	return nil, nil
}

// ioOnly keeps the errors that say the answer is unknown (the reader
// failed) and drops those that say the file is short: that part of the
// file holds no build ID.
func ioOnly(err error) error {
	var fe *FormatError
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &fe) {
		return nil
	}
	return err
}

// FromNotes returns the GNU build ID among notes laid out as in a
// PT_NOTE segment (or /sys/kernel/notes), or nil.
func FromNotes(b []byte, bo binary.ByteOrder) []byte {
	f := &file{r: bytes.NewReader(b), size: int64(len(b)), bo: bo}
	id, _ := f.walk(0, int64(len(b)), 4)
	return id
}
