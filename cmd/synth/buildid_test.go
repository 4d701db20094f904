package main

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
)

// synth dump's summary says, on a line of its own, how many mappings got
// a build ID and where the build IDs came from, numbers that agree with
// one another (with --no-buildid there is no such line:
// testdata/script/output.txtar). (What perf reads of the build IDs is
// package synth's TestBuildIDsPerf and TestNoBuildID.)
func TestDumpBuildIDLine(t *testing.T) {
	testenv.Root(t)
	dir := t.TempDir()
	r := runCmd(t, exec.Command(synthBin, "dump", "--data", "-o", filepath.Join(dir, "perf.data")))
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	sum := parseSummary(t, r.stderr)
	if !sum.hasBuildIDLine || sum.buildIDs == 0 || sum.buildIDs > sum.fileMappings || sum.cached+sum.idsRead == 0 {
		t.Errorf("summary %+v", sum)
	}
}
