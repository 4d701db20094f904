// Package floor is synth bench's floor of each walk (the rows
// floor-maple and floor-iter): a BPF program that visits every VMA the
// way a dump's walk does and emits nothing, the least a dump with that
// walk can cost.
//
// Its object, floor.bpf.c, compiles the dump's own bpf/walk.bpf.h with
// SYNTH_WALK_ONLY, so that the floor is the very walk the dump runs. It
// is generated here, not in package bpf, which every user of the
// library embeds: no dump loads or carries it. bpf/gen_test.go
// (make generate, make check-generate) regenerates it with the dump's.
//
// synth bench runs each floor in a process of its own, as it runs every
// row: the synth binary re-executed by Command, which Main, called first
// thing in main, turns into one run of the floor. synth dump knows no
// floor.
package floor
