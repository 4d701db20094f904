package synth

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/method/bpfmethod"
	"github.com/synth-dev/synth/perfdata"
)

// readBatch is how many records a reader of a Session takes at a time.
const readBatch = 256

// pollTick bounds how long Read sleeps between drains of the rings,
// and so how late a live record is returned.
const pollTick = 50 * time.Millisecond

// Read returns the next record of the stream in rec, waiting for one
// if need be. rec.Raw points into the session's buffers, not the
// caller's: it is valid until the next read (Read, ReadContext or
// ReadBatch); a caller that keeps a record copies it. On an error rec
// is left as it was. It returns os.ErrClosed after Close, ErrFlushed after Flush
// has let it return what was in the rings, and os.ErrDeadlineExceeded
// after the deadline. A dump that fails ends with its error, wrapped,
// instead of a KindDumpEnd record; the session goes on streaming.
func (s *Session) Read(rec *Record) error {
	var one [1]Record
	n, err := s.ReadBatch(one[:])
	if n > 0 {
		*rec = one[0]
	}
	return err
}

// ReadContext is Read that gives up waiting when ctx is done, with
// ctx's error. It is how a reader ends: with a deadline or a cancel
// from elsewhere, instead of the session-wide SetDeadline. A dump's
// records are bounded by the ctx given to Dump.
func (s *Session) ReadContext(ctx context.Context, rec *Record) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, s.interrupt)
	defer stop()
	s.readCtx = ctx
	defer func() { s.readCtx = nil }()
	return s.Read(rec)
}

// ReadBatch is Read for many records at once: it fills recs with the
// next records of the stream and returns how many, at least one unless
// it returns an error. It waits only for the first record; the others
// are what is ready then; the records past those it returns, and all of
// them on an error, are left as they were. Every Raw stays valid until
// the next call to ReadBatch or Read. A reader that takes a dump of many records
// this way pays for the session's bookkeeping once per batch.
func (s *Session) ReadBatch(recs []Record) (int, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.closed.Load() {
			return 0, os.ErrClosed
		}
		if s.inDump {
			return s.readDump(recs)
		}
		if s.flush.Load() && !s.flushing {
			// Return what the rings hold now, and no more.
			s.flushing, s.flushAt = true, bpfmethod.MonotonicNow()
			if err := s.drainLive(); err != nil {
				return 0, err
			}
		}
		upTo := s.ready
		if s.flushing {
			upTo = s.flushAt
		}
		if n := s.popLive(recs, upTo); n > 0 {
			return n, nil
		}
		if s.flushing {
			s.flushing = false
			s.flush.Store(false)
			return 0, ErrFlushed
		}
		if err := s.wait(); err != nil {
			return 0, err
		}
		if err := s.drainLive(); err != nil {
			return 0, err
		}
	}
}

// popLive fills recs with the next queued records of time up to upTo
// that belong to the session, and returns how many. Forks are followed
// in time order, not in the order the rings were drained: a child may
// run on another CPU.
func (s *Session) popLive(recs []Record, upTo uint64) int {
	n := 0
	for n < len(recs) {
		// Filled here and handed out only if kept: a record the filter
		// drops must not be left in recs (Read's error leaves rec as it
		// was).
		var scratch Record
		rec := &scratch
		lr, ok := s.live.pop(rec, upTo)
		if !ok {
			break
		}
		if !s.filter.keep(rec, lr) {
			s.stats.Filtered++
			if rec.Kind == KindSample {
				s.stats.FilteredSamples++
			}
			continue
		}
		if rec.Kind == KindLive || rec.Kind == KindUnmap {
			rec.Superseded = s.superseded(rec)
		}
		if rec.Kind == KindSample {
			rec.sampler = s.sampler // for Record.Sample
		}
		s.count(rec)
		recs[n] = *rec
		n++
	}
	return n
}

// superseded reports whether the last dump read the process of a live
// record after the kernel reported it: that dump's records of the
// process hold it already. A process a dump of every process did not
// read was gone or exiting by then (the dump reads no exiting task): a
// record of it from before the dump began is superseded too, and the
// dump's end removed the process from a Table.
//
// But for an EXIT: it supersedes nothing of a process the dump did not
// read (the dump's end removed it already), and is superseded only by a
// read of its pid after it, a new process's. The records of a dump's
// window may come after the next dump, which did not read a process
// that exited in that window: its EXIT is still the exit of the process
// the dump before read, and no dump's read supersedes that (issue 56).
func (s *Session) superseded(rec *Record) bool {
	if s.read == nil {
		return false
	}
	readStart, readAt := s.read.Times()
	switch rec.Type() {
	case perfdata.RecordMmap, perfdata.RecordMmap2, perfdata.RecordComm, perfdata.RecordFork, perfdata.RecordExit,
		bpfmethod.RecordUnmap:
	default:
		return false
	}
	if at, ok := readAt[perfdata.RecordView(rec.Raw).Pid()]; ok {
		// A mapping the dump read, whose synthesized record it dropped
		// because this one came first: this is the dump's record of it.
		return rec.Time < at && !s.read.Delegated().Has(rec.Raw, rec.Time)
	}
	return rec.Type() != perfdata.RecordExit && !s.partial() && rec.Time < readStart
}

// partial reports whether the session's dumps read only some processes
// (Options.Target).
func (s *Session) partial() bool { return s.filter.partial() }

// readDump fills recs with the next synthesized records of the running
// dump, or returns its end. A batch stops at the end of a part of the
// dump: writing the next part invalidates the records of this one.
func (s *Session) readDump(recs []Record) (int, error) {
	if s.run == nil {
		s.runDump()
	}
	x := s.run
	for {
		n := 0
		for n < len(recs) {
			raw, ok := s.dumpBuf.pop()
			if !ok {
				break
			}
			recs[n] = Record{Kind: KindSynthesized, Gen: x.gen, Raw: raw}
			n++
		}
		if n > 0 {
			s.stats.Synthesized += uint64(n)
			return n, nil
		}
		if x.done() {
			if rec := x.lostRecord(); rec != nil {
				s.dumpBuf.reset()
				s.dumpBuf.add(rec)
				continue
			}
			break
		}
		s.dumpBuf.reset() // the records handed out are now invalid
		x.write(dumpPart)
	}
	st, reads, err := x.end()
	s.last = st
	s.run, s.inDump = nil, false
	s.stats.Duplicates += uint64(st.Duplicates)
	s.stats.Stale += uint64(st.Stale)
	s.stats.Lost += st.Lost
	// The dump drained the rings until now.
	s.lastPoll = bpfmethod.MonotonicNow()
	if err != nil {
		return 0, err
	}
	s.stats.Dumps++
	s.read = reads
	// A dump that lost records may have lost a whole process's: its end
	// says nothing of the processes it did not read, as a partial one.
	recs[0] = Record{Kind: KindDumpEnd, Gen: x.gen, Partial: s.partial() || st.Lost > 0}
	return 1, nil
}

// dumpPart is about how many bytes of a dump's held records a Session
// writes into its buffer at a time.
const dumpPart = 256 << 10

// runDump reads the host for the dump Dump asked for; Close stops it.
// Its records then go through dumpBuf a part at a time.
func (s *Session) runDump() {
	ctx, cancel := context.WithCancel(s.dumpCtx)
	s.cancelMu.Lock()
	s.cancel = cancel
	s.cancelMu.Unlock()
	defer func() {
		s.cancelMu.Lock()
		s.cancel = nil
		s.cancelMu.Unlock()
		cancel()
	}()
	s.dumpBuf.reset()
	s.run = startGeneration(ctx, s.b, s.attrs[0], s.dumpBuf.add, s.dumpBuf.addHeld)
	// The live records the dump drained wait in the queue for its end.
	queueLive(&s.live, s.b)
}

func (s *Session) count(rec *Record) {
	switch rec.Kind {
	case KindSample:
		s.stats.Samples++
	case KindUnmap:
		s.stats.Unmaps++
	case KindLive:
		s.stats.Live++
		s.stats.LiveLost += lostCount(rec.Raw)
		if rec.Type() == perfdata.RecordThrottle {
			s.stats.Throttled++
		}
	}
}

// wait sleeps until a ring reaches its watermark, the poll tick passes,
// or Close, Flush, SetDeadline or ReadContext's ctx interrupt it.
func (s *Session) wait() error {
	if s.readCtx != nil && s.readCtx.Err() != nil {
		return s.readCtx.Err()
	}
	timeout := pollTick
	if dl := s.deadline.Load(); dl != 0 {
		left := time.Until(time.Unix(0, dl))
		if left <= 0 {
			return os.ErrDeadlineExceeded
		}
		timeout = min(timeout, left)
	}
	_, err := unix.Poll(s.pollfds, int(timeout.Milliseconds())+1)
	if err != nil && !errors.Is(err, unix.EINTR) {
		return fmt.Errorf("poll rings: %w", err)
	}
	var buf [8]byte
	_, _ = unix.Read(s.wake, buf[:]) // reset the eventfd; EAGAIN when not woken
	return nil
}

// drainLive moves what the rings hold into the live queue. Records the
// rings held before the previous drain are then complete up to that
// drain's time: a record is written to its ring right after its time is
// taken, so the previous drain's start is a safe ordering watermark.
func (s *Session) drainLive() error {
	now := bpfmethod.MonotonicNow()
	s.live.compact()
	// Records of the programs outside a dump are left over from a dump
	// that was stopped: stale.
	stale, lost, err := s.b.DrainLive()
	if err != nil {
		return err
	}
	queueLive(&s.live, s.b)
	s.stats.Stale += uint64(stale)
	s.stats.Lost += lost
	s.live.sort()
	s.ready, s.lastPoll = s.lastPoll, now
	return nil
}

// queueLive moves the live records b drained into q.
func queueLive(q *liveQueue, b *bpfmethod.BPF) {
	for _, lr := range b.TakeLive() {
		kind := KindLive
		switch {
		case lr.Sample:
			kind = KindSample
		case lr.Unmap:
			kind = KindUnmap
		}
		q.push(lr.Raw, liveRec{kind: kind, time: lr.Time, pid: lr.Pid, tid: lr.Tid, gen: lr.Gen})
	}
}

// liveFilter says which live records and samples belong to a target:
// those of its processes and of the children they fork (tracked), and
// the samples of its threads (tids). nil maps: every process, every
// thread.
type liveFilter struct {
	tracked map[uint32]struct{}
	tids    map[uint32]struct{}
}

func newLiveFilter(d config.Resolved) liveFilter {
	var f liveFilter
	if len(d.Pids) > 0 {
		f.tracked = make(map[uint32]struct{})
		for _, pid := range d.Pids {
			f.tracked[uint32(pid)] = struct{}{}
		}
	}
	if len(d.Target.Tids) > 0 {
		f.tids = make(map[uint32]struct{})
		for _, tid := range d.Target.Tids {
			f.tids[uint32(tid)] = struct{}{}
		}
	}
	return f
}

// keep reports whether a live record, of the queue's entry lr, belongs
// to the target, following the forks of its processes as it goes: the
// records must come in time order.
func (f *liveFilter) keep(rec *Record, lr liveRec) bool {
	return !(outsideNamespace(rec) ||
		f.tracked != nil && !hostRecord(rec.Type()) && !f.track(rec.Raw, lr.pid) ||
		f.tids != nil && rec.Kind == KindSample && !f.sampleOfTids(lr.tid))
}

// partial reports whether the target is only some processes.
func (f *liveFilter) partial() bool { return f.tracked != nil || f.tids != nil }

// sampleOfTids reports whether a sample is of a thread of the target (Target.Tids).
func (f *liveFilter) sampleOfTids(tid uint32) bool {
	_, ok := f.tids[tid]
	return ok
}

// lostCount returns what a record says the kernel dropped: the count of
// a PERF_RECORD_LOST (u64 id, u64 lost after the header) or of a
// PERF_RECORD_LOST_SAMPLES (u64 lost), and 0 for any other record.
func lostCount(rec []byte) uint64 {
	switch perfdata.RecordView(rec).Type() {
	case perfdata.RecordLost:
		if perfdata.LostView(rec).Fits() {
			return perfdata.LostView(rec).Lost()
		}
	case perfdata.RecordLostSamples:
		if len(rec) >= 16 {
			return binary.LittleEndian.Uint64(rec[8:])
		}
	}
	return 0
}

// outsideNamespace reports whether a live record is of a task outside
// the session's pid namespace: the kernel numbers such a task 0 in the
// records of an event opened inside it (perf_event_pid()), and the
// namespace's /proc does not list it, so the dumps do not either. Only
// thread records are dropped so: pid 0 is no process's, in any
// namespace. A sample of pid 0 stays (the idle task's, or another
// namespace's task on a CPU the session samples), as perf keeps it.
func outsideNamespace(rec *Record) bool {
	switch rec.Type() {
	case perfdata.RecordMmap, perfdata.RecordMmap2, perfdata.RecordComm, perfdata.RecordFork, perfdata.RecordExit,
		perfdata.RecordNamespaces, bpfmethod.RecordUnmap:
		return len(rec.Raw) >= 12 && perfdata.RecordView(rec.Raw).Pid() == 0
	}
	return false
}

// hostRecord reports whether a record of type t is of the host, not of
// the task that was running when the kernel noted it: a loss, the
// kernel's symbols (KSYMBOL, BPF_EVENT: a BPF program may run in any
// task's kernel stack), a cgroup. Every session keeps them, as perf
// record keeps them for any target.
func hostRecord(t perfdata.RecordType) bool {
	switch t {
	case perfdata.RecordLost, perfdata.RecordLostSamples, perfdata.RecordKsymbol, perfdata.RecordBPFEvent, perfdata.RecordCgroup:
		return true
	}
	return false
}

// track reports whether a record of process pid belongs to the session,
// following the forks of the processes it follows.
func (f *liveFilter) track(rec []byte, pid uint32) bool {
	switch perfdata.RecordView(rec).Type() {
	case perfdata.RecordFork:
		child, parent := perfdata.RecordView(rec).Pid(), perfdata.RecordView(rec).Ppid()
		if _, ok := f.tracked[parent]; ok {
			f.tracked[child] = struct{}{}
		}
		pid = child
	case perfdata.RecordExit, perfdata.RecordComm, perfdata.RecordMmap2, perfdata.RecordMmap, bpfmethod.RecordUnmap:
		pid = perfdata.RecordView(rec).Pid()
	}
	_, ok := f.tracked[pid]
	return ok
}

// liveRec is a record of the live queue.
type liveRec struct {
	kind   RecordKind
	pid    uint32
	tid    uint32
	time   uint64
	gen    uint64
	off, n int
}

// liveQueue holds live records until their time order is settled.
type liveQueue struct {
	arena []byte
	recs  []liveRec
	head  int
}

func (q *liveQueue) push(rec []byte, lr liveRec) {
	lr.off, lr.n = len(q.arena), len(rec)
	q.arena = append(q.arena, rec...)
	q.recs = append(q.recs, lr)
}

// sort puts the records not yet returned in time order; each CPU's are
// already, so this merges them.
func (q *liveQueue) sort() {
	slices.SortStableFunc(q.recs[q.head:], func(a, b liveRec) int {
		switch {
		case a.time < b.time:
			return -1
		case a.time > b.time:
			return 1
		}
		return 0
	})
}

// pop returns the next record of time up to upTo, and its entry.
func (q *liveQueue) pop(rec *Record, upTo uint64) (liveRec, bool) {
	if q.head == len(q.recs) || q.recs[q.head].time > upTo {
		return liveRec{}, false
	}
	lr := q.recs[q.head]
	q.head++
	*rec = Record{Kind: lr.kind, Gen: lr.gen, Time: lr.time, Raw: q.arena[lr.off : lr.off+lr.n]}
	return lr, true
}

// compact drops the records already returned; it invalidates their Raw.
func (q *liveQueue) compact() {
	if q.head == 0 {
		return
	}
	rest := q.recs[q.head:]
	if len(rest) == 0 {
		q.arena, q.recs, q.head = q.arena[:0], q.recs[:0], 0
		return
	}
	// Records were pushed in arena order but sorted since: copy each.
	size := 0
	for _, lr := range rest {
		size += lr.n
	}
	arena := make([]byte, 0, size)
	for i := range rest {
		arena = append(arena, q.arena[rest[i].off:rest[i].off+rest[i].n]...)
		rest[i].off = len(arena) - rest[i].n
	}
	q.arena = arena
	q.recs = append(q.recs[:0], rest...)
	q.head = 0
}
