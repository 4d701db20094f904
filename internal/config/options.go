package config

import (
	"fmt"
	"time"

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
	// and tried again by the next dump. It bounds too how long a
	// session's drain waits for the build IDs of its live MMAP2
	// records' files.
	BuildIDTimeout time.Duration
	// ProcMapTimeout bounds how long a dump waits for a process's mmap
	// lock: in the kernel's task_vma iterator, and in the reads of
	// /proc/PID/maps where the kernel takes the lock for them (6.1 does,
	// 6.18 does not); 0 means DefaultProcMapTimeout. A process whose
	// lock is held longer (a writer stuck while holding it) is left out
	// and named in Stats.LockedOut, as perf record's --proc-map-timeout
	// leaves the rest of a slow /proc/PID/maps out.
	ProcMapTimeout time.Duration
	// NoLive dumps with the BPF method without the live side-band: a
	// mapping made while the dump runs may then be missed. Comparisons
	// use it to measure what the side-band costs.
	NoLive bool
	// Walk is how the BPF method reads each process's VMAs: WalkAuto
	// (the default, also for ""), WalkMaple or WalkIter.
	Walk Walk
	// RingPages is the data size of each per-CPU ring, in pages: a power
	// of two, at least MinRingPages; 0 means DefaultRingPages.
	RingPages int
	// SampleType selects the sample_id_all trailer appended to every
	// record; 0 means DefaultSampleType. It must match the attr the
	// records are written under (see Options.Attr).
	SampleType uint64
	// KernelCache is the kernel cache: a directory where the BPF method
	// keeps its programs as linked against the running kernel, keyed on
	// the kernel's build ID, so that the next load skips the kernel's
	// BTF (about half of a one-shot dump). "", the default, keeps none:
	// the library writes no directory it was not given. The directory
	// is created mode 0700 and must be the effective user's, with no
	// group or other access; the synth command uses DefaultKernelCache
	// when it runs as root.
	KernelCache string
}

// Defaults and limits of Options.
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

// Check rejects options no method can honour: a target that sets more
// than one selector, an unknown walk, a ring size that is not a power of
// two of at least MinRingPages.
func (o *Options) Check() error {
	if err := o.Target.Check(); err != nil {
		return err
	}
	if _, err := ParseWalk(string(o.Walk)); err != nil {
		return err
	}
	if p := o.RingPages; p != 0 && (p < MinRingPages || p&(p-1) != 0) {
		return fmt.Errorf("ring size %d pages: want a power of two >= %d", p, MinRingPages)
	}
	return nil
}

// Attr returns the perf_event_attr that records of a dump with these
// options are written under: a software dummy event, like the one
// `perf record -e dummy` writes, with the side-band bits of what the dump
// synthesizes (non-executable mappings, NAMESPACES, CGROUP, KSYMBOL,
// BPF_EVENT).
func (o *Options) Attr() perfdata.Attr {
	flags := uint64(perfdata.AttrMmap | perfdata.AttrComm | perfdata.AttrTask |
		perfdata.AttrSampleIDAll | perfdata.AttrMmap2 | perfdata.AttrCommExec |
		perfdata.AttrExcludeGuest | o.recordFlags())
	return perfdata.Attr{
		Type:         perfdata.TypeSoftware,
		Size:         perfdata.AttrSize,
		Config:       perfdata.CountSWDummy,
		SamplePeriod: 1,
		SampleType:   o.sampleType(),
		Flags:        flags,
	}
}

// sampleType is the sample type of the records' trailers.
func (o *Options) sampleType() uint64 {
	if o.SampleType == 0 {
		return DefaultSampleType
	}
	return o.SampleType
}

// recordFlags are the attr bits of the optional records a dump with
// these options synthesizes: non-executable mappings (Data), NAMESPACES,
// CGROUP, KSYMBOL and BPF_EVENT.
func (o *Options) recordFlags() uint64 {
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

// Resolved are Options as a method takes them: with the target resolved
// to its processes, once, by whoever opens the method. The methods read
// Pids, not Target.Pids (a thread's id there names its process here),
// and Target.Tids for the threads a dump reports.
type Resolved struct {
	Options
	Pids []int // the target's processes, ascending; nil: every process
}

// WithLoaded returns r with the fields a method takes when it loads
// taken from loaded, the options it loaded with: NoKernel (the kernel
// text is read then), BuildIDTimeout (its build-ID reader), NoLive,
// Walk, RingPages and KernelCache (the programs and rings). A method reads every
// other field, the processes and which records the dumps write, at
// each dump: its SetOptions may change them between dumps.
func (r Resolved) WithLoaded(loaded Resolved) Resolved {
	r.NoKernel, r.BuildIDTimeout, r.NoLive = loaded.NoKernel, loaded.BuildIDTimeout, loaded.NoLive
	r.Walk, r.RingPages, r.KernelCache = loaded.Walk, loaded.RingPages, loaded.KernelCache
	return r
}

// Partial reports whether r covers only some processes.
func (r *Resolved) Partial() bool { return len(r.Pids) > 0 || len(r.Target.Tids) > 0 }

// BuildIDWait is how long a dump waits for build IDs read in userspace.
func (r *Resolved) BuildIDWait() time.Duration {
	if r.BuildIDTimeout <= 0 {
		return DefaultBuildIDTimeout
	}
	return r.BuildIDTimeout
}

// ProcMapWait is how long a dump waits for a process's mmap lock.
func (r *Resolved) ProcMapWait() time.Duration {
	if r.ProcMapTimeout <= 0 {
		return DefaultProcMapTimeout
	}
	return r.ProcMapTimeout
}

// SampleTypeOrDefault is the sample type of the records' trailers.
func (r *Resolved) SampleTypeOrDefault() uint64 { return r.sampleType() }

// RecordFlags returns the attr bits of the optional records a dump with
// these options synthesizes: non-executable mappings (Data), NAMESPACES,
// CGROUP, KSYMBOL and BPF_EVENT. A side-band that is to report the same
// opens with them.
func (r *Resolved) RecordFlags() uint64 { return r.recordFlags() }
