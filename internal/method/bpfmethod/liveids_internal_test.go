package bpfmethod

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/buildid"
	"github.com/synth-dev/synth/internal/elfnote/elftest"
	"github.com/synth-dev/synth/internal/mapread"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
)

// A live MMAP2 gets its file's build ID only if the file its mapping
// leads to is the record's device and inode; a record whose mapping is
// gone is read through another record's mapping of the same file, and
// keeps maj/min/ino when there is none and its path leads to another
// inode.
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
		rec(gone, addr+size, st.Ino+2), // gone, no other mapping, path to another inode
	}
	li := newLiveIDs(2*time.Second, nil)
	defer li.Close()
	now := monoNow()
	for _, r := range recs {
		li.want(r, now)
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

func monoNow() uint64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		panic(err)
	}
	return uint64(ts.Nano())
}

// diskDir is a new directory on a filesystem whose files the build-ID
// cache keeps (not tmpfs, whose files are read every time): the test's
// temporary directory, or one beside the package's sources.
func diskDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err == nil && uint32(fs.Type) != unix.TMPFS_MAGIC && uint32(fs.Type) != unix.RAMFS_MAGIC {
		return dir
	}
	dir, err := os.MkdirTemp(".", "liveids-")
	if err != nil {
		t.Fatal(err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(abs) })
	return abs
}

// liveFixture is an ELF file with a build ID, written by the test, and
// the MMAP2 records of it that fake processes report.
type liveFixture struct {
	path string
	id   []byte
	st   unix.Stat_t
	size uint64
}

func newLiveFixture(t *testing.T, dir, name string, id []byte) *liveFixture {
	t.Helper()
	fx := &liveFixture{path: filepath.Join(dir, name), id: id, size: uint64(os.Getpagesize())}
	if err := os.WriteFile(fx.path, elftest.Good(id), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(fx.path, &fx.st); err != nil {
		t.Fatal(err)
	}
	return fx
}

// rec is an MMAP2 of the file, as the fixture's stat names it, by pid.
func (fx *liveFixture) rec(pid uint32, addr uint64) []byte {
	m := perfdata.Mmap2{Pid: pid, Tid: pid, Addr: addr, Len: fx.size, Maj: unix.Major(fx.st.Dev),
		Min: unix.Minor(fx.st.Dev), Ino: fx.st.Ino, Prot: unix.PROT_READ | unix.PROT_EXEC, Filename: fx.path}
	return m.Append(nil, 0, nil)
}

// mapIt maps the file into this process, and returns the address.
func (fx *liveFixture) mapIt(t *testing.T) uint64 {
	t.Helper()
	f, err := os.Open(fx.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, int(fx.size), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return uint64(uintptr(unsafe.Pointer(&mem[0])))
}

// pastSlack returns a CLOCK_MONOTONIC time by which the file's change
// time is more than the slack (changeSlack) old: the time of a record
// of a process that mapped the file after it was written. It waits for
// the clock to get there (tens of ms).
func (fx *liveFixture) pastSlack(t *testing.T, li *liveIDs) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(fx.path, &st); err != nil {
		t.Fatal(err)
	}
	return waitPast(li, st.Ctim.Nano())
}

// waitPast waits until CLOCK_REALTIME is more than the slack (changeSlack)
// past changed (ns), and returns CLOCK_MONOTONIC then.
func waitPast(li *liveIDs, changed int64) uint64 {
	for realtimeOffset()+int64(monoNow()) <= changed+li.slack {
		time.Sleep(time.Millisecond)
	}
	return monoNow()
}

func gotID(rec []byte) []byte { return perfdata.Mmap2View(rec).BuildID() }

// A live MMAP2 of a process that exited before the drain gets its
// file's build ID through the record's path, as this process's mount
// namespace resolves it, when the file there is the record's device and
// inode, unchanged since before the record; a file rewritten in place,
// or replaced at the path (a new inode), after the record gets none,
// never the new file's, whether the drain reads the file or finds it in
// the cache. Before the cache, such a record kept maj/min/ino.
func TestLiveIDsAfterExit(t *testing.T) {
	testenv.Root(t)
	dir := diskDir(t)
	gone := uint32(testenv.UnusedPid(t))
	idA, idB := bytes.Repeat([]byte{0xa1}, 20), bytes.Repeat([]byte{0xb2}, 20)
	li := newLiveIDs(2*time.Second, nil)
	defer li.Close()

	// Read through the path: the process is gone.
	short := newLiveFixture(t, dir, "short", idA)
	r1 := short.rec(gone, 0x400000)
	li.want(r1, short.pastSlack(t, li))
	li.fill()
	if got := gotID(r1); !bytes.Equal(got, idA) {
		t.Errorf("record of an exited process: build ID %x, want %x", got, idA)
	}

	// Rewritten in place right after the record (same inode): the
	// drain finds the cache's entry stale, reads the new file, and
	// gives its ID to none of the records before the change.
	r2 := short.rec(gone+1, 0x400000)
	t2 := monoNow()
	rewrite(t, short.path, elftest.Good(idB))
	var st unix.Stat_t
	if err := unix.Stat(short.path, &st); err != nil || st.Ino != short.st.Ino {
		t.Fatalf("rewrite in place: inode %d, want %d (%v)", st.Ino, short.st.Ino, err)
	}
	li.want(r2, t2)
	li.fill()
	if got := gotID(r2); got != nil {
		t.Errorf("record before an in-place rewrite: build ID %x, want none", got)
	}

	// Rewritten in place, not in the cache: read, and refused, though
	// the rewrite's ctime may be before the record's time. A filesystem
	// of multigrain timestamps gives a change a fine-grained ctime only
	// if the ctime was asked for since the last change: after the
	// fixture's stat, one change, then none asked for, so that the
	// rewrite gets the coarse clock's time, which lags (changeSlack):
	// before the record's time, at times (a test that compares with the
	// record's time, without the slack, fails most runs).
	fresh := newLiveFixture(t, dir, "fresh", idA)
	rewrite(t, fresh.path, elftest.Good(idA))
	r3 := fresh.rec(gone, 0x400000)
	t3 := waitPast(li, realtimeOffset()+int64(monoNow()))
	rewrite(t, fresh.path, elftest.Good(idB))
	li.want(r3, t3)
	li.fill()
	if got := gotID(r3); got != nil {
		t.Errorf("record before an in-place rewrite (uncached): build ID %x, want none", got)
	}

	// Replaced at the path by a rename: another inode, refused.
	renamed := newLiveFixture(t, dir, "renamed", idA)
	r4 := renamed.rec(gone, 0x400000)
	t4 := renamed.pastSlack(t, li)
	next := filepath.Join(dir, "renamed.new")
	if err := os.WriteFile(next, elftest.Good(idB), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(next, renamed.path); err != nil {
		t.Fatal(err)
	}
	li.want(r4, t4)
	li.fill()
	if got := gotID(r4); got != nil {
		t.Errorf("record of a file replaced at its path: build ID %x, want none", got)
	}
	if found, missed := li.found.Load(), li.missed.Load(); found != 1 || missed != 3 {
		t.Errorf("found %d, missed %d; want 1 and 3", found, missed)
	}
}

// rewrite writes b over the file at path, in place: the inode stays.
func rewrite(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
}

// A file is read once for the method's life, not once per drain: later
// drains take its ID from the cache, after a stat, whether its mapping
// is still there or only its path leads to it; a file the dumps read is
// not read again by the drains.
func TestLiveIDsReadOnce(t *testing.T) {
	testenv.Root(t)
	dir := diskDir(t)
	gone := uint32(testenv.UnusedPid(t))
	self := uint32(os.Getpid())
	id := bytes.Repeat([]byte{0xc3}, 20)
	fx := newLiveFixture(t, dir, "lib.so", id)
	addr := fx.mapIt(t)
	cache := newIDCache()
	li := newLiveIDs(2*time.Second, cache)
	defer li.Close()
	at := fx.pastSlack(t, li)
	const drains = 5
	for i := range drains {
		// A live process's record, and a short-lived one's.
		recs := [][]byte{fx.rec(self, addr), fx.rec(gone+uint32(i), 0x7f0000000000)}
		for _, r := range recs {
			li.want(r, at)
		}
		li.fill()
		for j, r := range recs {
			if got := gotID(r); !bytes.Equal(got, id) {
				t.Errorf("drain %d, record %d: build ID %x, want %x", i, j, got, id)
			}
		}
	}
	if n := li.read.Load(); n != 1 {
		t.Errorf("%d drains read the file %d times, want once", drains, n)
	}

	// A dump's read feeds the cache: the drains do not read the file.
	dumped := newLiveFixture(t, dir, "dumped.so", bytes.Repeat([]byte{0xd4}, 20))
	var st unix.Stat_t
	if err := unix.Stat(dumped.path, &st); err != nil {
		t.Fatal(err)
	}
	cache.put(fileIdent{maj: unix.Major(st.Dev), min: unix.Minor(st.Dev), ino: st.Ino},
		buildid.Result{ID: dumped.id, Read: true, Stat: mapread.StatOf(&st)})
	r := dumped.rec(gone, 0x400000)
	li.want(r, dumped.pastSlack(t, li))
	li.fill()
	if got := gotID(r); !bytes.Equal(got, dumped.id) {
		t.Errorf("record of a file the dump read: build ID %x, want %x", got, dumped.id)
	}
	if n := li.read.Load(); n != 1 {
		t.Errorf("files read %d, want 1: the dump's read was not taken", n)
	}
}

// The cache is bounded: past maxCached files it drops one for each new
// one, never failing.
func TestIDCacheBounded(t *testing.T) {
	c := newIDCache()
	for i := range maxCached + 100 {
		c.put(fileIdent{ino: uint64(i + 1)}, buildid.Result{Read: true})
	}
	if n := c.len(); n != maxCached {
		t.Errorf("cache holds %d files, want %d", n, maxCached)
	}
	c.put(fileIdent{ino: 1 << 40}, buildid.Result{Read: true, Volatile: true})
	if _, ok := c.get(fileIdent{ino: 1 << 40}); ok {
		t.Error("a volatile (tmpfs) file's read was cached")
	}
}
