package bpfdump

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/dump"
)

// objects are the maps and programs of bpf/synth.bpf.c, loaded apart so
// that one kernel's missing field, helper or kfunc fails only the
// programs that need it, and a program loads only when a dump runs it.
// The maps (the global variables' sections among them) load first, and
// every program then loads against them.
//
// What each kernel runs: dump_task needs iter/task (5.8), dump_vma
// iter/task_vma (5.12) and bpf_d_path in iterators; probe needs syscall programs (5.14) and
// bpf_kallsyms_lookup_name (5.16); dump_tasks needs what walk_provable()
// checks (bpf/maple.bpf.h), which probe reports before dump_tasks is
// loaded. A relocation against a field a kernel lacks poisons its
// instruction, and a reachable poisoned instruction fails the whole
// program: hence the CO-RE guards in the C sources, and the loads apart.
type objects struct {
	spec  *ebpf.CollectionSpec
	cache *btf.Cache // the kernel's BTF, parsed once for every load
	synthbpf.SynthMaps
	synthbpf.SynthVariables
	shared   map[string]*ebpf.Map // every map by its name, for the programs' loads
	sections *ebpf.Collection     // owns the maps of the variables' sections
	progs    map[string]*ebpf.Program
	steps    []dump.Step // what loading took, until a dump takes them
}

// loadObjects loads the maps and variables; programs load with program.
func loadObjects() (*objects, error) {
	start := time.Now()
	spec, err := synthbpf.LoadSynth()
	if err != nil {
		return nil, fmt.Errorf("read BPF object: %w", err)
	}
	o := &objects{spec: spec, cache: btf.NewCache(), progs: make(map[string]*ebpf.Program)}
	o.steps = dump.Time(o.steps, "BPF object", start)
	start = time.Now()
	if _, err := o.cache.Kernel(); err != nil {
		return nil, fmt.Errorf("read the kernel's BTF: %w", err)
	}
	o.steps = dump.Time(o.steps, "kernel BTF", start)
	start = time.Now()
	defer func() { o.steps = dump.Time(o.steps, "maps", start) }()
	mapsOnly := spec.Copy()
	mapsOnly.Programs = nil
	coll, err := ebpf.NewCollectionWithOptions(mapsOnly, ebpf.CollectionOptions{Cache: o.cache})
	if err != nil {
		return nil, loadError("load BPF maps", err)
	}
	o.shared = maps.Clone(coll.Maps)
	o.sections = coll
	if err := coll.Assign(&o.SynthMaps); err != nil {
		coll.Close()
		return nil, err
	}
	if err := coll.Assign(&o.SynthVariables); err != nil {
		o.Close()
		return nil, err
	}
	return o, nil
}

// program returns the program name, loading it on first use. A program
// that failed to load fails again without a second try.
func (o *objects) program(name string) (*ebpf.Program, error) {
	if p, ok := o.progs[name]; ok {
		if p == nil {
			return nil, fmt.Errorf("program %s: %w", name, errNotLoaded)
		}
		return p, nil
	}
	if name == refused {
		o.progs[name] = nil
		return nil, fmt.Errorf("load BPF program %s: %w", name, errRefused)
	}
	ps, ok := o.spec.Programs[name]
	if !ok {
		return nil, fmt.Errorf("no program %s in the BPF object", name)
	}
	start := time.Now()
	defer func() { o.steps = dump.Time(o.steps, name, start) }()
	spec := *o.spec
	spec.Programs = map[string]*ebpf.ProgramSpec{name: ps}
	coll, err := ebpf.NewCollectionWithOptions(&spec, ebpf.CollectionOptions{Cache: o.cache, MapReplacements: o.shared})
	if err != nil {
		o.progs[name] = nil
		return nil, loadError("load BPF program "+name, err)
	}
	defer coll.Close()
	p := coll.DetachProgram(name)
	o.progs[name] = p
	return p, nil
}

// refused is a program that fails to load as if the kernel lacked what
// it needs: tests of the fallbacks set it with RefuseProgram.
var refused string

var errRefused = errors.New("refused by RefuseProgram, as by a kernel without its helper or iterator")

// RefuseProgram makes the program name (as in bpf/synth.bpf.c) fail to
// load from now on, as on a kernel that lacks what it needs, until the
// returned func is called: for tests of the fallbacks.
func RefuseProgram(name string) (restore func()) {
	refused = name
	return func() { refused = "" }
}

// errNotLoaded is a program's error after its load failed once.
var errNotLoaded = errors.New("did not load on this kernel")

// loaded returns the programs loaded so far, for their run times.
func (o *objects) loaded() []*ebpf.Program {
	var ps []*ebpf.Program
	for _, p := range o.progs {
		if p != nil {
			ps = append(ps, p)
		}
	}
	return ps
}

// Close releases the maps and programs. It is safe to call twice.
func (o *objects) Close() error {
	if o == nil {
		return nil
	}
	var errs []error
	for name, p := range o.progs {
		if p != nil {
			errs = append(errs, p.Close())
		}
		delete(o.progs, name)
	}
	errs = append(errs, o.SynthMaps.Close())
	o.SynthMaps = synthbpf.SynthMaps{}
	if o.sections != nil {
		o.sections.Close()
		o.sections = nil
	}
	return errors.Join(errs...)
}

// loadError wraps a load's error, as a *PermissionError when the kernel
// refused it for want of privilege.
func loadError(op string, err error) error {
	if errors.Is(err, os.ErrPermission) && !isVerifierError(err) {
		return &PermissionError{Op: op, Err: err}
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isVerifierError reports whether err is the verifier's rejection, which
// the kernel also reports as EPERM (EACCES) but no privilege fixes.
func isVerifierError(err error) bool {
	var ve *ebpf.VerifierError
	return errors.As(err, &ve)
}
