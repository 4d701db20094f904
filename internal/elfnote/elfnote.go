package elfnote

import (
	"bufio"
	"bytes"
	"debug/elf"
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

// ntGNUBuildID is NT_GNU_BUILD_ID, the type of the GNU build ID's note.
const ntGNUBuildID = 3

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
	for _, t := range []table{f.phdrs(h), f.shdrs(h)} {
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
	phoff, shoff     int64
	phentsize, phnum int64
	shentsize, shnum int64
}

// header reads the ELF header, debug/elf's Header32 or Header64.
func (f *file) header() (*elfHeader, error) {
	if f.is64 {
		var h elf.Header64
		if err := f.decode(&h, 0); err != nil {
			return nil, err
		}
		return &elfHeader{phoff: int64(h.Phoff), shoff: int64(h.Shoff),
			phentsize: int64(h.Phentsize), phnum: int64(h.Phnum),
			shentsize: int64(h.Shentsize), shnum: int64(h.Shnum)}, nil
	}
	var h elf.Header32
	if err := f.decode(&h, 0); err != nil {
		return nil, err
	}
	return &elfHeader{phoff: int64(h.Phoff), shoff: int64(h.Shoff),
		phentsize: int64(h.Phentsize), phnum: int64(h.Phnum),
		shentsize: int64(h.Shentsize), shnum: int64(h.Shnum)}, nil
}

// decode reads the fixed-size struct v at off in the file's byte order.
func (f *file) decode(v any, off int64) error {
	b := make([]byte, binary.Size(v))
	if err := f.readAt(b, off); err != nil {
		return err
	}
	_, err := binary.Decode(b, f.bo, v)
	return err
}

// table is a program or section header table.
type table struct {
	off, entsize, n int64
	sections        bool
}

// entry is what the search needs of a program or section header.
type entry struct {
	typ              uint32
	off, size, align int64 // a value beyond int64 is negative, which the search rejects
}

// Sizes of the headers (debug/elf's Prog32, Prog64, Section32,
// Section64), which a table's entries must have.
var (
	prog32Size    = int64(binary.Size(elf.Prog32{}))
	prog64Size    = int64(binary.Size(elf.Prog64{}))
	section32Size = int64(binary.Size(elf.Section32{}))
	section64Size = int64(binary.Size(elf.Section64{}))
)

func (f *file) phdrs(h *elfHeader) table {
	want := prog32Size
	if f.is64 {
		want = prog64Size
	}
	if h.phentsize != want {
		return table{}
	}
	return table{off: h.phoff, entsize: want, n: h.phnum}
}

func (f *file) shdrs(h *elfHeader) table {
	want := section32Size
	if f.is64 {
		want = section64Size
	}
	if h.shentsize != want || h.shoff == 0 {
		return table{}
	}
	return table{off: h.shoff, entsize: want, n: h.shnum, sections: true}
}

// entry decodes the header b of table t.
func (f *file) entry(t table, b []byte) entry {
	switch {
	case t.sections && f.is64:
		var s elf.Section64
		binary.Decode(b, f.bo, &s)
		return entry{s.Type, int64(s.Off), int64(s.Size), int64(s.Addralign)}
	case t.sections:
		var s elf.Section32
		binary.Decode(b, f.bo, &s)
		return entry{s.Type, int64(s.Off), int64(s.Size), int64(s.Addralign)}
	case f.is64:
		var p elf.Prog64
		binary.Decode(b, f.bo, &p)
		return entry{p.Type, int64(p.Off), int64(p.Filesz), int64(p.Align)}
	}
	var p elf.Prog32
	binary.Decode(b, f.bo, &p)
	return entry{p.Type, int64(p.Off), int64(p.Filesz), int64(p.Align)}
}

// search walks the notes of every entry of t that holds notes (PT_NOTE,
// SHT_NOTE). An entry that lies outside the file is skipped: a later one
// may be good.
func (f *file) search(t table) ([]byte, error) {
	want := uint32(elf.PT_NOTE)
	if t.sections {
		want = uint32(elf.SHT_NOTE)
	}
	n := min(t.n, maxHeaders)
	if t.entsize == 0 || t.off <= 0 || t.off > f.size || n*t.entsize > f.size-t.off {
		return nil, nil
	}
	hdrs := make([]byte, n*t.entsize)
	if err := f.readAt(hdrs, t.off); err != nil {
		return nil, ioOnly(err)
	}
	for i := range n {
		e := f.entry(t, hdrs[i*t.entsize:(i+1)*t.entsize])
		if e.typ != want {
			continue
		}
		if e.off < 0 || e.size < 0 || e.off > f.size || e.size > f.size-e.off || e.size > maxNoteBytes {
			continue
		}
		id, err := f.walk(e.off, e.size, e.align)
		if id != nil || err != nil {
			return id, err
		}
		if f.notes >= maxNotes {
			break
		}
	}
	return nil, nil
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
