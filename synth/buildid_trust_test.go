package synth_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/elfnote/elftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// goodIDOff is where the build ID of elftest.Crafted()["good"] lies in
// the file: its note is at 0x100, the descriptor after the 12-byte
// header and the 4-byte name.
const goodIDOff = 0x100 + 12 + 4

var forgedID = bytes.Repeat([]byte{0x66}, 20)

// idsOf returns the build IDs of the MMAP2 records of path, by pid.
func idsOf(maps []perfdata.Mmap2, path string) map[uint32][][]byte {
	out := map[uint32][][]byte{}
	for _, m := range maps {
		if m.Filename == path {
			out[m.Pid] = append(out[m.Pid], m.BuildID)
		}
	}
	return out
}

// Two processes map the same copy of a library; the one with the lower
// pid (the one a walk meets first) rewrites the note in its private copy
// of the page. The forged ID must reach neither process's records, in
// either of two dumps of one session, nor the perf.data's build-ID table.
func TestBuildIDForgery(t *testing.T) {
	testenv.Root(t)
	dir := t.TempDir()
	lib := filepath.Join(dir, "libshared.so")
	if err := os.WriteFile(lib, elftest.Crafted()["good"], 0o644); err != nil {
		t.Fatal(err)
	}
	spec := testproc.Spec{Maps: []testproc.MapSpec{{Path: lib}}}
	a, b := testproc.StartT(t, spec), testproc.StartT(t, spec)
	forger, other := a, b
	if b.Pid < a.Pid {
		forger, other = b, a
	}
	if err := forger.Poke(0, goodIDOff, forgedID, true); err != nil {
		t.Fatal(err)
	}
	// The forgery took: the forger's memory holds the forged note.
	if !bytes.Contains(procMem(t, forger.Pid, lib), forgedID) {
		t.Fatal("the forged note is not in the forger's memory")
	}
	opts := synth.Options{Target: synth.Target{Pids: []int{forger.Pid, other.Pid}}}
	s := openSession(t, synth.SessionOptions{Options: opts})
	for dump := 1; dump <= 2; dump++ {
		if err := s.Dump(context.Background()); err != nil {
			t.Fatal(err)
		}
		ids := idsOf(readDump(t, s), lib)
		for _, p := range []*testproc.Proc{other, forger} {
			got := ids[uint32(p.Pid)]
			if len(got) != 1 || !bytes.Equal(got[0], elftest.GoodID) {
				t.Errorf("dump %d, pid %d (forger %v): build ids %x, want the file's %x",
					dump, p.Pid, p == forger, got, elftest.GoodID)
			}
		}
	}
	// A whole perf.data, with the HEADER_BUILD_ID section.
	m, err := synth.OpenMethod(synth.MethodBPF, synth.MethodOptions{Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	file := filepath.Join(t.TempDir(), "perf.data")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := synth.WritePerfData(context.Background(), m, f, synth.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.Close()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(data, forgedID) {
		t.Error("the forged build id is in the perf.data")
	}
	out, err := exec.Command(testenv.Perf(t), "buildid-list", "-i", file).CombinedOutput()
	if err != nil {
		t.Fatalf("perf buildid-list: %v\n%s", err, out)
	}
	want := fmt.Sprintf("%x %s", elftest.GoodID, lib)
	if !strings.Contains(string(out), want) || strings.Contains(string(out), fmt.Sprintf("%x", forgedID)) {
		t.Errorf("perf buildid-list does not list %q alone:\n%s", want, out)
	}
}

// procMem reads the first page process pid maps of path, through
// /proc/PID/mem.
func procMem(t *testing.T, pid int, path string) []byte {
	t.Helper()
	p := testproc.Proc{Pid: pid}
	maps, err := p.Maps()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range maps {
		if m.Path == path && m.Pgoff == 0 {
			f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b := make([]byte, 4096)
			if _, err := f.ReadAt(b, int64(m.Start)); err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("pid %d does not map %s", pid, path)
	return nil
}

// A file on tmpfs, rewritten through a shared mapping between two dumps
// of one session: the write takes no page fault (the page was written
// before), so the file's times stay; the second dump must still carry
// the new build ID.
func TestBuildIDTmpfsRewrite(t *testing.T) {
	testenv.Root(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	lib := filepath.Join(dir, "jit.so")
	if err := os.WriteFile(lib, elftest.Crafted()["good"], 0o755); err != nil {
		t.Fatal(err)
	}
	p := testproc.StartT(t, testproc.Spec{Dir: t.TempDir(),
		Maps: []testproc.MapSpec{{Path: lib, SharedWrite: true}}})
	// Write the page once before the first dump: the rewrite after it
	// then takes no page fault.
	if err := p.Poke(0, goodIDOff, elftest.GoodID, false); err != nil {
		t.Fatal(err)
	}
	s := openSession(t, synth.SessionOptions{Options: synth.Options{Target: synth.Target{Pids: []int{p.Pid}}}})
	dump := func() [][]byte {
		t.Helper()
		if err := s.Dump(context.Background()); err != nil {
			t.Fatal(err)
		}
		return idsOf(readDump(t, s), lib)[uint32(p.Pid)]
	}
	if got := dump(); len(got) != 1 || !bytes.Equal(got[0], elftest.GoodID) {
		t.Fatalf("first dump: build ids %x, want %x", got, elftest.GoodID)
	}
	var before, after unix.Stat_t
	if err := unix.Stat(lib, &before); err != nil {
		t.Fatal(err)
	}
	newID := bytes.Repeat([]byte{0x42}, 20)
	if err := p.Poke(0, goodIDOff, newID, false); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(lib, &after); err != nil {
		t.Fatal(err)
	}
	if out, _ := exec.Command("readelf", "-n", lib).Output(); !bytes.Contains(out, []byte(fmt.Sprintf("%x", newID))) {
		t.Fatalf("readelf does not see the rewritten note:\n%s", out)
	}
	t.Logf("times unchanged by the write: %v", before.Mtim == after.Mtim && before.Ctim == after.Ctim)
	if got := dump(); len(got) != 1 || !bytes.Equal(got[0], newID) {
		t.Errorf("second dump: build ids %x, want the rewritten %x", got, newID)
	}
}
