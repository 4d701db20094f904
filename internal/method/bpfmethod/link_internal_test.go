package bpfmethod

import (
	"encoding/binary"
	"testing"

	"github.com/cilium/ebpf/asm"
)

// TestEncodeLinked: what is kept is the instructions as the kernel is
// given them with each map load's fd zero, and only under the tag of
// the program cilium/ebpf loaded.
func TestEncodeLinked(t *testing.T) {
	bo := binary.LittleEndian
	insns := asm.Instructions{
		asm.LoadMapPtr(asm.R1, 42).WithReference("events"),
		asm.Mov.Imm(asm.R0, 7),
		asm.Return(),
	}
	tag, err := insns.Tag(bo) // the kernel's tag ignores map fds too
	if err != nil {
		t.Fatal(err)
	}
	code, err := encodeLinked(insns, bo, tag)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(code); n != 4*asm.InstructionSize { // the map load takes two
		t.Fatalf("%d bytes of code, want %d", n, 4*asm.InstructionSize)
	}
	if fd := bo.Uint32(code[4:]); fd != 0 {
		t.Errorf("map load kept with fd %d, want 0", fd)
	}
	if op := code[0]; op != byte(insns[0].OpCode) {
		t.Errorf("first opcode %#x, want the map load's %#x", op, byte(insns[0].OpCode))
	}
	if imm := bo.Uint32(code[2*asm.InstructionSize+4:]); imm != 7 {
		t.Errorf("mov r0 kept with %d, want 7", imm)
	}

	other := asm.Instructions{asm.LoadMapPtr(asm.R1, 42).WithReference("events"), asm.Mov.Imm(asm.R0, 8), asm.Return()}
	if code, err := encodeLinked(other, bo, tag); err == nil {
		t.Errorf("instructions of another tag kept: %x", code)
	}
}
