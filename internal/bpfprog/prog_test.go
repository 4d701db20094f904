package bpfprog

import (
	"bytes"
	"encoding/hex"
	"errors"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/testenv"
)

// fakeProg lays out a program of n functions without BTF, as load does.
func fakeProg(name string, n int) *Prog {
	p := &Prog{}
	copy(p.info[offName:], name)
	for _, off := range []int{offNrJitedKsyms, offNrJitedLens, offNrProgTags} {
		ne.PutUint32(p.info[off:], uint32(n))
	}
	var data []byte
	for _, a := range []array{jitedKsyms, jitedFuncLens, progTags} {
		ne.PutUint64(p.info[a.ptr:], uint64(len(data)))
		for i := range n {
			switch a {
			case jitedKsyms:
				data = ne.AppendUint64(data, 0xffffffffc0000000+uint64(i)<<12)
			case jitedFuncLens:
				data = ne.AppendUint32(data, uint32(100+i))
			case progTags:
				data = append(data, 0xa0, byte(i), 0, 0, 0, 0, 0, 0xff)
			}
		}
		for len(data)%8 != 0 {
			data = append(data, 0)
		}
	}
	p.data = data
	return p
}

// Without BTF, perf names a program of one function after the program
// and each function of several "F".
func TestSymbolNamesWithoutBTF(t *testing.T) {
	one := fakeProg("filter", 1).Symbols(nil)
	if len(one) != 1 || one[0] != (Symbol{0xffffffffc0000000, 100, "bpf_prog_a0000000000000ff_filter"}) {
		t.Errorf("one function: %+v", one)
	}
	if s := fakeProg("", 1).Symbols(nil); len(s) != 1 || s[0].Name != "bpf_prog_a0000000000000ff" {
		t.Errorf("no name: %+v", s)
	}
	two := fakeProg("main", 2).Symbols(nil)
	if len(two) != 2 || two[0].Name != "bpf_prog_a0000000000000ff_F" ||
		two[1] != (Symbol{0xffffffffc0001000, 101, "bpf_prog_a0010000000000ff_F"}) {
		t.Errorf("two functions: %+v", two)
	}
	p := fakeProg("main", 2)
	ne.PutUint32(p.info[offNrProgTags:], 1)
	if s := p.Symbols(nil); s != nil {
		t.Errorf("tags that do not match the functions gave %+v", s)
	}
}

// Load reads what the kernel reports of a program to cilium/ebpf, and
// lays it out as perf does: the array pointers are offsets into data.
func TestLoad(t *testing.T) {
	testenv.Root(t)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Name: "bpfprog_test", Type: ebpf.SocketFilter, License: "MIT",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 1), asm.Return()}})
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
	if err != nil || !slices.Contains(ids, uint32(id)) || !slices.IsSorted(ids) {
		t.Fatalf("IDs: %v %v, want %d among them, ascending", ids, err, id)
	}
	p, err := Load(uint32(id))
	if err != nil {
		t.Fatal(err)
	}
	if p2, err := Load(uint32(id)); err != nil || p2 != p {
		t.Errorf("Load twice: %p then %p, %v: want the program read once", p, p2, err)
	}
	if p.ID() != uint32(id) || p.Name() != "bpfprog_test" || p.Type() != uint32(ebpf.SocketFilter) || p.BTFID() != 0 {
		t.Errorf("id %d name %q type %d btf %d", p.ID(), p.Name(), p.Type(), p.BTFID())
	}
	if tag := p.Tag(); info.Tag != hex.EncodeToString(tag[:]) {
		t.Errorf("tag %x, cilium's %s", tag, info.Tag)
	}
	addrs, _ := info.JitedKsymAddrs()
	lens, _ := info.JitedFuncLens()
	syms := p.Symbols(nil)
	if len(syms) != 1 || len(addrs) != 1 || syms[0].Addr != uint64(addrs[0]) || syms[0].Len != lens[0] ||
		syms[0].Name != "bpf_prog_"+info.Tag+"_bpfprog_test" {
		t.Errorf("symbols %+v, cilium's %x %v", syms, addrs, lens)
	}
	insns, _ := info.JitedInsns()
	code, n := p.array(jitedInsns)
	if n != 1 || len(insns) == 0 || !bytes.Equal(code[:len(insns)], insns) {
		t.Errorf("JITed code of %d bytes differs from cilium's %d", len(code), len(insns))
	}
	lin := p.AppendLinear(nil)
	if len(lin) != 16+InfoSize+len(p.data) || ne.Uint32(lin) != InfoSize || ne.Uint64(lin[8:]) != 0x1f9 {
		t.Errorf("linear form of %d bytes, head %x", len(lin), lin[:16])
	}
	prog.Close()
	waitUnlisted(t, uint32(id)) // until then Load gives what it read
	if _, err := Load(uint32(id)); !errors.Is(err, unix.ENOENT) {
		t.Errorf("load of an unloaded program: %v, want ENOENT", err)
	}
}
