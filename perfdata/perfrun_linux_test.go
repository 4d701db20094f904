package perfdata

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
)

// perfRun runs perf with stdin and returns stdout, failing on a non-zero
// exit or a complaint on stderr.
func perfRun(t *testing.T, stdin []byte, args ...string) string {
	t.Helper()
	cmd := exec.Command(testenv.Perf(t), args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("perf %v: %v (its input %s)\n%s", args, err, keepInput(stdin, args), stderr.String())
	}
	low := strings.ToLower(stderr.String())
	for _, bad := range []string{"warning", "error", "fail", "invalid", "unknown"} {
		if strings.Contains(low, bad) {
			t.Fatalf("perf %v: stderr says %q (its input %s):\n%s", args, bad, keepInput(stdin, args), stderr.String())
		}
	}
	return stdout.String()
}

// keepInput keeps what perf read, its stdin or its -i file, for a look
// after the test (testenv.Keep).
func keepInput(stdin []byte, args []string) string {
	for i := 1; i < len(args); i++ {
		if args[i-1] == "-i" && args[i] != "-" {
			return testenv.Keep(args[i])
		}
	}
	return testenv.KeepData("perf.data", stdin)
}
