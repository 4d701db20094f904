package bpfprog

import "encoding/binary"

// InfoSize is the size of struct bpf_prog_info (include/uapi/linux/bpf.h)
// up to and including attach_btf_id, padded to 8: the info_len that perf
// 6.1 writes in HEADER_BPF_PROG_INFO. perf refuses an entry whose
// info_len is larger than the struct it was built with, so synth asks
// the kernel for this much and writes this much.
const InfoSize = 232

// Offsets of the fields of struct bpf_prog_info that synth reads or
// sets. The array fields come as three: a count, an element size (a
// field, or fixed), and a pointer the kernel copies the array to.
const (
	offType          = 0
	offID            = 4
	offTag           = 8
	offJitedProgLen  = 16
	offJitedInsns    = 24
	offName          = 64
	offNrJitedKsyms  = 104
	offNrJitedLens   = 108
	offJitedKsyms    = 112
	offJitedLens     = 120
	offBTFID         = 128
	offFuncInfoSize  = 132
	offFuncInfo      = 136
	offNrFuncInfo    = 144
	offNrLineInfo    = 148
	offLineInfo      = 152
	offJitedLineInfo = 160
	offNrJitedLine   = 168
	offLineInfoSize  = 172
	offJitedLineSize = 176
	offNrProgTags    = 180
	offProgTags      = 184

	nameLen = 16 // BPF_OBJ_NAME_LEN
)

// array describes one array of struct bpf_prog_info as perf's
// bpil_array_desc does: the offsets of its pointer, count and element
// size; a negative size is a fixed element size.
type array struct {
	ptr, count, size int
}

// The arrays perf asks for (enum perf_bpil_array): the JITed code, the
// functions' addresses and lengths, the BTF function and line
// information, and the functions' tags.
var (
	jitedInsns    = array{offJitedInsns, offJitedProgLen, -1}
	jitedKsyms    = array{offJitedKsyms, offNrJitedKsyms, -8}
	jitedFuncLens = array{offJitedLens, offNrJitedLens, -4}
	funcInfo      = array{offFuncInfo, offNrFuncInfo, offFuncInfoSize}
	lineInfo      = array{offLineInfo, offNrLineInfo, offLineInfoSize}
	jitedLineInfo = array{offJitedLineInfo, offNrJitedLine, offJitedLineSize}
	progTags      = array{offProgTags, offNrProgTags, -tagSize}
)

// arrays are those arrays in perf's order, which is the order of the
// data, with their bits (PERF_BPIL_*) in the mask perf writes.
var arrays = [...]struct {
	bit uint
	array
}{
	{0, jitedInsns}, {3, jitedKsyms}, {4, jitedFuncLens}, {5, funcInfo},
	{6, lineInfo}, {7, jitedLineInfo}, {8, progTags},
}

const tagSize = 8 // BPF_TAG_SIZE

// maxArray bounds one array the kernel reports, so that a count that
// makes no sense does not allocate without end.
const maxArray = 64 << 20

// ne reads and writes struct bpf_prog_info as the kernel fills it, in
// the host's byte order, which is also the order perf.data entries keep
// it in (perf writes the kernel's struct as it got it).
var ne = binary.NativeEndian

func u32(info []byte, off int) uint32 { return ne.Uint32(info[off:]) }
func u64(info []byte, off int) uint64 { return ne.Uint64(info[off:]) }

// elemSize is the size of one element of a.
func (a array) elemSize(info []byte) uint64 {
	if a.size < 0 {
		return uint64(-a.size)
	}
	return uint64(u32(info, a.size))
}

// bytes is the size of a's data, rounded up to 8 as perf lays it out.
func (a array) bytes(info []byte) uint64 {
	n := uint64(u32(info, a.count)) * a.elemSize(info)
	return (n + 7) &^ 7
}
