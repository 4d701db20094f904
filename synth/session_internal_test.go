package synth

import (
	"context"
	"os/exec"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
)

// Records of another generation injected into the rings are dropped and
// counted, and those of the current one pass.
func TestSessionDropsStaleGeneration(t *testing.T) {
	testenv.Root(t)
	cmd := exec.Command("sleep", "60") // one thread: one COMM per task pass
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid
	s, err := NewSession(SessionOptions{Options: Options{Pids: []int{pid}, NoKernel: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Inject: run the task pass three times under generation 1000
	// without reading the rings.
	const injected = 3
	if err := s.b.objs.SynthGen.Set(uint64(1000)); err != nil {
		t.Fatal(err)
	}
	for range injected {
		if err := drainIter(s.b.objs.DumpTask, pid); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Dump(context.Background()); err != nil {
		t.Fatal(err)
	}
	comms := 0
	var rec Record
	for rec.Kind != KindDumpEnd {
		if err := s.ReadInto(&rec); err != nil {
			t.Fatal(err)
		}
		if rec.Kind == KindSynthesized && rec.Type() == 3 /* COMM */ {
			comms++
		}
	}
	if st := s.LastDump(); st.Stale != injected {
		t.Errorf("dump dropped %d stale records, want %d", st.Stale, injected)
	}
	if st := s.Stats(); st.Stale != injected {
		t.Errorf("session counts %d stale records, want %d", st.Stale, injected)
	}
	if comms != 1 {
		t.Errorf("%d COMM records of the one-thread process, want 1", comms)
	}
}
