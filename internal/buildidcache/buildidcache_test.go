package buildidcache

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/elfnote/elftest"
	"github.com/synth-dev/synth/perfdata"
)

var (
	idA = bytes.Repeat([]byte{0xa1}, 20)
	idB = bytes.Repeat([]byte{0xb2}, 20)
	idK = bytes.Repeat([]byte{0xc3}, 20)
	idV = bytes.Repeat([]byte{0xd4}, 20)
)

// writeFile writes b at path, creating its directory.
func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// testCache is a cache in a new directory, with a fake kernel and vDSO.
func testCache(t *testing.T) (*Cache, string) {
	tmp := t.TempDir()
	writeFile(t, filepath.Join(tmp, "kallsyms"), []byte("ffffffff81000000 T _stext\n"))
	vdso := elftest.Good(idV)
	return &Cache{
		Dir:      filepath.Join(tmp, "debug"),
		Proc:     filepath.Join(tmp, "proc"),
		Kallsyms: filepath.Join(tmp, "kallsyms"),
		Kernel:   func() []byte { return idK },
		VDSO:     func() []byte { return vdso },
	}, tmp
}

func add(t *testing.T, c *Cache, e Entry, want Status) {
	t.Helper()
	got, err := c.Add(e)
	if err != nil || got != want {
		t.Fatalf("Add(%s): %v, %v; want %v", e.Name, got, err, want)
	}
}

func readlink(t *testing.T, path string) string {
	t.Helper()
	s, err := os.Readlink(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLayout checks perf's layout: PATH/BUILDID/elf,
// [kernel.kallsyms]/BUILDID/kallsyms, [vdso]/BUILDID/vdso, each linked
// from .build-id/XX/REST; adding again finds them present.
func TestLayout(t *testing.T) {
	c, tmp := testCache(t)
	bin := filepath.Join(tmp, "usr", "bin", "prog")
	elf := elftest.Good(idA)
	writeFile(t, bin, elf)
	for _, e := range []Entry{{Name: bin, BuildID: idA}, {Name: KernelName, BuildID: idK}, {Name: VDSOName, BuildID: idV}} {
		add(t, c, e, Added)
		add(t, c, e, Present)
	}
	for _, f := range []struct {
		dir, base string
		id        []byte
		mode      os.FileMode
	}{{bin[1:], "elf", idA, 0o755}, {KernelName, "kallsyms", idK, 0o755}, {VDSOName, "vdso", idV, 0o600}} {
		sid := hex.EncodeToString(f.id)
		file := filepath.Join(c.Dir, f.dir, sid, f.base)
		st, err := os.Lstat(file)
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm() != f.mode {
			t.Errorf("%s: %v, %v; want a regular file, mode %#o as perf's", file, st, err, f.mode)
		}
		want := "../../" + f.dir + "/" + sid
		if got := readlink(t, filepath.Join(c.Dir, ".build-id", sid[:2], sid[2:])); got != want {
			t.Errorf(".build-id/%s/%s -> %s; want %s", sid[:2], sid[2:], got, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(c.Dir, bin[1:], hex.EncodeToString(idA), "elf")); !bytes.Equal(b, elf) {
		t.Error("the cached elf is not a copy of the file")
	}
	if b, _ := os.ReadFile(filepath.Join(c.Dir, KernelName, hex.EncodeToString(idK), "kallsyms")); string(b) != "ffffffff81000000 T _stext\n" {
		t.Errorf("kallsyms: %q", b)
	}
	tmps, _ := filepath.Glob(filepath.Join(c.Dir, "*", "*", ".*tmp*"))
	if len(tmps) > 0 {
		t.Errorf("temporary files left: %v", tmps)
	}
}

// TestSymlinkRefused checks that no symlink in the cache is written
// through, to a directory outside it.
func TestSymlinkRefused(t *testing.T) {
	c, tmp := testCache(t)
	bin := filepath.Join(tmp, "lib", "x.so")
	writeFile(t, bin, elftest.Good(idA))
	outside := t.TempDir()
	// The file's first component, then (another cache) .build-id.
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(c.Dir, strings.Split(bin[1:], "/")[0])
	if err := os.Symlink(outside, first); err != nil {
		t.Fatal(err)
	}
	if s, err := c.Add(Entry{Name: bin, BuildID: idA}); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("Add through a symlinked directory: %v, %v; want it refused", s, err)
	}
	c2, tmp2 := testCache(t)
	bin2 := filepath.Join(tmp2, "y.so")
	writeFile(t, bin2, elftest.Good(idB))
	os.MkdirAll(c2.Dir, 0o755)
	if err := os.Symlink(outside, filepath.Join(c2.Dir, ".build-id")); err != nil {
		t.Fatal(err)
	}
	if s, err := c2.Add(Entry{Name: bin2, BuildID: idB}); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("Add with .build-id a symlink: %v, %v; want it refused", s, err)
	}
	if ents, _ := os.ReadDir(outside); len(ents) > 0 {
		t.Errorf("written outside the cache: %v", ents)
	}
}

// TestMismatchSkipped checks that a file whose build ID is not the
// recorded one is neither copied nor linked.
func TestMismatchSkipped(t *testing.T) {
	c, tmp := testCache(t)
	bin := filepath.Join(tmp, "libspin.so")
	writeFile(t, bin, elftest.Good(idB)) // rebuilt since
	add(t, c, Entry{Name: bin, BuildID: idA}, Mismatch)
	add(t, c, Entry{Name: KernelName, BuildID: idB}, Mismatch) // another kernel's
	add(t, c, Entry{Name: VDSOName, BuildID: idB}, Mismatch)
	if _, err := os.Lstat(filepath.Join(c.Dir, bin[1:], hex.EncodeToString(idA), "elf")); err == nil {
		t.Error("the mismatched file was cached")
	}
	if ents, err := os.ReadDir(c.Dir); err == nil && len(ents) > 0 {
		t.Errorf("the cache holds %v; want nothing", ents)
	}
	writeFile(t, c.Kallsyms, []byte("0000000000000000 T _stext\n"))
	add(t, c, Entry{Name: KernelName, BuildID: idK}, Skipped) // perf does not cache it either
	st := c.Fill([]Entry{{Name: bin, BuildID: idA}, {Name: "//anon", BuildID: idA}, {Name: "/a/../etc/x", BuildID: idA}})
	if st.Mismatch != 1 || st.Skipped != 2 || st.Failed != 0 {
		t.Errorf("Fill: %+v; want 1 mismatch, 2 skipped", st)
	}
}

// TestExistingKept checks that an entry already cached with its build ID
// is not rewritten.
func TestExistingKept(t *testing.T) {
	c, tmp := testCache(t)
	bin := filepath.Join(tmp, "prog")
	writeFile(t, bin, elftest.Good(idA))
	old := append(elftest.Good(idA), "kept"...)
	cached := filepath.Join(c.Dir, bin[1:], hex.EncodeToString(idA), "elf")
	writeFile(t, cached, old)
	st0, _ := os.Stat(cached)
	add(t, c, Entry{Name: bin, BuildID: idA}, Added) // the link is new
	add(t, c, Entry{Name: bin, BuildID: idA}, Present)
	b, _ := os.ReadFile(cached)
	st1, _ := os.Stat(cached)
	if !bytes.Equal(b, old) || !os.SameFile(st0, st1) {
		t.Error("the existing entry was replaced")
	}
	// One with another build ID at that place (corrupt) is replaced.
	writeFile(t, cached, elftest.Good(idB))
	add(t, c, Entry{Name: bin, BuildID: idA}, Added)
	if b, _ := os.ReadFile(cached); !bytes.Equal(b, elftest.Good(idA)) {
		t.Error("a cached file with a wrong build ID was kept")
	}
}

// TestProcessView checks that a file is read as its process sees it:
// the process's root first, then map_files (a file replaced since),
// then the path.
func TestProcessView(t *testing.T) {
	c, tmp := testCache(t)
	const app = "/app/server"
	writeFile(t, filepath.Join(c.Proc, "77", "root", app), elftest.Good(idB))
	writeFile(t, filepath.Join(c.Proc, "77", "map_files", "1000-2000"), elftest.Good(idA))
	add(t, c, Entry{Name: app, BuildID: idB, Pid: 77, Start: 0x1000, End: 0x2000}, Added)
	add(t, c, Entry{Name: app, BuildID: idA, Pid: 77, Start: 0x1000, End: 0x2000}, Added)
	add(t, c, Entry{Name: app, BuildID: idV, Pid: 77}, Mismatch) // the host has no /app/server
	host := filepath.Join(tmp, "host")
	writeFile(t, host, elftest.Good(idV))
	add(t, c, Entry{Name: host, BuildID: idV, Pid: 78, Start: 1, End: 2}, Added) // the process is gone
}

// TestDir checks where the cache is: $HOME/.debug; buildid.dir of
// ~/.perfconfig; that of $PERF_CONFIG instead; never PERF_BUILDID_DIR,
// which perf 6.1 ignores (it sets it for the commands it runs).
func TestDir(t *testing.T) {
	home := t.TempDir()
	systemConfig = filepath.Join(home, "etc-perfconfig")
	t.Setenv("HOME", home)
	t.Setenv("PERF_BUILDID_DIR", "/nonexistent/env")
	os.Unsetenv("PERF_CONFIG")
	check := func(want string) {
		t.Helper()
		if got, err := Dir(); err != nil || got != want {
			t.Errorf("Dir() = %q, %v; want %q", got, err, want)
		}
	}
	check(filepath.Join(home, ".debug"))
	writeFile(t, systemConfig, []byte("[buildid]\n dir = /sys-wide\n"))
	check("/sys-wide")
	writeFile(t, filepath.Join(home, ".perfconfig"), []byte("# perf\n[core]\n\tdir = /no\n[BuildID]\n\tDir = \"/from config\" ; comment\n"))
	check("/from config")
	t.Setenv("PERF_CONFIG", filepath.Join(home, "other"))
	writeFile(t, filepath.Join(home, "other"), []byte("[buildid]\ndir=/other\n"))
	check("/other")
	t.Setenv("PERF_CONFIG", filepath.Join(home, "missing"))
	check(filepath.Join(home, ".debug"))
}

// TestEntries checks which files a recording names: those a sample fell
// into, by its process's mappings, the kernel for a kernel sample, the
// vDSO always (as perf); all of the table with all.
func TestEntries(t *testing.T) {
	const st = perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime
	attr := perfdata.Attr{Type: 1, SampleType: st, Flags: perfdata.AttrSampleIDAll | perfdata.AttrMmap2}
	path := filepath.Join(t.TempDir(), "perf.data")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := perfdata.NewWriter(f, perfdata.WriterOptions{Attrs: []perfdata.EventAttr{{Attr: attr, Name: "cpu-clock"}}})
	if err != nil {
		t.Fatal(err)
	}
	sid := &perfdata.SampleID{Pid: 42, Tid: 42}
	for _, m := range []perfdata.Mmap2{
		{Misc: perfdata.MiscUser, Pid: 42, Tid: 42, Addr: 0x400000, Len: 0x1000, Filename: "/bin/spin"},
		{Misc: perfdata.MiscUser, Pid: 42, Tid: 42, Addr: 0x7f0000, Len: 0x1000, Filename: "/lib/libspin.so"},
		{Misc: perfdata.MiscUser, Pid: 42, Tid: 42, Addr: 0x7f1000, Len: 0x1000, Filename: "/lib/libc.so"},
	} {
		w.WriteRecord(m.Append(nil, st, sid))
	}
	fork := perfdata.Fork{Pid: 43, Ppid: 42, Tid: 43, Ptid: 42}
	w.WriteRecord(fork.Append(nil, st, &perfdata.SampleID{Pid: 43, Tid: 43}))
	for _, s := range []perfdata.Sample{
		{Misc: perfdata.MiscUser, IP: 0x400010, Pid: 42, Tid: 42},
		{Misc: perfdata.MiscUser, IP: 0x7f0010, Pid: 43, Tid: 43}, // the child's, by the parent's mappings
		{Misc: perfdata.MiscKernel, IP: 0xffffffff81000000, Pid: 42, Tid: 42},
	} {
		w.WriteRecord(s.Append(nil, &attr))
	}
	w.WriteBuildIDs([]perfdata.BuildIDEvent{
		{Misc: perfdata.MiscKernel, Pid: -1, BuildID: idK, Filename: KernelName},
		{Misc: perfdata.MiscKernel, Pid: -1, BuildID: idV, Filename: "/lib/modules/x.ko"},
		{Misc: perfdata.MiscUser, Pid: -1, BuildID: idA, Filename: "/bin/spin"},
		{Misc: perfdata.MiscUser, Pid: -1, BuildID: idB, Filename: "/lib/libc.so"},
		{Misc: perfdata.MiscUser, Pid: -1, BuildID: idV, Filename: "/lib/libspin.so"},
		{Misc: perfdata.MiscUser, Pid: -1, BuildID: idV, Filename: VDSOName},
	})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, all := range []bool{false, true} {
		es, err := EntriesFile(path, all)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range es {
			got = append(got, e.Name)
		}
		want := []string{KernelName, "/bin/spin", "/lib/libspin.so", VDSOName}
		if all {
			want = []string{KernelName, "/bin/spin", "/lib/libc.so", "/lib/libspin.so", VDSOName}
		}
		if !slices.Equal(got, want) {
			t.Errorf("all=%v: %v; want %v", all, got, want)
		}
		if !all && (es[2].Pid != 43 || es[2].Start != 0x7f0000 || es[2].End != 0x7f1000) {
			t.Errorf("libspin.so: mapped by %d at %#x-%#x; want 43 at 0x7f0000-0x7f1000", es[2].Pid, es[2].Start, es[2].End)
		}
	}
}

// TestLinks checks the .build-id links: one that leads to the build ID
// cached under another name is kept, as perf keeps it; a dangling one,
// or one out of the cache, is replaced.
func TestLinks(t *testing.T) {
	c, tmp := testCache(t)
	bin := filepath.Join(tmp, "prog")
	writeFile(t, bin, elftest.Good(idA))
	sid := hex.EncodeToString(idA)
	linkDir := filepath.Join(c.Dir, ".build-id", sid[:2])
	link := filepath.Join(linkDir, sid[2:])
	os.MkdirAll(linkDir, 0o755)
	other := filepath.Join(c.Dir, "other", sid)
	writeFile(t, filepath.Join(other, "elf"), elftest.Good(idA))
	for _, f := range []struct {
		to, want string
	}{
		{"../../other/" + sid, "../../other/" + sid},
		{"../../gone/" + sid, "../.." + bin + "/" + sid},
		{"../../../../../../../../../" + tmp, "../.." + bin + "/" + sid},
	} {
		os.Remove(link)
		if err := os.Symlink(f.to, link); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Add(Entry{Name: bin, BuildID: idA}); err != nil {
			t.Fatal(err)
		}
		if got := readlink(t, link); got != f.want {
			t.Errorf("a link to %s: now to %s; want %s", f.to, got, f.want)
		}
	}
}

// TestRootBeforeMapFiles checks that a file the process's root shows
// with the recorded build ID is read without a lookup of its map_files
// entry, which waits for the process's mmap lock (uninterruptibly, once
// another lookup of it waits): here the entry is a FIFO, whose open
// blocks until a writer comes, as such a lookup blocks.
func TestRootBeforeMapFiles(t *testing.T) {
	c, _ := testCache(t)
	const app = "/app/server"
	writeFile(t, filepath.Join(c.Proc, "79", "root", app), elftest.Good(idB))
	entry := filepath.Join(c.Proc, "79", "map_files", "1000-2000")
	if err := os.MkdirAll(filepath.Dir(entry), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(entry, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := c.Add(Entry{Name: app, BuildID: idB, Pid: 79, Start: 0x1000, End: 0x2000})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		if f, err := os.OpenFile(entry, os.O_WRONLY, 0); err == nil { // unblock it
			f.Close()
		}
		<-done
		t.Fatal("Add opened the map_files entry before the process's root, and waited on it")
	}
}
