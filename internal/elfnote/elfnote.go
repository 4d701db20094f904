// Package elfnote reads the GNU build ID of an ELF file from its program
// headers' PT_NOTE segments, as the loader maps them. It reads only what
// it needs, bounds every size taken from the file, and accepts 32- and
// 64-bit files of either byte order.
package elfnote

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Limits on what a file may make the reader read.
const (
	maxPhdrs     = 1024
	maxNoteBytes = 64 << 10
	maxBuildID   = 64
)

// ErrNotELF is returned for a file that does not start with the ELF magic.
var ErrNotELF = errors.New("not an ELF file")

const (
	ptNote       = 4
	ntGNUBuildID = 3
)

// BuildID returns the GNU build ID of the ELF file in r (size bytes), or
// nil when it has none.
func BuildID(r io.ReaderAt, size int64) ([]byte, error) {
	var ident [16]byte
	if _, err := r.ReadAt(ident[:], 0); err != nil {
		return nil, fmt.Errorf("read ELF ident: %w", err)
	}
	if string(ident[:4]) != "\x7fELF" {
		return nil, ErrNotELF
	}
	var bo binary.ByteOrder
	switch ident[5] {
	case 1:
		bo = binary.LittleEndian
	case 2:
		bo = binary.BigEndian
	default:
		return nil, fmt.Errorf("ELF data encoding %d", ident[5])
	}
	var phoff, entsize, phnum int64
	switch ident[4] {
	case 1:
		var h [52]byte
		if _, err := r.ReadAt(h[:], 0); err != nil {
			return nil, fmt.Errorf("read ELF header: %w", err)
		}
		phoff, entsize, phnum = int64(bo.Uint32(h[28:])), int64(bo.Uint16(h[42:])), int64(bo.Uint16(h[44:]))
	case 2:
		var h [64]byte
		if _, err := r.ReadAt(h[:], 0); err != nil {
			return nil, fmt.Errorf("read ELF header: %w", err)
		}
		phoff, entsize, phnum = int64(bo.Uint64(h[32:])), int64(bo.Uint16(h[54:])), int64(bo.Uint16(h[56:]))
	default:
		return nil, fmt.Errorf("ELF class %d", ident[4])
	}
	is64 := ident[4] == 2
	if want := map[bool]int64{false: 32, true: 56}[is64]; entsize != want {
		return nil, fmt.Errorf("program header size %d, want %d", entsize, want)
	}
	if phnum > maxPhdrs || phoff < 0 || phoff > size || phnum*entsize > size-phoff {
		return nil, fmt.Errorf("%d program headers at %d outside a %d-byte file", phnum, phoff, size)
	}
	ph := make([]byte, phnum*entsize)
	if _, err := r.ReadAt(ph, phoff); err != nil {
		return nil, fmt.Errorf("read program headers: %w", err)
	}
	for i := range phnum {
		p := ph[i*entsize:]
		if bo.Uint32(p) != ptNote {
			continue
		}
		var off, n int64
		if is64 {
			off, n = int64(bo.Uint64(p[8:])), int64(bo.Uint64(p[32:]))
		} else {
			off, n = int64(bo.Uint32(p[4:])), int64(bo.Uint32(p[16:]))
		}
		if off < 0 || n < 0 || off > size || n > size-off || n > maxNoteBytes {
			return nil, fmt.Errorf("PT_NOTE [%d, +%d) outside the file or too large", off, n)
		}
		notes := make([]byte, n)
		if _, err := r.ReadAt(notes, off); err != nil {
			return nil, fmt.Errorf("read notes: %w", err)
		}
		if id := findBuildID(notes, bo); id != nil {
			return id, nil
		}
	}
	return nil, nil
}

// FromNotes returns the GNU build ID among notes laid out as in a
// PT_NOTE segment (or /sys/kernel/notes), or nil.
func FromNotes(b []byte, bo binary.ByteOrder) []byte { return findBuildID(b, bo) }

// findBuildID walks the notes of one segment; a note whose sizes do not
// fit ends the walk.
func findBuildID(b []byte, bo binary.ByteOrder) []byte {
	for len(b) >= 12 {
		namesz, descsz, typ := int64(bo.Uint32(b)), int64(bo.Uint32(b[4:])), bo.Uint32(b[8:])
		name := 12 + (namesz+3)&^3
		end := name + (descsz+3)&^3
		if namesz > int64(len(b)) || descsz > int64(len(b)) || end > int64(len(b)) {
			return nil
		}
		if typ == ntGNUBuildID && bytes.Equal(b[12:12+namesz], []byte("GNU\x00")) &&
			descsz > 0 && descsz <= maxBuildID {
			return bytes.Clone(b[name : name+descsz])
		}
		b = b[end:]
	}
	return nil
}
