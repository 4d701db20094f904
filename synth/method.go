package synth

import (
	"context"
	"errors"
	"fmt"
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
// /proc methods (0: one per CPU). With MethodAuto it tries bpf, then
// procquery, then procmaps, and returns why each better one failed.
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
		for _, try := range []string{MethodBPF, MethodProcquery, MethodProcmaps} {
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
