package synth

import (
	"bytes"
	"fmt"
	"io"
	"slices"

	"github.com/synth-dev/synth/internal/dedupe"
	"github.com/synth-dev/synth/internal/procfs"
	"github.com/synth-dev/synth/perfdata"
)

// The parts of Inject: perf's records before and after its
// FINISHED_INIT, the dump's records, and the mappings perf reported.

// perfRec is a copy of one of perf's records, with its payload.
type perfRec struct {
	data, payload []byte
	// badID marks an MMAP2 whose build ID perf could not read, made
	// one of the maj/min/ino form (see clearBadBuildID).
	badID bool
	// grown marks a KSYMBOL, BPF_EVENT or TEXT_POKE the kernel had
	// grown, cut to its true size (see trimGrown).
	grown bool
}

func copyRec(r perfdata.Record, attrs []perfdata.EventAttr) perfRec {
	p := perfRec{data: bytes.Clone(r.Data), payload: bytes.Clone(r.Payload)}
	p.badID = clearBadBuildID(p.data, attrs)
	p.data, p.grown = trimGrown(p.data, attrs)
	return p
}

// trimGrown cuts a KSYMBOL, BPF_EVENT or TEXT_POKE of perf's that the
// kernel grew to its true size, with the trailer of the attr that asked
// for such records, and reports whether it did. The kernel adds every
// event's sample_id size to the header it shares among the events that
// hear the record, newest first, and never takes it back
// (perfdata.TrimGrown): perf's events, opened before another profiler's
// (a synth session, a second perf), get records whose trailer is not at
// their end, and perf 6.1 refuses them ("failed to process type: 17").
// A record of a type no attr asked for, or that TrimGrown cannot read,
// is passed on as it is.
func trimGrown(rec []byte, attrs []perfdata.EventAttr) ([]byte, bool) {
	var flag uint64
	switch perfdata.RecordView(rec).Type() {
	case perfdata.RecordKsymbol:
		flag = perfdata.AttrKsymbol
	case perfdata.RecordBPFEvent:
		flag = perfdata.AttrBPFEvent
	case perfdata.RecordTextPoke:
		flag = perfdata.AttrTextPoke
	default:
		return rec, false
	}
	i := slices.IndexFunc(attrs, func(a perfdata.EventAttr) bool { return a.Attr.Flags&flag != 0 })
	if i < 0 {
		return rec, false
	}
	var st uint64
	if a := attrs[i].Attr; a.Flags&perfdata.AttrSampleIDAll != 0 {
		st = a.SampleType
	}
	out, cut, err := perfdata.TrimGrown(rec, st)
	if err != nil {
		return rec, false
	}
	return out, cut > 0
}

// clearBadBuildID rewrites, in place, an MMAP2 whose build-ID bit
// perf would misread, and reports whether it did:
//
//   - The bit set on a record of an event that did not ask for build IDs
//     (attr.build_id): the kernel's own doing. perf_event_mmap_output()
//     sets PERF_RECORD_MISC_MMAP_BUILD_ID in the mmap event it shares
//     among every event it reports the mapping to, and never clears it,
//     so an event without build IDs that comes after one with them (a
//     synth session, or another perf --buildid-mmap, opened later) gets
//     the bit over a record of the maj/min/ino form. perf 6.1 then reads
//     the device's major number as the build ID's size: over 20 it
//     aborts (util/build-id.c:1010), under it names a wrong build ID.
//     The body is right: only the bit goes.
//   - A build ID over the 20 bytes the record holds
//     (perfdata.ErrBuildIDSize) on any other: made one of the maj/min/ino
//     form, all zero, that names the file by its path alone.
//
// The record is rewritten as it is read, so that the dump's records are
// compared with what is written.
func clearBadBuildID(rec []byte, attrs []perfdata.EventAttr) bool {
	m := perfdata.Mmap2View(rec)
	if perfdata.RecordView(rec).Type() != perfdata.RecordMmap2 || !m.HasBuildID() {
		return false
	}
	if !askedBuildID(rec, attrs) {
		perfdata.RecordView(rec).SetMisc(perfdata.RecordView(rec).Misc() &^ perfdata.MiscMmapBuildID)
		return true
	}
	if m.Fits() && m.BuildIDSize() <= perfdata.BuildIDMax {
		return false
	}
	m.ClearBuildID()
	return true
}

// askedBuildID reports whether the event that wrote a kernel record asked
// for build IDs: all of perf's events, or none, or the one its trailer's
// identifier names. A record whose event cannot be told is taken as
// asked for, so that only an oversized build ID is cleared.
func askedBuildID(rec []byte, attrs []perfdata.EventAttr) bool {
	some, all := false, len(attrs) > 0
	for _, a := range attrs {
		asked := a.Attr.Flags&perfdata.AttrBuildID != 0
		some, all = some || asked, all && asked
	}
	if all || !some {
		return all || len(attrs) == 0
	}
	if attrs[0].Attr.SampleType&perfdata.SampleIdentifier == 0 {
		return true
	}
	id, ok := perfdata.RecordView(rec).TrailerIdentifier()
	if !ok {
		return true
	}
	for _, a := range attrs {
		if slices.Contains(a.IDs, id) {
			return a.Attr.Flags&perfdata.AttrBuildID != 0
		}
	}
	return true
}

// maxInit caps what Inject keeps of perf's initial records.
const maxInit = 256 << 20

// initRecords are perf's records up to its FINISHED_INIT, which is not
// among them.
type initRecords struct {
	recs  []perfRec
	pids  []int             // the processes of perf's thread map; nil: all
	names map[uint64]string // event names by sample id, from EVENT_UPDATE
	// next is perf's first record after its initial ones when a perf
	// without FINISHED_INIT wrote none: a sample, or a record with a
	// time.
	next *perfRec
}

// readInit reads perf's header records and initial state.
func readInit(sr *perfdata.StreamReader) (*initRecords, error) {
	in := &initRecords{names: map[uint64]string{}}
	size := 0
	for {
		r, err := sr.Next()
		if err == io.EOF {
			return in, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read perf's stream: %w", err)
		}
		// Copied first: a record the kernel grew has its time where
		// hasTime looks only once cut.
		rec := copyRec(r, sr.Attrs())
		switch {
		case r.Type == perfdata.RecordFinishedInit:
			return in, nil
		case r.Type == perfdata.RecordSample || r.Type < perfdata.RecordHeaderAttr && hasTime(rec.data, sr.SampleType()):
			in.next = &rec
			return in, nil
		case r.Type == perfdata.RecordThreadMap:
			in.pids = threadMapPids(r.Data)
		case r.Type == perfdata.RecordEventUpdate:
			in.addName(r.Data)
		}
		if size += len(r.Data) + len(r.Payload); size > maxInit {
			return nil, fmt.Errorf("read perf's stream: over %d bytes before its first event", maxInit)
		}
		in.recs = append(in.recs, rec)
	}
}

// hasTime reports whether a kernel record has a time in its trailer.
func hasTime(rec []byte, sampleType uint64) bool {
	sid, err := perfdata.ParseSampleID(rec, sampleType)
	return err == nil && sid.Time != 0
}

// threadMapPids reads PERF_RECORD_THREAD_MAP (u64 nr; {u64 pid; char
// comm[16]} entries[nr]) into the processes of its threads; nil for
// perf's "every thread" (-1).
func threadMapPids(rec []byte) []int {
	threads, err := perfdata.ParseThreadMap(rec)
	if err != nil {
		return nil // as perf -a: a dump of every process
	}
	var pids []int
	seen := map[int]bool{}
	for _, t := range threads {
		tid := int(t.Tid)
		if tid == -1 {
			return nil
		}
		pid, err := procfs.Tgid(tid)
		if err != nil {
			pid = tid // gone: the dump skips it
		}
		if !seen[pid] {
			seen[pid] = true
			pids = append(pids, pid)
		}
	}
	return pids
}

// addName takes the name from a PERF_RECORD_EVENT_UPDATE that names an
// event.
func (in *initRecords) addName(rec []byte) {
	if id, name, ok := perfdata.ParseEventUpdateName(rec); ok {
		in.names[id] = name
	}
}

// mapSet is the mappings perf reported before the dump ended, by the
// key the Session's dedupe rule compares.
type mapSet map[dedupe.Key]struct{}

func mappingsOf(recs []perfRec) mapSet {
	s := mapSet{}
	for _, r := range recs {
		s.add(r.data)
	}
	return s
}

func (s mapSet) add(rec []byte) {
	if k, ok := dedupe.KeyOf(rec); ok {
		s[k] = struct{}{}
	}
}

func (s mapSet) has(rec []byte) bool {
	k, ok := dedupe.KeyOf(rec)
	if !ok {
		return false
	}
	_, dup := s[k]
	return dup
}
