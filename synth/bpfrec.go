package synth

import (
	"encoding/binary"
	"fmt"
	"sort"

	perf "github.com/elastic/go-perf"
	"github.com/synth-dev/synth/perfdata"
)

// Layout of what the BPF programs emit (bpf/synth.h). Every RAW sample
// payload is a struct synth_hdr followed by a complete perf record whose
// header.size excludes the sample_id trailer.
const (
	hdrGen     = 0
	hdrSeq     = 8
	hdrTime    = 16
	hdrSize    = 24
	recMinSize = 8 + 8 // perf_event_header + pid/tid
)

// sampleRawOffset is where the raw data size sits in a BPF output sample
// with ringSampleFormat (TID|TIME|RAW): u32 pid, u32 tid, u64 time.
const sampleRawOffset = 16

// bpfRecord is one record taken out of a ring, referring into a round's
// arena.
type bpfRecord struct {
	seq  uint64
	gen  uint64
	time uint64
	off  int
	n    int
}

// round collects the records of one paced iterator read from every ring
// and hands them out in emission order.
type round struct {
	arena []byte
	recs  []bpfRecord
	lost  uint64 // PERF_RECORD_LOST counts seen in the rings
	other int    // records of other kinds (none expected in a dump)
}

func (r *round) reset() {
	r.arena = r.arena[:0]
	r.recs = r.recs[:0]
}

// add takes one ring record; data excludes the 8-byte perf header.
func (r *round) add(cpu int, h perf.RecordHeader, data []byte) error {
	switch h.Type {
	case perfdata.RecordSample:
	case perfdata.RecordLost:
		if len(data) >= 16 {
			r.lost += binary.NativeEndian.Uint64(data[8:])
		}
		return nil
	default:
		r.other++
		return nil
	}
	if len(data) < sampleRawOffset+4 {
		return fmt.Errorf("cpu %d: short BPF sample (%d bytes)", cpu, len(data))
	}
	size := int(binary.NativeEndian.Uint32(data[sampleRawOffset:]))
	raw := data[sampleRawOffset+4:]
	if size > len(raw) || size < hdrSize+recMinSize {
		return fmt.Errorf("cpu %d: BPF sample raw size %d out of range", cpu, size)
	}
	raw = raw[:size]
	rec := raw[hdrSize:]
	n := int(binary.NativeEndian.Uint16(rec[6:]))
	if n < recMinSize || n > len(rec) {
		return fmt.Errorf("cpu %d: BPF record size %d out of range", cpu, n)
	}
	r.recs = append(r.recs, bpfRecord{
		seq:  binary.NativeEndian.Uint64(raw[hdrSeq:]),
		gen:  binary.NativeEndian.Uint64(raw[hdrGen:]),
		time: binary.NativeEndian.Uint64(raw[hdrTime:]),
		off:  len(r.arena),
		n:    n,
	})
	r.arena = append(r.arena, rec[:n]...)
	return nil
}

// sorted returns the round's records in the order the programs emitted
// them: one read may have run on several CPUs.
func (r *round) sorted() []bpfRecord {
	sort.Slice(r.recs, func(i, j int) bool { return r.recs[i].seq < r.recs[j].seq })
	return r.recs
}

func (r *round) bytes(rec bpfRecord) []byte { return r.arena[rec.off : rec.off+rec.n] }

// recType, recPid and recTid read a perf record's header and the pid/tid
// that COMM, MMAP and MMAP2 records start with.
func recType(rec []byte) uint32 { return binary.NativeEndian.Uint32(rec[0:]) }
func recPid(rec []byte) uint32  { return binary.NativeEndian.Uint32(rec[8:]) }

// recTid returns the thread a record is about (FORK keeps it at offset 16).
func recTid(rec []byte) uint32 {
	if recType(rec) == perfdata.RecordFork {
		return binary.NativeEndian.Uint32(rec[16:])
	}
	return binary.NativeEndian.Uint32(rec[12:])
}
