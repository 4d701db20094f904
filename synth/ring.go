package synth

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/perfdata"
)

// Ring sizes, in pages of data per CPU.
const (
	// DefaultRingPages is the ring size used when Options.RingPages is 0.
	DefaultRingPages = 256
	// MinRingPages is the smallest ring the pacing can keep lossless: it
	// must hold several of the largest records (a PATH_MAX file name).
	MinRingPages = 16
)

// ringSampleType is the sample layout of the BPF output events: u64 id,
// u32 pid, u32 tid, u64 time, u32 size, u8 raw[size]. The identifier
// comes first so that the samples of several events can share a ring;
// the sample_id_all trailer of live records is then TID|TIME|IDENTIFIER.
const ringSampleType = perfdata.SampleIdentifier | perfdata.SampleTID |
	perfdata.SampleTime | perfdata.SampleRaw

// sidebandSampleType is the sample_id_all trailer the kernel appends to
// live records in the rings, and so the one synthesized records get when
// they are written with them.
const sidebandSampleType = ringSampleType &^ perfdata.SampleRaw

// ringConfig says what the rings receive besides the BPF records.
type ringConfig struct {
	pages int
	// sideband turns on the live MMAP2, COMM and FORK/EXIT records.
	sideband bool
	data     bool // live records of non-executable mappings too
	buildID  bool // live MMAP2 records in build-ID form
	// sampler, when set, is opened on every CPU with its output
	// redirected into that CPU's ring.
	sampler *perfdata.Attr
}

// ringAttr is the attr of the BPF output events that own the rings.
func (c *ringConfig) ringAttr() perfdata.Attr {
	flags := uint64(perfdata.AttrWatermark | perfdata.AttrUseClockID)
	if c.sideband {
		flags |= perfdata.AttrMmap | perfdata.AttrMmap2 | perfdata.AttrComm |
			perfdata.AttrCommExec | perfdata.AttrTask | perfdata.AttrSampleIDAll
		if c.data {
			flags |= perfdata.AttrMmapData
		}
		if c.buildID {
			flags |= perfdata.AttrBuildID
		}
	}
	return perfdata.Attr{
		Type:         unix.PERF_TYPE_SOFTWARE,
		Size:         perfdata.AttrSize,
		Config:       unix.PERF_COUNT_SW_BPF_OUTPUT,
		SamplePeriod: 1,
		SampleType:   ringSampleType,
		Flags:        flags,
		// Never wake up per record: readers drain at half a ring, or
		// on their own schedule.
		WakeupEvents: uint32(c.pages * os.Getpagesize() / 2),
		ClockID:      unix.CLOCK_MONOTONIC,
	}
}

// rings is one PERF_COUNT_SW_BPF_OUTPUT event per online CPU, each with its
// ring buffer, registered in the programs' PERF_EVENT_ARRAY. With a
// sideband the same rings carry the kernel's live records, and with a
// sampler its samples, in one time-ordered stream per CPU.
type rings struct {
	cpus     []int
	out      []*perfEvent // own the rings, one per CPU
	samplers []*perfEvent
	size     int // data bytes per ring
	bpfIDs   map[uint64]struct{}
}

func openRings(c ringConfig, arr *ebpf.Map) (*rings, error) {
	if c.pages == 0 {
		c.pages = DefaultRingPages
	}
	if c.pages < MinRingPages || c.pages&(c.pages-1) != 0 {
		return nil, fmt.Errorf("ring size %d pages: want a power of two >= %d", c.pages, MinRingPages)
	}
	cpus, err := onlineCPUs()
	if err != nil {
		return nil, err
	}
	r := &rings{cpus: cpus, size: c.pages * os.Getpagesize(), bpfIDs: make(map[uint64]struct{})}
	attr := c.ringAttr()
	for _, cpu := range cpus {
		if err := r.openCPU(cpu, &attr, &c, arr); err != nil {
			r.Close()
			return nil, err
		}
	}
	return r, nil
}

func (r *rings) openCPU(cpu int, attr *perfdata.Attr, c *ringConfig, arr *ebpf.Map) error {
	ev, err := openPerfEvent(attr, -1, cpu)
	if err != nil {
		return fmt.Errorf("open BPF output event on cpu %d: %w", cpu, err)
	}
	r.out = append(r.out, ev)
	r.bpfIDs[ev.id] = struct{}{}
	if err := ev.mapRing(c.pages); err != nil {
		return fmt.Errorf("cpu %d: %w", cpu, err)
	}
	if err := arr.Put(uint32(cpu), uint32(ev.fd)); err != nil {
		return fmt.Errorf("register ring of cpu %d: %w", cpu, err)
	}
	if c.sampler == nil {
		return nil
	}
	s, err := openPerfEvent(c.sampler, -1, cpu)
	if err != nil {
		return fmt.Errorf("open sampling event on cpu %d: %w", cpu, err)
	}
	r.samplers = append(r.samplers, s)
	if err := s.redirect(ev); err != nil {
		return fmt.Errorf("cpu %d: %w", cpu, err)
	}
	return nil
}

// ids returns the kernel ids of the ring events and of the samplers.
func (r *rings) ids() (out, samplers []uint64) {
	for _, ev := range r.out {
		out = append(out, ev.id)
	}
	for _, ev := range r.samplers {
		samplers = append(samplers, ev.id)
	}
	return out, samplers
}

// enableSamplers starts the samplers, opened disabled.
func (r *rings) enableSamplers() error {
	for _, s := range r.samplers {
		if err := s.enable(); err != nil {
			return err
		}
	}
	return nil
}

// drain hands every record now in the rings to fn, CPU by CPU. rec is the
// whole record, header included, and is only valid during the call.
func (r *rings) drain(fn func(cpu int, rec []byte) error) error {
	for i, ev := range r.out {
		err := ev.readAll(func(rec []byte) error { return fn(r.cpus[i], rec) })
		if err != nil {
			return fmt.Errorf("read ring of cpu %d: %w", r.cpus[i], err)
		}
	}
	return nil
}

// pending reports whether any ring holds unread records.
func (r *rings) pending() bool {
	for _, ev := range r.out {
		if ev.pending() {
			return true
		}
	}
	return false
}

// fds returns the descriptors of the ring events, for poll(2).
func (r *rings) fds() []int {
	fds := make([]int, len(r.out))
	for i, ev := range r.out {
		fds[i] = ev.fd
	}
	return fds
}

func (r *rings) Close() error {
	var errs []error
	for _, ev := range r.samplers {
		errs = append(errs, ev.close())
	}
	for _, ev := range r.out {
		errs = append(errs, ev.close())
	}
	r.samplers, r.out = nil, nil
	return errors.Join(errs...)
}

// onlineCPUs parses /sys/devices/system/cpu/online ("0-3,5").
func onlineCPUs() ([]int, error) {
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return nil, fmt.Errorf("online cpus: %w", err)
	}
	return parseCPUList(strings.TrimSpace(string(b)))
}

func parseCPUList(s string) ([]int, error) {
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("cpu list %q: bad range %q", s, part)
			}
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}
