package synth_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/synth"
)

// life is when a churned process was whole and when it was gone.
type life struct {
	ready, gone time.Time // gone zero: alive
}

// 1,000 dumps or more with the smallest rings while processes that take
// several chunks to walk start and exit in a loop, 40 of them at least
// (at most 30 s; a slow host does fewer): no dump has a record of a process that was gone before
// it began, and every process it has mappings of has all of them, or
// none (one exiting meanwhile).
func TestWalkUnderProcessChurn(t *testing.T) {
	eachWalk(t, walkUnderChurn)
}

// walkUnderChurn is TestWalkUnderProcessChurn with one walk. The iterator
// lets go of the mmap lock between reads: a process that exits between
// two is dropped, not written in part.
func walkUnderChurn(t *testing.T, walk synth.Walk) {
	// Enough VMAs for several chunks of the smallest rings, whose size
	// (and so the chunk's) grows with the page size.
	const dumps = 1000
	vmaPages := 2000 * max(1, os.Getpagesize()/4096)
	var (
		mu    sync.Mutex
		lives = map[int]*life{}
		quit  = make(chan struct{})
		done  = make(chan struct{})
	)
	go func() { // two processes alive at a time, each for 20-150 ms
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-quit:
				return
			default:
			}
			p, err := testproc.Start(testproc.Spec{Dir: t.TempDir(), ManyVMAs: vmaPages})
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			lives[p.Pid] = &life{ready: time.Now()}
			mu.Unlock()
			time.AfterFunc(time.Duration(20+i*37%130)*time.Millisecond, func() {
				p.Stop()
				mu.Lock()
				lives[p.Pid].gone = time.Now()
				mu.Unlock()
			})
		}
	}()
	defer func() { close(quit); <-done }()
	b, err := synth.NewBPF(synth.Options{NoKernel: true, NoBuildID: true, RingPages: synth.MinRingPages, Walk: walk})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	resumed, invalid, n := 0, 0, 0
	churned := func() int { mu.Lock(); defer mu.Unlock(); return len(lives) }
	for deadline := time.Now().Add(30 * time.Second); (n < dumps || churned() < 40) && time.Now().Before(deadline) && !t.Failed(); n++ {
		d := &dumped{comms: map[uint32]string{}, forks: map[uint32]uint32{}}
		start := time.Now()
		d.stats, err = b.Dump(context.Background(), func(rec []byte) error {
			return d.add(rec, synth.DefaultSampleType)
		})
		if err != nil {
			t.Fatal(err)
		}
		resumed, invalid = resumed+d.stats.Resumed, invalid+d.stats.WalksInvalid
		checkChurned(t, d, start, &mu, lives, vmaPages/2)
	}
	t.Logf("%d dumps: %d chunks resumed, %d walks sent to the fallback; %d processes churned", n, resumed, invalid, churned())
	if n < dumps { // a slow host: what it did is checked all the same
		t.Logf("only %d dumps in 30 s on this host, not %d", n, dumps)
	}
	if resumed == 0 && walk == synth.WalkMaple {
		t.Error("no walk took more than one chunk: the test does not test chunks")
	}
}

// checkChurned checks one dump against the lives of the churned processes.
func checkChurned(t *testing.T, d *dumped, start time.Time, mu *sync.Mutex, lives map[int]*life, full int) {
	t.Helper()
	counts := map[uint32]int{}
	for _, k := range d.maps {
		if strings.HasSuffix(k.path, "/many-vmas.bin") {
			counts[k.pid]++
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for pid, n := range counts {
		l := lives[int(pid)]
		switch {
		case l == nil:
			continue // a churned process not yet whole: Start had not returned
		case !l.gone.IsZero() && l.gone.Before(start):
			t.Errorf("pid %d: %d mappings, but it was gone %v before the dump", pid, n, start.Sub(l.gone))
		case l.ready.Before(start) && n != full:
			t.Errorf("pid %d: %d of its %d mappings", pid, n, full)
		}
	}
}
