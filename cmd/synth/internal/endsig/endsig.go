// Package endsig catches the signals that end a synth command — SIGINT,
// SIGTERM, SIGHUP and SIGQUIT — for the process's whole life: the first
// cancels the command's context, so that it closes its output off as a
// valid perf.data, and any number after it are swallowed, as perf record
// finishes its file however many it gets. Once the output is complete,
// Exit has the process die of that first signal, as perf record
// re-raises it. Only SIGKILL ends synth at once.
//
// The signals are caught from this package's init, which runs before
// those of the heavier packages synth imports, so that a signal in the
// first moments of a command does not find the default disposition.
// SIGINT and SIGTERM are caught whatever their disposition at start, as
// perf record's signal(SIGINT, sig_handler) catches them: a background
// job of a shell script starts with SIGINT ignored, and must still end
// on kill -INT. SIGHUP started ignored (nohup) stays ignored. SIGQUIT
// is caught even when it started ignored (a background job's): Go's
// runtime installs its handler for it whatever the disposition, and
// tells no one what it was.
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
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
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
		// signal.Ignored reports a start disposition for SIGHUP and
		// SIGINT only: those Go's runtime leaves ignored.
		if s == syscall.SIGINT || s == syscall.SIGTERM || !signal.Ignored(s) {
			caught = append(caught, s)
		}
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

// Exit ends the process once its command is done: it dies of the first
// of Signals it received, as perf record re-raises the signal that
// ended it (a shell shows 130 for SIGINT, and a script can tell an
// interrupted run from a finished one), else it exits with code.
func Exit(code int) {
	if s, ok := Received().(syscall.Signal); ok {
		Die(s)
	}
	os.Exit(code)
}

// Die ends the process by sig, with the signal's default action and no
// core dump: a command that ends cleanly has nothing to debug, and
// SIGQUIT's default action would dump one.
func Die(sig syscall.Signal) {
	unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	setDefault(sig)
	var set unix.Sigset_t
	set.Val[(sig-1)/64] = 1 << ((sig - 1) % 64)
	unix.PthreadSigmask(unix.SIG_UNBLOCK, &set, nil)
	syscall.Kill(os.Getpid(), sig)
	// The signal may go to another of the process's threads: give it
	// the moment it takes. A signal whose default is to be ignored
	// leaves the shell's status.
	time.Sleep(time.Second)
	os.Exit(128 + int(sig))
}

// sigaction is the kernel's struct sigaction (handler, flags, restorer,
// mask on amd64 and arm64) for SIG_DFL: all zero.
type sigaction struct {
	handler, flags, restorer uintptr
	mask                     uint64
}

// setDefault sets sig's disposition to SIG_DFL behind Go's runtime, whose
// own handler does not die of every signal (SIGQUIT prints the
// goroutines; a signal ignored at start is forwarded to SIG_IGN).
func setDefault(sig syscall.Signal) {
	var sa sigaction
	unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&sa)), 0, unsafe.Sizeof(sa.mask), 0, 0)
}
