package elfnote

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"testing"
)

// stdlibBuildID reads the build ID with debug/elf, as an independent check.
func stdlibBuildID(t *testing.T, path string) []byte {
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		b := make([]byte, p.Filesz)
		p.ReadAt(b, 0)
		for len(b) >= 12 {
			nn, dn, typ := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:])
			name := 12 + (nn+3)&^3
			if typ == 3 && string(b[12:12+nn]) == "GNU\x00" {
				return b[name : name+dn]
			}
			b = b[name+(dn+3)&^3:]
		}
	}
	return nil
}

func TestSystemFiles(t *testing.T) {
	for _, path := range []string{"/bin/true", "/bin/sh", "/usr/bin/perf", "/lib/x86_64-linux-gnu/libc.so.6"} {
		f, err := os.Open(path)
		if err != nil {
			continue
		}
		fi, _ := f.Stat()
		got, err := BuildID(f, fi.Size())
		f.Close()
		want := stdlibBuildID(t, path)
		if err != nil || !bytes.Equal(got, want) || len(want) == 0 {
			t.Errorf("%s: %x, %v; debug/elf says %x", path, got, err, want)
		}
	}
	exe, _ := os.Executable()
	f, _ := os.Open(exe)
	defer f.Close()
	fi, _ := f.Stat()
	got, err := BuildID(f, fi.Size())
	if err != nil || !bytes.Equal(got, stdlibBuildID(t, exe)) {
		t.Errorf("test binary: %x %v", got, err)
	}
}

func TestNotELF(t *testing.T) {
	if _, err := BuildID(bytes.NewReader([]byte("#!/bin/sh\necho hi\n")), 18); err != ErrNotELF {
		t.Errorf("script: %v, want ErrNotELF", err)
	}
}

// Crafted ELFs give no build ID, never a panic; the well-formed one, and
// the one whose note lies past the first page (which only a mapping of
// the first page hides), give theirs.
func TestCrafted(t *testing.T) {
	for name, b := range Crafted() {
		id, err := BuildID(bytes.NewReader(b), int64(len(b)))
		switch name {
		case "good", "note-past-page":
			if !bytes.Equal(id, GoodID) {
				t.Errorf("%s: %x %v, want %x", name, id, err, GoodID)
			}
		default:
			if id != nil {
				t.Errorf("%s: build id %x from a broken file", name, id)
			}
		}
	}
}

func FuzzBuildID(f *testing.F) {
	for _, b := range Crafted() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, _ := BuildID(bytes.NewReader(b), int64(len(b)))
		if len(id) > maxBuildID {
			t.Fatalf("build id of %d bytes", len(id))
		}
	})
}
