package bpfmethod

import (
	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/bpfiter"
)

// The package's test hooks. They are set only from its tests: the
// production code keeps the fault to make (walker.fault), and the object it
// loads carries nothing for tests.

// injectFault makes f happen to the walk of process pid in the dumps
// that follow; faultNone ends it.
func (b *BPF) injectFault(pid int, f fault) { b.walk.fault = faultAt{f, uint32(pid)} }

// emitStale runs the thread pass over process pid under generation gen,
// leaving its records in the rings unread: for tests of the generation
// rule, which must drop them.
func (b *BPF) emitStale(pid int, gen uint64) error {
	p, err := b.lo.objs.program(synthbpf.SynthProgDumpTask)
	if err != nil {
		return err
	}
	if err := b.lo.objs.SynthGen.Set(gen); err != nil {
		return err
	}
	return bpfiter.Drain(p, pid)
}
