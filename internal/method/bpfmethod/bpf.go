package bpfmethod

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cilium/ebpf/rlimit"

	"github.com/synth-dev/synth/internal/assemble"
	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/dedupe"
)

// BPF synthesizes records with BPF iterators. It composes what it
// owns, each part closing its own: the loaded objects (load.go), the
// per-CPU rings (ring.go), the build IDs' reads (buildid.go), the walker
// that runs the dumps and holds their records (walk.go), the live
// records' side (liveSide, live.go), and the unmap programs' links
// (unmap.go). It runs any number of dumps, one at a
// time, each a Generation (gen.go).
type BPF struct {
	opts   config.Resolved
	lo     *loaded
	rings  *rings
	ids    *buildIDs
	walk   *walker
	unmaps *unmapLinks // attached by WatchUnmaps
	live   *liveSide
	// dd drops stale and duplicate synthesized records; the live
	// records of the side-band rings feed it while dumping.
	dd  *dedupe.Deduper
	gen uint64
	// round is the Session's drains', between dumps.
	round round
	// ident is the sample_id_all identifier of synthesized records.
	ident uint64
}

// New checks privileges, loads the iterator programs and opens the
// rings of a dump without the live side-band. Missing privileges give a
// *PermissionError.
func New(opts config.Resolved) (*BPF, error) {
	return NewWithRings(opts, RingConfig{Pages: opts.RingPages})
}

// NewWithRings is New with the rings rc describes: a Session's, with the
// live side-band and a sampling event.
func NewWithRings(opts config.Resolved, rc RingConfig) (*BPF, error) {
	if err := checkCaps(); err != nil {
		return nil, err
	}
	if err := rlimit.RemoveMemlock(); err != nil {
		return nil, fmt.Errorf("remove memlock limit: %w", err)
	}
	objs, err := loadObjects(opts.KernelCache)
	if err != nil {
		return nil, err
	}
	b := &BPF{opts: opts, dd: dedupe.New(0), lo: &loaded{objs: objs}}
	b.ids = newBuildIDs(objs, opts.BuildIDWait())
	// The output rings need only the events map: they open while the
	// programs load. The side-band opens after (rings.openSideband).
	type opened struct {
		r   *rings
		err error
	}
	ringsc := make(chan opened, 1)
	go func() {
		start := time.Now()
		r, err := openRings(rc, objs.Events)
		objs.step("rings", start)
		ringsc <- opened{r, err}
	}()
	err = b.lo.loadPrograms(opts.Walk)
	o := <-ringsc
	b.rings = o.r
	if err == nil {
		err = o.err
	}
	if err == nil && rc.Sideband {
		start := time.Now()
		err = b.rings.openSideband(rc)
		objs.step("side-band", start)
	}
	if err != nil {
		b.Close()
		return nil, err
	}
	if len(b.rings.live) > 0 {
		// Synthesized records are written under the side-band's attr.
		b.ident = b.rings.live[0].ID()
	}
	b.live = newLiveSide(&rc, b.rings, b.dd, opts.BuildIDWait(), b.ids.files)
	b.walk = newWalker(b.lo, b.rings, b.ids, b.live)
	if err := b.lo.findKernel(opts.NoKernel); err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// SetOptions changes what the next dumps read and write: the
// processes, and every option but those the method took when it loaded
// (see config.Resolved.WithLoaded). It returns the options the dumps
// now use. Not while a dump runs.
func (b *BPF) SetOptions(o config.Resolved) config.Resolved {
	b.opts = o.WithLoaded(b.opts)
	return b.opts
}

// Walk returns the walk the dumps use (config.WalkMaple or config.WalkIter)
// and, when the options left the choice to the kernel and it is not the
// maple walk, why.
func (b *BPF) Walk() (config.Walk, error) { return b.lo.walk, b.lo.walkWhy }

// Gen returns the generation of the last dump started.
func (b *BPF) Gen() uint64 { return b.gen }

// Close releases the unmap links, the rings, the build IDs' reads, the
// held records and the objects. It is safe to call twice.
func (b *BPF) Close() error {
	errs := []error{b.unmaps.Close()}
	b.unmaps = nil
	if b.rings != nil {
		errs = append(errs, b.rings.Close())
		b.rings = nil
	}
	errs = append(errs, b.lo.Close(), b.ids.Close(), b.live.Close(), b.walk.Close())
	return errors.Join(errs...)
}

// Dump synthesizes the state of the host (or of opts.Pids) and hands every
// record, with its sample_id_all trailer, to emit, in perf's order: kernel
// maps, then for each process its threads' FORK and COMM records and its
// MMAP2 records. rec is only valid during the call.
func (b *BPF) Dump(ctx context.Context, emit func(rec []byte) error) (config.Stats, error) {
	g, err := b.Start(ctx, emit, nil)
	for err == nil && !g.done {
		err = g.Write(0)
	}
	if g == nil {
		return config.Stats{}, err
	}
	return g.Stats(), err
}

// Start reads the host for a dump of a new generation whose records go
// to emit, and those of the walk's hold to held, if not nil (see
// assemble.Assembler.Held). The Generation's Write writes the held
// records.
func (b *BPF) Start(ctx context.Context, emit, held func(rec []byte) error) (*Generation, error) {
	if b.rings == nil {
		return nil, os.ErrClosed
	}
	d := assemble.New(b.opts, emit, b.lo.gate)
	d.Held = held
	d.Ident = b.ident
	d.Stats.Method = config.MethodBPF
	d.Stats.Walk = b.lo.walk
	if b.lo.walkWhy != nil {
		d.Stats.WalkFallback = b.lo.walkWhy
	}
	d.Stats.Steps = append(d.Stats.Steps, b.lo.objs.takeSteps()...) // the loading, for the first dump
	d.Stats.KernelCacheMiss = b.lo.objs.linked.takeMissed()
	b.gen++
	g := &Generation{w: b.walk, d: d, dd: b.dd, gen: b.gen, reads: newReads(MonotonicNow()),
		dups: b.dd.Duplicates, stale: b.dd.Stale}
	b.dd.Begin(g.gen, g.reads.start)
	b.live.dumping = true
	err := b.walk.read(ctx, g, b.opts)
	// A live record after the read cannot precede a synthesized one.
	b.live.dumping = false
	b.dd.End()
	g.reads.delegated = b.dd.Delegated()
	g.done = err != nil
	return g, err
}
