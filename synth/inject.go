package synth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/method/bpfmethod"
	"github.com/synth-dev/synth/perfdata"
)

// ErrClock is returned by Inject when perf's events do not use
// CLOCK_MONOTONIC, the clock of the dump: their times could not be
// compared with it.
var ErrClock = errors.New("perf's events do not use CLOCK_MONOTONIC: record with -k CLOCK_MONOTONIC")

// InjectOptions configure Inject. The zero value dumps with the best
// method the host allows and writes file or pipe mode as the output
// suits.
type InjectOptions struct {
	// Method and Threads are as for OpenMethod; "" means MethodAuto.
	Method  MethodName
	Threads int
	// NoBuildID, BuildIDTimeout and KernelCache are as in Options. What
	// else the dump holds (the processes, data mappings, namespaces,
	// cgroups, BPF events) follows perf's attrs and thread map.
	NoBuildID      bool
	BuildIDTimeout time.Duration
	KernelCache    string
	// Mode is the output's layout; the zero value chooses from the
	// output, as WriteOptions.Mode.
	Mode perfdata.Mode
	// Fallback is as for OpenMethod: told of each method MethodAuto
	// could not open, and why. The method opens as Inject starts, on a
	// goroutine of its own, so Fallback is called from it, while perf's
	// header is read.
	Fallback func(method MethodName, err error)
}

// InjectStats describe what Inject wrote.
type InjectStats struct {
	Dump Stats // the dump
	// Written are the synthesized records written; Dropped those left
	// out because perf's stream had the mapping first.
	Written, Dropped int
	Perf             int // records of perf's passed on
	// BadBuildIDs are perf's MMAP2 records whose build-ID bit perf
	// would misread, passed on without it: the bit the kernel leaks
	// into the records of an event without build IDs (their
	// maj/min/ino kept), or a build_id_size over 20, on which perf 6.1
	// aborts (the union zeroed: the file named by its path alone).
	// DESIGN.md, "synth inject", says why.
	BadBuildIDs int
	// Grown are perf's KSYMBOL, BPF_EVENT and TEXT_POKE records that the
	// kernel had made longer than they are, for every event opened
	// after perf's that heard them, cut to their true size, their
	// trailer at their end: perf 6.1 refuses such a record (README,
	// "Beside perf record").
	Grown int
	// Times say how soon after perf's events began the dump read the
	// host, and what it waited for.
	Times InjectTimes
}

// InjectTimes are when the parts of Inject happened, on CLOCK_MONOTONIC
// (ns since boot, the clock of perf's records); 0 for what did not
// happen.
type InjectTimes struct {
	Start uint64 // Inject was called
	// LoadStart and Loaded bound the opening of the method: the BPF
	// programs' load, or a fallback's.
	LoadStart, Loaded uint64
	// Header is when perf's header and initial records had been read:
	// perf enables its events right after it writes them.
	Header uint64
	// Dump is when the dump began to read the host.
	Dump uint64
	// FirstSample is the time of perf's earliest sample: about when it
	// enabled its events (its side-band records, which begin when its
	// events open, may be older).
	FirstSample uint64
}

// Inject reads a perf.data pipe that `perf record -k CLOCK_MONOTONIC -o -`
// writes, with or without perf's own synthesis, and writes it to out with
// the host's state synthesized by one dump: perf's header and attrs,
// perf's initial records, the dump's records with sample_id_all trailers
// laid out for perf's attrs (time 0, as perf's synthesized records), then
// FINISHED_INIT and every record of perf's after it, in perf's order.
//
// The method loads (its BPF programs, or the fallback's) as soon as
// Inject is called, while perf's header is read, and the dump runs when
// perf's initial records have been read: perf has then opened its
// events and enables them right away. What the dump reads and writes
// (the processes of perf's thread map; data mappings, namespaces,
// cgroups and BPF events as perf's attrs ask) is set on the loaded
// method then. A mapping that
// perf reported before the dump ended (its kernel map, a library loaded
// meanwhile) is not synthesized again: the dump's records wait until
// perf's stream, by perf's own FINISHED_ROUND ordering, holds every
// record up to the dump's end.
//
// perf's records are passed on unchanged but an MMAP2 whose build-ID
// bit perf would misread, which loses it (InjectStats.BadBuildIDs), and
// a KSYMBOL, BPF_EVENT or TEXT_POKE the kernel grew, cut to its true
// size (InjectStats.Grown).
//
// ctx bounds the dump; perf's records are copied until in ends. out is
// not closed; when the output fails part way, what was written stays a
// valid perf.data.
func Inject(ctx context.Context, in io.Reader, out io.Writer, opts InjectOptions) (InjectStats, error) {
	var st InjectStats
	st.Times.Start = bpfmethod.MonotonicNow()
	// Nothing the method loads depends on perf's stream: it loads while
	// perf starts, so that the dump can begin as soon as perf's events
	// are enabled.
	load := startInjectLoad(opts)
	defer load.close()
	sr, err := perfdata.NewStreamReader(in)
	if err != nil {
		return st, fmt.Errorf("read perf's stream: %w", err)
	}
	init, err := readInit(sr)
	if err != nil {
		return st, err
	}
	st.Times.Header = bpfmethod.MonotonicNow()
	// The header, taken before the pump reads on.
	attrs, feats := sr.Attrs(), sr.Features()
	trailer, err := checkAttrs(attrs)
	if err != nil {
		return st, err
	}
	o := injectDumpOptions(attrs, init, opts)
	perf := startPump(sr, init.next)
	defer perf.stop()

	// A dump that fails still leaves perf's recording to write out.
	synth, end, dumpErr := injectDump(ctx, load, o, init.pids, &st)
	if dumpErr != nil {
		synth, end = &recordBuf{}, 0
	}
	held, perfErr := perf.until(end)
	seen := mappingsOf(init.recs)
	for _, r := range held {
		t, ok := perf.times.of(r.data)
		if ok && t < end {
			seen.add(r.data)
		}
		if ok && t != 0 && perfdata.RecordView(r.data).Type() == perfdata.RecordSample &&
			(st.Times.FirstSample == 0 || t < st.Times.FirstSample) {
			st.Times.FirstSample = t
		}
	}

	w, err := newInjectWriter(out, attrs, feats, init, opts.Mode)
	if err != nil {
		return st, err
	}
	err = writeInit(w, init, &st, func() error {
		return writeSynth(w, synth, o.Attr().SampleType, seen, trailer, &st)
	})
	for i := 0; err == nil && i < len(held); i++ {
		err = writePerf(w, held[i], &st)
		st.Perf++
	}
	held = nil // let the copies go while the rest streams
	if err == nil {
		err = perfErr
	}
	if err == nil {
		err = perf.copyRest(w, &st)
	}
	var fe *perfdata.FormatError // the writer's errors say what they are; the reader's not
	if errors.As(err, &fe) {
		err = fmt.Errorf("read perf's stream: %w", err)
	}
	if err = finishPerfData(w, nil, st.Dump.Tables, err); err == nil {
		err = dumpErr
	}
	return st, err
}

// injectLoad is the loading of Inject's method, which runs while
// perf's header is read.
type injectLoad struct {
	done       chan struct{}
	m          *Method
	err        error
	start, end uint64 // CLOCK_MONOTONIC
	taken      bool
}

// startInjectLoad opens the method opts ask for, in a goroutine, with
// the options that do not depend on perf's stream: those the method
// takes when it loads (config.Resolved.WithLoaded). The dump's are set
// when perf's header has been read (injectDump).
func startInjectLoad(opts InjectOptions) *injectLoad {
	l := &injectLoad{done: make(chan struct{})}
	go func() {
		defer close(l.done)
		l.start = bpfmethod.MonotonicNow()
		defer func() { l.end = bpfmethod.MonotonicNow() }()
		name := cmp.Or(opts.Method, MethodAuto)
		o := injectOptions(opts)
		d, err := resolve(&o)
		if err != nil {
			l.err = err
			return
		}
		l.m, l.err = openResolved(name, MethodOptions{Options: o, Threads: opts.Threads, Fallback: opts.Fallback}, d)
	}()
	return l
}

// take waits for the method to load, and hands it to the caller, who
// closes it.
func (l *injectLoad) take(st *InjectStats) (*Method, error) {
	<-l.done
	l.taken = true
	st.Times.LoadStart, st.Times.Loaded = l.start, l.end
	return l.m, l.err
}

// close closes the method if it was not taken: Inject ended before its
// dump (perf's stream was not one it can inject into). It waits for the
// load to end.
func (l *injectLoad) close() {
	if l.taken {
		return
	}
	<-l.done
	if l.m != nil {
		l.m.Close()
	}
}

// injectDump dumps the processes pids (nil: the host) with the options
// perf's stream asked for (o), with the method load opened, and returns
// the records, and the CLOCK_MONOTONIC time the dump ended. pids are
// perf's, not a Target: a process perf recorded that has exited is not
// an error, it has no mappings.
func injectDump(ctx context.Context, load *injectLoad, o Options, pids []int, st *InjectStats) (*recordBuf, uint64, error) {
	m, err := load.take(st)
	if err != nil {
		return nil, 0, err
	}
	defer m.Close()
	d := config.Resolved{Options: o, Pids: pids}
	if err := m.rescope(d); err != nil {
		return nil, 0, err
	}
	recs := &recordBuf{}
	st.Times.Dump = bpfmethod.MonotonicNow()
	st.Dump, err = m.Dump(ctx, recs.add)
	if err != nil {
		return nil, 0, fmt.Errorf("dump: %w", err)
	}
	return recs, bpfmethod.MonotonicNow(), nil
}

// checkAttrs checks that perf's records can be ordered against the dump:
// every event on CLOCK_MONOTONIC, with sample_id_all and times. It
// returns the trailer layout (the sample_type of the first attr).
func checkAttrs(attrs []perfdata.EventAttr) (uint64, error) {
	if len(attrs) == 0 {
		return 0, errors.New("perf's stream has no attrs before its first record")
	}
	for _, a := range attrs {
		if a.Attr.Flags&perfdata.AttrUseClockID == 0 {
			return 0, fmt.Errorf("%w (perf's events use perf's default clock)", ErrClock)
		}
		if a.Attr.ClockID != unix.CLOCK_MONOTONIC {
			return 0, fmt.Errorf("%w (perf's events use clock %d)", ErrClock, a.Attr.ClockID)
		}
	}
	a := attrs[0].Attr
	if a.Flags&perfdata.AttrSampleIDAll == 0 || a.SampleType&perfdata.SampleTime == 0 {
		return 0, errors.New("perf's records carry no time (sample_id_all with PERF_SAMPLE_TIME): record with -T")
	}
	return a.SampleType, nil
}

// injectOptions are the options of Inject's method that do not depend
// on perf's stream.
func injectOptions(opts InjectOptions) Options {
	return Options{NoBuildID: opts.NoBuildID, BuildIDTimeout: opts.BuildIDTimeout, KernelCache: opts.KernelCache, NoLive: true}
}

// injectDumpOptions derives the dump from perf's stream: data mappings,
// namespaces, cgroups and BPF events as its attrs ask for them. Its
// processes are those of perf's thread map (see injectDump).
func injectDumpOptions(attrs []perfdata.EventAttr, init *initRecords, opts InjectOptions) Options {
	o := injectOptions(opts)
	any := func(flag uint64) bool {
		return slices.ContainsFunc(attrs, func(a perfdata.EventAttr) bool { return a.Attr.Flags&flag != 0 })
	}
	o.Data = any(perfdata.AttrMmapData)
	o.Namespaces = any(perfdata.AttrNamespaces)
	o.Cgroups = any(perfdata.AttrCgroup)
	o.NoBPFEvent = !any(perfdata.AttrBPFEvent)
	return o
}
