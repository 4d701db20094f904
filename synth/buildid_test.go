package synth_test

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/elfnote"
	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/synth"
)

// fileKey names a file for the build-ID oracle's cache. Inode numbers
// are reused by files the tests create and delete, so the path is part
// of it.
type fileKey struct {
	maj, min uint32
	ino      uint64
	path     string
}

var (
	oracleMu    sync.Mutex
	oracleCache = map[fileKey][]byte{}
)

// fileBuildID is the test's oracle: the GNU build ID of the file behind
// mapping m of process pid, read with debug/elf through
// /proc/PID/map_files (independent of the code under test), or nil.
func fileBuildID(pid int, m procfs.Mapping) []byte {
	if m.Ino == 0 {
		return nil
	}
	k := fileKey{m.Maj, m.Min, m.Ino, m.Path}
	oracleMu.Lock()
	defer oracleMu.Unlock()
	if id, ok := oracleCache[k]; ok {
		return id
	}
	id := elfBuildID(fmt.Sprintf("/proc/%d/map_files/%x-%x", pid, m.Start, m.End))
	oracleCache[k] = id
	return id
}

func elfBuildID(path string) []byte {
	f, err := elf.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE || p.Filesz > 1<<16 {
			continue
		}
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			continue
		}
		for len(b) >= 12 {
			nn, dn, typ := binary.LittleEndian.Uint32(b), binary.LittleEndian.Uint32(b[4:]), binary.LittleEndian.Uint32(b[8:])
			name := 12 + (nn+3)&^3
			end := name + (dn+3)&^3
			if uint64(end) > uint64(len(b)) {
				break
			}
			if typ == 3 && bytes.Equal(b[12:12+nn], []byte("GNU\x00")) && dn > 0 && dn <= 20 {
				return b[name : name+dn]
			}
			b = b[end:]
		}
	}
	return nil
}

// readelfBuildID asks binutils' readelf -n, a second oracle.
// gone is what readelfBuildID returns for a file whose process exited.
const gone = "(gone)"

func readelfBuildID(t *testing.T, path string) string {
	t.Helper()
	out, err := exec.Command("readelf", "-n", path).Output()
	if err != nil {
		if _, serr := os.Stat(path); serr != nil {
			return gone // the process exited meanwhile
		}
		t.Fatalf("readelf -n %s: %v", path, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "Build ID: "); ok {
			return id
		}
	}
	return ""
}

// dumpPid dumps one process with build IDs and returns its mappings.
func dumpPid(t *testing.T, b *synth.BPF, pid int) (*dumped, synth.Stats) {
	t.Helper()
	d := &dumped{comms: map[uint32]string{}, forks: map[uint32]uint32{}}
	st, err := b.Dump(context.Background(), func(rec []byte) error {
		return d.add(rec, synth.DefaultSampleType)
	})
	if err != nil {
		t.Fatal(err)
	}
	return d, st
}

// byPath returns the mappings whose path ends in suffix.
func byPath(keys []mapKey, suffix string) []mapKey {
	var out []mapKey
	for _, k := range keys {
		if strings.HasSuffix(k.path, suffix) {
			out = append(out, k)
		}
	}
	return out
}

// Crafted ELF files mapped by a test process: only the good ones get a
// build ID; the broken ones keep maj/min/ino, and the dump goes on. Files
// BPF cannot read from the mapping are read by userspace.
func TestBuildIDCrafted(t *testing.T) {
	testenv.Root(t)
	dir := t.TempDir()
	var maps []testproc.MapSpec
	for name, b := range elfnote.Crafted() {
		path := filepath.Join(dir, name+".so")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if name == "note-past-page" {
			// BPF sees only the first page: the note is outside it.
			maps = append(maps, testproc.MapSpec{Path: path, Len: 4096})
			// Mapped only at an offset: BPF has no ELF header to read.
			off := filepath.Join(dir, "offset-only.so")
			if err := os.WriteFile(off, b, 0o644); err != nil {
				t.Fatal(err)
			}
			maps = append(maps, testproc.MapSpec{Path: off, Off: 4096})
			continue
		}
		maps = append(maps, testproc.MapSpec{Path: path})
	}
	p := testproc.StartT(t, testproc.Spec{Maps: maps})
	// The iterator walk reads build IDs in BPF and leaves two files to
	// userspace; the maple walk leaves every file new to the cache to
	// userspace, which reads the three with a build ID from the files,
	// and those of the process's own libraries (under -race the test
	// binary is linked dynamically).
	maple := 3 + len(otherBuildIDFiles(t, p.Pid, dir))
	for walk, user := range map[string]int{synth.WalkIter: 2, synth.WalkMaple: maple} {
		t.Run(walk, func(t *testing.T) { checkCrafted(t, p, dir, walk, user) })
	}
}

// otherBuildIDFiles returns the files outside dir with a GNU build ID
// that process pid maps executable.
func otherBuildIDFiles(t *testing.T, pid int, dir string) map[string]bool {
	t.Helper()
	maps, err := procfs.ReadMaps(pid)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]bool{}
	for _, m := range maps {
		if m.Prot&4 != 0 && !strings.HasPrefix(m.Path, dir) && fileBuildID(pid, m) != nil {
			files[m.Path] = true
		}
	}
	return files
}

func checkCrafted(t *testing.T, p *testproc.Proc, dir, walk string, user int) {
	b, err := synth.NewBPF(synth.Options{Pids: []int{p.Pid}, Walk: walk})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d, st := dumpPid(t, b, p.Pid)
	keys := d.of(p.Pid)
	good := hex.EncodeToString(elfnote.GoodID)
	for _, name := range []string{"good", "note-past-page", "offset-only"} {
		got := byPath(keys, "/"+name+".so")
		if len(got) != 1 || got[0].buildID != good || got[0].ino != 0 {
			t.Errorf("%s: %v, want build id %s", name, got, good)
		}
	}
	if st.BuildIDsUser != user {
		t.Errorf("%d files read in userspace, want %d", st.BuildIDsUser, user)
	}
	for _, name := range []string{"no-build-id", "lying-descsz", "truncated-note", "huge-phnum"} {
		got := byPath(keys, "/"+name+".so")
		fi, err := os.Stat(filepath.Join(dir, name+".so"))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].buildID != "" || got[0].ino != fi.Sys().(*syscall.Stat_t).Ino {
			t.Errorf("%s: %v, want maj/min/ino and no build id", name, got)
		}
	}
	// Everything else of the process is there too.
	checkProc(t, p, d, false)

	// The cache at work: a second dump reads no ELF header.
	if _, st2 := dumpPid(t, b, p.Pid); st2.ELFReads != 0 || st2.BuildIDsUser != 0 {
		t.Errorf("second dump read %d ELF headers and %d files, want 0 (first: %d, %d)",
			st2.ELFReads, st2.BuildIDsUser, st.ELFReads, st.BuildIDsUser)
	}
}

// startSleep starts a sleeping copy of /bin/sleep through sh -c script,
// which may unshare and mount first, and waits until exe ends in name.
func startSleep(t *testing.T, name string, args ...string) int {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for range 200 {
		if exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", cmd.Process.Pid)); strings.Contains(exe, name) {
			return cmd.Process.Pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("%s did not start", name)
	return 0
}

// A binary that exists only in its own mount namespace, and one deleted
// after it started, both get their build ID.
func TestBuildIDHiddenFiles(t *testing.T) {
	testenv.Root(t)
	_, err := exec.LookPath("unshare")
	testenv.Need(t, err == nil, "unshare (util-linux) is not installed")
	want := readelfBuildID(t, "/bin/sleep")
	if want == "" {
		t.Fatal("/bin/sleep has no build id")
	}
	dir := t.TempDir()
	nsPid := startSleep(t, "ns-sleep", "unshare", "--mount", "--propagation", "private", "sh", "-c",
		"mount -t tmpfs none "+dir+" && cp /bin/sleep "+dir+"/ns-sleep && exec "+dir+"/ns-sleep 1000")
	if _, err := os.Stat(filepath.Join(dir, "ns-sleep")); err == nil {
		t.Fatal("the namespace's binary is visible from the host")
	}
	del := filepath.Join(t.TempDir(), "del-sleep")
	if out, err := exec.Command("cp", "/bin/sleep", del).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	delPid := startSleep(t, "del-sleep", del, "1000")
	if err := os.Remove(del); err != nil {
		t.Fatal(err)
	}
	b, err := synth.NewBPF(synth.Options{Pids: []int{nsPid, delPid}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d := &dumped{comms: map[uint32]string{}, forks: map[uint32]uint32{}}
	if _, err := b.Dump(context.Background(), func(rec []byte) error { return d.add(rec, synth.DefaultSampleType) }); err != nil {
		t.Fatal(err)
	}
	for pid, path := range map[int]string{nsPid: dir + "/ns-sleep", delPid: del + " (deleted)"} {
		got := byPath(d.of(pid), path)
		if len(got) == 0 {
			t.Errorf("pid %d: no mapping of %s", pid, path)
		}
		for _, k := range got {
			if k.buildID != want {
				t.Errorf("pid %d: %s has build id %q, want %s", pid, path, k.buildID, want)
			}
		}
	}
}

// Every build ID of a whole-host dump agrees with readelf -n, and every
// file-backed mapping of a file with a build ID carries it.
func TestBuildIDHostReadelf(t *testing.T) {
	testenv.Root(t)
	_, err := exec.LookPath("readelf")
	testenv.Need(t, err == nil, "readelf (binutils) is not installed")
	testproc.StartT(t, everything)
	b, err := synth.NewBPF(synth.Options{Data: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d := &dumped{comms: map[uint32]string{}, forks: map[uint32]uint32{}}
	st, err := b.Dump(context.Background(), func(rec []byte) error { return d.add(rec, synth.DefaultSampleType) })
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{}
	for _, k := range d.maps {
		if k.buildID == "" || checked[k.path] {
			continue
		}
		checked[k.path] = true
		path := fmt.Sprintf("/proc/%d/map_files/%x-%x", k.pid, k.start, k.end)
		if _, err := os.Stat(path); err != nil {
			continue // gone since
		}
		if got := readelfBuildID(t, path); got != k.buildID && got != gone {
			t.Errorf("%s: dump says %s, readelf -n says %s", k.path, k.buildID, got)
		}
	}
	if len(checked) < 3 {
		t.Errorf("only %d files with build ids on the host", len(checked))
	}
	if st.BuildIDMappings == 0 || st.FileMappings < st.BuildIDMappings {
		t.Errorf("stats %+v", st)
	}
	t.Logf("coverage %d/%d file mappings, %d files checked with readelf, %d ELF reads",
		st.BuildIDMappings, st.FileMappings, len(checked), st.ELFReads)
}
