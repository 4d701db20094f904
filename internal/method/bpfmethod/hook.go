package bpfmethod

import "github.com/synth-dev/synth/perfdata"

// HookPoint is a point of a dump at which a test's hook runs (see
// SetExitHook).
type HookPoint int

const (
	// HookRead is when the first synthesized record of the process
	// comes out of the rings: the walk's first pass has read it, and
	// goes on with the processes after it.
	HookRead HookPoint = iota
	// HookPassed is after the walk's first pass over the tasks, before
	// the task_vma iterator's pass (Options.Walk iter) or the maple
	// walk's later chunks and fallback.
	HookPassed
	// HookWalked is after the whole walk, before the build IDs' reads
	// and the writing of the held records.
	HookWalked
)

// exitHook is a test's hook into the dumps (SetExitHook).
type exitHook struct {
	pid uint32
	at  HookPoint
	fn  func()
	ran bool // in the dump under way
}

// SetExitHook has fn run once in each dump, at point at (HookRead: at
// the dump's first record of process pid; the other points are the
// dump's own, whatever it read), and the dump go on when it returns; fn
// nil removes it. It is
// for the tests of the packages above (a Session's, a Table's), which
// cannot reach an unexported name here, that make a process exit at a
// chosen point of a dump, after the dump read it: a dump that races with
// a process's exit must give a Table the same answer wherever the exit
// falls. Nothing else sets it. fn runs on the goroutine that handles
// the drained records (HookRead: see pipeline) or on the one that walks
// (the others); the dump waits for it.
func (b *BPF) SetExitHook(pid uint32, at HookPoint, fn func()) {
	if fn == nil {
		b.walk.hook = nil
		return
	}
	b.walk.hook = &exitHook{pid: pid, at: at, fn: fn}
}

// reached runs the hook if this is its point, once a dump.
func (h *exitHook) reached(at HookPoint) {
	if h == nil || h.ran || h.at != at {
		return
	}
	h.ran = true
	h.fn()
}

// delivered runs a HookRead hook at the first record of its process.
func (h *exitHook) delivered(raw []byte) {
	if h != nil && h.at == HookRead && !h.ran && perfdata.RecordView(raw).Pid() == h.pid {
		h.reached(HookRead)
	}
}

// begin readies the hook for a new dump.
func (h *exitHook) begin() {
	if h != nil {
		h.ran = false
	}
}
