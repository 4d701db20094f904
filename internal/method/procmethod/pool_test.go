package procmethod

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"
)

// Results come out in order, written one at a time, with at most 4 per
// worker claimed and not yet written, whatever order the work ends in.
func TestRunOrdered(t *testing.T) {
	for _, workers := range []int{1, 2, 5} {
		const n = 300
		var started, written, writing atomic.Int64
		var states atomic.Int64
		var got []int
		work := func(_ int, _ *worker, i int) int {
			if pending := started.Add(1) - written.Load(); pending > int64(4*workers) {
				t.Errorf("workers=%d: %d results pending, want at most %d", workers, pending, 4*workers)
			}
			d := time.Duration(rand.IntN(200)) * time.Microsecond
			if i%50 == 0 {
				d = 5 * time.Millisecond // the others run ahead, to the window's end
			}
			time.Sleep(d)
			return i * 10
		}
		write := func(r int) error {
			if writing.Add(1) != 1 {
				t.Errorf("workers=%d: write called concurrently", workers)
			}
			got = append(got, r)
			written.Add(1)
			writing.Add(-1)
			return nil
		}
		newState := func() int { return int(states.Add(1)) }
		if err := runOrdered(context.Background(), n, workers, newState, work, write, nil); err != nil {
			t.Fatalf("workers=%d: %v", workers, err)
		}
		if len(got) != n {
			t.Fatalf("workers=%d: %d results, want %d", workers, len(got), n)
		}
		for i, r := range got {
			if r != i*10 {
				t.Fatalf("workers=%d: result %d is %d, want %d", workers, i, r, i*10)
			}
		}
		if s := states.Load(); s != int64(workers) {
			t.Errorf("workers=%d: %d states made, want one per worker", workers, s)
		}
	}
}

// A write that fails stops the work: nothing is written after it, little
// more work starts, and its error comes back.
func TestRunOrderedWriteError(t *testing.T) {
	errFull := errors.New("disk full")
	var did atomic.Int64
	var wrote []int
	err := runOrdered(context.Background(), 10000, 3, func() struct{} { return struct{}{} },
		func(_ struct{}, _ *worker, i int) int { did.Add(1); return i },
		func(r int) error {
			if r == 20 {
				return errFull
			}
			wrote = append(wrote, r)
			return nil
		}, nil)
	if !errors.Is(err, errFull) {
		t.Fatalf("err = %v, want %v", err, errFull)
	}
	if len(wrote) != 20 || wrote[19] != 19 {
		t.Errorf("wrote %d results before the failure, want 0..19", len(wrote))
	}
	if d := did.Load(); d > 20+4*3+3 {
		t.Errorf("%d results made after a failure at 20, want at most the window's", d)
	}
}

// A context that ends stops the work, and its error comes back.
func TestRunOrderedCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var wrote atomic.Int64
	err := runOrdered(ctx, 10000, 2, func() int { return 0 },
		func(int, *worker, int) int { return 0 },
		func(int) error {
			if wrote.Add(1) == 50 {
				cancel()
			}
			return nil
		}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if w := wrote.Load(); w >= 10000 {
		t.Errorf("all %d results written after the cancel", w)
	}
}

// Work that blocks past the bound (a read of /proc waiting for a stuck
// mmap lock) is given up: its slot gets the late result, in order, a new
// worker takes its place, and the run ends without waiting for it. The
// worker given up on, when its work returns, writes nothing.
func TestRunOrderedBound(t *testing.T) {
	for _, workers := range []int{1, 2} {
		release := make(chan struct{})
		const n = 40
		var got []int
		var states atomic.Int64
		start := time.Now()
		err := runOrdered(context.Background(), n, workers, func() int { return int(states.Add(1)) },
			func(_ int, w *worker, i int) int {
				if i == 7 || i == 23 {
					<-release
				}
				if i == 30 { // a wait bounded otherwise, past the bound
					w.pause()
					time.Sleep(80 * time.Millisecond)
					w.resume()
				}
				return i
			},
			func(r int) error { got = append(got, r); return nil },
			&bound[int]{after: 50 * time.Millisecond, late: func(i int) int { return -i }})
		took := time.Since(start)
		close(release)
		if err != nil {
			t.Fatal(err)
		}
		if took > 2*time.Second {
			t.Errorf("workers=%d: %v with two items stuck, want about 2x the bound", workers, took)
		}
		for i, r := range got {
			want := i
			if i == 7 || i == 23 {
				want = -i
			}
			if r != want {
				t.Fatalf("workers=%d: result %d is %d, want %d (all: %v)", workers, i, r, want, got)
			}
		}
		if len(got) != n {
			t.Fatalf("workers=%d: %d results, want %d", workers, len(got), n)
		}
		if s := states.Load(); s != int64(workers+2) {
			t.Errorf("workers=%d: %d states made, want %d: one per worker and per one given up on", workers, s, workers+2)
		}
		time.Sleep(10 * time.Millisecond) // the two given up on end, and must write nothing
		if len(got) != n {
			t.Errorf("workers=%d: %d results after the stuck work returned, want %d", workers, len(got), n)
		}
	}
}
