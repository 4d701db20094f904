package synth

import (
	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/kcache"
	"github.com/synth-dev/synth/internal/method/bpfmethod"
	"github.com/synth-dev/synth/internal/procfs"
)

// Options configure a dump. The zero value dumps the executable mappings
// of every process, and the kernel's maps, with rings of DefaultRingPages.
// Each field is documented where the methods take them from, in
// internal/config.
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
