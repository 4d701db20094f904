package synth_test

import (
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

	"github.com/synth-dev/synth/internal/elfnote/elftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/synth"
)

// recordsOf dumps pid with a method and returns its records as text:
// one line per COMM, FORK and MMAP2, sorted, the inode generation left
// out (/proc does not show it).
func recordsOf(t *testing.T, method string, opts synth.Options, threads int) []string {
	t.Helper()
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
		name    string
		threads int
	}
	methods := []method{{synth.MethodProcmaps, 1}, {synth.MethodProcmaps, 2}}
	pq := haveProcquery(t)
	if pq {
		methods = append(methods, method{synth.MethodProcquery, 2})
	}
	for _, data := range []bool{false, true} {
		opts := synth.Options{Pids: []int{p.Pid, q.Pid}, Data: data, NoKernel: true, NoBuildID: true}
		want := recordsOf(t, synth.MethodBPF, opts, 0)
		for _, m := range methods {
			got := recordsOf(t, m.name, opts, m.threads)
			if d := diffLines(want, got); d != "" {
				t.Errorf("data=%v: %s-%d differs from bpf:\n%s", data, m.name, m.threads, d)
			}
		}
	}
	// With build IDs, every method gives the same records too.
	opts := synth.Options{Pids: []int{p.Pid, q.Pid}, Data: true, NoKernel: true}
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
	opts := synth.Options{Pids: pids, NoKernel: true, NoBuildID: true}
	oracle := recordsOf(t, synth.MethodProcmaps, opts, 1)
	for pid, exe := range want {
		if !slices.ContainsFunc(oracle, func(l string) bool {
			return strings.HasPrefix(l, fmt.Sprintf("mmap2 %d ", pid)) && strings.Contains(l, strconv.Quote(exe))
		}) {
			t.Fatalf("/proc/%d/maps does not name %s", pid, exe)
		}
	}
	for _, m := range []struct {
		name    string
		threads int
	}{{synth.MethodProcquery, 1}, {synth.MethodProcquery, 2}, {synth.MethodBPF, 0}} {
		got := recordsOf(t, m.name, opts, m.threads)
		if d := diffLines(oracle, got); d != "" {
			t.Errorf("%s-%d differs from procmaps:\n%s", m.name, m.threads, d)
		}
	}
}
