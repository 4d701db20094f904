package perfring

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

var testPage = os.Getpagesize() // the rings' metadata page

// fakeRing is a ring's memory as the kernel would lay it out, with a
// writer standing in for the kernel.
type fakeRing struct {
	mem  []byte
	meta *unix.PerfEventMmapPage
	head uint64
}

func newFakeRing(t *testing.T, dataSize int) (*fakeRing, *Ring) {
	t.Helper()
	mem := make([]byte, testPage+dataSize)
	f := &fakeRing{mem: mem, meta: (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0]))}
	f.meta.Data_offset = uint64(testPage)
	f.meta.Data_size = uint64(dataSize)
	r, err := NewRing(mem, testPage)
	if err != nil {
		t.Fatal(err)
	}
	return f, r
}

// record is a perf record of type typ and n bytes whose body is filled
// with a byte that names it.
func record(typ uint32, n int, fill byte) []byte {
	rec := bytes.Repeat([]byte{fill}, n)
	binary.NativeEndian.PutUint32(rec, typ)
	binary.NativeEndian.PutUint16(rec[4:], 0)
	binary.NativeEndian.PutUint16(rec[6:], uint16(n))
	return rec
}

// write appends rec at head, wrapping around the data area, and
// publishes the new head.
func (f *fakeRing) write(rec []byte) {
	data := f.mem[testPage:]
	for i, b := range rec {
		data[(f.head+uint64(i))%uint64(len(data))] = b
	}
	f.head += uint64(len(rec))
	f.meta.Data_head = f.head
}

func readAll(t *testing.T, r *Ring) [][]byte {
	t.Helper()
	var got [][]byte
	if err := r.ReadAll(func(rec []byte) error {
		got = append(got, slices.Clone(rec))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestRingWraparound(t *testing.T) {
	f, r := newFakeRing(t, 256)
	// 5 records of 48 bytes fill 240 bytes; after reading them, the
	// next one wraps around the end of the data area.
	var want [][]byte
	for i := range 5 {
		rec := record(9, 48, byte('a'+i))
		f.write(rec)
		want = append(want, rec)
	}
	if !r.Pending() {
		t.Fatal("Pending is false with 5 records")
	}
	if got := readAll(t, r); !slices.EqualFunc(got, want, bytes.Equal) {
		t.Fatalf("first round: got %d records, want %d", len(got), len(want))
	}
	if r.meta.Data_tail != 240 || r.Pending() {
		t.Fatalf("data_tail %d, pending %v after reading 240 bytes", r.meta.Data_tail, r.Pending())
	}
	// 64 bytes at 240: 16 before the end of the data area, 48 after.
	wrap := record(10, 64, 'w')
	f.write(wrap)
	f.write(record(11, 150, 'x')) // 304..453
	last := record(12, 24, 'h')   // 454..477: unread now 238 of 256
	f.write(last)
	got := readAll(t, r)
	if len(got) != 3 || !bytes.Equal(got[0], wrap) || !bytes.Equal(got[2], last) {
		t.Fatalf("wrapped records read back wrong: %d records", len(got))
	}
	if r.meta.Data_tail != 478 {
		t.Fatalf("data_tail %d, want 478", r.meta.Data_tail)
	}
}

// A header that itself straddles the end of the data area is read whole.
func TestRingHeaderWraps(t *testing.T) {
	f, r := newFakeRing(t, 128)
	f.write(record(9, 124, 'a')) // 0..123: the next header starts at 124
	readAll(t, r)
	rec := record(10, 40, 'b') // header bytes 124..127 and 0..3
	f.write(rec)
	got := readAll(t, r)
	if len(got) != 1 || !bytes.Equal(got[0], rec) {
		t.Fatalf("got %q, want %q", got, rec)
	}
}

func TestRingCorrupt(t *testing.T) {
	for _, size := range []int{0, 7, 200} {
		f, r := newFakeRing(t, 256)
		rec := record(9, 16, 'a')
		binary.NativeEndian.PutUint16(rec[6:], uint16(size))
		f.write(rec)
		err := r.ReadAll(func([]byte) error { t.Fatal("a corrupt record was handed out"); return nil })
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("size %d: err %v, want ErrCorrupt", size, err)
		}
		if r.Pending() {
			t.Errorf("size %d: the corrupt data was not skipped", size)
		}
	}
}

// An error from the callback stops the reading after that record, and
// the records not yet handed out stay in the ring.
func TestRingStopsOnError(t *testing.T) {
	f, r := newFakeRing(t, 256)
	for i := range 3 {
		f.write(record(9, 32, byte('a'+i)))
	}
	stop := errors.New("stop")
	n := 0
	err := r.ReadAll(func([]byte) error {
		if n++; n == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || r.meta.Data_tail != 64 {
		t.Fatalf("err %v, data_tail %d; want stop at 64", err, r.meta.Data_tail)
	}
	if got := readAll(t, r); len(got) != 1 || got[0][8] != 'c' {
		t.Fatalf("after the error: %d records", len(got))
	}
}

func TestNewRingRejects(t *testing.T) {
	mem := make([]byte, testPage+300)
	meta := (*unix.PerfEventMmapPage)(unsafe.Pointer(&mem[0]))
	meta.Data_offset, meta.Data_size = uint64(testPage), 300
	if _, err := NewRing(mem, testPage); err == nil {
		t.Error("a data area of 300 bytes was accepted")
	}
	meta.Data_size = 512
	if _, err := NewRing(mem, testPage); err == nil {
		t.Error("a data area beyond the mapping was accepted")
	}
	if _, err := NewRing(make([]byte, 100), testPage); err == nil {
		t.Error("a mapping smaller than the metadata page was accepted")
	}
}
