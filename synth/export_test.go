package synth

// FailWalk makes the maple walk of process pid fail its validation, as
// if the process had changed while it was read: tests of the fallback.
func FailWalk(b *BPF, pid int) error { return b.FailWalk(pid) }
