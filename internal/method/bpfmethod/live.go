package bpfmethod

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/synth-dev/synth/internal/dedupe"
	"github.com/synth-dev/synth/perfdata"
)

// The live side of the rings, for a Session. Every drain, during a dump
// or between dumps (DrainLive), moves the side-band rings' records into
// the live side's buffer, each with its time and generation, and,
// during a dump, into the deduper, before the synthesized records of the
// same drain are judged. The Session takes them out with TakeLive: the
// records flow one way, from the rings through the method to the
// session.

// LiveRecord is a record of the side-band rings: one the kernel reported
// (MMAP2, COMM, FORK, EXIT, LOST, THROTTLE...) or a sample of the
// sampling event.
type LiveRecord struct {
	// Raw is the record, header and trailer included. It points into
	// the method's buffer, valid until the next Start or DrainLive.
	Raw    []byte
	Time   uint64 // CLOCK_MONOTONIC
	Gen    uint64 // the generation whose live stream it belongs to
	Pid    uint32
	Tid    uint32
	Sample bool // a sample of the sampling event
	Unmap  bool // a RecordUnmap of the unmap programs (WatchUnmaps)
	off, n int
}

// liveBuf holds the live records drained and not yet taken.
type liveBuf struct {
	arena []byte
	recs  []LiveRecord
	taken bool // TakeLive returned them: the next add starts afresh
}

func (l *liveBuf) add(rec []byte, lr LiveRecord) {
	if l.taken {
		l.arena, l.recs, l.taken = l.arena[:0], l.recs[:0], false
	}
	lr.off, lr.n = len(l.arena), len(rec)
	l.arena = append(l.arena, rec...)
	l.recs = append(l.recs, lr)
}

// liveSide is what the side-band's records go through on their way to
// the Session: their build IDs read (liveIDs), their time and task read
// (classify), the deduper fed while a dump runs, and the buffer TakeLive
// empties. It owns the build IDs' reads; the rings it reads are the
// rings'.
type liveSide struct {
	// The sample_type of the side-band's records and of the sampler's,
	// and the sampler's ids, to read a live record's time with.
	st, samplerST uint64
	samplerIDs    []uint64
	ids           *liveIDs // the MMAP2s' build IDs; nil without them
	dd            *dedupe.Deduper
	dumping       bool // a dump runs: live records go to dd too
	// grown counts the records trimGrown cut; read by Grown from any
	// goroutine.
	grown atomic.Uint64
	buf   liveBuf
}

func newLiveSide(rc *RingConfig, r *rings, dd *dedupe.Deduper, wait time.Duration, cache *idCache) *liveSide {
	l := &liveSide{st: rc.LiveAttr().SampleType, dd: dd}
	if rc.BuildID {
		l.ids = newLiveIDs(wait, cache)
	}
	if rc.Sampler != nil {
		l.samplerST = rc.Sampler.SampleType
	}
	_, l.samplerIDs = r.ids()
	return l
}

// LiveFDs returns the side-band events' descriptors, to poll.
func (b *BPF) LiveFDs() []int { return b.rings.liveFDs() }

// IDs returns the ids of the side-band events and of the sampling
// events, as their records carry them.
func (b *BPF) IDs() (live, samplers []uint64) { return b.rings.ids() }

// SetSamplers starts the sampling events (opened stopped), or stops
// them: the rings then receive no more samples, and a drain empties
// them.
func (b *BPF) SetSamplers(on bool) error { return b.rings.enableSamplers(on) }

// DrainLive empties the rings between dumps into the live buffer. It
// returns how many records of the programs it found, left over from a
// dump that was stopped (stale), and how many the output rings lost.
func (b *BPF) DrainLive() (stale int, lost uint64, err error) {
	r := &b.round
	if err := b.rings.drainInto(r); err != nil {
		return 0, 0, err
	}
	if err := r.unwrap(); err != nil {
		return 0, 0, err
	}
	if err := b.live.pass(r); err != nil {
		return 0, 0, err
	}
	stale, lost = len(r.recs), r.lost
	r.lost = 0
	return stale, lost, nil
}

// Grown returns how many KSYMBOL, BPF_EVENT and TEXT_POKE records of
// the side-band the kernel had grown and the live side cut to their
// true size (see liveSide.trimGrown).
func (b *BPF) Grown() uint64 {
	if b.live == nil {
		return 0
	}
	return b.live.grown.Load()
}

// TakeLive returns the live records drained since the last call, in
// the order each CPU's ring held them. They stay valid until the next
// Start or DrainLive.
func (b *BPF) TakeLive() []LiveRecord {
	l := &b.live.buf
	if l.taken {
		return nil
	}
	for i := range l.recs {
		r := &l.recs[i]
		r.Raw = l.arena[r.off : r.off+r.n : r.off+r.n]
	}
	l.taken = true
	return l.recs
}

// LiveBuildIDs returns how many live MMAP2 records were given a build
// ID, how many were left without one though their file may have one
// (unread, or changed since), and how many files the live side read
// (not taken from the cache).
func (b *BPF) LiveBuildIDs() (found, missed, read uint64) {
	if b == nil || b.live == nil || b.live.ids == nil {
		return 0, 0, 0
	}
	li := b.live.ids
	return li.found.Load(), li.missed.Load(), li.read.Load()
}

// Close stops the build IDs' reads under way.
func (l *liveSide) Close() error {
	if l == nil {
		return nil
	}
	return l.ids.Close()
}

// pass moves the live records a round drained into the buffer and,
// during a dump, into the deduper: before the round's synthesized
// records are judged (see rings.drainInto). Their MMAP2s are given
// their build IDs first, so that the deduper compares them as the
// session hands them out.
func (l *liveSide) pass(r *round) error {
	start := 0
	for _, end := range r.liveEnds {
		rec := r.liveArena[start:end]
		start = end
		clearLeakedBuildID(rec)
		l.trimGrown(rec)
		if l.ids != nil && perfdata.RecordView(rec).Type() == perfdata.RecordMmap2 {
			// A record without its time gets no build ID (fill); the
			// loop below returns the error.
			lr, _ := l.classify(rec)
			l.ids.want(rec, lr.Time)
		}
	}
	l.ids.fill()
	start = 0
	for _, end := range r.liveEnds {
		// A record trimGrown cut ends at its header's size, the rest
		// of its place in the arena stale.
		rec := r.liveArena[start:end]
		rec = rec[:perfdata.RecordView(rec).Size()]
		start = end
		lr, err := l.classify(rec)
		if err != nil {
			return err
		}
		if l.dumping && !lr.Sample {
			l.dd.AddLive(rec, lr.Time)
		}
		lr.Gen = l.dd.GenOf(lr.Time)
		l.buf.add(rec, lr)
	}
	// The unmaps, which the dedupe does not need: a dump reports no
	// unmapping it could drop.
	for _, u := range r.unmaps {
		rec := r.bytes(u)
		um, err := ParseUnmap(rec)
		if err != nil {
			return err
		}
		l.buf.add(rec, LiveRecord{Time: u.time, Gen: l.dd.GenOf(u.time), Pid: um.Pid, Tid: um.Tid, Unmap: true})
	}
	return nil
}

// clearLeakedBuildID takes PERF_RECORD_MISC_MMAP_BUILD_ID off an MMAP2
// of the side-band, which never asks for build IDs (liveIDs gives them).
// The kernel sets the bit in the mmap event it shares among every event
// it reports the mapping to, and does not take it back
// (perf_event_mmap_output()), so the side-band, served after an event
// with build IDs (another program's perf record --buildid-mmap), gets
// the bit over a record of the maj/min/ino form, whose device
// number a reader would then take for a build ID's size. The body is
// right: only the bit goes.
func clearLeakedBuildID(rec []byte) {
	v := perfdata.RecordView(rec)
	if v.Type() == perfdata.RecordMmap2 && v.Misc()&perfdata.MiscMmapBuildID != 0 {
		v.SetMisc(v.Misc() &^ perfdata.MiscMmapBuildID)
	}
}

// trimGrown cuts a KSYMBOL or BPF_EVENT of the side-band that the
// kernel grew to its true size, in place (perfdata.TrimGrown says how
// the kernel grows them): the rings' owners, which alone ask for them,
// are served after every event on the host opened later (another synth,
// a perf record), and get records as long as those events' trailers
// made them. A record trimGrown cannot read is passed on as the kernel
// wrote it.
func (l *liveSide) trimGrown(rec []byte) {
	if _, cut, err := perfdata.TrimGrown(rec, l.st); err == nil && cut > 0 {
		l.grown.Add(1)
	}
}

// classify reads a side-band record's time and task: a sample's from
// its body, as the sampler's sample_type lays it out, any other record's
// from its sample_id_all trailer, as the side-band's or, for the
// sampler's own THROTTLE records and the like, the sampler's.
func (l *liveSide) classify(rec []byte) (LiveRecord, error) {
	if perfdata.RecordView(rec).Type() == perfdata.RecordSample {
		t, ok := perfdata.SampleView(rec).Time(l.samplerST)
		pid, tid, pok := perfdata.SampleView(rec).TID(l.samplerST)
		if !ok || !pok {
			return LiveRecord{}, fmt.Errorf("short sample (%d bytes)", len(rec))
		}
		return LiveRecord{Time: t, Pid: pid, Tid: tid, Sample: true}, nil
	}
	st := l.st
	if id, ok := perfdata.RecordView(rec).TrailerIdentifier(); ok && slices.Contains(l.samplerIDs, id) {
		st = l.samplerST
	}
	sid, err := perfdata.ParseSampleID(rec, st)
	if err != nil {
		return LiveRecord{}, fmt.Errorf("live record type %d: %w", perfdata.RecordView(rec).Type(), err)
	}
	return LiveRecord{Time: sid.Time, Pid: sid.Pid, Tid: sid.Tid}, nil
}
