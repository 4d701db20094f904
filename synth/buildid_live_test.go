package synth_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// readelfID returns the build ID readelf -n shows of path, nil for none:
// an oracle nobody here wrote.
func readelfID(t *testing.T, path string) []byte {
	t.Helper()
	out, err := exec.Command("readelf", "-n", path).Output()
	if err != nil {
		t.Fatalf("readelf -n %s: %v", path, err)
	}
	m := regexp.MustCompile(`Build ID: ([0-9a-f]+)`).FindSubmatch(out)
	if m == nil {
		return nil
	}
	id, err := hex.DecodeString(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// shortBinaries links n programs that exit at once, each with a build
// ID of its own, into dir.
func shortBinaries(t *testing.T, dir string, n int) []string {
	t.Helper()
	_, err := exec.LookPath("gcc")
	testenv.Need(t, err == nil, "gcc is not installed")
	src := filepath.Join(dir, "main.c")
	if err := os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	obj := filepath.Join(dir, "main.o")
	if out, err := exec.Command("gcc", "-c", "-o", obj, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	var bins []string
	for i := range n {
		bin := filepath.Join(dir, fmt.Sprintf("short%03d", i))
		id := fmt.Sprintf("0x5e%038x", i+1)
		if out, err := exec.Command("gcc", "-Wl,--build-id="+id, "-o", bin, obj).CombinedOutput(); err != nil {
			t.Fatalf("gcc: %v\n%s", err, out)
		}
		bins = append(bins, bin)
	}
	return bins
}

// A whole-host session's live MMAP2 records of processes that ran and
// exited between two drains carry their files' build IDs, each its own
// file's (readelf -n), the programs' and their libraries' (libc,
// ld.so: read by the dump, or once by a drain), and a Table resolves an
// address in each program to its build ID. Before the session kept a
// cache and read a gone process's file through its path, none had one:
// the drains read files only through /proc/PID/map_files, gone with the
// process.
func TestSessionShortLivedBuildIDs(t *testing.T) {
	testenv.Root(t)
	dir := t.TempDir()
	const n = 20
	bins := shortBinaries(t, dir, n)
	// A turn whose live records a full ring dropped (another process's
	// storm of mmaps fills the whole-host rings) is excused and run
	// again, with a session of its own: the kernel says so
	// (SessionStats.LiveLost), though only once a later record fits.
	for try := 1; ; try++ {
		lost := shortLivedTurn(t, bins)
		if lost == 0 {
			return
		}
		if try == 5 {
			t.Fatalf("the kernel dropped live records in each of %d turns (%d in the last)", try, lost)
		}
		t.Logf("turn %d: the kernel dropped %d live records; again", try, lost)
	}
}

// shortLivedTurn runs bins, each once, between a session's dump and its
// next drain, and checks their live records; it returns how many live
// records the kernel dropped meanwhile, and checks nothing if any.
func shortLivedTurn(t *testing.T, bins []string) (lost uint64) {
	t.Helper()
	s := openSession(t, synth.SessionOptions{})
	defer s.Close()
	if err := s.Dump(context.Background()); err != nil {
		t.Fatal(err)
	}
	readDump(t, s)
	// No Read runs meanwhile: every process has exited before the
	// next drain.
	pids := make(map[uint32]string)
	for _, bin := range bins {
		cmd := exec.Command(bin)
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		pids[uint32(cmd.Process.Pid)] = bin
	}
	oracle := make(map[string][]byte)
	idOf := func(path string) []byte {
		if id, ok := oracle[path]; ok {
			return id
		}
		oracle[path] = readelfID(t, path)
		return oracle[path]
	}
	tb := synth.NewTable()
	resolved := make(map[string][]byte)
	var libs, libsWithID int
	var errs []string
	readFlushed(t, s, func(r *synth.Record) {
		tb.Apply(r)
		if r.Kind != synth.KindLive || r.Type() != perfdata.RecordMmap2 {
			return
		}
		m := perfdata.Mmap2View(r.Raw)
		bin, ours := pids[m.Pid()]
		name := string(m.Filename())
		if !ours || !filepath.IsAbs(name) {
			return
		}
		want := idOf(name)
		got := m.BuildID()
		switch {
		case got != nil && !bytes.Equal(got, want):
			errs = append(errs, fmt.Sprintf("pid %d, %s: build ID %x, want %x (readelf -n)", m.Pid(), name, got, want))
		case name == bin:
			if loc, ok := tb.Resolve(m.Pid(), m.Addr()); ok {
				resolved[bin] = slices.Clone(loc.Mapping.BuildID)
			}
		case want != nil:
			libs++
			if got != nil {
				libsWithID++
			}
		}
	})
	// A ring that dropped records says so with the next record that
	// fits in it: a process of ours gives each CPU's one.
	for range 4 {
		exec.Command("/bin/true").Run()
	}
	readFlushed(t, s, func(*synth.Record) {})
	st := s.Stats()
	if st.LiveLost > 0 {
		return st.LiveLost
	}
	for _, e := range errs {
		t.Error(e)
	}
	for _, bin := range bins {
		if got, want := resolved[bin], idOf(bin); !bytes.Equal(got, want) {
			t.Errorf("%s: a Table resolves its mapping to build ID %x, want %x", filepath.Base(bin), got, want)
		}
	}
	if libs == 0 || libsWithID != libs {
		t.Errorf("%d of %d live MMAP2 records of libraries with a build ID carry it (%+v)", libsWithID, libs, st)
	}
	if st.LiveBuildIDs < uint64(len(bins)) {
		t.Errorf("stats: %d live build IDs, want at least %d (%+v)", st.LiveBuildIDs, len(bins), st)
	}
	return 0
}

// A program rebuilt right after its process exited, in place (the same
// inode) or at the same path (a new inode, by rename), before the
// session's drain reads it: the process's live MMAP2 gets no build ID,
// never the new file's, which a read by path, as perf's end-of-record
// pass reads, would give.
func TestSessionShortLivedRebuilt(t *testing.T) {
	testenv.Root(t)
	dir := t.TempDir()
	bins := shortBinaries(t, dir, 4) // 0, 1: run; 2, 3: what replaces them
	s := openSession(t, synth.SessionOptions{})
	if err := s.Dump(context.Background()); err != nil {
		t.Fatal(err)
	}
	readDump(t, s)
	newer := make(map[string][]byte)
	pids := make(map[uint32]string)
	for i, bin := range bins[:2] {
		cmd := exec.Command(bin)
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		pids[uint32(cmd.Process.Pid)] = bin
		next, err := os.ReadFile(bins[2+i])
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			// In place: the inode, and so the record's device and
			// inode, stay.
			f, err := os.OpenFile(bin, os.O_WRONLY|os.O_TRUNC, 0)
			if err != nil {
				t.Fatal(err)
			}
			_, err = f.Write(next)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
		} else if err := os.Rename(bins[2+i], bin); err != nil {
			t.Fatal(err)
		}
		newer[bin] = readelfID(t, bin)
	}
	seen := make(map[string]bool)
	readFlushed(t, s, func(r *synth.Record) {
		if r.Kind != synth.KindLive || r.Type() != perfdata.RecordMmap2 {
			return
		}
		m := perfdata.Mmap2View(r.Raw)
		bin, ours := pids[m.Pid()]
		if !ours || string(m.Filename()) != bin {
			return
		}
		seen[bin] = true
		if got := m.BuildID(); got != nil {
			t.Errorf("%s, rebuilt after its process exited: build ID %x (the new file's: %x), want none",
				filepath.Base(bin), got, newer[bin])
		}
	})
	for _, bin := range bins[:2] {
		if !seen[bin] {
			t.Errorf("no live MMAP2 of %s", filepath.Base(bin))
		}
	}
}
