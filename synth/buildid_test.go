package synth_test

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/elfnote/elftest"
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
	if f, err := elf.Open(path); err == nil {
		id := littleEndianNotes(f)
		f.Close()
		if id != nil {
			return id
		}
	}
	if b := make([]byte, 4); !readMagic(path, b) || string(b) != "\x7fELF" {
		return nil
	}
	// Big-endian files and 8-aligned notes: binutils knows them all.
	out, _ := exec.Command("readelf", "-n", "-W", path).Output()
	for _, m := range buildIDLine.FindAllStringSubmatch(string(out), -1) {
		if id, err := hex.DecodeString(m[1]); err == nil && len(id) <= 20 {
			return id
		}
	}
	return nil
}

var buildIDLine = regexp.MustCompile(`Build ID: ([0-9a-f]+)`)

func readMagic(path string, b []byte) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	_, err = io.ReadFull(f, b)
	return err == nil
}

// littleEndianNotes walks the 4-aligned little-endian notes of f.
func littleEndianNotes(f *elf.File) []byte {
	// The note segments, then the note sections (a Go binary may have
	// .note.gnu.build-id outside its PT_NOTE).
	var ranges []io.ReaderAt
	for _, p := range f.Progs {
		if p.Type == elf.PT_NOTE && p.Filesz <= 1<<16 {
			ranges = append(ranges, io.NewSectionReader(p, 0, int64(p.Filesz)))
		}
	}
	for _, s := range f.Sections {
		if s.Type == elf.SHT_NOTE && s.Size <= 1<<16 {
			ranges = append(ranges, io.NewSectionReader(s, 0, int64(s.Size)))
		}
	}
	for _, r := range ranges {
		b, err := io.ReadAll(io.NewSectionReader(r, 0, 1<<16))
		if err != nil {
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

// gone is what readelfBuildID returns for a file whose process exited.
const gone = "(gone)"

// readelfBuildID asks binutils' readelf -n, a second oracle.
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

// Crafted ELF files mapped by a test process: each gets exactly the
// build ID it was made with (the one readelf -n shows), or maj/min/ino
// when it has none, with either walk; the dump goes on. Every build ID
// is read in userspace, from the files.
func TestBuildIDCrafted(t *testing.T) {
	testenv.Root(t)
	dir := t.TempDir()
	var maps []testproc.MapSpec
	for name, b := range elftest.Crafted() {
		path := filepath.Join(dir, name+".so")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if name == "note-past-page" {
			// The mapping holds only the first page: the note is outside it.
			maps = append(maps, testproc.MapSpec{Path: path, Len: int64(os.Getpagesize())})
			// Mapped only at an offset: the mapping has no ELF header.
			off := filepath.Join(dir, "offset-only.so")
			if err := os.WriteFile(off, b, 0o644); err != nil {
				t.Fatal(err)
			}
			maps = append(maps, testproc.MapSpec{Path: off, Off: int64(os.Getpagesize())})
			continue
		}
		maps = append(maps, testproc.MapSpec{Path: path})
	}
	p := testproc.StartT(t, testproc.Spec{Maps: maps})
	// The crafted files with a build ID, and those of the process's own
	// libraries (under -race the test binary is linked dynamically).
	read := 1 + len(otherBuildIDFiles(t, p.Pid, dir))
	for name := range elftest.Crafted() {
		if elftest.CraftedID(name) != nil {
			read++
		}
	}
	for _, walk := range []synth.Walk{synth.WalkIter, synth.WalkMaple} {
		t.Run(walk.String(), func(t *testing.T) {
			if walk == synth.WalkMaple {
				needMaple(t)
			}
			checkCrafted(t, p, dir, walk, read)
		})
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

func checkCrafted(t *testing.T, p *testproc.Proc, dir string, walk synth.Walk, withID int) {
	b, err := synth.NewBPF(synth.Options{Target: synth.Target{Pids: []int{p.Pid}}, Walk: walk})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d, st := dumpPid(t, b, p.Pid)
	keys := d.of(p.Pid)
	names := []string{"offset-only"}
	for name := range elftest.Crafted() {
		names = append(names, name)
	}
	for _, name := range names {
		got := byPath(keys, "/"+name+".so")
		want := elftest.CraftedID(strings.Replace(name, "offset-only", "note-past-page", 1))
		fi, err := os.Stat(filepath.Join(dir, name+".so"))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case len(got) != 1:
			t.Errorf("%s: %d records, want 1", name, len(got))
		case want != nil && (got[0].buildID != hex.EncodeToString(want) || got[0].ino != 0):
			t.Errorf("%s: %v, want build id %x", name, got[0], want)
		case want == nil && (got[0].buildID != "" || got[0].ino != fi.Sys().(*syscall.Stat_t).Ino):
			t.Errorf("%s: %v, want maj/min/ino and no build id", name, got[0])
		}
	}
	if st.BuildIDsRead != withID {
		t.Errorf("%d files read with a build ID, want %d", st.BuildIDsRead, withID)
	}
	// Everything else of the process is there too.
	checkProc(t, p, d, false)

	// The cache at work: a second dump reads no file.
	if _, st2 := dumpPid(t, b, p.Pid); st2.FilesRead != 0 {
		t.Errorf("second dump read %d files, want 0 (first: %d)", st2.FilesRead, st.FilesRead)
	}
}

// startSleep starts a sleeping copy of /bin/sleep through sh -c script,
// which may unshare and mount first, and waits until it sleeps in name.
func startSleep(t *testing.T, name string, args ...string) int {
	t.Helper()
	return testproc.StartSleep(t, name, exec.Command(args[0], args[1:]...))
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
	b, err := synth.NewBPF(synth.Options{Target: synth.Target{Pids: []int{nsPid, delPid}}})
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
	dumpStart := time.Now()
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
		fi, err := os.Stat(path)
		if err != nil {
			continue // gone since
		}
		// Another process's file written since the dump began (a test
		// that churns build IDs) holds another build ID now, rightly.
		if ctime := fi.Sys().(*syscall.Stat_t).Ctim; time.Unix(ctime.Unix()).After(dumpStart.Add(-time.Second)) {
			continue
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
	t.Logf("coverage %d/%d file mappings, %d files checked with readelf, %d files read",
		st.BuildIDMappings, st.FileMappings, len(checked), st.FilesRead)
}
