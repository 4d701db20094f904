package assemble

import (
	"fmt"
	"time"

	"github.com/synth-dev/synth/perfdata"
)

// Options configure a dump. The zero value dumps the executable mappings
// of every process, and the kernel's maps, with rings of DefaultRingPages.
type Options struct {
	// Pids restricts the dump to these processes; nil means all.
	Pids []int
	// Tids, if set, restricts the thread records (FORK, NAMESPACES,
	// COMM) to these threads, as perf record -t synthesizes only its
	// threads; Pids must hold their processes.
	Tids []int
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
	// records are written under (see Attr).
	SampleType uint64
}

// Walks: how the BPF method reads each process's VMAs.
const (
	// WalkAuto is WalkMaple where the kernel can prove the maple walk,
	// else WalkIter. The default.
	WalkAuto = "auto"
	// WalkMaple reads each process's maple tree under RCU from one task
	// iterator, and validates every walk; a process whose walk does not
	// hold is read again with the iterator. A kernel that cannot prove
	// the walk (see bpf/maple.bpf.h) fails the method.
	WalkMaple = "maple"
	// WalkIter reads every process with the kernel's task_vma
	// iterator, the build IDs of new files read as with WalkMaple.
	WalkIter = "iter"
)

// Ring sizes, in pages of data per CPU.
const (
	// DefaultRingPages is the ring size used when Options.RingPages is 0.
	DefaultRingPages = 256
	// MinRingPages is the smallest ring the pacing can keep lossless: it
	// must hold several of the largest records (a PATH_MAX file name).
	MinRingPages = 16
)

// DefaultBuildIDTimeout is how long a dump waits for the build IDs of
// files new to the cache when Options.BuildIDTimeout is 0.
const DefaultBuildIDTimeout = 2 * time.Second

// BuildIDWait is how long a dump waits for build IDs read in userspace.
func (o *Options) BuildIDWait() time.Duration {
	if o.BuildIDTimeout <= 0 {
		return DefaultBuildIDTimeout
	}
	return o.BuildIDTimeout
}

// DefaultProcMapTimeout is the wait for a process's mmap lock when
// Options.ProcMapTimeout is 0: perf record's --proc-map-timeout default.
const DefaultProcMapTimeout = 500 * time.Millisecond

// ProcMapWait is how long a dump waits for a process's mmap lock.
func (o *Options) ProcMapWait() time.Duration {
	if o.ProcMapTimeout <= 0 {
		return DefaultProcMapTimeout
	}
	return o.ProcMapTimeout
}

// DefaultSampleType is the sample type of perf's own dummy event:
// IP|TID|TIME|CPU|PERIOD.
const DefaultSampleType = perfdata.SampleIP | perfdata.SampleTID | perfdata.SampleTime |
	perfdata.SampleCPU | perfdata.SamplePeriod

// Check rejects options no method can honour.
func (o *Options) Check() error {
	switch o.Walk {
	case "", WalkAuto, WalkMaple, WalkIter:
	default:
		return fmt.Errorf("unknown walk %q (want %s, %s or %s)", o.Walk, WalkAuto, WalkMaple, WalkIter)
	}
	if p := o.RingPages; p != 0 && (p < MinRingPages || p&(p-1) != 0) {
		return fmt.Errorf("ring size %d pages: want a power of two >= %d", p, MinRingPages)
	}
	return nil
}

// SampleTypeOrDefault is the sample type of the records' trailers.
func (o *Options) SampleTypeOrDefault() uint64 {
	if o.SampleType == 0 {
		return DefaultSampleType
	}
	return o.SampleType
}

// RecordFlags returns the attr bits of the optional records a dump with
// these options synthesizes: non-executable mappings (Data), NAMESPACES,
// CGROUP, KSYMBOL and BPF_EVENT. A side-band that is to report the same
// opens with them.
func (o *Options) RecordFlags() uint64 {
	var flags uint64
	if !o.NoKernel {
		flags |= perfdata.AttrKsymbol
		if !o.NoBPFEvent {
			flags |= perfdata.AttrBPFEvent
		}
	}
	if o.Data {
		flags |= perfdata.AttrMmapData
	}
	if o.Namespaces {
		flags |= perfdata.AttrNamespaces
	}
	if o.Cgroups {
		flags |= perfdata.AttrCgroup
	}
	return flags
}

// Attr returns the perf_event_attr that records of a dump with these
// options are written under: a software dummy event, like the one
// `perf record -e dummy` writes, with the side-band bits of what the dump
// synthesizes.
func (o *Options) Attr() perfdata.Attr {
	flags := uint64(perfdata.AttrMmap | perfdata.AttrComm | perfdata.AttrTask |
		perfdata.AttrSampleIDAll | perfdata.AttrMmap2 | perfdata.AttrCommExec |
		perfdata.AttrExcludeGuest | o.RecordFlags())
	return perfdata.Attr{
		Type:         perfdata.TypeSoftware,
		Size:         perfdata.AttrSize,
		Config:       perfdata.CountSWDummy,
		SamplePeriod: 1,
		SampleType:   o.SampleTypeOrDefault(),
		Flags:        flags,
	}
}

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
	Skipped int // requested processes that were gone
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

	// Tables are what perf.data's header keeps about the records
	// emitted: build IDs (none with NoBuildID) and BPF programs.
	Tables perfdata.Tables `json:"-"`
}

// Step is a part of a dump, or of the loading before it, and its wall
// time.
//
// It is a type literal, as synth.Step is, so that synth.Stats and Stats
// convert into each other.
type Step = struct {
	Name string
	Took time.Duration
}

// Time appends to steps the step name, begun at start.
func Time(steps []Step, name string, start time.Time) []Step {
	return append(steps, Step{name, time.Since(start)})
}
