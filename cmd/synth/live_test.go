package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/perftest"
	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
)

// synth dump runs on a session: while processes keep mapping new files,
// each dump reports every mapping once, either synthesized or live, and
// the unchanged process's mappings exactly as /proc lists them.
func TestDumpUnderChurn(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	stable := testproc.StartT(t, testproc.Spec{DataFile: true, Threads: []string{"stable"}})
	dir := t.TempDir()
	for range 3 {
		testproc.StartT(t, testproc.Spec{Dir: dir, Churn: true})
	}
	live := 0
	for i := range 5 {
		file := filepath.Join(t.TempDir(), "perf.data")
		r := runCmd(t, exec.Command(synthBin, "dump", "--data", "-o", file))
		if r.code != 0 {
			t.Fatalf("synth dump: exit %d: %s", r.code, r.stderr)
		}
		sum := parseSummary(t, r.stderr)
		if !sum.hasLiveLine || sum.lost != 0 {
			t.Fatalf("summary %+v", sum)
		}
		live += sum.live
		script := exec.Command(perf, "script", "--show-mmap-events", "--show-task-events", "-i", file)
		script.Env = perfEnv(t)
		sr := runCmd(t, script)
		noWarnings(t, "perf script", sr)
		seen := map[string]int{}
		for _, line := range strings.Split(sr.stdout, "\n") {
			m := perftest.MMAP2RE.FindStringSubmatch(line)
			if m == nil || !strings.Contains(m[14], "/"+testproc.ChurnPrefix) {
				continue
			}
			// pid, start, length, offset, protection and file
			k := strings.Join([]string{m[1], m[3], m[4], m[5], m[10] + m[11] + m[12],
				strings.TrimSuffix(m[14], " (deleted)")}, " ")
			if seen[k]++; seen[k] == 2 {
				t.Errorf("dump %d: reported twice: %s", i, k)
			}
		}
		if len(seen) == 0 {
			t.Errorf("dump %d: no churn mappings", i)
		}
		perftest.CheckOutput(t, "perf script", sr.stdout, stable, true)
	}
	if live == 0 {
		t.Error("no live records in five dumps under churn")
	}
}
