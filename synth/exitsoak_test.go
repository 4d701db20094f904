package synth_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os/exec"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

var (
	soakExitsFor = flag.Duration("soak-exits", 0, "how long TestSoakExits runs (0: it is skipped)")
	soakExitsSh  = flag.String("soak-exits-sh", "while :; do sleep 0.3 & /bin/true; sleep 0.01; done",
		"the shell loop TestSoakExits runs beside the agent")
)

// An agent's loop, for -soak-exits (make soak-exits): a Session of the
// whole host with Unmaps dumps about every 350 ms (a turn of the live
// stream, then a Flush, then the next dump) while a shell starts short
// processes, and between turns compares its Table with /proc (as
// TestSoak does). It counts the EXITs of processes that their generation's
// dump read which come Superseded, and fails if there are any but of a
// pid a later dump read again (a new process took it). Issue 56: the
// records of a turn left after its Flush were judged against the next
// dump, which had not read the process.
func TestSoakExits(t *testing.T) {
	if *soakExitsFor == 0 {
		t.Skip("-soak-exits not set")
	}
	testenv.Root(t)
	sh := exec.Command("sh", "-c", *soakExitsSh)
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { sh.Process.Kill(); sh.Wait() }()
	s, err := synth.NewSession(synth.SessionOptions{Unmaps: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tb := synth.NewTable()
	// readBy holds, for each generation, the processes its dump read.
	readBy := map[uint64]map[uint32]bool{}
	var exits, readExits, superseded, reused int
	exitOf := map[uint32]string{} // for the log
	count := func(rec *synth.Record) {
		v := perfdata.RecordView(rec.Raw)
		if rec.Kind == synth.KindSynthesized {
			if readBy[rec.Gen] == nil {
				readBy[rec.Gen] = map[uint32]bool{}
			}
			readBy[rec.Gen][v.Pid()] = true
		}
		if rec.Kind != synth.KindLive || rec.Type() != perfdata.RecordExit || v.Pid() != v.Tid() {
			return
		}
		exits++
		exitOf[v.Pid()] = fmt.Sprintf("gen %d, time %d, superseded %v", rec.Gen, rec.Time, rec.Superseded)
		if !readBy[rec.Gen][v.Pid()] {
			return
		}
		readExits++
		if !rec.Superseded {
			return
		}
		superseded++
		at, again := s.ReadAt(v.Pid())
		if again && at > rec.Time {
			reused++ // the last dump read a process that took the pid since
			return
		}
		t.Errorf("gen %d: the EXIT of pid %d, which its dump read, is Superseded (time %d; the last dump read the pid: %v)",
			rec.Gen, v.Pid(), rec.Time, again)
	}
	apply := func(rec *synth.Record) {
		count(rec)
		if err := tb.Apply(rec); err != nil {
			t.Fatal(err)
		}
	}
	// Processes the table held after they exited, the stream settled;
	// excused those of turns that lost records.
	kept, excused := 0, 0
	lostBefore, lastLossy := lostSoFar(s), false
	const turn = 350 * time.Millisecond
	start := time.Now()
	dumps := 0
	for time.Since(start) < *soakExitsFor {
		// A dump's records are bounded by the ctx given to Dump.
		dctx, dcancel := context.WithTimeout(t.Context(), turn+10*time.Second)
		if err := s.Dump(dctx); err != nil {
			t.Fatal(err)
		}
		dumps++
		flushed := false
		deadline := time.Now().Add(turn)
		for {
			var rec synth.Record
			ctx, cancel := context.WithDeadline(dctx, deadline)
			err := s.ReadContext(ctx, &rec)
			cancel()
			if errors.Is(err, synth.ErrFlushed) {
				break
			}
			if errors.Is(err, context.DeadlineExceeded) && !flushed {
				flushed, deadline = true, time.Now().Add(10*time.Second)
				if err := s.Flush(); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			apply(&rec)
		}
		dcancel()
		// Between turns the agent looks at what its table holds, as
		// TestSoak does: meanwhile processes exit, their EXITs left for
		// after the next dump.
		gone, zombies := keptAfterExit(t, s, tb, apply)
		// A turn that lost records, or the one after it, may have lost
		// the EXITs (see exitedKept): its processes are excused.
		lost := lostSoFar(s)
		lossy := lost != lostBefore
		lostBefore = lost
		for _, pid := range append(gone, zombies...) {
			if lossy || lastLossy {
				excused++
				continue
			}
			kept++
			if kept <= 10 {
				p, _ := tb.Process(pid)
				t.Logf("gen %d: the table holds pid %d %+v after it exited (its EXIT: %s; records lost so far: %d)", dumps, pid, p, exitOf[pid], lostSoFar(s))
			}
		}
		lastLossy = lossy
		delete(readBy, uint64(dumps)-3) // the generations no record can be of now
	}
	t.Logf("%v, %d dumps: %d EXITs of main threads, %d of processes their generation's dump read; of those, %d Superseded (%d of a pid a later dump read again); "+
		"processes the table held after they exited, once the stream settled: %d (and %d in turns that lost records, of %d lost)",
		time.Since(start).Round(time.Second), dumps, exits, readExits, superseded, reused, kept, excused, lostSoFar(s))
}
