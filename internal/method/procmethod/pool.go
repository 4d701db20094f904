package procmethod

import (
	"context"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// runOrdered calls work(st, w, i) for each i in [0, n) on workers workers,
// each with its own state from newState and w, its worker (see
// worker.pause), and hands the results to write
// in order of i. Without a bound, the caller's goroutine is one of the
// workers, so one worker starts no goroutine.
//
// There is no writer goroutine: the worker that finishes the result next
// in order writes it, and the ones after it that are ready. A writer
// goroutine would be woken for each result, onto the P of a worker
// about to enter a read(2) of /proc, and with every P busy the runtime
// then moves the reading thread off its P at the next monitor tick. At
// most 4 results per worker wait to be written. write is never called
// concurrently; after it fails, or ctx ends, no work starts, and
// runOrdered returns that error.
//
// With bound set, work that runs past bound.after is given up (see
// bound).
func runOrdered[S, R any](ctx context.Context, n, workers int, newState func() S, work func(S, *worker, int) R,
	write func(R) error, bound *bound[R]) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	o := &ordered[R]{slots: make([]R, n), ready: make([]bool, n), write: write,
		window: make(chan struct{}, 4*workers), cancel: cancel}
	var wg sync.WaitGroup
	// run is one worker; it reports whether it ended by itself (not
	// given up on by the watchdog, which counts it out of wg).
	run := func(w *worker) bool {
		st := newState()
		for {
			select {
			case o.window <- struct{}{}:
			case <-ctx.Done():
				return true
			}
			if ctx.Err() != nil {
				return true // select picks at random when both are ready
			}
			i := o.claim()
			if i >= n {
				return true
			}
			w.start(i)
			r := work(st, w, i)
			if !w.end(i) {
				return false // the watchdog filled slot i
			}
			o.finish(i, r)
		}
	}
	if bound == nil {
		for range workers - 1 {
			wg.Go(func() { run(&worker{}) })
		}
		run(&worker{})
		wg.Wait()
	} else {
		bound.watch(&wg, workers, run, o.finish)
	}
	if o.err != nil {
		return o.err
	}
	return ctx.Err()
}

// bound gives up work that runs past after: a read of /proc/PID/maps
// that waits for a process's mmap lock, held by a stuck writer. The
// worker is left to its read; the slot gets late(i) instead of its
// result, and a new worker takes its place. When its read returns, the
// worker drops its result and ends.
type bound[R any] struct {
	after time.Duration
	late  func(i int) R
}

// worker is where a worker is: the work it runs, since when.
type worker struct {
	item  atomic.Int64 // i, or -1 between items, -2 once given up on
	since atomic.Int64 // UnixNano
}

func (w *worker) start(i int) {
	w.since.Store(time.Now().UnixNano())
	w.item.Store(int64(i))
}

// pause stops the worker's clock while its work waits for something
// bounded otherwise (a build ID, by the dump's deadline); resume starts
// it again from zero. Both do nothing to a nil worker.
func (w *worker) pause() {
	if w != nil {
		w.since.Store(math.MaxInt64)
	}
}

func (w *worker) resume() {
	if w != nil {
		w.since.Store(time.Now().UnixNano())
	}
}

// end reports whether item i is still the worker's to finish.
func (w *worker) end(i int) bool { return w.item.CompareAndSwap(int64(i), -1) }

// watch runs workers workers, and gives up on the work of any that runs
// past b.after, until all have ended.
func (b *bound[R]) watch(wg *sync.WaitGroup, workers int, run func(*worker) bool, finish func(int, R)) {
	var ws []*worker
	spawn := func() {
		w := &worker{}
		w.item.Store(-1)
		ws = append(ws, w)
		wg.Add(1)
		go func() {
			if run(w) {
				wg.Done()
			}
		}()
	}
	for range workers {
		spawn()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	tick := time.NewTicker(max(b.after/4, time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case now := <-tick.C:
			for _, w := range ws {
				i := w.item.Load()
				if i < 0 || now.UnixNano()-w.since.Load() < int64(b.after) || !w.item.CompareAndSwap(i, -2) {
					continue
				}
				finish(int(i), b.late(int(i)))
				spawn() // before the Done: wg stays above 0
				wg.Done()
			}
			ws = slices.DeleteFunc(ws, func(w *worker) bool { return w.item.Load() == -2 })
		}
	}
}

// ordered is what the workers of runOrdered share: the results not yet
// written, and which one is next.
type ordered[R any] struct {
	mu      sync.Mutex
	claimed int    // work handed out
	slots   []R    // results waiting for the ones before them
	ready   []bool // which slots hold a result
	next    int    // the result to write next
	writing bool   // a worker is writing; the others leave it theirs
	err     error  // why writing stopped
	write   func(R) error
	window  chan struct{} // a token per result claimed and not written
	cancel  func()
}

func (o *ordered[R]) claim() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	i := o.claimed
	o.claimed++
	return i
}

// finish files result i, and writes what is next in order unless a worker
// is writing already: that one will find it.
func (o *ordered[R]) finish(i int, r R) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.slots[i], o.ready[i] = r, true
	if o.writing || o.err != nil {
		return
	}
	o.writing = true
	for o.next < len(o.slots) && o.ready[o.next] {
		r := o.slots[o.next]
		var zero R
		o.slots[o.next] = zero
		o.next++
		o.mu.Unlock()
		err := o.write(r)
		<-o.window
		o.mu.Lock()
		if err != nil {
			o.err = err
			o.cancel()
			break
		}
	}
	o.writing = false
}
