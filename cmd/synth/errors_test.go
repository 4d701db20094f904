package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/synth-dev/synth/internal/testenv"
	"github.com/synth-dev/synth/internal/testproc"
)

func setpriv(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	path, err := exec.LookPath("setpriv")
	testenv.Need(t, err == nil, "setpriv (util-linux) is not installed")
	return exec.Command(path, append(args, "--", synthBin, "dump", "-o", os.DevNull)...)
}

// oneLine checks that a failure is exit status 1 with one line on stderr
// naming what went wrong, and no panic.
func oneLine(t *testing.T, r result, want ...string) {
	t.Helper()
	if r.code != exitError {
		t.Errorf("exit status %d, want %d; stderr %q", r.code, exitError, r.stderr)
	}
	if strings.Count(r.stderr, "\n") != 1 || strings.Contains(r.stderr, "panic") {
		t.Errorf("stderr is not one line: %q", r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr %q does not name %q", r.stderr, w)
		}
	}
}

// A process that exits while a whole-host dump runs is skipped: the
// dump succeeds. (A requested process that is not there is an error:
// testdata/script/targets.txtar.)
func TestGoneProcess(t *testing.T) {
	testenv.Root(t)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			exec.Command("/bin/true").Run()
		}
	}()
	for range 5 {
		r := runCmd(t, exec.Command(synthBin, "dump", "--data", "-o", os.DevNull))
		if r.code != 0 {
			t.Errorf("dump during process churn: exit %d: %s", r.code, r.stderr)
		}
	}
	close(stop)
	<-done
}

// A disk that fills up while the dump writes to a file: exit 1 naming
// the error, and a perf.data that perf reads, holding the whole records
// written before it.
func TestOutputDiskFull(t *testing.T) {
	testenv.Root(t)
	testproc.StartT(t, testproc.Spec{ManyVMAs: 5000}) // more records than the disk holds
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=128k"); err != nil {
		t.Fatalf("mount a small tmpfs: %v", err)
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	out := filepath.Join(dir, "perf.data")
	r := runCmd(t, exec.Command(synthBin, "dump", "--data", "-o", out))
	oneLine(t, r, "no space left on device")
	perf := testenv.Perf(t)
	cmd := exec.Command(perf, "script", "-i", out, "--show-mmap-events", "--show-task-events")
	cmd.Env = perfEnv(t)
	sr := runCmd(t, cmd)
	if sr.code != 0 || strings.Count(sr.stdout, "PERF_RECORD_MMAP2") < 100 {
		t.Errorf("perf script: exit %d, %d MMAP2 records; stderr %q", sr.code,
			strings.Count(sr.stdout, "PERF_RECORD_MMAP2"), sr.stderr)
	}
	noWarnings(t, "perf script", sr)
}
