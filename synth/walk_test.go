package synth_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/synth"
)

// The maple walk and the task_vma iterator give the same records: for a
// test process with every kind of mapping, and for every process of the
// host whose maps do not change meanwhile.
func TestWalksAgree(t *testing.T) {
	needMaple(t)
	p := testproc.StartT(t, everything)
	before := hostKeys(t)
	maple := runDump(t, synth.Options{Data: true, Walk: synth.WalkMaple})
	iter := runDump(t, synth.Options{Data: true, Walk: synth.WalkIter})
	checkProc(t, p, maple, true)
	checkProc(t, p, iter, true)
	if n := maple.stats.WalksInvalid; n > maple.stats.Processes/4 {
		t.Errorf("%d of %d walks did not hold: the maple walk is not what read the host", n, maple.stats.Processes)
	}
	checked := 0
	for pid, keys := range before {
		if !unchanged(pid, keys) {
			continue
		}
		checked++
		if diff := sameMaps(iter.of(pid), maple.of(pid)); len(diff) > 0 {
			t.Errorf("pid %d: the walks differ (want: iterator, got: maple):\n%s",
				pid, strings.Join(diff[:min(len(diff), 10)], "\n"))
		}
	}
	if checked < len(before)/2 || checked < 3 {
		t.Errorf("only %d of %d processes were stable enough to compare", checked, len(before))
	}
	t.Logf("%d processes compared; maple: %+v", checked, maple.stats)
}

// A mapping of a file whose path is 4095 bytes, the longest there is, is
// walked like any other: the maple walk holds (it once took the path and
// its NUL, 4096 bytes, for none, and fell back for every such process).
func TestWalkMaxPath(t *testing.T) {
	needMaple(t)
	p := testproc.StartT(t, testproc.Spec{MaxPath: true})
	b, err := synth.NewBPF(synth.Options{Target: synth.Target{Pids: []int{p.Pid}}, Walk: synth.WalkMaple})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	d, st := dumpPid(t, b, p.Pid)
	if st.WalksInvalid != 0 {
		t.Errorf("%d walks did not hold, want 0", st.WalksInvalid)
	}
	if got := byPath(d.of(p.Pid), ".so"); len(got) != 1 || len(got[0].path) != 4095 {
		t.Errorf("records of the 4095-byte path: %v", got)
	}
	checkProc(t, p, d, false)
}

// A process with more records than one object may put into the rings is
// walked in chunks; with the smallest rings the test process takes
// several, and comes out whole.
func TestWalkChunks(t *testing.T) {
	needMaple(t)
	p := testproc.StartT(t, everything)
	d := runDump(t, synth.Options{Target: synth.Target{Pids: []int{p.Pid}}, Data: true, RingPages: synth.MinRingPages})
	// A walk of some 30 chunks is a proof only if the process does not
	// change between them: its Go runtime may map memory meanwhile, and
	// the walk then falls back (exact all the same). Try again then.
	for i := 0; i < 5 && d.stats.WalksInvalid > 0; i++ {
		checkProc(t, p, d, true)
		d = runDump(t, synth.Options{Target: synth.Target{Pids: []int{p.Pid}}, Data: true, RingPages: synth.MinRingPages})
	}
	if d.stats.Resumed < 2 {
		t.Errorf("the walk went on %d times, want several with %d-page rings (%d walks failed)", d.stats.Resumed, synth.MinRingPages, d.stats.WalksInvalid)
	}
	checkProc(t, p, d, true)
}

// A dump with the task_vma iterator gives up on a process whose mmap
// lock no one can take, and names it; the read it gave up on is fenced,
// so that when the lock comes free it emits nothing, not into the rings
// between dumps (stale records) nor into a dump then running (doubled
// records); and once that read has returned, a dump reads the process
// whole again.
func TestIterLockedProcess(t *testing.T) {
	const lockWait = 200 * time.Millisecond
	testenv.Root(t)
	blocked, abort := testproc.HungFUSE(t)
	hung := testproc.StartT(t, testproc.Spec{Maps: []testproc.MapSpec{{Path: blocked}}, ManyVMAs: 2000})
	other := testproc.StartT(t, everything)
	maps, err := procfs.ReadMaps(hung.Pid)
	if err != nil {
		t.Fatal(err)
	}
	var addr uint64
	for _, m := range maps {
		if m.Path == blocked {
			addr = m.Start
		}
	}
	testproc.LockMM(t, hung.Pid, addr, abort)
	b, err := synth.NewBPF(synth.Options{Target: synth.Target{Pids: []int{hung.Pid, other.Pid}}, Walk: synth.WalkIter, Data: true,
		ProcMapTimeout: lockWait})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	first := time.Now()
	d, st := dumpPid(t, b, 0)
	waited := time.Since(first)
	if !slices.Equal(st.LockedOut, []int{hung.Pid}) || len(d.of(hung.Pid)) > 0 {
		t.Errorf("left out %v, %d mappings of %d written; want it left out", st.LockedOut, len(d.of(hung.Pid)), hung.Pid)
	}
	checkProc(t, other, d, true)
	// A dump while the read is still in the kernel leaves the process
	// out at once: it does not wait a second time, so it takes less
	// than the first, which waited lockWait on top of the same work.
	start := time.Now()
	if _, st := dumpPid(t, b, 0); !slices.Equal(st.LockedOut, []int{hung.Pid}) || time.Since(start) >= waited {
		t.Errorf("a dump after: left out %v in %v (the first took %v); want %d, without waiting", st.LockedOut, time.Since(start), waited, hung.Pid)
	}
	abort()
	// Dump at once and again, while the lock comes free and the read
	// given up on goes on, until the process is read.
	for i := 0; ; i++ {
		d, st := dumpPid(t, b, 0)
		if st.Stale > 0 {
			t.Errorf("dump %d after the lock came free: %d stale records", i, st.Stale)
		}
		if len(st.LockedOut) == 0 {
			checkProc(t, hung, d, true)
			checkProc(t, other, d, true)
			t.Logf("read whole by dump %d after the lock came free", i)
			break
		}
		if i == 100 {
			t.Fatalf("still left out after %d dumps", i)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
