package config

import (
	"time"

	"github.com/synth-dev/synth/perfdata"
)

// Stats describe one dump.
type Stats struct {
	Method MethodName // MethodBPF, MethodProcmaps or MethodProcquery
	// Walk is how the BPF method read the VMAs: WalkMaple or WalkIter;
	// "" for the /proc methods.
	Walk Walk
	// WalkFallback says why Walk is WalkIter when WalkAuto was asked:
	// a *synth.ProgramError where the kernel refused the maple walk's
	// program.
	WalkFallback error
	Processes    int // processes with at least one record
	Threads      int // COMM records of tasks
	Mappings     int // MMAP2 records of processes
	Kernel       int // kernel and module map records, BPF symbols
	// BPFPrograms are the loaded BPF programs whose symbols were written.
	BPFPrograms int
	Cgroups     int // CGROUP records (Options.Cgroups)
	Records     int // every record handed to the caller
	// Lost are synthesized records the programs could not write: the
	// dump is incomplete. The pacing keeps it 0.
	Lost uint64
	// LiveLost are live records the kernel dropped while the dump ran
	// (its side-band ring was full). They are in the stream as
	// PERF_RECORD_LOST records, as perf writes them.
	LiveLost uint64
	Stale    int // records of another generation, dropped
	// Duplicates are synthesized records dropped because the live
	// stream reported the mapping first (sessions only).
	Duplicates int
	// Live are the live records written with the dump: what changed
	// while it ran (the BPF method with its side-band).
	Live    int
	Skipped int // processes of the target that were gone by the dump
	// Unreadable are processes whose mappings the /proc methods were not
	// allowed to read (another user's, without CAP_SYS_PTRACE): they
	// are reported with their threads and without mappings.
	Unreadable int
	// LockedOut are processes left out because their mmap lock was not
	// taken within Options.ProcMapTimeout: their threads are reported,
	// their mappings are not.
	LockedOut []int
	Reads     int // paced reads of the iterators
	// WalksInvalid are processes whose maple walk did not hold (the
	// process changed while it was read): they were read again with
	// the task_vma iterator.
	WalksInvalid int
	// Resumed are maple walks that went on in another chunk: a process
	// with more records than one object may put into the rings.
	Resumed int
	Elapsed time.Duration // wall time of the dump
	// Steps say where the time went: the loading (in the first dump
	// after it only: the BPF method's object, the kernel's BTF, maps,
	// each program), then the dump's own phases.
	Steps []Step
	// KernelCacheMiss says why the BPF method's kernel cache served none
	// of the programs loaded before the dump (or why it dropped one):
	// they were linked against the kernel's BTF. nil when the cache
	// served them, or was not used (Options.KernelCache empty).
	KernelCacheMiss error
	// ProgramTime is how long the BPF method's programs ran in the
	// kernel during the dump, as the kernel counts it while BPF
	// statistics are on (sysctl kernel.bpf_stats_enabled=1, or
	// ebpf.EnableStats); 0 when they are off. Elapsed minus it is what
	// the rest (syscalls, userspace) cost.
	ProgramTime time.Duration

	FileMappings    int // MMAP2 records of file-backed mappings
	BuildIDMappings int // of which carry a build ID
	FilesRead       int // files new to the build-ID cache read in this dump
	// FilesReadEarly are those of FilesRead whose read began while the
	// walk ran, as soon as it noted the file (the BPF method).
	FilesReadEarly int
	BuildIDsRead   int // of which have a build ID
	// BuildIDTimeouts are files whose build ID was not read within
	// Options.BuildIDTimeout (reads that block: FUSE, network
	// filesystems): their mappings are identified by maj/min/ino, and a
	// later dump tries again.
	BuildIDTimeouts int
	// BuildIDsUncached are files read whose build ID the cache did not
	// take: a miss, read again by a later dump.
	BuildIDsUncached int
	Cached           int // files in the build-ID cache with a build ID

	// Tables are what a perf.data header keeps about the dump's records,
	// as perf record collects them: the build IDs of the kernel, its
	// modules and the files mapped (none with NoBuildID), and the BPF
	// programs whose PROG_LOAD events were written, with their BTF.
	// synth.WritePerfData writes them; a caller that writes the records
	// itself passes them to perfdata.Writer.WriteTables.
	Tables perfdata.Tables `json:"-"`
}

// Step is a part of a dump, or of the loading before it, and its wall
// time.
type Step struct {
	Name string
	Took time.Duration
}
