package config

import "fmt"

// Walk is how the BPF method reads each process's VMAs (Options.Walk,
// Stats.Walk). "" is WalkAuto in Options, and in Stats a method that
// does not walk (the /proc methods).
type Walk string

// Walks.
const (
	// WalkAuto is WalkMaple where the kernel can prove the maple walk,
	// else WalkIter. The default.
	WalkAuto Walk = "auto"
	// WalkMaple reads each process's maple tree under RCU from one task
	// iterator, and validates every walk; a process whose walk does not
	// hold is read again with the iterator. A kernel that cannot prove
	// the walk (see bpf/maple.bpf.h) fails the method.
	WalkMaple Walk = "maple"
	// WalkIter reads every process with the kernel's task_vma iterator,
	// the build IDs of new files read as with WalkMaple.
	WalkIter Walk = "iter"
)

func (w Walk) String() string { return string(w) }

// ParseWalk returns the walk named s: auto, maple or iter; "" is
// WalkAuto.
func ParseWalk(s string) (Walk, error) {
	switch w := Walk(s); w {
	case "":
		return WalkAuto, nil
	case WalkAuto, WalkMaple, WalkIter:
		return w, nil
	}
	return "", fmt.Errorf("unknown walk %q (want %s, %s or %s)", s, WalkAuto, WalkMaple, WalkIter)
}

// MethodName names a way to synthesize the host's state (Stats.Method,
// and synth.OpenMethod's choice).
type MethodName string

// Methods.
const (
	// MethodAuto is MethodBPF where the host allows it, else the faster
	// of the /proc methods on this CPU, else the other.
	MethodAuto MethodName = "auto"
	// MethodBPF reads the tasks and their VMAs with BPF iterators, with
	// the live side-band (a Session) unless Options.NoLive.
	MethodBPF MethodName = "bpf"
	// MethodProcmaps parses /proc/PID/maps.
	MethodProcmaps MethodName = "procmaps"
	// MethodProcquery asks the kernel for each process's mappings with
	// the PROCMAP_QUERY ioctl (Linux 6.11).
	MethodProcquery MethodName = "procquery"
)

func (m MethodName) String() string { return string(m) }

// ParseMethod returns the method named s: auto, bpf, procmaps or
// procquery; "" is MethodAuto.
func ParseMethod(s string) (MethodName, error) {
	switch m := MethodName(s); m {
	case "":
		return MethodAuto, nil
	case MethodAuto, MethodBPF, MethodProcmaps, MethodProcquery:
		return m, nil
	}
	return "", fmt.Errorf("unknown method %q (want %s, %s, %s or %s)", s, MethodAuto, MethodBPF, MethodProcmaps, MethodProcquery)
}
