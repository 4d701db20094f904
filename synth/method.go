package synth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"

	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/perfdata"
)

// Method is a way to synthesize the host's state: BPF iterators, or
// reading /proc. Every method produces the same records for the same
// processes. OpenMethod opens one; it can run any number of dumps, one
// at a time.
type Method struct {
	name    MethodName
	partial bool // its target is not the whole host
	d       dumper
}

// dumper is what a method does: the BPF method with the side-band
// (liveMethod), or one of internal/method's (see withAttrs).
type dumper interface {
	Dump(ctx context.Context, emit func(rec []byte) error) (Stats, error)
	Attrs() []perfdata.EventAttr
	Close() error
}

// MethodName names a method, for OpenMethod, Method.Name and
// Stats.Method.
type MethodName = config.MethodName

// Method names.
const (
	// MethodAuto is MethodBPF where the host allows it, else the faster
	// of the /proc methods on this CPU, else the other.
	MethodAuto = config.MethodAuto
	// MethodBPF reads the tasks and their VMAs with BPF iterators, with
	// the live side-band (a Session) unless Options.NoLive.
	MethodBPF = config.MethodBPF
	// MethodProcmaps parses /proc/PID/maps.
	MethodProcmaps = config.MethodProcmaps
	// MethodProcquery asks the kernel for each process's mappings with
	// the PROCMAP_QUERY ioctl (Linux 6.11).
	MethodProcquery = config.MethodProcquery
)

// ParseMethod returns the method named s: auto, bpf, procmaps or
// procquery; "" is MethodAuto.
func ParseMethod(s string) (MethodName, error) { return config.ParseMethod(s) }

// MethodOptions configure OpenMethod. The zero value opens the best
// method the host allows, to dump as the zero Options do.
type MethodOptions struct {
	// Options say what the method's dumps synthesize.
	Options
	// Threads is the worker count of the /proc methods; 0 means one per
	// CPU.
	Threads int
	// Fallback, when set, is told of each method MethodAuto could not
	// open, and why, before it tries the next.
	Fallback func(method MethodName, err error)
}

// OpenMethod opens the method name (MethodAuto if ""). A missing
// privilege gives a *PermissionError; procquery on a kernel without it,
// ErrNoProcquery; a target that names no task, or that no process
// matches, ErrNoProcess or ErrNoMatch (see Target.Processes). With MethodAuto it tries bpf, then the faster of the
// /proc methods on this CPU (procquery, unless the kernel isolates its
// page tables against Meltdown, where each of procquery's many ioctls
// switches them), then the other; the error of the last says why none
// opened.
func OpenMethod(name MethodName, opts MethodOptions) (*Method, error) {
	d, err := resolve(&opts.Options)
	if err != nil {
		return nil, err
	}
	return openResolved(name, opts, d)
}

// openResolved is OpenMethod with the options resolved: d.
func openResolved(name MethodName, opts MethodOptions, d config.Resolved) (*Method, error) {
	name, err := ParseMethod(string(name))
	if err != nil {
		return nil, err
	}
	if name != MethodAuto {
		return openMethod(name, opts, d)
	}
	var why []error
	for _, try := range append([]MethodName{MethodBPF}, procOrder(meltdownPath)...) {
		m, err := openMethod(try, opts, d)
		if err == nil {
			return m, nil
		}
		if opts.Fallback != nil {
			opts.Fallback(try, err)
		}
		why = append(why, fmt.Errorf("%s: %w", try, err))
	}
	return nil, errors.Join(why...)
}

// openMethod opens one method by name, to dump what d says.
func openMethod(name MethodName, opts MethodOptions, d config.Resolved) (*Method, error) {
	threads := opts.Threads
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	var m dumper
	var err error
	switch name {
	case MethodBPF:
		if opts.NoLive {
			m, err = newBPF(d)
		} else {
			m, err = newLive(SessionOptions{Options: opts.Options}, d)
		}
	case MethodProcmaps:
		m, err = newProcmaps(d, threads)
	case MethodProcquery:
		m, err = newProcquery(d, threads)
	default: // MethodAuto: openResolved tries each in turn
		return nil, fmt.Errorf("method %s is a choice of methods, not one", name)
	}
	if err != nil {
		return nil, err
	}
	return &Method{name: name, partial: d.Partial(), d: m}, nil
}

// rescope changes what the method's next dumps read and write: the
// processes, and every option the method does not take when it loads
// (config.Resolved.WithLoaded), so that it can load before they are
// known. Not while a dump runs.
func (m *Method) rescope(d config.Resolved) error {
	c, ok := m.d.(withAttrs)
	if ok {
		c, ok = c.setOptions(d)
	}
	if !ok {
		return fmt.Errorf("method %s cannot change its options once open", m.name)
	}
	m.d, m.partial = c, d.Partial()
	return nil
}

// Name is the method opened: MethodBPF, MethodProcmaps or
// MethodProcquery.
func (m *Method) Name() MethodName { return m.name }

// Dump hands every record, with its sample_id_all trailer, to emit,
// in perf's order. rec is only valid during the call. The calls are
// never concurrent and all end before Dump returns, but may come from
// goroutines of the method's own.
func (m *Method) Dump(ctx context.Context, emit func(rec []byte) error) (Stats, error) {
	return m.d.Dump(ctx, emit)
}

// Walk says how the method's dumps read each process's VMAs: WalkMaple
// or WalkIter for MethodBPF, and, where Options.Walk left the choice to
// the method and it chose WalkIter, why (a *ProgramError where the
// kernel's verifier refused the maple walk); "" for the /proc methods.
// Stats.Walk and Stats.WalkFallback say the same after each dump.
func (m *Method) Walk() (Walk, error) {
	if w, ok := m.d.(interface{ walk() (Walk, error) }); ok {
		return w.walk()
	}
	return "", nil
}

// Attrs returns the attrs the records are written under: the attr of
// the Options (Options.Attr) for the /proc methods, the rings' attrs for
// the BPF method.
func (m *Method) Attrs() []perfdata.EventAttr { return m.d.Attrs() }

// Close releases what the method holds (for BPF, the programs and the
// rings).
func (m *Method) Close() error { return m.d.Close() }

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
func procOrder(meltdown string) []MethodName {
	if b, err := os.ReadFile(meltdown); err == nil && bytes.Contains(b, []byte("PTI")) {
		return []MethodName{MethodProcmaps, MethodProcquery}
	}
	return []MethodName{MethodProcquery, MethodProcmaps}
}
