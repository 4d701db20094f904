// Package elftest crafts small ELF files with unusual build-ID notes,
// for the tests of build-ID readers. Only tests import it, so that the
// fixtures stay out of the synth binary.
package elftest

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
)

// The note-holding entry types, and the GNU build ID's note type.
const (
	ptNote       = uint32(elf.PT_NOTE)
	shtNote      = uint32(elf.SHT_NOTE)
	ntGNUBuildID = 3
)

// GoodID is the build ID of the crafted files that have one.
var GoodID = []byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// Crafted returns small 64-bit little-endian ELF files (and one 32-bit
// big-endian), at least a page long so that they can be mapped, for
// tests of build-ID readers. CraftedID says which build ID each holds.
//
// With a build ID: "good"; "many-notes" (200 notes before it);
// "large-note" (a 12 KiB note before it); "bad-then-good" (a PT_NOTE
// outside the file, then a good one); "note-past-page" (the note beyond
// the first page, which a mapping of that page does not hold);
// "section-only" (no PT_NOTE; an SHT_NOTE section holds it); "align8"
// (8-byte aligned notes, a property note first); "be32".
//
// Without: "no-build-id" (a note of another type); "lying-descsz" (a
// note whose size runs past its segment); "truncated-note" (a PT_NOTE
// that runs past the file); "huge-phnum" (65535 program headers);
// "long-id" (a 32-byte GNU build ID, longer than perf records hold);
// "wrong-name" (type 3 with the name "GNV").
func Crafted() map[string][]byte {
	page := os.Getpagesize() // the kernel's: "note-past-page" is past the first
	gnu := note(3, "GNU\x00", GoodID, 4)
	filler := bytes.Repeat(note(1, "FILL\x00", []byte{1, 2, 3, 4, 5}, 4), 200)
	big := note(0x99, "BIG\x00", make([]byte, 12<<10), 4)
	prop := note(5, "GNU\x00", make([]byte, 12), 8)
	return map[string][]byte{
		"good":           build(le64, 4096, sg(ptNote, 0x100, gnu, 4)),
		"many-notes":     build(le64, 8192, sg(ptNote, 0x100, cat(filler, gnu), 4)),
		"large-note":     build(le64, 16384, sg(ptNote, 0x100, cat(big, gnu), 4)),
		"bad-then-good":  build(le64, 4096, seg{typ: ptNote, off: 1 << 20, size: 64}, sg(ptNote, 0x200, gnu, 4)),
		"note-past-page": build(le64, 2*page, sg(ptNote, uint64(page)+0x100, gnu, 4)),
		"section-only":   build(le64, 4096, seg{typ: 1, off: 0, size: 4096}, sg(shtNote|sectionBit, 0x300, gnu, 4)),
		"align8":         build(le64, 4096, sg(ptNote, 0x100, cat(prop, note(3, "GNU\x00", GoodID, 8)), 8)),
		"be32":           build(be32, 4096, sg(ptNote, 0x100, noteBE(3, "GNU\x00", GoodID), 4)),
		"no-build-id":    build(le64, 4096, sg(ptNote, 0x100, note(1, "GNU\x00", []byte{0, 0, 0, 0}, 4), 4)),
		"lying-descsz":   build(le64, 4096, sg(ptNote, 0x100, lie(gnu, 4000), 4)),
		"truncated-note": build(le64, 4096, seg{typ: ptNote, off: 4096 - 8, size: uint64(len(gnu))}),
		"huge-phnum":     hugePhnum(),
		"long-id":        build(le64, 4096, sg(ptNote, 0x100, note(3, "GNU\x00", make([]byte, 32), 4), 4)),
		"wrong-name":     build(le64, 4096, sg(ptNote, 0x100, note(3, "GNV\x00", GoodID, 4), 4)),
	}
}

// Good returns a one-page ELF file like Crafted()["good"] whose build ID
// is id: many files with distinct IDs, for tests of a cache.
func Good(id []byte) []byte {
	return build(le64, 4096, sg(ptNote, 0x100, note(3, "GNU\x00", id, 4), 4))
}

// CraftedID returns the build ID of Crafted()[name], or nil.
func CraftedID(name string) []byte {
	switch name {
	case "good", "many-notes", "large-note", "bad-then-good", "note-past-page",
		"section-only", "align8", "be32":
		return GoodID
	}
	return nil
}

// sg is a seg of the size of its data.
func sg(typ uint32, off uint64, data []byte, align uint64) seg {
	return seg{typ: typ, off: off, data: data, align: align}
}

// sectionBit marks a seg as a section header, not a program header.
const sectionBit = 1 << 31

// seg is a program header (or, with sectionBit in typ, a section
// header) and the bytes it covers: data is placed at off when given,
// and size defaults to its length.
type seg struct {
	typ   uint32
	off   uint64
	data  []byte
	align uint64
	size  uint64
}

type layout struct {
	bo   binary.ByteOrder
	is64 bool
}

var (
	le64 = layout{binary.LittleEndian, true}
	be32 = layout{binary.BigEndian, false}
)

// build lays out an ELF header, the program headers at 64, the section
// headers after them, and the segments' data, in a file of size bytes.
func build(l layout, size int, segs ...seg) []byte {
	var ph, sh []seg
	for _, s := range segs {
		if s.size == 0 {
			s.size = uint64(len(s.data))
		}
		if s.typ&sectionBit != 0 {
			s.typ &^= sectionBit
			sh = append(sh, s)
		} else {
			ph = append(ph, s)
		}
	}
	b := make([]byte, size)
	for _, s := range segs {
		if s.data != nil {
			copy(b[s.off:], s.data)
		}
	}
	bo := l.bo
	copy(b, "\x7fELF")
	b[6] = 1 // EV_CURRENT
	if !l.is64 {
		b[4], b[5] = 1, 2        // ELFCLASS32, ELFDATA2MSB
		bo.PutUint16(b[16:], 3)  // ET_DYN
		bo.PutUint16(b[18:], 20) // EM_PPC
		bo.PutUint32(b[28:], 52) // e_phoff
		bo.PutUint16(b[40:], 52) // e_ehsize
		bo.PutUint16(b[42:], 32) // e_phentsize
		bo.PutUint16(b[44:], uint16(len(ph)))
		for i, s := range ph {
			p := b[52+32*i:]
			bo.PutUint32(p, s.typ)
			bo.PutUint32(p[4:], uint32(s.off))
			bo.PutUint32(p[16:], uint32(s.size))
			bo.PutUint32(p[20:], uint32(s.size))
			bo.PutUint32(p[28:], uint32(s.align))
		}
		return b
	}
	b[4], b[5] = 2, 1        // ELFCLASS64, ELFDATA2LSB
	bo.PutUint16(b[16:], 3)  // ET_DYN
	bo.PutUint16(b[18:], 62) // EM_X86_64
	bo.PutUint32(b[20:], 1)
	bo.PutUint64(b[32:], 64) // e_phoff
	bo.PutUint16(b[52:], 64) // e_ehsize
	bo.PutUint16(b[54:], 56) // e_phentsize
	bo.PutUint16(b[56:], uint16(len(ph)))
	for i, s := range ph {
		p := b[64+56*i:]
		bo.PutUint32(p, s.typ)
		bo.PutUint64(p[8:], s.off)
		bo.PutUint64(p[32:], s.size)
		bo.PutUint64(p[40:], s.size)
		bo.PutUint64(p[48:], s.align)
	}
	if len(sh) > 0 {
		// A null section, then the note sections.
		shoff := 64 + 56*len(ph)
		bo.PutUint64(b[40:], uint64(shoff))
		bo.PutUint16(b[58:], 64)
		bo.PutUint16(b[60:], uint16(1+len(sh)))
		for i, s := range sh {
			p := b[shoff+64*(i+1):]
			bo.PutUint32(p[4:], s.typ)
			bo.PutUint64(p[24:], s.off)
			bo.PutUint64(p[32:], s.size)
			bo.PutUint64(p[48:], s.align)
		}
	}
	return b
}

// hugePhnum claims 65535 program headers in a one-page file.
func hugePhnum() []byte {
	b := build(le64, 4096, sg(ptNote, 0x100, note(3, "GNU\x00", GoodID, 4), 4))
	binary.LittleEndian.PutUint16(b[56:], 65535)
	return b
}

// note encodes a little-endian note, name and desc padded to pad.
func note(typ uint32, name string, desc []byte, pad int) []byte {
	return noteIn(binary.LittleEndian, typ, name, desc, pad)
}

func noteBE(typ uint32, name string, desc []byte) []byte {
	return noteIn(binary.BigEndian, typ, name, desc, 4)
}

func noteIn(bo binary.AppendByteOrder, typ uint32, name string, desc []byte, pad int) []byte {
	b := bo.AppendUint32(nil, uint32(len(name)))
	b = bo.AppendUint32(b, uint32(len(desc)))
	b = bo.AppendUint32(b, typ)
	b = append(b, name...)
	for len(b)%pad != 0 {
		b = append(b, 0)
	}
	b = append(b, desc...)
	for len(b)%pad != 0 {
		b = append(b, 0)
	}
	return b
}

func cat(bs ...[]byte) []byte { return bytes.Join(bs, nil) }

// lie sets a note's descsz.
func lie(n []byte, descsz uint32) []byte {
	b := bytes.Clone(n)
	binary.LittleEndian.PutUint32(b[4:], descsz)
	return b
}
