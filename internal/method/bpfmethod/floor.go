package bpfmethod

import (
	"context"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/rlimit"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/bpfiter"
)

// MethodFloor names the benchmark floor of a walk: it visits every VMA
// the way the walk does and emits nothing, the least a dump with that
// walk can cost. The maple walk's floor also validates every walk.
const MethodFloor = "floor"

// Floor is the floor of one walk (see MethodFloor): bpf/floor.bpf.c,
// an object apart from the one a dump loads.
type Floor struct {
	coll   *ebpf.Collection
	prog   *ebpf.Program
	walked *ebpf.Variable
}

// NewFloor loads the floor of walk (assemble.WalkMaple or
// assemble.WalkIter; "" is assemble.WalkMaple). Its Dump writes no
// records and reports the VMAs walked as Mappings.
func NewFloor(walk string) (*Floor, error) {
	if err := checkCaps(); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("remove memlock limit: %w", err)
	}
	spec, err := synthbpf.LoadFloor()
	if err != nil {
		return nil, fmt.Errorf("read BPF object: %w", err)
	}
	if err := setKernelConstants(spec); err != nil {
		return nil, err
	}
	name := synthbpf.FloorProgWalkMaple
	if walk == assemble.WalkIter {
		name = synthbpf.FloorProgWalkVma
	}
	spec.Programs = map[string]*ebpf.ProgramSpec{name: spec.Programs[name]}
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, fmt.Errorf("read the kernel's BTF: %w", err)
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{
		Programs: ebpf.ProgramOptions{KernelTypes: kernel},
	})
	if err != nil {
		if isVerifierError(err) {
			return nil, &ProgramError{Program: name, Err: err}
		}
		return nil, loadError("load BPF program "+name, err)
	}
	return &Floor{coll: coll, prog: coll.Programs[name], walked: coll.Variables[synthbpf.FloorVarWalked]}, nil
}

// Dump walks every process once.
func (f *Floor) Dump(ctx context.Context, _ func([]byte) error) (assemble.Stats, error) {
	st := assemble.Stats{Method: MethodFloor}
	start := time.Now()
	var before, after uint64
	if err := f.walked.Get(&before); err != nil {
		return st, err
	}
	prog := f.prog
	ran := progTime(prog)
	if err := bpfiter.Drain(prog, 0); err != nil {
		return st, err
	}
	st.ProgramTime = progTime(prog) - ran
	if err := f.walked.Get(&after); err != nil {
		return st, err
	}
	st.Mappings = int(after - before)
	st.Elapsed = time.Since(start)
	return st, nil
}

// Close releases the programs.
func (f *Floor) Close() error {
	f.coll.Close()
	return nil
}
