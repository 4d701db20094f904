package synth_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/synth-dev/synth/synth"
)

// Profile this process for a third of a second, as synth record -p
// does: its mappings as they were at the start, then cpu-clock samples
// and the live records, into one perf.data.
func ExampleProfile() {
	f, err := os.CreateTemp("", "perf.data")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.Remove(f.Name())
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	go func() { // something to sample
		for ctx.Err() == nil {
		}
	}()
	st, err := synth.Profile(ctx, synth.ProfileOptions{Options: synth.Options{Target: synth.Target{Pids: []int{os.Getpid()}}}, Freq: 999},
		f, synth.WriteOptions{})
	if err != nil { // nil when ctx ends: an error is why it ended early
		fmt.Println(err)
		return
	}
	fmt.Println("files:", st.Files, "mappings:", st.Dump.Mappings > 0)
	// Output: files: 1 mappings: true
}

// Add the host's state to what an unmodified perf record writes to its
// pipe, as synth inject does: perf records without synthesizing, and
// the dump goes into its stream after perf's own initial records.
func ExampleInject() {
	perf := exec.Command("perf", "record", "-q", "-k", "CLOCK_MONOTONIC", "--synth=no",
		"-e", "cpu-clock", "-o", "-", "--", "true")
	in, err := perf.StdoutPipe()
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := perf.Start(); err != nil {
		fmt.Println(err) // perf is not installed
		return
	}
	f, err := os.CreateTemp("", "perf.data")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.Remove(f.Name())
	defer f.Close()
	st, err := synth.Inject(context.Background(), in, f, synth.InjectOptions{})
	if werr := perf.Wait(); err == nil {
		err = werr
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("synthesized records written:", st.Written > 0, "perf's records kept:", st.Perf > 0)
	// Output: synthesized records written: true perf's records kept: true
}
