package elfnote

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/synth-dev/synth/internal/elfnote/elftest"
	"github.com/synth-dev/synth/internal/hostarch"
	"github.com/synth-dev/synth/internal/testenv"
)

// stdlibBuildID reads the build ID with debug/elf, as an independent
// check: the note segments first, then the note sections.
func stdlibBuildID(t *testing.T, path string) []byte {
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var ranges []io.ReaderAt
	for _, p := range f.Progs {
		if p.Type == elf.PT_NOTE {
			ranges = append(ranges, io.NewSectionReader(p, 0, int64(p.Filesz)))
		}
	}
	for _, s := range f.Sections {
		if s.Type == elf.SHT_NOTE {
			ranges = append(ranges, io.NewSectionReader(s, 0, int64(s.Size)))
		}
	}
	for _, r := range ranges {
		b, _ := io.ReadAll(io.NewSectionReader(r, 0, 1<<20))
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
	for _, path := range []string{"/bin/true", "/bin/sh", "/usr/bin/perf", filepath.Join(hostarch.LibDir(), "libc.so.6")} {
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

// Every crafted file gives the build ID it was made with, or none; no
// error but an I/O one ever reaches the caller.
func TestCrafted(t *testing.T) {
	for name, b := range elftest.Crafted() {
		id, err := BuildID(bytes.NewReader(b), int64(len(b)))
		var fe *FormatError
		if err != nil && !errors.As(err, &fe) {
			t.Errorf("%s: %v, want nil or a *FormatError", name, err)
		}
		if want := elftest.CraftedID(name); !bytes.Equal(id, want) {
			t.Errorf("%s: build id %x, want %x", name, id, want)
		}
	}
}

// The crafted files as readelf (binutils) reads them: every GNU build
// ID of at most 20 bytes that `readelf -n` shows is the one BuildID
// returns, and BuildID finds none where readelf shows none.
func TestCraftedReadelf(t *testing.T) {
	readelf, err := exec.LookPath("readelf")
	testenv.Need(t, err == nil, "readelf (binutils) is not installed")
	dir := t.TempDir()
	for name, b := range elftest.Crafted() {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out, _ := exec.Command(readelf, "-n", "-W", path).CombinedOutput() // warns on the broken ones
		var shown [][]byte
		for _, m := range buildIDLine.FindAllSubmatch(out, -1) {
			if id, err := hex.DecodeString(string(m[1])); err == nil && len(id) <= MaxBuildID {
				shown = append(shown, id)
			}
		}
		got, _ := BuildID(bytes.NewReader(b), int64(len(b)))
		switch {
		case len(shown) == 0 && got != nil:
			t.Errorf("%s: build id %x; readelf shows none:\n%s", name, got, out)
		case len(shown) > 0 && !slices.ContainsFunc(shown, func(id []byte) bool { return bytes.Equal(id, got) }):
			t.Errorf("%s: build id %x; readelf shows %x", name, got, shown)
		}
		if want := elftest.CraftedID(name); (want != nil) != (len(shown) > 0) {
			t.Errorf("%s: readelf shows %x, the file was made with %x", name, shown, want)
		}
	}
}

var buildIDLine = regexp.MustCompile(`Build ID: ([0-9a-f]+)`)

func FuzzBuildID(f *testing.F) {
	for _, b := range elftest.Crafted() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		id, _ := BuildID(bytes.NewReader(b), int64(len(b)))
		if len(id) > MaxBuildID {
			t.Fatalf("build id of %d bytes", len(id))
		}
	})
}
