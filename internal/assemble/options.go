package assemble

import (
	"fmt"
	"time"

	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/perfdata"
)

// Options are synth.Options, where each field is documented, with the
// target resolved: Pids are its processes (nil: every process), Tids its
// threads if it names threads. synth copies its Options into these field
// by field (TestOptionsInternal checks that none is left out).
type Options struct {
	Pids           []int
	Tids           []int
	Data           bool
	Namespaces     bool
	Cgroups        bool
	NoKernel       bool
	NoBPFEvent     bool
	NoBuildID      bool
	BuildIDTimeout time.Duration
	ProcMapTimeout time.Duration
	NoLive         bool
	Walk           string
	RingPages      int
	SampleType     uint64
}

// WithLoaded returns o with the fields a method takes when it loads
// taken from loaded, the options it loaded with: NoKernel (the kernel
// text is read then), BuildIDTimeout (its build-ID reader), NoLive,
// Walk and RingPages (the programs and rings). A method reads every
// other field, the processes and which records the dumps write, at
// each dump: its SetOptions may change them between dumps.
func (o Options) WithLoaded(loaded Options) Options {
	o.NoKernel, o.BuildIDTimeout, o.NoLive = loaded.NoKernel, loaded.BuildIDTimeout, loaded.NoLive
	o.Walk, o.RingPages = loaded.Walk, loaded.RingPages
	return o
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

// Time appends to steps the step name, begun at start.
func Time(steps []config.Step, name string, start time.Time) []config.Step {
	return append(steps, config.Step{Name: name, Took: time.Since(start)})
}
