package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synth-dev/synth/internal/testenv"
)

// startSpinners starts a new spin every 300 ms, each killed after 800 ms,
// until the test ends: processes that start, map their libraries and
// end while a recording switches files.
func startSpinners(t *testing.T, bin string) {
	t.Helper()
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var live []*exec.Cmd
		defer func() {
			for _, c := range live {
				c.Process.Kill()
				c.Wait()
			}
		}()
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			c := exec.Command(bin)
			c.SysProcAttr = dieWithTest()
			if c.Start() == nil {
				live = append(live, c)
				time.AfterFunc(800*time.Millisecond, func() { c.Process.Kill() })
			}
			select {
			case <-quit:
				return
			case <-tick.C:
			}
		}
	}()
	t.Cleanup(func() { close(quit); <-done })
}

var wroteRE = regexp.MustCompile(`(?m)^synth: wrote (\S+)$`)

// synth record --switch-output=1s while processes start: every file is
// complete on its own, its name is perf's, and perf report of any one
// of them attributes the spinners' samples to their binary and library,
// processes started in an earlier file included; the files' DSOs go
// into the build-ID cache.
func TestRecordSwitchOutput(t *testing.T) {
	testenv.Root(t)
	perf := testenv.Perf(t)
	spin := buildSpin(t)
	startSpinners(t, spin)
	dir := t.TempDir()
	out := filepath.Join(dir, "perf.data")
	os.WriteFile(out, []byte("an earlier recording"), 0o600)
	home := filepath.Join(dir, "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(synthBin, "record", "-a", "-F", "499", "--switch-output=1s", "-o", out)
	cmd.Env = append(os.Environ(), "HOME="+home)
	r := interruptAfter(t, 3500*time.Millisecond, cmd)
	checkRecordSummary(t, r)
	// Each file fills the build-ID cache as perf record's switch does:
	// spin has samples in every one.
	id := hexBuildID(t, spin)
	if _, err := os.Lstat(filepath.Join(home, ".debug", ".build-id", id[:2], id[2:])); err != nil {
		t.Errorf("spin (build ID %s) is not in the build-ID cache after --switch-output: %v", id, err)
	}
	if b, err := os.ReadFile(out + ".old"); string(b) != "an earlier recording" {
		t.Errorf("the earlier perf.data is not kept as perf.data.old: %q, %v", b, err)
	}
	var files []string
	for _, m := range wroteRE.FindAllStringSubmatch(r.stderr, -1) {
		files = append(files, m[1])
	}
	if len(files) < 3 {
		t.Fatalf("%d files written, want 3 or more:\n%s", len(files), r.stderr)
	}
	nameRE := regexp.MustCompile(`^` + regexp.QuoteMeta(out) + `\.\d{16}$`)
	for _, f := range files {
		if !nameRE.MatchString(f) {
			t.Errorf("file %s: not named as perf names them (perf.data.YYYYmmddHHMMSScc)", f)
		}
		checkSpinAttribution(t, perf, f)
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("%s is left: the last file was not renamed", out)
	}
}

// checkSpinAttribution checks that perf script of file alone puts
// >= 99% of the user-space samples of the spin processes in spin or
// libspin.so (in a file with enough of them to tell), and none in
// [unknown], not even of a spin that exited or started during the
// switch. Their samples in the kernel, as they exec, fault their pages
// in and exit, are the kernel's.
func checkSpinAttribution(t *testing.T, perf, file string) {
	t.Helper()
	cmd := exec.Command(perf, "script", "-i", file, "-F", "comm,pid,ip,dso")
	cmd.Env = perfEnv(t)
	r := runCmd(t, cmd)
	if r.code != 0 {
		t.Fatalf("perf script -i %s: exit %d: %s", file, r.code, r.stderr)
	}
	var ours, attributed, kernel int
	others := map[string]int{}
	for _, line := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || f[0] != "spin" {
			continue
		}
		switch dso := filepath.Base(strings.Trim(f[len(f)-1], "()")); dso {
		case "[kernel.kallsyms]":
			kernel++
		case "spin", "libspin.so":
			ours++
			attributed++
		default:
			ours++
			others[dso]++
			if dso == "[unknown]" {
				t.Errorf("%s: a sample of spin %s in [unknown]", file, f[1])
			}
		}
	}
	if ours >= 200 && attributed*100 < ours*99 {
		t.Errorf("%s: %d of %d user samples of spin in its binary or library, want 99%%; others: %v", file, attributed, ours, others)
	}
	if t.Failed() {
		if keep := os.Getenv("SYNTH_KEEP_FAILED"); keep != "" {
			exec.Command("sh", "-c", "cp "+filepath.Dir(file)+"/perf.data.* "+keep).Run()
		}
	}
	t.Logf("%s: %d of %d user samples of spin in its binary or library; others: %v; %d in the kernel",
		file, attributed, ours, others, kernel)
}

// --switch-max-files keeps the newest files; a signal switches on
// SIGUSR2.
func TestRecordSwitchMaxFiles(t *testing.T) {
	testenv.Root(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "perf.data")
	cmd := exec.Command(synthBin, "record", "-F", "99", "--switch-output", "--switch-max-files", "2", "-o", out, "--", "sleep", "3")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for range 4 {
		time.Sleep(500 * time.Millisecond)
		cmd.Process.Signal(syscall.SIGUSR2)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("synth record: %v: %s", err, stderr.String())
		}
	case <-time.After(endBound + 3*time.Second):
		cmd.Process.Kill()
		t.Fatal("synth record did not end")
	}
	wrote := wroteRE.FindAllStringSubmatch(stderr.String(), -1)
	left, _ := filepath.Glob(out + ".*")
	if len(wrote) != 5 || len(left) != 2 || left[1] != wrote[4][1] || left[0] != wrote[3][1] {
		t.Errorf("wrote %d files, left %v, want the last 2:\n%s", len(wrote), left, stderr.String())
	}
}
