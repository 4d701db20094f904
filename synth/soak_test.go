package synth_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/elfnote/elftest"
	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/synth"
)

// soakFor is how long TestSoak runs: a few seconds in make test, minutes
// to hours in make soak (SOAK=1h).
var soakFor = flag.Duration("soak", 5*time.Second, "how long TestSoak runs the agent loop")

// usage is what a long-running agent must keep flat.
type usage struct {
	rss int64 // bytes
	// fds are the descriptors open but for files, BPF programs and
	// their BTF; progs the programs: a dump loads the task_vma
	// iterator's program the first time a process's maple walk does not
	// hold.
	fds, progs int
	goroutines int
	procs      int // processes in the table
	mappings   int // mappings in the table
	childPipes int // descriptors of pipes to this process's children
}

// childPipes returns the pipes ("pipe:[INODE]") open in this process's
// children, read from their /proc/PID/fd.
func childPipes() map[string]bool {
	pipes := map[string]bool{}
	pids, _ := procfs.Pids()
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		i := bytes.LastIndexByte(b, ')')
		if err != nil || i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 2 || f[1] != strconv.Itoa(os.Getpid()) {
			continue
		}
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name())); strings.HasPrefix(l, "pipe:") {
				pipes[l] = true
			}
		}
	}
	return pipes
}

func measure(t *testing.T, tb *synth.Table) usage {
	t.Helper()
	// RSS once the runtime has given back what it freed: what the agent
	// holds, not the heap the Go runtime keeps for later after a burst
	// (a host whose processes flood the rings).
	debug.FreeOSMemory()
	u := usage{goroutines: runtime.NumGoroutine()}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.Fields(rest)[0], 10, 64)
			u.rss = kb << 10
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	children := childPipes()
	for _, fd := range fds {
		switch l, _ := os.Readlink("/proc/self/fd/" + fd.Name()); {
		case l == "anon_inode:bpf-prog":
			u.progs++
		case l == "anon_inode:btf", strings.HasPrefix(l, "/"):
			// BTF goes with a program; a file may be open for a
			// moment (this test's own churn, a build ID's read).
		case children[l]:
			// A pipe to a child: the churners', and the build-ID
			// helper's, started at the first file on FUSE or a
			// network filesystem another process maps and kept as
			// long as the session (DESIGN.md).
			u.childPipes++
		default:
			u.fds++ // maps, perf events, epoll, pipes, sockets
		}
	}
	for _, p := range tb.Processes() {
		u.procs++
		u.mappings += len(p.Mappings)
	}
	return u
}

func (u usage) String() string {
	return fmt.Sprintf("RSS %.1f MB, %d fds (and %d pipes to children) and %d BPF programs, %d goroutines; table: %d processes, %d mappings",
		float64(u.rss)/(1<<20), u.fds, u.childPipes, u.progs, u.goroutines, u.procs, u.mappings)
}

// agentDump is one turn of an agent's loop: a dump into the table, then
// the live stream until the turn's time is up (then a Flush for what
// the rings hold).
func agentDump(t *testing.T, s *synth.Session, tb *synth.Table, turn time.Duration) {
	t.Helper()
	deadline := time.Now().Add(turn)
	ctx, cancel := context.WithTimeout(t.Context(), turn+10*time.Second)
	defer cancel()
	if err := s.Dump(ctx); err != nil {
		t.Fatal(err)
	}
	var rec synth.Record
	flushed := false
	for {
		rctx, rcancel := context.WithDeadline(ctx, deadline)
		err := s.ReadContext(rctx, &rec)
		rcancel()
		switch {
		case errors.Is(err, synth.ErrFlushed):
			return
		case errors.Is(err, context.DeadlineExceeded) && !flushed:
			flushed, deadline = true, time.Now().Add(10*time.Second)
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			continue
		case err != nil:
			t.Fatal(err)
		}
		if err := tb.Apply(&rec); err != nil {
			t.Fatal(err)
		}
	}
}

// churnELF has this process map, every few milliseconds until stop is
// closed, a new ELF file with a new build ID, unmapping the oldest of
// the 16 it keeps: the build-ID cache and the table see new files all
// the time.
func churnELF(t *testing.T, dir string, stop <-chan struct{}) (done <-chan struct{}) {
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		var live [][]byte
		defer func() {
			for _, m := range live {
				unix.Munmap(m)
			}
		}()
		for i := 0; ; i++ {
			id := make([]byte, 20)
			rand.Read(id)
			path := filepath.Join(dir, fmt.Sprintf("elf-%d.so", i))
			b := elftest.Good(id)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				t.Error(err)
				return
			}
			f, err := os.Open(path)
			if err != nil {
				t.Error(err)
				return
			}
			m, err := unix.Mmap(int(f.Fd()), 0, len(b), unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE)
			f.Close()
			os.Remove(path)
			if err != nil {
				t.Error(err)
				return
			}
			live = append(live, m)
			if len(live) > 16 {
				unix.Munmap(live[0])
				live = live[1:]
			}
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return ch
}

// diffProc counts the executable mappings of pid the table has and
// /proc lacks, and those /proc has and the table lacks.
func diffProc(t *testing.T, tb *synth.Table, pid int) (extra, missing int, ok bool) {
	want, ok := tryProcKeys(pid, false)
	if !ok {
		return 0, 0, false
	}
	var procSet []string
	for _, k := range want {
		if k.prot&4 != 0 {
			procSet = append(procSet, fmt.Sprintf("%x-%x %x %d %s", k.start, k.end, k.pgoff, k.prot, k.path))
		}
	}
	var tableSet []string
	if p, ok := tb.Process(uint32(pid)); ok {
		tableSet = tableKeys(p)
	}
	for _, k := range tableSet {
		if !slices.Contains(procSet, k) {
			extra++
		}
	}
	for _, k := range procSet {
		if !slices.Contains(tableSet, k) {
			missing++
		}
	}
	return extra, missing, true
}

// unmappedInTable counts pid's mappings in tb that overlap no mapping
// /proc/PID/maps shows.
func unmappedInTable(t *testing.T, tb *synth.Table, pid int) int {
	t.Helper()
	maps, err := procfs.ReadMaps(pid)
	if err != nil {
		t.Fatal(err)
	}
	p, ok := tb.Process(uint32(pid))
	if !ok {
		return 0
	}
	n := 0
	for _, m := range p.Mappings {
		if !slices.ContainsFunc(maps, func(pm procfs.Mapping) bool { return pm.Start < m.End && m.Start < pm.End }) {
			n++
		}
	}
	return n
}

// An agent's loop, for -soak (make soak: SOAK=30m): a Session of the
// whole host dumps every 200 ms into a Table and applies the live stream
// between dumps, while two processes map and unmap files at moving
// addresses and start short children, and this one maps ELF files with
// new build IDs. The session's memory, file descriptors (its BPF maps
// and rings among them) and goroutines stay flat; once the churn stops,
// one more dump leaves the table exactly as /proc for every process it
// controls (and it says how the rest of the host compares). The
// churners' short children are reaped at once or 150 ms late (zombies
// meanwhile): after every turn, once the stream has settled, the table
// holds no process that has exited, gone from /proc or a zombie there,
// and the count of those it kept is said and must be 0 (but in a turn
// that lost records: see exitedKept).
func TestSoak(t *testing.T) {
	testenv.Root(t)
	dir := t.TempDir()
	churners := []*testproc.Proc{
		testproc.StartT(t, testproc.Spec{Dir: dir, Churn: true}),
		testproc.StartT(t, testproc.Spec{Dir: dir, Churn: true}),
	}
	stop := make(chan struct{})
	elfDone := churnELF(t, dir, stop)
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		<-elfDone
	}()
	s, err := synth.NewSession(synth.SessionOptions{Unmaps: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.UnmapsErr(); err != nil {
		t.Logf("no unmaps between dumps: %v", err)
	}
	tb := synth.NewTable()
	const turn = 200 * time.Millisecond
	agentDump(t, s, tb, turn) // the first dump loads the build-ID cache
	first := measure(t, tb)
	t.Logf("start: %v", first)
	// After every turn, once the stream has settled, the table holds no
	// process that has exited: gone from /proc, or a zombie there.
	apply := func(rec *synth.Record) {
		if err := tb.Apply(rec); err != nil {
			t.Fatal(err)
		}
	}
	kept := &exitedKept{gone: map[uint32]bool{}, zombies: map[uint32]bool{}, excused: map[uint32]bool{}, t: t,
		describe: func(pid uint32) string {
			p, _ := tb.Process(pid)
			_, zombie := procExited(pid)
			return fmt.Sprintf("pid %d %q, %d mappings, a zombie in /proc: %v", pid, p.Comm, len(p.Mappings), zombie)
		}}
	report := max(*soakFor/10, time.Second)
	start, next := time.Now(), time.Now().Add(report)
	dumps := 1
	for time.Since(start) < *soakFor {
		lost := lostSoFar(s)
		agentDump(t, s, tb, turn)
		dumps++
		gone, zombies := keptAfterExit(t, s, tb, apply)
		kept.note(lostSoFar(s) != lost, gone, zombies)
		if time.Now().After(next) {
			next = next.Add(report)
			t.Logf("%v: %d dumps; %v; %v", time.Since(start).Round(time.Second), dumps, measure(t, tb), kept)
		}
	}

	// Freeze the churn, dump once more, compare with /proc.
	for _, p := range churners {
		if err := p.Pause(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	<-elfDone
	if s.UnmapsErr() == nil {
		// Between dumps, the live stream alone: no range the table holds
		// is unmapped. (Names and protections may lag: the kernel reports
		// neither a file's deletion nor exec taken away by mprotect.)
		// A call the kernel did not let the programs see
		// (UnmapsMissed) is the one excuse.
		flushInto(t, s, tb, nil)
		missed := s.Stats().UnmapsMissed
		for _, p := range churners {
			if stale := unmappedInTable(t, tb, p.Pid); stale != 0 && missed == 0 {
				t.Errorf("before the last dump, pid %d: %d mappings in the table where /proc has nothing", p.Pid, stale)
			} else if stale != 0 {
				t.Logf("before the last dump, pid %d: %d mappings in the table where /proc has nothing, with %d unmap calls missed", p.Pid, stale, missed)
			}
		}
	}
	lost := lostSoFar(s)
	agentDump(t, s, tb, turn)
	gone, zombies := keptAfterExit(t, s, tb, apply)
	kept.note(lostSoFar(s) != lost, gone, zombies)
	kept.flush()
	missing := missingFromTable(t, s, tb, apply)
	last := measure(t, tb)
	st := s.Stats()
	t.Logf("end, after %d dumps in %v: %v; %d synthesized, %d live and %d unmap records applied, %d lost, %d unmap calls missed",
		dumps+1, time.Since(start).Round(time.Second), last, st.Synthesized, st.Live, st.Unmaps, st.Lost+st.LiveLost, st.UnmapsMissed)
	for _, pid := range []int{churners[0].Pid, churners[1].Pid, os.Getpid()} {
		if extra, missing, ok := diffProc(t, tb, pid); !ok || extra != 0 || missing != 0 {
			t.Errorf("pid %d: %d mappings in the table that /proc lacks, %d missing (read /proc: %v)", pid, extra, missing, ok)
		}
	}
	hostExtra, hostMissing, noMaps := 0, 0, 0
	for _, p := range tb.Processes() {
		extra, missing, ok := diffProc(t, tb, int(p.Pid))
		if !ok {
			noMaps++
			continue
		}
		hostExtra += extra
		hostMissing += missing
	}
	pids, _ := procfs.Pids()
	t.Logf("the whole host: the table has %d processes, /proc %d; of their executable mappings, %d in the table that /proc lacks, %d missing "+
		"(%d without maps: kernel threads, or gone since)", len(tb.Processes()), len(pids), hostExtra, hostMissing, noMaps)
	// Missing ones are said, not failed: a task no dump can read (a
	// process of a pid namespace this one does not number, as a
	// sandbox's pid 1 may be) is in /proc and in no table.
	t.Logf("after %d dumps: %v; live processes /proc lists that the table lacks: %d %v", dumps+1, kept, len(missing), missing)
	if kept.count() != 0 {
		t.Errorf("the table kept processes after they exited: %v", kept)
	}

	// Flat: no more descriptors or goroutines than after the first
	// dump, memory within what a GC cycle holds. Fewer descriptors is
	// no leak: run after other tests, the process may close what their
	// garbage held (cilium/ebpf closes an unreferenced fd in a cleanup).
	if last.fds > first.fds || last.progs > first.progs+1 || last.goroutines > first.goroutines+2 {
		t.Errorf("start: %v\nend: %v", first, last)
	}
	if last.rss > 2*first.rss+32<<20 {
		t.Errorf("RSS grew from %.1f to %.1f MB", float64(first.rss)/(1<<20), float64(last.rss)/(1<<20))
	}
	if st.Lost+st.LiveLost > 0 {
		t.Logf("records lost: the table is exact again at the next dump")
	}
}

// lostSoFar is how many records the session has lost: live ones the
// kernel dropped with a full ring, and the dumps' own.
func lostSoFar(s *synth.Session) uint64 {
	st := s.Stats()
	return st.Lost + st.LiveLost
}

// exitedKept counts the processes a table kept after they exited (see
// keptAfterExit), each once. Those of a turn in which the session lost
// records, or of the turn before one, are excused: their EXIT may be
// among them (the kernel writes the PERF_RECORD_LOST that says so when
// the ring has room again, which may be after the turn's last Flush),
// and the next dump removes them (DESIGN.md: a dump of every process
// removes those it did not find). A process excused once and kept after
// a later dump, in a turn without loss, counts; one kept in a turn with
// no dump (noteFlushed) is judged with the turn before.
type exitedKept struct {
	gone, zombies map[uint32]bool
	excused       map[uint32]bool
	lossyTurns    int
	// The last turn's kept processes, judged with the next turn.
	lastLossy             bool
	lastGone, lastZombies []uint32
	lastDescs             map[uint32]string
	logged                int
	// sinceDump are the processes kept by the turns since the last dump.
	sinceDump map[uint32]bool
	// describe says what the table holds of a process kept, for the log.
	describe func(pid uint32) string
	t        *testing.T
}

func (k *exitedKept) note(lossy bool, gone, zombies []uint32) {
	k.sinceDump = map[uint32]bool{}
	k.keep(gone, zombies)
	k.noteTurn(lossy, gone, zombies)
}

// keep notes the processes a turn kept, for noteFlushed.
func (k *exitedKept) keep(gone, zombies []uint32) {
	for _, pid := range append(slices.Clone(gone), zombies...) {
		k.sinceDump[pid] = true
	}
}

func (k *exitedKept) noteTurn(lossy bool, gone, zombies []uint32) {
	if lossy {
		k.lossyTurns++
	}
	k.judge(lossy || k.lastLossy, k.lastGone, k.lastZombies)
	k.lastLossy, k.lastGone, k.lastZombies = lossy, gone, zombies
	k.lastDescs = map[uint32]string{}
	for _, pid := range append(slices.Clone(gone), zombies...) {
		k.lastDescs[pid] = k.describe(pid)
	}
}

// noteFlushed is note for a turn with no dump, only the live stream
// flushed: a process a turn kept since the last dump is kept still for
// the same want of its EXIT, with no dump since to remove it (DESIGN.md:
// the next dump does), and is judged with the turn that first kept it
// only. A process excused there would otherwise count here, as one kept
// without loss.
func (k *exitedKept) noteFlushed(lossy bool, gone, zombies []uint32) {
	before := func(pid uint32) bool { return k.sinceDump[pid] }
	gone, zombies = slices.DeleteFunc(gone, before), slices.DeleteFunc(zombies, before)
	k.keep(gone, zombies)
	k.noteTurn(lossy, gone, zombies)
}

// flush judges the last turn's kept processes with no turn after it.
func (k *exitedKept) flush() {
	k.judge(k.lastLossy, k.lastGone, k.lastZombies)
	k.lastGone, k.lastZombies = nil, nil
}

func (k *exitedKept) judge(lossy bool, gone, zombies []uint32) {
	if lossy {
		for _, pid := range append(slices.Clone(gone), zombies...) {
			k.excused[pid] = true
		}
		return
	}
	for _, pid := range gone {
		k.gone[pid] = true
	}
	for _, pid := range zombies {
		k.zombies[pid] = true
	}
	for _, pid := range append(slices.Clone(gone), zombies...) {
		if k.logged < 10 {
			k.logged++
			k.t.Logf("kept after it exited, with no records lost: %s", k.lastDescs[pid])
		}
	}
}

func (k *exitedKept) count() int { return len(k.gone) + len(k.zombies) }

func (k *exitedKept) String() string {
	return fmt.Sprintf("processes kept after they exited: %d (%d gone from /proc %v, %d zombies %v); "+
		"%d turns lost records, in which %d were kept (excused)", k.count(),
		len(k.gone), slices.Sorted(maps.Keys(k.gone)), len(k.zombies), slices.Sorted(maps.Keys(k.zombies)),
		k.lossyTurns, len(k.excused))
}

// missingFromTable returns the live processes (not zombies) /proc lists
// that tb lacks once the stream has settled: one seen missing is looked
// at again after a Flush, which brings the FORK of a process started
// meanwhile.
func missingFromTable(t *testing.T, s *synth.Session, tb *synth.Table, apply func(*synth.Record)) []uint32 {
	t.Helper()
	var seen []uint32
	pids, err := procfs.Pids()
	if err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if _, ok := tb.Process(uint32(pid)); !ok {
			if exited, _ := procExited(uint32(pid)); !exited {
				seen = append(seen, uint32(pid))
			}
		}
	}
	if len(seen) == 0 {
		return nil
	}
	flushApply(t, s, apply)
	var missing []uint32
	for _, pid := range seen {
		if _, ok := tb.Process(pid); !ok {
			if exited, _ := procExited(pid); !exited {
				missing = append(missing, pid)
			}
		}
	}
	return missing
}

// exitedKept judges a process that a turn with no dump keeps with the
// turn before, which kept it already: a lost EXIT it excused is not one
// kept without loss, for no dump came between to remove the process. A
// process kept again after a dump, with no loss, counts.
func TestExitedKeptDumplessTurn(t *testing.T) {
	newKept := func() *exitedKept {
		return &exitedKept{gone: map[uint32]bool{}, zombies: map[uint32]bool{}, excused: map[uint32]bool{}, t: t,
			describe: func(pid uint32) string { return fmt.Sprint(pid) }}
	}
	k := newKept()
	k.note(true, []uint32{7}, nil)         // a dump's turn that lost 7's EXIT
	k.noteFlushed(false, []uint32{7}, nil) // the stream alone: 7 is kept still
	k.noteFlushed(false, []uint32{7}, nil) // and again
	k.flush()
	if k.count() != 0 {
		t.Errorf("a dumpless turn after a lossy one: %v, want none counted", k)
	}
	k = newKept()
	k.note(true, []uint32{7}, nil)  // excused
	k.note(false, nil, nil)         // a dump removed it
	k.note(false, []uint32{7}, nil) // kept after a dump, with no loss
	k.flush()
	if !k.gone[7] {
		t.Errorf("kept again after a dump with no loss: %v, want 7 counted", k)
	}
}
