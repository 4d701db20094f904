// Package bpfmethod is the BPF method: iterator programs walk every
// task's VMAs in the kernel (the maple tree under RCU, validated per
// process, or the task_vma iterator) and emit MMAP2, COMM and FORK
// records into one perf ring per CPU, paced so that no synthesized record
// is lost. Build IDs come from a cache in a BPF map; files new to it are
// read in userspace (package buildid) while the walk's records are held.
// A BPF also carries the live side-band rings a Session reads between
// dumps, with the deduper that keeps a mapping from being reported by
// both.
package bpfmethod
