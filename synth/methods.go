package synth

import (
	"github.com/synth-dev/synth/internal/method/bpfdump"
	"github.com/synth-dev/synth/internal/method/procdump"
)

// MethodFloor names the benchmark floor of a walk: it visits every VMA
// the way the walk does and emits nothing, the least a dump with that
// walk can cost.
const MethodFloor = bpfdump.MethodFloor

// ErrNoProcquery is returned by NewProcquery on kernels without the
// PROCMAP_QUERY ioctl (before Linux 6.11).
var ErrNoProcquery = procdump.ErrNoProcquery

// NewFloor loads the floor of walk (WalkMaple or WalkIter; "" is
// WalkMaple). Its Dump writes no records and reports the VMAs walked as
// Mappings.
func NewFloor(walk string) (Method, error) {
	f, err := bpfdump.NewFloor(walk)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// NewProcmaps returns the method that parses /proc/PID/maps, with
// threads workers.
func NewProcmaps(opts Options, threads int) (Method, error) {
	m, err := procdump.NewProcmaps(opts, threads)
	if err != nil {
		return nil, err
	}
	return m, nil
}

// NewProcquery returns the method that asks the kernel for each
// process's mappings with the PROCMAP_QUERY ioctl, with threads workers.
// Kernels without it give ErrNoProcquery.
func NewProcquery(opts Options, threads int) (Method, error) {
	m, err := procdump.NewProcquery(opts, threads)
	if err != nil {
		return nil, err
	}
	return m, nil
}
