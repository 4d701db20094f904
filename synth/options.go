package synth

import (
	"time"

	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/config"
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
