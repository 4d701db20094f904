package synth

import (
	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/kcache"
	"github.com/synth-dev/synth/internal/method/bpfmethod"
	"github.com/synth-dev/synth/internal/procfs"
)

// Options configure a dump. The zero value dumps the executable mappings
// of every process, and the kernel's maps, with rings of DefaultRingPages.
// The type is declared in internal/config, where the methods take it
// from; its fields, each doc's first sentence (TestAliasDocs keeps the
// list whole):
//   - Target is what the dumps cover, and a Session streams and
//     samples: the zero Target is the whole host.
//   - Data includes non-executable mappings, as perf record -d does.
//   - Namespaces adds a PERF_RECORD_NAMESPACES for every task, as
//     perf record --namespaces does.
//   - Cgroups adds a PERF_RECORD_CGROUP for every cgroup of the
//     cgroup2 hierarchy, as perf record --all-cgroups does.
//   - NoKernel leaves out the kernel and module maps and the symbols
//     of BPF programs.
//   - NoBPFEvent leaves out the PERF_RECORD_BPF_EVENT of each loaded
//     BPF program (its KSYMBOL records stay), as perf record --no-
//     bpf-event.
//   - NoBuildID writes every MMAP2 record with maj/min/ino instead
//     of the build ID of its file.
//   - BuildIDTimeout bounds how long a dump waits for the build IDs
//     of files new to the cache, read from the files in userspace; 0
//     means DefaultBuildIDTimeout.
//   - ProcMapTimeout bounds how long a dump waits for a process's
//     mmap lock: in the kernel's task_vma iterator, and in the reads
//     of /proc/PID/maps where the kernel takes the lock for them
//     (6.1 does, 6.18 does not); 0 means DefaultProcMapTimeout.
//   - NoLive dumps with the BPF method without the live side-band: a
//     mapping made while the dump runs may then be missed.
//   - Walk is how the BPF method reads each process's VMAs: WalkAuto
//     (the default, also for ""), WalkMaple or WalkIter.
//   - RingPages is the data size of each per-CPU ring, in pages: a
//     power of two, at least MinRingPages; 0 means DefaultRingPages.
//   - SampleType selects the sample_id_all trailer appended to every
//     record; 0 means DefaultSampleType.
//   - KernelCache is the kernel cache: a directory where the BPF
//     method keeps its programs as linked against the running
//     kernel, keyed on the kernel's build ID, so that the next load
//     skips the kernel's BTF (about half of a one-shot dump).
type Options = config.Options

// resolve checks o and resolves its target, for a method or a session
// about to open: the processes of the target.
func resolve(o *Options) (config.Resolved, error) {
	if err := o.Check(); err != nil {
		return config.Resolved{}, err
	}
	// Every method reads /proc (BPF for build IDs and targets), and so
	// does the target: it must number processes as this process's pid
	// namespace does.
	if err := procfs.CheckPidNS(); err != nil {
		return config.Resolved{}, err
	}
	pids, err := o.Target.Processes()
	if err != nil {
		return config.Resolved{}, err
	}
	return config.Resolved{Options: *o, Pids: pids}, nil
}

// Defaults and limits of Options.
const (
	// DefaultSampleType is the sample type of perf's own dummy event:
	// IP|TID|TIME|CPU|PERIOD.
	DefaultSampleType = config.DefaultSampleType
	// DefaultRingPages is the ring size used when Options.RingPages is 0.
	DefaultRingPages = config.DefaultRingPages
	// MinRingPages is the smallest ring the pacing can keep lossless: it
	// must hold several of the largest records (a PATH_MAX file name).
	MinRingPages = config.MinRingPages
	// DefaultBuildIDTimeout is how long a dump waits for the build IDs
	// of files new to the cache when Options.BuildIDTimeout is 0.
	DefaultBuildIDTimeout = config.DefaultBuildIDTimeout
	// DefaultProcMapTimeout is how long a dump waits for a process's
	// mmap lock when Options.ProcMapTimeout is 0: perf record's
	// --proc-map-timeout default.
	DefaultProcMapTimeout = config.DefaultProcMapTimeout
	// DefaultKernelCache is the kernel cache (Options.KernelCache) of
	// the synth command run as root.
	DefaultKernelCache = kcache.DefaultDir
)

// Walk is how the BPF method reads each process's VMAs (Options.Walk,
// Stats.Walk).
type Walk = config.Walk

// Walks.
const (
	// WalkAuto is WalkMaple where the kernel can prove the maple walk,
	// else WalkIter. The default.
	WalkAuto = config.WalkAuto
	// WalkMaple reads each process's maple tree under RCU from one task
	// iterator, and validates every walk; a process whose walk does not
	// hold is read again with the iterator. A kernel that cannot prove
	// the walk fails the method.
	WalkMaple = config.WalkMaple
	// WalkIter reads every process with the kernel's task_vma iterator.
	WalkIter = config.WalkIter
)

// ParseWalk returns the walk named s: auto, maple or iter; "" is
// WalkAuto.
func ParseWalk(s string) (Walk, error) { return config.ParseWalk(s) }

// Stats describe one dump. The type is declared in internal/config,
// where the methods fill it; its fields, each doc's first sentence
// (TestAliasDocs keeps the list whole):
//   - Method: MethodBPF, MethodProcmaps or MethodProcquery
//   - Walk is how the BPF method read the VMAs: WalkMaple or
//     WalkIter; "" for the /proc methods.
//   - WalkFallback says why Walk is WalkIter when WalkAuto was
//     asked: a *synth.ProgramError where the kernel refused the
//     maple walk's program.
//   - Processes: processes with at least one record
//   - Threads: COMM records of tasks
//   - Mappings: MMAP2 records of processes
//   - Kernel: kernel and module map records, BPF symbols
//   - BPFPrograms are the loaded BPF programs whose symbols were
//     written.
//   - Cgroups: CGROUP records (Options.Cgroups)
//   - Records: every record handed to the caller
//   - Lost are synthesized records the programs could not write: the
//     dump is incomplete.
//   - LiveLost are live records the kernel dropped while the dump
//     ran (its side-band ring was full).
//   - Stale: records of another generation, dropped
//   - Duplicates are synthesized records dropped because the live
//     stream reported the mapping first (sessions only).
//   - Live are the live records written with the dump: what changed
//     while it ran (the BPF method with its side-band).
//   - Skipped: processes of the target that were gone by the dump
//   - Unreadable are processes whose mappings the /proc methods were
//     not allowed to read (another user's, without CAP_SYS_PTRACE):
//     they are reported with their threads and without mappings.
//   - LockedOut are processes left out because their mmap lock was
//     not taken within Options.ProcMapTimeout: their threads are
//     reported, their mappings are not.
//   - Reads: paced reads of the iterators
//   - WalksInvalid are processes whose maple walk did not hold (the
//     process changed while it was read): they were read again with
//     the task_vma iterator.
//   - Resumed are maple walks that went on in another chunk: a
//     process with more records than one object may put into the
//     rings.
//   - Elapsed: wall time of the dump
//   - Steps say where the time went: the loading (in the first dump
//     after it only: the BPF method's object, the kernel's BTF,
//     maps, each program), then the dump's own phases.
//   - KernelCacheMiss says why the BPF method's kernel cache served
//     none of the programs loaded before the dump (or why it dropped
//     one): they were linked against the kernel's BTF.
//   - ProgramTime is how long the BPF method's programs ran in the
//     kernel during the dump, as the kernel counts it while BPF
//     statistics are on (sysctl kernel.bpf_stats_enabled=1, or
//     ebpf.EnableStats); 0 when they are off.
//   - FileMappings: MMAP2 records of file-backed mappings
//   - BuildIDMappings: of which carry a build ID
//   - FilesRead: files new to the build-ID cache read in this dump
//   - FilesReadEarly are those of FilesRead whose read began while
//     the walk ran, as soon as it noted the file (the BPF method).
//   - BuildIDsRead: of which have a build ID
//   - BuildIDTimeouts are files whose build ID was not read within
//     Options.BuildIDTimeout (reads that block: FUSE, network
//     filesystems): their mappings are identified by maj/min/ino,
//     and a later dump tries again.
//   - BuildIDsUncached are files read whose build ID the cache did
//     not take: a miss, read again by a later dump.
//   - Cached: files in the build-ID cache with a build ID
//   - Tables are what a perf.data header keeps about the dump's
//     records, as perf record collects them: the build IDs of the
//     kernel, its modules and the files mapped (none with
//     NoBuildID), and the BPF programs whose PROG_LOAD events were
//     written, with their BTF.
type Stats = config.Stats

// Step is a part of a dump, or of the loading before it, and its wall
// time.
type Step = config.Step

// PermissionError reports that the process lacks a privilege a method
// needs: CAP_BPF and CAP_PERFMON for the BPF method, CAP_PERFMON (or a
// low perf_event_paranoid) for sampling. errors.Is(err, os.ErrPermission)
// holds for it.
type PermissionError = bpfmethod.PermissionError

// ProgramError reports that the kernel refused to load one of the BPF
// method's programs: it lacks a helper, kfunc, iterator or field the
// program needs, or its verifier could not prove the program safe. Its
// Error is one line, with the verifier's verdict (the error, the
// instruction and its source line) where there is one; VerifierLog has
// the end of the verifier's log.
type ProgramError = bpfmethod.ProgramError
