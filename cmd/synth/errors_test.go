package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
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
// naming what is missing, and no panic.
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

func TestNotRoot(t *testing.T) {
	testenv.Root(t)
	cmd := setpriv(t, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all")
	cmd.Args = append(cmd.Args, "--method", "bpf")
	oneLine(t, runCmd(t, cmd), "CAP_BPF", "CAP_PERFMON")
}

func TestMissingCapability(t *testing.T) {
	testenv.Root(t)
	// Root without CAP_BPF (and without CAP_SYS_ADMIN, which implies it).
	cmd := setpriv(t, "--inh-caps=-bpf,-sys_admin", "--bounding-set=-bpf,-sys_admin")
	cmd.Args = append(cmd.Args, "--method", "bpf")
	r := runCmd(t, cmd)
	oneLine(t, r, "CAP_BPF")
	if strings.Contains(r.stderr, "CAP_PERFMON") {
		t.Errorf("stderr names CAP_PERFMON, which the process has: %q", r.stderr)
	}
}

func TestOutputFull(t *testing.T) {
	testenv.Root(t)
	r := runCmd(t, exec.Command(synthBin, "dump", "-o", "/dev/full"))
	oneLine(t, r, "no space left on device")
}

func TestOutputClosedPipe(t *testing.T) {
	testenv.Root(t)
	rd, wr, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	rd.Close()
	cmd := exec.Command(synthBin, "dump")
	cmd.Stdout = wr
	r := runCmd(t, cmd)
	wr.Close()
	oneLine(t, r, "broken pipe")
}

// A requested process that has exited is an error naming it, as perf's
// "No such process"; one that exits while the dump runs is skipped.
func TestGoneProcess(t *testing.T) {
	testenv.Root(t)
	p := testproc.StartT(t, testproc.Spec{})
	gone := testproc.StartT(t, testproc.Spec{})
	gonePid := gone.Pid
	if err := gone.Stop(); err != nil {
		t.Fatal(err)
	}
	r := runCmd(t, exec.Command(synthBin, "dump", "--pid", strconv.Itoa(gonePid)+","+strconv.Itoa(p.Pid), "-o", os.DevNull))
	oneLine(t, r, "no such process: "+strconv.Itoa(gonePid))

	// Processes that come and go during whole-host dumps.
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

// Without privileges the auto method falls back to /proc, and says how
// many processes it could not read instead of passing their absence off
// as the host's state.
func TestUnprivilegedWarns(t *testing.T) {
	testenv.Root(t)
	r := runCmd(t, setpriv(t, "--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all"))
	m := regexp.MustCompile(`synth: warning: (\d+) of (\d+) processes' mappings could not be read \(permission denied\)`).FindStringSubmatch(r.stderr)
	if r.code != 0 || m == nil || m[1] == "0" {
		t.Errorf("exit %d, stderr %q; want exit 0 and a warning counting pid 1 at least", r.code, r.stderr)
	}
}
