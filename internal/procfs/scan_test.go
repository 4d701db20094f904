package procfs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// scanAll runs a scanner over in and collects what it reports.
func scanAll(s *MapsScanner, in []byte, execOnly bool, oneByte bool) ([]Mapping, error) {
	var r = iotest.HalfReader(bytes.NewReader(in))
	if oneByte {
		r = iotest.OneByteReader(bytes.NewReader(in))
	}
	var got []Mapping
	err := s.Scan(r, execOnly, func(m *Mapping) { got = append(got, *m) })
	return got, err
}

func executable(maps []Mapping) []Mapping {
	return slices.DeleteFunc(slices.Clone(maps), func(m Mapping) bool { return m.Prot&4 == 0 })
}

// checkScan holds the scanner to ParseMaps on in: the same mappings, or
// all of them executable with execOnly.
func checkScan(t *testing.T, s *MapsScanner, name string, in []byte) {
	t.Helper()
	want, err := ParseMaps(bytes.NewReader(in))
	if err != nil {
		t.Fatalf("%s: ParseMaps: %v", name, err)
	}
	for _, oneByte := range []bool{false, true} {
		got, err := scanAll(s, in, false, oneByte)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%s (one byte reads %v): Scan = %d mappings, %v; ParseMaps %d", name, oneByte, len(got), err, len(want))
		}
		got, err = scanAll(s, in, true, oneByte)
		if err != nil || !slices.Equal(got, executable(want)) {
			t.Errorf("%s (one byte reads %v): Scan execOnly = %d mappings, %v; want %d", name, oneByte, len(got), err, len(executable(want)))
		}
	}
}

func TestScanMatchesParseMaps(t *testing.T) {
	var s MapsScanner // one scanner for every file, as a worker has
	b, err := os.ReadFile("testdata/maps.txt")
	if err != nil {
		t.Fatal(err)
	}
	checkScan(t, &s, "testdata/maps.txt", b)
	checkScan(t, &s, "without a final newline", bytes.TrimSuffix(b, []byte("\n")))
	checkScan(t, &s, "empty", nil)
	// Every process on the host, as the kernel writes maps today.
	files, _ := filepath.Glob("/proc/[0-9]*/maps")
	n := 0
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || len(b) == 0 {
			continue // gone, or a kernel thread
		}
		checkScan(t, &s, f, b)
		n++
	}
	if n == 0 {
		t.Error("no process maps read")
	}
}

// A text longer than the buffer, lines across read boundaries: the
// scanner carries the partial line over.
func TestScanLongText(t *testing.T) {
	var b bytes.Buffer
	for i := range 5000 {
		fmt.Fprintf(&b, "%08x-%08x r%sp %08x fd:%02x %d %*s/lib/lib%d.so\n",
			i<<12, (i+1)<<12, []string{"--", "-x", "w-"}[i%3], i, i%256, i, i%40, "", i%7)
	}
	if b.Len() < 3*scanBuf {
		t.Fatalf("text of %d bytes, not longer than the buffer", b.Len())
	}
	checkScan(t, new(MapsScanner), "long text", b.Bytes())
}

func TestScanErrors(t *testing.T) {
	for _, in := range append(slices.Clone(malformedMaps),
		"10-20 r-xp 0 00:00 1 /"+strings.Repeat("a", 2*scanBuf)+"\n", // longer than the buffer
		"10-20 r-xp 0 00:00 99999999999999999999\n",                  // inode beyond 64 bits
		"10-120000000000000000 r-xp 0 00:00 1\n",                     // end beyond 64 bits
		"10-20 r-xp 0 100000000:00 1\n",                              // major beyond 32 bits
		"10-20  r-xp 0 00:00 1\n",                                    // not the kernel's spacing
		"10-20 r-xp 0 00:00 1\n10-20 r-xp 0 00:00",                   // a bad last line without newline
	) {
		if _, err := scanAll(new(MapsScanner), []byte(in), false, false); err == nil {
			t.Errorf("Scan(%.40q) = nil error", in)
		}
	}
}

// Scanning allocates nothing per line: only a name not seen before.
func TestScanAllocs(t *testing.T) {
	var b bytes.Buffer
	for i := range 1000 {
		fmt.Fprintf(&b, "%08x-%08x r-xp 00000000 fd:01 %d    /lib/lib%d.so\n", i<<12, (i+1)<<12, i%5, i%5)
	}
	var s MapsScanner
	r := bytes.NewReader(b.Bytes())
	n := 0
	scan := func() {
		r.Reset(b.Bytes())
		if err := s.Scan(r, false, func(*Mapping) { n++ }); err != nil {
			t.Fatal(err)
		}
	}
	scan() // the buffer and the five names
	if a := testing.AllocsPerRun(10, scan); a > 1 {
		t.Errorf("%.0f allocations to scan 1000 lines", a)
	}
	if n != 12*1000 { // AllocsPerRun runs scan once more, to warm up
		t.Errorf("%d mappings reported, want %d", n, 12*1000)
	}
}

// The scanner accepts only what ParseMaps accepts, and reads it alike.
func FuzzScanMaps(f *testing.F) {
	b, _ := os.ReadFile("testdata/maps.txt")
	f.Add(b)
	f.Add([]byte("10-20 r-xp 0 00:00 0 \n"))
	f.Add([]byte("10-20 rw-s 0 00:00 0"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var s MapsScanner
		got, err := scanAll(&s, in, false, false)
		if err != nil {
			return
		}
		want, err := ParseMaps(bytes.NewReader(in))
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("Scan: %v; ParseMaps: %v, %v", got, want, err)
		}
		exec, err := scanAll(&s, in, true, true)
		if err != nil || !slices.Equal(exec, executable(want)) {
			t.Fatalf("Scan execOnly: %v, %v; want %v", exec, err, executable(want))
		}
	})
}
