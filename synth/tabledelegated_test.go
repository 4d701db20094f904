package synth_test

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/elfnote/elftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/synth"
)

// A mapping made while a dump runs, before the dump reads its process,
// is reported live first, and the dump drops its own record of it as a
// duplicate: the live record is then the dump's record of the mapping,
// not one the dump read over, and the Table applies it. (It was marked
// Superseded as older than the read, and the Table lost the mapping
// until the next dump.) This process maps new files all through the
// dumps; after each, once it has stopped mapping, the Table holds every
// executable mapping /proc lists for it. A turn in which the kernel
// dropped live records (a full ring on a busy host) may lack the
// mappings whose MMAP2 it dropped, until the next dump: its shortfall is
// excused, as TestSoak excuses it.
func TestTableKeepsMappingsMadeDuringDumps(t *testing.T) {
	testenv.Root(t)
	dir := t.TempDir()
	// The mapper maps only while mapping is set, each file under busy:
	// once the test has cleared mapping and taken busy, no mapping is
	// under way and none starts, however late the mapper runs.
	var mapping atomic.Bool
	var busy sync.Mutex
	stopMapping := func() {
		mapping.Store(false)
		busy.Lock()
		busy.Unlock()
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			busy.Lock()
			if !mapping.Load() {
				busy.Unlock()
				time.Sleep(time.Millisecond)
				continue
			}
			id := make([]byte, 20)
			rand.Read(id)
			path := filepath.Join(dir, fmt.Sprintf("e-%d.so", i))
			b := elftest.Good(id)
			if err := os.WriteFile(path, b, 0o644); err != nil {
				panic(err)
			}
			f, err := os.Open(path)
			if err != nil {
				panic(err)
			}
			if _, err := unix.Mmap(int(f.Fd()), 0, len(b), unix.PROT_READ|unix.PROT_EXEC, unix.MAP_PRIVATE); err != nil {
				panic(err)
			}
			f.Close()
			busy.Unlock()
			time.Sleep(200 * time.Microsecond)
		}
	}()
	defer func() { close(stop); <-done }()
	s := openSession(t, synth.SessionOptions{Unmaps: true})
	tb := synth.NewTable()
	apply := func(rec *synth.Record) {
		if err := tb.Apply(rec); err != nil {
			t.Fatal(err)
		}
	}
	dumpInto(t, s, tb, nil)
	lacked, excused := 0, 0
	// A turn's shortfall is judged with the next turn: the kernel writes
	// the PERF_RECORD_LOST of a drop once the ring has room again, which
	// may be after the turn's Flush.
	var last []string
	lastLossy, lostBefore := false, lostSoFar(s)
	judge := func(lossy bool) {
		if lossy || lastLossy {
			excused += len(last)
		} else {
			lacked += len(last)
			for _, e := range last {
				t.Error(e)
			}
		}
		last = nil
	}
	for i := range 15 {
		mapping.Store(true)
		time.Sleep(20 * time.Millisecond)
		if err := s.Dump(t.Context()); err != nil {
			t.Fatal(err)
		}
		var rec synth.Record
		for rec.Kind != synth.KindDumpEnd {
			if err := s.ReadContext(t.Context(), &rec); err != nil {
				t.Fatal(err)
			}
			apply(&rec)
		}
		stopMapping()
		flushApply(t, s, apply)
		p, _ := tb.Process(uint32(os.Getpid()))
		got, want := tableKeys(p), procTableKeys(t, os.Getpid())
		lossy := lostSoFar(s) != lostBefore
		lostBefore = lostSoFar(s)
		judge(lossy)
		for _, k := range want {
			if !slices.Contains(got, k) {
				last = append(last, fmt.Sprintf("dump %d: the table lacks %s", i, k))
			}
		}
		lastLossy = lossy
	}
	judge(lostSoFar(s) != lostBefore)
	if dups := s.Stats().Duplicates; dups == 0 {
		t.Skip("no dump met a mapping made during it (0 duplicates): the case was not tested on this host")
	}
	t.Logf("%d synthesized records dropped as duplicates; the table lacked %d mappings, %d more in turns that lost records",
		s.Stats().Duplicates, lacked, excused)
}
