package synth_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/elfnote"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/synth"
)

// recordsOf dumps pid with a method and returns its records as text:
// one line per COMM, FORK and MMAP2, sorted, the inode generation left
// out (/proc does not show it).
func recordsOf(t *testing.T, method string, opts synth.Options, threads int) []string {
	t.Helper()
	m, _, err := synth.OpenMethod(method, opts, threads)
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
	if err := os.WriteFile(good, elfnote.Crafted()["good"], 0o644); err != nil {
		t.Fatal(err)
	}
	spec := everything
	spec.Maps = []testproc.MapSpec{{Path: good}}
	p := testproc.StartT(t, spec)
	q := testproc.StartT(t, testproc.Spec{Threads: []string{"other"}})
	for _, data := range []bool{false, true} {
		opts := synth.Options{Pids: []int{p.Pid, q.Pid}, Data: data, NoKernel: true, NoBuildID: true}
		want := recordsOf(t, synth.MethodBPF, opts, 0)
		for _, m := range []struct {
			name    string
			threads int
		}{{synth.MethodProcmaps, 1}, {synth.MethodProcmaps, 2}, {synth.MethodProcquery, 2}} {
			got := recordsOf(t, m.name, opts, m.threads)
			if d := diffLines(want, got); d != "" {
				t.Errorf("data=%v: %s-%d differs from bpf:\n%s", data, m.name, m.threads, d)
			}
		}
	}
	// Build IDs: only bpf and procquery provide them.
	opts := synth.Options{Pids: []int{p.Pid}, Data: true, NoKernel: true}
	bpf, pq := recordsOf(t, synth.MethodBPF, opts, 0), recordsOf(t, synth.MethodProcquery, opts, 1)
	if d := diffLines(bpf, pq); d != "" {
		t.Errorf("with build ids, procquery differs from bpf:\n%s", d)
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
