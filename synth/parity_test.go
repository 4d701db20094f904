package synth_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/synth-dev/synth/internal/perftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// taskKey names a thread record: its type and thread.
type taskKey struct {
	typ perfdata.RecordType
	tid uint32
}

// perfRecords reads the records of a perf.data without their trailers:
// the thread records (FORK, NAMESPACES, COMM) of the processes pids, by
// type and thread, and the CGROUP records in file order.
func perfRecords(t *testing.T, path string, pids map[uint32]bool) (map[taskKey][]byte, [][]byte) {
	t.Helper()
	tasks := make(map[taskKey][]byte)
	var cgroups [][]byte
	for _, rec := range perftest.ReadRecords(t, path) {
		switch rec.Type {
		case perfdata.RecordCgroup:
			cgroups = append(cgroups, untrailed(rec))
		case perfdata.RecordFork, perfdata.RecordComm, perfdata.RecordNamespaces:
			b := untrailed(rec)
			if !pids[binary.NativeEndian.Uint32(b[8:])] {
				continue
			}
			tid := binary.NativeEndian.Uint32(b[12:])
			if rec.Type == perfdata.RecordFork {
				tid = binary.NativeEndian.Uint32(b[16:])
			}
			k := taskKey{rec.Type, tid}
			if _, dup := tasks[k]; dup {
				t.Errorf("%s: two records of type %d for thread %d", path, k.typ, k.tid)
			}
			tasks[k] = b
		}
	}
	return tasks, cgroups
}

// FORK, NAMESPACES, COMM and CGROUP records equal perf's own, field by
// field (all but the sample_id trailer, which perf leaves zero and synth
// fills with the record's pid and tid), for a process with named threads
// and a child of the test: perf record -a --namespaces --all-cgroups
// against WritePerfData with Options.Namespaces and Cgroups, with each
// method and both walks.
func TestTaskRecordsMatchPerf(t *testing.T) {
	testenv.Root(t)
	testenv.Perf(t)
	p := testproc.StartT(t, testproc.Spec{Threads: []string{"parity-a", "parity-b"}})
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { child.Process.Kill(); child.Wait() })
	pids := map[uint32]bool{uint32(p.Pid): true, uint32(child.Process.Pid): true}
	dir := t.TempDir()

	perfOut := filepath.Join(dir, "perf.data")
	perftest.RecordHost(t, perfOut, "--namespaces", "--all-cgroups")
	want, wantCgroups := perfRecords(t, perfOut, pids)
	comms, err := p.Comms()
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 3*(len(comms)+1) || len(wantCgroups) == 0 {
		t.Fatalf("perf wrote %d thread records for %d threads, %d cgroups", len(want), len(comms)+1, len(wantCgroups))
	}
	// bpf-iter: the task_vma iterator's walk, whose dump_task program
	// writes the task records instead of dump_tasks.
	for _, m := range []struct {
		name   string
		method synth.MethodName
		walk   synth.Walk
	}{
		{"bpf", synth.MethodBPF, ""},
		{"bpf-iter", synth.MethodBPF, synth.WalkIter},
		{"procmaps", synth.MethodProcmaps, ""},
		{"procquery", synth.MethodProcquery, ""},
	} {
		t.Run(m.name, func(t *testing.T) {
			out := filepath.Join(dir, m.name+".data")
			writeDump(t, out, m.method, synth.MethodOptions{Options: synth.Options{Namespaces: true, Cgroups: true, Walk: m.walk}})
			got, gotCgroups := perfRecords(t, out, pids)
			for k, w := range want {
				g, ok := got[k]
				switch {
				case !ok:
					t.Errorf("no %s of thread %d; perf's is %x", recName(k.typ), k.tid, w)
				case !bytes.Equal(g, w):
					t.Errorf("%s of thread %d:\n synth %x\n perf  %x", recName(k.typ), k.tid, g, w)
				}
			}
			for k := range got {
				if _, ok := want[k]; !ok {
					// A thread the Go runtime started after perf ran.
					t.Logf("%s of thread %d, which perf did not see", recName(k.typ), k.tid)
				}
			}
			if fmt.Sprintf("%x", gotCgroups) != fmt.Sprintf("%x", wantCgroups) {
				t.Errorf("cgroups:\n synth %x\n perf  %x", gotCgroups, wantCgroups)
			}
		})
	}
	// The child's FORK names the test as its parent.
	k := taskKey{perfdata.RecordFork, uint32(child.Process.Pid)}
	if ppid := binary.NativeEndian.Uint32(want[k][12:]); ppid != uint32(os.Getpid()) {
		t.Errorf("perf's FORK of the child names parent %d, want %d", ppid, os.Getpid())
	}
}

func recName(typ perfdata.RecordType) string {
	switch typ {
	case perfdata.RecordFork:
		return "FORK"
	case perfdata.RecordComm:
		return "COMM"
	case perfdata.RecordNamespaces:
		return "NAMESPACES"
	}
	return strconv.Itoa(int(typ))
}
