package testproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/synth-dev/synth/internal/testenv"
)

// StartStorm compiles testdata/storm/storm.c and runs it with args
// ("fork": children that exit at once, as fast as it can; "map N": N
// threads that map, split and unmap executable memory) until the test
// ends: load that makes the kernel report many live records. It returns
// the storm's pid.
func StartStorm(t testing.TB, args ...string) int {
	t.Helper()
	_, err := exec.LookPath("gcc")
	testenv.Need(t, err == nil, "gcc")
	src := testenv.Testdata(t, "storm", "storm.c")
	bin := filepath.Join(t.TempDir(), "storm")
	if out, err := exec.Command("gcc", "-O1", "-pthread", "-o", bin, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc storm.c: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stderr = os.Stderr
	// Dies with the test binary, even one killed by a timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s: %v", cmd, err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd.Process.Pid
}
