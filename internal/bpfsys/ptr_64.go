//go:build !386 && !arm && !mipsle

package bpfsys

import "unsafe"

// Pointer is a 64-bit pointer field of a bpf_attr (__aligned_u64 in
// include/uapi/linux/bpf.h), kept as an unsafe.Pointer so that the
// runtime sees it.
type Pointer struct {
	ptr unsafe.Pointer
}
