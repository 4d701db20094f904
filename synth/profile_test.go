package synth_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// spinner starts a shell script that spins on a CPU until the test
// ends, in a process group of its own that ends with it.
func spinner(t *testing.T, script string, args ...string) int {
	t.Helper()
	cmd := exec.Command("sh", append([]string{"-c", script}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); cmd.Wait() })
	return cmd.Process.Pid
}

// profile runs a profile into a file until enough says the targets have
// run long enough to be sampled (it is asked from the start of the
// sampling on), and counts its samples by process. The samples a
// process gets are bound to the CPU time it uses (cpu-clock), not to the
// time the profile lasts: on a loaded host a spinner may run a fraction
// of the time.
func profile(t *testing.T, opts synth.ProfileOptions, enough func() bool) (synth.ProfileStats, map[uint32]int) {
	t.Helper()
	testenv.Root(t)
	path := filepath.Join(t.TempDir(), "perf.data")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sampling := make(chan struct{})
	opts.Sampling = func() { close(sampling) }
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		// Far longer than the targets take to run a second of CPU on a
		// loaded host: only a target that never runs fails by it.
		bound := time.After(2 * time.Minute)
		select {
		case <-sampling:
		case <-ctx.Done():
			return
		case <-bound:
			t.Error("the sampling did not start in 2 minutes")
			cancel()
			return
		}
		for !enough() {
			select {
			case <-ctx.Done():
				return
			case <-bound:
				t.Error("the targets did not run long enough in 2 minutes")
				cancel()
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
		cancel()
	}()
	st, err := synth.Profile(ctx, opts, f, synth.WriteOptions{})
	cancel()
	<-ran
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	fi, _ := f.Stat()
	rd, err := perfdata.NewReader(f, fi.Size())
	if err != nil {
		t.Fatal(err)
	}
	pids := map[uint32]int{}
	for {
		rec, err := rd.Next()
		if err == io.EOF {
			return st, pids
		}
		if err != nil {
			t.Fatal(err)
		}
		// The sampler's layout: identifier, ip, then pid and tid.
		if rec.Type == perfdata.RecordSample && len(rec.Data) >= 32 {
			pids[binary.NativeEndian.Uint32(rec.Data[24:])]++
		}
	}
}

// A profile of some processes opens its sampler on their tasks, as perf
// record -p does: it samples them, and their children, but no other
// task is interrupted, so none has a sample to drop. One of some threads
// (perf record -t) samples these threads only, and not their children.
func TestProfileSamplesTargetOnly(t *testing.T) {
	// The target forks a spinning child once the profile has started.
	goFile := filepath.Join(t.TempDir(), "go")
	target := spinner(t, `while [ ! -e "$0" ]; do sleep 0.05; done; while :; do :; done & while :; do :; done`, goFile)
	other := spinner(t, "while :; do :; done")
	started := func() {
		if err := os.WriteFile(goFile, nil, 0o600); err != nil {
			t.Error(err)
		}
	}
	for _, tc := range []struct {
		name string
		opts synth.ProfileOptions
	}{
		{"pids", synth.ProfileOptions{Options: synth.Options{Target: synth.Target{Pids: []int{target}}}, Freq: 999, Started: started}},
		{"tids", synth.ProfileOptions{Options: synth.Options{Target: synth.Target{Tids: []int{target}}}, Freq: 999}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The profile lasts until the target has spun 0.5 s of CPU
			// (some 500 samples at 999 Hz) and, for pids, its child
			// 0.2 s, from the first look after the sampling began.
			inherit := tc.opts.Target.Tids == nil
			base := map[int]int{}
			spun := func(pid, ticks int) bool {
				now := testproc.CPUTicks(pid)
				if _, ok := base[pid]; !ok {
					base[pid] = now
				}
				return now-base[pid] >= ticks
			}
			enough := func() bool {
				if !spun(target, 50) {
					return false
				}
				if !inherit {
					return true
				}
				for _, c := range children(target) {
					if spun(c, 20) {
						return true
					}
				}
				return false
			}
			st, pids := profile(t, tc.opts, enough)
			if st.Session.FilteredSamples != 0 || pids[uint32(other)] != 0 {
				t.Errorf("%d samples of other tasks dropped, %d of the other spinner written: they were sampled",
					st.Session.FilteredSamples, pids[uint32(other)])
			}
			if pids[uint32(target)] < 100 {
				t.Errorf("%d samples of the target (%v)", pids[uint32(target)], pids)
			}
			children := len(pids) - 1
			if pids[uint32(target)] == 0 {
				children++
			}
			if inherit != (children > 0) {
				t.Errorf("samples by process %v: the child is sampled: %v, want %v", pids, children > 0, inherit)
			}
		})
	}
}

// children returns the children of process pid's main thread.
func children(pid int) []int {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", pid, pid))
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			pids = append(pids, n)
		}
	}
	return pids
}
