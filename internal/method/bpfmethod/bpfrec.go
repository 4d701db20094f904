package bpfmethod

import (
	"cmp"
	"fmt"
	"slices"
	"unsafe"

	synthbpf "github.com/synth-dev/synth/bpf"
	"github.com/synth-dev/synth/perfdata"
)

// Layout of what the BPF programs emit (bpf/synth.h). Every RAW sample
// payload is a struct synth_hdr followed by a complete perf record whose
// header.size excludes the sample_id trailer.
const (
	hdrGen     = int(unsafe.Offsetof(synthbpf.SynthSynthHdr{}.Gen))
	hdrSeq     = int(unsafe.Offsetof(synthbpf.SynthSynthHdr{}.Seq))
	hdrTime    = int(unsafe.Offsetof(synthbpf.SynthSynthHdr{}.Time))
	hdrSize    = int(unsafe.Sizeof(synthbpf.SynthSynthHdr{}))
	recMinSize = 8 + 8 // perf_event_header + pid/tid
)

// bpfRecord is one record taken out of a ring, referring into a round's
// arena.
type bpfRecord struct {
	seq  uint64
	gen  uint64
	time uint64
	off  int
	n    int
}

// round collects the records of one paced iterator read from every BPF
// output ring and hands them out in emission order. It keeps the
// kernel's live records of the side-band rings too (in liveArena, at
// liveEnds), for liveSide.pass: a pipelined round is drained on one
// goroutine and handled on another.
//
// The drain, on the reading goroutine between two reads, only copies
// each sample's RAW data into the arena (addOut): the records in it are
// unwrapped on the handling goroutine (unwrap), so that the reads wait
// for one copy per sample, not for a copy and a parse per record.
type round struct {
	arena     []byte
	raws      []rawSample // the samples' RAW data in arena, in drain order
	recs      []bpfRecord // unwrapped from raws: see unwrap
	lost      uint64      // PERF_RECORD_LOST counts seen in the output rings
	unmaps    []bpfRecord // RecordUnmap records, live ones of the programs
	liveArena []byte
	liveEnds  []int
}

// rawSample is where a sample's RAW data is in a round's arena, and the
// CPU whose ring held it.
type rawSample struct{ cpu, off, n int }

func (r *round) reset() {
	r.arena = r.arena[:0]
	r.raws = r.raws[:0]
	r.recs = r.recs[:0]
	r.unmaps = r.unmaps[:0]
	r.liveArena = r.liveArena[:0]
	r.liveEnds = r.liveEnds[:0]
}

// addOut takes one record of a BPF output ring, header included: the
// programs' samples, or the kernel's count of those it could not write.
func (r *round) addOut(cpu int, rec []byte) error {
	switch perfdata.RecordView(rec).Type() {
	case perfdata.RecordSample:
		raw, ok := perfdata.SampleView(rec).Raw(ringSampleType)
		if !ok {
			return fmt.Errorf("cpu %d: BPF sample of %d bytes without its raw data", cpu, len(rec))
		}
		r.raws = append(r.raws, rawSample{cpu: cpu, off: len(r.arena), n: len(raw)})
		r.arena = append(r.arena, raw...)
	case perfdata.RecordLost:
		if l := perfdata.LostView(rec); l.Fits() {
			r.lost += l.Lost()
		}
	}
	return nil
}

// addLive takes one record of a side-band ring.
func (r *round) addLive(_ int, rec []byte) error {
	r.liveArena = append(r.liveArena, rec...)
	r.liveEnds = append(r.liveEnds, len(r.liveArena))
	return nil
}

// unwrap unwraps the records the programs emitted from the samples the
// drain copied (addOut), once, on the handling goroutine.
func (r *round) unwrap() error {
	for _, s := range r.raws {
		if err := r.addBPF(s.cpu, s.off, s.n); err != nil {
			return err
		}
	}
	r.raws = r.raws[:0]
	return nil
}

// addBPF unwraps the records the programs emitted from a sample's RAW
// data, the n bytes at off in the arena: one record (the iterators'
// per-VMA output) or a batch of them (the maple walk), each a struct
// synth_hdr and a perf record, 8-byte aligned. The records stay where
// they are in the arena.
func (r *round) addBPF(cpu, off, n int) error {
	raw := r.arena[off : off+n]
	for len(raw) >= hdrSize+recMinSize {
		rec := raw[hdrSize:]
		n := perfdata.RecordView(rec).Size()
		if n < recMinSize || n > len(rec) {
			return fmt.Errorf("cpu %d: BPF record size %d out of range", cpu, n)
		}
		br := bpfRecord{
			seq:  hostOrder.Uint64(raw[hdrSeq:]),
			gen:  hostOrder.Uint64(raw[hdrGen:]),
			time: hostOrder.Uint64(raw[hdrTime:]),
			off:  off + hdrSize,
			n:    n,
		}
		if perfdata.RecordView(rec).Type() == RecordUnmap {
			r.unmaps = append(r.unmaps, br) // of no dump: a live record
		} else {
			r.recs = append(r.recs, br)
		}
		step := min(hdrSize+(n+7)&^7, len(raw))
		raw, off = raw[step:], off+step
	}
	// The perf sample pads the raw data to 8 bytes after a u32 size:
	// at most 4 bytes are left that are no record.
	if len(raw) > 4 {
		return fmt.Errorf("cpu %d: %d stray bytes after BPF records", cpu, len(raw))
	}
	return nil
}

// sorted returns the round's records in the order the programs emitted
// them: one read may have run on several CPUs. A batch's records share
// its sequence number and stay in their order.
func (r *round) sorted() []bpfRecord {
	bySeq := func(a, b bpfRecord) int { return cmp.Compare(a.seq, b.seq) }
	// Usually one CPU's ring held them all, in order already.
	if !slices.IsSortedFunc(r.recs, bySeq) {
		slices.SortStableFunc(r.recs, bySeq)
	}
	return r.recs
}

func (r *round) bytes(rec bpfRecord) []byte { return r.arena[rec.off : rec.off+rec.n] }
