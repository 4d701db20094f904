package floor

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/rlimit"

	"github.com/synth-dev/synth/internal/bpfiter"
	"github.com/synth-dev/synth/synth"
)

// envWalk, in the environment of a process Command started, names the
// walk whose floor it runs.
const envWalk = "SYNTH_BENCH_FLOOR"

// Command returns the command that runs the floor of walk (synth's
// walk maple or iter) once, in a process of its own: bin, the synth
// binary, which calls Main, re-executed. The process prints the summary
// line of a dump (see summary).
func Command(bin, walk string) *exec.Cmd {
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), envWalk+"="+walk)
	return cmd
}

// Main runs the floor and exits if this process is one that Command
// started; otherwise it returns at once.
func Main() {
	walk, ok := os.LookupEnv(envWalk)
	if !ok {
		return
	}
	os.Unsetenv(envWalk)
	os.Exit(run(walk, os.Stderr))
}

// run loads the floor of walk, runs it once and prints its summary; it
// returns the exit status.
func run(walk string, stderr io.Writer) int {
	start := time.Now()
	f, err := Load(walk)
	if err != nil {
		fmt.Fprintf(stderr, "synth: floor: %v\n", err)
		return 1
	}
	defer f.Close()
	r, err := f.Run()
	if err != nil {
		fmt.Fprintf(stderr, "synth: floor: %v\n", err)
		return 1
	}
	summary(stderr, walk, r, time.Since(start))
	return 0
}

// Floor is the floor of one walk, loaded.
type Floor struct {
	coll   *ebpf.Collection
	prog   *ebpf.Program
	walked *ebpf.Variable
}

// Result is what one run of a floor walked, and what it took.
type Result struct {
	Mappings    int           // the VMAs walked (maple: of the walks that held)
	Elapsed     time.Duration // the run, without loading
	ProgramTime time.Duration // the program's own time, where kernel.bpf_stats_enabled
}

// Load loads the floor of walk: synth.WalkMaple, the maple walk of
// dump_tasks, or synth.WalkIter, the task_vma iterator of dump_vma.
//
// Unlike the dump's, the floor's programs need none of the constants
// set from the running kernel (page_shift, x86_vsyscall): only what the
// walk emits reads them (TestNoKernelConstants).
func Load(walk string) (*Floor, error) {
	name, err := program(walk)
	if err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("remove memlock limit: %w", err)
	}
	spec, err := loadFloor()
	if err != nil {
		return nil, fmt.Errorf("read BPF object: %w", err)
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
		return nil, fmt.Errorf("load BPF program %s: %w", name, err)
	}
	return &Floor{coll: coll, prog: coll.Programs[name], walked: coll.Variables[floorVarWalked]}, nil
}

// program names the program of walk's floor.
func program(walk string) (string, error) {
	switch walk {
	case string(synth.WalkMaple):
		return floorProgWalkMaple, nil
	case string(synth.WalkIter):
		return floorProgWalkVma, nil
	}
	return "", fmt.Errorf("no floor of the walk %q", walk)
}

// Run walks every process once.
func (f *Floor) Run() (Result, error) {
	var r Result
	start := time.Now()
	var before, after uint64
	if err := f.walked.Get(&before); err != nil {
		return r, err
	}
	ran := progTime(f.prog)
	if err := bpfiter.Drain(f.prog, 0); err != nil {
		return r, err
	}
	r.ProgramTime = progTime(f.prog) - ran
	if err := f.walked.Get(&after); err != nil {
		return r, err
	}
	r.Mappings = int(after - before)
	r.Elapsed = time.Since(start)
	return r, nil
}

// Close releases the program and its maps.
func (f *Floor) Close() error {
	f.coll.Close()
	return nil
}

// progTime is how long p has run, as far as kernel.bpf_stats_enabled
// counted (0 where it is off).
func progTime(p *ebpf.Program) time.Duration {
	st, err := p.Stats()
	if err != nil {
		return 0
	}
	return st.Runtime
}

// summary prints a run of the floor of walk as synth dump prints a
// dump's (printSummary in cmd/synth), which synth bench reads: the
// line, with the time with loading (total), then the program's time.
// A floor emits nothing and counts no process: those counts are 0.
func summary(w io.Writer, walk string, r Result, total time.Duration) {
	fmt.Fprintf(w, "synth: method floor (walk %s): 0 processes, %d mappings, 0 records, 0 lost, %v (%v with loading)\n",
		walk, r.Mappings, r.Elapsed.Round(10*time.Microsecond), total.Round(100*time.Microsecond))
	if r.ProgramTime > 0 {
		fmt.Fprintf(w, "synth: BPF programs ran %v of it (kernel.bpf_stats_enabled)\n", r.ProgramTime.Round(10*time.Microsecond))
	}
}
