package bpfiter

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/testenv"
)

// The floor program counts the VMAs it walks: every task's, or one
// process's; a process that is gone has nothing to walk.
func TestOpenAndDrain(t *testing.T) {
	testenv.Root(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	spec, err := synthbpf.LoadFloor()
	if err != nil {
		t.Fatal(err)
	}
	var objs struct {
		WalkVma *ebpf.Program  `ebpf:"walk_vma"`
		Walked  *ebpf.Variable `ebpf:"walked"`
	}
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		t.Fatal(err)
	}
	defer objs.WalkVma.Close()
	walked := func() uint64 {
		var n uint64
		if err := objs.Walked.Get(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	count := func(pid int) uint64 {
		before := walked()
		it, err := Open(objs.WalkVma, pid)
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		if _, err := io.Copy(io.Discard, it); err != nil {
			t.Fatal(err)
		}
		return walked() - before
	}
	self, all := count(os.Getpid()), count(0)
	if self == 0 || all <= self {
		t.Errorf("walked %d VMAs of this process and %d of all; want some, and more of all", self, all)
	}

	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	// The kernel may refuse the link (ErrNoProcess) or make one that
	// walks nothing: 6.18 does the latter for a reaped process.
	if it, err := Open(objs.WalkVma, gone.Process.Pid); err == nil {
		it.Close()
		if n := count(gone.Process.Pid); n != 0 {
			t.Errorf("walked %d VMAs of an exited process", n)
		}
	} else if !errors.Is(err, ErrNoProcess) {
		t.Errorf("Open of an exited process: %v, want ErrNoProcess or nothing to walk", err)
	}
	if err := Drain(objs.WalkVma, gone.Process.Pid); err != nil {
		t.Errorf("Drain of an exited process: %v", err)
	}
}
