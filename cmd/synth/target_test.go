package main

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/perftest"
	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/perfdata"
)

// dumpTasks dumps with args and returns the processes with records and
// the threads with a COMM, from the file.
func dumpTasks(t *testing.T, args ...string) (procs, threads []int) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "perf.data")
	r := runCmd(t, exec.Command(synthBin, append(append([]string{"dump", "--no-kernel"}, args...), "-o", out)...))
	if r.code != 0 {
		t.Fatalf("dump %v: exit %d\n%s", args, r.code, r.stderr)
	}
	for _, rec := range perftest.ReadRecords(t, out) {
		switch rec.Type {
		case perfdata.RecordComm:
			c, _, err := perfdata.ParseComm(rec.Data, rec.SampleType)
			if err != nil {
				t.Fatal(err)
			}
			threads = append(threads, int(c.Tid))
			fallthrough
		case perfdata.RecordMmap2:
			pid := int(le32(rec.Data[8:]))
			if !slices.Contains(procs, pid) {
				procs = append(procs, pid)
			}
		}
	}
	slices.Sort(procs)
	slices.Sort(threads)
	return procs, threads
}

// -t dumps the thread's process with the records of that thread and of
// its leader, as perf -t writes them.
func TestTargetTid(t *testing.T) {
	testenv.Root(t)
	p := testproc.StartT(t, testproc.Spec{Threads: []string{"target-t"}})
	comms, err := p.Comms()
	if err != nil {
		t.Fatal(err)
	}
	var tid int
	for id, name := range comms {
		if name == "target-t" {
			tid = id
		}
	}
	procs, threads := dumpTasks(t, "-t", strconv.Itoa(tid))
	want := []int{p.Pid, tid} // the same where the runtime ran the thread's goroutine on the leader
	slices.Sort(want)
	want = slices.Compact(want)
	if !slices.Equal(procs, []int{p.Pid}) || !slices.Equal(threads, want) {
		t.Errorf("-t %d: processes %v, threads %v; want [%d] and %v", tid, procs, threads, p.Pid, want)
	}
}

// -u dumps the processes of a user; -G those of a cgroup and below it.
func TestTargetUserAndCgroup(t *testing.T) {
	testenv.Root(t)
	cg, err := procfs.FindCgroupFS()
	if err != nil {
		t.Fatal(err)
	}
	name := "synth-test-" + strconv.Itoa(os.Getpid())
	dir := filepath.Join(cg.Mount, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	// Two processes of user 65534, one of them in the cgroup's child.
	var pids []int
	for range 2 {
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		pids = append(pids, cmd.Process.Pid)
	}
	t.Cleanup(func() { os.Remove(sub); os.Remove(dir) })
	t.Cleanup(func() { // back to the root before the directories go
		for _, pid := range pids {
			os.WriteFile(filepath.Join(cg.Mount, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0)
		}
	})
	if err := os.WriteFile(filepath.Join(sub, "cgroup.procs"), []byte(strconv.Itoa(pids[1])), 0); err != nil {
		t.Fatal(err)
	}
	waitExec(t, pids, "sleep")
	procs, _ := dumpTasks(t, "-G", "/"+name)
	if !slices.Equal(procs, pids[1:]) {
		t.Errorf("-G /%s: processes %v, want %v", name, procs, pids[1:])
	}
	procs, _ = dumpTasks(t, "-u", "65534")
	for _, pid := range pids {
		if !slices.Contains(procs, pid) {
			t.Errorf("-u 65534: processes %v lack %d", procs, pid)
		}
	}
	for _, pid := range procs {
		if owner, err := procfs.Owner(pid); err == nil && owner != 65534 {
			t.Errorf("-u 65534: process %d of user %d", pid, owner)
		}
	}
}

func le32(b []byte) uint32 { return binary.NativeEndian.Uint32(b) }

// waitExec waits until each process runs comm (any, for ""): the exec
// is done.
func waitExec(t *testing.T, pids []int, comm string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
			if c := strings.TrimSpace(string(b)); c == comm || comm == "" && c != "" && c != "synth.test" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("process %d does not run %s", pid, comm)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// record -G samples with a cgroup event: the spinner moved into the
// cgroup is sampled, the one outside is not.
func TestRecordCgroup(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	var pids []int
	for range 2 {
		cmd := exec.Command("sh", "-c", "while :; do :; done")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		pids = append(pids, cmd.Process.Pid)
	}
	name := testproc.InCgroup(t, pids[0])
	out := filepath.Join(t.TempDir(), "perf.data")
	r := interruptAfter(t, 1500*time.Millisecond, exec.Command(synthBin, "record", "-G", name, "-F", "999", "-o", out))
	checkRecordSummary(t, r)
	cmd := exec.Command(perf, "script", "-i", out, "-F", "pid")
	cmd.Env = perfEnv(t)
	rs := runCmd(t, cmd)
	if rs.code != 0 {
		t.Fatalf("perf script: exit %d: %s", rs.code, rs.stderr)
	}
	count := map[int]int{}
	for _, f := range strings.Fields(rs.stdout) {
		pid, _ := strconv.Atoi(f)
		count[pid]++
	}
	if count[pids[0]] < 100 || len(count) != 1 {
		t.Errorf("samples by process %v: want them all of %d, in the cgroup", count, pids[0])
	}
}
