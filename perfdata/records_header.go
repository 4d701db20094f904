package perfdata

// The records of a pipe's header that describe the recording (perf's
// tools/lib/perf/include/perf/event.h).

// ThreadMapEntry is one thread of PERF_RECORD_THREAD_MAP.
type ThreadMapEntry struct {
	Tid  int64 // -1: every thread (perf record -a)
	Comm string
}

// Layout of PERF_RECORD_THREAD_MAP: u64 nr, then nr of {u64 pid; char
// comm[16]}.
const (
	threadMapNr      = 8
	threadMapEntries = 16
	threadMapEntry   = 24
)

// ParseThreadMap decodes PERF_RECORD_THREAD_MAP: the threads perf
// records. An nr the record cannot hold is a FormatError.
func ParseThreadMap(rec []byte) ([]ThreadMapEntry, error) {
	if len(rec) < threadMapEntries {
		return nil, &FormatError{Msg: "short THREAD_MAP record"}
	}
	n := le.Uint64(rec[threadMapNr:])
	if n > uint64(len(rec)-threadMapEntries)/threadMapEntry {
		return nil, &FormatError{Off: threadMapNr, Msg: "THREAD_MAP nr exceeds the record"}
	}
	ts := make([]ThreadMapEntry, n)
	for i := range ts {
		e := rec[threadMapEntries+threadMapEntry*i:]
		ts[i] = ThreadMapEntry{Tid: int64(le.Uint64(e)), Comm: string(cStringBytes(e[8:24]))}
	}
	return ts, nil
}

// EventUpdateName is PERF_EVENT_UPDATE__NAME, the type of an
// EVENT_UPDATE record that names an event.
const EventUpdateName = 2

// ParseEventUpdateName decodes a PERF_RECORD_EVENT_UPDATE of type
// EventUpdateName (u64 type, u64 id, then the name): the id of the
// event and its name; false for another type or a short record.
func ParseEventUpdateName(rec []byte) (id uint64, name string, ok bool) {
	if len(rec) <= 24 || le.Uint64(rec[8:]) != EventUpdateName {
		return 0, "", false
	}
	return le.Uint64(rec[16:]), string(cStringBytes(rec[24:])), true
}
