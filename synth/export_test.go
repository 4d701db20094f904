package synth

import "github.com/synth-dev/synth/internal/method/bpfdump"

// FailWalk makes the maple walk of process pid fail its validation, as
// if the process had changed while it was read: tests of the fallback.
func FailWalk(b *BPF, pid int) error { return b.FailWalk(pid) }

// RefuseProgram makes a BPF program fail to load, as on a kernel that
// lacks what it needs, until restore is called.
func RefuseProgram(name string) (restore func()) { return bpfdump.RefuseProgram(name) }

// Faults of the maple walk, for tests (see bpfdump.Fault).
const (
	FaultLoseResume = bpfdump.FaultLoseResume
	FaultResumeSeq  = bpfdump.FaultResumeSeq
	FaultResumeMM   = bpfdump.FaultResumeMM
	FaultResumePid  = bpfdump.FaultResumePid
	FaultDropWalk   = bpfdump.FaultDropWalk
)
