package bpfsys

import (
	"runtime"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func TestPointerIs64Bits(t *testing.T) {
	if n := unsafe.Sizeof(Pointer{}); n != 8 {
		t.Fatalf("Pointer is %d bytes, want 8 (__aligned_u64)", n)
	}
	b := []byte("abc")
	p := SlicePointer(b)
	if got := *(*uint64)(unsafe.Pointer(&p)); got != uint64(uintptr(unsafe.Pointer(&b[0]))) {
		t.Errorf("SlicePointer holds %#x, want the slice's address", got)
	}
	if p := SlicePointer([]byte(nil)); p.ptr != nil {
		t.Errorf("SlicePointer(nil) = %p, want null", p.ptr)
	}
}

func TestStringPointerEndsInNUL(t *testing.T) {
	p := StringPointer("GPL")
	got := unsafe.Slice((*byte)(p.ptr), 4)
	if string(got) != "GPL\x00" {
		t.Errorf("StringPointer(GPL) points at %q", got)
	}
}

// TestMaskProfiler checks that SIGPROF is blocked on the loading thread
// and unblocked after, as a BPF_PROG_LOAD profiled by pprof needs.
func TestMaskProfiler(t *testing.T) {
	blocked := func() bool {
		var cur unix.Sigset_t
		if err := unix.PthreadSigmask(unix.SIG_BLOCK, nil, &cur); err != nil {
			t.Fatal(err)
		}
		return cur.Val[0]&profSet.Val[0] != 0
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if blocked() {
		t.Fatal("SIGPROF blocked before maskProfiler")
	}
	if err := maskProfiler(); err != nil {
		t.Fatal(err)
	}
	if !blocked() {
		t.Error("SIGPROF not blocked by maskProfiler")
	}
	unmaskProfiler()
	if blocked() {
		t.Error("SIGPROF still blocked after unmaskProfiler")
	}
}
