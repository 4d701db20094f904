package bpfmethod

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"

	"github.com/synth-dev/synth/internal/kcache"
)

// Linking a program against the kernel, as cilium/ebpf (v0.22) does
// when it loads one (linker.go: applyRelocations, fixupKfuncs;
// prog.go: findProgramTargetInKernel), done again here so that what it
// yields can be kept (internal/kcache) and the next synth on this
// kernel can load the program without parsing the kernel's BTF.
// cilium/ebpf has no way to hand out the instructions it loads, or to
// load a program given its attach target's BTF ID. What is kept is only
// ever a copy of what cilium/ebpf loaded: linkProgram runs after
// cilium/ebpf loaded the program, and its result is kept only if the
// kernel's tag of that program (a hash of its instructions) is the tag
// of linkProgram's.

// kfuncCallPoison is the helper number cilium/ebpf calls in place of a
// weak kfunc the kernel lacks (linker.go: kfuncCallPoisonBase).
const kfuncCallPoison = 0xdedc0de

// errLocalTypeID is why a program with a bpf_core_type_id_local
// relocation is not linked here: its ID is one in the program's own BTF,
// which the loader builds anew at each load.
var errLocalTypeID = errors.New("a relocation against a local type ID")

// linkProgram returns ps's instructions, from the collection coll,
// relocated against kernel, with its kfunc calls pointing at the
// kernel's kfuncs, and the BTF ID of its attach target.
func linkProgram(coll *ebpf.CollectionSpec, ps *ebpf.ProgramSpec, kernel *btf.Spec) (asm.Instructions, uint32, error) {
	if ps.ByteOrder == nil {
		return nil, 0, errors.New("no byte order")
	}
	insns := slices.Clone(ps.Instructions)
	var relos []*btf.CORERelocation
	var at []*asm.Instruction
	for i := range insns {
		if r := btf.CORERelocationMetadata(&insns[i]); r != nil {
			relos = append(relos, r)
			at = append(at, &insns[i])
		}
	}
	if len(relos) > 0 {
		fixups, err := btf.CORERelocate(relos, []*btf.Spec{kernel}, ps.ByteOrder,
			func(btf.Type) (btf.TypeID, error) { return 0, errLocalTypeID })
		if err != nil {
			return nil, 0, err
		}
		for i, f := range fixups {
			if err := f.Apply(at[i]); err != nil {
				return nil, 0, fmt.Errorf("fixup for %s: %w", relos[i], err)
			}
		}
	}
	kfuncs, err := kfuncNames(coll)
	if err != nil {
		return nil, 0, err
	}
	for i := range insns {
		if name := insns[i].Reference(); kfuncs[name] {
			if err := linkKfunc(&insns[i], name, kernel); err != nil {
				return nil, 0, err
			}
		}
	}
	attach, err := attachID(ps, kernel)
	return insns, attach, err
}

// kfuncNames returns the names of the kfuncs coll declares (the
// functions of its .ksyms section).
func kfuncNames(coll *ebpf.CollectionSpec) (map[string]bool, error) {
	names := make(map[string]bool)
	var ksyms *btf.Datasec
	if err := coll.Types.TypeByName(".ksyms", &ksyms); errors.Is(err, btf.ErrNotFound) {
		return names, nil
	} else if err != nil {
		return nil, err
	}
	for _, v := range ksyms.Vars {
		if fn, ok := v.Type.(*btf.Func); ok {
			names[fn.Name] = true
		}
	}
	return names, nil
}

// linkKfunc points ins, a call of the kfunc name or a load of its
// address, at the kernel's kfunc of that name, or poisons it as
// cilium/ebpf poisons a weak kfunc the kernel lacks (every kfunc of
// bpf/ is weak: a strong one missing fails cilium/ebpf's load, and
// nothing is linked).
func linkKfunc(ins *asm.Instruction, name string, kernel *btf.Spec) error {
	var fn *btf.Func
	err := kernel.TypeByName(name, &fn)
	switch {
	case errors.Is(err, btf.ErrNotFound) && ins.IsKfuncCall():
		*ins = asm.BuiltinFunc(kfuncCallPoison).Call()
		return nil
	case errors.Is(err, btf.ErrNotFound) && ins.OpCode.IsDWordLoad():
		ins.Constant, ins.Src = 0, 0
		return nil
	case err != nil:
		return fmt.Errorf("kfunc %s: %w", name, err)
	case !ins.IsKfuncCall() && !ins.OpCode.IsDWordLoad():
		return fmt.Errorf("kfunc %s: not a call or a load", name)
	}
	id, err := kernel.TypeID(fn)
	if err != nil {
		return fmt.Errorf("kfunc %s: %w", name, err)
	}
	ins.Constant, ins.Offset = int64(id), 0 // 0: vmlinux's, not a module's
	return nil
}

// attachID returns the BTF ID of ps's attach target: an iterator's
// bpf_iter_ function; 0 for a program the kernel is given none (a
// tracepoint's is a name, used when it is attached). The other targets
// by BTF ID (fentry and the like, LSM, struct_ops, extensions) are not
// linked here: bpf/ has none.
func attachID(ps *ebpf.ProgramSpec, kernel *btf.Spec) (uint32, error) {
	switch {
	case ps.AttachTo == "":
		return 0, nil
	case ps.Type == ebpf.Tracing && ps.AttachType == ebpf.AttachTraceIter:
	case ps.Type == ebpf.Tracing, ps.Type == ebpf.LSM, ps.Type == ebpf.StructOps, ps.Type == ebpf.Extension:
		return 0, fmt.Errorf("attach target %s of a %s program", ps.AttachTo, ps.Type)
	default:
		return 0, nil
	}
	var fn *btf.Func
	if err := kernel.TypeByName("bpf_iter_"+ps.AttachTo, &fn); err != nil {
		return 0, fmt.Errorf("%s iterator: %w", ps.AttachTo, err)
	}
	id, err := kernel.TypeID(fn)
	return uint32(id), err
}

// linked returns ps linked as insns (linkProgram) and attach, as the
// kernel is given it, if insns are the instructions of the loaded
// program p; else an error.
func linked(ps *ebpf.ProgramSpec, insns asm.Instructions, attach uint32, p *ebpf.Program) (kcache.Program, error) {
	code, err := linkedCode(insns, ps.ByteOrder, p)
	if err != nil {
		return kcache.Program{}, err
	}
	l := kcache.Program{Code: code, AttachID: attach}
	// The program's own BTF and the records that point into it, as
	// cilium/ebpf makes them (prog.go: newProgramWithOptions), for a
	// kernel that takes them (all since 5.0).
	var b btf.Builder
	l.FuncInfo, l.LineInfo, err = btf.MarshalExtInfos(insns, &b)
	if err != nil {
		return kcache.Program{}, fmt.Errorf("marshal ext_infos: %w", err)
	}
	if !b.Empty() {
		if l.BTF, err = b.Marshal(nil, btf.KernelMarshalOptions()); err != nil {
			return kcache.Program{}, fmt.Errorf("marshal BTF: %w", err)
		}
	}
	return l, nil
}

// linkedCode returns insns as the kernel is given them, with the file
// descriptor of every map load zero, if they are the instructions of
// the loaded program p; else an error.
func linkedCode(insns asm.Instructions, bo binary.ByteOrder, p *ebpf.Program) ([]byte, error) {
	info, err := p.Info()
	if err != nil {
		return nil, err
	}
	return encodeLinked(insns, bo, info.Tag)
}

// encodeLinked returns insns as the kernel is given them, with the file
// descriptor of every map load zero, if their tag is tag (the kernel's
// of the program cilium/ebpf loaded); else an error.
func encodeLinked(insns asm.Instructions, bo binary.ByteOrder, tag string) ([]byte, error) {
	var buf bytes.Buffer
	if err := insns.Marshal(&buf, bo); err != nil { // encodes the calls' offsets
		return nil, err
	}
	if ok, err := insns.HasTag(tag, bo); err != nil || !ok {
		return nil, fmt.Errorf("linked here unlike cilium/ebpf (tag %s): %w", tag, err)
	}
	code := buf.Bytes()
	iter := insns.Iterate()
	for iter.Next() {
		if iter.Ins.IsLoadFromMap() {
			off := int(iter.Offset) * asm.InstructionSize
			clear(code[off+4 : off+8]) // the low half of the constant: the fd
		}
	}
	return code, nil
}

// loadLinked loads ps, from the object spec, with the instructions and
// attach target of l (linked against this kernel), and the maps by
// name, without the kernel's BTF.
func loadLinked(ps *ebpf.ProgramSpec, l kcache.Program, maps map[string]*ebpf.Map) (*ebpf.Program, error) {
	code := slices.Clone(l.Code)
	if ps.ByteOrder == nil {
		return nil, errors.New("no byte order")
	}
	if uint64(len(code)) != ps.Instructions.Size() {
		return nil, fmt.Errorf("%d bytes of code, not %d", len(code), ps.Instructions.Size())
	}
	iter := ps.Instructions.Iterate()
	for iter.Next() {
		ins := iter.Ins
		off := int(iter.Offset) * asm.InstructionSize
		if !ins.IsLoadFromMap() {
			continue
		}
		m := maps[ins.Reference()]
		switch {
		case m == nil:
			return nil, fmt.Errorf("instruction %d: no map %q", iter.Index, ins.Reference())
		case code[off] != byte(ins.OpCode):
			return nil, fmt.Errorf("instruction %d: the kept code has no map load there", iter.Index)
		}
		ps.ByteOrder.PutUint32(code[off+4:], uint32(m.FD()))
	}
	attr := progLoadAttr{
		ProgType:           uint32(ps.Type),
		ExpectedAttachType: uint32(ps.AttachType),
		ProgFlags:          ps.Flags,
		License:            ps.License,
		Name:               ps.Name,
		Insns:              code,
		FuncInfo:           l.FuncInfo,
		LineInfo:           l.LineInfo,
		AttachBTFID:        l.AttachID,
	}
	if len(l.BTF) > 0 {
		h, err := btf.NewHandleFromRawBTF(l.BTF)
		if err != nil {
			return nil, fmt.Errorf("load BTF: %w", err)
		}
		defer h.Close()
		attr.BTFFD = uint32(h.FD())
	}
	fd, err := loadProgramFD(attr)
	if err != nil {
		return nil, err
	}
	return ebpf.NewProgramFromFD(fd)
}
