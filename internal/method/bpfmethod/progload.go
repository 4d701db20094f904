package bpfmethod

import (
	"fmt"
	"unsafe"

	"github.com/cilium/ebpf/btf"
	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/bpfsys"
)

// progLoadAttr is what loadLinked gives BPF_PROG_LOAD.
type progLoadAttr struct {
	ProgType, ExpectedAttachType uint32
	ProgFlags                    uint32
	License, Name                string
	Insns                        []byte
	BTFFD                        uint32 // the program's own BTF, for FuncInfo and LineInfo
	FuncInfo, LineInfo           []byte // btf.FuncInfoSize and btf.LineInfoSize bytes each
	AttachBTFID                  uint32 // in vmlinux's BTF
}

// bpfProgLoadAttr is the BPF_PROG_LOAD part of union bpf_attr
// (include/uapi/linux/bpf.h), up to attach_btf_obj_fd (Linux 5.11):
// the kernel takes a shorter attr than its own and reads the rest as
// zero. Its pointers are bpfsys.Pointer, never integers, so that the
// runtime updates them when it moves the goroutine's stack (see
// package bpfsys).
type bpfProgLoadAttr struct {
	progType           uint32
	insnCnt            uint32
	insns              bpfsys.Pointer
	license            bpfsys.Pointer // a NUL-terminated string
	logLevel           uint32
	logSize            uint32
	logBuf             bpfsys.Pointer
	kernVersion        uint32
	progFlags          uint32
	progName           [unix.BPF_OBJ_NAME_LEN]byte
	progIfindex        uint32
	expectedAttachType uint32
	progBTFFD          uint32
	funcInfoRecSize    uint32
	funcInfo           bpfsys.Pointer
	funcInfoCnt        uint32
	lineInfoRecSize    uint32
	lineInfo           bpfsys.Pointer
	lineInfoCnt        uint32
	attachBTFID        uint32
	attachBTFObjFD     uint32 // attach_prog_fd; 0: vmlinux
	_                  uint32
}

// newProgLoadAttr lays a out as the kernel reads it.
func newProgLoadAttr(a progLoadAttr) (*bpfProgLoadAttr, error) {
	if len(a.Insns) == 0 || len(a.Insns)%8 != 0 {
		return nil, fmt.Errorf("%d bytes of instructions", len(a.Insns))
	}
	attr := &bpfProgLoadAttr{
		progType:           a.ProgType,
		insnCnt:            uint32(len(a.Insns) / 8),
		insns:              bpfsys.SlicePointer(a.Insns),
		license:            bpfsys.StringPointer(a.License),
		progFlags:          a.ProgFlags,
		expectedAttachType: a.ExpectedAttachType,
		progBTFFD:          a.BTFFD,
		attachBTFID:        a.AttachBTFID,
	}
	copy(attr.progName[:unix.BPF_OBJ_NAME_LEN-1], objName(a.Name))
	if len(a.FuncInfo) > 0 {
		attr.funcInfoRecSize, attr.funcInfoCnt = btf.FuncInfoSize, uint32(len(a.FuncInfo))/btf.FuncInfoSize
		attr.funcInfo = bpfsys.SlicePointer(a.FuncInfo)
	}
	if len(a.LineInfo) > 0 {
		attr.lineInfoRecSize, attr.lineInfoCnt = btf.LineInfoSize, uint32(len(a.LineInfo))/btf.LineInfoSize
		attr.lineInfo = bpfsys.SlicePointer(a.LineInfo)
	}
	return attr, nil
}

// loadProgramFD loads a program with BPF_PROG_LOAD and returns its file
// descriptor. It asks for no verifier log: a program that fails here
// is loaded again by cilium/ebpf, which says why it fails.
func loadProgramFD(a progLoadAttr) (int, error) {
	attr, err := newProgLoadAttr(a)
	if err != nil {
		return -1, err
	}
	fd, err := bpfsys.BPF(unix.BPF_PROG_LOAD, unsafe.Pointer(attr), unsafe.Sizeof(*attr))
	if err != nil {
		return -1, fmt.Errorf("load program %s: %w", a.Name, err)
	}
	return fd, nil
}

// objName is name as the kernel takes a program's: letters, digits,
// '_' and '.' (bpf_obj_name_cpy), at most BPF_OBJ_NAME_LEN-1 bytes.
func objName(name string) string {
	b := []byte(name)[:min(len(name), unix.BPF_OBJ_NAME_LEN-1)]
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b)
}
