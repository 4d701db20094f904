// Package bpfprog reads the BPF programs loaded in the kernel as perf
// record synthesizes them (tools/perf/util/bpf-event.c): the address,
// length and name of each JITed function, for PERF_RECORD_KSYMBOL; the
// id and tag of the program, for PERF_RECORD_BPF_EVENT; and the program
// information and BTF that perf keeps in the HEADER_BPF_PROG_INFO and
// HEADER_BPF_BTF sections for perf annotate and perf report.
//
// It uses the bpf(2) commands BPF_PROG_GET_NEXT_ID, BPF_PROG_GET_FD_BY_ID,
// BPF_OBJ_GET_INFO_BY_FD and BPF_BTF_GET_FD_BY_ID, which need
// CAP_SYS_ADMIN; without it there is nothing to read (ErrPermission).
package bpfprog
