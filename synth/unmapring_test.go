package synth_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/synth"
)

// stormSession opens a session of every process that reports unmaps,
// with the smallest rings, and starts a storm of unmaps beside it: two
// threads that map, mprotect and unmap in a loop, each call an unmap
// record. It returns once the stream has carried one of the storm's.
func stormSession(t *testing.T) (*synth.Session, uint32) {
	t.Helper()
	s := openSession(t, synth.SessionOptions{Options: synth.Options{RingPages: synth.MinRingPages}, Unmaps: true})
	testenv.Option(t, s.UnmapsErr() == nil, "syscall tracepoints ("+errString(s.UnmapsErr())+")")
	storm := uint32(testproc.StartStorm(t, "map", "2"))
	ctx, cancel := context.WithTimeout(t.Context(), stuckBound)
	defer cancel()
	var rec synth.Record
	for !stormUnmap(&rec, storm) {
		if err := s.ReadContext(ctx, &rec); err != nil {
			t.Fatalf("waiting for the storm's first unmap: %v", err)
		}
	}
	return s, storm
}

// stormUnmap reports whether rec is an unmap of process storm.
func stormUnmap(rec *synth.Record, storm uint32) bool {
	u, ok := rec.Unmapped()
	return ok && u.Pid == storm
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// The unmap programs write into rings of their own: a storm of unmaps
// beside a session costs its dumps no record, and every dump reads this
// process, so the table keeps it. They once wrote into the dumps' rings,
// whose pacing does not count them: the dumps lost tens of thousands of
// records, and a dump that lost this process's removed it from the
// table.
func TestUnmapStormCostsDumpsNothing(t *testing.T) {
	s, storm := stormSession(t)
	tb := synth.NewTable()
	const dumps = 10
	var stormUnmaps int
	for i := range dumps {
		dumpInto(t, s, tb, func(rec *synth.Record) bool {
			if stormUnmap(rec, storm) {
				stormUnmaps++
			}
			return false
		})
		if lost := s.LastDump().Lost; lost != 0 {
			t.Errorf("dump %d lost %d records beside the unmap storm", i, lost)
		}
		for _, pid := range []uint32{uint32(os.Getpid()), storm} {
			if _, ok := tb.Process(pid); !ok {
				t.Errorf("after dump %d the table has no process %d", i, pid)
			}
		}
	}
	st := s.Stats()
	if stormUnmaps == 0 {
		t.Fatal("the stream carried no unmap of the storm during the dumps: nothing was tested")
	}
	if st.Lost != 0 {
		t.Errorf("the session counts %d records lost by its dumps", st.Lost)
	}
	t.Logf("%d dumps: %d records lost by the dumps, %d unmaps (%d of the storm), %d unmaps missed, %d live records lost",
		dumps, st.Lost, st.Unmaps, stormUnmaps, st.UnmapsMissed, st.LiveLost)
}

// An unmap record a full ring refuses is an unmap missed
// (SessionStats.UnmapsMissed, and UnmapsLost says how many of them a
// full ring cost), not a record the dumps lost: nobody reads the
// session while the storm runs 0.3 s of CPU, some ten thousand unmap
// calls on any host, where a ring of MinRingPages holds a few hundred
// records.
func TestUnmapRingLossIsUnmapsMissed(t *testing.T) {
	s, storm := stormSession(t)
	stormRuns(t, storm, 30)
	// The kernel writes its count of what a full ring refused with the
	// next record that fits, after a drain has made room: flush until
	// the stream has it, or the dumps' count has it instead, the storm
	// running a tick of CPU between two flushes.
	for st := s.Stats(); st.UnmapsLost == 0 && st.Lost == 0; st = s.Stats() {
		flushApply(t, s, func(*synth.Record) {})
		stormRuns(t, storm, 1)
	}
	st := s.Stats()
	if st.UnmapsLost == 0 || st.UnmapsMissed < st.UnmapsLost {
		t.Errorf("a full unmap ring: %d unmap records lost, %d unmaps missed; want some lost, each missed", st.UnmapsLost, st.UnmapsMissed)
	}
	if st.Lost != 0 {
		t.Errorf("a full unmap ring counts %d records lost by the dumps (unmaps lost: %d)", st.Lost, st.UnmapsLost)
	}
	// The session goes on: a dump after the loss reads this process.
	tb := synth.NewTable()
	dumpInto(t, s, tb, nil)
	if _, ok := tb.Process(uint32(os.Getpid())); !ok {
		t.Error("a dump after the loss did not read this process")
	}
	if lost := s.LastDump().Lost; lost != 0 {
		t.Errorf("the dump after the loss lost %d records", lost)
	}
	t.Logf("%d unmaps, %d missed, %d of them lost to a full ring; %d records lost by the dumps",
		st.Unmaps, st.UnmapsMissed, st.UnmapsLost, st.Lost)
}

// stormRuns waits until process storm has run ticks clock ticks of CPU
// more.
func stormRuns(t *testing.T, storm uint32, ticks int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), stuckBound)
	defer cancel()
	for start := testproc.CPUTicks(int(storm)); testproc.CPUTicks(int(storm))-start < ticks; {
		select {
		case <-ctx.Done():
			t.Fatalf("the storm ran no %d ticks of CPU: %v", ticks, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
