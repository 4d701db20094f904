package synth_test

import (
	"context"
	"fmt"
	"os"

	"github.com/synth-dev/synth/synth"
)

// Dump the executable mappings of this process into a perf.data file that
// `perf script --show-mmap-events` reads. The BPF method needs CAP_BPF
// and CAP_PERFMON; MethodAuto falls back to reading /proc without them.
func Example() {
	opts := synth.MethodOptions{Options: synth.Options{Target: synth.Target{Pids: []int{os.Getpid()}}}}
	m, err := synth.OpenMethod(synth.MethodAuto, opts)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer m.Close()
	f, err := os.CreateTemp("", "perf.data")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.Remove(f.Name())
	defer f.Close()
	st, err := synth.WritePerfData(context.Background(), m, f, synth.WriteOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(st.Mappings > 0, st.Lost)
	// Output: true 0
}
