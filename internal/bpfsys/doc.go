// Package bpfsys issues the few bpf(2) commands synth makes itself
// (cilium/ebpf has no call for them), keeping Go's rules for memory the
// kernel reads, as cilium/ebpf's internal/sys does:
//
//   - Every pointer in an attr is a [Pointer], an unsafe.Pointer field,
//     never a uint64. The runtime may copy a goroutine's stack at any
//     call (growth) and then updates the pointers it can see; an
//     address kept as an integer would still name the old stack, which
//     the kernel would then read or write. A pointer field also keeps
//     what it points at alive while the attr is.
//   - The attr itself reaches the kernel as
//     uintptr(unsafe.Pointer(attr)) written in the call expression of
//     unix.Syscall: rule (4) of package unsafe, which is the one place
//     a pointer may become an integer and stay valid (the compiler keeps
//     the object alive and in place until the call returns).
//   - BPF_PROG_LOAD runs with SIGPROF blocked on its thread: the
//     verifier gives up with EAGAIN when a signal arrives, and a program
//     profiled with pprof would load again and again. EAGAIN is still
//     retried for other signals.
//
// Memory that the kernel reaches through a pointer stored inside a byte
// buffer (the array pointers of bpf_prog_info, say) is invisible to the
// runtime: it must be on the heap (Go's collector does not move heap
// objects) and kept alive with runtime.KeepAlive until the call returns.
package bpfsys
