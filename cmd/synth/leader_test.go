package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
)

// synth record, with every kind of target, and synth inject write a
// process's leader FORK and COMM before its other threads', as perf
// reads the file, for a process whose threads have tids below its pid;
// with -t of such a thread, the leader's too.
func TestRecordThreadsBelowLeader(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	p, tids := testproc.StartWrapped(t, testproc.Spec{}, 2)
	pid, low := strconv.Itoa(p.Pid), strconv.Itoa(tids[0])
	for _, c := range []struct {
		name string
		args []string
	}{
		{"record-a", []string{"record", "-q", "-a"}},
		{"record-p", []string{"record", "-q", "-p", pid}},
		{"record-t", []string{"record", "-q", "-t", low}},
		{"inject-a", nil},
		{"inject-p", []string{"-p", pid}},
	} {
		t.Run(c.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "perf.data")
			var r result
			if c.args == nil || c.args[0] != "record" {
				rec := append([]string{"--synth=no", "-k", "CLOCK_MONOTONIC", "-e", "dummy"}, c.args...)
				if c.args == nil {
					rec = append(rec, "-a")
				}
				r = injectPipe(t, perf, rec, []string{"-o", file}, nil)
			} else {
				r = runCmd(t, exec.Command(synthBin, append(c.args, "-o", file, "--", "true")...))
			}
			if r.code != 0 {
				t.Fatalf("synth %s: exit %d: %s", c.name, r.code, r.stderr)
			}
			script := exec.Command(perf, "script", "--show-task-events", "-i", file)
			script.Env = perfEnv(t)
			sr := runCmd(t, script)
			// Only the order is this test's: perf may warn of what
			// other programs on the host did meanwhile (the kernel
			// grows KSYMBOL and BPF_EVENT records per listener).
			if sr.code != 0 {
				t.Fatalf("perf script: exit %d: %s", sr.code, sr.stderr)
			}
			if sr.stderr != "" {
				t.Logf("perf script: %s", sr.stderr)
			}
			checkTaskOrder(t, sr.stdout, p.Pid, tids[0])
		})
	}
}

// checkTaskOrder checks perf script's task events of process pid: its
// first FORK is its leader's, its leader's COMM comes before any other
// thread's, and thread tid has a FORK.
func checkTaskOrder(t *testing.T, out string, pid, tid int) {
	t.Helper()
	re := regexp.MustCompile(fmt.Sprintf(`PERF_RECORD_(FORK\(%d:(\d+)\)|COMM: .*:%d/(\d+))`, pid, pid))
	var order []string
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		order = append(order, m[0])
	}
	fork := func(id int) string { return fmt.Sprintf("PERF_RECORD_FORK(%d:%d)", pid, id) }
	i := slices.Index(order, fork(pid))
	if len(order) == 0 || i != 0 {
		t.Fatalf("pid %d: task events %q; want its leader's FORK first", pid, order)
	}
	if slices.Index(order, fork(tid)) < 0 {
		t.Errorf("pid %d: task events %q; no FORK of thread %d", pid, order, tid)
	}
	for j, ev := range order {
		if re.FindStringSubmatch(ev)[3] == strconv.Itoa(pid) {
			break // the leader's COMM
		}
		if ev != fork(pid) {
			t.Errorf("pid %d: task events %q: %s before the leader's COMM", pid, order, order[j])
			break
		}
	}
}
