package synth

import (
	"github.com/synth-dev/synth/internal/dump"
	"github.com/synth-dev/synth/internal/method/bpfdump"
)

// Options configure a dump (see internal/dump). The zero value dumps the
// executable mappings of every process, and the kernel's maps, with
// rings of DefaultRingPages.
type Options = dump.Options

// Stats describe one dump.
type Stats = dump.Stats

// Defaults and limits of Options.
const (
	// DefaultSampleType is the sample type of perf's own dummy event:
	// IP|TID|TIME|CPU|PERIOD.
	DefaultSampleType = dump.DefaultSampleType
	// DefaultRingPages is the ring size used when Options.RingPages is 0.
	DefaultRingPages = dump.DefaultRingPages
	// MinRingPages is the smallest ring the pacing can keep lossless.
	MinRingPages = dump.MinRingPages
	// DefaultBuildIDTimeout is how long a dump waits for the build IDs
	// of files new to the cache when Options.BuildIDTimeout is 0.
	DefaultBuildIDTimeout = dump.DefaultBuildIDTimeout
	// DefaultProcMapTimeout is how long a dump waits for a process's
	// mmap lock when Options.ProcMapTimeout is 0.
	DefaultProcMapTimeout = dump.DefaultProcMapTimeout
)

// Walks: how the BPF method reads each process's VMAs (Options.Walk).
const (
	// WalkAuto is WalkMaple where the kernel can prove the maple walk,
	// else WalkIter. The default.
	WalkAuto = dump.WalkAuto
	// WalkMaple reads each process's maple tree under RCU from one task
	// iterator, and validates every walk; a process whose walk does not
	// hold is read again with the iterator. A kernel that cannot prove
	// the walk fails the method.
	WalkMaple = dump.WalkMaple
	// WalkIter reads every process with the kernel's task_vma iterator.
	WalkIter = dump.WalkIter
)

// PermissionError reports that the process lacks a privilege a method
// needs. errors.Is(err, os.ErrPermission) holds for it.
type PermissionError = bpfdump.PermissionError

// BPF is the BPF method without the live side-band (Options.NoLive): it
// holds the loaded programs and the per-CPU rings, and can run any
// number of dumps, one at a time.
type BPF = bpfdump.BPF

// NewBPF checks privileges, loads the iterator programs and opens the
// rings. Missing privileges give a *PermissionError.
func NewBPF(opts Options) (*BPF, error) {
	if err := opts.Check(); err != nil {
		return nil, err
	}
	return bpfdump.New(opts)
}
