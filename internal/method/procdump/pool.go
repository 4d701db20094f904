package procdump

import (
	"context"
	"sync"
)

// runOrdered calls work(st, i) for each i in [0, n) on workers workers,
// each with its own state from newState, and hands the results to write
// in order of i. The caller's goroutine is one of the workers, so one
// worker starts no goroutine.
//
// There is no writer goroutine: the worker that finishes the result next
// in order writes it, and the ones after it that are ready. A writer
// goroutine would be woken for each result, onto the P of a worker
// about to enter a read(2) of /proc, and with every P busy the runtime
// then moves the reading thread off its P at the next monitor tick. At
// most 4 results per worker wait to be written. write is never called
// concurrently; after it fails, or ctx ends, no work starts, and
// runOrdered returns that error.
func runOrdered[S, R any](ctx context.Context, n, workers int, newState func() S, work func(S, int) R, write func(R) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	o := &ordered[R]{slots: make([]R, n), ready: make([]bool, n), write: write,
		window: make(chan struct{}, 4*workers), cancel: cancel}
	run := func() {
		st := newState()
		for {
			select {
			case o.window <- struct{}{}:
			case <-ctx.Done():
				return
			}
			if ctx.Err() != nil {
				return // select picks at random when both are ready
			}
			i := o.claim()
			if i >= n {
				return
			}
			o.finish(i, work(st, i))
		}
	}
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(run)
	}
	run()
	wg.Wait()
	if o.err != nil {
		return o.err
	}
	return ctx.Err()
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
