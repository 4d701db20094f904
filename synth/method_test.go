package synth_test

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/elfnote/elftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// recordsOf dumps pid with a method and returns its records as text:
// one line per COMM, FORK and MMAP2, sorted, the inode generation left
// out (/proc does not show it).
func recordsOf(t *testing.T, method synth.MethodName, opts synth.Options, threads int) []string {
	t.Helper()
	// Not a test of the bound on a process's read: under emulation, on
	// a loaded host, a read of a process of 5,000 VMAs took longer than
	// perf's 500 ms, and the process was left out (7.3.4 under TCG).
	if opts.ProcMapTimeout == 0 {
		opts.ProcMapTimeout = time.Minute
	}
	m, err := synth.OpenMethod(method, synth.MethodOptions{Options: opts, Threads: threads})
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer m.Close()
	d := &dumped{comms: map[uint32]string{}, forks: map[uint32]uint32{}}
	st, err := m.Dump(context.Background(), func(rec []byte) error { return d.add(rec, synth.DefaultSampleType) })
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	if st.Method != method {
		t.Errorf("stats say method %q, want %q", st.Method, method)
	}
	if len(st.LockedOut) > 0 {
		t.Errorf("%s: processes left out, their mmap lock not taken within %v: %v", method, opts.ProcMapTimeout, st.LockedOut)
	}
	var lines []string
	for _, k := range d.maps {
		lines = append(lines, "mmap2 "+k.String())
	}
	for tid, comm := range d.comms {
		lines = append(lines, fmt.Sprintf("comm %d %q", tid, comm))
	}
	for tid, pid := range d.forks {
		lines = append(lines, fmt.Sprintf("fork %d %d", pid, tid))
	}
	slices.Sort(lines)
	return lines
}

// The three methods produce the same records for the same stable
// processes; bpf and procquery agree on build IDs too.
func TestMethodsAgree(t *testing.T) {
	testenv.Root(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.so")
	if err := os.WriteFile(good, elftest.Crafted()["good"], 0o644); err != nil {
		t.Fatal(err)
	}
	spec := everything
	spec.Maps = []testproc.MapSpec{{Path: good}}
	p := testproc.StartT(t, spec)
	// q maps the same file: procquery names it and reads its build ID
	// once, for p, and q gets both from its caches.
	q := testproc.StartT(t, testproc.Spec{Threads: []string{"other"}, Maps: []testproc.MapSpec{{Path: good}}})
	type method struct {
		name    synth.MethodName
		threads int
	}
	methods := []method{{synth.MethodProcmaps, 1}, {synth.MethodProcmaps, 2}}
	pq := haveProcquery(t)
	if pq {
		methods = append(methods, method{synth.MethodProcquery, 2})
	}
	for _, data := range []bool{false, true} {
		opts := synth.Options{Target: synth.Target{Pids: []int{p.Pid, q.Pid}}, Data: data, NoKernel: true, NoBuildID: true}
		want := recordsOf(t, synth.MethodBPF, opts, 0)
		for _, m := range methods {
			got := recordsOf(t, m.name, opts, m.threads)
			if d := diffLines(want, got); d != "" {
				t.Errorf("data=%v: %s-%d differs from bpf:\n%s", data, m.name, m.threads, d)
			}
		}
	}
	// With build IDs, every method gives the same records too.
	opts := synth.Options{Target: synth.Target{Pids: []int{p.Pid, q.Pid}}, Data: true, NoKernel: true}
	bpf := recordsOf(t, synth.MethodBPF, opts, 0)
	for _, m := range methods {
		got := recordsOf(t, m.name, opts, m.threads)
		if d := diffLines(bpf, got); d != "" {
			t.Errorf("with build ids, %s-%d differs from bpf:\n%s", m.name, m.threads, d)
		}
	}
	if !slices.ContainsFunc(bpf, func(l string) bool { return strings.Contains(l, "deadbeef") }) {
		t.Error("no build id on the crafted file's mapping")
	}
}

func diffLines(want, got []string) string {
	var b strings.Builder
	w, g := map[string]bool{}, map[string]bool{}
	for _, l := range want {
		w[l] = true
	}
	for _, l := range got {
		g[l] = true
	}
	n := 0
	for _, l := range want {
		if !g[l] && n < 10 {
			fmt.Fprintf(&b, "missing: %s\n", l)
			n++
		}
	}
	for _, l := range got {
		if !w[l] && n < 20 {
			fmt.Fprintf(&b, "extra: %s\n", l)
			n++
		}
	}
	if len(want) != len(got) && n == 0 {
		fmt.Fprintf(&b, "%d lines, want %d (duplicates)\n", len(got), len(want))
	}
	return b.String()
}

// procquery names a file once per mount namespace: the same file, run
// through a bind mount that only another namespace has, keeps the path
// that namespace maps it by, as /proc/PID/maps shows; so does bpf.
func TestProcqueryNamesPerMountNS(t *testing.T) {
	testenv.Root(t)
	needProcquery(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	prog, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(a, "sleep"), prog, 0o755); err != nil {
		t.Fatal(err)
	}
	want := map[int]string{
		testproc.StartSleep(t, "a/sleep", exec.Command(filepath.Join(a, "sleep"), "600")): filepath.Join(a, "sleep"),
		testproc.StartSleep(t, "b/sleep", exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
			`mount --bind "$1" "$2" && exec "$2/sleep" 600`, "sh", a, b)): filepath.Join(b, "sleep"),
	}
	pids := slices.Collect(maps.Keys(want))
	opts := synth.Options{Target: synth.Target{Pids: pids}, NoKernel: true, NoBuildID: true}
	oracle := recordsOf(t, synth.MethodProcmaps, opts, 1)
	for pid, exe := range want {
		if !slices.ContainsFunc(oracle, func(l string) bool {
			return strings.HasPrefix(l, fmt.Sprintf("mmap2 %d ", pid)) && strings.Contains(l, strconv.Quote(exe))
		}) {
			t.Fatalf("/proc/%d/maps does not name %s", pid, exe)
		}
	}
	for _, m := range []struct {
		name    synth.MethodName
		threads int
	}{{synth.MethodProcquery, 1}, {synth.MethodProcquery, 2}, {synth.MethodBPF, 0}} {
		got := recordsOf(t, m.name, opts, m.threads)
		if d := diffLines(oracle, got); d != "" {
			t.Errorf("%s-%d differs from procmaps:\n%s", m.name, m.threads, d)
		}
	}
}

// Each method returns, with its stats, the header tables of the records
// it emitted: a build ID for every file whose MMAP2 record carries one,
// the kernel's unless NoKernel, none with NoBuildID, and a program for
// every PROG_LOAD written.
func TestMethodTables(t *testing.T) {
	testenv.Root(t)
	good := filepath.Join(t.TempDir(), "good.so")
	if err := os.WriteFile(good, elftest.Crafted()["good"], 0o644); err != nil {
		t.Fatal(err)
	}
	p := testproc.StartT(t, testproc.Spec{Maps: []testproc.MapSpec{{Path: good}}})
	methods := []synth.MethodName{synth.MethodBPF, synth.MethodProcmaps}
	if haveProcquery(t) {
		methods = append(methods, synth.MethodProcquery)
	}
	for _, name := range methods {
		for _, noBuildID := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/nobuildid=%v", name, noBuildID), func(t *testing.T) {
				m, err := synth.OpenMethod(name, synth.MethodOptions{Options: synth.Options{Target: synth.Target{Pids: []int{p.Pid}}, NoBuildID: noBuildID}})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				files := map[string][]byte{} // what the MMAP2 records carry
				var loads []uint32
				st, err := m.Dump(context.Background(), func(rec []byte) error {
					switch perfdata.RecordView(rec).Type() {
					case perfdata.RecordMmap2:
						if mm := perfdata.Mmap2View(rec); mm.HasBuildID() {
							files[string(mm.Filename())] = slices.Clone(mm.BuildID())
						}
					case perfdata.RecordBPFEvent:
						if ev := perfdata.BPFEventView(rec); ev.EventType() == perfdata.BPFEventProgLoad {
							loads = append(loads, ev.ID())
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				checkTables(t, st.Tables, files, loads, noBuildID)
			})
		}
	}
}

func checkTables(t *testing.T, tab perfdata.Tables, files map[string][]byte, loads []uint32, noBuildID bool) {
	t.Helper()
	if noBuildID {
		if len(tab.BuildIDs) != 0 || len(files) != 0 {
			t.Errorf("NoBuildID: %d build IDs in the tables, %d in the records", len(tab.BuildIDs), len(files))
		}
	} else {
		got := map[string][]byte{}
		kernel := false
		for _, e := range tab.BuildIDs {
			switch {
			case e.Filename == "[kernel.kallsyms]":
				kernel = e.Misc == perfdata.MiscKernel && len(e.BuildID) > 0
			case e.Misc == perfdata.MiscUser && e.Filename != "[vdso]":
				got[e.Filename] = e.BuildID
			}
		}
		if !maps.EqualFunc(got, files, bytes.Equal) {
			t.Errorf("build IDs of the tables %x,\nof the records %x", got, files)
		}
		if !bytes.Equal(files[goodName(files)], elftest.GoodID) {
			t.Errorf("the crafted file's build ID is not %x: %x", elftest.GoodID, files)
		}
		if _, err := os.Stat("/sys/kernel/notes"); err == nil && !kernel {
			t.Errorf("no kernel build ID in the tables: %+v", tab.BuildIDs)
		}
	}
	var progs []uint32
	for _, pr := range tab.BPFProgs {
		progs = append(progs, pr.ID)
		if len(pr.Info) == 0 {
			t.Errorf("program %d: empty perf_bpil entry", pr.ID)
		}
	}
	slices.Sort(loads)
	t.Logf("%d build IDs, %d programs", len(tab.BuildIDs), len(progs))
	if !slices.Equal(progs, loads) {
		t.Errorf("programs of the tables %v, PROG_LOAD records %v", progs, loads)
	}
}

// goodName returns the name under which the records carry good.so.
func goodName(files map[string][]byte) string {
	for name := range files {
		if filepath.Base(name) == "good.so" {
			return name
		}
	}
	return ""
}

// Method.Walk says before a dump what each dump's Stats say after it:
// the BPF method's walk, and why not the maple walk where it chose the
// iterator; nothing for the /proc methods.
func TestMethodWalk(t *testing.T) {
	testenv.Root(t)
	for _, walk := range []synth.Walk{synth.WalkAuto, synth.WalkIter} {
		opts := synth.MethodOptions{Options: synth.Options{Target: synth.Target{Pids: []int{os.Getpid()}}, NoKernel: true, Walk: walk}}
		m, err := synth.OpenMethod(synth.MethodBPF, opts)
		if err != nil {
			t.Fatal(err)
		}
		got, why := m.Walk()
		st, err := m.Dump(context.Background(), func([]byte) error { return nil })
		m.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got != st.Walk || fmt.Sprint(why) != fmt.Sprint(st.WalkFallback) {
			t.Errorf("Options.Walk %q: Walk() = %q, %v; the dump's stats %q, %v", walk, got, why, st.Walk, st.WalkFallback)
		}
		if walk == synth.WalkIter && got != synth.WalkIter {
			t.Errorf("Options.Walk %q: Walk() = %q", walk, got)
		}
	}
	m, err := synth.OpenMethod(synth.MethodProcmaps, synth.MethodOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if got, why := m.Walk(); got != "" || why != nil {
		t.Errorf("procmaps: Walk() = %q, %v, want \"\", nil", got, why)
	}
}
