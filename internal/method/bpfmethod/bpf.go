package bpfmethod

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/bpfiter"
	"github.com/synth-dev/synth/internal/dedupe"
	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/perfdata"
)

// paceUnit is SYNTH_PACE_UNIT (bpf/synth.h): the programs write one
// byte into the iterator's seq_file per paceUnit bytes that a record
// takes in a ring (its sample overhead included).
const paceUnit = int(synthbpf.SynthSynthLimitSYNTH_PACE_UNIT)

// maxRecordBytes bounds one emitted sample in a ring: struct synth_mmap2
// with a PATH_MAX name, plus SYNTH_SAMPLE_OVERHEAD.
const maxRecordBytes = int(unsafe.Sizeof(synthbpf.SynthSynthMmap2{})) + int(synthbpf.SynthSynthLimitSYNTH_SAMPLE_OVERHEAD)

// Bits of synth_flags.
const (
	cfgData       = uint32(synthbpf.SynthSynthCfgSYNTH_CFG_DATA)
	cfgBuildID    = uint32(synthbpf.SynthSynthCfgSYNTH_CFG_BUILDID)
	cfgNamespaces = uint32(synthbpf.SynthSynthCfgSYNTH_CFG_NAMESPACES)
)

// BPF synthesizes records with BPF iterators. It holds the loaded programs
// and the per-CPU rings, and can run any number of dumps, one at a time.
type BPF struct {
	opts assemble.Options
	objs *objects
	walk string // assemble.WalkMaple or assemble.WalkIter: what this kernel and opts allow
	// walkWhy says why the walk is not the maple walk, when opts did not ask.
	walkWhy error
	// The iterator programs a dump runs: dumpTasks for the maple walk,
	// dumpTask for --walk iter; dumpVMA for both. nil when not loaded.
	dumpTask, dumpVMA, dumpTasks *ebpf.Program
	probed                       bool // the probe program ran
	rings                        *rings
	gen                          uint64
	ids                          *buildIDs
	gate                         *assemble.Gate  // the [vsyscall] area /proc shows for every process
	text                         assemble.Kernel // the kernel text map; zero without kernel addresses
	lost                         uint64          // synth_lost already accounted for
	// dd drops stale and duplicate synthesized records; the live
	// records of the side-band rings feed it while dumping.
	dd      *dedupe.Deduper
	dumping bool
	// readStart is when the last dump began, readAt when it first read
	// each process (by its records' times): see ReadTimes.
	readStart uint64
	readAt    map[uint32]uint64
	live      liveBuf
	// The sample_type of the side-band's records and of the sampler's,
	// and the sampler's ids, to read a live record's time with.
	liveST, samplerST uint64
	liveBuildID       bool // the side-band asked for build IDs (see passLive)
	samplerIDs        []uint64
	// ident is the sample_id_all identifier of synthesized records.
	ident uint64
	// readBuf is the bounded buffer iterator reads go through: iterBuf
	// for the task_vma iterator, walkBuf for the maple walk, whose
	// objects emit up to chunk bytes each.
	readBuf, iterBuf, walkBuf []byte
	chunk                     uint32
	// round is the Session's, between dumps; rounds are the
	// pipeline's (see pipeline).
	round  round
	rounds [2]round
	hold   *walkHold   // the maple walk's records, kept between dumps for their memory
	unmaps *unmapLinks // attached by WatchUnmaps
	fault  faultAt     // tests: see injectFault
	stuck  stuckReads  // dump_vma reads given up on (see lockwait.go)
	// prev is the last whole MMAP2 record delivered, and next the one a
	// short record of the maple walk expands into (see expandNext).
	prev, next []byte
}

// New checks privileges, loads the iterator programs and opens the
// rings of a dump without the live side-band. Missing privileges give a
// *PermissionError.
func New(opts assemble.Options) (*BPF, error) {
	return NewWithRings(opts, RingConfig{Pages: opts.RingPages})
}

// NewWithRings is New with the rings rc describes: a Session's, with the
// live side-band and a sampling event.
func NewWithRings(opts assemble.Options, rc RingConfig) (*BPF, error) {
	if err := checkCaps(); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("remove memlock limit: %w", err)
	}
	b := &BPF{opts: opts, dd: dedupe.New(0)}
	objs, err := loadObjects()
	if err != nil {
		return nil, err
	}
	b.objs = objs
	b.ids = newBuildIDs(objs, opts.BuildIDWait())
	// The rings need only the events map: they open while the programs
	// load.
	type opened struct {
		r   *rings
		err error
	}
	ringsc := make(chan opened, 1)
	go func() {
		start := time.Now()
		r, err := openRings(rc, b.objs.Events)
		b.objs.step("rings", start)
		ringsc <- opened{r, err}
	}()
	err = b.loadPrograms()
	o := <-ringsc
	b.rings = o.r
	if err == nil {
		err = o.err
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	r := b.rings
	if len(r.live) > 0 {
		// Synthesized records are written under the side-band's attr.
		b.ident = r.live[0].ID()
	}
	b.liveST = rc.LiveAttr().SampleType
	b.liveBuildID = rc.BuildID
	if rc.Sampler != nil {
		b.samplerST = rc.Sampler.SampleType
	}
	_, b.samplerIDs = r.ids()
	b.iterBuf = make([]byte, readBudget(r.size))
	chunk, budget := walkLimits(r.size)
	b.chunk, b.walkBuf = chunk, make([]byte, budget)
	start := time.Now()
	b.gate, err = assemble.FindGate()
	if err == nil && !opts.NoKernel {
		b.text, err = b.kernelText()
	}
	b.objs.step("kernel text", start)
	if err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// SetOptions changes what the next dumps read and write: the
// processes, and every option but those the method took when it loaded
// (see assemble.Options.WithLoaded). It returns the options the dumps
// now use. Not while a dump runs.
func (b *BPF) SetOptions(o assemble.Options) assemble.Options {
	b.opts = o.WithLoaded(b.opts)
	return b.opts
}

// loadPrograms runs the probe, then loads the programs of the walk that
// the kernel and the options allow: the maple walk where walk_provable()
// holds (bpf/maple.bpf.h), else the task_vma iterator. An explicit
// --walk maple the kernel cannot run is an error. Only what a dump runs
// is loaded: with the maple walk, the task_vma iterator loads when a
// dump first has a process whose walk did not hold (vmaIter).
func (b *BPF) loadPrograms() error {
	probe, err := b.objs.program(synthbpf.SynthProgProbe)
	if err == nil {
		_, err = probe.Run(&ebpf.RunOptions{})
	}
	b.probed = err == nil
	b.walk = assemble.WalkIter
	if b.opts.Walk != assemble.WalkIter {
		b.walkWhy = b.loadMaple(err)
		switch {
		case b.walkWhy == nil:
			b.walk = assemble.WalkMaple
			return nil
		case b.opts.Walk == assemble.WalkMaple:
			return fmt.Errorf("maple walk: %w", b.walkWhy)
		}
	}
	if err := b.vmaIter(); err != nil {
		return err
	}
	b.dumpTask, err = b.objs.program(synthbpf.SynthProgDumpTask)
	return err
}

// vmaIter loads the task_vma iterator's program, dump_vma, unless it is
// loaded. A kernel with the maple walk (6.14) has everything dump_vma
// needs (iter/task_vma, and bpf_d_path in iterators, came in 5.12), so
// its load failing there is no reason to go to /proc: the dump that
// needed it fails, naming it.
func (b *BPF) vmaIter() error {
	if b.dumpVMA != nil {
		return nil
	}
	p, err := b.objs.program(synthbpf.SynthProgDumpVma)
	b.dumpVMA = p
	return err
}

// loadMaple loads the maple walk's program if the probe found that this
// kernel can run it (probeErr: the probe's error), or says why not.
func (b *BPF) loadMaple(probeErr error) error {
	if probeErr != nil {
		return fmt.Errorf("cannot probe the kernel: %w", probeErr)
	}
	var ok uint32
	if err := b.objs.WalkOk.Get(&ok); err != nil {
		return fmt.Errorf("read walk_ok: %w", err)
	}
	if ok == 0 {
		return errNoProof
	}
	if err := checkTaskVMAIter(); err != nil {
		return err
	}
	p, err := b.objs.program(synthbpf.SynthProgDumpTasks)
	b.dumpTasks = p
	return err
}

// errNoProof is why the maple walk does not run on a kernel where
// walk_provable() is false.
var errNoProof = errors.New("this kernel cannot prove a lockless walk: it needs mm_struct.mm_lock_seq " +
	"as a seqcount_t (Linux 6.14, or a stable kernel with that change), the maple tree's 6.x layout, " +
	"and the kfuncs bpf_rdonly_cast and bpf_iter_task_vma_* (6.7)")

// Walk returns the walk the dumps use (assemble.WalkMaple or assemble.WalkIter)
// and, when the options left the choice to the kernel and it is not the
// maple walk, why.
func (b *BPF) Walk() (string, error) { return b.walk, b.walkWhy }

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
func (b *BPF) kernelText() (assemble.Kernel, error) {
	if !b.probed || !etextIsText {
		return assemble.ReadKallsyms("/proc/kallsyms")
	}
	var start, end uint64
	err := errors.Join(b.objs.TextStart.Get(&start), b.objs.TextEnd.Get(&end))
	if err != nil || start == 0 {
		return assemble.ReadKallsyms("/proc/kallsyms")
	}
	return assemble.Kernel{Text: assemble.TextMap(start, end)}, nil
}

// etextIsText is whether this architecture's _etext is a text symbol.
const etextIsText = runtime.GOARCH == "amd64" || runtime.GOARCH == "386"

// readBudget is the iterator read size that keeps one read's records
// within half a ring, whichever CPUs they land on. bpf_seq_read stops
// after the object that crosses the requested size, and an object emits
// at most two records.
func readBudget(ringBytes int) int {
	n := ringBytes/2/paceUnit - 2*((maxRecordBytes+paceUnit-1)/paceUnit)
	// The iterator's seq_file buffer is 32 KiB: stay well inside it so
	// that an object's output never overflows and gets replayed.
	return min(n, 16<<10)
}

// Close releases the programs and rings. It is safe to call twice.
func (b *BPF) Close() error {
	errs := []error{b.unmaps.Close()}
	b.unmaps = nil
	if b.rings != nil {
		errs = append(errs, b.rings.Close())
		b.rings = nil
	}
	errs = append(errs, b.objs.Close(), b.ids.Close())
	if b.hold != nil {
		b.hold.Close()
	}
	return errors.Join(errs...)
}

// Dump synthesizes the state of the host (or of opts.Pids) and hands every
// record, with its sample_id_all trailer, to emit, in perf's order: kernel
// maps, then for each process its threads' FORK and COMM records and its
// MMAP2 records. rec is only valid during the call.
func (b *BPF) Dump(ctx context.Context, emit func(rec []byte) error) (assemble.Stats, error) {
	r, err := b.Start(ctx, emit, nil)
	for err == nil && !r.done {
		err = r.Write(0)
	}
	if r == nil {
		return assemble.Stats{}, err
	}
	return r.Stats(), err
}

// Run is one dump of the BPF method, in two phases: Start reads the host
// (the maple walk's records are held), then Write hands the held records
// to emit a part at a time. A Session writes the next part when its
// reader has taken the last, so it never holds a whole dump twice.
type Run struct {
	b           *BPF
	d           *assemble.Assembler
	dups, stale int // the deduper's counts when the dump began
	done        bool
	writing     time.Duration // in Write
}

// Start reads the host for a dump of a new generation whose records go
// to emit, and those of the walk's hold to held, if not nil (see
// assemble.Assembler.Held).
func (b *BPF) Start(ctx context.Context, emit, held func(rec []byte) error) (*Run, error) {
	if b.rings == nil {
		return nil, os.ErrClosed
	}
	d := assemble.New(b.opts, emit, b.gate)
	d.Held = held
	d.Ident = b.ident
	d.Stats.Method = "bpf"
	d.Stats.Walk = b.walk
	if b.walkWhy != nil {
		d.Stats.WalkFallback = b.walkWhy
	}
	d.Stats.Steps = append(d.Stats.Steps, b.objs.takeSteps()...) // the loading, for the first dump
	b.gen++
	b.readStart, b.readAt = MonotonicNow(), make(map[uint32]uint64)
	b.dd.Begin(b.gen, b.readStart)
	r := &Run{b: b, d: d, dups: b.dd.Duplicates, stale: b.dd.Stale}
	b.dumping = true
	err := b.read(ctx, d)
	// A live record after the read cannot precede a synthesized one.
	b.dumping = false
	b.dd.End()
	r.done = err != nil
	return r, err
}

// ReadTimes returns when the last dump began, and when it first read
// each process it read (CLOCK_MONOTONIC). A live record of a process
// older than that is already in what the dump read of it, or undone
// there: a mapping made then, or one unmapped since. The programs read
// no exiting task (PF_EXITING) nor any of an exiting process
// (SIGNAL_GROUP_EXIT), so the EXIT of a process's main thread is never
// older than its read: a process read is one that had not exited.
func (b *BPF) ReadTimes() (start uint64, readAt map[uint32]uint64) {
	return b.readStart, b.readAt
}

// Delegated returns the live MMAP2 records that stand for the
// synthesized records the last dump dropped as duplicates: a consumer
// that skips live records older than ReadTimes' must still apply them.
func (b *BPF) Delegated() dedupe.Delegated { return b.dd.Delegated() }

// noteRead notes the time of a synthesized record of the dump under way
// for the process it is about.
func (b *BPF) noteRead(raw []byte, t uint64) {
	switch perfdata.RecordView(raw).Type() {
	case perfdata.RecordMmap2, perfdata.RecordComm, perfdata.RecordFork, perfdata.RecordNamespaces:
	default:
		return
	}
	pid := perfdata.RecordView(raw).Pid()
	if at, ok := b.readAt[pid]; !ok || t < at {
		b.readAt[pid] = t
	}
}

// Write hands the held records to emit, about limit bytes of them (0:
// all), in perf's order; after the last, it closes the dump.
func (r *Run) Write(limit int) error {
	start := time.Now()
	defer func() { r.writing += time.Since(start) }()
	done, err := r.b.hold.flushSome(limit)
	if err == nil && done {
		err = r.d.Finish()
		done = true
	}
	r.done = done || err != nil
	return err
}

// Done reports whether the dump has ended: every record written, or an
// error returned.
func (r *Run) Done() bool { return r.done }

// Lost returns how many records the dump's programs could not write
// so far: all of them once Done.
func (r *Run) Lost() uint64 { return r.d.Stats.Lost }

// Stats returns the counts of the dump.
func (r *Run) Stats() assemble.Stats {
	r.d.Stats.Duplicates = r.b.dd.Duplicates - r.dups
	r.d.Stats.Stale = r.b.dd.Stale - r.stale
	st := r.d.FinishStats()
	st.Steps = append(slices.Clip(st.Steps), assemble.Step{Name: "write", Took: r.writing})
	return st
}

// read reads the host: the kernel maps, then the processes with the
// walk of the options.
func (b *BPF) read(ctx context.Context, d *assemble.Assembler) error {
	if err := b.configure(); err != nil {
		return err
	}
	start := time.Now()
	if !b.opts.NoKernel {
		if err := d.KernelMaps(b.text); err != nil {
			return err
		}
	}
	if err := d.BPFPrograms(); err != nil {
		return err
	}
	if err := d.Cgroups(); err != nil {
		return err
	}
	d.Stats.Steps = assemble.Time(d.Stats.Steps, "kernel maps", start)
	ran := progTime(b.objs.loaded()...)
	if err := b.readHeld(ctx, d); err != nil {
		return err
	}
	d.Stats.Steps = append(d.Stats.Steps, b.objs.takeSteps()...) // programs loaded on the way
	d.Stats.ProgramTime = progTime(b.objs.loaded()...) - ran
	var lost uint64
	if err := b.objs.SynthLost.Get(&lost); err != nil {
		return fmt.Errorf("read lost count: %w", err)
	}
	d.Stats.Lost += lost - b.lost
	b.lost = lost
	return nil
}

// MonotonicNow reads CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns()
// and of the rings' records.
func MonotonicNow() uint64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) // cannot fail for this clock
	return uint64(ts.Nano())
}

func (b *BPF) configure() error {
	var flags uint32
	if b.opts.Data {
		flags |= cfgData
	}
	if !b.opts.NoBuildID {
		flags |= cfgBuildID
	}
	if b.opts.Namespaces {
		flags |= cfgNamespaces
		dev, err := procfs.NSDev()
		if err != nil {
			return err
		}
		if err := b.objs.SynthNsDev.Set(dev); err != nil {
			return fmt.Errorf("set namespace device: %w", err)
		}
	}
	if err := b.objs.SynthGen.Set(b.gen); err != nil {
		return fmt.Errorf("set generation: %w", err)
	}
	if err := b.objs.SynthFlags.Set(flags); err != nil {
		return fmt.Errorf("set flags: %w", err)
	}
	if err := b.objs.ChunkLimit.Set(b.chunk); err != nil {
		return fmt.Errorf("set chunk limit: %w", err)
	}
	b.readBuf = b.iterBuf
	if b.walk == assemble.WalkMaple {
		b.readBuf = b.walkBuf
	}
	return b.objs.LastTid.Set(uint32(0))
}

// pass runs one iterator program over every task, or over each of pids
// when the dump is restricted to some processes, feeding its records to
// add in emission order.
func (b *BPF) pass(ctx context.Context, d *assemble.Assembler, prog *ebpf.Program, pids []int, add func([]byte) error) error {
	if len(b.opts.Pids) == 0 {
		return b.runIter(ctx, d, prog, 0, add)
	}
	return b.passEach(ctx, d, prog, pids, add)
}

// passEach runs one iterator program over the threads of each of pids;
// a process that is gone is skipped.
func (b *BPF) passEach(ctx context.Context, d *assemble.Assembler, prog *ebpf.Program, pids []int, add func([]byte) error) error {
	for _, pid := range pids {
		if prog == b.dumpVMA && b.stuck.has(pid) {
			b.lockedOut(d, pid) // still waiting since an earlier read
			continue
		}
		err := b.runIter(ctx, d, prog, pid, add)
		if errors.Is(err, bpfiter.ErrNoProcess) {
			d.Skip(pid)
			continue
		}
		if errors.Is(err, ErrLockWait) {
			b.lockedOut(d, pid)
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}
