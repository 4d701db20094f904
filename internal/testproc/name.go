package testproc

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// unsafePtr returns a pointer to a NUL-terminated copy of s for prctl.
// The copy is never freed; the helper process names a handful of threads.
func unsafePtr(s string) unsafe.Pointer {
	b, err := unix.BytePtrFromString(s)
	if err != nil {
		panic(err)
	}
	return unsafe.Pointer(b)
}
