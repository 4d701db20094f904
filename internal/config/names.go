package config

// Walks: how the BPF method reads each process's VMAs (Options.Walk).
const (
	// WalkAuto is WalkMaple where the kernel can prove the maple walk,
	// else WalkIter. The default.
	WalkAuto = "auto"
	// WalkMaple reads each process's maple tree under RCU from one task
	// iterator, and validates every walk; a process whose walk does not
	// hold is read again with the iterator. A kernel that cannot prove
	// the walk (see bpf/maple.bpf.h) fails the method.
	WalkMaple = "maple"
	// WalkIter reads every process with the kernel's task_vma iterator,
	// the build IDs of new files read as with WalkMaple.
	WalkIter = "iter"
)
