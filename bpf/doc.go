// Package bpf holds synth's BPF programs and their bpf2go bindings.
//
// synth.bpf.c is compiled by `make generate` (clang-19) into
// synth_x86_bpfel.o, which is committed together with the generated
// synth_x86_bpfel.go, so that `go build` needs no clang. `make check-generate`
// rebuilds both into a temporary directory and fails when they differ from
// the committed files.
//
// vmlinux.h was produced on Linux 6.18 by
//
//	bpftool btf dump file /sys/kernel/btf/vmlinux format c
//
// The programs only use CO-RE relocatable accesses to it.
package bpf
