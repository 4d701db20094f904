package bpfmethod

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/cilium/ebpf"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/config"
)

// loaded is what a method loaded into the kernel: its objects, the walk
// they let its dumps run, and what the probe found of the kernel. It
// owns the objects; Close releases them.
type loaded struct {
	objs *objects
	walk config.Walk // config.WalkMaple or config.WalkIter: what this kernel and the options allow
	// walkWhy says why the walk is not the maple walk, when the options
	// did not ask.
	walkWhy error
	// The iterator programs a dump runs: dumpTasks for the maple walk,
	// dumpTask for --walk iter; dumpVMA for both. nil when not loaded.
	dumpTask, dumpVMA, dumpTasks *ebpf.Program
	probed                       bool            // the probe program ran
	gate                         *assemble.Gate  // the [vsyscall] area /proc shows for every process
	text                         assemble.Kernel // the kernel text map; zero without kernel addresses
}

// Close releases the objects. It is safe to call twice.
func (lo *loaded) Close() error {
	if lo == nil {
		return nil
	}
	return lo.objs.Close()
}

// loadPrograms runs the probe, then loads the programs of the walk that
// the kernel and the options (walk) allow: the maple walk where
// walk_provable() holds (bpf/maple.bpf.h), else the task_vma iterator.
// An explicit --walk maple the kernel cannot run is an error. Only what
// a dump runs is loaded: with the maple walk, the task_vma iterator
// loads when a dump first has a process whose walk did not hold
// (vmaIter).
func (lo *loaded) loadPrograms(walk config.Walk) error {
	probe, err := lo.objs.program(synthbpf.SynthProgProbe)
	if err == nil {
		_, err = probe.Run(&ebpf.RunOptions{})
	}
	lo.probed = err == nil
	lo.walk = config.WalkIter
	if walk != config.WalkIter {
		lo.walkWhy = lo.loadMaple(err)
		switch {
		case lo.walkWhy == nil:
			lo.walk = config.WalkMaple
			return nil
		case walk == config.WalkMaple:
			return fmt.Errorf("maple walk: %w", lo.walkWhy)
		}
	}
	if err := lo.vmaIter(); err != nil {
		return err
	}
	lo.dumpTask, err = lo.objs.program(synthbpf.SynthProgDumpTask)
	return err
}

// vmaIter loads the task_vma iterator's program, dump_vma, unless it is
// loaded. A kernel with the maple walk (6.14) has everything dump_vma
// needs (iter/task_vma, and bpf_d_path in iterators, came in 5.12), so
// its load failing there is no reason to go to /proc: the dump that
// needed it fails, naming it.
func (lo *loaded) vmaIter() error {
	if lo.dumpVMA != nil {
		return nil
	}
	p, err := lo.objs.program(synthbpf.SynthProgDumpVma)
	lo.dumpVMA = p
	return err
}

// loadMaple loads the maple walk's program if the probe found that this
// kernel can run it (probeErr: the probe's error), or says why not.
func (lo *loaded) loadMaple(probeErr error) error {
	if probeErr != nil {
		return fmt.Errorf("cannot probe the kernel: %w", probeErr)
	}
	var ok uint32
	if err := lo.objs.WalkOk.Get(&ok); err != nil {
		return fmt.Errorf("read walk_ok: %w", err)
	}
	if ok == 0 {
		return errNoProof
	}
	if err := checkTaskVMAIter(); err != nil {
		return err
	}
	p, err := lo.objs.program(synthbpf.SynthProgDumpTasks)
	lo.dumpTasks = p
	return err
}

// errNoProof is why the maple walk does not run on a kernel where
// walk_provable() is false.
var errNoProof = errors.New("this kernel cannot prove a lockless walk: it needs mm_struct.mm_lock_seq " +
	"as a seqcount_t (Linux 6.14, or a stable kernel with that change), the maple tree's 6.x layout, " +
	"and the kfuncs bpf_rdonly_cast and bpf_iter_task_vma_* (6.7)")

// findKernel finds the [vsyscall] gate and, unless noKernel, the kernel
// text map.
func (lo *loaded) findKernel(noKernel bool) error {
	start := time.Now()
	defer lo.objs.step("kernel text", start)
	var err error
	lo.gate, err = assemble.FindGate()
	if err == nil && !noKernel {
		lo.text, err = lo.kernelText()
	}
	return err
}

// kernelText returns the kernel text map from _text and _etext as the
// probe program found them (bpf_kallsyms_lookup_name), or from
// /proc/kallsyms when that program did not run. The kernel text does not
// move while it runs. A kernel that runs the program has no entry
// trampolines (they were removed in 4.20, long before
// bpf_kallsyms_lookup_name came, in 5.16).
//
// The lookup does not say a symbol's type, and perf takes _etext as the
// end only where it is a function symbol: x86's is (its linker script
// puts it inside .text), arm64's is not, so elsewhere kallsyms is read.
func (lo *loaded) kernelText() (assemble.Kernel, error) {
	if !lo.probed || !etextIsText {
		return assemble.ReadKallsyms("/proc/kallsyms")
	}
	var start, end uint64
	err := errors.Join(lo.objs.TextStart.Get(&start), lo.objs.TextEnd.Get(&end))
	if err != nil || start == 0 {
		return assemble.ReadKallsyms("/proc/kallsyms")
	}
	return assemble.Kernel{Text: assemble.TextMap(start, end)}, nil
}

// etextIsText is whether this architecture's _etext is a text symbol.
const etextIsText = runtime.GOARCH == "amd64" || runtime.GOARCH == "386"
