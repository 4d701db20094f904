package bpfiter

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/rlimit"

	"github.com/synth-dev/synth/internal/testenv"
)

// A program of the test's own counts the VMAs it walks: every task's,
// or one process's; a process that is gone has nothing to walk.
func TestOpenAndDrain(t *testing.T) {
	testenv.Root(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	counter, prog, err := countVMAs()
	if err != nil {
		t.Fatal(err)
	}
	defer counter.Close()
	defer prog.Close()
	walked := func() uint64 {
		var n uint64
		if err := counter.Lookup(uint32(0), &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	count := func(pid int) uint64 {
		before := walked()
		it, err := Open(prog, pid)
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
	if it, err := Open(prog, gone.Process.Pid); err == nil {
		it.Close()
		if n := count(gone.Process.Pid); n != 0 {
			t.Errorf("walked %d VMAs of an exited process", n)
		}
	} else if !errors.Is(err, ErrNoProcess) {
		t.Errorf("Open of an exited process: %v, want ErrNoProcess or nothing to walk", err)
	}
	if err := Drain(prog, gone.Process.Pid); err != nil {
		t.Errorf("Drain of an exited process: %v", err)
	}
}

// countVMAs loads an iter/task_vma program that adds 1 for each VMA it
// is shown to the one uint64 of an array map: what the iterator walked.
func countVMAs() (*ebpf.Map, *ebpf.Program, error) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		return nil, nil, err
	}
	p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Type:       ebpf.Tracing,
		AttachType: ebpf.AttachTraceIter,
		AttachTo:   "task_vma",
		License:    "GPL",
		Instructions: asm.Instructions{
			// struct bpf_iter__task_vma: meta, task, vma.
			asm.LoadMem(asm.R6, asm.R1, 16, asm.DWord),
			asm.JEq.Imm(asm.R6, 0, "out"),
			asm.StoreImm(asm.RFP, -4, 0, asm.Word),
			asm.LoadMapPtr(asm.R1, m.FD()),
			asm.Mov.Reg(asm.R2, asm.RFP),
			asm.Add.Imm(asm.R2, -4),
			asm.FnMapLookupElem.Call(),
			asm.JEq.Imm(asm.R0, 0, "out"),
			asm.Mov.Imm(asm.R1, 1),
			asm.StoreXAdd(asm.R0, asm.R1, asm.DWord),
			asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
			asm.Return(),
		},
	})
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, p, nil
}
