package synth

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/method/bpfmethod"
	"github.com/synth-dev/synth/perfdata"
)

// Errors of a Session.
var (
	// ErrFlushed is returned by Read once it has returned every
	// record that was in the rings when Flush was called.
	ErrFlushed = errors.New("session flushed")
	// ErrDumpRunning is returned by Dump while the previous dump's
	// records have not all been read.
	ErrDumpRunning = errors.New("a dump is still being read")
)

// SessionOptions configure a Session. The zero value streams the live
// records of every process, and dumps as the zero Options do.
type SessionOptions struct {
	// Options say what dumps synthesize. The target also restricts the
	// live stream to its processes and the children they fork, and its
	// samples to its threads if it names threads; SampleType
	// is ignored: records carry the trailer of the rings (see Attrs).
	Options
	// Sample, when set, opens a sampling event for the target's tasks,
	// whose samples join the stream.
	Sample *SampleOptions
	// Unmaps adds to the stream, from the first dump on, a KindUnmap
	// record for each range a process unmaps with munmap(2), moves or
	// resizes with mremap(2), or leaves without PROT_EXEC (mprotect(2),
	// a MAP_FIXED mmap(2)), so that a Table follows at once rather than
	// at the next dump. It needs the kernel's syscall tracepoints; where they
	// are missing the session runs without, and UnmapsErr says why.
	Unmaps bool
}

// SampleOptions configure the sampling event of a Session: cpu-clock,
// like perf record's default on machines without hardware counters.
//
// The event is opened as perf record opens it for the session's target
// (Options.Target): per CPU for the whole host (-a); per task and per
// CPU, inheriting, for each thread of the target's processes (-p, -u, a
// command); per task and per CPU, not inheriting, for its threads (-t);
// per CPU, as a cgroup event, for its cgroup (-G). Tasks outside the
// target are never interrupted.
type SampleOptions struct {
	// Event is the event sampled, as perf record -e names it: "" or
	// EventCPUClock, EventTaskClock, and the hardware events
	// EventCycles and EventInstructions where the CPU has a PMU that
	// counts them (else the session fails with ErrNoEvent); with perf's
	// modifiers, set in the attr as perf sets them: cycles:pp.
	Event string
	// Fallback says that Event replaces the event asked for, as perf
	// falls back from cycles to cpu-clock without a PMU: perf.data
	// names it as perf does then, from its attr (cpu-clock:uH).
	Fallback bool
	// ExcludeKernel and ExcludeUser leave out the samples taken in the
	// kernel, or in user space: the :u and :k modifiers of perf's -e.
	ExcludeKernel, ExcludeUser bool
	// Freq is the sampling frequency in Hz; 0 means DefaultSampleFreq.
	Freq uint64
	// Period, when set, samples once every Period events (ns for the
	// clocks) instead of at Freq: perf record -c.
	Period uint64
	// CPUs, when set, has the event opened on these CPUs only (perf
	// record -C); the others are never interrupted. The side-band and
	// the dumps still cover every CPU: a mapping made on another CPU
	// names the code a sample on these may hit.
	CPUs []int
	// Callchain records call chains (perf record -g).
	Callchain bool
	// OnExec leaves the target's processes unsampled until they exec,
	// as perf record samples its workload (enable_on_exec).
	OnExec bool
	// Stopped opens the events stopped: sampling starts with
	// StartSampling, as perf record enables its events only once it has
	// synthesized the existing state. At high rates, samples taken
	// meanwhile cost the dump time and ring room.
	Stopped bool
}

// DefaultSampleFreq is perf record's default frequency.
const DefaultSampleFreq = 4000

// RecordKind says where a record of a session's stream comes from.
type RecordKind uint8

// Kinds of records.
const (
	KindSynthesized RecordKind = iota + 1 // state a dump read, time 0
	KindLive                              // MMAP2, COMM, FORK, EXIT... as the kernel reported them
	KindSample                            // a sample of the sampling event
	KindDumpEnd                           // the end of a dump's synthesized records; no Raw
	// KindUnmap is a range a process unmapped (SessionOptions.Unmaps):
	// synth's own record, read with Record.Unmapped, which no perf.data
	// reader knows. Profile and synth record drop it; perfdata.Writer
	// refuses it (perfdata.ErrPrivateRecord), so a loop that writes a
	// session's records skips it, as it skips KindDumpEnd.
	KindUnmap
)

// String names the kind, as its constant does without "Kind".
func (k RecordKind) String() string {
	switch k {
	case KindSynthesized:
		return "synthesized"
	case KindLive:
		return "live"
	case KindSample:
		return "sample"
	case KindDumpEnd:
		return "dump-end"
	case KindUnmap:
		return "unmap"
	}
	return fmt.Sprintf("RecordKind(%d)", uint8(k))
}

// Record is one record of a session's stream.
type Record struct {
	Kind RecordKind
	// Gen is the generation: the dump that read a synthesized record,
	// or the one whose live stream a live record or sample belongs to
	// (0 before the first dump).
	Gen uint64
	// Time is the record's CLOCK_MONOTONIC time; 0 for synthesized ones.
	Time uint64
	// Raw is the perf record, header and sample_id_all trailer included,
	// ready for perfdata.Writer.WriteRecord but for a KindUnmap's, which
	// is synth's own (see KindUnmap). It points into the session's
	// buffers and is valid until the next call to Read.
	Raw []byte
	// Superseded marks a live record that the last dump read over: the
	// kernel reported it before the dump read its process, so what the
	// dump read of that process already holds it, or shows it undone (a
	// mapping unmapped since, a process exited). A Table skips it; a
	// perf.data writer writes it as any other. An MMAP2 whose mapping
	// the dump read, and whose synthesized record the dump dropped
	// because this one came first, is not superseded: it is the dump's
	// record of that mapping (see DESIGN.md). An EXIT is superseded only
	// by a read of its pid after it, a new process's: no dump reads a
	// process after its exit.
	Superseded bool
	// Partial marks a KindDumpEnd of a dump that read only some
	// processes (Options.Target), or that lost records (Stats.Lost),
	// perhaps all of a process's: it says nothing of the processes it
	// did not read.
	Partial bool
	// sampler is the attr a KindSample was recorded with (Sample).
	sampler *perfdata.Attr
}

// Unmap is what a KindUnmap record says: process Pid's range [Start,
// End) went, by munmap(2) or mremap(2); after an mremap, the mapping
// that held Start spans [To, ToEnd) (moved, or resized in place), of
// which the kernel reports no MMAP2. To == ToEnd: nothing does. With
// NoExec the range did not go but is no longer executable (mprotect(2),
// or a MAP_FIXED mmap(2) without PROT_EXEC over it), which the kernel
// reports only to a session of data mappings too (Options.Data).
type Unmap struct {
	Pid        uint32
	Start, End uint64
	To, ToEnd  uint64
	NoExec     bool
}

// Unmapped returns what a KindUnmap record says; ok is false for any
// other record.
func (r *Record) Unmapped() (u Unmap, ok bool) {
	if r.Kind != KindUnmap {
		return Unmap{}, false
	}
	bu, err := bpfmethod.ParseUnmap(r.Raw)
	return Unmap{Pid: bu.Pid, Start: bu.Start, End: bu.End, To: bu.To, ToEnd: bu.ToEnd, NoExec: bu.NoExec}, err == nil
}

// SessionStats count what a session has streamed.
type SessionStats struct {
	Dumps       int    // dumps completed
	Synthesized uint64 // synthesized records returned
	Live        uint64 // live records returned
	Samples     uint64 // samples returned
	Duplicates  uint64 // synthesized records dropped: the live stream had them first
	Stale       uint64 // synthesized records of another generation dropped
	// Lost are synthesized records the dumps could not write: their
	// state is incomplete. Each such dump closes its synthesized
	// records with a PERF_RECORD_LOST of the count.
	Lost uint64
	// LiveLost are live records and samples the kernel dropped because
	// a side-band ring was full; the stream has the kernel's
	// PERF_RECORD_LOST (or LOST_SAMPLES) records for them, as perf has.
	LiveLost uint64
	// Throttled counts the PERF_RECORD_THROTTLE records the stream has:
	// times the kernel stopped a sampler for a tick because its
	// interrupts took more than kernel.perf_cpu_time_max_percent.
	Throttled uint64
	Unmaps    uint64 // KindUnmap records returned
	// UnmapsMissed counts the unmap calls the stream cannot report:
	// the kernel skipped the program that notes them (it runs no
	// tracepoint program on a CPU where another BPF program, or a map
	// operation from userspace, is under way), or their record found
	// its unmap ring full (UnmapsLost). Until the next dump a Table may
	// hold a range that went; it never loses one that stayed.
	UnmapsMissed uint64
	// UnmapsLost counts, of UnmapsMissed, the unmap records the kernel
	// could not write because an unmap ring was full: the stream was
	// not read for a while (a CPU's ring holds about 32 of them a page
	// of RingPages, 8,000 at the default), and a larger RingPages keeps
	// more. The unmap
	// records have rings of their own, so no number of them costs a
	// dump a record (Lost).
	UnmapsLost uint64
	Filtered   uint64 // live records and samples of processes outside Options.Target
	// FilteredSamples are the samples among them: none unless a task
	// left the target (the sampler is opened on the target's tasks), or,
	// for a cgroup, joined the cgroup after the target was resolved.
	FilteredSamples uint64
	// LiveBuildIDs counts the live MMAP2 records given their file's
	// build ID. synth reads it from the file (the side-band does not
	// ask the kernel for it), once per file for the session's life:
	// through a mapping of the file while one exists, else, once every
	// process that mapped it has exited, through the record's path, in
	// synth's mount namespace, only if the file there is the record's
	// device and inode, last changed before the record (DESIGN.md,
	// "Build IDs, and why they can be trusted").
	LiveBuildIDs uint64
	// LiveBuildIDsMissed counts the live MMAP2 records of a file left
	// in the maj/min/ino form though the file may have a build ID: it
	// could not be read in time (--buildid-timeout), was gone (deleted,
	// or at a path of another mount namespace: a container's
	// short-lived process), or had changed since the record. A profiler
	// finds such a mapping's file by its name, as perf does, or not at
	// all; a Table's Resolve gives it no build ID.
	LiveBuildIDsMissed uint64
	// LiveFilesRead counts the files the live side read (opened) for
	// their build IDs; the others' IDs came from the session's cache
	// after a stat(2), or from a dump's read.
	LiveFilesRead uint64
	// Grown are the KSYMBOL and BPF_EVENT records the kernel had made
	// too long, cut to their true size: it grows the records of the
	// side-band once for every event opened after it that hears them
	// (another synth, a perf record). README, "Beside perf record".
	Grown uint64
}

// Session streams the records of a host, or of some processes: the state
// that dumps synthesize, each dump with a new generation number, and the
// live records the kernel reports, in one ordered stream. A dump's
// synthesized records come first (time 0), then live records in time
// order; a mapping is reported by a generation once, synthesized or live
// (DESIGN.md, "The live side-band, and each mapping once"). Read must not
// be called concurrently; Close, Flush and SetDeadline may be called from
// any goroutine.
type Session struct {
	mu    sync.Mutex // held by Read and Dump
	opts  SessionOptions
	b     *bpfmethod.BPF
	attrs []perfdata.EventAttr
	// sampler is the sampling event's attr, a copy of the last of
	// attrs, which its samples decode under (Record.Sample).
	sampler *perfdata.Attr
	// wake is an eventfd by which Close, Flush and SetDeadline
	// interrupt a waiting Read; wakeMu guards its closing.
	wakeMu sync.Mutex
	wake   int

	closed   atomic.Bool
	flush    atomic.Bool
	deadline atomic.Int64 // UnixNano; 0: none
	flushing bool         // Read is returning what a Flush found
	flushAt  uint64       // and the time of that Flush

	// The dump being read: Dump asks for it, the first Read runs it
	// into dumpBuf, and Read hands out its records from there, a
	// slice each: no copy, no goroutine switch per record.
	dumpCtx  context.Context
	run      *generation // the dump being read; nil until the first Read runs it
	dumpBuf  recordBuf
	last     Stats
	inDump   bool
	cancelMu sync.Mutex
	cancel   context.CancelFunc // stops the dump running, for Close
	live     liveQueue
	filter   liveFilter
	// read is what the last dump that ended well read, and when: which
	// live records it superseded.
	read      *bpfmethod.Reads
	ready     uint64 // records up to this time may be returned
	lastPoll  uint64
	stats     SessionStats
	pollfds   []unix.PollFd
	readCtx   context.Context // of the ReadContext running; nil: none
	unmapsErr error           // why SessionOptions.Unmaps is not served
}

// NewSession loads the BPF programs, opens the rings with the live
// side-band (and the sampling event, if any) on every CPU, and starts
// streaming. Missing privileges give a *PermissionError; a target that
// names no task or matches no process, as OpenMethod says.
func NewSession(opts SessionOptions) (*Session, error) {
	d, err := resolve(&opts.Options)
	if err != nil {
		return nil, err
	}
	return newSession(opts, d)
}

// newSession is NewSession with the options resolved: d.
func newSession(opts SessionOptions, d config.Resolved) (*Session, error) {
	b, rc, err := openStream(opts, d)
	if err != nil {
		return nil, err
	}
	s := &Session{opts: opts, b: b, wake: -1}
	if err := s.init(rc, d); err != nil {
		b.Close()
		return nil, err
	}
	if opts.Unmaps {
		s.unmapsErr = b.WatchUnmaps()
		for _, fd := range b.UnmapFDs() {
			s.pollfds = append(s.pollfds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
		}
	} else {
		s.unmapsErr = errUnmapsOff
	}
	return s, nil
}

// openStream opens the BPF method with the rings of a stream of opts:
// the live side-band, narrowed to the target, and the sampling event of
// opts.Sample, if any. A Session streams from them; so does a one-shot
// dump of OpenMethod's BPF method (liveMethod).
func openStream(opts SessionOptions, d config.Resolved) (*bpfmethod.BPF, bpfmethod.RingConfig, error) {
	rc := bpfmethod.RingConfig{Pages: opts.RingPages, Sideband: true, Records: d.RecordFlags(), BuildID: !opts.NoBuildID,
		SampleType: bpfmethod.SidebandSampleType}
	live, closeLive, err := newLiveScope(opts.Target, d.Pids)
	if err != nil {
		return nil, rc, err
	}
	defer closeLive()
	rc.LiveScope = live
	if opts.Sample != nil {
		if err := opts.Sample.check(); err != nil {
			return nil, rc, err
		}
		scope, err := newSampleScope(opts.Sample, opts.Target, d.Pids)
		if err != nil {
			return nil, rc, err
		}
		defer scope.Close()
		sampler := samplerAttr(opts.Sample, scope.inherit)
		rc.Sampler, rc.SampleType, rc.SampleRegsUser = &sampler, sampler.SampleType, sampler.SampleRegsUser
		rc.Scope = scope.SampleScope
		rc.SamplerCPUs = opts.Sample.CPUs
	}
	d.SampleType = rc.SampleType // the trailer of the synthesized records
	b, err := bpfmethod.NewWithRings(d, rc)
	if err != nil && opts.Sample != nil && opts.Sample.hardware() &&
		(errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENODEV)) {
		return nil, rc, fmt.Errorf("event %s: %w", opts.Sample.eventName(), ErrNoEvent)
	}
	if err != nil {
		return nil, rc, err
	}
	return b, rc, nil
}

// sidebandAttr is the attr the synthesized and live records of the
// rings rc of b are written under, with the side-band's ids.
func sidebandAttr(rc *bpfmethod.RingConfig, b *bpfmethod.BPF) perfdata.EventAttr {
	liveIDs, _ := b.IDs()
	side := rc.LiveAttr()
	side.Flags &^= perfdata.AttrWatermark
	side.WakeupEvents = 0
	return perfdata.EventAttr{Attr: side, Name: attrName, IDs: liveIDs}
}

// errUnmapsOff is UnmapsErr's answer when the options did not ask.
var errUnmapsOff = errors.New("unmaps not asked for (SessionOptions.Unmaps)")

// UnmapsErr returns nil if the stream has a KindUnmap record for each
// range a process unmaps between dumps, else why not: the options did not
// ask, or the kernel cannot (no syscall tracepoints, or tracefs not
// mounted). Without them a Table is exact at the end of each dump, and
// between dumps holds what was unmapped since until the next.
func (s *Session) UnmapsErr() error { return s.unmapsErr }

func (s *Session) init(rc bpfmethod.RingConfig, d config.Resolved) error {
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("eventfd: %w", err)
	}
	s.wake = wake
	for _, fd := range append(s.b.LiveFDs(), wake) {
		s.pollfds = append(s.pollfds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	s.filter = newLiveFilter(d)
	s.attrs = []perfdata.EventAttr{sidebandAttr(&rc, s.b)}
	if rc.Sampler != nil {
		_, samplerIDs := s.b.IDs()
		a := *rc.Sampler
		a.Flags &^= perfdata.AttrDisabled
		s.attrs = append(s.attrs, perfdata.EventAttr{Attr: a, Name: s.opts.Sample.eventName(), IDs: samplerIDs})
		if a.SampleType&perfdata.SampleRead != 0 {
			// perf reads a file only if its attrs share one read_format
			// (evlist__valid_read_format); the side-band's is never read.
			s.attrs[0].Attr.ReadFormat = a.ReadFormat
		}
		s.sampler = &a
		if s.opts.Sample.OnExec || s.opts.Sample.Stopped {
			return nil // the kernel enables them at the exec, or StartSampling
		}
		return s.b.SetSamplers(true)
	}
	return nil
}

// StartSampling starts the sampling events, opened stopped
// (SampleOptions.Stopped) or stopped by StopSampling.
func (s *Session) StartSampling() error { return s.sampling(true) }

// StopSampling stops the sampling events: the stream then gets no more
// samples, and a Flush returns what the rings hold in bounded time,
// however fast they were filling. A recording's end starts here.
func (s *Session) StopSampling() error { return s.sampling(false) }

func (s *Session) sampling(on bool) error {
	if s.closed.Load() {
		return os.ErrClosed
	}
	if s.opts.Sample == nil {
		return nil
	}
	return s.b.SetSamplers(on)
}

// Attrs returns the attrs to write the stream under, with the ids its
// records carry: the side-band (synthesized and live records), then the
// sampling event if any, which Record.Sample decodes a sample under.
func (s *Session) Attrs() []perfdata.EventAttr { return s.attrs }

// Dump starts a dump of a new generation. Read returns its
// synthesized records next, then a KindDumpEnd record, then the live
// records that arrived meanwhile. ctx bounds the dump, not the reading.
func (s *Session) Dump(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return os.ErrClosed
	}
	if s.inDump {
		return ErrDumpRunning
	}
	s.dumpCtx, s.run, s.inDump = ctx, nil, true
	return nil
}

// LastDump returns the statistics of the last dump that ended.
func (s *Session) LastDump() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// Stats returns what the session has streamed so far.
func (s *Session) Stats() SessionStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	if s.unmapsErr == nil {
		st.UnmapsMissed, _ = s.b.UnmapMisses() // the programs are loaded: it cannot fail
		st.UnmapsLost = s.b.UnmapsLost()
	}
	st.LiveBuildIDs, st.LiveBuildIDsMissed, st.LiveFilesRead = s.b.LiveBuildIDs()
	st.Grown = s.b.Grown()
	return st
}

// SetDeadline makes Read return os.ErrDeadlineExceeded when it has
// waited for records until t; the zero time means no deadline.
func (s *Session) SetDeadline(t time.Time) {
	var ns int64
	if !t.IsZero() {
		ns = t.UnixNano()
	}
	s.deadline.Store(ns)
	s.interrupt()
}

// Flush makes Read return every record now in the rings without
// waiting for the time order to settle, then ErrFlushed: a consumer
// stopping calls it to get the last records. After Close it returns
// os.ErrClosed.
func (s *Session) Flush() error {
	if s.closed.Load() {
		return os.ErrClosed
	}
	s.flush.Store(true)
	s.interrupt()
	return nil
}

func (s *Session) interrupt() {
	s.wakeMu.Lock()
	defer s.wakeMu.Unlock()
	if s.wake < 0 {
		return
	}
	one := [8]byte{1}
	_, _ = unix.Write(s.wake, one[:]) // a full counter is still a wakeup
}

// Close stops a dump in progress, unblocks Read, and releases the
// programs and rings. It is safe to call more than once.
func (s *Session) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.interrupt()
	s.cancelMu.Lock()
	if s.cancel != nil {
		s.cancel() // a dump that Read runs stops at its next read
	}
	s.cancelMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.b.Close()
	s.wakeMu.Lock()
	unix.Close(s.wake)
	s.wake = -1
	s.wakeMu.Unlock()
	return err
}

// recordBuf holds a part of a dump's records for Read: the held
// records of the walk as they are (they stay put until the next dump),
// the few others copied.
type recordBuf struct {
	arena []byte   // copies of the records that are not held
	recs  [][]byte // every record, in order
	next  int      // the next record to hand out
}

func (b *recordBuf) reset() {
	clear(b.recs) // let a later dump's hold go
	b.arena, b.recs, b.next = b.arena[:0], b.recs[:0], 0
}

// add copies rec, which is valid only during the call.
func (b *recordBuf) add(rec []byte) error {
	off := len(b.arena)
	b.arena = append(b.arena, rec...)
	b.recs = append(b.recs, b.arena[off:len(b.arena):len(b.arena)])
	return nil
}

// addHeld takes rec, which stays valid until the next dump, as it is.
func (b *recordBuf) addHeld(rec []byte) error {
	b.recs = append(b.recs, rec)
	return nil
}

// pop returns the next record, valid until the next reset.
func (b *recordBuf) pop() ([]byte, bool) {
	if b.next >= len(b.recs) {
		return nil, false
	}
	b.next++
	return b.recs[b.next-1], true
}

// Type returns the PERF_RECORD_* type of the record; 0 for KindDumpEnd.
func (r *Record) Type() perfdata.RecordType {
	if len(r.Raw) < 8 {
		return 0
	}
	return perfdata.RecordView(r.Raw).Type()
}
