package synth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
)

// Method is a way to synthesize the host's state: BPF iterators, or
// reading /proc. Every method produces the same records for the same
// processes.
type Method interface {
	// Dump hands every record, with its sample_id_all trailer, to emit,
	// in perf's order. rec is only valid during the call. The calls are
	// never concurrent and all end before Dump returns, but may come from
	// goroutines of the method's own.
	Dump(ctx context.Context, emit func(rec []byte) error) (Stats, error)
	Close() error
}

// Method names for OpenMethod.
const (
	MethodAuto      = "auto"
	MethodBPF       = "bpf"
	MethodProcmaps  = "procmaps"
	MethodProcquery = "procquery"
)

// OpenMethod opens a method by name; threads is the worker count of the
// /proc methods (0: one per CPU). With MethodAuto it tries bpf, then the
// faster of the /proc methods on this CPU (see procOrder), then the
// other, and returns why each one tried before failed.
func OpenMethod(name string, opts Options, threads int) (Method, []error, error) {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	if err := opts.Check(); err != nil {
		return nil, nil, err
	}
	switch name {
	case MethodBPF:
		if opts.NoLive {
			m, err := NewBPF(opts)
			return m, nil, err
		}
		m, err := NewLive(opts)
		return m, nil, err
	case MethodProcmaps:
		m, err := NewProcmaps(opts, threads)
		return m, nil, err
	case MethodProcquery:
		m, err := NewProcquery(opts, threads)
		return m, nil, err
	case MethodFloor:
		m, err := NewFloor(opts.Walk)
		return m, nil, err
	case MethodAuto, "":
		var why []error
		for _, try := range append([]string{MethodBPF}, procOrder(meltdownPath)...) {
			m, _, err := OpenMethod(try, opts, threads)
			if err == nil {
				return m, why, nil
			}
			why = append(why, fmt.Errorf("%s: %w", try, err))
		}
		return nil, why, errors.Join(why...)
	default:
		return nil, nil, fmt.Errorf("unknown method %q (want auto, bpf, procmaps or procquery)", name)
	}
}

// meltdownPath says whether the kernel isolates its page tables (PTI).
const meltdownPath = "/sys/devices/system/cpu/vulnerabilities/meltdown"

// procOrder is the order auto tries the /proc methods in, the faster
// first. procquery makes a PROCMAP_QUERY ioctl for each executable VMA
// where procmaps reads /proc/PID/maps 64 KiB at a time: far fewer system
// calls, for many more bytes of text the kernel formats. Without PTI the
// calls are cheap and procquery wins (at 500k VMAs, 2 workers: 181 ms
// against 403 ms on an AMD EPYC VM); with it each call switches page
// tables, twice, and procmaps wins (216-226 ms against 266-286 ms,
// build IDs left out of both, on the same kind of VM with PTI).
// BENCHMARKS.md has both.
func procOrder(meltdown string) []string {
	if b, err := os.ReadFile(meltdown); err == nil && bytes.Contains(b, []byte("PTI")) {
		return []string{MethodProcmaps, MethodProcquery}
	}
	return []string{MethodProcquery, MethodProcmaps}
}
