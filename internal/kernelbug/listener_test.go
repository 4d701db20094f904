package kernelbug

import (
	"encoding/binary"
	"math/bits"
	"os"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/perfring"
	"github.com/synth-dev/synth/perfdata"
)

var le = binary.LittleEndian

// Two trailer layouts of different sizes, so that a grown record says
// which listener grew it.
const (
	// olderSample is the older listener's: pid/tid, time, identifier.
	olderSample = perfdata.SampleTID | perfdata.SampleTime | perfdata.SampleIdentifier
	// newerSample is the newer listener's: pid/tid, time, id, stream id,
	// cpu.
	newerSample = perfdata.SampleTID | perfdata.SampleTime | perfdata.SampleTypeID |
		perfdata.SampleStreamID | perfdata.SampleCPU
)

// A listener is a side-band event (a software dummy, as perf record's)
// on the calling thread, and its ring.
type listener struct {
	ev *perfring.Event
	// idSize is the size of the sample_id trailer of its records: the
	// kernel's event->id_header_size.
	idSize int
}

// listen opens a listener on the calling thread, which must be locked
// to its goroutine: the kernel serves a task's events what that task
// does, and a goroutine may move between threads.
func listen(t *testing.T, flags, sampleType uint64) *listener {
	t.Helper()
	a := perfdata.Attr{
		Type:         perfdata.TypeSoftware,
		Size:         perfdata.AttrSize,
		Config:       perfdata.CountSWDummy,
		SamplePeriod: 1,
		SampleType:   sampleType,
		Flags:        flags | perfdata.AttrSampleIDAll,
	}
	ev, err := perfring.Open(&a, unix.Gettid(), -1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ev.Close() })
	if err := ev.MapRing(16); err != nil {
		t.Fatal(err)
	}
	return &listener{ev: ev, idSize: idHeaderSize(sampleType)}
}

// idHeaderSize is perf_event__id_header_size(): 8 bytes for each
// sample_id field the sample type asks for.
func idHeaderSize(sampleType uint64) int {
	const idAll = perfdata.SampleTID | perfdata.SampleTime | perfdata.SampleTypeID |
		perfdata.SampleStreamID | perfdata.SampleCPU | perfdata.SampleIdentifier
	return 8 * bits.OnesCount64(sampleType&idAll)
}

// records returns copies of the records now in l's ring, of type typ.
func (l *listener) records(t *testing.T, typ perfdata.RecordType) [][]byte {
	t.Helper()
	var recs [][]byte
	err := l.ev.Ring().ReadAll(func(rec []byte) error {
		if perfdata.RecordType(le.Uint32(rec)) == typ {
			recs = append(recs, append([]byte(nil), rec...))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// recordSize and recordMisc read a record's header.
func recordSize(rec []byte) int    { return int(le.Uint16(rec[6:])) }
func recordMisc(rec []byte) uint16 { return le.Uint16(rec[4:]) }

// align8 rounds n up to a multiple of 8, as the kernel pads a record's
// variable part.
func align8(n int) int { return (n + 7) &^ 7 }

// lockThread keeps the test's goroutine on its thread until the test
// ends, so that the listeners it opens hear what it does.
func lockThread(t *testing.T) {
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
}

// checkGrowth gives the verdict on the records of one kind (KSYMBOL,
// BPF_EVENT) that an older and a newer listener were both served, in the
// order the kernel made them; the text_poke one has the same bug, but no
// test here makes the kernel report a text patch. trueSize computes a
// record's true size, from its body and the trailer size of the event it
// was written for.
//
// The kernel serves the CPU's side-band events first, then the task's,
// newest first. Other programs' per-CPU listeners on the host may have
// grown a record before the task's events get it, by the same number of
// bytes for both. Beyond that, the older listener gets it grown by the
// newer one's trailer where the kernel has the bug (the test passes);
// where it is fixed both get their true size (the test skips, naming the
// bug).
func checkGrowth(t *testing.T, bug, kind string, older, newer *listener, olderRecs, newerRecs [][]byte, trueSize func(rec []byte, idSize int) int) {
	t.Helper()
	if len(olderRecs) == 0 || len(olderRecs) != len(newerRecs) {
		t.Fatalf("%s: the older listener got %d records, the newer %d: both hear the same task", kind, len(olderRecs), len(newerRecs))
	}
	var olderGrowth, newerGrowth []int
	fixed, buggy := true, true
	for i := range olderRecs {
		o, n := olderRecs[i], newerRecs[i]
		ot := trueSize(o, older.idSize)
		og, ng := recordSize(o)-ot, recordSize(n)-trueSize(n, newer.idSize)
		olderGrowth, newerGrowth = append(olderGrowth, og), append(newerGrowth, ng)
		fixed = fixed && og == 0 && ng == 0
		buggy = buggy && ng >= 0 && og-ng == newer.idSize
		// The older listener's trailer is where its true size ends it
		// (its identifier last), not where header.size says: perf reads
		// the trailer back from header.size.
		if id := le.Uint64(o[ot-8:]); id != older.ev.ID() {
			t.Fatalf("%s: the older listener's record has identifier %#x at its true end, not its event's %#x", kind, id, older.ev.ID())
		}
	}
	t.Logf("%s: %d records; size minus true size: older listener (trailer %d bytes) %v, newer listener (trailer %d bytes) %v",
		kind, len(olderRecs), older.idSize, olderGrowth, newer.idSize, newerGrowth)
	switch {
	case fixed:
		t.Skipf("kernel fixed: %s", bug)
	case !buggy:
		t.Fatalf("%s: the older listener's records grew by %v, the newer's by %v: neither both 0 (fixed) nor the older by the newer's trailer, %d, more (%s)",
			kind, olderGrowth, newerGrowth, newer.idSize, bug)
	}
	if newerGrowth[0] != 0 {
		t.Logf("%s: other programs' listeners on this CPU, served first, grew the records by %v before this thread's", kind, newerGrowth)
	}
}

// pageSize is the size mmap(2) maps.
var pageSize = os.Getpagesize()
