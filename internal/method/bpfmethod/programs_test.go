package bpfmethod

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/testenv"
)

// Every program of the object verifies on this kernel where the kernel
// has what the program needs: the iterators' programs from 5.12
// (iter/task_vma, bpf_d_path in iterators), the probe from 5.16
// (bpf_kallsyms_lookup_name), and the maple walk's wherever the probe
// finds the walk provable. A kernel whose verifier refuses a program it
// has the features of fails here, with the verifier's verdict, not in a
// silent fallback. The instruction counts the verifier processed are
// logged, to hold the programs' verification cost from kernel to kernel.
func TestProgramsVerify(t *testing.T) {
	testenv.Root(t)
	o, err := loadObjects("")
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	probe, err := o.program(synthbpf.SynthProgProbe)
	if testenv.Feature(t, err == nil, "5.16", "the probe's bpf_kallsyms_lookup_name: "+errString(err)) {
		if _, err := probe.Run(&ebpf.RunOptions{}); err != nil {
			t.Fatalf("run the probe: %v", err)
		}
	}
	var walkOK uint32
	if err := o.WalkOk.Get(&walkOK); err != nil {
		t.Fatal(err)
	}
	kernel, err := o.cache.Kernel()
	if err != nil {
		t.Fatal(err)
	}
	processed := regexp.MustCompile(`processed ([0-9]+) insns`)
	names := slices.Sorted(func(yield func(string) bool) {
		for name := range o.spec.Programs {
			if !yield(name) {
				return
			}
		}
	})
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			switch name {
			case synthbpf.SynthProgDumpTasks:
				if walkOK == 0 {
					t.Skipf("the probe finds no provable maple walk here: %v", errNoProof)
				}
			case synthbpf.SynthProgProbe:
			default: // the iterators' programs
				_, err := kernel.AnyTypeByName("bpf_iter__task_vma")
				testenv.Kernel(t, err == nil, "5.12", "no iter/task_vma")
			}
			spec := *o.spec
			spec.Programs = map[string]*ebpf.ProgramSpec{name: o.spec.Programs[name]}
			coll, err := ebpf.NewCollectionWithOptions(&spec, ebpf.CollectionOptions{
				Cache:           o.cache,
				MapReplacements: o.shared,
				Programs:        ebpf.ProgramOptions{KernelTypes: kernel, LogLevel: ebpf.LogLevelStats},
			})
			if err != nil {
				// Once more as a dump loads it, for the verifier's whole
				// verdict (a refusal under LogLevelStats logs only
				// statistics).
				_, err := o.program(name)
				var pe *ProgramError
				if errors.As(err, &pe) {
					t.Fatalf("%v\n%s", err, strings.Join(pe.VerifierLog(), "\n"))
				}
				t.Fatal(err)
			}
			defer coll.Close()
			if m := processed.FindStringSubmatch(coll.Programs[name].VerifierLog); m != nil {
				t.Logf("%s: the verifier processed %s instructions", name, m[1])
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
