package perfdata

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"syscall"
	"testing"
)

func testAttr() Attr {
	return Attr{Type: 1, Size: AttrSize, Config: 9, SamplePeriod: 1, SampleType: testST,
		Flags: AttrMmap | AttrComm | AttrTask | AttrSampleIDAll | AttrMmap2 | AttrCommExec | AttrExcludeGuest}
}

// testRecords are a few records of every kind the dump writes.
func testRecords() [][]byte {
	st := uint64(testST)
	return [][]byte{
		(&Mmap{Misc: MiscKernel, Pid: ^uint32(0), Addr: 0xffffffff81000000, Len: 0x100000,
			Pgoff: 0xffffffff81000000, Filename: "[kernel.kallsyms]_text"}).Append(nil, st, &SampleID{Pid: ^uint32(0)}),
		(&Comm{Pid: 100, Tid: 100, Comm: "main"}).Append(nil, st, &SampleID{Pid: 100, Tid: 100}),
		(&Fork{Pid: 100, Ppid: 100, Tid: 101, Ptid: 100}).Append(nil, st, &SampleID{Pid: 100, Tid: 101}),
		(&Comm{Pid: 100, Tid: 101, Comm: "worker"}).Append(nil, st, &SampleID{Pid: 100, Tid: 101}),
		(&Mmap2{Misc: MiscUser, Pid: 100, Tid: 100, Addr: 0x400000, Len: 0x1000, Maj: 8, Min: 1,
			Ino: 12, Prot: 5, Flags: 2, Filename: "/usr/bin/main"}).Append(nil, st, &SampleID{Pid: 100, Tid: 100}),
	}
}

func writeTest(t *testing.T, out io.Writer, pipe bool) {
	t.Helper()
	w, err := NewWriter(out, WriterOptions{
		Attrs:    []EventAttr{{Attr: testAttr(), Name: "dummy:u"}},
		Features: testFeatures("synth", "test"),
		Mode:     modeOf(pipe),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, rec := range testRecords() {
		if err := w.WriteRecord(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestWriterRoundTrip(t *testing.T) {
	for _, pipe := range []bool{false, true} {
		f, err := os.Create(filepath.Join(t.TempDir(), "perf.data"))
		if err != nil {
			t.Fatal(err)
		}
		writeTest(t, f, pipe)
		b, err := os.ReadFile(f.Name())
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		r, err := NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		if r.Pipe() != pipe {
			t.Errorf("pipe=%v read as pipe=%v", pipe, r.Pipe())
		}
		var got [][]byte
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if rec.Type < RecordHeaderAttr {
				got = append(got, bytes.Clone(rec.Data))
			}
		}
		if !reflect.DeepEqual(got, testRecords()) {
			t.Errorf("pipe=%v: records differ", pipe)
		}
		if len(r.Attrs()) != 1 || r.Attrs()[0].Attr != testAttr() || r.SampleType() != testST {
			t.Errorf("pipe=%v: attrs %+v", pipe, r.Attrs())
		}
		ids := map[FeatureID]bool{}
		for _, f := range r.Features() {
			ids[f.ID] = true
		}
		for _, id := range []FeatureID{FeatHostname, FeatOSRelease, FeatVersion, FeatArch, FeatNrCPUs, FeatCmdline, FeatEventDesc} {
			if !ids[id] {
				t.Errorf("pipe=%v: feature %d missing", pipe, id)
			}
		}
	}
}

// The writer picks file mode for a regular file and pipe mode for a
// pipe, as perf record does.
func TestWriterMode(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "perf.data"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	opts := WriterOptions{Attrs: []EventAttr{{Attr: testAttr()}}}
	if w, err := NewWriter(f, opts); err != nil || w.Pipe() {
		t.Errorf("regular file: pipe=%v, %v", w != nil && w.Pipe(), err)
	}
	rd, wr, err := os.Pipe()
	if err != nil && runtime.GOOS != "linux" {
		t.Skipf("pipe mode not checked: %v", err) // js/wasm has no pipes
	}
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	defer wr.Close()
	go io.Copy(io.Discard, rd)
	if w, err := NewWriter(wr, opts); err != nil || !w.Pipe() {
		t.Errorf("pipe: pipe=%v, %v", w != nil && w.Pipe(), err)
	}
}

func TestWriterDevFull(t *testing.T) {
	f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	w, err := NewWriter(f, WriterOptions{Attrs: []EventAttr{{Attr: testAttr()}}})
	if err == nil {
		big := (&Mmap2{Filename: string(bytes.Repeat([]byte("a"), 4000))}).Append(nil, 0, nil)
		for i := 0; i < 1000 && err == nil; i++ {
			err = w.WriteRecord(big)
		}
		if cerr := w.Close(); err == nil {
			err = cerr
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("writing /dev/full: %v, want ENOSPC", err)
	}
}

// failAfter is a seekable output that fails once n bytes were written.
type failAfter struct {
	n   int
	buf bytes.Buffer
}

func (f *failAfter) Write(b []byte) (int, error) {
	if f.buf.Len()+len(b) > f.n {
		return 0, syscall.EIO
	}
	return f.buf.Write(b)
}

func (f *failAfter) Seek(int64, int) (int64, error) { return 0, nil }

func TestWriterErrorSticky(t *testing.T) {
	out := &failAfter{n: 1 << 20}
	pipe := false
	w, err := NewWriter(out, WriterOptions{Attrs: []EventAttr{{Attr: testAttr()}}, Mode: modeOf(pipe)})
	if err != nil {
		t.Fatal(err)
	}
	rec := (&Comm{Comm: "x"}).Append(nil, 0, nil)
	for i := 0; i < 1<<18 && err == nil; i++ {
		err = w.WriteRecord(rec)
	}
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("write error %v, want EIO", err)
	}
	if err := w.WriteRecord(rec); !errors.Is(err, syscall.EIO) {
		t.Errorf("after an error: %v, want the same error", err)
	}
	if err := w.Close(); !errors.Is(err, syscall.EIO) {
		t.Errorf("Close: %v, want EIO", err)
	}
}

// fullFile is a file on a disk that fills up after room bytes.
type fullFile struct {
	b    []byte
	off  int64
	room int64
}

func (f *fullFile) Write(p []byte) (int, error) {
	n, err := int64(len(p)), error(nil)
	if f.off+n > f.room {
		n, err = max(f.room-f.off, 0), syscall.ENOSPC
	}
	if end := f.off + n; end > int64(len(f.b)) {
		f.b = append(f.b, make([]byte, end-int64(len(f.b)))...)
	}
	copy(f.b[f.off:], p[:n])
	f.off += n
	return int(n), err
}

func (f *fullFile) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		f.off = off
	case io.SeekCurrent:
		f.off += off
	case io.SeekEnd:
		f.off = int64(len(f.b)) + off
	}
	return f.off, nil
}

func (f *fullFile) Truncate(n int64) error {
	f.b = f.b[:n]
	return nil
}

// A disk that fills up leaves a valid perf.data of the records that
// reached it whole, and the error.
func TestWriterFullDisk(t *testing.T) {
	var recs [][]byte
	for i := range 20000 {
		m := Mmap2{Misc: MiscUser, Pid: uint32(i), Tid: uint32(i), Addr: 0x1000, Len: 0x1000,
			Filename: strings.Repeat("x", i%40)}
		recs = append(recs, m.Append(nil, testST, &SampleID{Pid: uint32(i), Tid: uint32(i)}))
	}
	filePipe := false
	write := func(room int64) (*fullFile, error) {
		f := &fullFile{room: room}
		w, err := NewWriter(f, WriterOptions{Attrs: []EventAttr{{Attr: testAttr(), Name: "dummy"}}, Mode: modeOf(filePipe)})
		if err != nil {
			return f, err
		}
		for _, rec := range recs {
			if w.WriteRecord(rec) != nil {
				break
			}
		}
		return f, w.Close()
	}
	whole, err := write(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	for _, room := range []int64{700001, 900003, int64(len(whole.b)) - 10} {
		f, err := write(room)
		if !errors.Is(err, syscall.ENOSPC) {
			t.Errorf("room %d: Close returned %v, want ENOSPC", room, err)
		}
		r, err := NewReader(bytes.NewReader(f.b), int64(len(f.b)))
		if err != nil {
			t.Fatalf("room %d: not a perf.data: %v", room, err)
		}
		n := 0
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("room %d: record %d: %v", room, n, err)
			}
			if !bytes.Equal(rec.Data, recs[n]) {
				t.Fatalf("room %d: record %d differs", room, n)
			}
			n++
		}
		if n == 0 || int64(len(f.b)) > room {
			t.Errorf("room %d: %d records in %d bytes", room, n, len(f.b))
		}
		if room > int64(len(whole.b))-20 && n != len(recs) {
			t.Errorf("room %d (the features cut): %d of %d records", room, n, len(recs))
		}
	}
}
