package bpfmethod

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/config"
	"github.com/synth-dev/synth/internal/testenv"
)

// With BPF statistics on, a dump reports how long its programs ran: some
// time, and no more than the dump took. With them off, none.
func TestProgramTime(t *testing.T) {
	testenv.Root(t)
	b, err := New(config.Resolved{Options: config.Options{NoKernel: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	discard := func([]byte) error { return nil }
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	if err != nil {
		t.Fatalf("enable BPF statistics: %v", err)
	}
	st, err := b.Dump(context.Background(), discard)
	stats.Close()
	if err != nil {
		t.Fatal(err)
	}
	if st.ProgramTime <= 0 || st.ProgramTime > st.Elapsed {
		t.Errorf("programs ran %v of a %v dump", st.ProgramTime, st.Elapsed)
	}
	if on, _ := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled"); strings.TrimSpace(string(on)) != "0" {
		return // someone else keeps statistics on
	}
	if st, err = b.Dump(context.Background(), discard); err != nil {
		t.Fatal(err)
	}
	if st.ProgramTime != 0 {
		t.Errorf("statistics off: programs ran %v", st.ProgramTime)
	}
}
