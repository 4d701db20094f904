package synth

import (
	"time"

	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/method/bpfmethod"
	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/perfdata"
)

// Options configure a dump. The zero value dumps the executable mappings
// of every process, and the kernel's maps, with rings of DefaultRingPages.
type Options struct {
	// Target is what the dumps cover, and a Session streams and samples:
	// the zero Target is the whole host. It is resolved to processes
	// once, when the method or the session opens (see Target.Processes).
	Target Target
	// Data includes non-executable mappings, as perf record -d does.
	Data bool
	// Namespaces adds a PERF_RECORD_NAMESPACES for every task, as perf
	// record --namespaces does.
	Namespaces bool
	// Cgroups adds a PERF_RECORD_CGROUP for every cgroup of the cgroup2
	// hierarchy, as perf record --all-cgroups does.
	Cgroups bool
	// NoKernel leaves out the kernel and module maps and the symbols of
	// BPF programs.
	NoKernel bool
	// NoBPFEvent leaves out the PERF_RECORD_BPF_EVENT of each loaded BPF
	// program (its KSYMBOL records stay), as perf record --no-bpf-event.
	NoBPFEvent bool
	// NoBuildID writes every MMAP2 record with maj/min/ino instead of
	// the build ID of its file.
	NoBuildID bool
	// BuildIDTimeout bounds how long a dump waits for the build IDs of
	// files new to the cache, read from the files in userspace; 0 means
	// DefaultBuildIDTimeout. A file not read in time (its reads block)
	// is identified by maj/min/ino, counted in Stats.BuildIDTimeouts,
	// and tried again by the next dump.
	BuildIDTimeout time.Duration
	// ProcMapTimeout bounds how long a dump waits for a process's mmap
	// lock: in the kernel's task_vma iterator, and in the reads of
	// /proc/PID/maps where the kernel takes the lock for them (6.1 does,
	// 6.18 does not); 0 means DefaultProcMapTimeout. A process whose lock is held longer (a
	// writer stuck while holding it) is left out and named in
	// Stats.LockedOut, as perf record's --proc-map-timeout leaves the
	// rest of a slow /proc/PID/maps out.
	ProcMapTimeout time.Duration
	// NoLive dumps with the BPF method without the live side-band: a
	// mapping made while the dump runs may then be missed. Comparisons
	// use it to measure what the side-band costs.
	NoLive bool
	// Walk is how the BPF method reads each process's VMAs: WalkAuto
	// (the default, also for ""), WalkMaple or WalkIter.
	Walk string
	// RingPages is the data size of each per-CPU ring, in pages: a power
	// of two, at least MinRingPages; 0 means DefaultRingPages.
	RingPages int
	// SampleType selects the sample_id_all trailer appended to every
	// record; 0 means DefaultSampleType. It must match the attr the
	// records are written under (see Options.Attr).
	SampleType uint64
}

// internal is o as the methods take it, for the whole host: every field
// but the target, which open adds (TestOptionsInternal checks that
// none is left out).
func (o *Options) internal() assemble.Options {
	return assemble.Options{
		Data:           o.Data,
		Namespaces:     o.Namespaces,
		Cgroups:        o.Cgroups,
		NoKernel:       o.NoKernel,
		NoBPFEvent:     o.NoBPFEvent,
		NoBuildID:      o.NoBuildID,
		BuildIDTimeout: o.BuildIDTimeout,
		ProcMapTimeout: o.ProcMapTimeout,
		NoLive:         o.NoLive,
		Walk:           o.Walk,
		RingPages:      o.RingPages,
		SampleType:     o.SampleType,
	}
}

// open checks o and resolves its target, for a method or a session about
// to open: the processes of the target, and its threads.
func (o *Options) open() (assemble.Options, error) {
	if err := o.Check(); err != nil {
		return assemble.Options{}, err
	}
	// Every method reads /proc (BPF for build IDs and targets), and so
	// does the target: it must number processes as this process's pid
	// namespace does.
	if err := procfs.CheckPidNS(); err != nil {
		return assemble.Options{}, err
	}
	d := o.internal()
	var err error
	if d.Pids, err = o.Target.Processes(); err != nil {
		return assemble.Options{}, err
	}
	d.Tids = o.Target.Tids
	return d, nil
}

// Check rejects options no method can honour: a target that sets more
// than one selector, an unknown walk, a ring size that is not a power of
// two of at least MinRingPages.
func (o *Options) Check() error {
	if err := o.Target.Check(); err != nil {
		return err
	}
	d := o.internal()
	return d.Check()
}

// sampleType is the sample type of the records' trailers.
func (o *Options) sampleType() uint64 {
	d := o.internal()
	return d.SampleTypeOrDefault()
}

// recordFlags are the attr bits of the optional records a dump with
// these options synthesizes.
func (o *Options) recordFlags() uint64 {
	d := o.internal()
	return d.RecordFlags()
}

// Attr returns the perf_event_attr that records of a dump with these
// options are written under: a software dummy event, like the one
// `perf record -e dummy` writes, with the side-band bits of what the dump
// synthesizes (non-executable mappings, NAMESPACES, CGROUP, KSYMBOL,
// BPF_EVENT).
func (o *Options) Attr() perfdata.Attr {
	d := o.internal()
	return d.Attr()
}

// Defaults and limits of Options. Their values are the methods' own
// (TestOptionConstants).
const (
	// DefaultSampleType is the sample type of perf's own dummy event:
	// IP|TID|TIME|CPU|PERIOD.
	DefaultSampleType = perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime |
		perfdata.SampleCPU | perfdata.SamplePeriod
	// DefaultRingPages is the ring size used when Options.RingPages is 0.
	DefaultRingPages = 256
	// MinRingPages is the smallest ring the pacing can keep lossless: it
	// must hold several of the largest records (a PATH_MAX file name).
	MinRingPages = 16
	// DefaultBuildIDTimeout is how long a dump waits for the build IDs
	// of files new to the cache when Options.BuildIDTimeout is 0.
	DefaultBuildIDTimeout = 2 * time.Second
	// DefaultProcMapTimeout is how long a dump waits for a process's
	// mmap lock when Options.ProcMapTimeout is 0: perf record's
	// --proc-map-timeout default.
	DefaultProcMapTimeout = 500 * time.Millisecond
)

// Walks: how the BPF method reads each process's VMAs (Options.Walk).
const (
	// WalkAuto is WalkMaple where the kernel can prove the maple walk,
	// else WalkIter. The default.
	WalkAuto = "auto"
	// WalkMaple reads each process's maple tree under RCU from one task
	// iterator, and validates every walk; a process whose walk does not
	// hold is read again with the iterator. A kernel that cannot prove
	// the walk fails the method.
	WalkMaple = "maple"
	// WalkIter reads every process with the kernel's task_vma iterator.
	WalkIter = "iter"
)

// Stats describe one dump.
type Stats struct {
	Method string // "bpf", ...
	// Walk is how the BPF method read the VMAs: WalkMaple or WalkIter.
	Walk string
	// WalkFallback says why Walk is WalkIter when WalkAuto was asked: a
	// *ProgramError where the kernel refused the maple walk's program.
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
	// WritePerfData writes them; a caller that writes the records
	// itself passes them to perfdata.Writer.WriteTables.
	Tables perfdata.Tables `json:"-"`
}

// Step is a part of a dump, or of the loading before it, and its wall
// time.
type Step struct {
	Name string
	Took time.Duration
}

// statsOf is st as the package's callers see it. TestStatsOf holds it to
// every field.
func statsOf(st assemble.Stats) Stats {
	s := Stats{
		Method: st.Method, Walk: st.Walk, WalkFallback: st.WalkFallback,
		Processes: st.Processes, Threads: st.Threads, Mappings: st.Mappings, Kernel: st.Kernel,
		BPFPrograms: st.BPFPrograms, Cgroups: st.Cgroups, Records: st.Records,
		Lost: st.Lost, LiveLost: st.LiveLost, Stale: st.Stale, Duplicates: st.Duplicates,
		Live: st.Live, Skipped: st.Skipped, Unreadable: st.Unreadable, LockedOut: st.LockedOut,
		Reads: st.Reads, WalksInvalid: st.WalksInvalid, Resumed: st.Resumed,
		Elapsed: st.Elapsed, ProgramTime: st.ProgramTime,
		FileMappings: st.FileMappings, BuildIDMappings: st.BuildIDMappings,
		FilesRead: st.FilesRead, FilesReadEarly: st.FilesReadEarly, BuildIDsRead: st.BuildIDsRead,
		BuildIDTimeouts: st.BuildIDTimeouts, BuildIDsUncached: st.BuildIDsUncached, Cached: st.Cached,
		Tables: st.Tables,
	}
	if st.Steps != nil {
		s.Steps = make([]Step, len(st.Steps))
		for i, step := range st.Steps {
			s.Steps[i] = Step(step)
		}
	}
	return s
}

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
