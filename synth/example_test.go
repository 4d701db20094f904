package synth_test

import (
	"context"
	"fmt"
	"os"

	"github.com/synth-dev/synth/synth"
)

// Dump the executable mappings of this process into a perf.data file that
// `perf script --show-mmap-events` reads. It needs CAP_BPF and
// CAP_PERFMON (the tests run as root).
func Example() {
	opts := synth.Options{Pids: []int{os.Getpid()}}
	b, err := synth.NewBPF(opts)
	if err != nil {
		fmt.Println(err) // e.g. missing CAP_BPF
		return
	}
	defer b.Close()
	f, err := os.CreateTemp("", "perf.data")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.Remove(f.Name())
	defer f.Close()
	st, err := synth.WritePerfData(context.Background(), b, opts, f, synth.WriteOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(st.Mappings > 0, st.Lost)
	// Output: true 0
}
