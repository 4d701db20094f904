package synth_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// churnKey identifies a mapping of a churn file in one generation.
type churnKey struct {
	pid               uint32
	start, len, pgoff uint64
	prot              uint32
	file              string
}

// generation is what a session streamed for one generation.
type generation struct {
	synth *dumped // synthesized records
	seen  map[churnKey][]synth.RecordKind
	live  int
}

// While dumps repeat, processes keep mapping new files, unmapping old
// ones, changing protections, forking, exec'ing and exiting. In every
// generation no churn mapping is reported twice (synthesized and live),
// every mapping of the processes that stay unchanged is synthesized, and
// nothing is lost.
func TestSessionChurn(t *testing.T) {
	const dumps = 20
	stable := []*testproc.Proc{
		testproc.StartT(t, testproc.Spec{DataFile: true, Threads: []string{"stable-a"}}),
		testproc.StartT(t, testproc.Spec{AnonExec: true, ManyVMAs: 50}),
	}
	want := map[int][]mapKey{}
	for _, p := range stable {
		want[p.Pid] = procKeys(t, p.Pid, true)
	}
	dir := t.TempDir()
	for range 4 {
		testproc.StartT(t, testproc.Spec{Dir: dir, Churn: true})
	}
	s := openSession(t, synth.SessionOptions{Options: synth.Options{Data: true}})
	st := s.Attrs()[0].Attr.SampleType
	gens := map[uint64]*generation{}
	genOf := func(g uint64) *generation {
		if gens[g] == nil {
			gens[g] = &generation{synth: newDumped(), seen: map[churnKey][]synth.RecordKind{}}
		}
		return gens[g]
	}
	var dups []int
	var rec synth.Record
	for range dumps {
		if err := s.Dump(context.Background()); err != nil {
			t.Fatal(err)
		}
		for rec.Kind = 0; rec.Kind != synth.KindDumpEnd; {
			if err := s.Read(&rec); err != nil {
				t.Fatal(err)
			}
			collect(t, genOf(rec.Gen), &rec, st)
		}
		dups = append(dups, s.LastDump().Duplicates)
		// A generation's live window runs until the next dump starts.
		// A dump takes about a millisecond: leave the churn time to
		// show in every window, until one of its mappings does (a
		// loaded host may not run the churn for a while).
		gen := rec.Gen
		time.Sleep(5 * time.Millisecond)
		for start := time.Now(); genOf(gen).live == 0 && time.Since(start) < 5*time.Second; {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			err := s.ReadContext(ctx, &rec)
			cancel()
			switch {
			case err == nil:
				collect(t, genOf(rec.Gen), &rec, st)
			case !errors.Is(err, context.DeadlineExceeded):
				t.Fatal(err)
			}
		}
	}
	readFlushed(t, s, func(rec *synth.Record) { collect(t, genOf(rec.Gen), rec, st) })
	// The Go runtime of a stable process may still start a thread, whose
	// first malloc maps an arena (seen on a loaded host): a dump may
	// then match /proc as it is after the dumps instead.
	after := map[int][]mapKey{}
	for _, p := range stable {
		after[p.Pid] = procKeys(t, p.Pid, true)
	}
	for g := uint64(1); g <= dumps; g++ {
		gen := gens[g]
		for k, kinds := range gen.seen {
			if len(kinds) > 1 {
				t.Errorf("gen %d: %s reported %d times: %v", g, k.file, len(kinds), kinds)
			}
		}
		for pid, keys := range want {
			if diff := sameMaps(keys, gen.synth.of(pid)); len(diff) > 0 && len(sameMaps(after[pid], gen.synth.of(pid))) > 0 {
				t.Errorf("gen %d: stable pid %d differs from /proc:\n%s", g, pid, strings.Join(diff[:min(10, len(diff))], "\n"))
			}
		}
		if gen.live == 0 {
			t.Errorf("gen %d: no live churn records", g)
		}
	}
	stats := s.Stats()
	if stats.Lost != 0 {
		t.Errorf("%d records lost", stats.Lost)
	}
	if stats.Duplicates == 0 {
		t.Error("no synthesized record was dropped as a duplicate: the churn never raced a dump")
	}
	t.Logf("duplicates dropped per dump: %v; %+v", dups, stats)
}

func newDumped() *dumped {
	return &dumped{comms: map[uint32]string{}, forks: map[uint32]uint32{}}
}

// collect files a record under its generation.
func collect(t *testing.T, g *generation, rec *synth.Record, st uint64) {
	t.Helper()
	switch rec.Kind {
	case synth.KindSynthesized:
		if err := g.synth.add(rec.Raw, st); err != nil {
			t.Fatal(err)
		}
	case synth.KindLive:
	default:
		return
	}
	if rec.Type() != perfdata.RecordMmap2 {
		return
	}
	m, _, err := perfdata.ParseMmap2(rec.Raw, st)
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimSuffix(m.Filename, " (deleted)")
	if !strings.HasPrefix(filepath.Base(name), testproc.ChurnPrefix) {
		return
	}
	if rec.Kind == synth.KindLive {
		g.live++
	}
	k := churnKey{m.Pid, m.Addr, m.Len, m.Pgoff, m.Prot, name}
	g.seen[k] = append(g.seen[k], rec.Kind)
}

func (k churnKey) String() string {
	return fmt.Sprintf("%d %x+%x@%x %d %s", k.pid, k.start, k.len, k.pgoff, k.prot, k.file)
}
