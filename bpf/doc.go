// Package bpf holds synth's BPF programs and their bpf2go bindings.
//
// synth.bpf.c is compiled by `make generate` (clang-19) into
// synth_bpfel.o, which is committed together with the generated
// synth_bpfel.go, so that `go build` needs no clang. `make check-generate`
// rebuilds both into a temporary directory and fails when they differ from
// the committed files.
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
