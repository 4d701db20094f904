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

	"github.com/synth-dev/synth/internal/testenv"
)

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
		AttachTo: "do_nanosleep", Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()}, License: "GPL"})
	if err != nil {
		// The development VM's kernel, locked down by its
		// configuration, refuses every fentry program (EPERM, before
		// the verifier): a kernel that cannot attach one holds no
		// trampolines either. make vmtest runs this on Debian's.
		testenv.Option(t, false, "fentry programs ("+err.Error()+")")
	}
	defer prog.Close()
	l, err := link.AttachTracing(link.TracingOptions{Program: prog})
	if errors.Is(err, ebpf.ErrNotSupported) {
		// arm64 before 6.4 loads fentry programs but has no
		// trampoline to attach them with (no ftrace direct calls).
		testenv.Option(t, false, "BPF trampolines ("+err.Error()+")")
	}
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if has, err := HasTracingLinks(); err != nil || !has {
		t.Errorf("HasTracingLinks() = %v, %v with a tracing link attached", has, err)
	}
}
