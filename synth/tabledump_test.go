package synth_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// stuckBound is how long the tables' tests wait for a dump or a Flush
// before they call it stuck: far longer than one takes on a loaded host
// (seconds), so that only a dump that never ends fails by it.
const stuckBound = 2 * time.Minute

// dumpInto has s dump and applies the stream to tb up to the dump's end
// and then every live record the rings hold (flushInto), but those skip
// says to leave out.
func dumpInto(t *testing.T, s *synth.Session, tb *synth.Table, skip func(*synth.Record) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), stuckBound)
	defer cancel()
	if err := s.Dump(ctx); err != nil {
		t.Fatal(err)
	}
	var rec synth.Record
	for rec.Kind != synth.KindDumpEnd {
		if err := s.ReadContext(ctx, &rec); err != nil {
			t.Fatal(err)
		}
		if skip == nil || !skip(&rec) {
			if err := tb.Apply(&rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	flushInto(t, s, tb, skip)
}

// sameAsProc fails t unless the table holds process pid's executable
// mappings exactly as /proc/PID/maps shows them.
func sameAsProc(t *testing.T, what string, tb *synth.Table, pid int) {
	t.Helper()
	p, ok := tb.Process(uint32(pid))
	if !ok {
		t.Fatalf("%s: no process %d in the table", what, pid)
	}
	if got, want := tableKeys(p), procTableKeys(t, pid); !slices.Equal(got, want) {
		t.Errorf("%s: the table has\n%s\n/proc/%d/maps has\n%s", what, strings.Join(got, "\n"), pid, strings.Join(want, "\n"))
	}
}

// A dump replaces what the table held of each process it read: a
// mapping unmapped between two dumps, of which the stream says nothing,
// is gone after the second, though the next one lands elsewhere; and a
// mapping made and unmapped before a dump read the process, whose live
// record the stream returns after the dump's, does not come back.
func TestTableForgetsUnmapped(t *testing.T) {
	testenv.Root(t)
	dir := t.TempDir()
	p := testproc.StartT(t, testproc.Spec{Dir: dir})
	s, err := synth.NewSession(synth.SessionOptions{Options: synth.Options{Target: synth.Target{Pids: []int{p.Pid}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb := synth.NewTable()
	dumpInto(t, s, tb, nil)
	sameAsProc(t, "first dump", tb, p.Pid)
	page := os.Getpagesize()
	for i := range 4 {
		// Each file is larger than the hole the last one left: the
		// mappings move.
		path := filepath.Join(dir, "lib"+string(rune('a'+i))+".so")
		if err := os.WriteFile(path, make([]byte, (i+1)*4*page), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := p.Map(path); err != nil {
			t.Fatal(err)
		}
		dumpInto(t, s, tb, nil)
		sameAsProc(t, "after mapping "+path, tb, p.Pid)
		if err := p.Unmap(); err != nil {
			t.Fatal(err)
		}
	}
	dumpInto(t, s, tb, nil)
	sameAsProc(t, "after the last unmap", tb, p.Pid)

	// Mapped and unmapped before the dump: the live MMAP2 waits in the
	// ring, the dump does not see the mapping, and the stream returns the
	// live record after the dump's end, marked as read over.
	path := filepath.Join(dir, "brief.so")
	if err := os.WriteFile(path, make([]byte, 3*page), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.Map(path); err != nil {
		t.Fatal(err)
	}
	if err := p.Unmap(); err != nil {
		t.Fatal(err)
	}
	superseded := 0
	dumpInto(t, s, tb, func(rec *synth.Record) bool {
		if rec.Superseded && rec.Type() == perfdata.RecordMmap2 && strings.Contains(string(rec.Raw), "brief.so") {
			superseded++
		}
		return false
	})
	sameAsProc(t, "after a mapping made and unmapped before the dump", tb, p.Pid)
	if superseded != 1 {
		t.Errorf("%d live MMAP2 records of brief.so marked superseded, want 1", superseded)
	}
}

// A dump of every process removes from the table the processes it did
// not find: one that exited without its EXIT reaching the stream (left
// out here, as when a full ring drops it) is gone after the next dump.
func TestTableForgetsExited(t *testing.T) {
	testenv.Root(t)
	p := testproc.StartT(t, testproc.Spec{})
	s, err := synth.NewSession(synth.SessionOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb := synth.NewTable()
	dumpInto(t, s, tb, nil)
	sameAsProc(t, "first dump", tb, p.Pid)
	pid := p.Pid
	if err := p.Stop(); err != nil {
		t.Fatal(err)
	}
	lost := func(rec *synth.Record) bool {
		return rec.Type() == perfdata.RecordExit && perfdata.RecordView(rec.Raw).Pid() == uint32(pid)
	}
	dumpInto(t, s, tb, lost)
	if _, ok := tb.Process(uint32(pid)); ok {
		t.Errorf("process %d exited before the dump, and is still in the table", pid)
	}
	sameAsProc(t, "this test's process", tb, os.Getpid())
}

// dlopen and dlclose of real libraries: after each dump the table is
// /proc's, a closed library gone from it; and, where the session reports
// unmaps, after each step with no dump at all.
func TestTableDlclose(t *testing.T) {
	testenv.Root(t)
	_, err := exec.LookPath("gcc")
	testenv.Need(t, err == nil, "gcc")
	bin := filepath.Join(t.TempDir(), "dl")
	src, _ := filepath.Abs("../testdata/dlopen/dl.c")
	if out, err := exec.Command("gcc", "-O1", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	out := bufio.NewScanner(stdout)
	command := func(line string) {
		t.Helper()
		if line != "" {
			if _, err := stdin.Write([]byte(line + "\n")); err != nil {
				t.Fatal(err)
			}
		}
		if !out.Scan() || out.Text() != map[bool]string{true: "ready", false: "ok"}[line == ""] {
			t.Fatalf("dl %q: %q %v", line, out.Text(), out.Err())
		}
	}
	command("") // ready
	s, err := synth.NewSession(synth.SessionOptions{Options: synth.Options{Target: synth.Target{Pids: []int{cmd.Process.Pid}}}, Unmaps: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb := synth.NewTable()
	steps := []string{"open libm.so.6", "open libresolv.so.2", "close", "close", "open libresolv.so.2", "close"}
	for _, step := range steps {
		command(step)
		dumpInto(t, s, tb, nil)
		sameAsProc(t, "after "+step, tb, cmd.Process.Pid)
	}
	if err := s.UnmapsErr(); err != nil {
		t.Logf("no unmaps reported here, the table without dumps not checked: %v", err)
	} else {
		for _, step := range steps {
			command(step)
			flushInto(t, s, tb, nil)
			sameAsProc(t, "after "+step+", no dump", tb, cmd.Process.Pid)
		}
	}
	p, _ := tb.Process(uint32(cmd.Process.Pid))
	for _, m := range p.Mappings {
		if strings.Contains(m.Path, "libm.so") || strings.Contains(m.Path, "libresolv.so") {
			t.Errorf("closed library %s still in the table", m.Path)
		}
	}
}

// flushInto applies to tb every live record the rings hold (a Flush),
// without a dump, but those skip says to leave out.
func flushInto(t *testing.T, s *synth.Session, tb *synth.Table, skip func(*synth.Record) bool) {
	t.Helper()
	flushApply(t, s, func(rec *synth.Record) {
		if skip == nil || !skip(rec) {
			if err := tb.Apply(rec); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// unmapSession opens a session of pid that reports unmaps, or skips
// where the kernel cannot.
func unmapSession(t *testing.T, pid int) *synth.Session {
	t.Helper()
	s, err := synth.NewSession(synth.SessionOptions{Options: synth.Options{Target: synth.Target{Pids: []int{pid}}}, Unmaps: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	testenv.Option(t, s.UnmapsErr() == nil, "syscall tracepoints ("+fmt.Sprint(s.UnmapsErr())+")")
	return s
}

// With SessionOptions.Unmaps the table forgets a range as soon as the
// stream says it went, with no dump between: munmap(2), mremap(2)
// moving a mapping or shrinking it in place, and mprotect(2) taking
// PROT_EXEC away. And an unmap the kernel
// reported before the dump read the process does not take away what the
// dump found mapped at the same place since.
func TestTableUnmapsLive(t *testing.T) {
	testenv.Root(t)
	dir := t.TempDir()
	p := testproc.StartT(t, testproc.Spec{Dir: dir})
	s := unmapSession(t, p.Pid)
	tb := synth.NewTable()
	dumpInto(t, s, tb, nil)
	sameAsProc(t, "first dump", tb, p.Pid)
	page := os.Getpagesize()
	lib := func(name string, pages int) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, make([]byte, pages*page), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	steps := []struct {
		what string
		do   func() error
	}{
		{"map a", func() error { return p.Map(lib("a.so", 4)) }},
		{"unmap a", p.Unmap},
		{"map b", func() error { return p.Map(lib("b.so", 4)) }},
		{"move b", p.Move},
		{"shrink b", p.Shrink},
		{"unmap b", p.Unmap},
		{"map e", func() error { return p.Map(lib("e.so", 4)) }},
		{"take exec from e's first page", p.NoExec},
		{"unmap e", p.Unmap},
	}
	missed := s.Stats().UnmapsMissed
	for _, st := range steps {
		if err := st.do(); err != nil {
			t.Fatalf("%s: %v", st.what, err)
		}
		flushInto(t, s, tb, nil)
		if m := s.Stats().UnmapsMissed; m != missed {
			// The kernel skipped an unmap program, of this process
			// or another: the stream cannot tell; a dump does.
			t.Logf("%s: %d unmap calls missed, on the host; a dump", st.what, m-missed)
			missed = m
			dumpInto(t, s, tb, nil)
		}
		sameAsProc(t, "after "+st.what+", no dump", tb, p.Pid)
	}
	if st := s.Stats(); st.Unmaps < 4 {
		t.Errorf("%d unmap records, want 4 at least: %+v", st.Unmaps, st)
	}

	// Unmapped and mapped again at the same place, then a dump: the
	// unmap, read over, must not remove what the dump read.
	if err := p.Map(lib("c.so", 4)); err != nil {
		t.Fatal(err)
	}
	if err := p.Unmap(); err != nil {
		t.Fatal(err)
	}
	if err := p.Map(lib("d.so", 4)); err != nil {
		t.Fatal(err)
	}
	superseded := 0
	dumpInto(t, s, tb, func(rec *synth.Record) bool {
		if rec.Kind == synth.KindUnmap && rec.Superseded {
			superseded++
		}
		return false
	})
	sameAsProc(t, "after an unmap before the dump", tb, p.Pid)
	if superseded == 0 {
		t.Error("no unmap record read over by the dump")
	}
}
