// Package endsig catches the signals that end a synth command — SIGINT,
// SIGTERM, SIGHUP and SIGQUIT — for the process's whole life: the first
// cancels the command's context, so that it closes its output off as a
// valid perf.data, and any number after it are swallowed, as perf record
// finishes its file however many it gets. Only SIGKILL ends synth at
// once.
//
// The signals are caught from this package's init, which runs before
// those of the heavier packages synth imports, so that a signal in the
// first moments of a command does not find the default disposition. A
// signal the process was started with ignored (nohup, a background job
// of a shell script) stays ignored.
//
// The processes synth re-executes itself as catch them too: the
// workload waiting for its go (as perf record's forked child, whose
// SIGINT handler is perf's, outlives a SIGINT to the group before it
// runs the command; its exec restores the default dispositions) and the
// load processes, which end when their parent does.
package endsig

import (
	"context"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
)

// Signals are the signals that end a command cleanly.
var Signals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

var (
	mu       sync.Mutex
	received os.Signal            // the first signal; nil before it
	cancels  []context.CancelFunc // the contexts it ends
)

func init() {
	var caught []os.Signal
	for _, s := range Signals {
		if !signal.Ignored(s) {
			caught = append(caught, s)
		}
	}
	if len(caught) == 0 {
		return
	}
	// Buffered: signal.Notify drops what does not fit, and a signal
	// dropped is one swallowed, which is all the later ones need.
	c := make(chan os.Signal, 8)
	signal.Notify(c, caught...)
	announce()
	go func() {
		for s := range c {
			mu.Lock()
			if received == nil {
				received = s
				for _, cancel := range cancels {
					cancel()
				}
				cancels = nil
			}
			mu.Unlock()
		}
	}()
}

// ReadyEnv names a descriptor to which init writes one byte once the
// signals are caught, and which it then closes: a test that signals
// synth at chosen moments starts its clock there, not in the moments
// before (which depend on the host's speed, and in which any program
// dies of the signal). The variable is unset, so that the processes
// synth starts do not write to a descriptor of theirs.
const ReadyEnv = "SYNTH_SIGNALS_READY_FD"

func announce() {
	v, ok := os.LookupEnv(ReadyEnv)
	if !ok {
		return
	}
	os.Unsetenv(ReadyEnv)
	if fd, err := strconv.Atoi(v); err == nil && fd > 2 {
		syscall.Write(fd, []byte{1})
		syscall.Close(fd)
	}
}

// Context returns a context that the first of Signals cancels, even one
// received before Context was called.
func Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	mu.Lock()
	defer mu.Unlock()
	if received != nil {
		cancel()
	} else {
		cancels = append(cancels, cancel)
	}
	return ctx, cancel
}

// Received returns the first of Signals received, nil if none was.
func Received() os.Signal {
	mu.Lock()
	defer mu.Unlock()
	return received
}
