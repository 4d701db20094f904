package synth_test

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/elfnote/elftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/synth"
)

// One BPF method dumps a process while 208,000 files with distinct build
// IDs come and go, 16,000 at a time: three times what the build-ID cache
// holds. Every dump succeeds and gives every file its own build ID, as a
// Session that runs for weeks on a host that keeps deploying binaries
// must. (A cache that fails when full failed the fifth dump.)
func TestBuildIDCacheTurnsOver(t *testing.T) {
	testenv.Root(t)
	const rounds, perRound = 13, 16000
	pid := os.Getpid()
	b, err := synth.NewBPF(synth.Options{Target: synth.Target{Pids: []int{pid}}, NoKernel: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for r := range rounds {
		dir := t.TempDir()
		want := map[string]string{}
		var maps [][]byte
		for i := range perRound {
			id := make([]byte, 20)
			binary.LittleEndian.PutUint32(id, uint32(r*perRound+i))
			copy(id[4:], "synth-cache-test")
			path := filepath.Join(dir, fmt.Sprintf("%d.so", i))
			m, err := mapNew(path, elftest.Good(id))
			if err != nil {
				t.Fatal(err)
			}
			maps = append(maps, m)
			want[path] = hex.EncodeToString(id)
		}
		d, st := dumpPid(t, b, pid)
		bad := 0
		for _, k := range d.of(pid) {
			if id, ok := want[k.path]; ok {
				if k.buildID != id && bad < 5 {
					t.Errorf("round %d: %s: build id %q, want %s", r, k.path, k.buildID, id)
				}
				if k.buildID != id {
					bad++
				}
				delete(want, k.path)
			}
		}
		if bad > 0 || len(want) > 0 {
			t.Fatalf("round %d: %d wrong build IDs, %d files without a record; stats %+v", r, bad, len(want), st)
		}
		for _, m := range maps {
			unix.Munmap(m)
		}
		os.RemoveAll(dir)
	}
}

// mapNew writes a file and maps its page read-execute, private.
func mapNew(path string, b []byte) ([]byte, error) {
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return unix.Mmap(int(f.Fd()), 0, len(b), unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE)
}

// The build IDs of files new to the cache are read while the walk goes
// on: each read begins when the walk notes its file, with either walk,
// and every one comes out right.
func TestBuildIDsReadDuringWalk(t *testing.T) {
	testenv.Root(t)
	pid := os.Getpid()
	dir := t.TempDir()
	want := map[string]string{}
	for i := range 50 {
		id := make([]byte, 20)
		binary.LittleEndian.PutUint32(id, uint32(i))
		copy(id[4:], "synth-early-reads")
		path := filepath.Join(dir, fmt.Sprintf("%d.so", i))
		m, err := mapNew(path, elftest.Good(id))
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Munmap(m)
		want[path] = hex.EncodeToString(id)
	}
	for _, walk := range []synth.Walk{synth.WalkMaple, synth.WalkIter} {
		t.Run(walk.String(), func(t *testing.T) {
			if walk == synth.WalkMaple {
				needMaple(t)
			}
			b, err := synth.NewBPF(synth.Options{Target: synth.Target{Pids: []int{pid}}, NoKernel: true, Walk: walk})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			d, st := dumpPid(t, b, pid)
			if st.FilesRead < len(want) || st.FilesReadEarly != st.FilesRead {
				t.Errorf("%d files read, %d of them begun during the walk; want at least %d, all", st.FilesRead, st.FilesReadEarly, len(want))
			}
			got := 0
			for _, k := range d.of(pid) {
				if id, ok := want[k.path]; ok {
					got++
					if k.buildID != id {
						t.Errorf("%s: build id %q, want %s", k.path, k.buildID, id)
					}
				}
			}
			if got != len(want) {
				t.Errorf("%d of the %d files written", got, len(want))
			}
		})
	}
}
