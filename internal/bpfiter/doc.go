// Package bpfiter runs BPF task and task_vma iterators: attached to every
// task, or, through a raw BPF_LINK_CREATE, to the threads of one process
// (cilium/ebpf's link.AttachIter has no task parameter), and read as the
// seq_file they are.
package bpfiter
