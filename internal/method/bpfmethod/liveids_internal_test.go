package bpfmethod

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/elfnote/elftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
)

// A live MMAP2 gets its file's build ID only if the file its mapping
// leads to is the record's device and inode; a record whose mapping is
// gone is read through another record's mapping of the same file, and
// keeps maj/min/ino when there is none.
func TestLiveIDsFill(t *testing.T) {
	testenv.Root(t)
	path := filepath.Join(t.TempDir(), "lib.so")
	if err := os.WriteFile(path, elftest.Crafted()["good"], 0o644); err != nil {
		t.Fatal(err)
	}
	want := elftest.CraftedID("good")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	size := uint64(os.Getpagesize())
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(mem)
	addr := uint64(uintptr(unsafe.Pointer(&mem[0])))
	self := uint32(os.Getpid())
	maj, min := unix.Major(st.Dev), unix.Minor(st.Dev)
	rec := func(pid uint32, addr, ino uint64) []byte {
		m := perfdata.Mmap2{Pid: pid, Tid: pid, Addr: addr, Len: size, Maj: maj, Min: min, Ino: ino,
			Prot: unix.PROT_READ, Filename: path}
		return m.Append(nil, 0, nil)
	}
	gone := uint32(1<<22 + 1) // over pid_max's default: no such process
	recs := [][]byte{
		rec(gone, addr, st.Ino),        // gone; read through the next
		rec(self, addr, st.Ino),        // this process's mapping
		rec(self, addr, st.Ino+1),      // another inode than the mapping's
		rec(gone, addr+size, st.Ino+2), // gone, and no other mapping
	}
	li := newLiveIDs(2 * time.Second)
	defer li.Close()
	for _, r := range recs {
		li.want(r)
	}
	li.fill()
	for i, wantID := range [][]byte{want, want, nil, nil} {
		if got := perfdata.Mmap2View(recs[i]).BuildID(); !bytes.Equal(got, wantID) {
			t.Errorf("record %d: build ID %x, want %x", i, got, wantID)
		}
	}
	if _, _, ino, _ := perfdata.Mmap2View(recs[2]).Inode(); ino != st.Ino+1 {
		t.Errorf("record 2 left with inode %d, want %d", ino, st.Ino+1)
	}
}
