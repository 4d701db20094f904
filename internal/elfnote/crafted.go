package elfnote

import "encoding/binary"

// GoodID is the build ID of Crafted()["good"].
var GoodID = []byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}

// Crafted returns small 64-bit ELF files, one page long so that they can
// be mapped, for tests of build-ID readers: "good" has a GNU build ID;
// the others must give none: "no-build-id" (a note of another type),
// "lying-descsz" (a note whose size runs past its segment),
// "truncated-note" (a PT_NOTE that runs past the file) and "huge-phnum"
// (65535 program headers). "note-past-page" has a good build ID in a
// PT_NOTE beyond the first page, which a mapping of the first page does
// not hold: only a reader of the file finds it.
func Crafted() map[string][]byte {
	gnu := note(3, "GNU\x00", GoodID)
	return map[string][]byte{
		"good":           elf64(1, 0x100, gnu, 4096),
		"no-build-id":    elf64(1, 0x100, note(1, "GNU\x00", []byte{0, 0, 0, 0}), 4096),
		"lying-descsz":   elf64(1, 0x100, lie(gnu, 4000), 4096),
		"truncated-note": elf64(1, 0x100, gnu, 0x100+8),
		"huge-phnum":     elf64(65535, 0x100, gnu, 4096),
		"note-past-page": elf64(1, 4096+0x100, gnu, 8192),
	}
}

func note(typ uint32, name string, desc []byte) []byte {
	le := binary.LittleEndian
	b := le.AppendUint32(nil, uint32(len(name)))
	b = le.AppendUint32(b, uint32(len(desc)))
	b = le.AppendUint32(b, typ)
	b = append(b, name...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	b = append(b, desc...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// lie sets a note's descsz.
func lie(n []byte, descsz uint32) []byte {
	b := append([]byte{}, n...)
	binary.LittleEndian.PutUint32(b[4:], descsz)
	return b
}

// elf64 builds an x86-64 ELF header with phnum program headers (the first
// a PT_NOTE at noteOff holding notes), the notes, and padding to size.
func elf64(phnum uint16, noteOff int, notes []byte, size int) []byte {
	le := binary.LittleEndian
	b := make([]byte, max(size, noteOff+len(notes), 64+56))
	copy(b, "\x7fELF\x02\x01\x01")
	le.PutUint16(b[16:], 3)  // ET_DYN
	le.PutUint16(b[18:], 62) // EM_X86_64
	le.PutUint32(b[20:], 1)
	le.PutUint64(b[32:], 64) // e_phoff
	le.PutUint16(b[52:], 64) // e_ehsize
	le.PutUint16(b[54:], 56) // e_phentsize
	le.PutUint16(b[56:], phnum)
	ph := b[64:]
	le.PutUint32(ph, 4) // PT_NOTE
	le.PutUint64(ph[8:], uint64(noteOff))
	le.PutUint64(ph[32:], uint64(len(notes)))
	le.PutUint64(ph[40:], uint64(len(notes)))
	copy(b[noteOff:], notes)
	return b[:size]
}
