package bpfsys

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// NewPointer points at p.
func NewPointer(p unsafe.Pointer) Pointer { return Pointer{ptr: p} }

// SlicePointer points at s's first element; an empty s gives a null
// pointer.
func SlicePointer[T any](s []T) Pointer {
	if len(s) == 0 {
		return Pointer{}
	}
	return Pointer{ptr: unsafe.Pointer(unsafe.SliceData(s))}
}

// StringPointer points at a NUL-terminated copy of s, on the heap.
func StringPointer(s string) Pointer {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return Pointer{ptr: unsafe.Pointer(&b[0])}
}

// BPF issues bpf(2) command cmd with attr, size bytes long. Loading a
// program masks SIGPROF and retries on EAGAIN (see the package doc).
func BPF(cmd int, attr unsafe.Pointer, size uintptr) (int, error) {
	if cmd == unix.BPF_PROG_LOAD {
		if err := maskProfiler(); err != nil {
			return -1, err
		}
		defer unmaskProfiler()
	}
	for {
		r, _, errno := unix.Syscall(unix.SYS_BPF, uintptr(cmd), uintptr(attr), size)
		runtime.KeepAlive(attr)
		switch {
		case errno == unix.EAGAIN && cmd == unix.BPF_PROG_LOAD:
			continue // a signal interrupted the verifier
		case errno != 0:
			return -1, errno
		}
		return int(r), nil
	}
}

// profSet holds SIGPROF alone.
var profSet = func() (s unix.Sigset_t) {
	const bits = int(unsafe.Sizeof(s.Val[0])) * 8
	bit := int(unix.SIGPROF) - 1
	s.Val[bit/bits] |= 1 << (bit % bits)
	return s
}()

// maskProfiler locks the goroutine to its thread and blocks SIGPROF
// there, as cilium/ebpf's maskProfilerSignal does; unmaskProfiler
// undoes both.
func maskProfiler() error {
	runtime.LockOSThread()
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &profSet, nil); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("block SIGPROF: %w", err)
	}
	return nil
}

func unmaskProfiler() {
	// Unblocking a signal the thread blocked itself cannot fail; if it
	// did, the thread stays locked and dies with its goroutine, taking
	// the mask with it.
	if unix.PthreadSigmask(unix.SIG_UNBLOCK, &profSet, nil) == nil {
		runtime.UnlockOSThread()
	}
}
