package bpfprog

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/testenv"
)

// returnZero is the least program: return 0.
var returnZero = asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}

// TestIDs loads a program: IDs lists it, ascending. (Nothing is said of
// the host's other programs, which come and go.)
func TestIDs(t *testing.T) {
	testenv.Root(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.SocketFilter, Instructions: returnZero, License: "GPL"})
	if err != nil {
		t.Fatal(err)
	}
	defer prog.Close()
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	ids, err := IDs()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(ids, uint32(id)) || !slices.IsSorted(ids) {
		t.Errorf("IDs() = %v: want program %d, ascending", ids, id)
	}
	// Read once: the second Load is the first's program.
	p1, err := Load(uint32(id))
	if err != nil {
		t.Fatal(err)
	}
	if p2, err := Load(uint32(id)); err != nil || p2 != p1 {
		t.Errorf("Load twice: %p then %p, %v", p1, p2, err)
	}
	// Unloaded, and listed no more, it is forgotten.
	prog.Close()
	waitUnlisted(t, uint32(id))
	if _, err := Load(uint32(id)); !errors.Is(err, unix.ENOENT) {
		t.Errorf("Load(%d) of a program unloaded and no more listed: %v, want ENOENT", id, err)
	}
}

// waitUnlisted waits until IDs no longer lists program id, which the
// kernel frees a little after its last descriptor is closed.
func waitUnlisted(t *testing.T, id uint32) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		ids, err := IDs()
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(ids, id) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("program %d still listed 5 s after its close", id)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHasTracingLinks attaches an fentry program: HasTracingLinks then
// sees a tracing link.
func TestHasTracingLinks(t *testing.T) {
	testenv.Root(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.Tracing, AttachType: ebpf.AttachTraceFEntry,
		AttachTo: "do_nanosleep", Instructions: returnZero, License: "GPL"})
	if err != nil {
		// The development VM's kernel refuses every fentry program
		// (EPERM, before the verifier): a kernel that cannot attach
		// one holds no trampolines either.
		testenv.Option(t, false, "fentry programs ("+err.Error()+")")
	}
	defer prog.Close()
	l, err := link.AttachTracing(link.TracingOptions{Program: prog})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if has, err := HasTracingLinks(); err != nil || !has {
		t.Errorf("HasTracingLinks() = %v, %v with a tracing link attached", has, err)
	}
}
