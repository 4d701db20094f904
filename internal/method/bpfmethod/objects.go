package bpfmethod

import (
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/config"
)

// objects are the maps and programs of bpf/synth.bpf.c, loaded apart so
// that one kernel's missing field, helper or kfunc fails only the
// programs that need it, and a program loads only when a dump runs it.
// The maps a dump's programs use (the global variables' sections among
// them) load first, and every program then loads against them; a map
// only other programs use (the unmap programs' unmap_calls) loads with
// the first of them.
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
	loading  sync.Mutex           // held while a program loads (see program)
	mu       sync.Mutex           // guards progs and steps
	progs    map[string]progLoad
	steps    []config.Step   // what loading took, until a dump takes them
	linked   *linkedPrograms // nil without the kernel cache
}

// progLoad is the outcome of one program's load.
type progLoad struct {
	p   *ebpf.Program // nil if the load failed
	err error
}

// loadObjects loads the maps and variables; programs load with program.
// With a kernel cache in cacheDir ("": none) that has the programs
// linked against this kernel, they load from it; else the kernel's
// BTF, which linking them needs, is parsed on a goroutine of its own
// meanwhile.
func loadObjects(cacheDir string) (*objects, error) {
	o := &objects{cache: btf.NewCache(), progs: make(map[string]progLoad)}
	kernel := make(chan error, 1)
	// A dump's first program is the probe: where the cache has it, it
	// has the others a dump loads, unless they never loaded here.
	o.linked = openLinked(cacheDir)
	if !o.linked.has(synthbpf.SynthProgProbe) {
		go func() {
			start := time.Now()
			_, err := o.cache.Kernel()
			o.step("kernel BTF", start)
			kernel <- err
		}()
	} else {
		kernel <- nil // parsed by the first load the cache cannot serve
	}
	start := time.Now()
	spec, err := synthbpf.LoadSynth()
	if err != nil {
		<-kernel
		return nil, fmt.Errorf("read BPF object: %w", err)
	}
	if err := setKernelConstants(spec); err != nil {
		<-kernel
		return nil, err
	}
	o.spec = spec
	o.step("BPF object", start)
	start = time.Now()
	// The loader copies each MapSpec it creates: a shallow copy of spec
	// will do. The maps that only the unmap programs use are left to
	// their first load (see load).
	mapsOnly := *spec
	mapsOnly.Programs = nil
	mapsOnly.Maps = maps.Clone(spec.Maps)
	maps.DeleteFunc(mapsOnly.Maps, func(name string, _ *ebpf.MapSpec) bool { return !eagerMap(spec, name) })
	coll, err := ebpf.NewCollectionWithOptions(&mapsOnly, ebpf.CollectionOptions{Cache: o.cache})
	if err != nil {
		<-kernel
		return nil, loadError("load BPF maps", err)
	}
	o.step("maps", start)
	o.shared = maps.Clone(coll.Maps)
	o.sections = coll
	err = errors.Join(assignMaps(&o.SynthMaps, o.shared), coll.Assign(&o.SynthVariables))
	for name := range o.shared {
		if !strings.HasPrefix(name, ".") {
			coll.DetachMap(name) // o.SynthMaps closes it
		}
	}
	if kerr := <-kernel; kerr != nil && err == nil {
		err = fmt.Errorf("read the kernel's BTF: %w", kerr)
	}
	if err != nil {
		o.Close()
		return nil, err
	}
	return o, nil
}

// setKernelConstants sets the programs' constants that come from the
// running kernel (bpf/record.bpf.h): the page size, in which vm_pgoff
// counts (4K on x86-64; 4K, 16K or 64K on arm64), and whether the
// kernel has x86-64's [vsyscall] page.
func setKernelConstants(spec *ebpf.CollectionSpec) error {
	var vsyscall uint32
	if runtime.GOARCH == "amd64" {
		vsyscall = 1
	}
	for name, v := range map[string]uint32{
		"page_shift":   uint32(bits.TrailingZeros(uint(os.Getpagesize()))),
		"x86_vsyscall": vsyscall,
	} {
		vs, ok := spec.Variables[name]
		if !ok {
			return fmt.Errorf("no constant %s in the BPF object", name)
		}
		if err := vs.Set(v); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
	}
	return nil
}

// step notes what a step of loading took.
func (o *objects) step(name string, start time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.steps = assemble.Time(o.steps, name, start)
}

// takeSteps returns the steps noted since it was last called.
func (o *objects) takeSteps() []config.Step {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := slices.Clone(o.steps)
	o.steps = o.steps[:0]
	return s
}

// program returns the program name, loading it on first use. A program
// that failed to load fails again without a second try.
//
// Programs load one at a time. cilium/ebpf's kernel BTF, which every
// load reads for CO-RE and kfuncs, is not safe for concurrent use: two
// loads at once (the probe and dump_tasks) died with "fatal error:
// concurrent map writes" in its type decoder on Debian's 6.18, whose
// modules have BTF of their own. The loads need not overlap: dump_tasks
// verifies in a few milliseconds, and only the programs a dump runs load.
func (o *objects) program(name string) (*ebpf.Program, error) {
	o.loading.Lock()
	defer o.loading.Unlock()
	o.mu.Lock()
	l, ok := o.progs[name]
	o.mu.Unlock()
	if !ok {
		l.p, l.err = o.load(name)
		o.mu.Lock()
		o.progs[name] = l
		o.mu.Unlock()
	}
	return l.p, l.err
}

func (o *objects) load(name string) (*ebpf.Program, error) {
	ps, ok := o.spec.Programs[name]
	if !ok {
		return nil, fmt.Errorf("no program %s in the BPF object", name)
	}
	if r := refused.Load(); r != nil && *r == name {
		ps = refusedProgram(ps)
	}
	if err := o.createMaps(ps); err != nil {
		return nil, err
	}
	if p := o.loadCached(name, ps); p != nil {
		return p, nil
	}
	start := time.Now()
	defer o.step(name, start)
	kernel, err := o.cache.Kernel()
	if err != nil {
		return nil, fmt.Errorf("read the kernel's BTF: %w", err)
	}
	// The collection holds this program and the maps it uses, all of
	// them replaced by the shared ones: cilium/ebpf creates every map
	// of a collection that has no replacement, and the variables need
	// their sections' maps.
	spec := *o.spec
	spec.Programs = map[string]*ebpf.ProgramSpec{name: ps}
	spec.Maps = o.usedMaps(ps)
	spec.Variables = nil
	replace := make(map[string]*ebpf.Map, len(spec.Maps))
	for name := range spec.Maps {
		replace[name] = o.shared[name]
	}
	// CO-RE against vmlinux's types alone: the programs relocate only
	// against the core kernel's (tasks, mms, VMAs, files, the maple
	// tree). Left to itself, cilium/ebpf parses the BTF of every loaded
	// module at each load and searches it too, which a distribution
	// kernel's hundred modules make dear.
	coll, err := ebpf.NewCollectionWithOptions(&spec, ebpf.CollectionOptions{
		Cache:           o.cache,
		MapReplacements: replace,
		Programs:        ebpf.ProgramOptions{KernelTypes: kernel},
	})
	if err != nil {
		if perm := permissionError("load BPF program "+name, err); perm != nil {
			return nil, perm
		}
		return nil, &ProgramError{Program: name, Err: err}
	}
	defer coll.Close()
	p := coll.DetachProgram(name)
	if ps == o.spec.Programs[name] { // not a refused one
		o.linked.keep(o.spec, name, kernel, p)
	}
	return p, nil
}

// dumpPrograms are the programs a dump may load; a map none of them
// uses is created only when a program that does loads.
var dumpPrograms = []string{
	synthbpf.SynthProgProbe, synthbpf.SynthProgDumpTasks, synthbpf.SynthProgDumpTask,
	synthbpf.SynthProgDumpVma, synthbpf.SynthProgSessionProbe, synthbpf.SynthProgNoteReader,
}

// eagerMap reports whether the map name of spec loads with the others,
// before any program: a section of global variables, which userspace
// sets before the programs run, or a map of a program a dump may load.
// The others are the unmap programs' (unmap_calls, an LRU hash the
// kernel preallocates whole), which a one-shot dump never loads.
func eagerMap(spec *ebpf.CollectionSpec, name string) bool {
	if strings.HasPrefix(name, ".") {
		return true
	}
	for _, p := range dumpPrograms {
		if ps := spec.Programs[p]; ps != nil && slices.ContainsFunc(ps.Instructions, func(ins asm.Instruction) bool {
			return ins.Reference() == name
		}) {
			return true
		}
	}
	return false
}

// usedMaps returns the specs of the maps ps uses, by name.
func (o *objects) usedMaps(ps *ebpf.ProgramSpec) map[string]*ebpf.MapSpec {
	used := make(map[string]*ebpf.MapSpec)
	for _, ins := range ps.Instructions {
		if ms := o.spec.Maps[ins.Reference()]; ms != nil {
			used[ins.Reference()] = ms
		}
	}
	return used
}

// createMaps creates the maps ps uses that are not created yet.
func (o *objects) createMaps(ps *ebpf.ProgramSpec) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, ins := range ps.Instructions {
		name := ins.Reference()
		ms := o.spec.Maps[name]
		if ms == nil || o.shared[name] != nil {
			continue
		}
		m, err := ebpf.NewMap(ms)
		if err != nil {
			return loadError("load BPF map "+name, err)
		}
		o.shared[name] = m
		if err := assignMaps(&o.SynthMaps, o.shared); err != nil {
			return err
		}
	}
	return nil
}

// assignMaps sets each *ebpf.Map field of the struct to points to
// (tagged ebpf:"name", as bpf2go writes them) to the map of that name
// in ms, nil when there is none yet.
func assignMaps(to any, ms map[string]*ebpf.Map) error {
	v := reflect.ValueOf(to).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, ok := f.Tag.Lookup("ebpf")
		if !ok || f.Type != reflect.TypeFor[*ebpf.Map]() {
			return fmt.Errorf("field %s of %s is not a map", f.Name, v.Type())
		}
		v.Field(i).Set(reflect.ValueOf(ms[name]))
	}
	return nil
}

// refused is a program the kernel's verifier is made to refuse: tests
// of the fallbacks set it with RefuseProgram.
var refused atomic.Pointer[string]

// RefuseProgram makes the kernel refuse the program name (as in
// bpf/synth.bpf.c) from now on, until the returned func is called: for
// tests of the fallbacks, and of how a refusal is reported. The program
// is loaded as its first instruction alone, turned into an exit that
// returns an unset R0, so that the verifier of the running kernel
// refuses it and says why in its own words, as it does a program that
// needs what the kernel lacks.
//
// It is one of the package's two exported test hooks (with
// BPF.SetExitHook): the fallbacks it tests are OpenMethod's and synth
// dump's, in the packages above, whose tests cannot reach an unexported
// name here. Nothing else sets it.
func RefuseProgram(name string) (restore func()) {
	refused.Store(&name)
	return func() { refused.Store(nil) }
}

// refusedProgram is ps cut down to an "exit" the verifier refuses ("R0
// !read_ok"), which keeps the first instruction's function and source
// line, so that the log has the shape of a real refusal.
func refusedProgram(ps *ebpf.ProgramSpec) *ebpf.ProgramSpec {
	ps = ps.Copy()
	first := ps.Instructions[0]
	exit := asm.Return().WithSymbol(first.Symbol()).WithSource(first.Source())
	ps.Instructions = asm.Instructions{btf.WithFuncMetadata(exit, btf.FuncMetadata(&first))}
	return ps
}

// loaded returns the programs loaded so far, for their run times.
func (o *objects) loaded() []*ebpf.Program {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ps []*ebpf.Program
	for _, l := range o.progs {
		if l.p != nil {
			ps = append(ps, l.p)
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
	o.loading.Lock() // a load under way ends first
	defer o.loading.Unlock()
	for name, l := range o.progs {
		if l.p != nil {
			errs = append(errs, l.p.Close())
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
	if perm := permissionError(op, err); perm != nil {
		return perm
	}
	return fmt.Errorf("%s: %w", op, err)
}

// permissionError returns err of op as a *PermissionError if the kernel
// refused it for want of privilege, else nil.
func permissionError(op string, err error) *PermissionError {
	if errors.Is(err, os.ErrPermission) && !isVerifierError(err) {
		return &PermissionError{Op: op, Err: err}
	}
	return nil
}

// isVerifierError reports whether err is the verifier's rejection, which
// the kernel also reports as EPERM (EACCES) but no privilege fixes.
func isVerifierError(err error) bool {
	var ve *ebpf.VerifierError
	return errors.As(err, &ve)
}
