package synth_test

import (
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/perfdata"
	"github.com/synth-dev/synth/synth"
)

// A session of a target hears only the target: its side-band is opened
// per thread of the target's processes (inherited), or per CPU for its
// cgroup, so the kernel writes no other process's records into its
// rings. A neighbour that maps and unmaps as fast as it can then takes
// no ring room from the target's records and samples: nothing is
// filtered out after the fact, nothing is dropped, and no record names
// the neighbour. (With a side-band of every task, filtered as it is
// read, the neighbour's records filled the rings: Filtered counted them,
// and LiveLost the target's records and samples they pushed out.)
func TestTargetHearsOnlyItself(t *testing.T) {
	testenv.Root(t)
	storm := testproc.StartStorm(t, "map", "2")
	spin := startShellLoop(t)
	targets := map[string]func(t *testing.T) synth.Target{
		"pid": func(*testing.T) synth.Target { return synth.Target{Pids: []int{spin}} },
		"tid": func(*testing.T) synth.Target { return synth.Target{Tids: []int{spin}} },
		"cgroup": func(t *testing.T) synth.Target {
			return synth.Target{Cgroup: testproc.InCgroup(t, spin)}
		},
	}
	for _, name := range []string{"pid", "tid", "cgroup"} {
		t.Run(name, func(t *testing.T) {
			target := targets[name](t)
			s := openSession(t, synth.SessionOptions{Options: synth.Options{Target: target},
				Sample: &synth.SampleOptions{Freq: 999}})
			if err := s.Dump(context.Background()); err != nil {
				t.Fatal(err)
			}
			readDump(t, s)
			pids := map[uint32]int{}
			ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
			defer cancel()
			var rec synth.Record
			for {
				err := s.ReadContext(ctx, &rec)
				if errors.Is(err, context.DeadlineExceeded) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if rec.Kind == synth.KindSample || rec.Type() == perfdata.RecordMmap2 {
					pids[perfdata.RecordView(rec.Raw).Pid()]++
				}
			}
			st := s.Stats()
			if st.Filtered != 0 || st.LiveLost != 0 || pids[uint32(storm)] != 0 {
				t.Errorf("the neighbour reached the rings: %d records filtered, %d dropped by the kernel, %d of the neighbour's read",
					st.Filtered, st.LiveLost, pids[uint32(storm)])
			}
			if st.Samples == 0 {
				t.Errorf("no sample of the target in 700 ms: stats %+v", st)
			}
			t.Logf("%d samples, %d live records, %d filtered, %d dropped", st.Samples, st.Live, st.Filtered, st.LiveLost)
		})
	}
}

// startShellLoop starts a busy loop that maps nothing, until the test
// ends, and returns its pid.
func startShellLoop(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd.Process.Pid
}
