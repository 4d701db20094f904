package synth

import (
	"context"
	"io"
	"sync"
	"time"
)

// ProfileOptions configure Profile, a minimal perf record built on a
// Session. The zero value samples every CPU at DefaultSampleFreq.
//
// The sampling event is opened as perf record opens it for the same
// target (see SampleOptions).
type ProfileOptions struct {
	// Options say what the dumps synthesize, and for whom: the target
	// (Options.Target) is what the profile covers, its processes with
	// the children they fork from now on; the zero Target profiles the
	// whole system. SampleType is the session's.
	Options
	// Event, Fallback, ExcludeKernel, ExcludeUser, Freq, Period, CPUs
	// and Callchain are as in SampleOptions.
	Event                      string
	Fallback                   bool
	ExcludeKernel, ExcludeUser bool
	Freq, Period               uint64
	CPUs                       []int
	Callchain                  bool
	// OnExec starts sampling the target's processes at their next exec,
	// as perf record samples the workload it starts (enable_on_exec).
	OnExec bool
	// Started, when set, is called once the rings are open and the
	// dump of the existing state has begun: a workload started then has
	// all of its life recorded.
	Started func()
	// Sampling, when set, is called once, when the first dump is
	// written and the sampling has started (for OnExec, armed): a
	// command started then, as perf record starts its workload once it
	// has synthesized the state, bounds a recording of another target
	// (perf record -a -- sleep 5) to its run, however long the dump.
	Sampling func()
}

// ProfileStats describe a profile.
type ProfileStats struct {
	Session  SessionStats
	Dump     Stats         // the dump of the existing state (the last file's)
	Duration time.Duration // from the rings' opening to the last record
	Files    int           // files written: 1 unless the output switched
	// SwitchStalls are, for each switch, the time from its ask to the
	// end of the new file's dump.
	SwitchStalls []time.Duration
}

// Profile samples the CPUs until ctx ends, and
// writes perf.data to out: the mappings that existed when it started,
// synthesized, then the live records and the samples, in time order.
// It always closes off the file, even on error, so that what was written
// stays readable. It returns nil when ctx ends, as it is meant to; an
// error says why it ended before.
func Profile(ctx context.Context, opts ProfileOptions, out io.Writer, wopts WriteOptions) (ProfileStats, error) {
	p, err := NewProfiler(opts)
	if err != nil {
		return ProfileStats{}, err
	}
	return p.Run(ctx, out, wopts)
}

// Profiler is a profile whose session is open: NewProfiler has checked
// the privileges and opened the rings and the sampling events, so that a
// caller can create its output only once nothing is left to fail before
// the first record.
type Profiler struct {
	opts  ProfileOptions
	so    SessionOptions
	s     *Session
	start time.Time
}

// NewProfiler opens the session of a profile. Missing privileges give a
// *PermissionError, and a target that names no task or matches no
// process an error as OpenMethod says. Run or Close must follow.
func NewProfiler(opts ProfileOptions) (*Profiler, error) {
	p := &Profiler{opts: opts, start: time.Now()}
	sample := &SampleOptions{Event: opts.Event, Fallback: opts.Fallback, ExcludeKernel: opts.ExcludeKernel, ExcludeUser: opts.ExcludeUser,
		Freq: opts.Freq, Period: opts.Period, CPUs: opts.CPUs,
		Callchain: opts.Callchain, OnExec: opts.OnExec, Stopped: !opts.OnExec}
	p.so = SessionOptions{Options: opts.Options, Sample: sample}
	s, err := NewSession(p.so)
	if err != nil {
		return nil, err
	}
	p.s = s
	return p, nil
}

// Close ends a profile that was not run.
func (p *Profiler) Close() error { return p.s.Close() }

// Run profiles as Profile does, and closes the session.
func (p *Profiler) Run(ctx context.Context, out io.Writer, wopts WriteOptions) (ProfileStats, error) {
	once := func() (io.Writer, func() error, error) { return out, func() error { return nil }, nil }
	return p.RunSwitching(ctx, once, SwitchOptions{}, wopts)
}

// sampleSwitch starts a profile's sampling once the dump is written, and
// ends the profile: sampling stopped first, then the rings flushed, so
// that the end takes a bounded time however fast they were filling.
type sampleSwitch struct {
	s       *Session
	onExec  bool // the kernel starts sampling at the workload's exec
	mu      sync.Mutex
	stopped bool
}

func (sw *sampleSwitch) isStopped() bool {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	return sw.stopped
}

func (sw *sampleSwitch) start() error {
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.stopped || sw.onExec {
		return nil
	}
	return sw.s.StartSampling()
}

// endOn ends the profile when ctx ends,
// from a goroutine that the returned function waits for.
func (sw *sampleSwitch) endOn(ctx context.Context) (wait func()) {
	finished, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		select {
		case <-ctx.Done():
		case <-finished:
			return
		}
		sw.mu.Lock()
		sw.stopped = true
		sw.s.StopSampling()
		sw.mu.Unlock()
		sw.s.Flush()
	}()
	return func() { close(finished); <-ended }
}
