package bpfprog

import (
	"bytes"
	"debug/elf"
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// synthBTF is the .BTF section of synth's own BPF object.
func synthBTF(t testing.TB) []byte {
	f, err := elf.Open("../../bpf/synth_bpfel.o")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sec := f.Section(".BTF")
	if sec == nil {
		t.Fatal("no .BTF section")
	}
	raw, err := sec.Data()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// btfNames names every type as cilium/ebpf's BTF decoder does.
func TestBTFNamesAsCilium(t *testing.T) {
	raw := synthBTF(t)
	spec, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint32
	var want []string
	for id := btf.TypeID(1); ; id++ {
		typ, err := spec.TypeByID(id)
		if err != nil {
			break
		}
		ids = append(ids, uint32(id))
		want = append(want, typ.TypeName())
	}
	if len(ids) < 100 {
		t.Fatalf("only %d types", len(ids))
	}
	got, err := btfNames(raw, ids)
	if err != nil {
		t.Fatal(err)
	}
	var funcs int
	for i := range ids {
		if want[i] == "" && strings.Contains(fmt.Sprintf("%T", mustType(spec, ids[i])), "Tag") {
			continue // cilium names no tag; BTF names it with its value
		}
		if got[i] != want[i] {
			t.Errorf("type %d: %q, cilium says %q", ids[i], got[i], want[i])
		}
		if _, ok := mustType(spec, ids[i]).(*btf.Func); ok {
			funcs++
		}
	}
	if funcs == 0 {
		t.Error("no functions among the types")
	}
	// A type past the last, and BTF cut short, are errors.
	if _, err := btfNames(raw, []uint32{ids[len(ids)-1] + 1}); err == nil {
		t.Error("a type id past the last: no error")
	}
	if _, err := btfNames(raw[:len(raw)/2], ids[:1]); err == nil {
		t.Error("truncated BTF: no error")
	}
}

func mustType(spec *btf.Spec, id uint32) btf.Type {
	typ, _ := spec.TypeByID(btf.TypeID(id))
	return typ
}

// smallBTF is BTF of an int and a function named "f".
func smallBTF() []byte {
	var types []byte
	for _, w := range []uint32{1, 1 << 24, 4, 0x20, 3, 12 << 24, 0} { // INT "i" + encoding, FUNC "f"
		types = ne.AppendUint32(types, w)
	}
	strs := []byte("\x00i\x00f\x00")
	b := ne.AppendUint16(nil, btfMagic)
	b = append(b, 1, 0)
	for _, w := range []uint32{btfHeaderSize, 0, uint32(len(types)), uint32(len(types)), uint32(len(strs))} {
		b = ne.AppendUint32(b, w)
	}
	return append(append(b, types...), strs...)
}

func TestSmallBTF(t *testing.T) {
	names, err := btfNames(smallBTF(), []uint32{2, 1})
	if err != nil || len(names) != 2 || names[0] != "f" || names[1] != "i" {
		t.Errorf("names %q %v", names, err)
	}
}

// FuzzBTFNames: any input gives names or an error, never a panic, and
// never more names than ids.
func FuzzBTFNames(f *testing.F) {
	f.Add(smallBTF(), uint32(1), uint32(2))
	f.Fuzz(func(t *testing.T, raw []byte, a, b uint32) {
		names, err := btfNames(raw, []uint32{a % 4096, b % 4096})
		if err == nil && len(names) != 2 {
			t.Fatalf("%d names for 2 ids", len(names))
		}
	})
}
