package bpfmethod

import (
	"fmt"
	"slices"

	synthbpf "github.com/synth-dev/synth/bpf"
)

// fault is a failure the package's tests make happen to the maple walk
// of one process (injectFault), to show that each ends in exact records
// or the fallback, never in a silent loss. Each is made in userspace, on
// what the programs left: the object a dump loads carries nothing for
// tests. The resume faults need a process walked in more than one
// chunk.
type fault int

const (
	faultNone        fault = iota
	faultLoseResume        // its resume state is gone before its next chunk
	faultResumeSeq         // a writer ran between its chunks: mm_lock_seq moved on
	faultResumeMM          // its mm was replaced between its chunks
	faultResumePid         // its pid was taken by another process between its chunks
	faultDropWalk          // the record that ends its walk is lost with its batch
	faultWalkInvalid       // its walk did not hold: the record that ends it says so
)

// faultAt is a fault and the process it happens to; the zero value is
// none.
type faultAt struct {
	f   fault
	pid uint32
}

// apply makes a resume fault happen before the chunks of pids run: it
// changes the walk's saved place (struct resume_at, bpf/walk.bpf.h) so
// that the next chunk must refuse it.
func (fa faultAt) apply(objs *objects, pids []int) error {
	switch fa.f {
	case faultLoseResume, faultResumeSeq, faultResumeMM, faultResumePid:
	default:
		return nil
	}
	if !slices.Contains(pids, int(fa.pid)) {
		return nil
	}
	if fa.f == faultLoseResume {
		return objs.Resumes.Delete(fa.pid)
	}
	var v synthbpf.SynthResumeAt
	if err := objs.Resumes.Lookup(fa.pid, &v); err != nil {
		return fmt.Errorf("fault: resume state of %d: %w", fa.pid, err)
	}
	switch fa.f {
	case faultResumeMM:
		v.Mm += 2
	case faultResumePid:
		v.Start += 2
	default:
		v.Seq += 2
	}
	return objs.Resumes.Put(fa.pid, &v)
}

// walkEnd is the status with which the record that ends a walk of
// process pid arrives, given the status the program wrote: the record
// is lost (false), or says that the walk did not hold.
func (fa faultAt) walkEnd(pid, status uint32) (uint32, bool) {
	if fa.pid == 0 || pid != fa.pid || status != walkDone {
		return status, true
	}
	switch fa.f {
	case faultDropWalk:
		return status, false // as if its batch was lost after the chunks before
	case faultWalkInvalid:
		return walkInvalid, true
	}
	return status, true
}
