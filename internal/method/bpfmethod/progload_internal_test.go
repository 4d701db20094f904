package bpfmethod

import (
	"testing"
	"unsafe"

	"github.com/cilium/ebpf/btf"

	"github.com/synth-dev/synth/internal/bpfsys"
)

// TestProgLoadAttrLayout checks the offsets of union bpf_attr's
// BPF_PROG_LOAD members (include/uapi/linux/bpf.h, as pahole shows
// them on x86_64 and arm64) and what newProgLoadAttr puts there.
func TestProgLoadAttrLayout(t *testing.T) {
	var a bpfProgLoadAttr
	for _, f := range []struct {
		name     string
		got, off uintptr
	}{
		{"insns", unsafe.Offsetof(a.insns), 8},
		{"license", unsafe.Offsetof(a.license), 16},
		{"log_buf", unsafe.Offsetof(a.logBuf), 32},
		{"prog_name", unsafe.Offsetof(a.progName), 48},
		{"expected_attach_type", unsafe.Offsetof(a.expectedAttachType), 68},
		{"func_info", unsafe.Offsetof(a.funcInfo), 80},
		{"line_info", unsafe.Offsetof(a.lineInfo), 96},
		{"attach_btf_id", unsafe.Offsetof(a.attachBTFID), 108},
		{"attach_btf_obj_fd", unsafe.Offsetof(a.attachBTFObjFD), 112},
	} {
		if f.got != f.off {
			t.Errorf("%s at %d, want %d", f.name, f.got, f.off)
		}
	}
	if n := unsafe.Sizeof(a); n != 120 {
		t.Errorf("attr is %d bytes, want 120", n)
	}

	insns := make([]byte, 16)
	funcs := make([]byte, 2*btf.FuncInfoSize)
	attr, err := newProgLoadAttr(progLoadAttr{
		ProgType: 26, License: "GPL", Name: "walk-vma/x", Insns: insns,
		FuncInfo: funcs, AttachBTFID: 77,
	})
	if err != nil {
		t.Fatal(err)
	}
	// ptr reads a Pointer as the kernel does.
	ptr := func(p *bpfsys.Pointer) uintptr { return uintptr(*(*uint64)(unsafe.Pointer(p))) }
	if attr.insnCnt != 2 || ptr(&attr.insns) != uintptr(unsafe.Pointer(&insns[0])) {
		t.Errorf("insns: %d at %#x, want 2 at %p", attr.insnCnt, ptr(&attr.insns), &insns[0])
	}
	if attr.funcInfoCnt != 2 || attr.funcInfoRecSize != btf.FuncInfoSize || ptr(&attr.funcInfo) != uintptr(unsafe.Pointer(&funcs[0])) {
		t.Errorf("func_info: %d of %d bytes", attr.funcInfoCnt, attr.funcInfoRecSize)
	}
	if attr.lineInfoCnt != 0 || ptr(&attr.lineInfo) != 0 {
		t.Errorf("line_info set without line info")
	}
	if lic := unsafe.String(*(**byte)(unsafe.Pointer(&attr.license)), 4); lic != "GPL\x00" {
		t.Errorf("license %q, want NUL-terminated GPL", lic)
	}
	if name := string(attr.progName[:]); name != "walk_vma_x\x00\x00\x00\x00\x00\x00" {
		t.Errorf("name %q", name)
	}
	if attr.attachBTFID != 77 || attr.progType != 26 {
		t.Errorf("attach BTF ID %d, type %d", attr.attachBTFID, attr.progType)
	}
	if _, err := newProgLoadAttr(progLoadAttr{Insns: make([]byte, 12)}); err == nil {
		t.Error("12 bytes of instructions accepted")
	}
}
