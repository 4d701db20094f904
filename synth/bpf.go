package synth

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/rlimit"
	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/internal/bpfiter"
	"golang.org/x/sys/unix"
)

// paceUnit mirrors SYNTH_PACE_UNIT in bpf/synth.h: the programs write one
// byte into the iterator's seq_file per paceUnit bytes that a record
// takes in a ring (its sample overhead included).
const paceUnit = 64

// maxRecordBytes bounds one emitted sample in a ring: struct synth_mmap2
// with a PATH_MAX name, plus SYNTH_SAMPLE_OVERHEAD.
const maxRecordBytes = hdrSize + 8 + 64 + 4096 + 48

// cfgData mirrors SYNTH_CFG_DATA.
const cfgData = 1

// BPF synthesizes records with BPF iterators. It holds the loaded programs
// and the per-CPU rings, and can run any number of dumps, one at a time.
type BPF struct {
	opts  Options
	objs  synthbpf.SynthObjects
	rings *rings
	gen   uint64
	ids   *idReader[synthbpf.SynthSynthFileKey] // reads the build IDs of files new to the cache
	gate  *gateVMA                              // the [vsyscall] area /proc shows for every process
	text  kernelMap                             // the kernel text map; zero without kernel addresses
	lost  uint64                                // synth_lost already accounted for
	// dd drops stale and duplicate synthesized records; a session feeds
	// it the live records.
	dd *deduper
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
	hold   *walkHold // the maple walk's records, kept between dumps for their memory
	// prev is the last whole MMAP2 record delivered, and next the one a
	// short record of the maple walk expands into (see expandNext).
	prev, next []byte
}

// NewBPF checks privileges, loads the iterator programs and opens the
// rings. Missing privileges give a *PermissionError.
func NewBPF(opts Options) (*BPF, error) {
	return newBPF(opts, ringConfig{pages: opts.RingPages})
}

func newBPF(opts Options, rc ringConfig) (*BPF, error) {
	if err := checkCaps(); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("remove memlock limit: %w", err)
	}
	b := &BPF{opts: opts, dd: newDeduper(0), ids: newIDReader[synthbpf.SynthSynthFileKey](opts.BuildIDTimeout)}
	if err := synthbpf.LoadSynthObjects(&b.objs, nil); err != nil {
		if errors.Is(err, os.ErrPermission) {
			return nil, &PermissionError{Op: "load BPF programs", Err: err}
		}
		return nil, fmt.Errorf("load BPF programs: %w", err)
	}
	r, err := openRings(rc, b.objs.Events)
	if err != nil {
		b.objs.Close()
		return nil, err
	}
	b.rings = r
	if len(r.live) > 0 {
		// Synthesized records are written under the side-band's attr.
		b.ident = r.live[0].ID()
	}
	b.iterBuf = make([]byte, readBudget(r.size))
	chunk, budget := walkLimits(r.size)
	b.chunk, b.walkBuf = chunk, make([]byte, budget)
	b.gate, err = findGateVMA()
	if err == nil && !opts.NoKernel {
		b.text, err = b.kernelText()
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// kernelText looks up _text and _etext once, with the kernel_text
// program (bpf_kallsyms_lookup_name), or from /proc/kallsyms when that
// program cannot run. The kernel text does not move while it runs.
func (b *BPF) kernelText() (kernelMap, error) {
	var start, end uint64
	_, err := b.objs.KernelText.Run(&ebpf.RunOptions{})
	if err == nil {
		err = errors.Join(b.objs.TextStart.Get(&start), b.objs.TextEnd.Get(&end))
	}
	if err != nil || start == 0 {
		return kallsymsText("/proc/kallsyms")
	}
	return textMap(start, end), nil
}

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
	var errs []error
	if b.rings != nil {
		errs = append(errs, b.rings.Close())
		b.rings = nil
	}
	errs = append(errs, b.objs.Close(), b.ids.close())
	b.objs = synthbpf.SynthObjects{}
	return errors.Join(errs...)
}

// Dump synthesizes the state of the host (or of opts.Pids) and hands every
// record, with its sample_id_all trailer, to emit, in perf's order: kernel
// maps, then for each process its threads' FORK and COMM records and its
// MMAP2 records. rec is only valid during the call.
func (b *BPF) Dump(ctx context.Context, emit func(rec []byte) error) (Stats, error) {
	r, err := b.startDump(ctx, emit, nil)
	for err == nil && !r.done {
		err = r.write(0)
	}
	if r == nil {
		return Stats{}, err
	}
	return r.stats(), err
}

// dumpRun is one dump of the BPF method, in two phases: startDump reads
// the host (the maple walk's records are held), then write hands the held
// records to emit a part at a time. A Session writes the next part when
// its reader has taken the last, so it never holds a whole dump twice.
type dumpRun struct {
	b           *BPF
	d           *dump
	dups, stale int // the deduper's counts when the dump began
	done        bool
}

// startDump reads the host for a dump whose records go to emit, and
// those of the walk's hold to held, if not nil (see dump.held).
func (b *BPF) startDump(ctx context.Context, emit, held func(rec []byte) error) (*dumpRun, error) {
	if b.rings == nil {
		return nil, os.ErrClosed
	}
	d := newDump(b.opts, emit, b.gate)
	d.held = held
	d.ident = b.ident
	d.stats.Method = "bpf"
	b.gen++
	b.dd.begin(b.gen, monotonicNow())
	r := &dumpRun{b: b, d: d, dups: b.dd.Duplicates, stale: b.dd.Stale}
	err := b.read(ctx, d)
	// A live record after the read cannot precede a synthesized one.
	b.dd.end()
	r.done = err != nil
	return r, err
}

// write hands the held records to emit, about limit bytes of them (0:
// all), in perf's order; after the last, it closes the dump.
func (r *dumpRun) write(limit int) error {
	done, err := r.b.hold.flushSome(limit)
	if err == nil && done {
		err = r.d.finish()
		done = true
	}
	r.done = done || err != nil
	return err
}

func (r *dumpRun) stats() Stats {
	r.d.stats.Duplicates = r.b.dd.Duplicates - r.dups
	r.d.stats.Stale = r.b.dd.Stale - r.stale
	return r.d.finishStats()
}

// read reads the host: the kernel maps, then the processes with the
// walk of the options.
func (b *BPF) read(ctx context.Context, d *dump) error {
	if err := b.configure(); err != nil {
		return err
	}
	if !b.opts.NoKernel {
		if err := d.kernelMaps(b.text); err != nil {
			return err
		}
	}
	if err := b.readHeld(ctx, d); err != nil {
		return err
	}
	var lost uint64
	if err := b.objs.SynthLost.Get(&lost); err != nil {
		return fmt.Errorf("read lost count: %w", err)
	}
	d.stats.Lost += lost - b.lost
	b.lost = lost
	return nil
}

// monotonicNow reads CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns()
// and of the rings' records.
func monotonicNow() uint64 {
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
	if b.opts.Walk != WalkIter {
		b.readBuf = b.walkBuf
	}
	return b.objs.LastTid.Set(uint32(0))
}

// pass runs one iterator program over every task, or over each of pids
// when the dump is restricted to some processes, feeding its records to
// add in emission order.
func (b *BPF) pass(ctx context.Context, d *dump, prog *ebpf.Program, pids []int, add func([]byte) error) error {
	if len(b.opts.Pids) == 0 {
		return b.runIter(ctx, d, prog, 0, add)
	}
	return b.passEach(ctx, d, prog, pids, add)
}

// passEach runs one iterator program over the threads of each of pids;
// a process that is gone is skipped.
func (b *BPF) passEach(ctx context.Context, d *dump, prog *ebpf.Program, pids []int, add func([]byte) error) error {
	for _, pid := range pids {
		err := b.runIter(ctx, d, prog, pid, add)
		if errors.Is(err, bpfiter.ErrNoProcess) {
			d.skip(pid)
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}
