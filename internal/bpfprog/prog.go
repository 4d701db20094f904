package bpfprog

import (
	"encoding/hex"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ProgTypeXDP is BPF_PROG_TYPE_XDP: an XDP program runs through the
// kernel's XDP dispatcher (bpf_dispatcher_xdp in kallsyms).
const ProgTypeXDP = 6

// Prog is one loaded BPF program: its struct bpf_prog_info, with the
// arrays perf keeps, laid out as perf's struct perf_bpil
// (tools/perf/util/bpf-utils.h): the info's array pointers are offsets
// into data.
type Prog struct {
	info   [InfoSize]byte
	arrays uint64 // bit i: array i of enum perf_bpil_array is in data
	data   []byte
}

// Load returns program id, read from the kernel the first time (see
// cache.go). A program unloaded before it was read gives an error
// wrapping unix.ENOENT.
func Load(id uint32) (*Prog, error) {
	return progs.get(id, read)
}

// read reads program id from the kernel.
func read(id uint32) (*Prog, error) {
	fd, err := fdByID(unix.BPF_PROG_GET_FD_BY_ID, id)
	if err != nil {
		return nil, fmt.Errorf("open BPF program %d: %w", id, err)
	}
	defer unix.Close(fd)
	p, err := load(fd)
	if err != nil {
		return nil, fmt.Errorf("BPF program %d: %w", id, err)
	}
	return p, nil
}

// load reads the info twice, as perf's get_bpf_prog_info_linear does:
// once for the arrays' sizes, then with room for them.
func load(fd int) (*Prog, error) {
	var dims [InfoSize]byte
	if _, err := objInfo(fd, dims[:], nil); err != nil {
		return nil, err
	}
	var size uint64
	for _, a := range arrays {
		n := a.bytes(dims[:])
		if n > maxArray {
			return nil, fmt.Errorf("array at %d of %d bytes", a.ptr, n)
		}
		size += n
	}
	p := &Prog{data: make([]byte, size)}
	base := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(p.data))))
	var off uint64
	for _, a := range arrays {
		p.arrays |= 1 << a.bit
		ne.PutUint32(p.info[a.count:], u32(dims[:], a.count))
		if a.size > 0 {
			ne.PutUint32(p.info[a.size:], u32(dims[:], a.size))
		}
		ne.PutUint64(p.info[a.ptr:], base+off)
		off += a.bytes(dims[:])
	}
	if _, err := objInfo(fd, p.info[:], p.data); err != nil {
		return nil, err
	}
	for _, a := range arrays {
		if a.bytes(p.info[:]) != a.bytes(dims[:]) {
			return nil, fmt.Errorf("array at %d changed size", a.ptr)
		}
		if ptr := u64(p.info[:], a.ptr); ptr != 0 {
			ne.PutUint64(p.info[a.ptr:], ptr-base)
		}
	}
	return p, nil
}

// ID is the program's id, as bpftool lists it.
func (p *Prog) ID() uint32 { return u32(p.info[:], offID) }

// Type is the program's type (enum bpf_prog_type).
func (p *Prog) Type() uint32 { return u32(p.info[:], offType) }

// Tag is the hash of the program's instructions.
func (p *Prog) Tag() (tag [tagSize]byte) {
	copy(tag[:], p.info[offTag:])
	return tag
}

// Name is the name the program was loaded with, at most 15 bytes.
func (p *Prog) Name() string {
	return unix.ByteSliceToString(p.info[offName : offName+nameLen])
}

// BTFID is the id of the program's BTF, 0 if it has none.
func (p *Prog) BTFID() uint32 { return u32(p.info[:], offBTFID) }

// array returns the data of array a and its element size.
func (p *Prog) array(a array) ([]byte, int) {
	off, n := u64(p.info[:], a.ptr), a.bytes(p.info[:])
	if off > uint64(len(p.data)) || n > uint64(len(p.data))-off {
		return nil, 0
	}
	return p.data[off : off+n], int(a.elemSize(p.info[:]))
}

// Symbol is one JITed function of a program, as PERF_RECORD_KSYMBOL
// names it.
type Symbol struct {
	Addr uint64
	Len  uint32
	Name string
}

// Symbols lists the program's functions, the main one first, named as
// perf's synthesize_bpf_prog_name names them: "bpf_prog_", the
// function's tag in hex, then "_" and the function's name from rawBTF,
// the program's BTF (nil if it has none, see BTF); without BTF, the
// program's name for a program of one function, and "F" for each
// function of one with several. A program the kernel shows no addresses
// for (no JIT, or kernel.kptr_restrict) has none.
func (p *Prog) Symbols(rawBTF []byte) []Symbol {
	addrs, _ := p.array(jitedKsyms)
	lens, _ := p.array(jitedFuncLens)
	tags, _ := p.array(progTags)
	n := int(u32(p.info[:], offNrJitedKsyms))
	if n == 0 || int(u32(p.info[:], offNrJitedLens)) != n || int(u32(p.info[:], offNrProgTags)) != n ||
		len(addrs) < 8*n || len(lens) < 4*n || len(tags) < tagSize*n {
		return nil
	}
	funcs := p.funcNames(rawBTF, n)
	syms := make([]Symbol, n)
	for i := range syms {
		addr := ne.Uint64(addrs[8*i:])
		if addr == 0 {
			return nil
		}
		name := "bpf_prog_" + hex.EncodeToString(tags[tagSize*i:tagSize*(i+1)])
		switch short := p.Name(); {
		case funcs != nil:
			name += "_" + funcs[i]
		case n > 1:
			name += "_F"
		case short != "":
			name += "_" + short
		}
		syms[i] = Symbol{Addr: addr, Len: ne.Uint32(lens[4*i:]), Name: name}
	}
	return syms
}

// funcNames returns the BTF names of the program's n functions, nil
// without BTF function information for each.
func (p *Prog) funcNames(rawBTF []byte, n int) []string {
	finfo, recSize := p.array(funcInfo)
	if rawBTF == nil || int(u32(p.info[:], offNrFuncInfo)) != n || recSize < 8 || len(finfo) < recSize*n {
		return nil
	}
	ids := make([]uint32, n)
	for i := range ids {
		ids[i] = ne.Uint32(finfo[recSize*i+4:]) // struct bpf_func_info: u32 insn_off, type_id
	}
	names, err := btfNames(rawBTF, ids)
	if err != nil {
		return nil
	}
	return names
}

// AppendLinear appends the program as perf writes one entry of
// HEADER_BPF_PROG_INFO: struct perf_bpil, u32 info_len, u32 data_len,
// u64 arrays, the info, then the data.
func (p *Prog) AppendLinear(b []byte) []byte {
	b = ne.AppendUint32(b, InfoSize)
	b = ne.AppendUint32(b, uint32(len(p.data)))
	b = ne.AppendUint64(b, p.arrays)
	b = append(b, p.info[:]...)
	return append(b, p.data...)
}
