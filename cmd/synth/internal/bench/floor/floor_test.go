package floor_test

import (
	"io"
	"regexp"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/rlimit"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/cmd/synth/internal/bench"
	"github.com/synth-dev/synth/cmd/synth/internal/bench/floor"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/synth"
)

// The object a dump loads carries none of the floor's programs, nor its
// counter: the floor is an object of its own.
func TestNotInDumpObject(t *testing.T) {
	dump, err := synthbpf.LoadSynth()
	if err != nil {
		t.Fatal(err)
	}
	spec, err := floor.LoadSpec()
	if err != nil {
		t.Fatal(err)
	}
	for name := range spec.Programs {
		if _, ok := dump.Programs[name]; ok {
			t.Errorf("the dump's object has the floor's program %s", name)
		}
	}
	if _, ok := dump.Variables["walked"]; ok {
		t.Error("the dump's object has the floor's global walked")
	}
}

// The floor's programs read no constant: those a dump sets from the
// running kernel (page_shift, x86_vsyscall, in .rodata) are read only by
// what the walk emits, which SYNTH_WALK_ONLY leaves out. So Load sets
// none of them.
func TestNoKernelConstants(t *testing.T) {
	spec, err := floor.LoadSpec()
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range spec.Programs {
		for _, ins := range p.Instructions {
			if ins.Reference() == ".rodata" {
				t.Errorf("%s reads .rodata: %v", name, ins)
			}
		}
	}
}

// Each walk's floor verifies where the walk runs, and walks this
// process at least. The instruction counts the verifier processed are
// logged, as bpfmethod's TestProgramsVerify logs the dump's.
func TestFloors(t *testing.T) {
	testenv.Root(t)
	if err := rlimit.RemoveMemlock(); err != nil {
		t.Fatal(err)
	}
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatal(err)
	}
	skip := bench.Unavailable(io.Discard)
	processed := regexp.MustCompile(`processed ([0-9]+) insns`)
	for _, walk := range []string{string(synth.WalkMaple), string(synth.WalkIter)} {
		t.Run(walk, func(t *testing.T) {
			if slices.Contains(skip, "floor-"+walk) {
				t.Skip("the maple walk cannot prove itself here")
			}
			if walk == string(synth.WalkIter) {
				_, err := kernel.AnyTypeByName("bpf_iter__task_vma")
				testenv.Kernel(t, err == nil, "5.12", "no iter/task_vma")
			}
			name, err := floor.Program(walk)
			if err != nil {
				t.Fatal(err)
			}
			spec, err := floor.LoadSpec()
			if err != nil {
				t.Fatal(err)
			}
			spec.Programs = map[string]*ebpf.ProgramSpec{name: spec.Programs[name]}
			coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{
				Programs: ebpf.ProgramOptions{KernelTypes: kernel, LogLevel: ebpf.LogLevelStats},
			})
			if err != nil {
				t.Fatal(err)
			}
			if m := processed.FindStringSubmatch(coll.Programs[name].VerifierLog); m != nil {
				t.Logf("%s: the verifier processed %s instructions", name, m[1])
			}
			coll.Close()

			f, err := floor.Load(walk)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			r, err := f.Run()
			if err != nil {
				t.Fatal(err)
			}
			if r.Mappings == 0 {
				t.Errorf("the floor of the %s walk walked no VMA", walk)
			}
		})
	}
}
