package synth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	perf "github.com/elastic/go-perf"
	"golang.org/x/sys/unix"
)

// Ring sizes, in pages of data per CPU.
const (
	// DefaultRingPages is the ring size used when Options.RingPages is 0.
	DefaultRingPages = 256
	// MinRingPages is the smallest ring the pacing can keep lossless: it
	// must hold several of the largest records (a PATH_MAX file name).
	MinRingPages = 16
)

// rings is one PERF_COUNT_SW_BPF_OUTPUT event per online CPU, each with its
// ring buffer, registered in the programs' PERF_EVENT_ARRAY.
//
// go-perf opens and maps the events and copies records out of the rings;
// records are decoded here (synth/bpfrec.go), not with go-perf's decoder,
// which mis-pads strings and does not know the build-id form of MMAP2.
type rings struct {
	cpus    []int
	events  []*perf.Event
	size    int // data bytes per ring
	raw     perf.RawRecord
	expired context.Context
}

// ringSampleFormat is the sample layout of the BPF output events:
// u32 pid, u32 tid, u64 time, u32 size, u8 raw[size].
var ringSampleFormat = perf.SampleFormat{Tid: true, Time: true, Raw: true}

func openRings(pages int, arr *ebpf.Map) (*rings, error) {
	if pages == 0 {
		pages = DefaultRingPages
	}
	if pages < MinRingPages || pages&(pages-1) != 0 {
		return nil, fmt.Errorf("ring size %d pages: want a power of two >= %d", pages, MinRingPages)
	}
	cpus, err := onlineCPUs()
	if err != nil {
		return nil, err
	}
	attr := &perf.Attr{
		Type:         perf.SoftwareEvent,
		Config:       unix.PERF_COUNT_SW_BPF_OUTPUT,
		SampleFormat: ringSampleFormat,
		Options:      perf.Options{UseClockID: true},
		ClockID:      unix.CLOCK_MONOTONIC,
	}
	attr.SetSamplePeriod(1)
	// Never wake up per record: the dump drains the rings itself.
	attr.SetWakeupWatermark(uint32(pages * os.Getpagesize() / 2))

	expired, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	cancel()
	r := &rings{cpus: cpus, size: pages * os.Getpagesize(), expired: expired}
	for _, cpu := range cpus {
		ev, err := perf.Open(attr, perf.AllThreads, cpu, nil)
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("open BPF output event on cpu %d: %w", cpu, err)
		}
		r.events = append(r.events, ev)
		if err := ev.MapRingNumPages(pages); err != nil {
			r.Close()
			return nil, fmt.Errorf("map ring of cpu %d: %w", cpu, err)
		}
		fd, err := ev.FD()
		if err != nil {
			r.Close()
			return nil, err
		}
		if err := arr.Put(uint32(cpu), uint32(fd)); err != nil {
			r.Close()
			return nil, fmt.Errorf("register ring of cpu %d: %w", cpu, err)
		}
	}
	return r, nil
}

// drain hands every record now in the rings to fn, CPU by CPU. data is the
// record without its 8-byte header and is only valid during the call.
func (r *rings) drain(fn func(cpu int, h perf.RecordHeader, data []byte) error) error {
	for i, ev := range r.events {
		for ev.HasRecord() {
			err := ev.ReadRawRecord(r.expired, &r.raw)
			if errors.Is(err, context.DeadlineExceeded) {
				break
			}
			if err != nil {
				return fmt.Errorf("read ring of cpu %d: %w", r.cpus[i], err)
			}
			if err := fn(r.cpus[i], r.raw.Header, r.raw.Data); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *rings) Close() error {
	var errs []error
	for _, ev := range r.events {
		errs = append(errs, ev.Close())
	}
	r.events = nil
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
