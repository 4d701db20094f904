package perftest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
)

// Result is how a command ended.
type Result struct {
	Code           int
	Stdout, Stderr string
}

// Run runs cmd, its stdout captured unless cmd.Stdout is set, and
// returns how it ended; a command that cannot start fails t. The input
// of a perf command (-i FILE) is kept when t fails (see keepPerfInput).
func Run(t testing.TB, cmd *exec.Cmd) Result {
	t.Helper()
	keepPerfInput(t, cmd)
	var stdout, stderr bytes.Buffer
	if cmd.Stdout == nil {
		cmd.Stdout = &stdout
	}
	cmd.Stderr = &stderr
	err := cmd.Run()
	r := Result{Stdout: stdout.String(), Stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		r.Code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	return r
}

// keepPerfInput has the file a perf command reads (-i FILE) kept when
// the test fails, with its place in the test's log (testenv.Keep): the
// test's temporary directory is gone by the time one looks.
func keepPerfInput(t testing.TB, cmd *exec.Cmd) {
	if filepath.Base(cmd.Path) != "perf" {
		return
	}
	for i, a := range cmd.Args[:len(cmd.Args)-1] {
		if in := cmd.Args[i+1]; (a == "-i" || a == "--input") && in != "-" {
			if _, err := os.Stat(in); err == nil {
				testenv.KeepOnFailure(t, in)
			}
		}
	}
}

// Env is the environment perf runs in: away from the user's ~/.debug
// and config, its pager cat.
func Env(t testing.TB) []string {
	return append(os.Environ(), "HOME="+t.TempDir(), "PERF_PAGER=cat")
}

// Command is perf with args, in Env.
func Command(t testing.TB, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(testenv.Perf(t), args...)
	cmd.Env = Env(t)
	return cmd
}

// RecordHost writes perf's own recording of the host's state to path:
// perf record -a -e dummy -k CLOCK_MONOTONIC, with extra flags.
func RecordHost(t testing.TB, path string, extra ...string) {
	t.Helper()
	args := append([]string{"record", "-q", "-k", "CLOCK_MONOTONIC", "-e", "dummy", "-a", "-o", path}, extra...)
	if r := Run(t, Command(t, append(args, "--", "true")...)); r.Code != 0 {
		t.Fatalf("perf record: exit %d: %s", r.Code, r.Stderr)
	}
	Ungrow(t, path)
}

var lostChunksRE = regexp.MustCompile(`Warning:\s*Processed \d+ events and lost \d+ chunks!\s*Check IO/CPU overload!\s*`)

// NoWarnings fails t when perf's stderr holds anything that looks like
// a complaint.
func NoWarnings(t testing.TB, what string, r Result) {
	t.Helper()
	if r.Code != 0 {
		t.Fatalf("%s: exit status %d\n%s", what, r.Code, r.Stderr)
	}
	// perf's note of PERF_RECORD_LOST records in the file: on a busy
	// host the kernel drops live records, and synth marks them as perf
	// does. Anything else is a complaint.
	low := strings.ToLower(lostChunksRE.ReplaceAllString(r.Stderr, ""))
	for _, bad := range []string{"warning", "error", "fail", "invalid", "unknown", "bad", "corrupt"} {
		if strings.Contains(low, bad) {
			t.Fatalf("%s: stderr says %q:\n%s", what, bad, r.Stderr)
		}
	}
}
