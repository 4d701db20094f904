// Package bpf holds synth's BPF programs and their bpf2go bindings.
//
// synth.bpf.c holds the programs a dump and a session load; the headers
// hold what they share: record.bpf.h the rings and the record builders,
// walk.bpf.h and maple.bpf.h the maple walk, buildid.bpf.h and
// pidns.bpf.h the build-ID cache and pid namespaces, unmap.bpf.h what
// the unmap programs share; synth.h the layout of what they emit, the contract
// with the Go side. The benchmark floor of synth bench is no part of
// this package: cmd/synth/internal/bench/floor compiles walk.bpf.h with
// SYNTH_WALK_ONLY (walk, validate, emit nothing) into an object of its
// own. `make generate` (clang-19) compiles each .c, here and there, into
// its .o, committed together with the generated .go, so that `go build`
// needs no clang. `make check-generate` rebuilds them into a temporary
// directory and fails when they differ from the committed files.
//
// One object serves every little-endian architecture (bpf2go's bpfel
// target: amd64, arm64 and the others): the programs use no
// architecture's registers (no PT_REGS), and read the kernel's structures
// by CO-RE. What differs between kernels of one architecture and another
// is set before they load, from the running kernel: the page size and
// whether it has x86-64's [vsyscall] page (page_shift, x86_vsyscall).
//
// vmlinux.h was produced on Linux 6.18 by
//
//	bpftool btf dump file /sys/kernel/btf/vmlinux format c
//
// The programs only use CO-RE relocatable accesses to it.
package bpf
