package bpfmethod

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/perfring"
	"github.com/synth-dev/synth/perfdata"
)

// ringSampleType is the sample layout of the BPF output events: u64 id,
// u32 pid, u32 tid, u64 time, u32 size, u8 raw[size].
const ringSampleType = perfdata.SampleIdentifier | perfdata.SampleTID |
	perfdata.SampleTime | perfdata.SampleRaw

// SidebandSampleType is the sample_id_all trailer the kernel appends to
// live records, and so the one synthesized records get when they are
// written with them. The identifier comes first (and last, in the
// trailer) so that records of several events can share a ring.
const SidebandSampleType = perfdata.SampleIdentifier | perfdata.SampleTID | perfdata.SampleTime

// RingConfig says which rings to open and what they receive.
type RingConfig struct {
	Pages int // data pages per CPU; 0: config.DefaultRingPages
	// Sideband opens a second ring per CPU for the kernel's live
	// MMAP2, COMM and FORK/EXIT records.
	Sideband bool
	// Records are the attr bits of the optional records the side-band
	// reports, as the dump synthesizes them (config.Resolved.RecordFlags):
	// non-executable mappings, NAMESPACES, CGROUP.
	Records uint64
	// BuildID gives live MMAP2 records their files' build IDs, read in
	// userspace (liveIDs): the side-band never asks the kernel for them
	// (see LiveAttr).
	BuildID bool
	// LiveScope, when set, narrows the side-band to a target's tasks,
	// as perf record opens its side-band for one: the kernel then
	// reports only their records (and the host's KSYMBOL, BPF_EVENT
	// and CGROUP), so that no other process's records take ring room
	// from the target's. nil: every task on each CPU (-a, -u).
	LiveScope *Scope
	// Sampler, when set, is opened on every CPU, for the tasks Scope
	// says, with its output redirected into that CPU's side-band ring.
	Sampler *perfdata.Attr
	Scope   SampleScope
	// SampleType is the side-band events' sample_type, which sets the
	// trailer of their records; 0: SidebandSampleType. A Session with
	// a Sampler gives the side-band the sampler's, as perf gives its
	// dummy event its main event's: every attr of a perf.data file
	// then has one sample_type, which readers rely on.
	SampleType uint64
	// SampleRegsUser goes with a SampleType that has
	// PERF_SAMPLE_REGS_USER: the kernel refuses that bit without a mask.
	SampleRegsUser uint64
	// SamplerCPUs, when set, are the only CPUs the Sampler is opened
	// on (perf record -C); each must be online.
	SamplerCPUs []int
}

// outAttr is the attr of the BPF output events: they carry the records
// the programs emit and nothing else, so that the pacing, which bounds
// what the programs write between two drains, bounds everything in
// their rings.
func (c *RingConfig) outAttr() perfdata.Attr {
	return perfdata.Attr{
		Type:         perfdata.TypeSoftware,
		Size:         perfdata.AttrSize,
		Config:       perfdata.CountSWBPFOutput,
		SamplePeriod: 1,
		SampleType:   ringSampleType,
		Flags:        perfdata.AttrWatermark | perfdata.AttrUseClockID,
		// Never wake up per record: readers drain between reads.
		WakeupEvents: uint32(c.Pages * os.Getpagesize() / 2),
		ClockID:      unix.CLOCK_MONOTONIC,
	}
}

// LiveAttr is the attr of the side-band events: software dummy events,
// as `perf record` opens for its side-band, that report every mmap,
// comm, fork and exit on their CPU.
//
// Never with attr.build_id: perf_event_mmap_output() sets
// PERF_RECORD_MISC_MMAP_BUILD_ID in the mmap event it shares among every
// event it reports a mapping to, and never clears it (from 5.12 until
// 7.3: docs/kernel/mmap-build-id-bit.md), so the events served after one
// with build IDs (another program's perf record without them) get the
// bit over the maj/min/ino form, and perf 6.1 aborts reading their
// records. synth cannot repair another program's file; it reads build
// IDs itself (liveIDs).
func (c *RingConfig) LiveAttr() perfdata.Attr {
	flags := uint64(perfdata.AttrWatermark | perfdata.AttrUseClockID |
		perfdata.AttrMmap | perfdata.AttrMmap2 | perfdata.AttrComm |
		perfdata.AttrCommExec | perfdata.AttrTask | perfdata.AttrSampleIDAll | c.Records)
	return perfdata.Attr{
		Type:           perfdata.TypeSoftware,
		Size:           perfdata.AttrSize,
		Config:         perfdata.CountSWDummy,
		SamplePeriod:   1,
		SampleType:     cmp.Or(c.SampleType, SidebandSampleType),
		SampleRegsUser: c.SampleRegsUser,
		Flags:          flags,
		WakeupEvents:   uint32(c.Pages * os.Getpagesize() / 2),
		ClockID:        unix.CLOCK_MONOTONIC,
	}
}

// rings are the per-CPU rings of a BPF method or session. The dumps'
// records go to rings of their own (out), registered in the programs'
// PERF_EVENT_ARRAY (events); the kernel's live records and the samples
// go to a second set (live), and the unmap programs' records, once they
// are watched, to a third (unmaps, in unmap_events). Neither live nor
// unmap traffic, however heavy, can then take the room the pacing
// counts on: synthesized records are not lost.
type rings struct {
	cpus     []int
	out      []*perfring.Event
	live     []*perfring.Event // nil without a side-band: each CPU's ring owner
	tasks    []*perfring.Event // the scoped side-band, into live (LiveScope)
	samplers []*perfring.Event
	unmaps   []*perfring.Event // nil until WatchUnmaps
	size     int               // data bytes per ring
	// unmapsLost adds up the kernel's counts of the unmap records a full
	// unmap ring refused (its PERF_RECORD_LOST records); read by
	// UnmapsLost from any goroutine.
	unmapsLost atomic.Uint64
	// only, while the samplers open, are the CPUs they open on; nil:
	// every CPU.
	only map[int]bool
}

// covers reports whether an event now being opened goes on cpu.
func (r *rings) covers(cpu int) bool { return r.only == nil || r.only[cpu] }

// openRings opens the BPF output rings, registered in arr, the
// programs' PERF_EVENT_ARRAY; openSideband opens the rest.
func openRings(c RingConfig, arr *ebpf.Map) (*rings, error) {
	pages, err := c.pages()
	if err != nil {
		return nil, err
	}
	cpus, err := perfring.OnlineCPUs()
	if err != nil {
		return nil, err
	}
	r := &rings{cpus: cpus, size: pages * os.Getpagesize()}
	for _, cpu := range cpus {
		if err := r.openOut(cpu, &c, arr); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

// pages is the ring size in pages c asks for, checked.
func (c *RingConfig) pages() (int, error) {
	if c.Pages == 0 {
		c.Pages = config.DefaultRingPages
	}
	if c.Pages < config.MinRingPages || c.Pages&(c.Pages-1) != 0 {
		return 0, fmt.Errorf("ring size %d pages: want a power of two >= %d", c.Pages, config.MinRingPages)
	}
	return c.Pages, nil
}

// openSideband opens, if c asks for one, the side-band ring of each CPU,
// then the scoped side-band and the samplers into them. Its ring owners
// hear KSYMBOL and BPF_EVENT, which the kernel grows for every older
// listener by the size of the trailer of each newer one
// (perfdata.TrimGrown): opened after synth's own programs load, they
// grow no record of those loads that another profiler started before
// synth gets.
func (r *rings) openSideband(c RingConfig) error {
	if !c.Sideband {
		return nil
	}
	if _, err := c.pages(); err != nil {
		return err
	}
	for _, cpu := range r.cpus {
		live, err := openRing(c.ownerAttr(), cpu, c.Pages, "side-band")
		if err != nil {
			return err
		}
		r.live = append(r.live, live)
	}
	return r.openTargets(&c)
}

// openTargets opens the scoped side-band, then the samplers, into the
// side-band rings.
func (r *rings) openTargets(c *RingConfig) error {
	if c.LiveScope != nil {
		if err := r.openScoped(c); err != nil {
			return err
		}
	}
	if c.Sampler == nil {
		return nil
	}
	if c.SamplerCPUs != nil {
		r.only = make(map[int]bool)
		for _, cpu := range c.SamplerCPUs {
			if !slices.Contains(r.cpus, cpu) {
				return fmt.Errorf("cpu %d is not online", cpu)
			}
			r.only[cpu] = true
		}
		defer func() { r.only = nil }()
	}
	switch sc := &c.Scope; {
	case sc.Cgroup != nil:
		return r.openCgroup(c.Sampler, sc.Cgroup, &r.samplers, "sampling")
	case sc.Tasks != nil:
		return r.openTasks(c.Sampler, sc, &r.samplers, "sampling")
	}
	for i, cpu := range r.cpus {
		if !r.covers(cpu) {
			continue
		}
		ev, err := perfring.Open(c.Sampler, -1, cpu)
		if err := r.redirect(ev, err, i, "sampling", "every task"); err != nil {
			return err
		}
		r.samplers = append(r.samplers, ev)
	}
	return nil
}

// openOut opens the BPF output ring of cpu and registers it in arr.
func (r *rings) openOut(cpu int, c *RingConfig, arr *ebpf.Map) error {
	out, err := openRing(c.outAttr(), cpu, c.Pages, "BPF output")
	if err != nil {
		return err
	}
	r.out = append(r.out, out)
	if err := arr.Put(uint32(cpu), uint32(out.FD())); err != nil {
		return fmt.Errorf("register ring of cpu %d: %w", cpu, err)
	}
	return nil
}

// openUnmaps opens the unmap programs' ring of each CPU, as large as the
// others, and registers it in arr (unmap_events). It opens all or none.
func (r *rings) openUnmaps(arr *ebpf.Map) error {
	c := RingConfig{Pages: r.size / os.Getpagesize()}
	for _, cpu := range r.cpus {
		ev, err := openRing(c.outAttr(), cpu, c.Pages, "unmap output")
		if err == nil {
			r.unmaps = append(r.unmaps, ev)
			err = arr.Put(uint32(cpu), uint32(ev.FD()))
		}
		if err != nil {
			for _, ev := range r.unmaps {
				ev.Close()
			}
			r.unmaps = nil
			return fmt.Errorf("unmap ring of cpu %d: %w", cpu, err)
		}
	}
	return nil
}

// ErrNoTask says that every task an event was to be opened for (the
// sampler, or a target's side-band) has exited.
var ErrNoTask = errors.New("every target task has exited")

// openEvent opens a on one CPU, for every thread.
func openEvent(a *perfdata.Attr, cpu int, what string) (*perfring.Event, error) {
	ev, err := perfring.Open(a, -1, cpu)
	if errors.Is(err, os.ErrPermission) {
		return nil, &PermissionError{Op: "perf_event_open", Err: err}
	}
	if err != nil {
		return nil, fmt.Errorf("open %s event on cpu %d: %w", what, cpu, err)
	}
	return ev, nil
}

func openRing(a perfdata.Attr, cpu, pages int, what string) (*perfring.Event, error) {
	ev, err := openEvent(&a, cpu, what)
	if err != nil {
		return nil, err
	}
	if err := ev.MapRing(pages); err != nil {
		ev.Close()
		return nil, fmt.Errorf("cpu %d: %w", cpu, err)
	}
	return ev, nil
}

// ids returns the kernel ids of the side-band events and of the samplers.
func (r *rings) ids() (live, samplers []uint64) {
	for _, ev := range r.live {
		live = append(live, ev.ID())
	}
	for _, ev := range r.tasks {
		live = append(live, ev.ID())
	}
	for _, ev := range r.samplers {
		samplers = append(samplers, ev.ID())
	}
	return live, samplers
}

// enableSamplers starts the samplers, opened disabled, or stops them.
func (r *rings) enableSamplers(on bool) error {
	for _, s := range r.samplers {
		op := s.Disable
		if on {
			op = s.Enable
		}
		if err := op(); err != nil {
			return err
		}
	}
	return nil
}

// drain hands every record now in the given rings to fn, CPU by CPU. rec
// is the whole record, header included, and is only valid during the
// call.
func (r *rings) drain(evs []*perfring.Event, fn func(cpu int, rec []byte) error) error {
	for i, ev := range evs {
		err := ev.Ring().ReadAll(func(rec []byte) error { return fn(r.cpus[i], rec) })
		if err != nil {
			return fmt.Errorf("read ring of cpu %d: %w", r.cpus[i], err)
		}
	}
	return nil
}

// drainInto moves what the rings hold into rd: the output rings first,
// then the unmap rings, then the side-band rings. A live record that
// precedes a synthesized one in time was in its ring before the
// synthesized one was written (the kernel writes it under the mmap write
// lock, the programs read under the read lock), so deliver, handing the
// live records over first, has it in the deduper before the generation
// judges the synthesized one.
func (r *rings) drainInto(rd *round) error {
	rd.reset()
	if err := r.drain(r.out, rd.addOut); err != nil {
		return err
	}
	if err := r.drain(r.unmaps, r.addUnmap(rd)); err != nil {
		return err
	}
	return r.drain(r.live, rd.addLive)
}

// addUnmap returns what takes a record of an unmap ring into rd: a
// sample as an output ring's (round.unwrap tells the unmap records
// apart), the kernel's count of the records a full ring refused into
// unmapsLost, never into the round's lost, which are the dump's.
func (r *rings) addUnmap(rd *round) func(cpu int, rec []byte) error {
	return func(cpu int, rec []byte) error {
		if perfdata.RecordView(rec).Type() == perfdata.RecordLost {
			if l := perfdata.LostView(rec); l.Fits() {
				r.unmapsLost.Add(l.Lost())
			}
			return nil
		}
		return rd.addOut(cpu, rec)
	}
}

// liveFDs returns the descriptors of the side-band events, for poll(2).
func (r *rings) liveFDs() []int { return fdsOf(r.live) }

func fdsOf(evs []*perfring.Event) []int {
	fds := make([]int, len(evs))
	for i, ev := range evs {
		fds[i] = ev.FD()
	}
	return fds
}

func (r *rings) Close() error {
	var errs []error
	for _, s := range r.samplers {
		errs = append(errs, s.Close())
	}
	for _, evs := range [][]*perfring.Event{r.tasks, r.live, r.unmaps, r.out} {
		for _, ev := range evs {
			errs = append(errs, ev.Close())
		}
	}
	r.samplers, r.tasks, r.live, r.unmaps, r.out = nil, nil, nil, nil, nil
	return errors.Join(errs...)
}
