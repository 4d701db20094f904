package synth_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/perfhost"
	"github.com/synth-dev/synth/internal/perftest"
	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// Once pids wrap, a process's threads can have tids below its pid, and
// come before its leader in a scan by tid. Every method, on both walks
// and with every kind of target, writes the leader's FORK and COMM
// before any record of its other threads: perf gives a thread whose
// FORK comes first a leader of its own, which the leader's FORK then
// replaces with one holding fresh maps, and the thread's samples
// resolve to nothing. With -t of such a thread the leader is written
// too, as perf does. The oracle is perf: a sample of each thread at the
// helper's text resolves to the helper's executable.
func TestThreadsBelowLeader(t *testing.T) {
	testenv.Root(t)
	testenv.Perf(t)
	p, tids := testproc.StartWrapped(t, testproc.Spec{}, 2)
	text := execText(t, p.Pid)
	t.Logf("pid %d, threads %v, text %#x %s", p.Pid, tids, text.Start, text.Path)
	runs := everyMethod(t)
	targets := []struct {
		name   string
		target synth.Target
		tids   []int // the threads the dump writes besides the leader
	}{
		{"host", synth.Target{}, tids},
		{"pid", synth.Target{Pids: []int{p.Pid}}, tids},
		{"tid", synth.Target{Tids: []int{tids[0]}}, tids[:1]},
	}
	for _, r := range runs {
		for _, tg := range targets {
			t.Run(r.String()+"/"+tg.name, func(t *testing.T) {
				opts := synth.MethodOptions{Options: synth.Options{NoBuildID: true, NoKernel: true,
					Target: tg.target, Walk: r.walk}, Threads: 2}
				file := filepath.Join(t.TempDir(), "perf.data")
				order := dumpWithSamples(t, file, r.method, opts, p.Pid, tg.tids, text.Start+16)
				checkLeaderFirst(t, order, p.Pid, tg.tids)
				sr := perftest.Run(t, perftest.Command(t, "script", "-F", "tid,ip,dso", "-i", file))
				perftest.NoWarnings(t, "perf script", sr)
				checkResolved(t, sr.Stdout, tg.tids, text.Path)
			})
		}
	}
}

// A process whose leader exited alone (exit(2), not exit_group(2)) while
// its threads run has a zombie leader without mm: /proc/PID/maps is
// empty, and perf, which reads it, resolves none of the threads'
// samples. Every method reads the mappings through a live thread, and
// writes the leader's records, where it writes them at all (the BPF
// method writes none of a zombie), first.
func TestZombieLeader(t *testing.T) {
	testenv.Root(t)
	testenv.Perf(t)
	p := testproc.StartT(t, testproc.Spec{Threads: []string{"alive"}, ZombieLeader: true})
	comms, err := p.Comms()
	if err != nil {
		t.Fatal(err)
	}
	var tid int
	for id, name := range comms {
		if name == "alive" {
			tid = id
		}
	}
	if !procfs.Exiting(p.Pid) || tid == 0 || tid == p.Pid {
		t.Fatalf("pid %d: threads %v: want a zombie leader and a thread \"alive\"", p.Pid, comms)
	}
	text := execText(t, tid)
	for _, r := range everyMethod(t) {
		for _, tg := range []struct {
			name   string
			target synth.Target
		}{{"host", synth.Target{}}, {"pid", synth.Target{Pids: []int{p.Pid}}}} {
			t.Run(r.String()+"/"+tg.name, func(t *testing.T) {
				opts := synth.MethodOptions{Options: synth.Options{NoBuildID: true, NoKernel: true,
					Target: tg.target, Walk: r.walk}, Threads: 2}
				file := filepath.Join(t.TempDir(), "perf.data")
				order := dumpWithSamples(t, file, r.method, opts, p.Pid, []int{tid}, text.Start+16)
				if i := slices.IndexFunc(order, func(r taskRec) bool { return r.tid == uint32(p.Pid) }); i > 0 {
					t.Errorf("pid %d: thread records %v: the leader's after another thread's", p.Pid, order)
				}
				sr := perftest.Run(t, perftest.Command(t, "script", "-F", "tid,ip,dso", "-i", file))
				perftest.NoWarnings(t, "perf script", sr)
				checkResolved(t, sr.Stdout, []int{tid}, text.Path)
			})
		}
	}
}

// methodRun is a method to test, and its walk for the BPF method.
type methodRun struct {
	method synth.MethodName
	walk   synth.Walk
}

func (r methodRun) String() string {
	if r.walk == "" {
		return r.method.String()
	}
	return fmt.Sprintf("%s-%s", r.method, r.walk)
}

// everyMethod returns every method this kernel has, the BPF method on
// each of its walks.
func everyMethod(t *testing.T) []methodRun {
	t.Helper()
	var runs []methodRun
	if testenv.Feature(t, testenv.KernelAtLeast(5, 12), "5.12", "iter/task_vma, for the BPF method") {
		runs = append(runs, methodRun{synth.MethodBPF, synth.WalkIter})
		if w, _ := autoWalk(t); w == synth.WalkMaple {
			runs = append(runs, methodRun{synth.MethodBPF, synth.WalkMaple})
		}
	}
	for _, m := range procMethods(t) {
		runs = append(runs, methodRun{method: m})
	}
	return runs
}

// execText returns the first executable mapping of its executable that
// task id (/proc/ID, a thread's id too) shows.
func execText(t *testing.T, id int) procfs.Mapping {
	t.Helper()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", id))
	if err != nil {
		t.Fatal(err)
	}
	maps, err := procfs.ReadMaps(id)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range maps {
		if m.Path == exe && m.Prot&unix.PROT_EXEC != 0 {
			return m
		}
	}
	t.Fatalf("task %d maps no text of %s", id, exe)
	return procfs.Mapping{}
}

// taskRec is a thread record of a dump: its type and thread.
type taskRec struct {
	typ perfdata.RecordType
	tid uint32
}

// dumpWithSamples writes one dump of method to file as perf.data, then a
// sample at ip of each thread tids of process pid, and returns the dump's
// thread records of pid, in order.
func dumpWithSamples(t *testing.T, file string, method synth.MethodName, opts synth.MethodOptions, pid int, tids []int, ip uint64) []taskRec {
	t.Helper()
	m, err := synth.OpenMethod(method, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	// The dump's attr, as cpu-clock with addresses (the trailers do not
	// change): perf script prints no address of a dummy event's samples.
	attrs := slices.Clone(m.Attrs())
	a := &attrs[0]
	a.Attr.Type, a.Attr.Config, a.Name = unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CPU_CLOCK, "cpu-clock"
	a.Attr.SampleType |= perfdata.SampleIP
	var id uint64
	if len(a.IDs) > 0 {
		id = a.IDs[0]
	}
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := perfdata.NewWriter(f, perfdata.WriterOptions{Attrs: attrs,
		Features: append(perfhost.WithClock(nil, attrs), perfhost.Features([]string{"synth.test"})...)})
	if err != nil {
		t.Fatal(err)
	}
	var order []taskRec
	_, err = m.Dump(context.Background(), func(rec []byte) error {
		v := perfdata.RecordView(rec)
		switch v.Type() {
		case perfdata.RecordFork, perfdata.RecordComm, perfdata.RecordNamespaces:
			if v.Pid() == uint32(pid) {
				order = append(order, taskRec{v.Type(), v.Tid()})
			}
		}
		return w.WriteRecord(rec)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.EndInit(); err != nil {
		t.Fatal(err)
	}
	for i, tid := range tids {
		s := perfdata.Sample{Misc: perfdata.MiscUser, Identifier: id, ID: id, IP: ip,
			Pid: uint32(pid), Tid: uint32(tid), Time: uint64(i + 1), Period: 1}
		if err := w.WriteRecord(s.Append(nil, &a.Attr)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return order
}

// checkLeaderFirst checks the thread records of process pid: its
// leader's FORK first, the leader's records before any other thread's,
// and a FORK and a COMM of each of tids.
func checkLeaderFirst(t *testing.T, order []taskRec, pid int, tids []int) {
	t.Helper()
	if len(order) == 0 || order[0].typ != perfdata.RecordFork || order[0].tid != uint32(pid) {
		t.Errorf("pid %d: thread records %v; want its leader's FORK first", pid, order)
		return
	}
	other := false
	for _, r := range order {
		if r.tid != uint32(pid) {
			other = true
		} else if other {
			t.Errorf("pid %d: thread records %v: the leader's after another thread's", pid, order)
			return
		}
	}
	for _, tid := range append([]int{pid}, tids...) {
		for _, typ := range []perfdata.RecordType{perfdata.RecordFork, perfdata.RecordComm} {
			if !slices.Contains(order, taskRec{typ, uint32(tid)}) {
				t.Errorf("pid %d: thread records %v: no %v of %d", pid, order, typ, tid)
			}
		}
	}
}

// checkResolved checks that perf script's output (-F tid,ip,dso) has
// one sample of each of tids, in the file exe.
func checkResolved(t *testing.T, out string, tids []int, exe string) {
	t.Helper()
	got := map[int]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		tid, err := strconv.Atoi(f[0])
		if err == nil {
			got[tid] = strings.Join(f[2:], " ")
		}
	}
	for _, tid := range tids {
		if want := "(" + exe + ")"; got[tid] != want {
			t.Errorf("perf script: the sample of thread %d is in %q; want %q\n%s", tid, got[tid], want, out)
		}
	}
}

// A Session's stream carries a dump's thread records in the method's
// order: the leader's first, for a process whose threads have tids below
// its pid, on both walks and for the host and -p; and a Table built from
// it resolves the process's text and names it by its leader.
func TestSessionThreadsBelowLeader(t *testing.T) {
	testenv.Root(t)
	p, tids := testproc.StartWrapped(t, testproc.Spec{}, 2)
	text := execText(t, p.Pid)
	for _, r := range everyMethod(t) {
		if r.method != synth.MethodBPF {
			continue // a Session runs the BPF method
		}
		for _, tg := range []struct {
			name   string
			target synth.Target
		}{{"host", synth.Target{}}, {"pid", synth.Target{Pids: []int{p.Pid}}}} {
			t.Run(r.String()+"/"+tg.name, func(t *testing.T) {
				s := openSession(t, synth.SessionOptions{Options: synth.Options{NoBuildID: true, NoKernel: true,
					Target: tg.target, Walk: r.walk}})
				if err := s.Dump(t.Context()); err != nil {
					t.Fatal(err)
				}
				tab := synth.NewTable()
				var order []taskRec
				var rec synth.Record
				for rec.Kind != synth.KindDumpEnd {
					if err := s.Read(&rec); err != nil {
						t.Fatal(err)
					}
					if err := tab.Apply(&rec); err != nil {
						t.Fatal(err)
					}
					switch rec.Type() {
					case perfdata.RecordFork, perfdata.RecordComm, perfdata.RecordNamespaces:
						if v := perfdata.RecordView(rec.Raw); rec.Kind == synth.KindSynthesized && v.Pid() == uint32(p.Pid) {
							order = append(order, taskRec{v.Type(), v.Tid()})
						}
					}
				}
				checkLeaderFirst(t, order, p.Pid, tids)
				loc, ok := tab.Resolve(uint32(p.Pid), text.Start+16)
				if proc, _ := tab.Process(uint32(p.Pid)); !ok || loc.Mapping.Path != text.Path || proc == nil || proc.Comm != "synth.test" {
					t.Errorf("table: pid %d: %+v, %v at %#x; process %+v", p.Pid, loc, ok, text.Start+16, proc)
				}
			})
		}
	}
}

// A Table gives the same answer whatever the order of a dump's thread
// records: a thread's FORK before its leader's (a tid below the pid, as
// the dumps wrote them before they put the leader first) changes
// nothing, unlike in perf, where it leaves the thread without maps.
func TestTableThreadOrder(t *testing.T) {
	st := uint64(synth.DefaultSampleType)
	fork := func(tid, ppid uint32) []byte {
		f := perfdata.Fork{Misc: perfdata.MiscForkExec, Pid: 900, Ppid: ppid, Tid: tid, Ptid: ppid}
		return f.Append(nil, st, &perfdata.SampleID{Pid: 900, Tid: tid})
	}
	comm := func(tid uint32, name string) []byte {
		c := perfdata.Comm{Pid: 900, Tid: tid, Comm: name}
		return c.Append(nil, st, &perfdata.SampleID{Pid: 900, Tid: tid})
	}
	m := perfdata.Mmap2{Misc: perfdata.MiscUser, Pid: 900, Tid: 900, Addr: 0x400000, Len: 0x1000,
		Prot: unix.PROT_READ | unix.PROT_EXEC, Filename: "/bin/spin"}
	mmap := m.Append(nil, st, &perfdata.SampleID{Pid: 900, Tid: 900})
	leader := [][]byte{fork(900, 1), comm(900, "spin")}
	thread := [][]byte{fork(400, 900), comm(400, "worker")}
	var got []string
	for _, recs := range [][][]byte{
		slices.Concat(leader, thread, [][]byte{mmap}),
		slices.Concat(thread, leader, [][]byte{mmap}),
	} {
		tab := synth.NewTable()
		for _, raw := range recs {
			if err := tab.Apply(&synth.Record{Kind: synth.KindSynthesized, Gen: 1, Raw: raw}); err != nil {
				t.Fatal(err)
			}
		}
		if err := tab.Apply(&synth.Record{Kind: synth.KindDumpEnd, Gen: 1}); err != nil {
			t.Fatal(err)
		}
		loc, ok := tab.Resolve(900, 0x400010)
		p, _ := tab.Process(900)
		got = append(got, fmt.Sprintf("%v %s %+v", ok, loc.Mapping.Path, p))
	}
	if got[0] != got[1] || !strings.HasPrefix(got[0], "true /bin/spin &{Pid:900 Comm:spin ") {
		t.Errorf("leader first: %s\nthread first: %s", got[0], got[1])
	}
}
