package synth_test

import (
	"path/filepath"
	"testing"

	"github.com/synth-dev/synth/internal/perftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
	"github.com/synth-dev/synth/synth"
)

// Each method writes a perf.data perf reads without a warning, with the
// test process's mappings exactly as /proc shows them.
func TestMethodsPerf(t *testing.T) {
	testenv.Root(t)
	testenv.Perf(t)
	p := testproc.StartT(t, everything)
	for _, method := range procMethods(t) {
		file := filepath.Join(t.TempDir(), "perf.data")
		st := writeDump(t, file, method, synth.MethodOptions{Options: synth.Options{NoBuildID: true, Data: true}, Threads: 2})
		if st.Method != method {
			t.Errorf("stats say method %q, want %q", st.Method, method)
		}
		sr := perftest.Run(t, perftest.Command(t, "script", "--show-mmap-events", "--show-task-events", "-i", file))
		perftest.NoWarnings(t, "perf script", sr)
		perftest.CheckOutput(t, method.String(), sr.Stdout, p, true)
	}
}
