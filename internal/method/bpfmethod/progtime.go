package bpfmethod

import (
	"time"

	"github.com/cilium/ebpf"
)

// progTime sums the run time the kernel has counted for progs: 0 unless
// BPF statistics are on. Each program costs one bpf(2) call.
func progTime(progs ...*ebpf.Program) time.Duration {
	var sum time.Duration
	for _, p := range progs {
		if p == nil {
			continue
		}
		if st, err := p.Stats(); err == nil {
			sum += st.Runtime
		}
	}
	return sum
}
