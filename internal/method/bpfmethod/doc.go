// Package bpfmethod is the BPF method: iterator programs walk every
// task's VMAs in the kernel (the maple tree under RCU, validated per
// process, or the task_vma iterator) and emit MMAP2, COMM and FORK
// records into one perf ring per CPU, paced so that no synthesized record
// is lost. Build IDs come from a cache in a BPF map; files new to it are
// read in userspace (package buildid) while the walk's records are held.
// A BPF also carries the live side-band rings of a Session. Every drain
// moves their records into a buffer the Session takes them from
// (TakeLive), and, during a dump, into the deduper (package dedupe) that
// keeps a mapping from being reported by both: records flow from the
// rings through the method to the Session, never back.
package bpfmethod
