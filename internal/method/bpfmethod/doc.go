// Package bpfmethod is the BPF method: iterator programs walk every
// task's VMAs in the kernel (the maple tree under RCU, validated per
// process, or the task_vma iterator) and emit MMAP2, COMM and FORK
// records into one perf ring per CPU, paced so that no synthesized record
// is lost. Build IDs come from a cache in a BPF map; files new to it are
// read in userspace (package buildid) while the walk's records are held.
// A BPF also carries the live side-band rings of a Session, and, once
// it watches unmaps, the unmap programs' rings, apart from the dump's so
// that unmaps take none of the room its pacing counts on. Every drain
// moves their records into a buffer the Session takes them from
// (TakeLive), and, during a dump, into the deduper (package dedupe) that
// keeps a mapping from being reported by both: records flow from the
// rings through the method to the Session, never back.
//
// BPF composes a type per resource, each closing its own: loaded (the
// objects, load.go and objects.go), rings (ring.go, scope.go), buildIDs
// (the build IDs' reads, buildid.go), walker (the dumps, with their held
// records, walk.go) and unmapLinks (unmap.go). A dump is a Generation
// (gen.go), which owns its read times.
//
// A synthesized record's path, a file per stage, in order:
//
//	bpf.go       BPF.Start begins a Generation and has the walker read the host
//	walk.go      walker.read: the kernel maps, then the walk's passes over the processes
//	pipe.go      runIter: a paced read of an iterator, the rings drained after each
//	             (ring.go drainInto, into a round of bpfrec.go); deliver: the round's
//	             records unwrapped (bpfrec.go unwrap), its live records to the live
//	             side (live.go), then its synthesized ones,
//	             expanded, judged by the Generation (gen.go keep), to the hold
//	lockwait.go  the task_vma iterator's reads, bounded by Options.ProcMapTimeout
//	hold.go      walkHold: the MMAP2 records per process, until the walk holds
//	buildid.go   the build IDs of files new to the cache, set into the held records
//	gen.go       Generation.Write: the held records to the assembler (package
//	             assemble), which hands them to the dump's emit in perf's order
package bpfmethod
