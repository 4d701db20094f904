package kernelbug

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/elfnote"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
)

const bugBuildIDBit = "perf_event_mmap_output() leaks PERF_RECORD_MISC_MMAP_BUILD_ID into the records of events without attr.build_id (docs/kernel/mmap-build-id-bit.md)"

// TestMmapBuildIDBitLeaks maps a page of an executable file while two
// listeners hear this thread: the older without build IDs, the newer
// (served first) with them. The older one's MMAP2 must be of the
// maj/min/ino form, without the build-ID bit.
func TestMmapBuildIDBitLeaks(t *testing.T) {
	testenv.Root(t)
	testenv.Kernel(t, testenv.KernelAtLeast(5, 12), "5.12", "attr.build_id (PERF_RECORD_MISC_MMAP_BUILD_ID)")
	path, id := fileWithBuildID(t)
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	lockThread(t)
	flags := uint64(perfdata.AttrMmap | perfdata.AttrMmap2)
	older := listen(t, flags, olderSample)
	newer := listen(t, flags|perfdata.AttrBuildID, newerSample)
	addr := mapExec(t, path)

	n := mmap2Of(t, newer, path, addr)
	if recordMisc(n)&perfdata.MiscMmapBuildID == 0 || !bytes.Equal(n[44:44+int(n[40])], id) {
		t.Fatalf("the event with build IDs got misc %#x, union % x, not %s's build ID %x: the kernel read none, nothing to leak",
			recordMisc(n), n[40:64], path, id)
	}
	o := mmap2Of(t, older, path, addr)
	maj, min, ino := le.Uint32(o[40:]), le.Uint32(o[44:]), le.Uint64(o[48:])
	t.Logf("%s mapped at %#x: the older listener's MMAP2 has misc %#x (build-ID bit %v) over maj %d min %d ino %d; the newer's misc %#x, build ID %x",
		path, addr, recordMisc(o), recordMisc(o)&perfdata.MiscMmapBuildID != 0, maj, min, ino, recordMisc(n), n[44:44+int(n[40])])
	if maj != unix.Major(st.Dev) || min != unix.Minor(st.Dev) || ino != st.Ino {
		t.Fatalf("the older listener's MMAP2 holds maj %d min %d ino %d, not the file's %d %d %d: not the maj/min/ino form",
			maj, min, ino, unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	}
	if recordMisc(o)&perfdata.MiscMmapBuildID == 0 {
		t.Skipf("kernel fixed: %s", bugBuildIDBit)
	}
	// The bug: the bit says the union holds a build ID, of the size in
	// its first byte, the low byte of the device's major number.
	t.Logf("the bug: perf reads a build ID of %d bytes, % x", o[40], o[44:64])
}

// fileWithBuildID returns an executable with a GNU build ID, whose
// pages are in the page cache (the kernel reads a mapping's build ID
// without faulting: build_id_parse_nofault()), and its build ID.
func fileWithBuildID(t *testing.T) (string, []byte) {
	t.Helper()
	for _, name := range []string{"true", "sh", "env", "ls"} {
		p, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		if p, err = filepath.EvalSymlinks(p); err != nil {
			continue
		}
		b, err := os.ReadFile(p) // into the page cache
		if err != nil {
			continue
		}
		if id, err := elfnote.BuildID(bytes.NewReader(b), int64(len(b))); err == nil && len(id) > 0 {
			touchFirstPage(t, p)
			return p, id
		}
	}
	t.Fatal("no executable of true, sh, env, ls with a GNU build ID")
	return "", nil
}

// touchFirstPage faults in the first page of path through a mapping,
// which puts it in the page cache where read(2) may not (a FUSE file
// opened direct_io, 9p without a cache).
func touchFirstPage(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, pageSize, unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	_ = mem[0]
	unix.Munmap(mem)
}

// mapExec maps the first page of path executable, on this thread, until
// the test ends, and returns its address.
func mapExec(t *testing.T, path string) uint64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), 0, pageSize, unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(mem) })
	return uint64(uintptr(unsafe.Pointer(&mem[0])))
}

// mmap2Of returns l's MMAP2 record of the mapping of path at addr:
// header, pid, tid (u32), addr, len, pgoff (u64), the 24-byte union
// (maj, min u32, ino, ino_generation u64; or build_id_size u8, 3
// reserved, build_id[20]), prot, flags (u32), the NUL-terminated path.
func mmap2Of(t *testing.T, l *listener, path string, addr uint64) []byte {
	t.Helper()
	for _, rec := range l.records(t, perfdata.RecordMmap2) {
		name := rec[72:]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if le.Uint64(rec[16:]) == addr && string(name) == path {
			return rec
		}
	}
	t.Fatalf("no MMAP2 of %s at %#x", path, addr)
	return nil
}
