package bpfmethod

import (
	"fmt"
	"slices"

	synthbpf "github.com/synth-dev/synth/bpf"
)

// Fault is a failure a test makes happen to the maple walk of one
// process, to show that each ends in exact records or the fallback,
// never in a silent loss. The resume faults need a process walked in
// more than one chunk.
type Fault int

// Faults.
const (
	FaultNone       Fault = iota
	FaultLoseResume       // its resume state is gone before its next chunk
	FaultResumeSeq        // a writer ran between its chunks: mm_lock_seq moved on
	FaultResumeMM         // its mm was replaced between its chunks
	FaultDropWalk         // the record that ends its walk is lost with its batch
	FaultResumePid        // its pid was taken by another process between its chunks
)

// faultAt is a Fault and the process it happens to.
type faultAt struct {
	f   Fault
	pid uint32
}

// InjectFault makes f happen to the walk of process pid in the dumps
// that follow; FaultNone ends it.
func (b *BPF) InjectFault(pid int, f Fault) {
	b.fault = faultAt{f, uint32(pid)}
	if b.hold == nil {
		b.hold = newWalkHold()
	}
	b.hold.dropWalk = 0
	if f == FaultDropWalk {
		b.hold.dropWalk = uint32(pid)
	}
}

// apply makes a resume fault happen before the chunks of pids run: it
// changes the walk's saved place (struct resume_at, bpf/walk.bpf.h) so
// that the next chunk must refuse it.
func (fa faultAt) apply(objs *objects, pids []int) error {
	if fa.f == FaultNone || fa.f == FaultDropWalk || !slices.Contains(pids, int(fa.pid)) {
		return nil
	}
	if fa.f == FaultLoseResume {
		return objs.Resumes.Delete(fa.pid)
	}
	var v synthbpf.SynthResumeAt
	if err := objs.Resumes.Lookup(fa.pid, &v); err != nil {
		return fmt.Errorf("fault: resume state of %d: %w", fa.pid, err)
	}
	switch fa.f {
	case FaultResumeMM:
		v.Mm += 2
	case FaultResumePid:
		v.Start += 2
	default:
		v.Seq += 2
	}
	return objs.Resumes.Put(fa.pid, &v)
}
